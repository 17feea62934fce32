"""Data layout, GATHER/SCATTER, IDENTITY and CONST (skriptnd.tosa.ops.data_layout) against the reference model.

All results are exact (data movement only; float values compared bit for bit).
"""

from __future__ import annotations

import numpy as np
import pytest
from tosa_oracle import (
    ReferenceError,
    compare_with_reference,
    rand_float,
    rand_int,
    rand_shape,
    require_oracle,
    run_reference,
    seeded_rng,
)

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable

pytestmark = pytest.mark.tosa("1.0")

TYPES = ("bool", "int8", "int16", "int32", "fp16", "bf16", "fp32")


@pytest.fixture(autouse=True)
def _oracle():
    require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return seeded_rng("tosa-dl", *key)


def _data(rng: np.random.Generator, t: str, shape: tuple[int, ...]):
    if t == "bool":
        return rng.random(shape) < 0.5
    if t.startswith("int"):
        return rand_int(rng, t, shape)
    return rand_float(rng, t, shape, -100, 100)


def _const(t: str, value: float | int | bool):
    if t == "bool":
        return np.array([bool(value)])
    if t.startswith("int"):
        return np.array([value], t)
    from tosa_oracle import make_float

    return make_float([value], t)


@pytest.mark.parametrize("t", TYPES)
def test_data_layout_random(t):
    for seed in range(3):
        rng = _rng(t, seed)
        shape = rand_shape(rng, min_rank=1, max_dim=4)
        x = _data(rng, t, shape)
        rank = len(shape)
        axis = int(rng.integers(rank))
        # CONCAT of 1-3 inputs differing along the axis
        parts = [x] + [_data(rng, t, tuple(int(rng.integers(1, 4)) if i == axis else d for i, d in enumerate(shape)))
                       for _ in range(int(rng.integers(0, 3)))]
        _concat(parts, axis, t)
        padding = rng.integers(0, 3, size=2 * rank)
        compare_with_reference("PAD", [x, padding, _const(t, 1 if t != "bool" else True)], {}, t)
        compare_with_reference("RESHAPE", [x, np.array([int(np.prod(shape))])], {}, t)
        compare_with_reference("RESHAPE", [x, np.array(list(reversed(shape)))], {}, t)
        compare_with_reference("REVERSE", [x], {"axis": axis}, t)
        start = np.array([int(rng.integers(d)) for d in shape])
        size = np.array([int(rng.integers(1, d - s + 1)) for d, s in zip(shape, start, strict=True)])
        compare_with_reference("SLICE", [x, start, size], {}, t)
        compare_with_reference("TILE", [x, rng.integers(1, 4, size=rank)], {}, t)
        compare_with_reference("TRANSPOSE", [x], {"perms": [int(p) for p in rng.permutation(rank)]}, t)
        compare_with_reference("IDENTITY", [x], {}, t)


def _concat(parts, axis, t):
    mine = OPS["CONCAT"](parts, axis=axis)
    ref = run_reference("CONCAT", parts, {"axis": axis}, t,
                        input_types=["bf16" if t == "bf16" else None] * len(parts))
    assert not isinstance(ref, ReferenceError), ref
    assert np.array_equal(np.asarray(mine).view(np.uint8), np.asarray(ref).astype(np.asarray(mine).dtype).view(np.uint8))


def test_rank0_tensors():
    x = np.int32(7).reshape(())
    for op, extra in [("IDENTITY", []), ("RESHAPE", [np.array([1, 1])])]:
        compare_with_reference(op, [x, *extra], {}, "int32")
    compare_with_reference("RESHAPE", [np.int32([5]), np.zeros(0, np.int64)], {}, "int32")
    for op, extra, attrs in [("PAD", [np.zeros(0, np.int64), np.int32([0])], {}), ("TILE", [np.zeros(0, np.int64)], {}),
                             ("SLICE", [np.zeros(0, np.int64), np.zeros(0, np.int64)], {}),
                             ("TRANSPOSE", [], {"perms": []}), ("REVERSE", [], {"axis": 0})]:
        with pytest.raises(TosaError, match="rank"):
            OPS[op](x, *extra, **attrs)
        ref = run_reference(op, [x, *extra], attrs, "int32", output_shape=())
        assert isinstance(ref, ReferenceError) and ref.is_error


@pytest.mark.parametrize("t", ["int8", "int16", "int32", "fp16", "bf16", "fp32"])
def test_gather_scatter_random(t):
    for seed in range(3):
        rng = _rng("gs", t, seed)
        n, k, c, w = (int(v) for v in rng.integers(1, 5, size=4))
        values = _data(rng, t, (n, k, c))
        indices = rng.integers(0, k, size=(n, w)).astype(np.int32)
        compare_with_reference("GATHER", [values, indices], {}, t)
        w = int(rng.integers(1, k + 1))
        idx = np.stack([rng.permutation(k)[:w] for _ in range(n)]).astype(np.int32)  # no duplicates
        compare_with_reference("SCATTER", [values, idx, _data(rng, t, (n, w, c))], {}, t,
                               output_shape=(n, k, c))


def test_digest_transpose_and_gather():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    out = OPS["TRANSPOSE"](x, perms=[2, 0, 1])
    assert out.shape == (4, 2, 3) and out[1, 0, 2] == x[0, 2, 1]
    compare_with_reference("TRANSPOSE", [x], {"perms": [2, 0, 1]}, "int32")


@pytest.mark.parametrize("op,inputs,attrs,out,shape,condition", [
    ("GATHER", [np.zeros((1, 3, 1), np.int8), np.int32([[3]])], {}, "int8", (1, 1, 1), "0 <= k && k < K"),
    ("SCATTER", [np.zeros((1, 3, 1), np.int8), np.int32([[1, 1]]), np.ones((1, 2, 1), np.int8)], {}, "int8",
     (1, 3, 1), "output_modified"),
    ("SCATTER", [np.zeros((1, 3, 1), np.int8), np.int32([[-1]]), np.ones((1, 1, 1), np.int8)], {}, "int8",
     (1, 3, 1), "0 <= k && k < K"),
])
def test_gather_scatter_require(op, inputs, attrs, out, shape, condition):
    with pytest.raises(TosaUnpredictable, match=condition.replace("&&", ".*")):
        OPS[op](*inputs, **attrs)
    ref = run_reference(op, inputs, attrs, out, output_shape=shape)
    assert isinstance(ref, ReferenceError) and ref.is_unpredictable, ref


X = np.arange(6, dtype=np.int8).reshape(2, 3)
ERROR_CASES = [
    ("CONCAT", [X, np.zeros((3, 3), np.int8)], {"axis": 1}, (2, 6), "shapes1"),
    ("CONCAT", [X, X], {"axis": 2}, (2, 3), "axis"),
    ("PAD", [X, np.array([0, -1, 0, 0]), np.int8([0])], {}, (2, 3), "padding"),
    ("RESHAPE", [X, np.array([4, 2])], {}, (4, 2), "tensor_size"),
    ("REVERSE", [X], {"axis": 2}, (2, 3), "axis"),
    ("SLICE", [X, np.array([1, 1]), np.array([2, 1])], {}, (2, 1), "start[index] + size[index] > shape1[index]"),
    ("SLICE", [X, np.array([-1, 0]), np.array([1, 1])], {}, (1, 1), "start[index] < 0"),
    ("SLICE", [X, np.array([0, 0]), np.array([1, 0])], {}, (1, 1), "size[index] <= 0"),
    ("TRANSPOSE", [X], {"perms": [0, 0]}, (2, 2), "indexes_used"),
    ("TRANSPOSE", [X], {"perms": [0, 2]}, (2, 3), "rank(shape1)"),
    ("TILE", [X, np.array([1, 2, 3])], {}, (2, 6, 3), "rank(shape1) != rank(shape)"),
]


@pytest.mark.parametrize("op,inputs,attrs,shape,condition", ERROR_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ERROR_CASES)])
def test_data_layout_error_if(op, inputs, attrs, shape, condition):
    with pytest.raises(TosaError) as info:
        if op == "CONCAT":
            OPS[op](inputs, **attrs)
        else:
            OPS[op](*inputs, **attrs)
    assert condition in str(info.value)
    ref = run_reference(op, inputs, attrs, "int8", output_shape=shape)
    assert isinstance(ref, ReferenceError) and ref.is_error, ref


@pytest.mark.tosa("0.30")
def test_030_attribute_forms():
    """0.30: PAD padding is int32[rank, 2] and pad_const a scalar attribute; shapes are attributes."""
    out = OPS["PAD"](X, np.array([[1, 0], [0, 2]]), 9, version="0.30")
    assert out.tolist() == [[9, 9, 9, 9, 9], [0, 1, 2, 9, 9], [3, 4, 5, 9, 9]]
    assert np.array_equal(out, OPS["PAD"](X, np.array([1, 0, 0, 2]), np.int8([9])))
    with pytest.raises(TosaError):
        OPS["PAD"](X, np.array([1, 0, 0, 2]), 9, version="0.30")
    assert OPS["SLICE"](X, [0, 1], [2, 2], version="0.30").tolist() == [[1, 2], [4, 5]]
    assert OPS["TILE"](X[:1], [2, 1], version="0.30").tolist() == [[0, 1, 2], [0, 1, 2]]
    assert OPS["RESHAPE"](X, [3, 2], version="0.30").shape == (3, 2)
    with pytest.raises(TosaError, match="rank"):
        OPS["REVERSE"](np.zeros((1,) * 5, np.int8), axis=0, version="0.30")


def test_const():
    x = np.float16([1.5, -0.0])
    assert np.array_equal(OPS["CONST"](x).view(np.uint16), x.view(np.uint16))
    with pytest.raises(TosaError):
        OPS["CONST"](np.int64([1]))
