"""TOSA programs (skriptnd.tosa.program.build) and their fast fp32 forms (skriptnd.tosa.program.fast).

A program must compute what its operators compute one by one with the generic kernels
(skriptnd.tosa.ops.OPS, themselves checked against the TOSA reference model): the simplifications
(constant folding, transpose sinking, fused clamps) and the fast float32 forms may only change
the rounding of accumulations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.execute import Executor
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program import fast as fast_forms
from skriptnd.tosa.program.build import BOUNDARY, Builder, Op
from skriptnd.tosa.program.fast import Clamp, specialise

ROOT = Path(__file__).resolve().parents[1]
F32 = np.float32


def _naive(ops: list[tuple[str, list[str], dict[str, Any], str]], env: dict[str, np.ndarray]) -> dict[str, Any]:
    """Run TOSA operators one by one with the generic kernels: the independent expectation."""
    env = dict(env)
    for name, inputs, attrs, out in ops:
        args = [env[i] for i in inputs]
        env[out] = OPS[name](args, **attrs) if name == "CONCAT" else OPS[name](*args, **attrs)
    return env


def _build(ops: list[tuple[str, list[str], dict[str, Any], str]], inputs: dict[str, np.ndarray],
           constants: dict[str, np.ndarray], outputs: list[str]) -> Any:
    b = Builder()
    names = {k: b.input() for k in inputs} | {k: b.constant(v) for k, v in constants.items()}
    for name, ins, attrs, out in ops:
        names[out] = b.emit(name, [names[i] for i in ins], dict(attrs))
    for o in outputs:
        b.output(names[o])
    return b.finish()


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(F32)


NCHW_TO_NHWC, NHWC_TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def _extent(out: int, kernel: int, stride: int, dilation: int, pads: int) -> int:
    """An input extent for which TOSA's exact-division check holds with ``out`` outputs."""
    while (out - 1) * stride + (kernel - 1) * dilation + 1 - pads < 1:
        out += 1
    return (out - 1) * stride + (kernel - 1) * dilation + 1 - pads


def test_transposes_between_convolutions_cancel_and_filters_fold() -> None:
    rng = np.random.default_rng(1)
    x = _rand(rng, 1, 3, 9, 9)
    w1, w2 = _rand(rng, 4, 3, 3, 3), _rand(rng, 5, 4, 3, 3)  # OIHW, as nn.conv stores them
    b1, b2 = _rand(rng, 4), _rand(rng, 5)
    conv = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    ops = [
        ("TRANSPOSE", ["x"], {"perms": NCHW_TO_NHWC}, "xh"),
        ("TRANSPOSE", ["w1"], {"perms": [0, 2, 3, 1]}, "w1h"),
        ("CONV2D", ["xh", "w1h", "b1"], conv, "y1h"),
        ("TRANSPOSE", ["y1h"], {"perms": NHWC_TO_NCHW}, "y1"),
        ("CLAMP", ["y1"], {"min_val": 0.0, "max_val": float("inf")}, "r1"),
        ("TRANSPOSE", ["r1"], {"perms": NCHW_TO_NHWC}, "r1h"),
        ("TRANSPOSE", ["w2"], {"perms": [0, 2, 3, 1]}, "w2h"),
        ("CONV2D", ["r1h", "w2h", "b2"], conv, "y2h"),
        ("TRANSPOSE", ["y2h"], {"perms": NHWC_TO_NCHW}, "y2"),
        ("ADD", ["y2", "bias4d"], {}, "z"),
    ]
    consts = {"w1": w1, "w2": w2, "b1": b1, "b2": b2, "bias4d": _rand(rng, 1, 5, 1, 1)}
    program = _build(ops, {"x": x}, consts, ["z"])
    names = [o.name for o in program.ops]
    # one transpose in (NCHW -> NHWC), one out; the filters were transposed at build time
    assert names == ["TRANSPOSE", "CONV2D", "CLAMP", "CONV2D", "ADD", "TRANSPOSE"], str(program)
    assert all(o.inputs[0] not in program.constants for o in program.ops if o.name == "TRANSPOSE")
    (z,) = program([x])
    expected = _naive(ops, {"x": x, **consts})["z"]
    np.testing.assert_allclose(z, expected, rtol=1e-5, atol=1e-5)


def test_reductions_and_concat_follow_a_sunk_transpose() -> None:
    rng = np.random.default_rng(2)
    x, y = _rand(rng, 2, 3, 4, 5), _rand(rng, 2, 3, 4, 5)
    ops = [
        ("TRANSPOSE", ["x"], {"perms": [0, 2, 3, 1]}, "xt"),
        ("TRANSPOSE", ["y"], {"perms": [0, 2, 3, 1]}, "yt"),
        ("SUB", ["xt", "yt"], {}, "d"),
        ("REDUCE_MAX", ["d"], {"axis": 3}, "m"),
        ("CONCAT", ["xt", "d"], {"axis": 1}, "c"),
        ("EXP", ["c"], {}, "e"),
        ("REDUCE_SUM", ["e"], {"axis": 1}, "s"),
    ]
    program = _build(ops, {"x": x, "y": y}, {}, ["m", "s"])
    assert [o.name for o in program.ops].count("TRANSPOSE") == 2  # only the two outputs materialize
    m, s = program([x, y])
    env = _naive(ops, {"x": x, "y": y})
    np.testing.assert_array_equal(m, env["m"])
    np.testing.assert_allclose(s, env["s"], rtol=1e-6)


def test_constant_subgraphs_fold_and_dead_operators_go() -> None:
    rng = np.random.default_rng(3)
    x, c = _rand(rng, 2, 3), _rand(rng, 3, 2)
    ops = [
        ("TRANSPOSE", ["c"], {"perms": [1, 0]}, "ct"),
        ("EXP", ["ct"], {}, "ce"),
        ("ADD", ["x", "ce"], {}, "z"),
        ("LOG", ["x"], {}, "unused"),
        ("TRANSPOSE", ["z"], {"perms": [1, 0]}, "zt"),
        ("TRANSPOSE", ["zt"], {"perms": [1, 0]}, "back"),
    ]
    program = _build(ops, {"x": x}, {"c": c}, ["back"])
    assert [o.name for o in program.ops] == ["ADD"]
    np.testing.assert_array_equal(program([x])[0], _naive(ops, {"x": x, "c": c})["back"])


def test_a_clamp_after_a_convolution_is_fused_in_place() -> None:
    rng = np.random.default_rng(4)
    x, w, b = _rand(rng, 1, 6, 6, 3), _rand(rng, 4, 3, 3, 3), _rand(rng, 4)
    conv = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1]}
    ops = [("CONV2D", ["x", "w", "b"], conv, "y"), ("CLAMP", ["y"], {"min_val": 0.0, "max_val": 0.5}, "r")]
    program = _build(ops, {"x": x}, {"w": w, "b": b}, ["r"])
    (r,) = program([x])
    assert len(program._steps) == 1  # the CLAMP runs inside the convolution's step
    np.testing.assert_allclose(r, _naive(ops, {"x": x, "w": w, "b": b})["r"], rtol=1e-5, atol=1e-6)
    assert r.min() >= 0 and r.max() <= 0.5


def test_a_fused_clamp_holds_when_the_fast_form_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fast form returns NotImplemented for operand types it does not handle: the generic kernel
    # then runs, and the CLAMP fused into the convolution must still be applied
    monkeypatch.setattr("skriptnd.tosa.program.build.specialise", lambda *a, **k: lambda *args: NotImplemented)
    rng = np.random.default_rng(7)
    x, w, b = _rand(rng, 1, 5, 5, 2), _rand(rng, 3, 3, 3, 2), _rand(rng, 3)
    conv = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    ops = [("CONV2D", ["x", "w", "b"], conv, "y"), ("CLAMP", ["y"], {"min_val": 0.0, "max_val": 0.5}, "r")]
    program = _build(ops, {"x": x}, {"w": w, "b": b}, ["r"])
    (r,) = program([x])
    assert len(program._steps) == 1
    np.testing.assert_array_equal(r, _naive(ops, {"x": x, "w": w, "b": b})["r"])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_a_clamp_after_an_add_is_fused_with_the_same_bits(shape: list[int], broadcast: bool, ignore_nan: bool,
                                                           seed: int) -> None:
    """ADD then CLAMP (a residual addition and its relu) runs as one step; ADD and CLAMP are exact, so the
    result is the generic kernels' bit for bit, NaN, signed zeros and broadcasting included."""
    rng = np.random.default_rng(seed)
    a = _rand(rng, *shape)
    b = _rand(rng, *[1 if broadcast and rng.random() < 0.5 else d for d in shape])
    a.flat[0], b.flat[-1] = np.nan, -0.0
    attrs = {"min_val": 0.0, "max_val": 6.0, "nan_mode": "IGNORE" if ignore_nan else "PROPAGATE"}
    ops = [("ADD", ["a", "b"], {}, "s"), ("CLAMP", ["s"], attrs, "r")]
    program = _build(ops, {"a": a, "b": b}, {}, ["r"])
    (r,) = program([a, b])
    assert len(program._steps) == 1
    expected = _naive(ops, {"a": a, "b": b})["r"]
    assert r.dtype == expected.dtype and r.shape == expected.shape
    np.testing.assert_array_equal(r.view(np.int32), expected.view(np.int32))


def _silu_ops(kind: str, swap: bool, extra_use: bool) -> list[tuple[str, list[str], dict[str, Any], str]]:
    conv = {"pad": [1, 0, 2, 1], "stride": [1, 2], "dilation": [1, 1]}
    ops = [(kind, ["x", "w", "b"], conv, "y"), ("SIGMOID", ["y"], {}, "s"),
           ("MUL", ["s", "y", "shift"] if swap else ["y", "s", "shift"], {}, "r")]
    if extra_use:  # y is needed after the SiLU too: nothing may run in place
        ops.append(("ADD", ["r", "y"], {}, "r2"))
    return ops


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["CONV2D", "DEPTHWISE_CONV2D"]), st.booleans(), st.booleans(), st.integers(1, 80),
       st.integers(2, 12), st.integers(0, 2**31))
def test_a_silu_after_a_convolution_is_fused_in_place(kind: str, swap: bool, extra_use: bool, c: int, h: int,
                                                      seed: int) -> None:
    """MUL(y, SIGMOID(y)) (either operand order) after a convolution runs inside its step, with the bits of
    the unfused fast forms (the same float32 operations) and within accumulation rounding of the generic
    kernels; not fused when y has another user."""
    rng = np.random.default_rng(seed)
    x = _rand(rng, 1, h, 6, c) * 3
    w = _rand(rng, 5, 3, 3, c) if kind == "CONV2D" else _rand(rng, 3, 3, c, 1)
    b = _rand(rng, 5 if kind == "CONV2D" else c)
    ops = _silu_ops(kind, swap, extra_use)
    consts = {"w": w, "b": b, "shift": np.zeros(1, np.int8)}
    out = "r2" if extra_use else "r"
    program = _build(ops, {"x": x}, consts, [out])
    (r,) = program([x])
    assert len(program._steps) == (4 if extra_use else 1)
    expected = _naive(ops, {"x": x, **consts})[out]
    # float32 accumulation against the generic float64 sums: within a few eps of |x| conv |w| + |b|
    # (SiLU's slope is below 1.1); the generic CONV2D wants OHWI, DEPTHWISE [KH, KW, C, M]
    bound = OPS[kind](np.abs(x), np.abs(w), np.abs(b), **ops[0][2]).astype(np.float64)
    if extra_use:
        bound *= 2
    assert np.all(np.abs(r - expected) <= 1e-6 * (1 + bound) * w.shape[1] * w.shape[2] * 4)
    # the unfused fast forms, step by step: the same bits
    y = specialise(kind, [None, w, b], ops[0][2])(x, w, b)  # type: ignore[misc]
    sig = specialise("SIGMOID", [None], {})(y)  # type: ignore[misc]
    unfused = specialise("MUL", [None, None, consts["shift"]], {})(sig, y, consts["shift"])  # type: ignore[misc]
    if extra_use:
        unfused = unfused + y
    np.testing.assert_array_equal(r, unfused)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["CONV2D", "DEPTHWISE_CONV2D"]), st.booleans(), st.booleans(), st.booleans(),
       st.integers(1, 80), st.integers(2, 12), st.integers(0, 2**31))
def test_a_hardswish_after_a_convolution_is_fused_in_place(kind: str, swap: bool, extra_use: bool,
                                                           ignore_nan: bool, c: int, h: int, seed: int) -> None:
    """y * CLAMP(y * 1/6 + 0.5, 0, 1) (ONNX HardSwish as imported), operands in either order, runs inside
    the convolution's step with the bits of the four unfused fast forms; not fused when a step's output
    has another user."""
    rng = np.random.default_rng(seed)
    x = _rand(rng, 1, h, 6, c) * 3
    w = _rand(rng, 5, 3, 3, c) if kind == "CONV2D" else _rand(rng, 3, 3, c, 1)
    b = _rand(rng, 5 if kind == "CONV2D" else c)
    conv = {"pad": [1, 0, 2, 1], "stride": [1, 2], "dilation": [1, 1]}
    nan_mode = "IGNORE" if ignore_nan else "PROPAGATE"
    ops = [(kind, ["x", "w", "b"], conv, "y"),
           ("MUL", ["k", "y", "shift"] if swap else ["y", "k", "shift"], {}, "m"),
           ("ADD", ["half", "m"] if swap else ["m", "half"], {}, "a"),
           ("CLAMP", ["a"], {"min_val": 0.0, "max_val": 1.0, "nan_mode": nan_mode}, "c"),
           ("MUL", ["c", "y", "shift"] if swap else ["y", "c", "shift"], {}, "r")]
    if extra_use:
        ops.append(("ADD", ["r", "a"], {}, "r2"))
    consts = {"w": w, "b": b, "shift": np.zeros(1, np.int8), "k": np.full((1, 1, 1, 1), 1 / 6, F32),
              "half": np.full((1, 1, 1, 1), 0.5, F32)}
    out = "r2" if extra_use else "r"
    program = _build(ops, {"x": x}, consts, [out])
    (r,) = program([x])
    assert len(program._steps) == (6 if extra_use else 1)
    env: dict[str, Any] = {"x": x, **consts}  # the unfused fast forms, step by step: the same bits
    for name, ins, attrs, o in ops:
        fn = specialise(name, [None if i in ("x", "y", "m", "a", "c", "r") else consts[i] for i in ins], attrs)
        assert fn is not None
        env[o] = fn(*[env[i] for i in ins])
    np.testing.assert_array_equal(r, env[out])
    expected = _naive(ops, {"x": x, **consts})[out]
    bound = OPS[kind](np.abs(x), np.abs(w), np.abs(b), **conv).astype(np.float64) * (3 if extra_use else 2)
    assert np.all(np.abs(r - expected) <= 1e-6 * (1 + bound) * 9 * c * 4)


def test_a_fused_silu_holds_when_the_fast_form_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("skriptnd.tosa.program.build.specialise", lambda *a, **k: lambda *args: NotImplemented)
    rng = np.random.default_rng(8)
    x, w, b = _rand(rng, 1, 5, 6, 2), _rand(rng, 3, 3, 3, 2), _rand(rng, 3)
    ops = _silu_ops("CONV2D", False, False)
    consts = {"w": w, "b": b, "shift": np.zeros(1, np.int8)}
    program = _build(ops, {"x": x}, consts, ["r"])
    (r,) = program([x])
    assert len(program._steps) == 1
    np.testing.assert_array_equal(r, _naive(ops, {"x": x, **consts})["r"])


# -- fast forms against the generic kernels --------------------------------------------------------

geometry = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2),
                     st.integers(1, 2), st.integers(0, 2), st.integers(0, 2))


@settings(max_examples=40, deadline=None)
@given(geometry, st.integers(1, 2), st.integers(1, 4), st.integers(1, 5), st.booleans(), st.integers(0, 2**31))
def test_fast_conv2d_matches_the_generic_kernel(geo: tuple[int, ...], n: int, ic: int, oc: int, clamp: bool,
                                                seed: int) -> None:
    kh, kw, sy, sx, d, pt, pl = geo
    rng = np.random.default_rng(seed)
    pads = [pt, pt + 1 if pt else 0, pl, pl]
    ih, iw = (_extent(int(rng.integers(1, 5)), k, s, d, p) for k, s, p in ((kh, sy, sum(pads[:2])),
                                                                          (kw, sx, sum(pads[2:]))))
    x = _rand(rng, n, ih, iw, ic)
    w, b = _rand(rng, oc, kh, kw, ic), _rand(rng, oc)
    attrs = {"pad": pads, "stride": [sy, sx], "dilation": [d, d]}
    bounds = Clamp(0.0, 1.0) if clamp else None
    fast = specialise("CONV2D", [None, w, b], attrs, bounds)
    assert fast is not None
    expected = OPS["CONV2D"](x, w, b, **attrs)
    if clamp:
        expected = np.clip(expected, 0, 1)
    for _ in range(2):  # the second call reuses the buffers
        np.testing.assert_allclose(fast(x, w, b), expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(geometry, st.integers(1, 4), st.integers(1, 2), st.integers(0, 2**31))
def test_fast_depthwise_matches_the_generic_kernel(geo: tuple[int, ...], c: int, m: int, seed: int) -> None:
    kh, kw, sy, sx, d, pt, pl = geo
    rng = np.random.default_rng(seed)
    ih, iw = _extent(int(rng.integers(1, 5)), kh, sy, d, 2 * pt), _extent(int(rng.integers(1, 5)), kw, sx, 1, pl)
    x, w, b = _rand(rng, 1, ih, iw, c), _rand(rng, kh, kw, c, m), _rand(rng, c * m)
    attrs = {"pad": [pt, pt, pl, 0], "stride": [sy, sx], "dilation": [d, 1]}
    expected = OPS["DEPTHWISE_CONV2D"](x, w, b, **attrs)
    saved = fast_forms._DEPTHWISE_WIDE, fast_forms._DEPTHWISE_TILED_BYTES
    try:
        # rows of ow * c (taps gathered when strided), per-channel windows, and weights too large to tile
        for wide, tiled in (saved, (1, saved[1]), (saved[0], 0)):
            fast_forms._DEPTHWISE_WIDE, fast_forms._DEPTHWISE_TILED_BYTES = wide, tiled
            fast = specialise("DEPTHWISE_CONV2D", [None, w, b], attrs)
            assert fast is not None
            for _ in range(2):  # the second call reuses the buffers
                np.testing.assert_allclose(fast(x, w, b), expected, rtol=1e-5, atol=1e-5)
    finally:
        fast_forms._DEPTHWISE_WIDE, fast_forms._DEPTHWISE_TILED_BYTES = saved


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2),
       st.integers(0, 2), st.sampled_from(["MAX_POOL2D", "AVG_POOL2D"]), st.integers(0, 2**31))
def test_fast_pools_match_the_generic_kernels(kh: int, kw: int, sy: int, sx: int, pt: int, pl: int, name: str,
                                              seed: int) -> None:
    pt, pl = min(pt, kh - 1), min(pl, kw - 1)  # TOSA: pad < kernel
    rng = np.random.default_rng(seed)
    ih, iw = _extent(int(rng.integers(1, 5)), kh, sy, 1, 2 * pt), _extent(int(rng.integers(1, 5)), kw, sx, 1, pl)
    x = _rand(rng, 2, ih, iw, 3)
    attrs = {"kernel": [kh, kw], "stride": [sy, sx], "pad": [pt, pt, pl, 0]}
    operands: list[Any] = [None] if name == "MAX_POOL2D" else [None, np.zeros(1, F32), np.zeros(1, F32)]
    fast = specialise(name, operands, attrs)
    assert fast is not None
    args = [x] + operands[1:]
    expected = OPS[name](*args, **attrs)
    if name == "MAX_POOL2D":
        np.testing.assert_array_equal(fast(*args), expected)
    else:
        np.testing.assert_allclose(fast(*args), expected, rtol=1e-6, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "EXP", "ABS", "NEGATE", "RECIPROCAL",
                        "SIGMOID", "TANH", "FLOOR", "CEIL", "CLAMP", "RSQRT", "REDUCE_SUM", "REDUCE_MAX",
                        "REDUCE_MIN"]), st.integers(0, 2**31))
def test_fast_elementwise_forms_give_the_generic_bits(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = _rand(rng, 3, 4) * 4, _rand(rng, 1, 4) * 4
    attrs: dict[str, Any] = {}
    if name in ("ADD", "SUB", "MAXIMUM", "MINIMUM"):
        args = [a, b]
    elif name == "MUL":
        args = [a, b, np.zeros(1, np.int8)]
    elif name == "NEGATE":
        args = [a, np.zeros(1, F32), np.zeros(1, F32)]
    elif name == "CLAMP":
        args, attrs = [a], {"min_val": -1.0, "max_val": 2.0}
    elif name.startswith("REDUCE"):
        args, attrs = [a], {"axis": int(rng.integers(0, 2))}
    elif name == "RSQRT":
        args = [np.concatenate([np.abs(a), a, np.array([[0.0, -0.0, np.inf, np.nan]], F32)])]
    else:
        args = [a]
    fast = specialise(name, [None] + args[1:], attrs)
    assert fast is not None
    expected = OPS[name](*args, **attrs)
    with np.errstate(all="ignore"):  # as a program runs its forms (fast.py's docstring)
        got = fast(*args)
    if name in ("SIGMOID", "TANH", "EXP", "RECIPROCAL", "RSQRT", "REDUCE_SUM"):  # TOSA allows a few ulp
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, expected)


def test_fast_slice_is_a_view_with_the_generic_values() -> None:
    x = np.arange(2 * 5 * 4, dtype=F32).reshape(2, 5, 4)
    start, size = np.array([1, 1, 0]), np.array([1, 3, 4])
    fast = specialise("SLICE", [None, start, size], {})
    assert fast is not None
    np.testing.assert_array_equal(fast(x, start, size), OPS["SLICE"](x, start, size))
    assert np.shares_memory(fast(x, start, size), x)


def test_fast_forms_decline_other_types() -> None:
    fast = specialise("ADD", [None, None], {})
    assert fast is not None
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert fast(ints, ints) is NotImplemented
    program = _build([("ADD", ["a", "b"], {}, "c")], {"a": ints, "b": ints}, {}, ["c"])
    np.testing.assert_array_equal(program([ints, ints])[0], 2 * ints)  # the generic kernel ran


# -- the executor's TOSA backend -------------------------------------------------------------------


def _executors(graph: Any, variables: dict[str, np.ndarray] | None = None) -> dict[str, Executor]:
    if variables is None:  # random weights are drawn anew on every call: read them once
        variables = {t.name: graph.variable_source(t) for t in graph.variables}
    return {via: Executor(graph, dict(variables), kernels=k, optimize=opt)
            for via in ("tosa", "lower") for k, opt in [kernels_for(via)]}


def test_the_default_backend_compiles_alexnet_into_one_program() -> None:
    graph = skriptnd.load(ROOT / "models" / "alexnet").compose(random_weights=True)
    x = np.random.default_rng(5).standard_normal((1, 3, 224, 224)).astype(F32)
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    executor = Executor(graph, variables, kernels=kernels_for("numpy")[0])
    out = executor.run({graph.inputs[0].name: x})
    steps = executor._program or []
    assert [s[1].op for s in steps] == ["tosa.program"]
    program = steps[0][1].attribs["program"]
    assert [o.name for o in program.ops].count("TRANSPOSE") == 2, str(program)
    assert not executor.variables  # every weight became a (re-laid-out) program constant
    reference = _executors(graph, variables)["lower"].run({graph.inputs[0].name: x})
    for k in out:
        np.testing.assert_allclose(out[k], reference[k], rtol=1e-4, atol=1e-6)


def test_operations_without_a_mapping_split_programs(tmp_path: Path) -> None:
    # a user operator has no TOSA mapping: it runs its @lower between two programs
    (tmp_path / "main.sknd").write_text("""import math;
operator twice {
    @input { x: real[s..]; }
    @output { y: real[s..]; }
    @lower { y[i..] = 2.0 * x[i..], i < s; }
}
graph G {
    @input { x: real[2, 3]; }
    @output { z: real[2, 3]; }
    @compose {
        a = math.exp(x);
        b = twice(a);
        z = math.add(b, x);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    x = np.random.default_rng(6).standard_normal((2, 3)).astype(F32)
    executor = Executor(graph, kernels=kernels_for("numpy")[0])
    out = executor.run({"x": x})["z"]
    assert [s[1].op for s in executor._program or []] == ["tosa.program", "main.twice", "tosa.program"]
    np.testing.assert_allclose(out, 2 * np.exp(x) + x, rtol=1e-6)


def test_a_pack_output_joins_the_program(tmp_path: Path) -> None:
    """layout.split's pack of outputs (GPT-2's QKV split) is spliced in line: one program, not three."""
    (tmp_path / "main.sknd").write_text("""import math;
import layout;
graph G {
    @input { x: real[2, 6]; }
    @output { z: real[2, 2]; }
    @compose {
        a = math.exp(x);
        [p, q, r] = layout.split{axis=1, sizes=[2, 1, 3]}(a);
        s = layout.slice{axes=[1], begin=[0], end=[2]}(r);
        z = math.sub(p, s);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    x = np.random.default_rng(7).standard_normal((2, 6)).astype(F32)
    executor = Executor(graph, kernels=kernels_for("numpy")[0])
    out = executor.run({"x": x})["z"]
    assert [s[1].op for s in executor._program or []] == ["tosa.program"]
    np.testing.assert_allclose(out, np.exp(x[:, :2]) - np.exp(x[:, 3:5]), rtol=1e-6)


def test_program_ops_are_plain_tosa() -> None:
    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    executor = Executor(graph, {t.name: graph.variable_source(t) for t in graph.variables}, kernels=kernels_for("numpy")[0])
    executor.prepare()
    program = (executor._program or [])[0][1].attribs["program"]
    assert all(isinstance(o, Op) and (o.name in OPS or o.name in BOUNDARY) for o in program.ops)
    assert "CONV2D" in str(program) and "const[" in str(program)


@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
def test_clamps_keep_their_nan_mode_fused_or_not(nan_mode: str) -> None:
    # relu legalizes to CLAMP nan_mode=IGNORE (x >? 0 gives 0 for NaN); PROPAGATE keeps the NaN
    x = np.full((1, 3, 3, 1), np.nan, F32)
    x[0, 0, 0, 0] = 2.0
    w, b = np.ones((1, 1, 1, 1), F32), np.zeros(1, F32)
    conv = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1]}
    clamp = {"min_val": 0.0, "max_val": 1.0, "nan_mode": nan_mode}
    fused = _build([("CONV2D", ["x", "w", "b"], conv, "y"), ("CLAMP", ["y"], clamp, "r")],
                   {"x": x}, {"w": w, "b": b}, ["r"])
    alone = _build([("CLAMP", ["x"], clamp, "r")], {"x": x}, {}, ["r"])
    expected = OPS["CLAMP"](x, **clamp)
    for program in (fused, alone):
        np.testing.assert_array_equal(program([x])[0], expected)
    assert np.isnan(expected).any() == (nan_mode == "PROPAGATE")


def test_a_failing_tosa_operator_is_a_diagnostic_at_its_operation(tmp_path: Path) -> None:
    # a run-time index out of range: TOSA GATHER's REQUIRE fails inside the program
    from skriptnd.diagnostics import DiagnosticError

    (tmp_path / "main.sknd").write_text("""import layout;
graph G {
    @input { x: real[4]; i: int[2]; }
    @output { y: real[2]; }
    @compose {
        y = layout.gather{axis=0}(x, i);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    x = np.arange(4, dtype=F32)
    np.testing.assert_array_equal(skriptnd.run(graph, {"x": x, "i": np.array([3, 1])})["y"], [3.0, 1.0])
    with pytest.raises(DiagnosticError) as info:
        skriptnd.run(graph, {"x": x, "i": np.array([0, 7])})
    (diag,) = info.value.diagnostics
    assert diag.code == "E0713" and diag.span.line == 6 and "layout.gather" in diag.message
    assert "GATHER" in diag.notes[0].message
