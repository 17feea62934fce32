"""Running MLI conformance cases through the product, and MLI's own quality metrics and CRC32.

:func:`run_case` writes the case with :func:`.mli_import.to_sknd`, composes it and runs it as ``sknd run``
would (:func:`.runner.run_graph`: the integer TOSA graph, or fake quantization where that lowering
refuses), then judges the output as MLI's test driver does (the conformance folder's README): the output
must lie on its type's integer grid (else the run was not fixed point and the case fails), its
dequantized value is compared with the float reference by ``max_abs_err``, ``snr_db``, ``snr_ratio`` and
``quant_err_perc``, and the CRC32 of the integer buffers is compared with MLI's recorded values.
"""

from __future__ import annotations

import math
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.compose.quantization import QParams, dequantize, quantize
from skriptnd.diagnostics import DiagnosticError
from skriptnd.model import load
from skriptnd.targets.conformance import runner
from skriptnd.targets.conformance.mli_import import output_quant, qparams_of, to_sknd

EPS = 1e-18


def _broadcast(values: np.ndarray, qp: QParams, rank: int) -> np.ndarray:
    if qp.axis is None:
        return values.reshape(-1)[:1].reshape([1] * rank) if rank else values.reshape(-1)[0]
    shape = [1] * rank
    shape[qp.axis] = values.size
    return values.reshape(shape)


def codes_of(real: np.ndarray, qp: QParams) -> tuple[np.ndarray, float]:
    """The integer codes of a dequantized output, and how far (in steps) the farthest value is off the
    grid (0 for a fixed-point result)."""
    rank = real.ndim
    scale = _broadcast(qp.scale.astype(np.float64), qp, rank)
    zp = _broadcast(qp.zero_point.astype(np.float64), qp, rank)
    steps = real.astype(np.float64) / scale
    off = float(np.max(np.abs(steps - np.round(steps)), initial=0.0))
    return (np.round(steps) + zp).astype(np.int64), off


def metrics(ref: np.ndarray, out: np.ndarray, best: np.ndarray) -> dict[str, float]:
    """MLI's metrics (README): noise = ref - out; ``best`` is ref quantized and dequantized."""
    ref, out, best = (np.asarray(a, np.float64).reshape(-1) for a in (ref, out, best))
    noise = ref - out
    sig, nse = float(np.sum(ref ** 2)), float(np.sum(noise ** 2))
    qnoise = float(np.linalg.norm(ref - best))
    return {"max_abs_err": float(np.max(np.abs(noise), initial=0.0)),
            "snr_db": 10 * math.log10((sig + EPS) / (nse + EPS)),
            "snr_ratio": math.sqrt(sig) / max(math.sqrt(nse), EPS),
            "quant_err_perc": min(100.0, 100.0 * qnoise / max(math.sqrt(nse), EPS))}


def meets(thresholds: dict[str, Any], m: dict[str, float]) -> list[str]:
    """The thresholds not met (README: max_abs_err ≤, the others ≥; null is not checked)."""
    failed = []
    for key, limit in thresholds.items():
        if limit is None or key not in m:
            continue
        ok = m[key] <= limit + 1e-12 if key == "max_abs_err" else m[key] >= limit - 1e-9
        if not ok:
            failed.append(f"{key} {m[key]:.4g} (threshold {limit})")
    return failed


_SIZE = {"fx8": 1, "sa8": 1, "fx16": 2, "sa32": 4, "fp32": 4}
_DTYPE = {"fx8": "<i1", "sa8": "<i1", "fx16": "<i2", "sa32": "<i4", "fp32": "<f4"}


def buffer_bytes(t: dict[str, Any], values: np.ndarray, pattern: int) -> bytes:
    """One tensor's CRC buffer (README): ``capacity_bytes`` from the data start, elements at their
    ``mem_stride`` offsets, gaps holding the fill pattern (big-endian, phase ``data_offset mod 4``)."""
    kind = t["quant"]["type"]
    size = _SIZE[kind]
    buf = t["buffer"]
    cap, start = int(buf["capacity_bytes"]), int(buf["data_offset"])
    fill = pattern.to_bytes(4, "big")
    out = bytearray(fill[(start + i) % 4] for i in range(cap))
    shape = list(t["shape"]) or [1]
    strides = t.get("mem_stride") or [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    raw = np.asarray(values).reshape(shape).astype(_DTYPE[kind])
    for idx in np.ndindex(*shape):
        off = sum(i * s for i, s in zip(idx, strides, strict=True)) * size
        if off + size <= cap:
            out[off:off + size] = raw[idx].tobytes()
    return bytes(out)


@dataclass
class CaseResult:
    name: str
    group: str
    quant_type: str
    ok: bool
    path: str = ""
    detail: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    crc_match: bool = False
    crc_variant: str = ""


def run_case(case: dict[str, Any], name: str, workdir: Path | None = None) -> CaseResult:
    group, qtype = str(case.get("kernel_group", "?")), str(case.get("quant_type", "?"))
    tensors = case.get("tensors", {})
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        try:
            graph = load(to_sknd(case, Path(tmp) / "case")).compose()
            inputs = {t.name: np.asarray(tensors[t.name]["data"], np.float32).reshape(
                [int(d) for d in t.shape]) for t in graph.inputs}
            outputs, path = runner.run_graph(graph, inputs)
        except DiagnosticError as err:
            d = err.diagnostics[0]
            return CaseResult(name, group, qtype, False, "", f"{d.code}: {d.message}")
    out_t = tensors["output"]
    real = np.asarray(outputs[graph.outputs[0].name], np.float64).reshape(out_t["shape"] or [1])
    ref = np.asarray(out_t["data"], np.float64).reshape(out_t["shape"] or [1])
    oq = qparams_of(output_quant(case), out_t["shape"])
    if oq is not None:
        codes, off = codes_of(real, oq)
        # a real float32 output holds 24 significant bits: sa32 codes beyond that are rounded by the type
        if off > max(1e-3, float(np.max(np.abs(codes), initial=0)) * 2.0 ** -23):
            return CaseResult(name, group, qtype, False, path, f"output not on its {out_t['quant']['type']} grid "
                              f"({off:.3g} steps off): not a fixed-point result")
        best = _deq(quantize(ref.astype(np.float32), oq), oq)
    else:
        codes, best = real.astype(np.float32), ref
    m = metrics(ref, real, best)
    failed = meets(case.get("thresholds", {}), m)
    result = CaseResult(name, group, qtype, not failed, path, "; ".join(failed) or "thresholds met", m)
    result.crc_match, result.crc_variant = _crc(case, codes)
    return result


def _deq(q: np.ndarray, qp: QParams) -> np.ndarray:
    return np.asarray(dequantize(q, qp), np.float64)


def _crc(case: dict[str, Any], out_codes: np.ndarray) -> tuple[bool, str]:
    """Whether the CRC32 of the covered buffers matches MLI's default build or a variant (and which)."""
    tensors = case["tensors"]
    pattern = int(str(case.get("config", {}).get("mem_fill_pattern", "0xDEADBEEF")), 16)
    crc = 0
    out_t = {**tensors["output"], "quant": output_quant(case)}
    shared = out_t.get("buffer", {}).get("shared_with")
    try:
        for role in case.get("crc32_covers", []):
            t = tensors[role]
            if role == "output" and not shared:
                crc = zlib.crc32(buffer_bytes(out_t, out_codes, pattern), crc)
                continue
            if shared and role in (shared, "output"):
                # in place: the kernel writes the output codes into the input tensor (its strides, its buffer)
                crc = zlib.crc32(buffer_bytes({**tensors[shared], "quant": out_t["quant"]}, out_codes, pattern), crc)
                continue
            data = np.asarray(t["data"], np.float32).reshape(t["shape"] or [1])
            qp = qparams_of(t["quant"], t["shape"])
            values = data if qp is None else quantize(data, qp)
            crc = zlib.crc32(buffer_bytes(t, values, pattern), crc)
    except (KeyError, ValueError):
        return False, ""
    got = f"0x{crc:08X}"
    if got == str(case.get("crc32", "")).upper().replace("0X", "0x"):
        return True, "default (round UP)"
    for v in case.get("crc32_variants", []):
        if got == str(v.get("crc32", "")).upper().replace("0X", "0x"):
            return True, ", ".join(f"{k} {val}" for k, val in v.items() if k != "crc32") or "variant"
    return False, ""
