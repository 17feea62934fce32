"""How a TOSA program is built and called (skriptnd.tosa.program.build; issue 28's per-operation cost): identical
operators computed once, reshape chains collapsed, small equal constants shared; the results always the
generic kernels' (run one by one, the independent expectation)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tosa_program import _build, _naive

F32 = np.float32
SHIFT = np.zeros(1, np.int8)


def test_an_operator_repeated_on_the_same_operands_runs_once() -> None:
    # GPT-2's imported layer norm computes x - mean twice (once for the variance, once for the result)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(F32)
    mean = x.mean(axis=1, keepdims=True).astype(F32)
    ops = [("SUB", ["x", "m"], {}, "d1"), ("MUL", ["d1", "d1", "s1"], {}, "sq"),
           ("SUB", ["x", "m"], {}, "d2"), ("MUL", ["d2", "sq", "s2"], {}, "y")]
    program = _build(ops, {"x": x, "m": mean}, {"s1": SHIFT, "s2": SHIFT.copy()}, ["y"])
    assert [o.name for o in program.ops] == ["SUB", "MUL", "MUL"]
    assert len(program.constants) == 1  # the two equal shift constants are one
    env = _naive(ops, {"x": x, "m": mean, "s1": SHIFT, "s2": SHIFT})
    np.testing.assert_array_equal(program([x, mean])[0], env["y"])


def test_operators_differing_in_an_attribute_or_a_signed_zero_stay_apart() -> None:
    x = np.array([[-1.0, -0.0, 0.0, 2.0, np.nan]], F32)
    ops = [("CLAMP", ["x"], {"min_val": 0.0, "max_val": 1.0}, "a"),
           ("CLAMP", ["x"], {"min_val": -0.0, "max_val": 1.0}, "b"),
           ("CLAMP", ["x"], {"min_val": 0.0, "max_val": 1.0, "nan_mode": "IGNORE"}, "c"),
           ("REDUCE_SUM", ["x"], {"axis": 0}, "d"), ("REDUCE_SUM", ["x"], {"axis": 1}, "e")]
    program = _build(ops, {"x": x}, {}, ["a", "b", "c", "d", "e"])
    assert len(program.ops) == 5
    env = _naive(ops, {"x": x})
    for got, name in zip(program([x]), "abcde", strict=True):
        np.testing.assert_array_equal(got, env[name])
    zeros = _build([("ADD", ["x", "p"], {}, "a"), ("ADD", ["x", "n"], {}, "b")], {"x": x},
                   {"p": np.zeros((1, 1), F32), "n": np.full((1, 1), -0.0, F32)}, ["a", "b"])
    assert len(zeros.constants) == 2 and len(zeros.ops) == 2  # +0 and -0 are different constants


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([(2, 3, 4), (6, 4), (24,), (1, 24), (4, 1, 6)]))
def test_a_reshape_of_a_reshape_is_one_reshape_with_the_same_values(seed: int, middle: tuple[int, ...]) -> None:
    x = np.random.default_rng(seed).standard_normal((2, 12)).astype(F32)
    ops = [("RESHAPE", ["x", "s1"], {}, "r1"), ("RESHAPE", ["r1", "s2"], {}, "r2"),
           ("ABS", ["r2"], {}, "y")]
    shapes = {"s1": np.array(middle, np.int64), "s2": np.array([3, 8], np.int64)}
    program = _build(ops, {"x": x}, shapes, ["y"])
    assert [o.name for o in program.ops] == ["RESHAPE", "ABS"]
    np.testing.assert_array_equal(program([x])[0], _naive(ops, {"x": x, **shapes})["y"])
    kept = _build(ops, {"x": x}, shapes, ["r1", "y"])  # the first reshape is an output: it stays
    outs = kept([x])
    np.testing.assert_array_equal(outs[0], x.reshape(middle))
    np.testing.assert_array_equal(outs[1], np.abs(x.reshape(3, 8)))
