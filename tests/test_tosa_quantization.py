"""CAST and RESCALE (skriptnd.tosa.ops.quantization) against the TOSA reference model.

All results are exact: integer results bit for bit, float CAST results bit for bit (round to nearest
even, overflow to ±inf). NaN → integer is unspecified by the spec and not compared.
"""

from __future__ import annotations

import numpy as np
import pytest
from tosa_oracle import (
    INT_LIMITS,
    ReferenceError,
    compare_with_reference,
    make_float,
    rand_float,
    rand_int,
    rand_shape,
    require_oracle,
    run_reference,
    seeded_rng,
)

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable

pytestmark = pytest.mark.tosa("1.0")

INTS = ("int8", "int16", "int32")
FLOATS = ("fp16", "bf16", "fp32")


@pytest.fixture(autouse=True)
def _oracle():
    require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return seeded_rng("tosa-q", *key)


CAST_ROWS = (
    [("bool", o) for o in INTS] + [(i, o) for i in INTS for o in ("bool", *INTS) if i != o]
    + [(i, f) for i in INTS for f in FLOATS] + [(f, i) for f in FLOATS for i in INTS]
    + [("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp16"), ("fp32", "bf16")]
)


@pytest.mark.parametrize("ti,to", CAST_ROWS, ids=[f"{a}-{b}" for a, b in CAST_ROWS])
def test_cast_random(ti, to):
    for seed in range(2):
        rng = _rng("CAST", ti, to, seed)
        shape = rand_shape(rng, max_dim=6)
        if ti == "bool":
            x = rng.random(shape) < 0.5
        elif ti in INTS:
            x = rand_int(rng, ti, shape)
        else:
            big = {"int8": 300, "int16": 70000, "int32": 3e9}.get(to, 1e6)
            x = rand_float(rng, ti, shape, -big, big, special_fraction=0.1)
            if to in INTS:  # NaN -> int is unspecified; add exact ties instead
                v = np.asarray(x, np.float64)
                ties = rng.integers(-200, 200, size=shape) + 0.5
                v = np.where(np.isnan(v), ties, v)
                v = np.where(rng.random(shape) < 0.3, ties, v)
                x = make_float(v, ti)
            elif to == "fp16" or to == "bf16":  # values near the overflow threshold and subnormals
                v = np.asarray(x, np.float64)
                tiny = rng.uniform(-1, 1, size=shape) * (1e-6 if to == "fp16" else 1e-39)
                v = np.where(rng.random(shape) < 0.2, tiny, v)
                v = np.where(rng.random(shape) < 0.1, 65504 + rng.uniform(0, 32, size=shape), v)
                x = make_float(v, ti)
        compare_with_reference("CAST", [x], {}, to, mine_kwargs={"output_dtype": to})


def test_digest_cast():  # G#16
    assert OPS["CAST"](np.float32([-1.7, 1.2, 300.0, -300.0]), output_dtype="int8").tolist() == [-2, 1, 127, -128]
    assert OPS["CAST"](np.int32([300, -129, 128]), output_dtype="int8").tolist() == [44, 127, -128]
    assert OPS["CAST"](np.int8([0, -1, 5]), output_dtype="bool").tolist() == [False, True, True]
    assert OPS["CAST"](np.array([True, False]), output_dtype="int32").tolist() == [1, 0]
    assert OPS["CAST"](np.float32([0.5, 1.5, 2.5, -0.5, -2.5]), output_dtype="int32").tolist() == [0, 2, 2, 0, -2]
    for x, to in [(np.float32([-1.7, 1.2, 300.0, -300.0, 0.5, 2.5, np.inf, -np.inf]), "int8"),
                  (np.int32([300, -129, 128]), "int8"), (np.int8([0, -1, 5]), "bool"),
                  (np.array([True, False]), "int32"), (np.int32([2049, 2051, 65519, 65520]), "fp16")]:
        compare_with_reference("CAST", [x], {}, to, mine_kwargs={"output_dtype": to})


def test_cast_type_errors():
    with pytest.raises(TosaError, match="supported type"):
        OPS["CAST"](np.float16([1]), output_dtype="bf16")
    with pytest.raises(TosaError, match="supported type"):
        OPS["CAST"](np.int8([1]), output_dtype="int8")
    ref = run_reference("CAST", [np.float16([1])], {}, "bf16")
    assert isinstance(ref, ReferenceError) and ref.is_error


def test_cast_bool_to_float_spec_vs_reference():
    """bool → float is not a CAST type row (TOSA 1.0 [SPV] tables); the reference model executes it."""
    with pytest.raises(TosaError):
        OPS["CAST"](np.array([True, False]), output_dtype="fp32")
    assert run_reference("CAST", [np.array([True, False])], {}, "fp32").tolist() == [1.0, 0.0]


@pytest.mark.tosa("0.30")
def test_030_cast():
    with pytest.raises(TosaError):
        OPS["CAST"](np.float32([1]), output_dtype="fp16", version="0.30")
    assert OPS["CAST"](np.float32([-1.7, 300.0]), output_dtype="int8", version="0.30").tolist() == [-2, 127]
    assert OPS["CAST"](np.int16([-129]), output_dtype="int8", version="0.30").tolist() == [127]


# ---------------------------------------------------------------------------------------------
# RESCALE


def _rescale_case(rng, ti, to, scale32, rounding, per_channel, in_u, out_u):
    shape = rand_shape(rng, min_rank=1, max_dim=5)
    x = rand_int(rng, ti, shape)
    if ti == "int48":
        x = rand_int(rng, "int48", shape, -(1 << 40), 1 << 40)
    izp = 0
    if ti == "int8":
        izp = int(rng.integers(-128, 128))
    elif ti == "int16" and in_u:
        izp = int(rng.choice([0, -32768]))
    ozp = 0
    if to == "int8":
        ozp = int(rng.integers(-128, 128))
    elif to == "int16" and out_u:
        ozp = int(rng.choice([0, -32768]))
    bits = 8 if ti == "int8" else 16 if ti == "int16" else 32 if ti == "int32" else 41
    value_bits = bits + 1  # |value - zp| < 2^(bits+1) covers unsigned reinterpretation and zero points
    nc = shape[-1] if per_channel else 1
    if scale32:
        mult = rng.integers(0, 1 << 31, size=nc)
        shift = rng.integers(max(2, value_bits + 1), 63, size=nc)
    else:
        mult = rng.integers(0, 1 << 15, size=nc)
        shift = rng.integers(max(2, value_bits + 15 - 30), 63, size=nc)
    np_t = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int48": np.int64}
    inputs = [x, mult.astype(np.int32 if scale32 else np.int16), shift.astype(np.int8),
              np.array([izp], np_t[ti]), np.array([ozp], np_t[to])]
    attrs = {"scale32": scale32, "rounding_mode": rounding, "per_channel": per_channel,
             "input_unsigned": in_u, "output_unsigned": out_u}
    return inputs, attrs


RESCALE_ROWS = [(i, o) for i in ("int8", "int16", "int32", "int48") for o in INTS]


@pytest.mark.parametrize("ti,to", RESCALE_ROWS, ids=[f"{a}-{b}" for a, b in RESCALE_ROWS])
def test_rescale_random(ti, to):
    count = 0
    for scale32 in (True, False):
        if scale32 and ti == "int48":
            continue
        for rounding in ("SINGLE_ROUND", "DOUBLE_ROUND", "INEXACT_ROUND"):
            if rounding == "DOUBLE_ROUND" and not scale32:
                continue
            for per_channel in (False, True):
                for in_u, out_u in ((False, False), (True, False), (False, True)):
                    if (in_u and (ti not in ("int8", "int16") or to == "int32")) or \
                            (out_u and (to not in ("int8", "int16") or ti in ("int32", "int48"))):
                        continue
                    rng = _rng("RESCALE", ti, to, scale32, rounding, per_channel, in_u, out_u)
                    inputs, attrs = _rescale_case(rng, ti, to, scale32, rounding, per_channel, in_u, out_u)
                    if rounding == "INEXACT_ROUND":
                        _check_inexact(inputs, attrs, to)
                    else:
                        compare_with_reference("RESCALE", inputs, attrs, to,
                                               mine_kwargs={**attrs, "output_dtype": to})
                    count += 1
    assert count >= 4


def _check_inexact(inputs, attrs, to):
    """INEXACT_ROUND: this implementation rounds exactly (single rounding); the reference model
    computes in floating point. Accepted: |mine - ref| <= max(1, 2^-21 · |mine|)."""
    mine = OPS["RESCALE"](*inputs, output_dtype=to, **attrs).astype(np.int64)
    ref = run_reference("RESCALE", inputs, attrs, to)
    assert not isinstance(ref, ReferenceError), ref
    assert np.all(np.abs(mine - ref.astype(np.int64)) <= np.maximum(1, np.abs(mine) * 2.0**-21)), (mine, ref)


def _resc(x, mult, shift, izp, ozp, to, **attrs):
    attrs.setdefault("scale32", True)
    np_out = {"int8": np.int8, "int16": np.int16, "int32": np.int32}[to]
    inputs = [x, np.array(mult, np.int32 if attrs["scale32"] else np.int16), np.array(shift, np.int8),
              np.array([izp], x.dtype), np.array([ozp], np_out)]
    return inputs, attrs


@pytest.mark.parametrize("case,expected", [
    (_resc(np.int32([-3, -1, 1, 3]), [1 << 30], [31], 0, 0, "int32"), [-1, 0, 1, 2]),  # G#1
    (_resc(np.int32([1, -2, 5]), [1 << 30], [32], 0, 0, "int32", rounding_mode="DOUBLE_ROUND"), [1, -1, 2]),  # G#2
    (_resc(np.int32([1, -2, 5]), [1 << 30], [32], 0, 0, "int32"), [0, 0, 1]),
    (_resc(np.int32([200, -200, 5]), [1 << 30], [30], 0, 0, "int8"), [127, -128, 5]),  # G#3b
    (_resc(np.int32([[5, 5]]), [1 << 30, 1 << 30], [30, 31], 0, 0, "int32", per_channel=True), [[5, 3]]),  # G#3c
    (_resc(np.int64([1 << 35]), [1 << 14], [34], 0, 0, "int16", scale32=False), [32767]),  # G#3d
    (_resc(np.int8([-128, 0, 127]), [1 << 30], [30], 0, -128, "int8", output_unsigned=True), [0, -128, -1]),  # G#3a
    (_resc(np.int32([1 << 28, (1 << 29) - 1]), [1 << 30], [30], 0, 0, "int32"), [1 << 28, (1 << 29) - 1]),  # 1.0 range
    (_resc(np.int8([-1, 0, 127]), [1 << 30], [30], -128, 0, "int16", input_unsigned=True), [127, -128, -1]),
])
def test_digest_rescale(case, expected):
    inputs, attrs = case
    to = {np.int8: "int8", np.int16: "int16", np.int32: "int32"}[inputs[4].dtype.type]
    assert OPS["RESCALE"](*inputs, output_dtype=to, **attrs).tolist() == expected
    compare_with_reference("RESCALE", inputs, attrs, to, mine_kwargs={**attrs, "output_dtype": to})


@pytest.mark.parametrize("case,exception,condition", [
    (_resc(np.int32([1 << 29]), [1 << 30], [30], 0, 0, "int32"), TosaUnpredictable, "value >="),  # G#4a (1.0)
    (_resc(np.int32([1]), [1 << 30], [1], 0, 0, "int32"), TosaUnpredictable, "2 <= shift"),
    (_resc(np.int32([1]), [-5], [30], 0, 0, "int32"), TosaUnpredictable, "multiplier >= 0"),
    (_resc(np.int32([2**31 - 1]), [1 << 30], [30], 0, 0, "int32"), TosaUnpredictable, "value >="),
    (_resc(np.int64([1 << 46]), [1 << 14], [2], 0, 0, "int32", scale32=False), TosaUnpredictable, "result >="),
    (_resc(np.int64([1]), [1 << 30], [30], 0, 0, "int8"), TosaError, "scale32 && is_same<in_t,i48_t>()"),  # G#4b
    (_resc(np.int16([1]), [1 << 30], [30], 1, 0, "int8"), TosaError, "input_zp != 0"),  # G#4c
    (_resc(np.int16([1]), [1 << 30], [30], 5, 0, "int8", input_unsigned=True), TosaError, "32768"),
    (_resc(np.int32([1]), [1 << 14], [14], 0, 0, "int8", scale32=False, rounding_mode="DOUBLE_ROUND"), TosaError,
     "DOUBLE_ROUND"),
    (_resc(np.int8([1]), [1 << 30], [30], 0, 0, "int8", input_unsigned=True, output_unsigned=True), TosaError,
     "input_unsigned && output_unsigned"),
    (_resc(np.int32([1]), [1 << 30], [30], 0, 0, "int8", output_unsigned=True), TosaError, "output_unsigned"),
    (_resc(np.int8([1]), [1 << 30], [30], 0, 0, "int32", input_unsigned=True), TosaError, "input_unsigned"),
    (_resc(np.int32([1, 2]), [1 << 30, 1], [30, 30], 0, 0, "int32"), TosaError, "NC"),
])
def test_rescale_checks(case, exception, condition):
    inputs, attrs = case
    to = {np.int8: "int8", np.int16: "int16", np.int32: "int32"}[inputs[4].dtype.type]
    with pytest.raises(exception) as info:
        OPS["RESCALE"](*inputs, output_dtype=to, **attrs)
    assert condition in str(info.value)
    ref = run_reference("RESCALE", inputs, attrs, to)
    assert isinstance(ref, ReferenceError), ref
    assert ref.is_unpredictable if exception is TosaUnpredictable else ref.is_error, ref


@pytest.mark.tosa("0.30")
def test_030_rescale():
    """0.30 §2.13.2 with §1.9.2 apply_scale_32 (value range 2^(shift-2)), uint8/uint16 types."""
    r = OPS["RESCALE"]
    kw = {"version": "0.30", "scale32": True}
    # G#4a: |value| must be < 2^(shift-2) in 0.30
    with pytest.raises(TosaUnpredictable):
        r(np.int32([1 << 28]), [1 << 30], [30], 0, 0, output_dtype="int32", **kw)
    assert r(np.int32([(1 << 28) - 1]), [1 << 30], [30], output_dtype="int32", **kw).tolist() == [(1 << 28) - 1]
    # G#3a: i8 -> u8 with output_zp 128
    assert r(np.int8([-128, 0, 127]), [1 << 30], [30], 0, 128, output_dtype="uint8", **kw).tolist() == [0, 128, 255]
    # G#2 with the 0.30 double_round attribute
    assert r(np.int32([1, -2, 5]), [1 << 30], [32], output_dtype="int32", double_round=True, **kw).tolist() == [1, -1, 2]
    with pytest.raises(TosaError):
        r(np.int32([1]), [1 << 14], [14], output_dtype="int32", version="0.30", scale32=False, double_round=True)
    # uint16 zero point must be 0 or 32768 (erratum: the text's || reads as &&)
    assert r(np.uint16([0, 65535]), [1 << 30], [30], 32768, 0, output_dtype="int16", **kw).tolist() == [-32768, 32767]
    with pytest.raises(TosaError, match="32768"):
        r(np.uint16([0]), [1 << 30], [30], 5, 0, output_dtype="int16", **kw)
    with pytest.raises(TosaError, match="supported type"):
        r(np.uint8([0]), [1 << 30], [30], output_dtype="int32", **kw)
    # u8 input with zero point, i16 non-zero zero point is an error
    assert r(np.uint8([0, 255]), [1 << 30], [30], 128, 0, output_dtype="int8", **kw).tolist() == [-128, 127]
    with pytest.raises(TosaError):
        r(np.int16([1]), [1 << 30], [30], 1, 0, output_dtype="int8", **kw)
    # i48 -> i16 through apply_scale_16 (G#3d) and the int32 REQUIRE of apply_scale_16
    assert r(np.int64([1 << 35]), [1 << 14], [34], output_dtype="int16", version="0.30", scale32=False).tolist() == [32767]
    with pytest.raises(TosaUnpredictable):
        r(np.int64([1 << 46]), [1 << 14], [2], output_dtype="int32", version="0.30", scale32=False)


def test_rescale_int48_limits():
    with pytest.raises(ValueError):
        OPS["RESCALE"](np.int64([1 << 47]), np.int16([1]), np.int8([2]), np.int64([0]), np.int32([0]),
                       output_dtype="int32", scale32=False)
    assert INT_LIMITS["int48"][1] == (1 << 47) - 1
