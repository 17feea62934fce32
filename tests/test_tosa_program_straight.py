"""A TOSA program run as one straight-line function (skriptnd.tosa.program.straight) computes what the loop
over its steps computes and what the generic kernels compute one by one, frees values after their last use,
and attributes a failure to its operator."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program import straight
from skriptnd.tosa.program.build import Builder, ProgramError

F32 = np.float32
UNARY = ["EXP", "TANH", "ABS", "NEGATE", "SIGMOID", "FLOOR"]
BINARY = ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"]


def _program(ops: list[tuple[str, list[int]]], n_inputs: int) -> tuple[Any, list[tuple[str, list[int]]]]:
    """A program over ``n_inputs`` inputs whose operator k reads the values listed (earlier values by index:
    the inputs first, then each operator's result); every value no operator reads is an output."""
    b = Builder()
    values = [b.input() for _ in range(n_inputs)]
    read: set[int] = set()
    for name, args in ops:
        attrs: dict[str, Any] = {"shift": 0} if name == "MUL" else {}
        operands = [values[a] for a in args]
        if name == "MUL":
            operands.append(b.constant(np.zeros(1, np.int8)))
        values.append(b.emit(name, operands, attrs))
        read.update(args)
    outputs = [k for k in range(n_inputs, len(values)) if k not in read] or [len(values) - 1]
    for k in outputs:
        b.output(values[k])
    return b.finish(), [(str(k), []) for k in outputs]


def _naive(ops: list[tuple[str, list[int]]], args: list[np.ndarray], outputs: list[int]) -> list[np.ndarray]:
    values = list(args)
    for name, ins in ops:
        operands = [values[a] for a in ins]
        values.append(OPS[name](*operands, shift=0) if name == "MUL" else OPS[name](*operands))
    return [values[k] for k in outputs]


@st.composite
def _chains(draw: st.DrawFn) -> tuple[int, list[tuple[str, list[int]]]]:
    n_inputs = draw(st.integers(1, 3))
    ops: list[tuple[str, list[int]]] = []
    for k in range(draw(st.integers(1, 12))):
        available = n_inputs + k
        if draw(st.booleans()):
            ops.append((draw(st.sampled_from(UNARY)), [draw(st.integers(0, available - 1))]))
        else:
            ops.append((draw(st.sampled_from(BINARY)),
                        [draw(st.integers(0, available - 1)), draw(st.integers(0, available - 1))]))
    return n_inputs, ops


@settings(max_examples=40, deadline=None)
@given(_chains(), st.integers(0, 2**31))
def test_straight_line_and_loop_give_the_generic_kernels_results(chain: tuple[int, list[tuple[str, list[int]]]],
                                                                 seed: int) -> None:
    n_inputs, ops = chain
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((2, 3)).astype(F32) for _ in range(n_inputs)]
    program, _ = _program(ops, n_inputs)
    read = {a for _, ins in ops for a in ins}
    outputs = [k for k in range(n_inputs, n_inputs + len(ops)) if k not in read] or [n_inputs + len(ops) - 1]
    expected = _naive(ops, args, outputs)
    got = program(args)
    assert program._straight is not None  # the straight-line function ran
    program._straight = None
    looped = program(args)
    assert len(got) == len(looped) == len(expected)
    for g, lo, e in zip(got, looped, expected, strict=True):
        np.testing.assert_array_equal(g, lo)
        np.testing.assert_allclose(g, e, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("straight_line", [True, False])
def test_a_failing_operator_is_named_on_either_path(straight_line: bool) -> None:
    # INTDIV by zero is a TOSA REQUIRE: the generic kernel raises, and the error names INTDIV, not a neighbour
    b = Builder()
    x, y = b.input(), b.input()
    s = b.emit("ADD", [x, y], {})
    q = b.emit("INTDIV", [s, y], {})
    b.output(b.emit("ABS", [q], {}))
    program = b.finish()
    ok = program([np.array([4, 6], np.int32), np.array([1, 2], np.int32)])[0]
    np.testing.assert_array_equal(ok, [5, 4])
    if not straight_line:
        program._straight = None
    with pytest.raises(ProgramError) as info:
        program([np.array([4, 6], np.int32), np.array([1, 0], np.int32)])
    assert info.value.op.name == "INTDIV"


@dataclass
class _FakeStep:
    fn: Any
    fallback: Any
    args: tuple[int, ...]
    out: int
    frees: tuple[int, ...]


class _Value:
    """An object a weak reference can watch."""


def test_a_value_is_released_after_its_last_use() -> None:
    seen: dict[str, Any] = {}

    def make(_: Any) -> _Value:
        v = _Value()
        seen["first"] = weakref.ref(v)
        return v

    def consume(v: _Value) -> _Value:
        return _Value()

    def check(v: _Value) -> bool:
        return seen["first"]() is None  # slot 1 was freed after `consume`, its last reader

    steps = [_FakeStep(make, make, (0,), 1, ()), _FakeStep(consume, consume, (1,), 2, (1,)),
             _FakeStep(check, check, (2,), 3, (2,))]
    run = straight.straight_line(steps, [3])
    assert run is not None
    values: list[Any] = [None, None, None, None]
    run(values)
    assert values[3] is True


def test_a_declining_fast_form_falls_back_to_the_generic_kernel() -> None:
    steps = [_FakeStep(lambda a: NotImplemented, lambda a: a + 1, (0,), 1, ())]
    run = straight.straight_line(steps, [1])
    assert run is not None
    values: list[Any] = [41, None]
    run(values)
    assert values[1] == 42


def test_only_integers_and_the_step_callables_enter_the_function() -> None:
    # the source is made of slot and step numbers: the names a compiled function refers to are its own
    steps = [_FakeStep(abs, abs, (0,), 1, ()), _FakeStep(str, repr, (1,), 2, (1,))]
    run = straight.straight_line(steps, [2])
    assert run is not None
    names = set(run.__code__.co_names) | set(run.__code__.co_varnames)
    assert names <= {"f0", "f1", "g1", "v0", "v1", "v2", "i", "values", "err", "Exception", "StepFailed",
                     "NotImplemented"}


def test_a_long_program_keeps_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(straight, "MAX_STEPS", 2)
    program, _ = _program([("EXP", [0]), ("NEGATE", [1]), ("ABS", [2])], 1)
    x = np.linspace(-1, 1, 5, dtype=F32)
    (got,) = program([x])
    assert program._straight is None
    np.testing.assert_allclose(got, OPS["ABS"](OPS["NEGATE"](OPS["EXP"](x))), rtol=1e-6)


def test_inf_and_nan_results_are_the_operators_without_warnings() -> None:
    # a program runs its forms inside np.errstate(all="ignore"): RSQRT(0), RSQRT(-1), NaN compared, a float32
    # sum that overflows give inf / NaN / False as the generic kernels do, and no RuntimeWarning
    import warnings

    b = Builder()
    x, y = b.input(), b.input()
    b.output(b.emit("RSQRT", [x], {}))
    b.output(b.emit("GREATER", [x, y], {}))
    b.output(b.emit("REDUCE_SUM", [y], {"axis": 1}))
    program = b.finish()
    xs = np.array([[0.0, -1.0, np.nan, 4.0]], F32)
    ys = np.array([[1.0, np.nan, 0.0, 3e38]], F32)
    ys[0, 1] = 3e38
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = program([xs, ys])
    expected = [OPS["RSQRT"](xs), OPS["GREATER"](xs, ys), OPS["REDUCE_SUM"](ys, axis=1)]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    assert np.isinf(got[0][0, 0]) and np.isnan(got[0][0, 1]) and np.isinf(got[2][0, 0])
