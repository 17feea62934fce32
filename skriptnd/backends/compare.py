"""Comparing backends operation by operation (``sknd compare``, issue 26): where two backends' results part.

Comparing outputs says that two runs differ, not where. Here the graph is run once per backend with every
operation's results made graph outputs (:func:`probe_graph`: a copy of the graph, the original untouched),
so each backend keeps and returns them — TOSA programs, compiled IREE modules and the executor alike, since
a graph output is never fused away or freed — and the results are compared operation by operation, in the
graph's order: a tensor agrees when max |a - b| <= atol + rtol * max |a| (NaNs in the same places). The
first operation whose results differ beyond that is where the backends part (later differences may only
propagate it). Against the original ONNX model (:func:`compare_with_onnx`), onnxruntime gives every node's
outputs the same way and they are matched to the imported graph's tensors by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from skriptnd.backends.base import Options
from skriptnd.backends.registry import prepare
from skriptnd.backends.via_onnxruntime import session
from skriptnd.compose.ir import Graph, Tensor, flat_tensors
from skriptnd.interop.onnx_import import normalize
from skriptnd.interop.writer import Names


@dataclass
class OpDiff:
    """One operation's results on the reference backend and another."""

    label: str
    op: str
    tensor: str
    file: str | None
    line: int | None
    col: int | None
    max_abs: float
    max_rel: float
    agree: bool


@dataclass
class Comparison:
    reference: str
    other: str
    rtol: float
    atol: float
    rows: list[OpDiff] = field(default_factory=list)

    @property
    def first_divergence(self) -> OpDiff | None:
        return next((r for r in self.rows if not r.agree), None)

    def as_json(self) -> dict[str, object]:
        first = self.first_divergence
        return {"reference": self.reference, "other": self.other, "rtol": self.rtol, "atol": self.atol,
                "agree": first is None, "first_divergence": dataclasses.asdict(first) if first else None,
                "operations": [dataclasses.asdict(r) for r in self.rows]}


def probe_graph(graph: Graph) -> tuple[Graph, list[tuple[int, Tensor, str]]]:
    """A copy of ``graph`` whose outputs are its own followed by every other result of a top-level operation,
    and (operation index, tensor, the copy's output name for it) for each operation result, in order."""
    names = {id(t): graph.output_name(i) for i, t in enumerate(graph.outputs)}
    extra: list[Tensor] = []
    probes: list[tuple[int, Tensor, str]] = []
    for k, op in enumerate(graph.operations):
        for t in flat_tensors(op.outputs):
            if id(t) not in names:
                names[id(t)] = f"%probe{len(extra)}:{t.name}"
                extra.append(t)
            probes.append((k, t, names[id(t)]))
    probe = dataclasses.replace(graph, outputs=[*graph.outputs, *extra],
                                output_names=[names[id(t)] for t in [*graph.outputs, *extra]])
    probe.__dict__.pop("_runners", None)  # a copy prepares its own runners
    return probe, probes


def _diff(op_label: str, op: object, t: Tensor, a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> OpDiff:
    if a.shape != b.shape:
        diff, rel, agree = float("inf"), float("inf"), False
    elif a.dtype == np.bool_ or b.dtype == np.bool_:
        diff = float(np.count_nonzero(a != b))
        rel, agree = diff / max(a.size, 1), diff == 0
    else:
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        d = np.abs(fa - fb)
        diff = float(np.nanmax(d)) if d.size else 0.0
        scale = float(np.nanmax(np.abs(fa))) if fa.size else 0.0
        rel = diff / max(scale, 1e-30)
        # against the tensor's largest value (as sknd bench judges): float32 sums of thousands of terms
        # differ by an ulp of the sum, which an element-wise rtol would call a divergence near zero
        agree = bool(diff <= atol + rtol * scale) and bool(np.array_equal(np.isnan(fa), np.isnan(fb)))
    span = getattr(op, "span", None)
    return OpDiff(op_label, getattr(op, "op", ""), t.name, getattr(span, "file", None), getattr(span, "line", None),
                  getattr(span, "col", None), diff, rel, agree)


def compare_backends(graph: Graph, inputs: Mapping[str, np.ndarray], backends: Sequence[str],
                     options: Options | None = None, rtol: float = 1e-4, atol: float = 1e-5) -> list[Comparison]:
    """Each backend after the first compared with the first, operation by operation (see the module
    docstring). Raises what preparing or running a backend raises (DiagnosticError)."""
    probe, probes = probe_graph(graph)
    results = {b: prepare(probe, b, options or Options()).run(dict(inputs)) for b in backends}
    reference = backends[0]
    comparisons = []
    for other in backends[1:]:
        cmp = Comparison(reference, other, rtol, atol)
        for k, t, name in probes:
            op = graph.operations[k]
            cmp.rows.append(_diff(op.label or f"#{k}", op, t, np.asarray(results[reference][name]),
                                  np.asarray(results[other][name]), rtol, atol))
        comparisons.append(cmp)
    return comparisons


def compare_with_onnx(graph: Graph, inputs: Mapping[str, np.ndarray], onnx_path: str, backend: str = "numpy",
                      options: Options | None = None, rtol: float = 1e-4, atol: float = 1e-5) -> Comparison:
    """``graph`` (imported from the ONNX model at ``onnx_path``) on ``backend`` against onnxruntime on that
    original model, operation by operation: onnxruntime gives every node's outputs (each made a graph
    output), matched to ours by name (the importer writes each ONNX tensor name as an identifier,
    skriptnd.interop.writer.Names); operations without a counterpart (ops the import added) are left out."""
    model = normalize.load(onnx_path, onnx_path)  # the importer's own checks: external data in its folder
    clean = Names.clean
    by_name: dict[str, str] = {}
    for node in model.graph.node:
        for out in node.output:
            if out:
                by_name.setdefault(clean(out), out)
    probe, probes = probe_graph(graph)
    ours = prepare(probe, backend, options or Options()).run(dict(inputs))
    wanted = [(k, t, name, by_name[t.name]) for k, t, name in probes if t.name in by_name]
    from onnx import helper  # an optional dependency: normalize.load above has said when it is missing

    existing = {o.name for o in model.graph.output}
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for *_, n in wanted if n not in existing)
    sess = session(model.SerializeToString())
    names = [n for *_, n in wanted]
    feeds = {}
    for i in sess.get_inputs():
        value = inputs.get(i.name, inputs.get(clean(i.name)))
        if value is not None:
            feeds[i.name] = value
    reference = dict(zip(names, sess.run(names, feeds), strict=True)) if names else {}
    cmp = Comparison(f"onnxruntime on {onnx_path}", backend, rtol, atol)
    for k, t, name, n in wanted:
        op = graph.operations[k]
        cmp.rows.append(_diff(op.label or f"#{k}", op, t, np.asarray(reference[n]), np.asarray(ours[name]), rtol, atol))
    return cmp
