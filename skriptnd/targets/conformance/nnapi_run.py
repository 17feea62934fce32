"""Running NNAPI conformance vectors through the product: to_sknd → load → compose → run.

The run is what ``sknd run`` does for the written folder (:func:`.runner.run_graph`: the integer TOSA graph
for a quantized graph, fake quantization where that lowering refuses it, the default TOSA backend for a float
graph), and the result says which. The comparison is the CTS's (see the folder's README): float32
``|e - a| <= atol + rtol |e|``, quant8 within ``quant8`` LSB after checking that the output lies on its
quantization grid, int32 exact.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.writer import Names
from skriptnd.model import load
from skriptnd.targets.conformance.nnapi_import import to_sknd
from skriptnd.targets.conformance.runner import run_graph


@dataclass
class VectorResult:
    """The outcome of one vector file: ``ok``, the path the run took, the worst error per output, or the
    diagnostic that stopped it."""

    name: str
    ops: list[str]
    ok: bool
    path: str = ""  # 'integer TOSA', 'fake quantization', 'fp32 TOSA'
    detail: str = ""
    worst: dict[str, float] = field(default_factory=dict)


def _input_array(o: dict[str, Any], values: list[Any]) -> np.ndarray | None:
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64).reshape(o["dims"])
    if o["type"] == "TENSOR_QUANT8_ASYMM":  # real-valued: s * (q - z), as the graph's input is declared
        return (np.float32(o["scale"]) * (a - int(o["zero_point"]))).astype(np.float32)
    if o["type"] == "TENSOR_INT32" and float(o.get("scale", 0.0)) > 0:  # a quantized bias given as an input
        return (np.float32(o["scale"]) * a).astype(np.float32)
    if o["type"] in ("TENSOR_INT32", "INT32"):
        return a.astype(np.int64)
    return a.astype(np.float32)


def compare(o: dict[str, Any], actual: np.ndarray, expected: list[Any], tol: dict[str, Any], name: str
            ) -> tuple[bool, float, str]:
    """``(ok, worst error, message)`` of one output as the CTS compares it."""
    e = np.asarray(expected, dtype=np.float64).reshape(o["dims"])
    if list(actual.shape) != list(o["dims"]):
        return False, float("inf"), f"shape {list(actual.shape)}, expected {o['dims']}"
    a = actual.astype(np.float64)
    if o["type"] == "TENSOR_QUANT8_ASYMM":
        scale = float(np.float32(o["scale"]))
        codes = a / scale
        off = float(np.max(np.abs(codes - np.round(codes)), initial=0.0))
        if off > 1e-3:
            return False, off, f"not on the quant8 grid (a value is {off:.3g} steps off)"
        q = np.round(codes) + int(o["zero_point"])
        worst = float(np.max(np.abs(q - e), initial=0.0))
        limit = 2 if "mobilenet" in name else int(tol.get("quant8", 1))
        return worst <= limit, worst, f"max |Δq| {worst:g} (limit {limit})"
    if o["type"] in ("TENSOR_INT32", "INT32"):
        worst = float(np.max(np.abs(a - e), initial=0.0))
        return worst == 0, worst, f"max |Δ| {worst:g} (exact)"
    atol, rtol = float(tol.get("atol", 1e-5)), float(tol.get("rtol", 5.96e-7))
    err = np.abs(a - e) - rtol * np.abs(e)
    worst = float(np.max(np.abs(a - e), initial=0.0))
    return bool(np.all(err <= atol)), worst, f"max |Δ| {worst:.3g} (atol {atol:g}, rtol {rtol:.3g})"


def run_vector(model: dict[str, Any], workdir: Path | None = None) -> VectorResult:
    """Write, compose and run one NNAPI vector model on all its examples."""
    name = str(model.get("name", "?"))
    ops = [op.get("op", "?") for op in model.get("operations", [])]
    operands = {o["name"]: o for o in model.get("operands", [])}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        try:
            folder = to_sknd(model, Path(tmp) / name)
            graph = load(folder).compose()
        except DiagnosticError as err:
            d = err.diagnostics[0]
            return VectorResult(name, ops, False, "", f"{d.code}: {d.message}")
        result = VectorResult(name, ops, True)
        for k, example in enumerate(model["examples"]):
            inputs = {}
            for t in graph.inputs:
                foreign = next(n for n in model["model_inputs"] if n == t.name or _sanitized(n) == t.name)
                array = _input_array(operands[foreign], example["inputs"].get(foreign, []))
                if array is None:
                    return VectorResult(name, ops, False, "", f"example {k}: no value for input '{foreign}'")
                inputs[t.name] = array
            try:
                outputs, path = run_graph(graph, inputs)
            except DiagnosticError as err:
                d = err.diagnostics[0]
                return VectorResult(name, ops, False, "", f"{d.code}: {d.message}")
            result.path = path
            for out_name in model["model_outputs"]:
                o = operands[out_name]
                if o.get("ignored"):
                    continue
                key = out_name if out_name in outputs else _sanitized(out_name)
                ok, worst, msg = compare(o, outputs[key], example["outputs"][out_name], model.get("tolerance", {}),
                                         name)
                result.worst[out_name] = max(result.worst.get(out_name, 0.0), worst)
                if not ok:
                    result.ok = False
                    result.detail = f"example {k}, output '{out_name}': {msg}"
        if result.ok:
            result.detail = "; ".join(f"{n}: max error {w:g}" for n, w in result.worst.items())
        return result


def _sanitized(name: str) -> str:
    return Names()(name)
