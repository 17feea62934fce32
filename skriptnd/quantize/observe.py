"""Observing a float graph on calibration data: the range (and, for the percentile and MSE methods, a
histogram) of every tensor the quantization plan needs, and the float outputs for the SQNR report.

The graph is run once per sample with every needed intermediate made a graph output (the probe graph of
:mod:`skriptnd.backends.compare`: a copy, so no backend fuses or frees a tensor we read). Min and max are
exact over all samples. A histogram needs its bins before the values come, so the methods that want one
run the samples a second time with 2048 bins spanning each tensor's [min, max] from the first pass — twice
the time, but exact bins and a memory use independent of the number of samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from skriptnd.backends.base import Options
from skriptnd.backends.compare import probe_graph
from skriptnd.backends.registry import prepare
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.quantize.data import Calibration

BINS = 2048


@dataclass
class Observed:
    """What one tensor held over the calibration samples."""

    lo: float = float("inf")
    hi: float = float("-inf")
    histogram: np.ndarray | None = None  # BINS counts over [lo, hi], when a method asked for one

    def add(self, a: np.ndarray) -> None:
        if a.size:
            self.lo = min(self.lo, float(a.min()))
            self.hi = max(self.hi, float(a.max()))

    def add_to_histogram(self, a: np.ndarray) -> None:
        if self.histogram is None:
            self.histogram = np.zeros(BINS, np.int64)
        if a.size and self.hi > self.lo:
            counts, _ = np.histogram(a, bins=BINS, range=(self.lo, self.hi))
            self.histogram += counts
        elif a.size:
            self.histogram[0] += a.size

    def edges(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, BINS + 1)


@dataclass
class Observation:
    """The observed tensors by name and the float graph outputs of each sample (by output name)."""

    tensors: dict[str, Observed]
    outputs: list[dict[str, np.ndarray]] = field(default_factory=list)


Progress = Callable[[str, int, int], None]


def _probe(graph: Graph, wanted: Iterable[Tensor]) -> tuple[Graph, dict[str, str]]:
    """A probe graph of ``graph`` and, per wanted tensor name, the name of the probe output holding it
    (graph inputs are read from the feed: the name itself)."""
    probe, probes = probe_graph(graph)
    by_name = {t.name: out for _, t, out in probes}
    names = {id(t): graph.output_name(i) for i, t in enumerate(graph.outputs)}
    found: dict[str, str] = {}
    for t in wanted:
        if t.kind == "input":
            found[t.name] = t.name
        elif id(t) in names:
            found[t.name] = names[id(t)]
        elif t.name in by_name:
            found[t.name] = by_name[t.name]
    return probe, found


def observe(graph: Graph, data: Calibration, wanted: list[Tensor], histograms: bool, backend: str = "numpy",
            progress: Progress | None = None) -> Observation:
    """Run ``graph`` in float on every calibration sample and observe the ``wanted`` tensors."""
    probe, where = _probe(graph, wanted)
    runner = prepare(probe, backend, Options())
    outputs = [graph.output_name(i) for i in range(len(graph.outputs))]
    seen = {name: Observed() for name in where}
    result = Observation(seen)
    for i, feed in enumerate(data.samples()):
        values = runner.run(dict(feed))
        for name, out in where.items():
            seen[name].add(np.asarray(feed[name] if name in feed and out == name else values[out]))
        result.outputs.append({o: np.asarray(values[o]) for o in outputs})
        if progress:
            progress("calibrating", i + 1, data.count)
    if histograms:
        for i, feed in enumerate(data.samples()):
            values = runner.run(dict(feed))
            for name, out in where.items():
                seen[name].add_to_histogram(np.asarray(feed[name] if name in feed and out == name else values[out]))
            if progress:
                progress("histograms", i + 1, data.count)
    return result
