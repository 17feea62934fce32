"""The module-level checks of a program (spec §2.10, §2.14, §2.15): duplicate definitions,
misplaced or missing graphs, and invocations (in @compose/@update) or quantization operators
(@quantize) whose operator, module, attributes or argument counts do not fit.

Apart from loading (semantics.modules), which builds the `Program` these checks read: the
language server and `sknd check` load once and check module by module.
"""

from __future__ import annotations

from collections.abc import Iterator

from skriptnd.diagnostics import Diagnostic, Note
from skriptnd.semantics.builtins import BUILTIN_FUNCTIONS
from skriptnd.semantics.modules import LoadedModule, Program, did_you_mean_hint
from skriptnd.source import Span
from skriptnd.syntax import ast

#: Blocks whose declarations a @quantize entry may name.
_TENSOR_BLOCKS = ("input", "output", "variable", "constant")

__all__ = ["check_modules", "invocation_sites"]


def _name_span(module: LoadedModule, name: str, within: Span, skip: int = 0) -> Span:
    index = module.text_index()
    found = index.find_name(name, within, skip) if index is not None else None
    return found or within


def _callee_span(module: LoadedModule, call: ast.Call) -> Span:
    skip = 0
    if call.label is not None:
        index = module.text_index()
        if index is not None:
            start = index.offset(call.span.line, call.span.col)
            colon = index.masked.find(":", start)
            skip = colon - start + 1 if colon >= 0 else 0
    return _name_span(module, call.callee, call.span, skip)


# ---------------------------------------------------------------------------- invocations


def _dtype_names(definition: ast.Definition) -> set[str]:
    return {d.name for b in definition.blocks if isinstance(b, ast.DtypeBlock) for d in b.items}


def _params(definition: ast.Definition, kind: str) -> list[ast.ParamDecl]:
    return [p for b in definition.blocks if isinstance(b, ast.ParamBlock) and b.kind == kind for p in b.items]


def _top_calls(expr: ast.Expr | None) -> Iterator[ast.Call]:
    """Calls in invocation position: the top of a right-hand side, labelled calls, branches and
    conditions of `if`, loop bodies and conditions, and (recursively) the statements of blocks."""
    if expr is None:
        return
    if isinstance(expr, ast.Call):
        yield expr
    elif isinstance(expr, ast.BlockExpr):
        yield from _stmt_calls(expr.stmts)
    elif isinstance(expr, ast.IfExpr):
        for cond, then in expr.branches:
            yield from _top_calls(cond)
            yield from _top_calls(then)
        yield from _top_calls(expr.orelse)
    elif isinstance(expr, ast.LoopExpr):
        yield from _top_calls(expr.pre_cond)
        yield from _top_calls(expr.body)
        yield from _top_calls(expr.post_cond)


def _stmt_calls(stmts: tuple[ast.Stmt, ...]) -> Iterator[ast.Call]:
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            yield from _top_calls(stmt.value)


def _is_parenthesised(module: LoadedModule, call: ast.Call) -> bool:
    index = module.text_index()
    return index is not None and index.char_before(call.span) == "("


def invocation_sites(module: LoadedModule, definition: ast.Definition) -> Iterator[ast.Call]:
    """The operator invocations of a definition's @compose and @update blocks (§2.10, §2.4).

    A Call in invocation position is an invocation unless it is parenthesised (`(abs(x))`
    forces the built-in function or expression reading) or names a generic type of the
    definition (`T(x)` is a cast). Calls inside ordinary expressions are never invocations."""
    dtypes = _dtype_names(definition)
    for block in definition.blocks:
        if not isinstance(block, ast.ComposeBlock):
            continue
        for call in _stmt_calls(block.items):
            if call.callee in dtypes or _is_parenthesised(module, call):
                continue
            yield call


# ---------------------------------------------------------------------------- checks


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class _Checker:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.diags: list[Diagnostic] = []

    def error(self, code: str, message: str, span: Span, *, hint: str | None = None,
              notes: tuple[Note, ...] = ()) -> None:
        self.diags.append(Diagnostic(code, message, span, notes=notes, hint=hint))

    # ------------------------------------------------------------ modules

    def module(self, module: LoadedModule) -> None:
        tree = module.ast
        if tree is None:
            return
        first: dict[str, ast.Definition] = {}
        for d in tree.definitions:
            prev = first.get(d.name)
            if prev is not None:
                self.error("E0211", f"duplicate definition of '{d.name}'", d.name_span,
                           notes=(Note(f"'{d.name}' is first defined here", prev.name_span),),
                           hint="rename one of them; operator names must be unique within a module")
            else:
                first[d.name] = d
            if d.kind == "graph" and module is not self.program.main:
                self.error("E0205", f"graph '{d.name}' in module '{module.name}', which is not the main module",
                           d.name_span, hint="only the main module may define graphs; imported modules "
                           "define operators (write 'operator' instead of 'graph')")
        for d in tree.definitions:
            self.definition(module, d)

    def main_has_graph(self) -> None:
        main = self.program.main
        if main is None or main.ast is None or not self.program.main_must_have_graph:
            return
        if not any(d.kind == "graph" for d in main.ast.definitions):
            path = main.source.path if main.source is not None else str(main.path)
            self.error("E0206", "the main module defines no graph", Span(path, 1, 1, 1, 2),
                       hint="the main module of a model folder must contain at least one 'graph' definition")

    # ------------------------------------------------------------ definitions

    def definition(self, module: LoadedModule, d: ast.Definition) -> None:
        for call in invocation_sites(module, d):
            self.invocation(module, call)
        for block in d.blocks:
            if isinstance(block, ast.QuantizeBlock):
                tensors = _tensor_names(d)
                for q in block.items:
                    self.quantization(module, q, tensors)

    def resolve(self, module: LoadedModule, name: str, span: Span,
                builtin: bool = False) -> tuple[LoadedModule, ast.Definition] | None:
        """Resolve an operator name, reporting E0203/E0204 at span when it does not resolve."""
        program = self.program
        found = program.lookup(name, module)
        if found.status == "ok":
            assert found.module is not None and found.definition is not None
            return found.module, found.definition
        if found.status == "broken_module":
            return None  # the module could not be read or parsed: reported with it
        if found.status == "not_imported":
            self.error("E0203", f"module '{found.module_name}' is not imported", span,
                       hint=f"add 'import {found.module_name};' at the top of the module")
        elif found.status == "unknown_module":
            candidates = {n for n in program.modules if n in module.imported_names or n == module.name}
            self.error("E0203", f"unknown module '{found.module_name}' in '{name}'", span,
                       hint=did_you_mean_hint(found.module_name or "", candidates))
        elif builtin and "." not in name:
            self.error("E0204", f"unknown operator '{name}'", span,
                       hint="wrap the expression in parentheses to call the built-in function, "
                       f"as in '({name}(...))'; without them it invokes an operator named '{name}'")
        else:
            self.error("E0204", f"unknown operator '{name}'", span,
                       hint=did_you_mean_hint(name, program.visible_operator_names(module)))
        return None

    def invocation(self, module: LoadedModule, call: ast.Call) -> None:
        span = _callee_span(module, call)
        target = self.resolve(module, call.callee, span, builtin=call.callee in BUILTIN_FUNCTIONS)
        if target is None:
            return
        _, callee = target
        self.attributes(module, call.callee, callee, call.attrs)
        self.type_args(call.callee, callee, call.type_args, span)
        inputs = _params(callee, "input")
        if len(call.args) > len(inputs):
            extra = call.args[len(inputs)]
            self.error("E0212", f"too many arguments for operator '{call.callee}': it takes "
                       f"{_plural(len(inputs), 'input')}, {len(call.args)} given", extra.span,
                       hint=_signature_hint(call.callee, inputs))

    def attributes(self, module: LoadedModule, name: str, callee: ast.Definition,
                   attrs: tuple[ast.AttrAssign, ...]) -> None:
        declared = [p.name for p in _params(callee, "attrib")]
        for a in attrs:
            if a.name not in declared:
                at = Span(a.span.file, a.span.line, a.span.col, a.span.line, a.span.col + len(a.name))
                hint = did_you_mean_hint(a.name, declared)
                if hint is None:
                    hint = (f"its attributes are {', '.join(declared)}" if declared
                            else f"'{name}' has no attributes")
                self.error("E0209", f"operator '{name}' has no attribute '{a.name}'", at, hint=hint)

    def type_args(self, name: str, callee: ast.Definition, type_args: tuple[str, ...], span: Span) -> None:
        declared = [d.name for b in callee.blocks if isinstance(b, ast.DtypeBlock) for d in b.items]
        if len(type_args) > len(declared):
            self.error("E0212", f"too many type arguments for operator '{name}': it declares "
                       f"{_plural(len(declared), 'generic type')}, {len(type_args)} given", span,
                       hint=f"its generic types are <{', '.join(declared)}>" if declared else
                       f"'{name}' is not generic; remove '<{', '.join(type_args)}>'")

    def quantization(self, module: LoadedModule, q: ast.Quantization, tensors: set[str]) -> None:
        head = q.tensor.split(".")[0]
        tensor_span = Span(q.span.file, q.span.line, q.span.col, q.span.line, q.span.col + len(q.tensor))
        if head not in tensors:
            self.error("E0201", f"unknown tensor '{head}' in @quantize", tensor_span,
                       hint=did_you_mean_hint(head, tensors)
                       or "name an input, output, variable, constant or intermediate tensor, or a label")
        op_span = _name_span(module, q.op, q.span, skip=len(q.tensor))
        target = self.resolve(module, q.op, op_span)
        if target is None:
            return
        _, op = target
        self.attributes(module, q.op, op, q.attrs)
        self.type_args(q.op, op, q.type_args, op_span)
        n_in, n_out = len(_params(op, "input")), len(_params(op, "output"))
        if (n_in, n_out) != (1, 1):
            self.error("E0212", f"quantization operator '{q.op}' must have exactly one input and one output; "
                       f"it has {_plural(n_in, 'input')} and {_plural(n_out, 'output')}", op_span)


def _signature_hint(name: str, inputs: list[ast.ParamDecl]) -> str:
    if not inputs:
        return f"'{name}' takes no inputs"
    return f"'{name}' takes ({', '.join(p.name for p in inputs)})"


def _lvalue_names(lv: ast.LValue) -> Iterator[str]:
    if isinstance(lv, ast.LName):
        yield lv.name
    elif isinstance(lv, ast.LList | ast.LZip):
        for item in lv.items:
            yield from _lvalue_names(item)


def _tensor_names(d: ast.Definition) -> set[str]:
    """Names a @quantize entry may start with: declared tensors, assigned tensors (at any block
    depth, including loop-local ones) and invocation labels."""
    names = {p.name for kind in _TENSOR_BLOCKS for p in _params(d, kind)}
    for block in d.blocks:
        if not isinstance(block, ast.ComposeBlock):
            continue
        for node in block.walk():
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(_lvalue_names(target))
            elif isinstance(node, ast.Call | ast.BlockExpr) and node.label is not None:
                names.add(node.label)
            elif isinstance(node, ast.Carried | ast.Scan):
                names.add(node.name)
    return names


def check_modules(program: Program, modules: list[LoadedModule] | None = None) -> list[Diagnostic]:
    """The module-level checks of `modules` (default: `program.checked_modules()`), and that a
    model folder's main module defines a graph."""
    checker = _Checker(program)
    for module in program.checked_modules() if modules is None else modules:
        checker.module(module)
    checker.main_has_graph()
    return checker.diags
