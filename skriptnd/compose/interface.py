"""The interface of a composed graph (spec §2.6.1, §3.1): its declared inputs and outputs.

:class:`GraphInterface` is the part of :class:`skriptnd.compose.composer.Composer` that makes tensors of a
graph's declared inputs (packs, dynamic extents as symbols) and checks its outputs against their declared
types and shapes; the composer derives from it and provides what it calls back (``_new_tensor``,
``_eval``): a seam of the composer in its own module, as :mod:`skriptnd.compose.control` is.
"""

from __future__ import annotations

from typing import Any

from skriptnd.compose.frame import NUMPY_DTYPES, _error, _Frame, _params
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import DiagnosticError, Note
from skriptnd.semantics.binding import Binder
from skriptnd.semantics.evaluate import EvalError, evaluate, free_names
from skriptnd.semantics.signature import Signature
from skriptnd.syntax import ast
from skriptnd.syntax.printer import format_type


class GraphInterface:
    """A graph's declared inputs and outputs; a base of Composer (see the module's docstring)."""

    dynamic_symbols: set[Any]

    def _output_pack(self, graph: Graph, binder: Binder, decl: ast.ParamDecl, items: list[Tensor],
                     dynamic: set[str]) -> None:
        """`ys: real[n]..(k)`: the graph outputs `ys.0` ... `ys.{k-1}`. A length given by a dynamic extent
        (`..(s)` with `s|5`) is composed at its bound: at run time the pack has its actual length, and the
        items beyond it are not among the results (Graph.output_packs says which outputs form the pack)."""
        assert decl.type.pack is not None
        length = decl.type.pack.length
        if length is not None:
            expected = binder.eval(length, f"the length of output pack '{decl.name}'")
            if isinstance(expected, int) and not isinstance(expected, bool) and int(expected) != len(items) \
                    and not (hasattr(expected, "expr") and len(items) <= int(expected)):
                raise _error("E0406", f"output pack '{decl.name}' is declared with {expected} items but the "
                             f"composition gives {len(items)}", decl.span)
        graph.output_packs[decl.name] = (len(graph.outputs), len(items))
        for j, value in enumerate(items):
            self._check_declared_dtype(binder, decl, value)
            if decl.type.shape is not None:
                self._check_declared_shape(binder, decl, value, dynamic, item=j)
            if value.kind == "intermediate":
                value.kind = "output"
            if value.span is None:
                value.span = decl.span
            graph.outputs.append(value)
            graph.output_names.append(f"{decl.name}.{j}")

    def _graph_inputs(self, frame: _Frame, binder: Binder, graph: Graph) -> set[str]:
        """Graph inputs get their shapes from attributes; `s|10` and `~|10` are dynamic (§2.6.1)."""
        dynamic: set[str] = set()
        for decl in _params(frame.definition, "input"):
            if decl.type.pack is not None:
                frame.tensors[decl.name] = items = self._graph_input_pack(frame, binder, decl, dynamic)
                graph.inputs.extend(items)
                continue
            shape, bounds = self._declared_shape(binder, decl, dynamic)
            tensor = self._new_tensor(frame, decl.name, binder.resolve_dtype(decl.type.name), shape, "input",
                                      bounds=bounds)
            tensor.span = decl.span
            tensor.declared = format_type(decl.type)
            if tensor.dynamic:
                tensor.symbolic = self._input_symbols(decl, shape)
            frame.tensors[decl.name] = tensor
            graph.inputs.append(tensor)
        return dynamic

    def _extent_symbols(self, binder: Binder, definition: ast.Definition, dynamic: set[str]) -> None:
        """A dynamic extent of a graph input (`h` in `real[h|100, w|100]`, §2.6.1) is a symbol of the
        body: `@compose` attributes, asserts and declared output shapes may use it. It is bound to a
        SymInt whose hint is its upper bound (what composition sizes buffers by) and whose expression is
        the symbol itself; the executor gives it the actual extent when the graph runs (§3.1)."""
        if not dynamic:
            return
        from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
            SymInt,
            symbol,
        )

        for decl in _params(definition, "input"):
            for item in decl.type.shape or ():
                name = item.value.id if isinstance(item.value, ast.Name) else None
                if name in dynamic and name not in binder.env and item.bound is not None and item.pack is None:
                    bound = binder.eval(item.bound, f"the upper bound of input '{decl.name}'")
                    binder.env[name] = SymInt(int(bound), symbol(name))
                    self.dynamic_symbols.add(symbol(name))

    def _graph_input_pack(self, frame: _Frame, binder: Binder, decl: ast.ParamDecl, dynamic: set[str]) -> list[Tensor]:
        """`xs: real[n]..(k)`: k input tensors `xs.0` ... A dynamic length with a bound,
        `..(s|5)`, is composed at its bound (the IR has no pack of dynamic length): `s` is 5."""
        pack = decl.type.pack
        assert pack is not None
        if pack.length is None:
            raise _error("E0406", f"graph input pack '{decl.name}' needs a length, as in '{decl.name}: real[n]..(k)'",
                         decl.span)
        length = pack.length
        if pack.bound is not None and isinstance(length, ast.Name) and length.id not in binder.env:
            binder.env[length.id] = self._eval(frame, pack.bound, f"the bound of pack '{decl.name}'")
        count = binder.eval(length, f"the length of input pack '{decl.name}'")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _error("E0406", f"the length of graph input pack '{decl.name}' must be a non-negative int, "
                         f"not {count!r}", decl.span)
        items: list[Tensor] = []
        for j in range(count):
            shape, bounds = self._declared_shape(binder, decl, dynamic, item=j)
            tensor = self._new_tensor(frame, f"{decl.name}.{j}", binder.resolve_dtype(decl.type.name), shape,
                                      "input", bounds=bounds)
            tensor.span = decl.span
            tensor.declared = format_type(decl.type)
            if tensor.dynamic:  # every item's `c` of `real[4, c|2]..(5)` is the one extent `c`
                tensor.symbolic = self._input_symbols(decl, shape, tensor.name)
            items.append(tensor)
        return items

    def _input_symbols(self, decl: ast.ParamDecl, shape: tuple[int | None, ...], name: str | None = None
                       ) -> tuple[Any, ...]:
        """Names of a graph input's dynamic extents: the shape symbol (`s` in `real[s|10]`), else `x_0` (`name`:
        the tensor's, `xs.1` for an item of a pack)."""
        from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
            symbol,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        )

        names = [i.value.id if isinstance(i.value, ast.Name) and i.pack is None else None
                 for i in decl.type.shape or ()]
        if len(names) != len(shape):
            names = [None] * len(shape)
        return tuple(None if d is not None else symbol(n or f"{name or decl.name}_{k}")
                     for k, (d, n) in enumerate(zip(shape, names, strict=True)))

    def _declared_shape(self, binder: Binder, decl: ast.ParamDecl, dynamic: set[str],
                        item: int | None = None) -> tuple[tuple[int | None, ...], tuple[int | None, ...] | None]:
        items: list[ast.ShapeItem] = []
        for extent in decl.type.shape or ():
            name = extent.value.id if isinstance(extent.value, ast.Name) else None
            if name is not None and (name in dynamic or (name not in binder.env and extent.bound is not None)):
                dynamic.add(name)
                items.append(ast.ShapeItem(value=None, bound=extent.bound, pack=extent.pack, span=extent.span))
            else:
                items.append(extent)
        fixed = ast.ParamDecl(name=decl.name, type=ast.TypeSpec(name=decl.type.name, shape=tuple(items),
                                                                span=decl.type.span), span=decl.span)
        shape, bounds = binder.output_shape(fixed, item)
        return shape, (bounds if any(b is not None for b in bounds) else None)

    def _check_declared_dtype(self, binder: Binder, decl: ast.ParamDecl, value: Tensor) -> None:
        """A graph output gets exactly its declared type: no silent cast (an `int` output fed a
        `real` would otherwise be produced, and exported, as f32)."""
        declared = binder.resolve_dtype(decl.type.name)
        if declared in NUMPY_DTYPES and value.dtype != declared:
            where = value.span if value.span is not None and value.kind == "intermediate" else None
            notes = (Note("the value comes from here", where),) if where is not None else ()
            raise _error("E0610", f"output '{decl.name}' is declared '{declared}' but receives a '{value.dtype}' "
                         "tensor", decl.span, notes=notes,
                         hint=f"declare it '{value.dtype}', or convert the value explicitly "
                         f"(layout.cast<{declared}>)")

    def _check_declared_shape(self, binder: Binder, decl: ast.ParamDecl, value: Tensor, dynamic: set[str],
                              item: int | None = None) -> None:
        if any(i.value is None for i in decl.type.shape or ()):
            return
        try:
            shape, _ = self._declared_shape(binder, decl, dynamic, item)
        except DiagnosticError:
            return
        if len(shape) != len(value.shape) or any(a is not None and b is not None and a != b
                                                for a, b in zip(shape, value.shape, strict=False)):
            raise _error("E0403", f"output '{decl.name}' is declared with shape {list(shape)} but the composition "
                         f"produces {list(value.shape)}", decl.span)
        if dynamic and (value.symbolic is not None or value.dynamic):
            self._check_dynamic_extents(binder, decl, value, dynamic)

    def _check_dynamic_extents(self, binder: Binder, decl: ast.ParamDecl, value: Tensor, dynamic: set[str]) -> None:
        """Dynamic extents of a declared output (`real[1, s]`) must equal what the composition
        computes from the dynamic input extents (`floor(s/2)`), symbolically."""
        import sympy

        from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
            SymInt,
            expression,
            symbol,
            vanishes,
        )

        env = dict(binder.env)
        env.update({name: SymInt(1, symbol(name)) for name in dynamic})
        declared: list[Any] = []
        for item in decl.type.shape or ():
            if item.value is None or item.pack is not None or not (free_names(item.value) & dynamic):
                declared.append(None)
                continue
            try:
                declared.append(expression(evaluate(item.value, env, binder.dtypes)))
            except (EvalError, TypeError):
                declared.append(None)
        actual = [e if e is not None else (sympy.Integer(d) if d is not None else None)
                  for e, d in zip(value.symbolic or (None,) * value.rank, value.shape, strict=False)]
        # an extent declared from the dynamic input extents (`n`) must be that: a result whose extent is
        # dynamic but not known as an expression in them (the branches of an `if` disagree) is not
        if any(d is not None and (a is None or not vanishes(d - a)) for d, a in zip(declared, actual, strict=False)):
            shown = [str(a) if a is not None else "?" for a in actual]
            raise _error("E0403", f"output '{decl.name}' is declared with shape {format_type(decl.type)} but the "
                         f"composition produces [{', '.join(shown)}]", decl.span,
                         hint=_open_extents_hint(value) if any(a is None for a in actual) else None)


def _open_extents_hint(value: Tensor) -> str:
    """How to declare an output whose dynamic extents are not known expressions: `~|bound` for those."""
    bounds = value.bounds or (None,) * value.rank
    symbolic = value.symbolic or (None,) * value.rank
    dims = [str(d) if d is not None else str(e) if e is not None else f"~|{b}" if b is not None else "~"
            for d, b, e in zip(value.shape, bounds, symbolic, strict=True)]
    return f"the composition cannot tell these extents in advance; declare them open: {value.dtype}[{', '.join(dims)}]"


def _dynamic_asserts(sig: Signature, dynamic: set[str]) -> list[ast.Assertion]:
    """The graph's asserts on its dynamic extents (`h <= w` for `real[h|100, w|100]`), directly or through
    @using symbols computed from them: their truth is known only at run time."""
    if not dynamic:
        return []
    depends = set(dynamic)
    for u in sig.usings:
        if free_names(u.value) & depends:
            depends.update(_target_names(u.target))
    return [a for a in sig.asserts if free_names(a.condition) & depends]


def _target_names(target: ast.LValue) -> list[str]:
    if isinstance(target, ast.LName):
        return [target.name]
    if isinstance(target, ast.LList | ast.LZip):
        return [n for it in target.items for n in _target_names(it)]
    return []
