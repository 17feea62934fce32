"""Comparing backends operation by operation (``sknd compare``, issue 26): where two backends' results part.

Comparing outputs says that two runs differ, not where. Here the graph is run once per backend with every
operation's results made graph outputs (:func:`probe_graph`: a copy of the graph, the original untouched),
so each backend keeps and returns them — TOSA programs, compiled IREE modules and the executor alike, since
a graph output is never fused away or freed — and the results are compared operation by operation, in the
graph's order. The first operation whose results differ beyond the tolerance is where the backends part
(later differences may only propagate it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from skriptnd.backends.base import Options
from skriptnd.backends.registry import prepare
from skriptnd.compose.ir import Graph, Tensor


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


def probe_graph(graph: Graph) -> tuple[Graph, list[tuple[int, Tensor]]]:
    """A copy of ``graph`` whose outputs are its own followed by every top-level operation's results, and
    (operation index, tensor) for each of those results, in order."""
    probes: list[tuple[int, Tensor]] = []
    seen = {id(t) for t in graph.outputs}
    for k, op in enumerate(graph.operations):
        for v in op.outputs:
            for t in v if isinstance(v, list) else [v]:
                if isinstance(t, Tensor):
                    probes.append((k, t))
                    seen.add(id(t))
    extra = [t for _, t in probes if t not in graph.outputs]
    names = [graph.output_name(i) for i in range(len(graph.outputs))]
    probe = dataclasses.replace(graph, outputs=[*graph.outputs, *extra],
                                output_names=names + [f"%probe{i}:{t.name}" for i, t in enumerate(extra)])
    probe.__dict__.pop("_runners", None)  # a copy prepares its own runners
    return probe, probes


def _name_of(probe: Graph, t: Tensor) -> str:
    return probe.output_name(next(i for i, o in enumerate(probe.outputs) if o is t))


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
        for k, t in probes:
            op = graph.operations[k]
            name = _name_of(probe, t)
            a = np.asarray(results[reference][name])
            b = np.asarray(results[other][name])
            if a.shape != b.shape:
                diff, rel, agree = float("inf"), float("inf"), False
            elif a.dtype == np.bool_ or b.dtype == np.bool_:
                diff = float(np.count_nonzero(a != b))
                rel, agree = diff / max(a.size, 1), diff == 0
            else:
                fa, fb = a.astype(np.float64), b.astype(np.float64)
                d = np.abs(fa - fb)
                diff = float(np.nanmax(d)) if d.size else 0.0
                rel = diff / max(float(np.nanmax(np.abs(fa))) if fa.size else 0.0, 1e-30)
                agree = bool(np.allclose(fb, fa, rtol=rtol, atol=atol, equal_nan=True))
            span = op.span
            cmp.rows.append(OpDiff(op.label or f"#{k}", op.op, t.name, getattr(span, "file", None),
                                   getattr(span, "line", None), getattr(span, "col", None), diff, rel, agree))
        comparisons.append(cmp)
    return comparisons
