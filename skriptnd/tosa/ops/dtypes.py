"""TOSA number formats carried by numpy arrays (TOSA 1.0 §1.5 "Number formats", 0.30 §1.8.5 Table 4).

| TOSA type | numpy carrier                                                   |
|-----------|-----------------------------------------------------------------|
| bool_t    | ``np.bool_`` (any non-zero value is accepted as true on input)  |
| i8/i16/i32| ``np.int8`` / ``np.int16`` / ``np.int32``                       |
| i48       | ``np.int64`` holding values in [-2^47, 2^47 - 1]                 |
| u8/u16    | ``np.uint8`` / ``np.uint16`` (TOSA 0.30 RESCALE only)           |
| fp16/fp32 | ``np.float16`` / ``np.float32``                                 |
| bf16      | :class:`BF16Array`: float32 values that are bf16-representable  |
|           | (``ml_dtypes.bfloat16`` arrays are accepted on input as well)   |

Integer arithmetic is done on int64 (or Python ints) and range-checked explicitly; floating-point
operators compute in float64 and round once to the output type with round-to-nearest-even
(overflow to ±inf, underflow to ±0 or subnormals).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = [
    "BF16Array", "bf16", "tosa_type", "type_name", "numpy_dtype", "is_float", "is_int", "minimum",
    "maximum", "round_float", "to_float64", "from_int", "wrap", "INT_RANGES", "FLOAT_TYPES",
]

INT_RANGES: dict[str, tuple[int, int, int]] = {  # name -> (minimum, maximum, bits)
    "int8": (-(1 << 7), (1 << 7) - 1, 8),
    "int16": (-(1 << 15), (1 << 15) - 1, 16),
    "int32": (-(1 << 31), (1 << 31) - 1, 32),
    "int48": (-(1 << 47), (1 << 47) - 1, 48),
    "uint8": (0, (1 << 8) - 1, 8),
    "uint16": (0, (1 << 16) - 1, 16),
}
FLOAT_TYPES = ("fp16", "bf16", "fp32")
_NUMPY = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int48": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(np.float32),
    "fp32": np.dtype(np.float32),
}
_FROM_NUMPY = {v: k for k, v in _NUMPY.items() if k != "bf16"}
_ALIASES = {"i8": "int8", "i16": "int16", "i32": "int32", "i48": "int48", "u8": "uint8", "u16": "uint16",
            "float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "bool_": "bool",
            "int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int48_t": "int48",
            "i8_t": "int8", "i16_t": "int16", "i32_t": "int32", "i48_t": "int48", "bool_t": "bool",
            "fp16_t": "fp16", "bf16_t": "bf16", "fp32_t": "fp32", "uint8_t": "uint8", "uint16_t": "uint16"}


class BF16Array(np.ndarray):
    """A float32 array whose values are all representable in bf16 (the bf16 carrier)."""


def bf16(values: ArrayLike) -> BF16Array:
    """Round ``values`` to bf16 (round to nearest even) and return them as a :class:`BF16Array`."""
    return np.asarray(_round_to_bits(np.asarray(values, np.float64), 8, -133, 127), np.float32).view(BF16Array)


def type_name(t: DTypeLike) -> str:
    """Normalise a TOSA type given as a name (``"int8"``, ``"i8_t"``, ``"bf16"``) or a numpy dtype."""
    if isinstance(t, str):
        name = _ALIASES.get(t, t)
        if name not in _NUMPY:
            raise TypeError(f"unknown TOSA type {t!r}")
        return name
    dt = np.dtype(t)
    if dt.name == "bfloat16":
        return "bf16"
    try:
        return _FROM_NUMPY[dt]
    except KeyError:
        raise TypeError(f"numpy dtype {dt} carries no TOSA type") from None


def tosa_type(x: ArrayLike) -> str:
    """The TOSA type an array carries (int64 is read as int48, :class:`BF16Array` as bf16)."""
    if isinstance(x, BF16Array):
        return "bf16"
    return type_name(np.asarray(x).dtype)


def numpy_dtype(t: str) -> np.dtype:
    """The numpy dtype that stores TOSA type ``t``."""
    return _NUMPY[type_name(t)]


def is_float(t: str) -> bool:
    return t in FLOAT_TYPES


def is_int(t: str) -> bool:
    return t in INT_RANGES


def minimum(t: str) -> float:
    """``minimum<t>``: the smallest value as stored (−inf for floating-point types)."""
    return -np.inf if is_float(t) else INT_RANGES[t][0]


def maximum(t: str) -> float:
    """``maximum<t>``: the largest value as stored (+inf for floating-point types)."""
    return np.inf if is_float(t) else INT_RANGES[t][1]


def to_float64(x: ArrayLike) -> np.ndarray:
    """Exact float64 copy of a floating-point (or integer) tensor."""
    return np.asarray(x).astype(np.float64)


def _round_to_bits(x: np.ndarray, precision: int, min_exp: int, max_exp: int) -> np.ndarray:
    """Round float64 ``x`` to a binary format with ``precision`` significand bits, smallest quantum
    2**min_exp and largest finite exponent max_exp, round to nearest even, overflow to ±inf."""
    x = np.asarray(x, np.float64)
    out = x.copy()
    finite = np.isfinite(x) & (x != 0)
    xf = x[finite]
    _, e = np.frexp(xf)  # |xf| = m * 2**e with 0.5 <= m < 1
    q = np.maximum(e - precision, min_exp)
    r = np.ldexp(np.rint(np.ldexp(xf, -q)), q)
    largest = np.ldexp(2.0 - 2.0 ** (1 - precision), max_exp)
    r = np.where(np.abs(r) > largest, np.copysign(np.inf, xf), r)
    r = np.where(r == 0, np.copysign(0.0, xf), r)
    out[finite] = r
    return out


def round_float(x: ArrayLike, t: str) -> np.ndarray:
    """Round float64 values once to floating-point type ``t`` (round to nearest even)."""
    x = np.asarray(x, np.float64)
    if t == "fp32":
        with np.errstate(over="ignore"):
            return x.astype(np.float32)
    if t == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16)
    if t == "bf16":
        return bf16(x)
    raise TypeError(f"{t} is not a floating-point type")


def from_int(x: ArrayLike, t: str) -> np.ndarray:
    """Store integer values (already in the range of ``t``) as type ``t``; bool: non-zero is true."""
    x = np.asarray(x)
    if t == "bool":
        return x != 0
    if is_float(t):
        return round_float(x.astype(np.float64), t)
    lo, hi, _ = INT_RANGES[t]
    if x.size and (int(x.min()) < lo or int(x.max()) > hi):
        raise OverflowError(f"value out of range for {t}")
    return x.astype(numpy_dtype(t))


def wrap(x: ArrayLike, bits: int, signed: bool = True) -> np.ndarray:
    """Two's complement truncation of integer values to ``bits`` bits (``truncate<out_t>``)."""
    x = np.asarray(x, np.int64)
    if bits >= 64:
        return x
    u = x & np.int64((1 << bits) - 1)
    if not signed:
        return u
    return np.where(u >= (1 << (bits - 1)), u - np.int64(1 << bits), u)
