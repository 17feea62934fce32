"""The shape of an intermediate tensor, for hover: `h: real[1, 8]`, not the checker's `real[]`.

The type checker knows a tensor's dtype and rank but no extents: those come from binding attributes and
inputs, which only composition does. So hover composes the statement that assigns the tensor and the
earlier ones it reads from, nothing else: that statement's shape is known even when another statement has an
error (a file being edited). Outputs, @update and @quantize are left out of that partial definition (an
output it does not assign yet is not an error here). A graph is composed as `sknd check` composes it: for
its default attributes, an int attribute without one a symbol; an operator's body for symbolic input
extents (skriptnd.check.graph.compose_body), so its shapes are expressions (`real[n, floor(h/2 - 3/2) + 1]`).
Where that cannot be composed (an attribute of another type without a default, an error in a statement
read, a shape the symbolic sample cannot follow), there is no shape to show and hover keeps the checker's
type.
"""

from __future__ import annotations

from dataclasses import replace

from skriptnd.check.graph import compose_body, symbolic_attribs
from skriptnd.compose.composer import Composer
from skriptnd.compose.ir import Tensor
from skriptnd.diagnostics import DiagnosticError
from skriptnd.semantics.modules import LoadedModule, Program
from skriptnd.semantics.scope import Kind, Symbol
from skriptnd.syntax import ast

__all__ = ["composed_type"]

_LEFT_OUT = ("output", "update", "quantize")


def composed_type(program: Program, module: LoadedModule | None, definition: ast.Definition,
                  sym: Symbol) -> str | None:
    """`real[1, 8]` for an intermediate tensor assigned at the top of a graph's or operator's @compose, or None
    (not composable that far). Kept in the symbol's cache: a document's scopes are rebuilt on each edit."""
    if sym.kind is not Kind.TENSOR or module is None:
        return None
    if "composed_type" not in sym.cache:
        sym.cache["composed_type"] = _compose_upto(program, module, definition, sym)
    found = sym.cache["composed_type"]
    return found if isinstance(found, str) else None


def _compose_upto(program: Program, module: LoadedModule, definition: ast.Definition, sym: Symbol) -> str | None:
    blocks: list[ast.Block] = []
    statement_found = False
    for block in definition.blocks:
        if isinstance(block, ast.ComposeBlock) and block.kind == "compose" and not statement_found:
            upto = _statement_index(block, sym)
            if upto is not None:
                statement_found = True
                blocks.append(replace(block, items=_slice(block.items, upto)))
                continue
            blocks.append(block)
        elif not _left_out(block):
            blocks.append(block)
    if not statement_found:
        return None
    partial = replace(definition, blocks=tuple(blocks))
    if definition.kind == "graph":
        attribs = symbolic_attribs(definition)  # {} with every default; symbols for an int without one
        if attribs is None:
            return None
        try:
            graph = Composer(program, sampling=True).compose_definition(module, partial, attribs)
        except DiagnosticError:
            return None
        except Exception:  # noqa: BLE001 - a symbolic sample the composer cannot follow, as in check_graph
            if not attribs:
                raise
            return None
    else:  # an operator: its input extents and attributes without defaults are symbols
        found = compose_body(program, module, partial)
        if found is None:
            return None
        graph = found
    tensors = [t for t in graph.tensors if t.name == sym.name]
    return _type_text(tensors[-1]) if tensors else None


def _left_out(block: ast.Block) -> bool:
    if isinstance(block, ast.ParamBlock):
        return block.kind == "output"
    if isinstance(block, ast.ComposeBlock):
        return block.kind in _LEFT_OUT
    return isinstance(block, ast.QuantizeBlock)


def _statement_index(block: ast.ComposeBlock, sym: Symbol) -> int | None:
    """The index of the top-level statement that declares `sym` (its name among the statement's targets)."""
    for i, stmt in enumerate(block.items):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.LName) and t.name == sym.name and t.span == sym.span
                                                for t in stmt.targets):
            return i
    return None


def _slice(stmts: tuple[ast.Stmt, ...], upto: int) -> tuple[ast.Stmt, ...]:
    """Statement `upto` and the earlier ones it depends on (that assign a name it reads, transitively): an
    error in an unrelated earlier statement does not hide this one's shape."""
    needed = _reads(stmts[upto])
    kept = [stmts[upto]]
    for stmt in reversed(stmts[:upto]):
        if _writes(stmt) & needed:
            kept.append(stmt)
            needed |= _reads(stmt)
    return tuple(reversed(kept))


def _reads(stmt: ast.Stmt) -> set[str]:
    return {n.id for n in stmt.walk() if isinstance(n, ast.Name)}


def _writes(stmt: ast.Stmt) -> set[str]:
    return {n.name for n in stmt.walk() if isinstance(n, ast.LName)} if isinstance(stmt, ast.Assign) else set()


def _type_text(t: Tensor) -> str:
    """`real[1, 8]`; a dynamic extent by its symbol (`real[s, 8]`), else `?`."""
    symbolic = t.symbolic or (None,) * t.rank
    dims = [str(d) if d is not None else str(s) if s is not None else "?"
            for d, s in zip(t.shape, symbolic, strict=False)]
    return f"{t.dtype}[{', '.join(dims)}]"
