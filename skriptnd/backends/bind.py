"""Graph attributes given with the inputs of a run (issue 25): an ONNX input that feeds only parameters (a
Reshape's shape, ReduceSum's axes, TopK's K) is imported as a graph attribute, and users feed it as in ONNX,
`skriptnd.run(graph, {"x": x, "axes": np.array([1])})` or `sknd run --input axes=a.npy`. The graph is composed
again for that value (skriptnd.model.Model.compose's `rebind`), once per distinct value: the compositions are
kept on the graph as its runners are. A graph attribute that an input's declaration writes as one extent
(`image: real[batch, 1, 8, 8]`) is read from the array's shape when the inputs agree on it (issue 25, item 6:
skriptnd.compose.input_shapes.infer_attribs, as `sknd run` does), so a batch of 2 composes for batch=2.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from skriptnd.compose.input_shapes import infer_attribs
from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.semantics.values import Pack
from skriptnd.source import NO_SPAN

__all__ = ["attribute_value", "bind_attributes", "awaiting_error"]

#: An attribute value made from an array: a scalar, or a pack for a 1-D array.
AttribValue = int | float | bool | Pack


def attribute_value(name: str, array: object) -> AttribValue:
    """A 0-D array as a scalar, a 1-D one as a pack, in the SkriptND type its numpy type has (int, real, bool);
    ValueError for anything else (a matrix has no attribute type)."""
    arr = np.asarray(array)
    if arr.ndim > 1:
        raise ValueError(f"graph attribute '{name}' takes a scalar or a 1-D array, got shape {list(arr.shape)}")
    if arr.dtype.kind == "b":
        cast: type = bool
    elif arr.dtype.kind in "iu":
        cast = int
    elif arr.dtype.kind == "f" or "float" in arr.dtype.name:  # also ml_dtypes' bfloat16
        cast = float
    else:
        raise ValueError(f"graph attribute '{name}' takes int, real or bool values, got {arr.dtype}")
    if arr.ndim == 0:
        return cast(arr.item())
    return Pack(cast(v) for v in arr.tolist())


def _key(values: Mapping[str, AttribValue]) -> tuple:
    return tuple(sorted((k, type(v).__name__, v) for k, v in values.items()))


def awaiting_error(graph: Graph, missing: list[str]) -> DiagnosticError:
    listed = ", ".join(f"'{n}'" for n in missing)
    return DiagnosticError([Diagnostic(
        code="E0711", message=f"graph '{graph.name}' is composed when its attribute{'s' if len(missing) > 1 else ''} "
        f"{listed} {'are' if len(missing) > 1 else 'is'} given; this run gives no value",
        span=graph.declared_at() if graph.program is not None else NO_SPAN,
        hint="give " + ", ".join(f"'{n}'" for n in missing) + " with the inputs (sknd run: "
             + " ".join(f"--input {n}=FILE.npy" for n in missing) + "; skriptnd.run: in the inputs' dict), or "
             "compose for a value (--attrib, Model.compose's attribs)")])


def bind_attributes(graph: Graph, inputs: Mapping[str, object]) -> tuple[Graph, dict[str, object]]:
    """The graph to run and its tensor inputs: names among ``inputs`` that are graph attributes (not inputs),
    and attributes the arrays' shapes determine (`batch`), compose the graph for their values where they differ
    from those it was composed for (kept on the graph, one composition per distinct value); E0711 when the
    graph awaits an attribute the run does not give."""
    names = {t.name for t in graph.inputs}
    values = {k: attribute_value(k, v) for k, v in inputs.items() if k not in names and k in graph.attribs}
    tensors = {k: v for k, v in inputs.items() if k not in values}
    missing = [n for n in graph.awaiting if n not in values]
    if missing:
        raise awaiting_error(graph, missing)
    changed = {k: v for k, v in values.items() if k in graph.awaiting or graph.attribs.get(k) != v}
    if graph.rebind is not None and not graph.awaiting:  # batch from the arrays' shapes (given values win)
        changed.update(infer_attribs(graph, {k: np.shape(v) for k, v in tensors.items() if k in names}, values))
    if not changed or graph.rebind is None:
        return graph, tensors
    cache: dict[tuple, Graph] = graph.__dict__.setdefault("_rebound", {})
    key = _key(changed)
    if key not in cache:
        cache[key] = graph.rebind(changed)
    return cache[key], tensors
