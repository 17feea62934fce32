"""Dynamic extents at run time (spec §2.6.1, §3.1): the values their symbols take, and attributes made concrete.

A graph input `x: real[h|100, w|100]` makes `h` and `w` symbols of the graph body (skriptnd.compose.composer):
an attribute computed from them (`layout.reshape{shape=[h, -1]}`) is composed as a SymInt whose int value is
only a sample (the bound). When the graph runs, the actual input shapes give each symbol its value
(`input_extents`, which also enforces the agreement that naming an extent twice declares: `x: real[n|10]`,
`y: real[n]` must have the same first extent), and `resolve` turns such an attribute into the concrete value
for this run before a kernel or a plan sees it. Nothing here imports sympy unless a graph has dynamic extents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.semantics.values import NO_UNIFORM, Pack
from skriptnd.source import NO_SPAN, Span

__all__ = ["UNKNOWN", "bind_extents", "extent_symbols", "input_extents", "is_symbolic", "resolve", "resolve_attribs", "symbolic_attribs"]

#: The value of each dynamic extent's symbol in one run (sympy Symbol -> int).
Extents = dict[Any, int]


def is_symbolic(value: object) -> bool:
    """Whether an attribute value holds a symbolic extent (a SymInt, also inside a pack or list)."""
    if isinstance(value, Pack | list | tuple):
        return any(is_symbolic(v) for v in value)
    return hasattr(value, "expr") and isinstance(value, int)


def symbolic_attribs(attribs: Mapping[str, object]) -> bool:
    """Whether any attribute of an operation depends on a dynamic extent (it must be resolved per run)."""
    return any(is_symbolic(v) for v in attribs.values())


def extent_symbols(t: Tensor) -> list[tuple[int, Any]]:
    """(dimension, symbol) for each dynamic extent of t that is one symbol (`h`, not `2*h`): the extents a
    tensor's actual shape gives values to. An extent the composition left unnamed is `<name>_<k>`, as
    skriptnd.compose.frame names it when a later operation reads it."""
    if not t.dynamic:
        return []
    from skriptnd.semantics.symbolic import symbol  # lazy: it imports sympy, only dynamic extents need it

    symbolic = t.symbolic or (None,) * t.rank
    found = []
    for k, (d, e) in enumerate(zip(t.shape, symbolic, strict=True)):
        if d is not None:
            continue
        if e is None:
            found.append((k, symbol(f"{t.name}_{k}")))
        elif getattr(e, "is_Symbol", False):
            found.append((k, e))
    return found


def bind_extents(tensors: Sequence[Tensor], shapes: Sequence[Sequence[int] | None], extents: Extents) -> None:
    """Give the symbols of tensors' dynamic extents the actual extents of these tensors: an operation's own
    arguments say best what an extent of theirs is now (in a loop body, in this iteration)."""
    for t, shape in zip(tensors, shapes, strict=False):
        if shape is None or len(shape) != t.rank:
            continue
        for k, sym in extent_symbols(t):
            extents[sym] = int(shape[k])


def input_extents(graph: Graph, shapes: Mapping[str, Sequence[int]]) -> Extents:
    """The value of every graph input's dynamic extent symbol in this run. An extent named in two inputs
    (`x: real[n|10]; y: real[n|10]`) must be the same in both (§2.6.1: an agreement constraint checked at run
    time): E0711 at the second input otherwise."""
    extents: Extents = {}
    seen: dict[Any, tuple[str, int]] = {}
    for t in graph.inputs:
        shape = shapes.get(t.name)
        if shape is None or len(shape) != t.rank:
            continue
        for k, sym in extent_symbols(t):
            value = int(shape[k])
            first = seen.get(sym)
            if first is not None and extents[sym] != value:
                span = t.span if isinstance(t.span, Span) else NO_SPAN
                raise DiagnosticError([Diagnostic(
                    code="E0711", message=f"dimension {k} of input '{t.name}' is {value}, but '{sym}' is "
                    f"{extents[sym]} (dimension {first[1]} of input '{first[0]}')", span=span,
                    hint=f"both inputs declare the extent '{sym}': give arrays that agree on it")])
            if first is None:
                seen[sym] = (t.name, k)
                extents[sym] = value
    return extents


def resolve(value: Any, extents: Extents) -> Any:
    """An attribute value with each symbolic extent replaced by its value in this run; None when an extent
    it needs has no value (the caller reports where)."""
    if isinstance(value, Pack):
        items = [resolve(v, extents) for v in value]
        if any(i is UNKNOWN for i in items):
            return UNKNOWN
        if value.uniform is NO_UNIFORM or len(items) > 0:  # a non-empty pack finds its uniform value again
            return Pack(items)
        uniform = resolve(value.uniform, extents)
        return UNKNOWN if uniform is UNKNOWN else Pack(items, uniform=uniform)
    if isinstance(value, list | tuple):
        items = [resolve(v, extents) for v in value]
        return UNKNOWN if any(i is UNKNOWN for i in items) else type(value)(items)
    if not is_symbolic(value):
        return value
    expr = value.expr
    if expr.is_Symbol:  # the usual case (`h`): no sympy arithmetic per run
        known = extents.get(expr)
        return UNKNOWN if known is None else known
    import sympy

    concrete = expr.xreplace({s: sympy.Integer(extents[s]) for s in expr.free_symbols if s in extents})
    return int(concrete) if concrete.is_Integer else UNKNOWN


class _Unknown:
    def __repr__(self) -> str:
        return "<unknown extent>"


#: What resolve gives for a value whose extents are not all known
UNKNOWN = _Unknown()


def resolve_attribs(attribs: Mapping[str, Any], extents: Extents) -> dict[str, Any] | str:
    """The attributes made concrete, or the name of the first one that cannot be (an extent without a value)."""
    out: dict[str, Any] = {}
    for name, value in attribs.items():
        got = resolve(value, extents)
        if got is UNKNOWN:
            return name
        out[name] = got
    return out
