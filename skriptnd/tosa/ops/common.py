"""Helpers shared by the operator families: operand reading, type rows, broadcasting (TOSA 1.0 §2.2)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.dtypes import INT_RANGES, BF16Array, is_float, tosa_type
from skriptnd.tosa.ops.errors import TosaError, check_version, error_if

__all__ = ["tensor", "check_types", "broadcast_shape", "broadcast", "const_scalar", "shape_operand",
           "check_axis", "NAN_MODES", "check_nan_mode", "FLOATS", "ALL_TYPES"]

FLOATS = ("fp16", "bf16", "fp32")
ALL_TYPES = ("bool", "int8", "int16", "int32", "fp16", "bf16", "fp32")
NAN_MODES = ("PROPAGATE", "IGNORE")


def tensor(x: ArrayLike, op: str, name: str = "input") -> tuple[np.ndarray, str]:
    """Read an operand: a plain ndarray (bf16 carried as float32) and its TOSA type."""
    if isinstance(x, BF16Array):
        return np.asarray(x).view(np.ndarray), "bf16"
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":  # ml_dtypes
        return a.astype(np.float32), "bf16"
    try:
        t = tosa_type(a)
    except TypeError:
        raise TosaError(f"{name}: numpy dtype {a.dtype} is not a TOSA type", op) from None
    if t == "int48" and a.size:
        lo, hi, _ = INT_RANGES["int48"]
        if int(a.min()) < lo or int(a.max()) > hi:
            raise ValueError(f"{op}: {name} holds values outside int48")
    return a, t


def check_types(op: str, row: tuple[str, ...], rows: Iterable[tuple[str, ...]], what: str) -> None:
    """ERROR_IF the operand types are not a row of the operator's supported-types table."""
    if tuple(row) not in set(rows):
        raise TosaError(f"({what}) = {tuple(row)} is not a supported type combination", op)


def broadcast_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """``broadcast_shape`` (TOSA 1.0): equal ranks; a dimension broadcasts only from 1."""
    out = list(shapes[0])
    for s in shapes[1:]:
        error_if(len(s) != len(out), "rank(shape1) != rank(shape2)", op)
        for i, d in enumerate(s):
            if out[i] == 1:
                out[i] = d
            else:
                error_if(d != 1 and d != out[i], f"shape2[{i}] != 1 && shape2[{i}] != shape[{i}]", op)
    return tuple(int(d) for d in out)


def broadcast(op: str, *arrays: np.ndarray) -> list[np.ndarray]:
    """Broadcast operands to their common TOSA broadcast shape."""
    shape = broadcast_shape(op, *(a.shape for a in arrays))
    return [np.broadcast_to(a, shape) for a in arrays]


def const_scalar(x: ArrayLike, op: str, name: str, t: str, version: str) -> int | float:
    """A single-value operand: TOSA 1.0 passes a constant tensor of shape [1] and type ``t``
    (a plain Python number is accepted too); TOSA 0.30 passes an attribute value."""
    if isinstance(x, (bool, int, float, np.number, np.bool_)) and not isinstance(x, np.ndarray):
        return x.item() if isinstance(x, (np.number, np.bool_)) else x
    a, at = tensor(x, op, name)
    if version == "1.0":
        error_if(a.shape != (1,), f"shape({name}) != [1]", op)
        error_if(at != t, f"{name} has type {at}, expected {t}", op)
    else:
        error_if(a.size != 1, f"{name} must be a single value", op)
    return a.reshape(-1)[0].item()


def shape_operand(x: ArrayLike, op: str, name: str) -> list[int]:
    """A ``shape_t`` operand (TOSA 1.0) or an int32 list attribute (TOSA 0.30)."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TosaError(f"{name} must hold integers", op)
    return [int(v) for v in a.reshape(-1)]


def check_axis(op: str, axis: int, rank: int) -> int:
    error_if(axis < 0 or axis >= rank, "axis < 0 || axis >= rank(shape1)", op)
    return int(axis)


def check_nan_mode(op: str, nan_mode: str, version: str) -> str:
    check_version(version)
    if version == "0.30":
        error_if(nan_mode != "PROPAGATE", "nan_mode does not exist in TOSA 0.30 (NaN always propagates)", op)
    error_if(nan_mode not in NAN_MODES, f"nan_mode {nan_mode!r} is not PROPAGATE or IGNORE", op)
    return nan_mode


def float_max(a: np.ndarray, b: np.ndarray, nan_mode: str) -> np.ndarray:
    """``apply_max_s`` for floats: NaN per ``nan_mode``, ties return ``a`` (so max(-0, +0) = -0)."""
    r = np.where(a >= b, a, b)
    return _nan_select(a, b, r, nan_mode)


def float_min(a: np.ndarray, b: np.ndarray, nan_mode: str) -> np.ndarray:
    """``apply_min_s`` for floats: NaN per ``nan_mode``, ties return ``b`` (so min(-0, +0) = +0)."""
    r = np.where(a < b, a, b)
    return _nan_select(a, b, r, nan_mode)


def _nan_select(a: np.ndarray, b: np.ndarray, r: np.ndarray, nan_mode: str) -> np.ndarray:
    na, nb = np.isnan(a), np.isnan(b)
    if nan_mode == "PROPAGATE":
        return np.where(na | nb, np.nan, r)
    # IGNORE: compare_nan returns the non-NaN operand (b when a is NaN, a otherwise)
    return np.where(na, b, np.where(nb, a, r))


def is_float_type(t: str) -> bool:
    return is_float(t)
