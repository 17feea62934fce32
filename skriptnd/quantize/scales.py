"""Choosing quantization parameters: an activation's range by calibration method, and the parameters of
``quant.zero_point_linear_quantize`` each target wants for activations, weights and biases.

Methods (activations; weights always take their exact range):

- ``minmax``: the observed [min, max];
- ``percentile``: the 0.01 % and 99.99 % quantiles of the observed values (from a 2048-bin histogram), so
  that a few outliers do not stretch the grid for all the others;
- ``mse``: of 96 ranges shrinking the observed one toward zero (down to 5 % of it) (both ends by the same factor), the one whose
  expected squared quantization error over the histogram — values outside clipped, values inside a
  uniform rounding error of ``scale²/12`` — is least.

Every range is widened to include 0, so that real 0 (padding, relu) is exact on the grid.

Targets (the schemes their integer kernels implement):

- ``tosa`` and ``mli`` (MLI's sa8/sa32): activations int8 asymmetric per tensor (``zero_point`` in
  [-128, 127]); weights int8 symmetric (zero point 0, [-127, 127]) per output channel, or per tensor with
  ``--per-tensor``; biases int32 at the accumulator's scale ``s_in * s_w`` (zero point 0), so the integer
  graph adds them to the accumulator unchanged; the outputs of softmax and sigmoid at the fixed scale 1/256
  (zero point -128: [0, 255/256]);
- ``nnapi`` (NNAPI 1.0 TENSOR_QUANT8_ASYMM): activations and weights uint8 asymmetric per tensor
  (``signed=false``, zero point in [0, 255]), biases int32 at ``s_in * s_w``, softmax and sigmoid outputs
  at scale 1/256 with zero point 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from skriptnd.quantize.observe import Observed


class Method(StrEnum):
    minmax = "minmax"
    percentile = "percentile"
    mse = "mse"


class Target(StrEnum):
    tosa = "tosa"
    nnapi = "nnapi"
    mli = "mli"


PERCENTILE = 99.99
#: the scale of a range that is one point (a tensor that was always 0): any positive scale represents it
_EMPTY_WIDTH = 1.0


@dataclass(frozen=True)
class Entry:
    """One @quantize entry: ``tensor: quant.zero_point_linear_quantize{attribs};`` and why (its role)."""

    tensor: str
    role: str  # 'input', 'activation', 'fixed', 'weight', 'bias'
    attribs: dict[str, Any]

    @property
    def scale(self) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.attribs["scale"], np.float64))


def _quantile(obs: Observed, q: float) -> float:
    assert obs.histogram is not None
    cdf = np.cumsum(obs.histogram)
    k = int(np.searchsorted(cdf, q * cdf[-1], side="left"))
    edges = obs.edges()
    return float(edges[min(k + 1, len(edges) - 1)])


def _mse_range(obs: Observed, levels: int) -> tuple[float, float]:
    assert obs.histogram is not None
    edges = obs.edges()
    centers = (edges[:-1] + edges[1:]) / 2
    counts = obs.histogram.astype(np.float64)
    lo0, hi0 = min(obs.lo, 0.0), max(obs.hi, 0.0)
    best, best_err = (lo0, hi0), float("inf")
    for f in np.linspace(1.0, 0.05, 96):
        lo, hi = lo0 * f, hi0 * f
        scale = (hi - lo) / levels
        if scale <= 0:
            continue
        clipped = np.clip(centers, lo, hi)
        err = float(np.sum(counts * ((centers - clipped) ** 2 + np.where(centers == clipped, scale * scale / 12, 0))))
        if err < best_err:
            best, best_err = (lo, hi), err
    return best


def activation_range(obs: Observed, method: Method) -> tuple[float, float]:
    """The real range an activation is quantized over, 0 included."""
    lo, hi = obs.lo, obs.hi
    if not (np.isfinite(lo) and np.isfinite(hi)):
        lo, hi = 0.0, 0.0
    elif method is Method.percentile and obs.histogram is not None and hi > lo:
        tail = (100.0 - PERCENTILE) / 100.0
        lo = _quantile(obs, tail) if lo < 0 else lo
        hi = _quantile(obs, 1.0 - tail) if hi > 0 else hi
    elif method is Method.mse and obs.histogram is not None and hi > lo:
        lo, hi = _mse_range(obs, 255)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo <= 0:
        hi = lo + _EMPTY_WIDTH
    return lo, hi


def activation(tensor: str, lo: float, hi: float, target: Target, role: str = "activation") -> Entry:
    """8-bit asymmetric per tensor over [lo, hi] (0 inside): int8 for tosa/mli, uint8 for nnapi."""
    scale = (hi - lo) / 255.0
    if target is Target.nnapi:
        zp = int(np.clip(round(-lo / scale), 0, 255))
        return Entry(tensor, role, {"zero_point": zp, "bits": 8, "signed": False, "scale": scale})
    zp = int(np.clip(-128 - round(lo / scale), -128, 127))
    return Entry(tensor, role, {"zero_point": zp, "bits": 8, "scale": scale})


def fixed_unit(tensor: str, target: Target) -> Entry:
    """A probability (softmax, sigmoid): [0, 1) at scale 1/256, as NNAPI and MLI fix it."""
    if target is Target.nnapi:
        return Entry(tensor, "fixed", {"zero_point": 0, "bits": 8, "signed": False, "scale": 1.0 / 256})
    return Entry(tensor, "fixed", {"zero_point": -128, "bits": 8, "scale": 1.0 / 256})


def weight(tensor: str, w: np.ndarray, target: Target, per_channel: bool) -> Entry:
    """Filter/weight quantization; per output channel (axis 0) unless ``per_channel`` is False or the
    target has one scale per tensor (nnapi)."""
    w = np.asarray(w, np.float64)
    if target is Target.nnapi:
        lo, hi = min(float(w.min(initial=0.0)), 0.0), max(float(w.max(initial=0.0)), 0.0)
        if hi - lo <= 0:
            hi = lo + _EMPTY_WIDTH
        scale = (hi - lo) / 255.0
        zp = int(np.clip(round(-lo / scale), 0, 255))
        return Entry(tensor, "weight", {"zero_point": zp, "bits": 8, "signed": False, "scale": scale})
    if per_channel and w.ndim >= 1 and w.shape[0] > 1:
        m = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        scales = np.where(m > 0, m / 127.0, 1.0)
        return Entry(tensor, "weight", {"zero_point": 0, "bits": 8, "symmetric": True, "channel_axis": 0,
                                        "scale": [float(s) for s in scales]})
    m = float(np.abs(w).max(initial=0.0))
    return Entry(tensor, "weight", {"zero_point": 0, "bits": 8, "symmetric": True,
                                    "scale": m / 127.0 if m > 0 else 1.0})


def bias(tensor: str, input_scale: float, weight_entry: Entry) -> Entry:
    """int32 at the accumulator's scale ``s_in * s_w`` (per channel when the weights are)."""
    ws = weight_entry.scale
    if ws.size > 1:
        return Entry(tensor, "bias", {"zero_point": 0, "bits": 32, "channel_axis": 0,
                                      "scale": [float(input_scale * s) for s in ws]})
    return Entry(tensor, "bias", {"zero_point": 0, "bits": 32, "scale": float(input_scale * ws[0])})
