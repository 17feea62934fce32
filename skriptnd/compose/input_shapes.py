"""E0711 for an input array whose shape is not the one the graph was composed for, with a hint that says how to
fix it.

A graph is composed for fixed attribute values (`batch = 1` unless `--attrib batch=2`), so a batch-2 array fed
to a graph composed for batch 1 is the user's mistake in the command line, not in the array. The hint names
the attribute an extent came from (`compose for it: --attrib batch=2`) when the declaration writes the extent
as one attribute; otherwise it says which input dimension, declared how, differs. Every backend (the numpy
executor, the integer TOSA lowering, the CLI before an onnxruntime or IREE run) raises this same diagnostic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast
from skriptnd.syntax.printer import format_expr

__all__ = ["check_shapes", "declared_extents", "describe", "infer_attribs", "shape_fits", "shape_mismatch"]

register_codes({"E0711": "wrong input for a graph"})


def describe(t: Tensor) -> str:
    """`real[batch, 1, 8, 8], here real[1, 1, 8, 8]`: the declared type and the composed one when they differ."""
    dims = ", ".join("?" if d is None else str(d) for d in t.shape)
    concrete = f"{t.dtype}[{dims}]"
    if t.declared and t.declared != concrete:
        return f"{t.declared}, here {concrete}"
    return concrete


def shape_fits(t: Tensor, shape: Sequence[int]) -> bool:
    """The array shape is the composed one: same rank, fixed extents equal, dynamic ones within their bound."""
    bounds = t.bounds or (None,) * t.rank
    return len(shape) == t.rank and not any(
        (d is not None and d != a) or (d is None and b is not None and a > b)
        for d, a, b in zip(t.shape, shape, bounds, strict=False))


def shape_mismatch(graph: Graph | None, t: Tensor, shape: Sequence[int]) -> DiagnosticError:
    """E0711 at the input's declaration: the array's shape is not the composed one; the hint says what to do."""
    got = [int(a) for a in shape]
    return DiagnosticError([Diagnostic(code="E0711", message=f"input '{t.name}' must have shape {describe(t)}, "
                                       f"got {got}", span=t.span if isinstance(t.span, Span) else NO_SPAN,
                                       hint=_hint(graph, t, got))])


def check_shapes(graph: Graph, inputs: Mapping[str, object]) -> None:
    """Every given input's shape is the composed one (E0711 with a hint otherwise); names not given or not the
    graph's are left to the caller. Checked before a backend runs, so onnxruntime and IREE never see it."""
    for t in graph.inputs:
        if t.name in inputs:
            shape = np.shape(inputs[t.name])  # type: ignore[arg-type]
            if not shape_fits(t, shape):
                raise shape_mismatch(graph, t, shape)


def _hint(graph: Graph | None, t: Tensor, got: list[int]) -> str:
    if len(got) != t.rank:
        return f"'{t.name}' has rank {t.rank} ({describe(t)}); give an array of {t.rank} dimensions"
    extents = declared_extents(graph, t)
    wrong = [k for k, (d, a) in enumerate(zip(t.shape, got, strict=True)) if d is not None and d != a]
    # the attribute each wrong extent is, where the declaration writes it as one attribute, and the values the
    # array asks of it (`real[n, n]` given [3, 4] asks two: no single attribute value fits)
    names = [e.id if isinstance(e, ast.Name) and graph is not None and e.id in graph.attribs else None
             for e in (extents or [None] * t.rank)]
    attribs: dict[str, tuple[object, set[int]]] = {}
    for k, name in enumerate(names):  # every extent an attribute gives, wrong or not: a new value changes them all
        if name is not None and graph is not None:
            attribs.setdefault(name, (graph.attribs[name], set()))[1].add(got[k])
    if wrong and all(names[k] is not None for k in wrong) and all(len(v) == 1 for _, v in attribs.values()):
        attribs = {n: v for n, v in attribs.items() if v[0] not in v[1]}  # only those to change
        was = ", ".join(f"{n}={old!r}" for n, (old, _) in attribs.items())
        fix = " ".join(f"--attrib {n}={min(new)}" for n, (_, new) in attribs.items())
        return f"the graph was composed for {was}; compose for it: {fix}"
    if not wrong:  # a dynamic extent beyond its bound
        bounds = t.bounds or (None,) * t.rank
        k = next(k for k, (b, a) in enumerate(zip(bounds, got, strict=True)) if b is not None and a > b)
        return f"dimension {k} of '{t.name}' is dynamic up to {bounds[k]}; give at most {bounds[k]} there"
    parts = []
    for k in wrong:
        expr = extents[k] if extents is not None else None
        written = f" (declared '{format_expr(expr)}')" if expr is not None and not isinstance(expr, ast.IntLit) \
            else ""
        parts.append(f"dimension {k} of '{t.name}' is {t.shape[k]}{written} where the array has {got[k]}")
    return "; ".join(parts)


def declared_extents(graph: Graph | None, t: Tensor) -> list[ast.Expr | None] | None:
    """The extent expressions of the input's declaration (`[batch, 1, 8, 8]`), one per dimension, or None where
    the declaration cannot be mapped dimension by dimension (a shape pack, no source)."""
    if graph is None or graph.program is None:
        return None
    name = t.name.rsplit(".", 1)[0] if "." in t.name else t.name  # an item of an input pack: `xs.0`
    for definition in graph.program.graphs():
        if definition.name != graph.name:
            continue
        for block in definition.blocks:
            if not isinstance(block, ast.ParamBlock) or block.kind != "input":
                continue
            for decl in block.items:
                if decl.name == name:
                    items = decl.type.shape or ()
                    if len(items) != t.rank or any(i.pack is not None or i.value is None for i in items):
                        return None
                    return [i.value for i in items]
    return None


def infer_attribs(graph: Graph, shapes: Mapping[str, tuple[int, ...]], fixed: Iterable[str]) -> dict[str, int]:
    """Graph attributes that the given inputs' shapes determine (issue 25, item 6; `sknd run` and
    skriptnd.run): an input declared ``real[batch, 1, 8, 8]`` given as a [2, 1, 8, 8] array makes ``batch`` 2,
    unless ``--attrib`` (or the run's inputs) set it (``fixed``) or two inputs disagree (then nothing is
    inferred for it, and the run's E0711 says which ``--attrib`` fixes it). Only an extent written as the
    attribute alone counts (`2 * batch` does not). Only values that differ from what the graph was composed
    for are returned."""
    found: dict[str, set[int]] = {}
    fixed = set(fixed)
    for t in graph.inputs:
        shape = shapes.get(t.name)
        extents = declared_extents(graph, t)  # the declaration's expressions, as E0711's hint reads them
        if shape is None or extents is None or len(extents) != len(shape):
            continue
        for extent, n in zip(extents, shape, strict=True):
            if isinstance(extent, ast.Name) and extent.id in graph.attribs and extent.id not in fixed \
                    and isinstance(graph.attribs[extent.id], int):
                found.setdefault(extent.id, set()).add(int(n))
    return {k: v.pop() for k, v in found.items() if len(v) == 1 and next(iter(v)) != graph.attribs[k]}
