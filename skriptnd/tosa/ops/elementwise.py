"""Element-wise TOSA operators: activation (CLAMP, ERF, SIGMOID, TANH), binary, unary, ternary, comparison.

Sections: TOSA 0.30 §2.4 (activation), §2.5 (binary), §2.6 (unary), §2.7 (SELECT), §2.8 (comparison);
TOSA 1.0 chapters of the same names. Every function takes ``version="1.0"`` (default) or ``"0.30"``.
Integer results are exact (int64 intermediates, REQUIRE on overflow as the pseudocode says);
floating-point results are computed in float64 and rounded once to the output type.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import (
    FLOATS,
    broadcast,
    broadcast_shape,
    check_nan_mode,
    check_types,
    const_scalar,
    float_max,
    float_min,
    tensor,
)
from skriptnd.tosa.ops.dtypes import INT_RANGES, is_float, round_float, wrap
from skriptnd.tosa.ops.errors import TosaError, check_version, error_if, require

__all__ = [
    "clamp", "erf", "sigmoid", "tanh", "add", "arithmetic_right_shift", "bitwise_and", "bitwise_or",
    "bitwise_xor", "intdiv", "logical_and", "logical_left_shift", "logical_right_shift", "logical_or",
    "logical_xor", "maximum", "minimum", "mul", "pow", "sub", "table", "abs", "bitwise_not", "ceil", "clz",
    "cos", "exp", "floor", "log", "logical_not", "negate", "reciprocal", "rsqrt", "sin", "select", "equal",
    "greater", "greater_equal", "apply_lookup",
]

_I64 = np.int64
_INTS = ("int8", "int16", "int32")


def _only_in(op: str, version: str, wanted: str = "1.0") -> None:
    check_version(version)
    if version != wanted:
        raise TosaError(f"{op} is not an operator of TOSA {version}", op)


def _float_unary(op: str, x: ArrayLike, fn, version: str) -> np.ndarray:
    a, t = tensor(x, op, "input1")
    check_types(op, (t,), [(f,) for f in FLOATS], "in_out_t")
    with np.errstate(all="ignore"):
        r = fn(a.astype(np.float64))
    return round_float(r, t)


# ---------------------------------------------------------------------------------------------
# Activation functions


def clamp(input: ArrayLike, *, min_val: float, max_val: float, nan_mode: str = "PROPAGATE",
          version: str = "1.0") -> np.ndarray:
    """CLAMP (1.0 Activation functions; 0.30 §2.4.1): ``apply_clip_s(value, min_val, max_val, nan_mode)``.

    ERROR_IF(max_val < min_val); 1.0 also ERROR_IF a bound is NaN. Types: i8, i16, fp16, bf16, fp32.
    Float ties follow apply_max_s/apply_min_s (max(-0, +0) = -0, min(-0, +0) = +0); with ``IGNORE`` a
    NaN input becomes ``min_val``.
    """
    op = "CLAMP"
    check_nan_mode(op, nan_mode, version)
    a, t = tensor(input, op, "input")
    check_types(op, (t,), [("int8",), ("int16",), *[(f,) for f in FLOATS]], "in_out_t")
    if is_float(t):
        lo = float(round_float(np.float64(min_val), t))
        hi = float(round_float(np.float64(max_val), t))
        if version == "1.0":
            error_if(math.isnan(lo) or math.isnan(hi), "is_a_NaN(min_val) || is_a_NaN(max_val)", op)
        error_if(hi < lo, "max_val < min_val", op)
        v = a.astype(np.float64)
        lo_a, hi_a = np.full_like(v, lo), np.full_like(v, hi)
        v = float_max(v, lo_a, nan_mode)
        v = float_min(v, hi_a, nan_mode)
        return round_float(v, t)
    lo_t, hi_t, _ = INT_RANGES[t]
    error_if(not (lo_t <= int(min_val) <= hi_t and lo_t <= int(max_val) <= hi_t),
             f"min_val/max_val are not {t} values", op)
    error_if(max_val < min_val, "max_val < min_val", op)
    return np.clip(a.astype(_I64), int(min_val), int(max_val)).astype(a.dtype)


def erf(input: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """ERF (1.0 Activation functions; not in 0.30): the Gauss error function. fp16, bf16, fp32."""
    _only_in("ERF", version)
    return _float_unary("ERF", input, np.frompyfunc(math.erf, 1, 1), version)


def sigmoid(input: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """SIGMOID (1.0 Activation functions; 0.30 §2.4.2): 1 / (1 + exp(-x)). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("SIGMOID", input, lambda v: 1.0 / (1.0 + np.exp(-v)), version)


def tanh(input: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """TANH (1.0 Activation functions; 0.30 §2.4.3): hyperbolic tangent. fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("TANH", input, np.tanh, version)


# ---------------------------------------------------------------------------------------------
# Elementwise binary operators


def _binary(op: str, input1: ArrayLike, input2: ArrayLike, rows: list[tuple[str, ...]]):
    a, ta = tensor(input1, op, "input1")
    b, tb = tensor(input2, op, "input2")
    error_if(ta != tb, f"input types differ ({ta}, {tb})", op)
    check_types(op, (ta,), rows, "in_out_t")
    a, b = broadcast(op, a, b)
    return a, b, ta


def _int_result(op: str, c: np.ndarray, t: str) -> np.ndarray:
    lo, hi, _ = INT_RANGES[t]
    require((c >= lo) & (c <= hi), f"result >= minimum_s<{t}>() && result <= maximum_s<{t}>()", op)
    return c.astype(np.dtype(np.int32) if t == "int32" else np.dtype(t))


def add(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """ADD (0.30 §2.5.1): ``apply_add_s``; int32 overflow is REQUIRE (unpredictable). i32, fp16, bf16, fp32."""
    check_version(version)
    a, b, t = _binary("ADD", input1, input2, [("int32",), *[(f,) for f in FLOATS]])
    if is_float(t):
        with np.errstate(all="ignore"):
            return round_float(a.astype(np.float64) + b.astype(np.float64), t)
    return _int_result("ADD", a.astype(_I64) + b.astype(_I64), t)


def sub(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """SUB (0.30 §2.5.16): ``apply_sub_s``; int32 overflow is REQUIRE (unpredictable). i32, fp16, bf16, fp32."""
    check_version(version)
    a, b, t = _binary("SUB", input1, input2, [("int32",), *[(f,) for f in FLOATS]])
    if is_float(t):
        with np.errstate(all="ignore"):
            return round_float(a.astype(np.float64) - b.astype(np.float64), t)
    return _int_result("SUB", a.astype(_I64) - b.astype(_I64), t)


def arithmetic_right_shift(input1: ArrayLike, input2: ArrayLike, *, round: bool = False, version: str = "1.0") -> np.ndarray:
    """ARITHMETIC_RIGHT_SHIFT (0.30 §2.5.2): floor shift; ``round`` adds the last bit shifted out
    (round half toward +inf). REQUIRE 0 <= shift <= width-1. i8, i16, i32."""
    op = "ARITHMETIC_RIGHT_SHIFT"
    check_version(version)
    a, b, t = _binary(op, input1, input2, [(i,) for i in _INTS])
    bits = INT_RANGES[t][2]
    v1, v2 = a.astype(_I64), b.astype(_I64)
    require((v2 >= 0) & (v2 <= bits - 1), f"0 <= value2 && value2 <= {bits - 1}", op)
    r = v1 >> v2
    if round:
        r = r + ((v2 > 0) & (((v1 >> np.maximum(v2 - 1, 0)) & 1) != 0))
    return np.clip(r, *INT_RANGES[t][:2]).astype(a.dtype)


def _bitwise(op: str, fn, input1: ArrayLike, input2: ArrayLike, version: str) -> np.ndarray:
    check_version(version)
    a, b, _ = _binary(op, input1, input2, [(i,) for i in _INTS])
    return fn(a, b).astype(a.dtype)


def bitwise_and(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """BITWISE_AND (0.30 §2.5.3). i8, i16, i32."""
    return _bitwise("BITWISE_AND", np.bitwise_and, input1, input2, version)


def bitwise_or(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """BITWISE_OR (0.30 §2.5.4). i8, i16, i32."""
    return _bitwise("BITWISE_OR", np.bitwise_or, input1, input2, version)


def bitwise_xor(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """BITWISE_XOR (0.30 §2.5.5). i8, i16, i32."""
    return _bitwise("BITWISE_XOR", np.bitwise_xor, input1, input2, version)


def intdiv(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """INTDIV (0.30 §2.5.6): division truncating toward zero. REQUIRE(value2 != 0) and the quotient
    representable (INT32_MIN / -1 is unpredictable). i32."""
    op = "INTDIV"
    check_version(version)
    a, b, t = _binary(op, input1, input2, [("int32",)])
    v1, v2 = a.astype(_I64), b.astype(_I64)
    require(v2 != 0, "value2 != 0", op)
    q = np.sign(v1) * np.sign(v2) * (np.abs(v1) // np.abs(v2))
    require(q <= INT_RANGES[t][1], "(int64_t)value1 / value2 <= maximum_s<in_out_t>()", op)
    return q.astype(np.int32)


def _logical(op: str, fn, input1: ArrayLike, input2: ArrayLike, version: str) -> np.ndarray:
    check_version(version)
    a, b, _ = _binary(op, input1, input2, [("bool",)])
    return fn(a != 0, b != 0)


def logical_and(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_AND (0.30 §2.5.7). bool."""
    return _logical("LOGICAL_AND", np.logical_and, input1, input2, version)


def logical_or(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_OR (0.30 §2.5.10). bool."""
    return _logical("LOGICAL_OR", np.logical_or, input1, input2, version)


def logical_xor(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_XOR (0.30 §2.5.11). bool."""
    return _logical("LOGICAL_XOR", np.logical_xor, input1, input2, version)


def _shift_limit(t: str, version: str) -> int:
    # 1.0: the shift must be below the operand width; 0.30: 0..31 for every width.
    return INT_RANGES[t][2] - 1 if version == "1.0" else 31


def logical_left_shift(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_LEFT_SHIFT (0.30 §2.5.8): ``value1 << value2`` keeping the low bits (wraps).
    REQUIRE 0 <= shift <= 31 (0.30) / <= width-1 (1.0). i8, i16, i32."""
    op = "LOGICAL_LEFT_SHIFT"
    check_version(version)
    a, b, t = _binary(op, input1, input2, [(i,) for i in _INTS])
    v2 = b.astype(_I64)
    lim = _shift_limit(t, version)
    require((v2 >= 0) & (v2 <= lim), f"0 <= value2 && value2 <= {lim}", op)
    return wrap(a.astype(_I64) << v2, INT_RANGES[t][2]).astype(a.dtype)


def logical_right_shift(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_RIGHT_SHIFT (0.30 §2.5.9): shift of the value read as unsigned of the same width.
    REQUIRE 0 <= shift <= 31 (0.30) / <= width-1 (1.0). i8, i16, i32."""
    op = "LOGICAL_RIGHT_SHIFT"
    check_version(version)
    a, b, t = _binary(op, input1, input2, [(i,) for i in _INTS])
    bits = INT_RANGES[t][2]
    v2 = b.astype(_I64)
    lim = _shift_limit(t, version)
    require((v2 >= 0) & (v2 <= lim), f"0 <= value2 && value2 <= {lim}", op)
    u = a.astype(_I64) & _I64((1 << bits) - 1)
    return wrap(u >> v2, bits).astype(a.dtype)


def _minmax(op: str, input1: ArrayLike, input2: ArrayLike, nan_mode: str, version: str, is_max: bool) -> np.ndarray:
    check_nan_mode(op, nan_mode, version)
    a, b, t = _binary(op, input1, input2, [("int32",), *[(f,) for f in FLOATS]])
    if is_float(t):
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        return round_float(float_max(fa, fb, nan_mode) if is_max else float_min(fa, fb, nan_mode), t)
    return (np.maximum(a, b) if is_max else np.minimum(a, b)).astype(a.dtype)


def maximum(input1: ArrayLike, input2: ArrayLike, *, nan_mode: str = "PROPAGATE", version: str = "1.0") -> np.ndarray:
    """MAXIMUM (0.30 §2.5.12): ``apply_max_s``; ties return input1 (max(-0, +0) = -0); NaN per
    ``nan_mode`` (1.0 only; 0.30 always propagates). i32, fp16, bf16, fp32."""
    return _minmax("MAXIMUM", input1, input2, nan_mode, version, True)


def minimum(input1: ArrayLike, input2: ArrayLike, *, nan_mode: str = "PROPAGATE", version: str = "1.0") -> np.ndarray:
    """MINIMUM (0.30 §2.5.13): ``apply_min_s``; ties return input2 (min(-0, +0) = +0); NaN per
    ``nan_mode`` (1.0 only). i32, fp16, bf16, fp32."""
    return _minmax("MINIMUM", input1, input2, nan_mode, version, False)


def mul(input1: ArrayLike, input2: ArrayLike, shift: ArrayLike = 0, *, version: str = "1.0") -> np.ndarray:
    """MUL (0.30 §2.5.14): i8×i8→i32, i16×i16→i32, i32×i32→i32, fp16, bf16, fp32.

    For i32 with shift > 0: ``(product + (1 << (shift-1))) >> shift`` in 64 bits, REQUIRE the result
    fits int32; otherwise the low 32 bits of the product (wraps). ``shift`` is an i8 tensor of shape [1]
    in TOSA 1.0 (REQUIRE 0 <= shift <= 63 and shift == 0 unless i32) and a uint6 attribute in 0.30
    (ERROR_IF(in_t != int32_t && shift > 0)).
    """
    op = "MUL"
    check_version(version)
    a, b, t = _binary(op, input1, input2,
                      [("int8",), ("int16",), ("int32",), *[(f,) for f in FLOATS]])
    s = int(const_scalar(shift, op, "shift", "int8", version))
    if version == "1.0":
        require(0 <= s <= 63, "0 <= shift && shift <= 63", op)
        require(t == "int32" or s == 0, "is_same<in_t,int32_t>() || shift == 0", op)
    else:
        error_if(not 0 <= s <= 63, "shift is not a uint6_t value", op)
        error_if(t != "int32" and s > 0, "in_t != int32_t && shift > 0", op)
    if is_float(t):
        with np.errstate(all="ignore"):
            return round_float(a.astype(np.float64) * b.astype(np.float64), t)
    product = a.astype(_I64) * b.astype(_I64)
    if t == "int32" and s > 0:
        product = (product + (_I64(1) << _I64(s - 1))) >> _I64(s)
        require((product >= -(1 << 31)) & (product <= (1 << 31) - 1),
                "product >= minimum_s<i32_t>() && product <= maximum_s<i32_t>()", op)
        return product.astype(np.int32)
    return wrap(product, 32).astype(np.int32)


def pow(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:  # noqa: A001
    """POW (0.30 §2.5.15): ``input1 ** input2``. fp16, bf16, fp32.

    TOSA 1.0: the result is unpredictable unless input1 > 0, or input1 == 0 and input2 > 0, with both
    operands finite (REQUIRE, as the reference model enforces it). 0.30: no domain restriction (a
    negative base with a non-integer exponent gives NaN)."""
    check_version(version)
    a, b, t = _binary("POW", input1, input2, [(f,) for f in FLOATS])
    if version == "1.0":
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        require(np.isfinite(fa) & np.isfinite(fb), "isfinite(input1) && isfinite(input2)", "POW")
        require((fa > 0) | ((fa == 0) & (fb > 0)), "input1 > 0 || (input1 == 0 && input2 > 0)", "POW")
    with np.errstate(all="ignore"):
        return round_float(np.power(a.astype(np.float64), b.astype(np.float64)), t)


def apply_lookup(table: np.ndarray, value: np.ndarray, op: str = "TABLE") -> np.ndarray:
    """``apply_lookup_s`` (0.30 §1.9.5): 513-entry int16 table, 9.7 fixed-point index, linear
    interpolation; REQUIRE each slope fits int16. Returns the 16.7 fixed-point int32 result."""
    t = np.asarray(table, _I64)
    cv = np.clip(np.asarray(value, _I64), -32768, 32767)
    index = (cv + 32768) >> 7
    fraction = cv & 0x7F
    base = t[index]
    slope = t[index + 1] - base
    require((slope >= -32768) & (slope <= 32767),
            "slope >= minimum_s<int16_t>() && slope <= maximum_s<int16_t>()", op)
    return ((base << 7) + slope * fraction).astype(np.int32)


def table(input1: ArrayLike, table: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """TABLE (0.30 §2.5.17): i8 input with a 256-entry i8 table → i8 (``table[value + 128]``);
    i16 input with a 513-entry i16 table → i32 via ``apply_lookup_s``.
    REQUIRE(length(table) == TABLE_SIZE)."""
    op = "TABLE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    tab, tt = tensor(table, op, "table")
    check_types(op, (t, tt), [("int8", "int8"), ("int16", "int16")], "in_t, table_t")
    error_if(tab.ndim != 1, "rank(table) != 1", op)
    size = 256 if t == "int8" else 513
    require(tab.shape[0] == size, f"length(table) == {size}", op)
    if t == "int8":
        return tab[a.astype(_I64) + 128].astype(np.int8)
    return apply_lookup(tab, a, op)


# ---------------------------------------------------------------------------------------------
# Elementwise unary operators


def abs(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:  # noqa: A001
    """ABS (0.30 §2.6.1): i32 (ABS(INT32_MIN) is REQUIRE-unpredictable), fp16, bf16, fp32 (-0 → +0)."""
    op = "ABS"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), [("int32",), *[(f,) for f in FLOATS]], "in_out_t")
    if is_float(t):
        return round_float(np.abs(a.astype(np.float64)), t)
    return _int_result(op, np.abs(a.astype(_I64)), t)


def bitwise_not(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """BITWISE_NOT (0.30 §2.6.2). i8, i16, i32."""
    check_version(version)
    a, t = tensor(input1, "BITWISE_NOT", "input1")
    check_types("BITWISE_NOT", (t,), [(i,) for i in _INTS], "in_out_t")
    return np.invert(a)


def ceil(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """CEIL (0.30 §2.6.3). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("CEIL", input1, np.ceil, version)


def clz(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """CLZ (0.30 §2.6.4): count leading zeros of the 32-bit pattern; clz(0) = 32. i32."""
    op = "CLZ"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), [("int32",)], "in_out_t")
    v = a.astype(_I64) & _I64(0xFFFFFFFF)
    n = np.zeros(v.shape, _I64)
    for s in (16, 8, 4, 2, 1):
        big = v >= (_I64(1) << _I64(s))
        n = n + np.where(big, s, 0)
        v = np.where(big, v >> _I64(s), v)
    bit_length = n + (v > 0)
    return (32 - bit_length).astype(np.int32)


def cos(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """COS (1.0 Elementwise unary; not in 0.30). fp16, bf16, fp32."""
    _only_in("COS", version)
    return _float_unary("COS", input1, np.cos, version)


def exp(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """EXP (0.30 §2.6.5). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("EXP", input1, np.exp, version)


def floor(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """FLOOR (0.30 §2.6.6). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("FLOOR", input1, np.floor, version)


def log(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOG (0.30 §2.6.7): ``apply_log``: log(±0) = -inf, log(x < 0) = NaN. fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("LOG", input1, np.log, version)


def logical_not(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """LOGICAL_NOT (0.30 §2.6.8). bool."""
    check_version(version)
    a, t = tensor(input1, "LOGICAL_NOT", "input1")
    check_types("LOGICAL_NOT", (t,), [("bool",)], "in_out_t")
    return a == 0


def negate(input1: ArrayLike, input1_zp: ArrayLike = 0, output_zp: ArrayLike = 0, *, version: str = "1.0") -> np.ndarray:
    """NEGATE (0.30 §2.6.9): ``clip(-(value - input1_zp) + output_zp)`` in an i32 accumulator,
    saturating to the type (i8 NEGATE(-128) = 127); i32 NEGATE(INT32_MIN) is REQUIRE-unpredictable.
    ERROR_IF a zero point is non-zero for a type other than i8. The zero points are [1] tensors of the
    input type in 1.0 and attributes in 0.30. i8, i16, i32, fp16, bf16, fp32."""
    op = "NEGATE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), [*[(i,) for i in _INTS], *[(f,) for f in FLOATS]], "in_out_t")
    izp = const_scalar(input1_zp, op, "input1_zp", t, version)
    ozp = const_scalar(output_zp, op, "output_zp", t, version)
    error_if(t != "int8" and izp != 0, "!is_same<in_out_t,i8_t>() && input1_zp != 0", op)
    error_if(t != "int8" and ozp != 0, "!is_same<in_out_t,i8_t>() && output_zp != 0", op)
    if is_float(t):
        return round_float(-a.astype(np.float64), t)
    lo, hi, _ = INT_RANGES["int32"]
    v = a.astype(_I64) - int(izp)
    require((v >= lo) & (v <= hi), "value1 - input1_zp fits acc_t", op)
    v = -v
    require((v >= lo) & (v <= hi), "0 - value fits acc_t", op)
    v = v + int(ozp)
    require((v >= lo) & (v <= hi), "value + output_zp fits acc_t", op)
    return np.clip(v, *INT_RANGES[t][:2]).astype(a.dtype)


def reciprocal(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """RECIPROCAL (0.30 §2.6.10): 1 / x (±0 → ±inf). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("RECIPROCAL", input1, lambda v: 1.0 / v, version)


def rsqrt(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """RSQRT (0.30 §2.6.11): NaN for x < 0, else 1 / sqrt(x) (RSQRT(-0) = -inf). fp16, bf16, fp32."""
    check_version(version)
    return _float_unary("RSQRT", input1, lambda v: np.where(v < 0, np.nan, 1.0 / np.sqrt(v)), version)


def sin(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """SIN (1.0 Elementwise unary; not in 0.30). fp16, bf16, fp32."""
    _only_in("SIN", version)
    return _float_unary("SIN", input1, np.sin, version)


# ---------------------------------------------------------------------------------------------
# Ternary and comparison operators


def select(input1: ArrayLike, input2: ArrayLike, input3: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """SELECT (0.30 §2.7.1): ``input1 ? input2 : input3`` with broadcasting of all three.
    cmp_t bool; in_out_t bool, i8, i16, i32, fp16, bf16, fp32."""
    op = "SELECT"
    check_version(version)
    c, tc = tensor(input1, op, "input1")
    a, ta = tensor(input2, op, "input2")
    b, tb = tensor(input3, op, "input3")
    error_if(ta != tb, f"input2/input3 types differ ({ta}, {tb})", op)
    check_types(op, (tc, ta), [("bool", x) for x in ("bool", *_INTS, *FLOATS)], "cmp_t, in_out_t")
    shape = broadcast_shape(op, broadcast_shape(op, c.shape, a.shape), b.shape)
    out = np.where(np.broadcast_to(c != 0, shape), np.broadcast_to(a, shape), np.broadcast_to(b, shape))
    return round_float(out, ta) if ta == "bf16" else out.astype(a.dtype)


def _compare(op: str, fn, input1: ArrayLike, input2: ArrayLike, version: str) -> np.ndarray:
    check_version(version)
    a, b, t = _binary(op, input1, input2, [("int32",), *[(f,) for f in FLOATS]])
    if is_float(t):
        with np.errstate(invalid="ignore"):
            return fn(a.astype(np.float64), b.astype(np.float64))  # NaN compares false
    return fn(a.astype(_I64), b.astype(_I64))


def equal(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """EQUAL (0.30 §2.8.1): false if either is NaN; -0 == +0. i32, fp16, bf16, fp32 → bool."""
    return _compare("EQUAL", np.equal, input1, input2, version)


def greater(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """GREATER (0.30 §2.8.2): false if either is NaN. i32, fp16, bf16, fp32 → bool."""
    return _compare("GREATER", np.greater, input1, input2, version)


def greater_equal(input1: ArrayLike, input2: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """GREATER_EQUAL (0.30 §2.8.3): false if either is NaN. i32, fp16, bf16, fp32 → bool."""
    return _compare("GREATER_EQUAL", np.greater_equal, input1, input2, version)

