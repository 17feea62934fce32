"""SkriptND int tensors in TOSA (issue 30, "every operation compiled"): the operators that cannot overflow
in int32 (comparisons, select, data movement, gather of int/bool values, casts int -> bool/real, bool ->
int) legalize with int32 values inside (NARROWed in, WIDENed out, range-checked); each is compared with the
operator's @lower formula on random int64 inputs, and the integer arithmetic that could wrap stays refused."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from skriptnd.lower import run_lowering
from skriptnd.tosa.legalize import legalize, run_subgraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_tosa_legalize import _compose  # noqa: E402


def _value(t, rng, low, high):
    if t.dtype == "int":
        return rng.integers(low, high, t.shape).astype(np.int64)
    if t.dtype == "bool":
        return rng.integers(0, 2, t.shape).astype(np.bool_)
    return rng.standard_normal(t.shape).astype(np.float32)


def check(inputs: dict[str, str], expr: str, out_type: str, ref=None, low: int = -(2 ** 31), high: int = 2 ** 31):
    """``expr`` legalized and run on several random inputs against @lower (or ``ref``, a numpy formula, for
    operators without @lower)."""
    _, op = _compose(inputs, expr, out_type)
    sg, reason = legalize(op)
    assert sg is not None, reason
    for seed in range(4):
        rng = np.random.default_rng(seed)
        args = [[_value(u, rng, low, high) for u in t] if isinstance(t, list) else _value(t, rng, low, high)
                for t in op.inputs]
        (got,) = run_subgraph(sg, args)
        flat = [a for v in args for a in (v if isinstance(v, list) else [v])]
        (expected,) = run_lowering(op.definition, op.binding, args) if ref is None else (ref(*flat),)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("cmp", ["lt", "gt", "le", "ge", "eq", "ne"])
def test_int_comparisons(cmp: str) -> None:
    check({"x": "int[2,5]", "y": "int[5]"}, f"math.{cmp}(x, y)", "bool", low=-3, high=3)  # small: ties happen


def test_int_select_and_layout() -> None:
    check({"c": "bool[2,5]", "x": "int[2,5]", "y": "int[1]"}, "math.select(c, x, y)", "int")
    check({"x": "int[2,3,4]"}, "layout.transpose{perm=[2, 0, 1]}(x)", "int", lambda x: x.transpose(2, 0, 1))
    check({"x": "int[2,3,4]"}, "layout.reshape{shape=[6, 4]}(x)", "int", lambda x: x.reshape(6, 4))
    check({"x": "int[2,3]", "y": "int[2,3]"}, "layout.concat{axis=1}([x, y])", "int",
          lambda x, y: np.concatenate([x, y], 1))


def test_int_casts() -> None:
    check({"x": "int[3,4]"}, "layout.cast<bool>(x)", "bool", lambda x: x != 0, -2, 3)
    check({"x": "int[3,4]"}, "layout.cast<real>(x)", "real", lambda x: x.astype(np.float32))
    check({"x": "bool[3,4]"}, "layout.cast<int>(x)", "int", lambda x: x.astype(np.int64))


def test_gather_of_int_and_bool_values() -> None:
    check({"x": "int[5,3]", "i": "int[2,4]"}, "layout.gather{axis=0}(x, i)", "int", low=0, high=5)
    check({"x": "bool[5,3]", "i": "int[4]"}, "layout.gather{axis=1}(x, i)", "bool", low=0, high=3)
    # gather_nd (a dynamo export's attention mask): index pairs in [0, 3) fit both indexed extents
    check({"x": "int[4,3,2]", "i": "int[5,2]"}, "layout.gather_nd(x, i)", "int", low=0, high=3)
    check({"x": "bool[4,3,2]", "i": "int[2,5,2]"}, "layout.gather_nd(x, i)", "bool", low=0, high=3)


@pytest.mark.parametrize(("inputs", "expr"), [({"x": "int[3]", "y": "int[3]"}, "math.add(x, y)"),
                                              ({"x": "int[3]", "y": "int[3]"}, "math.mul(x, y)"),
                                              ({"x": "int[3]", "y": "int[3]"}, "math.sub(x, y)"),
                                              ({"r": "real[3]"}, "layout.cast<int>(r)")])
def test_integer_arithmetic_that_could_wrap_is_not_legalized(inputs: dict[str, str], expr: str) -> None:
    _, op = _compose(inputs, expr, "int")
    sg, reason = legalize(op)
    assert sg is None and "int" in reason, reason
