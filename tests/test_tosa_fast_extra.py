"""skriptnd.tosa.program.fast_extra: the fast forms of POW, GATHER, int32 ADD / SUB, the logical operators and
the exact CASTs give the generic TOSA kernels' values, and decline (the generic kernel runs, with its TOSA
error) wherever a REQUIRE of the generic kernel could fail."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program.build import Builder, ProgramError
from skriptnd.tosa.program.fast_extra import extra_form

F32 = np.float32
I32 = np.int32


def _program(name: str, inputs: list[np.ndarray], constants: list[np.ndarray | None],
             attrs: dict[str, Any] | None = None) -> Any:
    """A one-operator program; ``constants[i]``: operand i as a program constant (None: a run-time input)."""
    b = Builder()
    names = [b.constant(c) if c is not None else b.input() for c in constants]
    b.output(b.emit(name, names, dict(attrs or {})))
    program = b.finish()
    return lambda: program([x for x, c in zip(inputs, constants, strict=True) if c is None])[0]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2.0, 3.0, 1.0, 0.5, -0.5, 1.7, -2.0]), st.integers(0, 2**31), st.booleans())
def test_pow_with_a_constant_exponent_gives_the_generic_values(e: float, seed: int, zeros: bool) -> None:
    rng = np.random.default_rng(seed)
    x = np.abs(rng.standard_normal((2, 3, 5))).astype(F32) * F32(rng.uniform(0.01, 20))
    if zeros and e > 0:  # 0 ** y is in POW's domain for y > 0
        x[0, 0] = 0.0
    y = np.full((1, 1, 1), e, F32)
    fast = extra_form("POW", [None, y], {})
    assert fast is not None
    expected = OPS["POW"](x, y)
    got = fast(x, y)
    assert got.dtype == F32 and got.shape == expected.shape
    if e in (1.0,):
        np.testing.assert_array_equal(got, expected)
    else:  # products rounded per MUL, powf: within a few ulp of the float64 power rounded once
        np.testing.assert_allclose(got, expected, rtol=3e-7, atol=0)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf, -np.inf])
def test_pow_outside_its_domain_declines_and_the_program_reports_the_require(bad: float) -> None:
    x = np.array([[1.0, 2.0, bad]], F32)
    y = np.full((1, 1), 3.0, F32)
    fast = extra_form("POW", [None, y], {})
    assert fast is not None and fast(x, y) is NotImplemented
    with pytest.raises(ProgramError) as info:  # the generic kernel ran: TOSA's REQUIRE
        _program("POW", [x, y], [None, y])()
    assert info.value.op.name == "POW"


def test_pow_with_zero_base_needs_a_positive_exponent() -> None:
    x = np.array([[0.0, 2.0]], F32)
    for e, ok in ((2.0, True), (-2.0, False), (0.5, True)):
        y = np.full((1, 1), e, F32)
        got = extra_form("POW", [None, y], {})(x, y)  # type: ignore[misc]
        if ok:
            np.testing.assert_allclose(got, OPS["POW"](x, y), rtol=3e-7)
        else:
            assert got is NotImplemented


def test_pow_with_a_run_time_or_varying_exponent_has_no_form() -> None:
    assert extra_form("POW", [None, None], {}) is None
    assert extra_form("POW", [None, np.array([[2.0, 3.0]], F32)], {}) is None


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 6), st.integers(1, 5),
       st.sampled_from([F32, np.int8, np.int16, I32]), st.integers(0, 2**31))
def test_gather_gives_the_generic_values(n: int, k: int, w: int, c: int, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal((n, k, c)) * 50).astype(dtype)
    indices = rng.integers(0, k, size=(n, w)).astype(I32)
    got = extra_form("GATHER", [None, None], {})(values, indices)  # type: ignore[misc]
    expected = OPS["GATHER"](values, indices)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("index", [-1, 4, 2**31 - 1])
def test_gather_out_of_range_declines_and_the_program_reports_the_require(index: int) -> None:
    values = np.arange(12, dtype=F32).reshape(1, 4, 3)
    indices = np.array([[0, index]], I32)
    assert extra_form("GATHER", [None, None], {})(values, indices) is NotImplemented  # type: ignore[misc]
    with pytest.raises(ProgramError) as info:
        _program("GATHER", [values, indices], [values, None])()
    assert info.value.op.name == "GATHER"


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["ADD", "SUB"]), st.integers(0, 2**31), st.booleans())
def test_int32_add_and_sub_give_the_generic_values(name: str, seed: int, broadcast: bool) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**30), 2**30, size=(3, 4)).astype(I32)
    b = rng.integers(-(2**30), 2**30, size=(1, 4) if broadcast else (3, 4)).astype(I32)
    got = extra_form(name, [None, None], {})(a, b)  # type: ignore[misc]
    expected = OPS[name](a, b)
    assert got.dtype == I32
    np.testing.assert_array_equal(got, expected)


def test_int32_overflow_declines_and_the_program_reports_the_require() -> None:
    a, b = np.array([[2**31 - 1, 0]], I32), np.array([[1, 1]], I32)
    assert extra_form("ADD", [None, None], {})(a, b) is NotImplemented  # type: ignore[misc]
    with pytest.raises(ProgramError):
        _program("ADD", [a, b], [None, None])()
    np.testing.assert_array_equal(_program("SUB", [a, b], [None, None])(), [[2**31 - 2, -1]])


def test_fp32_add_still_runs_through_the_fp32_form_in_a_program() -> None:
    a, b = np.array([[1.5, 2.0]], F32), np.array([[0.25]], F32)
    np.testing.assert_array_equal(_program("ADD", [a, b], [None, b])(), OPS["ADD"](a, b))
    ints = np.array([[3, 4]], I32)
    np.testing.assert_array_equal(_program("ADD", [ints, ints], [None, None])(), [[6, 8]])


def test_mismatched_ranks_decline() -> None:
    a, b = np.zeros((2, 3), I32), np.zeros((3,), I32)
    assert extra_form("ADD", [None, None], {})(a, b) is NotImplemented  # type: ignore[misc]
    p, q = np.zeros((2, 3), np.bool_), np.zeros((3,), np.bool_)
    assert extra_form("LOGICAL_AND", [None, None], {})(p, q) is NotImplemented  # type: ignore[misc]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT"]), st.integers(0, 2**31))
def test_logical_operators_give_the_generic_values(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random((2, 1, 4)) > 0.5, rng.random((2, 3, 1)) > 0.5
    args = [a] if name == "LOGICAL_NOT" else [a, b]
    got = extra_form(name, [None] * len(args), {})(*args)  # type: ignore[misc]
    np.testing.assert_array_equal(got, OPS[name](*args))
    assert got.dtype == np.bool_


@pytest.mark.parametrize(("source", "target"), [
    (np.bool_, "int8"), (np.bool_, "int32"), (np.int8, "bool"), (np.int32, "bool"), (np.int8, "int32"),
    (np.int16, "float32"), (np.int8, "float32"), (I32, "float32")])
def test_exact_casts_give_the_generic_values(source: Any, target: str) -> None:
    rng = np.random.default_rng(0)
    if source is np.bool_:
        x = rng.random((3, 5)) > 0.5
    else:
        info = np.iinfo(source)
        x = rng.integers(info.min, info.max, size=(3, 5), endpoint=True).astype(source)
        x[0, :3] = [0, info.min, info.max]
        if source is I32:  # values float32 cannot hold: rounded to nearest even as the generic kernel
            x[1, :2] = [2**24 + 1, -(2**31) + 65]
    fast = extra_form("CAST", [None], {"output_dtype": target})
    assert fast is not None
    got, expected = fast(x), OPS["CAST"](x, output_dtype=target)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_rounding_and_unlisted_casts_stay_generic() -> None:
    x = np.array([[0.5, 1.5, -2.5, np.nan]], F32)
    fast = extra_form("CAST", [None], {"output_dtype": "int8"})
    assert fast is not None and fast(x) is NotImplemented  # float -> int rounds and saturates: generic
    np.testing.assert_array_equal(_program("CAST", [x], [None], {"output_dtype": "int8"})(),
                                  OPS["CAST"](x, output_dtype="int8"))
    to_bool = extra_form("CAST", [None], {"output_dtype": "bool"})
    assert to_bool is not None and to_bool(np.array([True])) is NotImplemented  # bool -> bool is no TOSA CAST


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 2), st.integers(1, 3), st.sampled_from([F32, I32, np.bool_, np.int8]))
def test_concat_and_tile_give_the_generic_values(seed: int, axis: int, n: int, dtype: Any) -> None:
    rng = np.random.default_rng(seed)
    shapes = [[2, 3, 4] for _ in range(n)]
    for s in shapes:
        s[axis] = int(rng.integers(1, 4))
    xs = [(rng.standard_normal(s) * 10).astype(dtype) for s in shapes]
    concat = extra_form("CONCAT", [None] * n, {"axis": axis})
    assert concat is not None
    got = concat(*xs)
    np.testing.assert_array_equal(got, OPS["CONCAT"](xs, axis=axis))
    assert got.dtype == xs[0].dtype
    multiples = np.array(rng.integers(1, 3, 3), np.int64)
    tile = extra_form("TILE", [None, multiples], {})
    assert tile is not None
    np.testing.assert_array_equal(tile(xs[0], multiples), OPS["TILE"](xs[0], multiples))


def test_concat_of_mismatched_operands_declines_and_the_program_reports_it() -> None:
    a, b = np.zeros((2, 3), F32), np.zeros((3, 3), F32)
    concat = extra_form("CONCAT", [None, None], {"axis": 1})
    assert concat is not None and concat(a, b) is NotImplemented
    assert concat(a, a.astype(I32)) is NotImplemented
    with pytest.raises(ProgramError):
        _program("CONCAT", [a, b], [None, None], {"axis": 1})()
