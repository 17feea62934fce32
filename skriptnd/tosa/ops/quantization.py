"""Type conversion: CAST and RESCALE (TOSA 0.30 §2.13, 1.0 "Type conversion"), with the precision
scaling helpers ``apply_scale_32`` / ``apply_scale_16`` (0.30 §1.9.2, 1.0 "Precision scaling").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from skriptnd.tosa.ops.common import check_types, const_scalar, tensor
from skriptnd.tosa.ops.dtypes import INT_RANGES, from_int, is_float, numpy_dtype, round_float, type_name, wrap
from skriptnd.tosa.ops.errors import TosaError, check_version, error_if, require

__all__ = ["cast", "rescale", "apply_scale_32", "apply_scale_16", "ROUNDING_MODES"]

_I64 = np.int64
ROUNDING_MODES = ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND")


def apply_scale_32(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, double_round: bool = False, *,
                   version: str = "1.0", op: str = "RESCALE") -> np.ndarray:
    """``apply_scale_32``: ``(value * multiplier + round) >> shift`` in 64 bits, round = 1 << (shift-1)
    (round half toward +inf); ``double_round`` adds ±(1 << 30) when shift > 31.
    REQUIRE multiplier >= 0, 2 <= shift <= 62 and |value| < 2^(shift-1) (1.0) / 2^(shift-2) (0.30)."""
    v = np.asarray(value, _I64)
    m = np.asarray(multiplier, _I64)
    s = np.asarray(shift, _I64)
    require(m >= 0, "multiplier >= 0", op)
    require((s >= 2) & (s <= 62), "2 <= shift && shift <= 62", op)
    k = s - (1 if version == "1.0" else 2)
    lim = np.left_shift(_I64(1), k)
    require((v >= -lim) & (v < lim), f"value >= (-1 << (shift - {1 if version == '1.0' else 2})) && value < "
            f"(1 << (shift - {1 if version == '1.0' else 2}))", op)
    rnd = np.left_shift(_I64(1), s - 1)
    if double_round:
        rnd = rnd + np.where(s > 31, np.where(v >= 0, _I64(1 << 30), _I64(-(1 << 30))), _I64(0))
    return ((v * m + rnd) >> s).astype(_I64)


def apply_scale_16(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, *, op: str = "RESCALE") -> np.ndarray:
    """``apply_scale_16``: 48-bit value × 16-bit multiplier, round half up, REQUIRE the result fits int32."""
    v = np.asarray(value, _I64)
    m = np.asarray(multiplier, _I64)
    s = np.asarray(shift, _I64)
    require(m >= 0, "multiplier >= 0", op)
    require((s >= 2) & (s <= 62), "2 <= shift && shift <= 62", op)
    # |v| < 2^48 and |m| < 2^15: the product fits int64
    r = (v * m + np.left_shift(_I64(1), s - 1)) >> s
    require((r >= -(1 << 31)) & (r <= (1 << 31) - 1), "result >= minimum<int32_t> && result <= maximum<int32_t>", op)
    return r


# ---------------------------------------------------------------------------------------------
# CAST

_INTS = ("int8", "int16", "int32")
_CAST_030 = (
    [("bool", i) for i in _INTS] + [(i, o) for i in _INTS for o in ("bool", *_INTS) if i != o]
    + [(i, f) for i in _INTS for f in ("fp16", "bf16", "fp32")]
    + [(f, i) for f in ("fp16", "bf16", "fp32") for i in _INTS]
)
_CAST_10 = _CAST_030 + [("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp16"), ("fp32", "bf16")]


def cast(input: ArrayLike, *, output_dtype: DTypeLike, version: str = "1.0") -> np.ndarray:
    """CAST (0.30 §2.13.1): to bool: ``in != 0``; from bool: 0/1; to float: round to nearest even
    (overflow → ±inf); float → int: round to nearest (ties to even) then saturate; int → int:
    sign-extend or truncate (wrap). 1.0 adds fp16/bf16 ↔ fp32. NaN → int is unspecified (here 0)."""
    op = "CAST"
    check_version(version)
    a, ti = tensor(input, op, "input")
    to = type_name(output_dtype)
    check_types(op, (ti, to), _CAST_10 if version == "1.0" else _CAST_030, "in_t, out_t")
    if to == "bool":
        return a != 0
    if ti == "bool":
        return from_int((a != 0).astype(_I64), to)
    if is_float(to):
        return round_float(a.astype(np.float64), to)
    if is_float(ti):
        f = a.astype(np.float64)
        lo, hi, _ = INT_RANGES[to]
        r = np.clip(np.rint(np.nan_to_num(f, nan=0.0, posinf=hi, neginf=lo)), lo, hi)
        return r.astype(numpy_dtype(to))
    return wrap(a.astype(_I64), INT_RANGES[to][2]).astype(numpy_dtype(to))


# ---------------------------------------------------------------------------------------------
# RESCALE

_RESCALE_10 = [(i, o) for i in ("int8", "int16", "int32", "int48") for o in _INTS]
_RESCALE_030 = [
    ("int8", "int8"), ("int8", "int16"), ("int8", "int32"), ("int8", "uint8"),
    ("int16", "int8"), ("int16", "int16"), ("int16", "int32"), ("int16", "uint8"), ("int16", "uint16"),
    ("int32", "int8"), ("int32", "int16"), ("int32", "int32"),
    ("int48", "int8"), ("int48", "int16"), ("int48", "int32"),
    ("uint8", "int8"), ("uint8", "int16"), ("uint16", "int16"),
]


def rescale(input: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, input_zp: ArrayLike = 0, output_zp: ArrayLike = 0, *,
            output_dtype: DTypeLike, scale32: bool, rounding_mode: str = "SINGLE_ROUND", per_channel: bool = False,
            input_unsigned: bool = False, output_unsigned: bool = False, double_round: bool | None = None,
            version: str = "1.0") -> np.ndarray:
    """RESCALE (0.30 §2.13.2; 1.0 "Type conversion"): ``clip(apply_scale(value - input_zp) + output_zp)``.

    ``multiplier`` (i32 if ``scale32`` else i16 values) and ``shift`` (i8) have NC = shape[-1] entries
    when ``per_channel`` else 1. TOSA 1.0: types i8/i16/i32/i48 → i8/i16/i32, ``rounding_mode`` SINGLE_ROUND,
    DOUBLE_ROUND or INEXACT_ROUND (computed here as single rounding, which the reference model also
    does), ``input_unsigned``/``output_unsigned`` reinterpret i8/i16 data as u8/u16 (unsigned outputs are
    returned as the same bit pattern in i8/i16), zero points are [1] tensors. TOSA 0.30: uint8/uint16
    tensor types, ``double_round`` bool, zero points as attributes, and the value range of
    ``apply_scale_32`` is 2^(shift-2) instead of 2^(shift-1).
    """
    op = "RESCALE"
    check_version(version)
    a, ti = tensor(input, op, "input")
    to = type_name(output_dtype)
    if version == "0.30":
        if double_round is None:
            double_round = rounding_mode == "DOUBLE_ROUND"
        error_if(input_unsigned or output_unsigned, "input_unsigned/output_unsigned do not exist in TOSA 0.30", op)
        check_types(op, (ti, to), _RESCALE_030, "in_t, out_t")
    else:
        error_if(rounding_mode not in ROUNDING_MODES, f"rounding_mode {rounding_mode!r} is not a rounding_mode_t", op)
        if double_round is not None:
            raise TosaError("double_round is a TOSA 0.30 attribute; use rounding_mode", op)
        double_round = rounding_mode == "DOUBLE_ROUND"
        check_types(op, (ti, to), _RESCALE_10, "in_t, out_t")
    zp_in_type = ti
    izp = int(const_scalar(input_zp, op, "input_zp", zp_in_type, version))
    ozp = int(const_scalar(output_zp, op, "output_zp", to, version))
    mult = np.asarray(multiplier).reshape(-1).astype(_I64)
    shf = np.asarray(shift).reshape(-1).astype(_I64)
    nc = a.shape[-1] if (per_channel and a.ndim >= 1) else 1

    if version == "1.0":
        in_u = input_unsigned and ti in ("int8", "int16")
        error_if(ti != "int8" and not (ti == "int16" and input_unsigned) and izp != 0,
                 "!is_same<in_t,i8_t>() && (!is_same<in_t,i16_t>() || input_unsigned == false) && input_zp != 0", op)
        error_if(to != "int8" and not (to == "int16" and output_unsigned) and ozp != 0,
                 "!is_same<out_t,i8_t>() && (!is_same<out_t,i16_t>() || output_unsigned == false) && output_zp != 0",
                 op)
        error_if(ti == "int16" and input_unsigned and wrap(izp, 16, False) not in (0, 32768),
                 "is_same<in_t,i16_t>() && input_unsigned == true && input_zp != 0 && input_zp != 32768", op)
        error_if(to == "int16" and output_unsigned and wrap(ozp, 16, False) not in (0, 32768),
                 "is_same<out_t,i16_t>() && output_unsigned == true && output_zp != 0 && output_zp != 32768", op)
        error_if(scale32 and ti == "int48", "scale32 && is_same<in_t,i48_t>()", op)
        error_if(not scale32 and double_round, "!scale32 && (rounding_mode == DOUBLE_ROUND)", op)
        error_if(input_unsigned and output_unsigned, "input_unsigned && output_unsigned", op)
        error_if(to == "int32" and input_unsigned, "is_same<out_t,i32_t>() && input_unsigned", op)
        error_if(ti == "int32" and output_unsigned, "is_same<in_t,i32_t>() && output_unsigned", op)
        error_if(ti == "int48" and output_unsigned, "is_same<in_t,i48_t>() && output_unsigned", op)
        error_if(ti == "int48" and input_unsigned, "is_same<in_t,i48_t>() && input_unsigned", op)
        error_if(per_channel and a.ndim < 1, "per_channel && rank(input) < 1", op)
        bits_in = INT_RANGES[ti][2]
        value = wrap(a.astype(_I64), bits_in, signed=False) if in_u else a.astype(_I64)
        zp = wrap(izp, bits_in, signed=False) if in_u else izp
        out_range = INT_RANGES[{"int8": "uint8", "int16": "uint16"}[to]] if output_unsigned else INT_RANGES[to]
        ozp_ext = int(wrap(ozp, INT_RANGES[to][2], signed=False)) if output_unsigned else ozp
    else:
        error_if(ti not in ("int8", "uint8", "uint16") and izp != 0,
                 "in_t != int8_t && in_t != uint8_t && in_t != uint16_t && input_zp != 0", op)
        error_if(to not in ("int8", "uint8", "uint16") and ozp != 0,
                 "out_t != int8_t && out_t != uint8_t && out_t != uint16_t && output_zp != 0", op)
        # erratum: the text says (zp != 0 || zp != 32768), which is always true; read as &&
        error_if(ti == "uint16" and izp not in (0, 32768), "in_t == uint16_t && input_zp != 0 && input_zp != 32768", op)
        error_if(to == "uint16" and ozp not in (0, 32768), "out_t == uint16_t && output_zp != 0 && output_zp != 32768", op)
        error_if(scale32 and ti == "int48", "scale32 && in_t == int48_t", op)
        error_if(not scale32 and double_round, "!scale32 && double_round", op)
        value, zp = a.astype(_I64), izp
        out_range, ozp_ext = INT_RANGES[to], ozp
    error_if(mult.shape[0] != nc or shf.shape[0] != nc, f"multiplier and shift must have NC = {nc} entries", op)
    if scale32:
        error_if((mult < -(1 << 31)) | (mult > (1 << 31) - 1), "multiplier is not an int32_t value", op)
    else:
        error_if((mult < -(1 << 15)) | (mult > (1 << 15) - 1), "multiplier is not an int16_t value (scale32 == false)", op)
    error_if((shf < -128) | (shf > 127), "shift is not an int8_t value", op)

    value = value - zp
    if per_channel and a.ndim >= 1:
        m_b, s_b = mult, shf  # broadcast along the last axis
    else:
        m_b, s_b = mult[0], shf[0]
    if scale32:
        result = apply_scale_32(value, m_b, s_b, bool(double_round), version=version, op=op)
    else:
        result = apply_scale_16(value, m_b, s_b, op=op)
    result = result + ozp_ext
    if version == "1.0":
        require((result >= -(1 << 31)) & (result <= (1 << 31) - 1), "apply_add_s<int32_t>(result, output_zp)", op)
    result = np.clip(result, out_range[0], out_range[1])
    if version == "1.0" and output_unsigned:
        return wrap(result, INT_RANGES[to][2]).astype(numpy_dtype(to))
    return result.astype(numpy_dtype(to))
