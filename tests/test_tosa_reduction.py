"""Reductions and ARGMAX (skriptnd.tosa.ops.reduction) against the TOSA reference model.

Tolerances: integer/bool results, REDUCE_MAX/MIN and ARGMAX are exact (sign of zero included).
Float REDUCE_SUM: |mine - ref| <= n·eps·sum(|x|) + 1 ulp (the reference accumulates sequentially in
fp32, this implementation in float64 rounded once); REDUCE_PRODUCT: relative error <= (n + 1)·eps.
"""

from __future__ import annotations

import numpy as np
import pytest
from tosa_oracle import (
    ReferenceError,
    compare_with_reference,
    make_float,
    rand_float,
    rand_int,
    rand_shape,
    require_oracle,
    run_reference,
    seeded_rng,
    ulp_distance,
)

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable

pytestmark = pytest.mark.tosa("1.0")

FLOATS = ("fp32", "fp16", "bf16")
EPS = {"fp32": 2.0**-23, "fp16": 2.0**-10, "bf16": 2.0**-7}


@pytest.fixture(autouse=True)
def _oracle():
    require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return seeded_rng("tosa-red", *key)


@pytest.mark.parametrize("op", ["REDUCE_ALL", "REDUCE_ANY"])
def test_reduce_bool_random(op):
    for seed in range(4):
        rng = _rng(op, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=5)
        x = rng.random(shape) < (0.9 if op == "REDUCE_ALL" else 0.1)
        compare_with_reference(op, [x], {"axis": int(rng.integers(len(shape)))}, "bool")


@pytest.mark.parametrize("t", ["int8", "int16", "int32", *FLOATS])
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_minmax_random(op, t):
    for seed in range(3):
        rng = _rng(op, t, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=5)
        axis = int(rng.integers(len(shape)))
        if t.startswith("int"):
            compare_with_reference(op, [rand_int(rng, t, shape)], {"axis": axis}, t)
            continue
        x = rand_float(rng, t, shape, -3, 3, special_fraction=0.3)
        for nan_mode in ("PROPAGATE", "IGNORE"):
            compare_with_reference(op, [x], {"axis": axis, "nan_mode": nan_mode}, t)


def test_reduce_sum_int32_random():
    for seed in range(4):
        rng = _rng("sum", seed)
        shape = rand_shape(rng, min_rank=1, max_dim=6)
        x = rand_int(rng, "int32", shape, -(1 << 27), 1 << 27)
        compare_with_reference("REDUCE_SUM", [x], {"axis": int(rng.integers(len(shape)))}, "int32")


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", ["REDUCE_SUM", "REDUCE_PRODUCT"])
def test_reduce_float_random(op, t):
    for seed in range(3):
        rng = _rng(op, t, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=6)
        axis = int(rng.integers(len(shape)))
        lo, hi = (-100, 100) if op == "REDUCE_SUM" else (0.5, 2)
        x = rand_float(rng, t, shape, lo, hi, special_fraction=0)
        mine = np.asarray(OPS[op](x, axis=axis), np.float64)
        ref = run_reference(op, [x], {"axis": axis}, t, input_types=["bf16" if t == "bf16" else None])
        ref = np.asarray(ref, np.float64)
        n = shape[axis]
        xf = np.asarray(x, np.float64)
        if op == "REDUCE_SUM":
            bound = n * EPS[t] * np.sum(np.abs(xf), axis=axis, keepdims=True)
            ok = (np.abs(mine - ref) <= bound) | (ulp_distance(mine, ref, t) <= 1)
        else:
            ok = np.abs(mine - ref) <= (n + 1) * EPS[t] * np.abs(ref)
        assert ok.all(), (op, t, mine, ref)
    x = make_float([[1.0, np.nan], [np.inf, -np.inf], [-0.0, -0.0]], t)
    compare_with_reference(op, [x], {"axis": 1}, t)


@pytest.mark.parametrize("t", ["int8", "int16", *FLOATS])
def test_argmax_random(t):
    for seed in range(3):
        rng = _rng("argmax", t, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=5)
        axis = int(rng.integers(len(shape)))
        if t.startswith("int"):
            x = rand_int(rng, t, shape, -3, 3) if seed == 0 else rand_int(rng, t, shape)
            compare_with_reference("ARGMAX", [x], {"axis": axis}, "int32")
            continue
        x = rand_float(rng, t, shape, -2, 2, special_fraction=0.3)
        for nan_mode in ("PROPAGATE", "IGNORE"):
            compare_with_reference("ARGMAX", [x], {"axis": axis, "nan_mode": nan_mode}, "int32")


def test_digest_argmax_and_reduce_nan():  # G#20
    f = np.float32
    assert OPS["ARGMAX"](np.int8([3, 7, 7, -128]), axis=0).tolist() == 1
    assert OPS["ARGMAX"](np.int8([-128, -128]), axis=0).tolist() == 0
    assert OPS["ARGMAX"](f([np.nan, 1, 5, 5]), axis=0).tolist() == 0  # 1.0 PROPAGATE: first NaN
    assert OPS["ARGMAX"](f([1, np.nan, 5, 5]), axis=0, nan_mode="IGNORE").tolist() == 2
    assert np.isnan(OPS["REDUCE_MAX"](f([1, np.nan, 3]), axis=0)[0])
    assert OPS["REDUCE_MAX"](f([1, np.nan, 3]), axis=0, nan_mode="IGNORE").tolist() == [3.0]
    for x, attrs in [(f([np.nan, 1, 5, 5]), {}), (f([1, np.nan, 5, 5]), {"nan_mode": "IGNORE"}),
                     (np.int8([3, 7, 7, -128]), {})]:
        compare_with_reference("ARGMAX", [x], {"axis": 0, **attrs}, "int32")
    for x in ([-0.0, 0.0], [0.0, -0.0]):
        compare_with_reference("REDUCE_MAX", [f(x)], {"axis": 0}, "fp32")
        compare_with_reference("REDUCE_MIN", [f(x)], {"axis": 0}, "fp32")


def test_reduce_sum_partial_overflow_is_unpredictable():  # G#17
    x = np.int32([2**31 - 1, 1, -5])  # the final sum fits, a partial sum does not
    with pytest.raises(TosaUnpredictable):
        OPS["REDUCE_SUM"](x, axis=0)
    assert run_reference("REDUCE_SUM", [x], {"axis": 0}, "int32").status == "UNPREDICTABLE"


@pytest.mark.parametrize("op,x,attrs,out", [
    ("REDUCE_SUM", np.int32([[1, 2]]), {"axis": 2}, "int32"),
    ("REDUCE_MAX", np.int32([[1, 2]]), {"axis": -1}, "int32"),
    ("REDUCE_SUM", np.int8([1, 2]), {"axis": 0}, "int8"),
    ("REDUCE_PRODUCT", np.int32([1, 2]), {"axis": 0}, "int32"),
    ("REDUCE_ALL", np.int8([1, 2]), {"axis": 0}, "int8"),
    ("ARGMAX", np.int32([1, 2]), {"axis": 0}, "int32"),
    ("ARGMAX", np.int8([[1, 2]]), {"axis": 2}, "int32"),
])
def test_reduction_error_if(op, x, attrs, out):
    with pytest.raises(TosaError):
        OPS[op](x, **attrs)
    shape = (1,) if op == "ARGMAX" else (1, 1)[: x.ndim]
    ref = run_reference(op, [x], attrs, out, output_shape=shape)
    assert isinstance(ref, ReferenceError) and ref.is_error, ref


@pytest.mark.tosa("0.30")
def test_030_argmax_skips_nan_and_limits_rank():
    """0.30 §2.3.1: ``value > max_value`` starting from minimum<in_t>: NaN is never selected."""
    f = np.float32
    assert OPS["ARGMAX"](f([np.nan, 1, 5, 5]), axis=0, version="0.30").tolist() == 2
    assert OPS["ARGMAX"](f([np.nan, np.nan]), axis=0, version="0.30").tolist() == 0
    assert OPS["ARGMAX"](f([-np.inf, -np.inf]), axis=0, version="0.30").tolist() == 0
    with pytest.raises(TosaError, match="rank"):
        OPS["ARGMAX"](np.zeros((1, 1, 1, 1, 2), np.int8), axis=4, version="0.30")
    assert OPS["ARGMAX"](np.zeros((1, 1, 1, 1, 2), np.int8), axis=4).shape == (1, 1, 1, 1)
    with pytest.raises(TosaError, match="rank"):
        OPS["REDUCE_SUM"](np.zeros((1, 1, 1, 1, 2), np.int32), axis=4, version="0.30")
    assert np.isnan(OPS["REDUCE_MIN"](f([2, np.nan]), axis=0, version="0.30")[0])
