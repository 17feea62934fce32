"""Quantization operations, imported through their NNEF definitions (fake quantization: round, clamp and
rescale in floating point, as NNEF defines them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from skriptnd.interop.nnef_import.context import Arg, tidy
from skriptnd.interop.nnef_import.registry import expanded

expanded("NNEF definition (clamp, round, rescale)", "min_max_linear_quantize", "zero_point_linear_quantize",
         "linear_quantize", "logarithmic_quantize")


# -- graph.quant: the quantization of tensors, as @quantize entries ----------------------------------------

#: graph.quant operation -> (SkriptND quantize operator, fixed attributes)
QUANTIZERS = {
    "zero_point_linear_quantize": ("quant.zero_point_linear_quantize", {}),
    "min_max_linear_quantize": ("quant.min_max_linear_quantize", {}),
    "linear_quantize": ("quant.min_max_linear_quantize", {"signed": False, "symmetric": False}),
}
_ATTRIBUTES = ("zero_point", "scale", "min", "max", "bits", "signed", "symmetric")


def quantize_entry(name: str, shape: list[int], quantization: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The @quantize operator and attributes for one tensor's graph.quant entry. Per-channel parameters (an
    array with one non-singleton axis, NNEF-broadcast against the tensor) give `channel_axis`.
    Raises ValueError with the reason when SkriptND's @quantize cannot express the entry."""
    op = quantization.get("op-name")
    if op not in QUANTIZERS:
        raise ValueError(f"quantization '{op}' has no SkriptND @quantize counterpart "
                         f"(supported: {', '.join(QUANTIZERS)})")
    target, fixed = QUANTIZERS[op]
    attribs: dict[str, Any] = {}
    channel_axis = None
    for key in _ATTRIBUTES:
        if key not in quantization:
            continue
        value = quantization[key]
        if isinstance(value, np.ndarray) and value.ndim > 0 and value.size > 1:
            axes = [i for i, d in enumerate(value.shape) if d != 1]
            if len(axes) != 1 or axes[0] >= len(shape) or value.shape[axes[0]] != shape[axes[0]]:
                raise ValueError(f"'{key}' of shape {list(value.shape)} is not per-channel for a tensor of shape "
                                 f"{shape}")
            if channel_axis not in (None, axes[0]):
                raise ValueError("parameters vary along different axes")
            channel_axis = axes[0]
            attribs[key] = [_item(v) for v in value.reshape(-1)]
        else:
            attribs[key] = _item(np.asarray(value).reshape(-1)[0] if isinstance(value, np.ndarray) else value)
    attribs.update(fixed)
    attribs["channel_axis"] = channel_axis if channel_axis is not None else (1 if len(shape) > 1 else 0)
    _check_values(attribs)
    return target, attribs


def _check_values(attribs: dict[str, Any]) -> None:
    """What the entry's numbers must satisfy for the imported model to run (else a ValueError saying
    which): 1 to 32 bits, positive finite scales, max above min."""
    bits = attribs.get("bits")
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise ValueError(f"bits = {bits}: integer quantization holds 1 to 32 bits")

    def listed(key: str) -> list[Any]:
        value = attribs.get(key)
        return value if isinstance(value, list) else [] if value is None else [value]

    for scale in listed("scale"):
        if not isinstance(scale, int | float) or not 0 < scale < float("inf"):
            raise ValueError(f"scale = {scale}: a scale must be positive and finite")
    lows, highs = listed("min"), listed("max")
    if lows and highs:
        for low, high in zip(lows * (len(highs) if len(lows) == 1 else 1),
                             highs * (len(lows) if len(highs) == 1 else 1), strict=False):
            if not high > low:
                raise ValueError(f"min = {low}, max = {high}: max must be greater than min")


def _item(value: Arg | np.generic) -> Arg:
    if isinstance(value, np.generic):
        value = value.item()
    return tidy(value)
