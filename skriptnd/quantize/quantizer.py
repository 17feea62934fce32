"""Post-training static quantization of a model folder, start to end (``sknd quantize``).

:func:`quantize_model`: plan the entries (:mod:`~skriptnd.quantize.plan`), run the float graph on the
calibration samples (:mod:`~skriptnd.quantize.observe`), choose the parameters
(:mod:`~skriptnd.quantize.scales`), write the folder (:mod:`~skriptnd.quantize.write`), then load what was
written, say whether it lowers to an integer TOSA graph, run it on the same samples as ``sknd run`` would,
and measure each output's SQNR against the float outputs:
``10 log10(sum(float²) / sum((quantized - float)²))`` over all samples, in dB (higher is closer; each
bit of an 8-bit grid is worth about 6 dB).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.backends.registry import run
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import DiagnosticError
from skriptnd.model import Model, load
from skriptnd.quantize import scales
from skriptnd.quantize.data import Calibration
from skriptnd.quantize.observe import Progress, observe
from skriptnd.quantize.plan import make_plan
from skriptnd.quantize.scales import Entry, Method, Target
from skriptnd.quantize.write import write_quantized
from skriptnd.tosa.integer.lower import lower_quantized


@dataclass(frozen=True)
class Settings:
    method: Method = Method.minmax
    per_channel: bool = True
    target: Target = Target.tosa
    exclude: frozenset[str] = frozenset()
    #: the backend of the float calibration runs, and of the quantized runs that measure the SQNR (None: the
    #: same). iree compiles each graph once: much faster than the numpy TOSA interpreter on a ResNet's integer
    #: graph. A quantized graph without an integer graph is measured on kernels (fake quantization).
    backend: str = "numpy"
    measure_backend: str | None = None


@dataclass
class Result:
    """What ``sknd quantize`` did: the folder, its entries, what stayed float (label -> why), whether the
    quantized graph lowers to integer TOSA (``integer``: a summary, or ``integer_error``: why not), the
    backend the SQNR run used, and each output's SQNR in dB."""

    path: Path
    entries: list[Entry]
    floats: dict[str, str]
    samples: int
    integer: str | None = None
    integer_error: str | None = None
    backend: str = "numpy"
    sqnr: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        roles: dict[str, int] = {}
        for e in self.entries:
            roles[e.role] = roles.get(e.role, 0) + 1
        return {"output": str(self.path), "samples": self.samples, "entries": roles, "float": self.floats,
                "integer_tosa": self.integer is not None, "integer": self.integer or self.integer_error,
                "backend": self.backend,  # an exact output (infinite SQNR) is null: JSON has no infinity
                "sqnr_db": {k: (None if math.isinf(v) else v) for k, v in self.sqnr.items()}}


def sqnr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``actual`` against ``reference`` in dB (inf when equal)."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((np.asarray(actual, np.float64) - ref) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


def _array(graph: Graph, t: Tensor) -> np.ndarray:
    if t.kind == "variable":
        assert graph.variable_source is not None
        return np.asarray(graph.variable_source(t))
    return np.asarray(t.value, np.float64).reshape([int(d) for d in t.shape])


def choose(graph: Graph, data: Calibration, settings: Settings, progress: Progress | None = None
           ) -> tuple[list[Entry], dict[str, str], list[dict[str, np.ndarray]]]:
    """The @quantize entries for ``graph``, what stays float, and the float outputs of every sample."""
    plan = make_plan(graph, set(settings.exclude), settings.per_channel)
    obs = observe(graph, data, plan.observed(), histograms=settings.method is not Method.minmax, backend=settings.backend, progress=progress)
    entries: dict[str, Entry] = {}
    for name in plan.activations:
        observed = obs.tensors.get(plan.range_of[name].name)
        if observed is None:
            continue
        lo, hi = scales.activation_range(observed, settings.method)
        role = "input" if plan.activations[name].kind == "input" else "activation"
        entries[name] = scales.activation(name, lo, hi, settings.target, role)
    for t in plan.fixed:
        entries[t.name] = scales.fixed_unit(t.name, settings.target)
    floats = dict(plan.floats)
    for mac in plan.macs:
        carrier = entries.get(plan.carrier.get(mac.input.name, ""))
        if carrier is None:
            floats[mac.op.label or mac.op.op] = "its input has no quantization (its range was not observed)"
            continue
        if mac.filter.name not in entries:
            entries[mac.filter.name] = scales.weight(mac.filter.name, _array(graph, mac.filter), settings.target,
                                                     mac.per_channel)
        w = entries[mac.filter.name]
        if mac.bias is not None and mac.bias.name not in entries:
            entries[mac.bias.name] = scales.bias(mac.bias.name, float(carrier.scale[0]), w)
    order = {t.name: i for i, t in enumerate(graph.tensors)}
    return sorted(entries.values(), key=lambda e: order.get(e.tensor, 0)), floats, obs.outputs


def quantize_model(model: Model, graph: Graph, data: Calibration, out: Path | str, settings: Settings,
                   attribs: Mapping[str, Any] | None = None, overwrite: bool = False,
                   progress: Progress | None = None) -> Result:
    """Quantize ``graph`` (composed from ``model`` with ``attribs``) on ``data`` and write it to ``out``."""
    entries, floats, float_outputs = choose(graph, data, settings, progress)
    header = (f"written by sknd quantize: {settings.method} calibration on {data.count} samples, target "
              f"{settings.target}, {'per-channel' if settings.per_channel else 'per-tensor'} weights")
    path = write_quantized(model, graph.name, entries, out, header, overwrite=overwrite)
    result = Result(Path(path), entries, floats, data.count)
    quantized = load(path).compose(graph.name, attribs)
    try:
        integer = lower_quantized(quantized)
        kinds = sorted({o.name for o in integer.ops})
        result.integer = f"an integer TOSA graph of {len(integer.ops)} operations ({', '.join(kinds)})"
        backend = settings.measure_backend or settings.backend
    except DiagnosticError as err:
        d = err.diagnostics[0]
        result.integer_error = f"{d.span.file}:{d.span.line}:{d.span.col}: {d.code} {d.message}"
        backend = "kernels"
    result.backend = backend
    actual: dict[str, list[np.ndarray]] = {}
    for i, feed in enumerate(data.samples()):
        values = run(quantized, feed, backend)
        for name, v in values.items():
            actual.setdefault(name, []).append(np.asarray(v))
        if progress:
            progress("measuring", i + 1, data.count)
    for name, got in actual.items():
        want = [o[name] for o in float_outputs if name in o]
        if want and np.issubdtype(want[0].dtype, np.floating):
            result.sqnr[name] = sqnr_db(np.stack(want), np.stack(got))
    return result
