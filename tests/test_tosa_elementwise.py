"""Element-wise TOSA operators (skriptnd.tosa.ops.elementwise) against the TOSA reference model.

Tolerances (implementation vs reference model, per element, output type units; "exact" = identical
bits including the sign of zero; fp16/bf16 unary results: exact unless listed):

| op                              | fp32                                  | fp16 / bf16        |
|---------------------------------|---------------------------------------|--------------------|
| ABS CEIL FLOOR NEGATE RECIPROCAL| exact                                 | exact              |
| ADD SUB MUL MAXIMUM MINIMUM     | exact                                 | exact              |
| CLAMP SELECT comparisons        | exact                                 | exact              |
| EXP LOG RSQRT ERF               | 2 ulp (LOG also 1 eps absolute)       | 1 ulp              |
| SIN COS                         | 2 ulp or 2 eps absolute               | 1 ulp              |
| SIGMOID                         | 3 ulp                                 | 1 ulp              |
| TANH                            | 2 ulp or 4 eps absolute; ±0 accepted  | 1 ulp; ±0 accepted |
|                                 | for subnormal results (the reference  | for subnormals     |
|                                 | flushes them)                         |                    |
| POW                             | 2 + 2·|input2·ln(input1)| ulp          | 1 ulp              |

Integer and bool results are bit-exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from tosa_oracle import (
    INT_LIMITS,
    ReferenceError,
    broadcast_partner,
    compare_with_reference,
    make_float,
    rand_float,
    rand_int,
    rand_shape,
    require_oracle,
    run_reference,
    same_bits,
    seeded_rng,
)

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable, bf16

pytestmark = pytest.mark.tosa("1.0")

FLOATS = ("fp32", "fp16", "bf16")


@pytest.fixture(autouse=True)
def _oracle():
    require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return seeded_rng("tosa-ew", *key)


# ---------------------------------------------------------------------------------------------
# Float unary operators

UNARY_FLOAT = {  # op: (lo, hi, log_scale, fp32 ulps, fp32 abs eps, small-type ulps, flush)
    "ABS": (-100, 100, False, 0, 0, 0, False),
    "CEIL": (-100, 100, False, 0, 0, 0, False),
    "FLOOR": (-100, 100, False, 0, 0, 0, False),
    "RECIPROCAL": (-100, 100, False, 0, 0, 0, False),
    "EXP": (-15, 15, False, 2, 0, 1, False),
    "LOG": (1e-3, 1e4, True, 2, 1, 1, False),
    "RSQRT": (1e-3, 1e4, True, 2, 0, 1, False),
    "ERF": (-4, 4, False, 2, 0, 1, False),
    "SIN": (-10, 10, False, 2, 2, 1, False),
    "COS": (-10, 10, False, 2, 2, 1, False),
    "SIGMOID": (-20, 20, False, 3, 0, 1, False),
    "TANH": (-6, 6, False, 2, 4, 1, True),
}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY_FLOAT))
def test_float_unary_random(op, t):
    lo, hi, log_scale, ulps32, abs32, ulps_small, flush = UNARY_FLOAT[op]
    for seed in range(3):
        rng = _rng(op, t, seed)
        x = rand_float(rng, t, rand_shape(rng, max_dim=6), lo, hi, log_scale=log_scale)
        ulps, abs_tol = (ulps32, abs32) if t == "fp32" else (ulps_small, 0)
        compare_with_reference(op, [x], {}, t, ulps=ulps, abs_tol=abs_tol, flush_subnormals=flush)


SPECIAL_VALUES = [-np.inf, np.inf, -0.0, 0.0, np.nan, -0.5, 0.5, -1.0, 1.0, -2.5, 3.0]


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY_FLOAT) + ["NEGATE"])
def test_float_unary_special_values(op, t):
    x = make_float(SPECIAL_VALUES, t)
    inputs = [x, make_float([0], t), make_float([0], t)] if op == "NEGATE" else [x]
    _, _, _, ulps32, abs32, ulps_small, _ = UNARY_FLOAT.get(op, (0, 0, 0, 0, 0, 0, 0))
    compare_with_reference(op, inputs, {}, t, ulps=ulps32 if t == "fp32" else ulps_small,
                           abs_tol=abs32 if t == "fp32" else 0)


def test_float_special_value_table():
    """TOSA 0.30 §1.10 special-value tables (-inf, +inf, -0, +0, NaN)."""
    x = np.array([-np.inf, np.inf, -0.0, 0.0, np.nan], np.float32)
    inf, nan = np.inf, np.nan
    table = {
        "ABS": [inf, inf, 0.0, 0.0, nan], "CEIL": [-inf, inf, -0.0, 0.0, nan],
        "FLOOR": [-inf, inf, -0.0, 0.0, nan], "EXP": [0.0, inf, 1.0, 1.0, nan],
        "LOG": [nan, inf, -inf, -inf, nan], "RECIPROCAL": [-0.0, 0.0, -inf, inf, nan],
        "RSQRT": [nan, 0.0, -inf, inf, nan],
    }
    for op, expected in table.items():
        assert same_bits(OPS[op](x), np.array(expected, np.float32), "fp32"), op
    assert same_bits(OPS["NEGATE"](x, np.float32([0]), np.float32([0])), np.float32([inf, -inf, 0.0, -0.0, nan]), "fp32")


# ---------------------------------------------------------------------------------------------
# Float binary operators and comparisons


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL"])
def test_float_binary_random(op, t):
    for seed in range(3):
        rng = _rng(op, t, seed)
        shape = rand_shape(rng, max_dim=5)
        a = rand_float(rng, t, shape, -1e3, 1e3)
        b = rand_float(rng, t, broadcast_partner(rng, shape), -1e3, 1e3)
        if seed == 2:  # many equal operands (ties, signed zeros)
            b = make_float(np.where(rng.random(b.shape) < 0.5, np.resize(np.asarray(a, np.float64), b.shape), b), t)
        inputs = [a, b] + ([np.array([0], np.int8)] if op == "MUL" else [])
        out = "bool" if op.startswith(("EQUAL", "GREATER")) else t
        compare_with_reference(op, inputs, {}, out)
        if op in ("MAXIMUM", "MINIMUM"):
            compare_with_reference(op, inputs, {"nan_mode": "IGNORE"}, out)


@pytest.mark.parametrize("t", FLOATS)
def test_pow_random(t):
    for seed in range(3):
        rng = _rng("POW", t, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=6)
        a = rand_float(rng, t, shape, 1e-2, 10, special_fraction=0, log_scale=True)
        b = rand_float(rng, t, shape, -4, 4, special_fraction=0)
        if t == "fp32":
            ulps = 2 + 2 * np.abs(np.asarray(b, np.float64) * np.log(np.asarray(a, np.float64)))
            ref = run_reference("POW", [a, b], {}, t)
            mine = OPS["POW"](a, b)
            from tosa_oracle import ulp_distance

            assert np.all(ulp_distance(mine, ref, t) <= ulps)
        else:
            compare_with_reference("POW", [a, b], {}, t, ulps=1)


@pytest.mark.parametrize("values", [([-2.0], [2.0]), ([0.0], [0.0]), ([0.0], [-1.0]), ([np.inf], [1.0]),
                                    ([1.0], [np.nan]), ([-0.5], [0.5])])
def test_pow_domain_is_unpredictable(values):
    a, b = (np.array(v, np.float32) for v in values)
    ref = compare_with_reference("POW", [a, b], {}, "fp32")
    assert isinstance(ref, ReferenceError) and ref.status == "UNPREDICTABLE"


# ---------------------------------------------------------------------------------------------
# Integer binary operators


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_add_sub_int32_random(op):
    for seed in range(4):
        rng = _rng(op, seed)
        shape = rand_shape(rng, max_dim=6)
        a = rand_int(rng, "int32", shape, -(1 << 30), (1 << 30) - 1)
        b = rand_int(rng, "int32", broadcast_partner(rng, shape), -(1 << 30), (1 << 30) - 1)
        compare_with_reference(op, [a, b], {}, "int32")


@pytest.mark.parametrize("t", ["int8", "int16", "int32"])
def test_mul_int_random(t):
    for seed in range(4):
        rng = _rng("MUL", t, seed)
        shape = rand_shape(rng, max_dim=6)
        a, b = rand_int(rng, t, shape), rand_int(rng, t, broadcast_partner(rng, shape))
        compare_with_reference("MUL", [a, b, np.array([0], np.int8)], {}, "int32")  # i32: low 32 bits wrap
    if t == "int32":
        for shift in (1, 2, 7, 15, 31, 40, 63):
            rng = _rng("MULS", shift)
            lim = min(1 << 31, 1 << ((31 + shift) // 2))
            a = rand_int(rng, t, (50,), -lim + 1, lim - 1)
            b = rand_int(rng, t, (50,), -lim + 1, lim - 1)
            compare_with_reference("MUL", [a, b, np.array([shift], np.int8)], {}, "int32")


def test_intdiv_random():
    for seed in range(4):
        rng = _rng("INTDIV", seed)
        shape = rand_shape(rng, max_dim=6)
        a = rand_int(rng, "int32", shape)
        b = rand_int(rng, "int32", broadcast_partner(rng, shape))
        b = np.where(b == 0, 7, b).astype(np.int32)
        a = np.where((a == INT_LIMITS["int32"][0]) & np.any(b == -1), 5, a).astype(np.int32)
        if rng.random() < 0.5:
            b = np.clip(b, -9, 9).astype(np.int32)
            b = np.where(b == 0, 3, b).astype(np.int32)
        compare_with_reference("INTDIV", [a, b], {}, "int32")


@pytest.mark.parametrize("t", ["int8", "int16", "int32"])
@pytest.mark.parametrize("op", ["ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"])
def test_shifts_random(op, t):
    width = {"int8": 8, "int16": 16, "int32": 32}[t]
    for seed in range(3):
        rng = _rng(op, t, seed)
        shape = rand_shape(rng, max_dim=6)
        a = rand_int(rng, t, shape)
        b = rand_int(rng, t, broadcast_partner(rng, shape), 0, width - 1)
        attrs = [{"round": False}, {"round": True}] if op == "ARITHMETIC_RIGHT_SHIFT" else [{}]
        for attr in attrs:
            compare_with_reference(op, [a, b], attr, t)


@pytest.mark.parametrize("t", ["int8", "int16", "int32"])
@pytest.mark.parametrize("op", ["BITWISE_AND", "BITWISE_OR", "BITWISE_XOR"])
def test_bitwise_random(op, t):
    rng = _rng(op, t)
    shape = rand_shape(rng, max_dim=6)
    compare_with_reference(op, [rand_int(rng, t, shape), rand_int(rng, t, broadcast_partner(rng, shape))], {}, t)


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL"])
def test_int32_minmax_compare_random(op):
    for seed in range(3):
        rng = _rng(op, seed)
        shape = rand_shape(rng, max_dim=6)
        a = rand_int(rng, "int32", shape, -5, 5) if seed == 0 else rand_int(rng, "int32", shape)
        b = rand_int(rng, "int32", broadcast_partner(rng, shape), -5, 5) if seed == 0 else \
            rand_int(rng, "int32", broadcast_partner(rng, shape))
        compare_with_reference(op, [a, b], {}, "bool" if op.startswith(("EQ", "GR")) else "int32")


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR"])
def test_logical_random(op):
    rng = _rng(op)
    shape = rand_shape(rng, min_rank=1, max_dim=6)
    a = rng.random(shape) < 0.5
    b = rng.random(broadcast_partner(rng, shape)) < 0.5
    compare_with_reference(op, [a, b], {}, "bool")


# ---------------------------------------------------------------------------------------------
# Integer unary operators


def test_int_unary_random():
    for seed in range(4):
        rng = _rng("unary", seed)
        shape = rand_shape(rng, max_dim=6)
        x32 = rand_int(rng, "int32", shape, INT_LIMITS["int32"][0] + 1)
        compare_with_reference("ABS", [x32], {}, "int32")
        compare_with_reference("CLZ", [rand_int(rng, "int32", shape)], {}, "int32")
        compare_with_reference("LOGICAL_NOT", [rng.random(shape) < 0.5], {}, "bool")
        for t in ("int8", "int16", "int32"):
            compare_with_reference("BITWISE_NOT", [rand_int(rng, t, shape)], {}, t)
        compare_with_reference("NEGATE", [x32, np.int32([0]), np.int32([0])], {}, "int32")
        compare_with_reference("NEGATE", [rand_int(rng, "int16", shape), np.int16([0]), np.int16([0])], {}, "int16")
        zps = rand_int(rng, "int8", (2,))
        compare_with_reference("NEGATE", [rand_int(rng, "int8", shape), zps[:1], zps[1:]], {}, "int8")


# ---------------------------------------------------------------------------------------------
# SELECT, CLAMP, TABLE


@pytest.mark.parametrize("t", ["bool", "int8", "int16", "int32", *FLOATS])
def test_select_random(t):
    rng = _rng("SELECT", t)
    shape = rand_shape(rng, max_dim=5)
    cond = rng.random(broadcast_partner(rng, shape)) < 0.5

    def operand(s):
        if t == "bool":
            return rng.random(s) < 0.5
        return rand_int(rng, t, s) if t.startswith("int") else rand_float(rng, t, s, -10, 10)

    compare_with_reference("SELECT", [cond, operand(shape), operand(broadcast_partner(rng, shape))], {}, t)


@pytest.mark.parametrize("t", ["int8", "int16", *FLOATS])
def test_clamp_random(t):
    for seed in range(3):
        rng = _rng("CLAMP", t, seed)
        shape = rand_shape(rng, max_dim=6)
        if t.startswith("int"):
            x = rand_int(rng, t, shape)
            lo, hi = sorted(int(v) for v in rand_int(rng, t, (2,)))
        else:
            x = rand_float(rng, t, shape, -10, 10)
            lo, hi = sorted(float(v) for v in np.asarray(make_float(rng.uniform(-8, 8, 2), t), np.float64))
        for nan_mode in ("PROPAGATE", "IGNORE"):
            compare_with_reference("CLAMP", [x], {"min_val": lo, "max_val": hi, "nan_mode": nan_mode}, t)
    if t in FLOATS:  # signed-zero bounds
        x = make_float([-0.0, 0.0, -1.0, 1.0, np.nan], t)
        compare_with_reference("CLAMP", [x], {"min_val": 0.0, "max_val": 0.0}, t)
        compare_with_reference("CLAMP", [x], {"min_val": -0.0, "max_val": 0.0}, t)


@pytest.mark.parametrize("t", ["int8", "int16"])
def test_table_random(t):
    for seed in range(3):
        rng = _rng("TABLE", t, seed)
        shape = rand_shape(rng, max_dim=6)
        if t == "int8":
            tab = rand_int(rng, "int8", (256,))
        else:
            tab = np.cumsum(rng.integers(-200, 200, 513)).clip(-32768, 32767).astype(np.int16)
        compare_with_reference("TABLE", [rand_int(rng, t, shape), tab], {}, "int8" if t == "int8" else "int32")


# ---------------------------------------------------------------------------------------------
# Hand-checked vectors (tosa-digest Part G), checked against the implementation and the reference


def _both(op, inputs, attrs, out, expected):
    got = OPS[op](*inputs, **attrs)
    assert np.array_equal(np.asarray(got), np.asarray(expected)), (op, got, expected)
    compare_with_reference(op, inputs, attrs, out)


def test_digest_table_int16():  # G#11
    tab = np.zeros(513, np.int16)
    tab[256], tab[257] = 100, 200
    _both("TABLE", [np.int16([0, 64, -1, 127, 128, -128]), tab], {}, "int32", [12800, 19200, 12700, 25500, 25600, 0])
    ident = (np.arange(256) - 128).astype(np.int8)
    x = np.arange(-128, 128, dtype=np.int8)
    _both("TABLE", [x, ident], {}, "int8", x)


def test_digest_table_sigmoid_then_rescale():  # G#11: sigmoid table, lookup(0) then RESCALE
    xs = np.arange(-256, 257) / 16.0
    tab = np.clip(np.round(32768.0 / (1.0 + np.exp(-xs))), -32768, 32767).astype(np.int16)
    assert (tab[0], tab[255], tab[256], tab[257], tab[512]) == (0, 15872, 16384, 16896, 32767)
    acc = OPS["TABLE"](np.int16([0]), tab)
    assert acc.tolist() == [2097152]
    out = OPS["RESCALE"](acc, np.int16([1 << 14]), np.int8([21]), np.int32([0]), np.int16([0]),
                         output_dtype="int16", scale32=False)
    assert out.tolist() == [16384]


def test_digest_arithmetic_right_shift():  # G#12
    a, b = np.int32([5, -5, -6, 7, -1]), np.int32([1, 1, 2, 0, 1])
    _both("ARITHMETIC_RIGHT_SHIFT", [a, b], {"round": True}, "int32", [3, -2, -1, 7, 0])
    _both("ARITHMETIC_RIGHT_SHIFT", [a, b], {"round": False}, "int32", [2, -3, -2, 7, -1])


def test_digest_mul():  # G#13
    one = np.int32([1, 1, 1])
    _both("MUL", [np.int32([3, -3, 5]), one, np.int8([1])], {}, "int32", [2, -1, 3])
    _both("MUL", [np.int32([-7]), np.int32([3]), np.int8([2])], {}, "int32", [-5])
    _both("MUL", [np.int32([65536, 46341]), np.int32([65536, 46341]), np.int8([0])], {}, "int32", [0, -2147479015])
    _both("MUL", [np.int8([127]), np.int8([-128]), np.int8([0])], {}, "int32", [-16256])


def test_digest_intdiv():  # G#14
    _both("INTDIV", [np.int32([7, -7, 7, -7]), np.int32([2, 2, -2, -2])], {}, "int32", [3, -3, -3, 3])


def test_digest_logical_shifts_and_clz():  # G#15
    _both("LOGICAL_LEFT_SHIFT", [np.int8([1, 3, 1]), np.int8([7, 7, 6])], {}, "int8", [-128, -128, 64])
    _both("LOGICAL_RIGHT_SHIFT", [np.int8([-1, -128]), np.int8([1, 7])], {}, "int8", [127, 1])
    _both("CLZ", [np.int32([0, 1, -1, 65536, 0x7FFFFFFF])], {}, "int32", [32, 31, 0, 15, 1])


def test_digest_negate_saturation():  # G#17
    _both("NEGATE", [np.int8([-128, 0, 5]), np.int8([0]), np.int8([0])], {}, "int8", [127, 0, -5])
    _both("NEGATE", [np.int8([5, -128, 0]), np.int8([5]), np.int8([-3])], {}, "int8", [-3, 127, 2])


def test_digest_nan_and_signed_zero():  # G#20
    nan, f = np.nan, np.float32
    assert np.isnan(OPS["MAXIMUM"](f([nan]), f([1]))[0])
    assert np.signbit(OPS["MAXIMUM"](f([-0.0]), f([0.0]))[0])
    assert not np.signbit(OPS["MINIMUM"](f([-0.0]), f([0.0]))[0])
    assert OPS["EQUAL"](f([nan, -0.0]), f([nan, 0.0])).tolist() == [False, True]
    assert OPS["GREATER"](f([0.0]), f([-0.0])).tolist() == [False]
    assert np.isnan(OPS["CLAMP"](f([nan]), min_val=0.0, max_val=1.0)[0])
    assert OPS["RSQRT"](f([-0.0]))[0] == -np.inf
    assert OPS["LOG"](f([0.0]))[0] == -np.inf
    assert OPS["RECIPROCAL"](f([-0.0]))[0] == -np.inf
    for op, a, b in [("MAXIMUM", [nan, -0.0, 0.0], [1.0, 0.0, -0.0]), ("MINIMUM", [-0.0, 0.0, nan], [0.0, -0.0, 2.0])]:
        compare_with_reference(op, [f(a), f(b)], {}, "fp32")
    compare_with_reference("EQUAL", [f([nan, -0.0]), f([nan, 0.0])], {}, "bool")
    compare_with_reference("GREATER", [f([0.0]), f([-0.0])], {}, "bool")
    compare_with_reference("CLAMP", [f([nan])], {"min_val": 0.0, "max_val": 1.0}, "fp32")
    compare_with_reference("CLAMP", [f([nan, 5.0])], {"min_val": 0.0, "max_val": 1.0, "nan_mode": "IGNORE"}, "fp32")
    compare_with_reference("RSQRT", [f([-0.0, 0.0, -1.0])], {}, "fp32")


# ---------------------------------------------------------------------------------------------
# REQUIRE (unpredictable) and ERROR_IF cases, checked against the reference's status


REQUIRE_CASES = [
    ("ADD", [np.int32([2**31 - 1]), np.int32([1])], {}, "int32"),
    ("SUB", [np.int32([-(2**31)]), np.int32([1])], {}, "int32"),
    ("ABS", [np.int32([-(2**31)])], {}, "int32"),
    ("NEGATE", [np.int32([-(2**31)]), np.int32([0]), np.int32([0])], {}, "int32"),
    ("INTDIV", [np.int32([1]), np.int32([0])], {}, "int32"),
    ("INTDIV", [np.int32([-(2**31)]), np.int32([-1])], {}, "int32"),
    ("ARITHMETIC_RIGHT_SHIFT", [np.int8([1]), np.int8([8])], {"round": False}, "int8"),
    ("ARITHMETIC_RIGHT_SHIFT", [np.int32([1]), np.int32([-1])], {"round": True}, "int32"),
    ("LOGICAL_LEFT_SHIFT", [np.int8([1]), np.int8([8])], {}, "int8"),
    ("LOGICAL_LEFT_SHIFT", [np.int32([1]), np.int32([32])], {}, "int32"),
    ("LOGICAL_RIGHT_SHIFT", [np.int16([1]), np.int16([16])], {}, "int16"),
    ("MUL", [np.int32([2**31 - 1]), np.int32([4]), np.int8([1])], {}, "int32"),
    ("MUL", [np.int32([1]), np.int32([1]), np.int8([64])], {}, "int32"),
    ("TABLE", [np.int16([0]), np.r_[np.zeros(256), [-32768, 32767], np.zeros(255)].astype(np.int16)], {}, "int32"),
]


@pytest.mark.parametrize("op,inputs,attrs,out", REQUIRE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(REQUIRE_CASES)])
def test_require_cases(op, inputs, attrs, out):
    with pytest.raises(TosaUnpredictable):
        OPS[op](*inputs, **attrs)
    ref = compare_with_reference(op, inputs, attrs, out)
    assert isinstance(ref, ReferenceError) and ref.is_unpredictable, ref


ERROR_CASES = [
    ("ADD", [np.int32([1]), np.int32([[1]])], {}, "int32", (1, 1), "rank(shape1) != rank(shape2)"),
    ("ADD", [np.int32([1, 2]), np.int32([1, 2, 3])], {}, "int32", (3,), "shape2[0]"),
    ("ADD", [np.int8([1]), np.int8([1])], {}, "int8", None, "supported type"),
    ("ADD", [np.int32([1]), np.float32([1])], {}, "int32", None, "input types differ"),
    ("CLAMP", [np.int8([1])], {"min_val": 3, "max_val": 2}, "int8", None, "max_val < min_val"),
    ("CLAMP", [np.float32([1])], {"min_val": np.nan, "max_val": 2.0}, "fp32", None, "is_a_NaN"),
    ("NEGATE", [np.int16([1]), np.int16([1]), np.int16([0])], {}, "int16", None, "input1_zp != 0"),
    ("NEGATE", [np.int32([1]), np.int32([0]), np.int32([2])], {}, "int32", None, "output_zp != 0"),
    ("TABLE", [np.int8([1]), np.zeros(256, np.int16)], {}, "int8", None, "supported type"),
    ("INTDIV", [np.int16([1]), np.int16([1])], {}, "int16", None, "supported type"),
    ("EXP", [np.int32([1])], {}, "int32", None, "supported type"),
]


@pytest.mark.parametrize("op,inputs,attrs,out,shape,condition", ERROR_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ERROR_CASES)])
def test_error_if_cases(op, inputs, attrs, out, shape, condition):
    with pytest.raises(TosaError) as info:
        OPS[op](*inputs, **attrs)
    assert condition in str(info.value)
    ref = run_reference(op, inputs, attrs, out, output_shape=shape)
    assert isinstance(ref, ReferenceError) and ref.is_error, ref


# ---------------------------------------------------------------------------------------------
# Known disagreements between the specification and the reference model (documented, see report)


def test_mul_shift_on_non_int32_spec_vs_reference():
    """TOSA 1.0 MUL: REQUIRE(in_t == i32_t || shift == 0); the reference model ignores the shift."""
    a = np.int8([3, -3, 5])
    with pytest.raises(TosaUnpredictable):
        OPS["MUL"](a, a, np.int8([1]))
    ref = run_reference("MUL", [a, a, np.int8([1])], {}, "int32")
    assert not isinstance(ref, ReferenceError) and ref.tolist() == [9, 9, 25]


def test_mul_negative_shift_spec_vs_reference():
    """TOSA 1.0 MUL: REQUIRE(0 <= shift && shift <= 63); the reference model treats shift < 0 as 0."""
    with pytest.raises(TosaUnpredictable):
        OPS["MUL"](np.int32([5]), np.int32([1]), np.int8([-2]))
    assert run_reference("MUL", [np.int32([5]), np.int32([1]), np.int8([-2])], {}, "int32").tolist() == [5]


def test_select_non_bool_condition_crashes_reference():
    """SELECT with an int8 selector is not a supported type row (ERROR_IF); the reference model aborts."""
    with pytest.raises(TosaError, match="supported type"):
        OPS["SELECT"](np.int8([1]), np.int8([1]), np.int8([1]))
    ref = run_reference("SELECT", [np.int8([1]), np.int8([1]), np.int8([1])], {}, "int8")
    assert isinstance(ref, ReferenceError) and ref.status == "CRASH"


def test_table_length_spec_vs_reference():
    """TOSA 1.0 TABLE: REQUIRE(length(table) == TABLE_SIZE); the reference model reports an ERROR."""
    with pytest.raises(TosaUnpredictable):
        OPS["TABLE"](np.int8([1]), np.zeros(255, np.int8))
    ref = run_reference("TABLE", [np.int8([1]), np.zeros(255, np.int8)], {}, "int8")
    assert isinstance(ref, ReferenceError) and ref.status == "ERROR"


def test_intdiv_by_zero_crashes_reference():
    """The reference model reports REQUIRE(value2 != 0) and then dies of SIGFPE (CRASH, not a status)."""
    with pytest.raises(TosaUnpredictable):
        OPS["INTDIV"](np.int32([1]), np.int32([0]))
    ref = run_reference("INTDIV", [np.int32([1]), np.int32([0])], {}, "int32")
    assert isinstance(ref, ReferenceError) and ref.status == "CRASH" and ref.is_unpredictable


def test_tanh_subnormal_flushed_by_reference():
    x = np.float32([1e-40, -1e-40])
    assert same_bits(OPS["TANH"](x), x, "fp32")  # tanh(x) rounds to x
    ref = run_reference("TANH", [x], {}, "fp32")
    assert np.all(ref == 0)


# ---------------------------------------------------------------------------------------------
# TOSA 0.30 behaviour (from the 0.30 pseudocode)


@pytest.mark.tosa("0.30")
def test_030_logical_shifts_allow_0_to_31_for_all_widths():
    assert OPS["LOGICAL_LEFT_SHIFT"](np.int8([1, 3, 1]), np.int8([7, 7, 9]), version="0.30").tolist() == [-128, -128, 0]
    assert OPS["LOGICAL_RIGHT_SHIFT"](np.int8([-1]), np.int8([20]), version="0.30").tolist() == [0]
    with pytest.raises(TosaUnpredictable):
        OPS["LOGICAL_LEFT_SHIFT"](np.int8([1]), np.int8([32]), version="0.30")
    with pytest.raises(TosaUnpredictable):
        OPS["LOGICAL_LEFT_SHIFT"](np.int8([1]), np.int8([9]), version="1.0")


@pytest.mark.tosa("0.30")
def test_030_mul_shift_attribute():
    assert OPS["MUL"](np.int32([3, -3, 5]), np.int32([1, 1, 1]), 1, version="0.30").tolist() == [2, -1, 3]
    with pytest.raises(TosaError, match="in_t != int32_t && shift > 0"):
        OPS["MUL"](np.int16([1]), np.int16([1]), 1, version="0.30")
    with pytest.raises(TosaUnpredictable):
        OPS["MUL"](np.int32([2**31 - 1]), np.int32([4]), 1, version="0.30")


@pytest.mark.tosa("0.30")
def test_030_operator_set_and_attributes():
    for op in ("ERF", "SIN", "COS"):
        with pytest.raises(TosaError, match="not an operator of TOSA 0.30"):
            OPS[op](np.float32([1.0]), version="0.30")
    with pytest.raises(TosaError, match="nan_mode"):
        OPS["MAXIMUM"](np.float32([1]), np.float32([1]), nan_mode="IGNORE", version="0.30")
    assert OPS["NEGATE"](np.int8([5, -128, 0]), 5, -3, version="0.30").tolist() == [-3, 127, 2]
    with pytest.raises(TosaError):
        OPS["NEGATE"](np.int16([1]), 1, 0, version="0.30")
    # 0.30 POW has no domain REQUIRE: a negative base with a fractional exponent gives NaN
    assert np.isnan(OPS["POW"](np.float32([-2.0]), np.float32([0.5]), version="0.30")[0])
    assert OPS["POW"](np.float32([-2.0]), np.float32([3.0]), version="0.30").tolist() == [-8.0]
    assert OPS["CLAMP"](np.int8([-5, 0, 100]), min_val=-2, max_val=7, version="0.30").tolist() == [-2, 0, 7]


def test_bf16_carrier():
    x = bf16([1.0, 1.00390625, 1.01171875, 3.4e38])
    assert np.asarray(x).tolist() == [1.0, 1.0, 1.015625, np.inf]
    y = OPS["ADD"](x[:3], bf16([0.00390625, 0.0, 0.0]))
    assert type(y).__name__ == "BF16Array" and np.asarray(y).tolist() == [1.0, 1.0, 1.015625]
