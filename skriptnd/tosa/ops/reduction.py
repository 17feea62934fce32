"""Reductions (TOSA 0.30 §2.9, 1.0 "Reduction operators") and ARGMAX (0.30 §2.3.1, 1.0 "Tensor operators").

REDUCE_* keep the reduced axis with size 1. Integer sums check every partial sum (``apply_add_s``
REQUIRE); float sums/products are accumulated in float64 and rounded once.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import (
    FLOATS,
    check_axis,
    check_nan_mode,
    check_types,
    float_max,
    float_min,
    tensor,
)
from skriptnd.tosa.ops.dtypes import INT_RANGES, is_float, round_float
from skriptnd.tosa.ops.errors import check_version, error_if, require

__all__ = ["reduce_all", "reduce_any", "reduce_max", "reduce_min", "reduce_product", "reduce_sum", "argmax"]

_I64 = np.int64


def _prepare(op: str, input: ArrayLike, axis: int, rows: list[tuple[str, ...]], version: str):
    check_version(version)
    a, t = tensor(input, op, "input")
    check_types(op, (t,), rows, "in_out_t")
    if version == "0.30":
        error_if(a.ndim > 4, "rank(shape1) > 4", op)
    check_axis(op, axis, a.ndim)
    return a, t


def reduce_all(input: ArrayLike, *, axis: int, version: str = "1.0") -> np.ndarray:
    """REDUCE_ALL (0.30 §2.9.1): logical and along ``axis``. bool."""
    a, _ = _prepare("REDUCE_ALL", input, axis, [("bool",)], version)
    return np.all(a != 0, axis=axis, keepdims=True)


def reduce_any(input: ArrayLike, *, axis: int, version: str = "1.0") -> np.ndarray:
    """REDUCE_ANY (0.30 §2.9.2): logical or along ``axis``. bool."""
    a, _ = _prepare("REDUCE_ANY", input, axis, [("bool",)], version)
    return np.any(a != 0, axis=axis, keepdims=True)


def _reduce_minmax(op: str, input: ArrayLike, axis: int, nan_mode: str, version: str, is_max: bool) -> np.ndarray:
    check_nan_mode(op, nan_mode, version)
    rows = [("int8",), ("int16",), ("int32",), *[(f,) for f in FLOATS]]
    a, t = _prepare(op, input, axis, rows, version)
    if not is_float(t):
        return (np.max if is_max else np.min)(a, axis=axis, keepdims=True)
    x = np.moveaxis(a.astype(np.float64), axis, 0)
    init = np.nan if nan_mode == "IGNORE" else (-np.inf if is_max else np.inf)
    acc = np.full(x.shape[1:], init)
    for value in x:  # acc = apply_max_s(acc, value, nan_mode), in order (ties keep acc / take value)
        acc = float_max(acc, value, nan_mode) if is_max else float_min(acc, value, nan_mode)
    return round_float(np.expand_dims(acc, axis), t)


def reduce_max(input: ArrayLike, *, axis: int, nan_mode: str = "PROPAGATE", version: str = "1.0") -> np.ndarray:
    """REDUCE_MAX (0.30 §2.9.3): ``apply_max_s`` fold; NaN per ``nan_mode`` (1.0; all-NaN gives NaN
    under IGNORE). i8, i16, i32, fp16, bf16, fp32."""
    return _reduce_minmax("REDUCE_MAX", input, axis, nan_mode, version, True)


def reduce_min(input: ArrayLike, *, axis: int, nan_mode: str = "PROPAGATE", version: str = "1.0") -> np.ndarray:
    """REDUCE_MIN (0.30 §2.9.4): ``apply_min_s`` fold; NaN per ``nan_mode``. i8, i16, i32, fp16, bf16, fp32."""
    return _reduce_minmax("REDUCE_MIN", input, axis, nan_mode, version, False)


def reduce_product(input: ArrayLike, *, axis: int, version: str = "1.0") -> np.ndarray:
    """REDUCE_PRODUCT (0.30 §2.9.5): product along ``axis``. fp16, bf16, fp32."""
    a, t = _prepare("REDUCE_PRODUCT", input, axis, [(f,) for f in FLOATS], version)
    with np.errstate(all="ignore"):
        return round_float(np.prod(a.astype(np.float64), axis=axis, keepdims=True), t)


def reduce_sum(input: ArrayLike, *, axis: int, version: str = "1.0") -> np.ndarray:
    """REDUCE_SUM (0.30 §2.9.6): sum along ``axis``; for i32 every partial sum must fit (REQUIRE).
    i32, fp16, bf16, fp32."""
    op = "REDUCE_SUM"
    a, t = _prepare(op, input, axis, [("int32",), *[(f,) for f in FLOATS]], version)
    if is_float(t):
        with np.errstate(all="ignore"):
            return round_float(np.sum(a.astype(np.float64), axis=axis, keepdims=True), t)
    partial = np.cumsum(a.astype(_I64), axis=axis)
    lo, hi, _ = INT_RANGES["int32"]
    require((partial >= lo) & (partial <= hi), "acc >= minimum_s<i32_t>() && acc <= maximum_s<i32_t>()", op)
    return np.take(partial, [-1], axis=axis).astype(np.int32)


def argmax(input: ArrayLike, *, axis: int, nan_mode: str = "PROPAGATE", version: str = "1.0") -> np.ndarray:
    """ARGMAX (1.0 Tensor operators; 0.30 §2.3.1): index of the first maximum along ``axis`` → i32,
    output rank = rank - 1. Types: i8, i16, fp16, bf16, fp32.

    1.0: ``apply_max_s(value, max_value, nan_mode)`` scan; under PROPAGATE the first NaN wins, under
    IGNORE NaNs are skipped (all-NaN → 0). 0.30: ``value > max_value`` from ``minimum<in_t>``, so NaNs
    are never selected and ERROR_IF(rank > 4).
    """
    op = "ARGMAX"
    check_nan_mode(op, nan_mode, version)
    a, t = tensor(input, op, "input")
    check_types(op, (t,), [("int8",), ("int16",), *[(f,) for f in FLOATS]], "in_t")
    error_if(axis < 0 or axis >= a.ndim or (version == "0.30" and a.ndim > 4),
             "axis < 0 || axis >= rank(shape1)" + (" || rank(shape1) > 4" if version == "0.30" else ""), op)
    x = np.moveaxis(a.astype(np.float64) if is_float(t) else a.astype(_I64), axis, 0)
    idx = np.zeros(x.shape[1:], np.int64)
    if not is_float(t):
        best = np.full(x.shape[1:], INT_RANGES[t][0], _I64)
        for i, value in enumerate(x):
            better = value > best
            best = np.where(better, value, best)
            idx = np.where(better, i, idx)
        return idx.astype(np.int32)
    if version == "0.30":
        best = np.full(x.shape[1:], -np.inf)
        for i, value in enumerate(x):
            better = value > best  # NaN never compares greater
            best = np.where(better, value, best)
            idx = np.where(better, i, idx)
        return idx.astype(np.int32)
    best = np.full(x.shape[1:], np.nan if nan_mode == "IGNORE" else -np.inf)
    for i, value in enumerate(x):
        result = float_max(value, best, nan_mode)
        with np.errstate(invalid="ignore"):
            changed = (result != best) & ~(np.isnan(result) & np.isnan(best))
        best = np.where(changed, result, best)
        idx = np.where(changed, i, idx)
    return idx.astype(np.int32)
