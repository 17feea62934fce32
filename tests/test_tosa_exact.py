"""The exact fast integer forms (skriptnd.tosa.program.exact) give the generic kernels' integers bit for bit,
and hand back to the generic kernel (which raises the TOSA error) where they must."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.profiling import Profile, by_tosa, profiling
from skriptnd.tosa.integer.lower import lower_quantized
from skriptnd.tosa.legalize.core import run_subgraph
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.ops.errors import TosaUnpredictable
from skriptnd.tosa.program.exact import Runner, exact_form

I8 = (-128, 127)


def _ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: type, extreme: bool) -> np.ndarray:
    """Random integers of ``dtype``; ``extreme``: only the type's minimum and maximum (saturation, the bound)."""
    info = np.iinfo(dtype)
    if extreme:
        return rng.choice(np.array([info.min, info.max], dtype), size=shape)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=dtype)


def _zp(v: int, dtype: type = np.int8) -> np.ndarray:
    return np.array([v], dtype)


def _both(name: str, operands: list[np.ndarray], attrs: dict, known: tuple[int, ...]) -> tuple[object, object]:
    """(the fast form's result, the generic kernel's), the operands at ``known`` given when the form is made."""
    form = exact_form(name, [a if i in known else None for i, a in enumerate(operands)], attrs)
    assert form is not None, (name, attrs)
    return form(*operands), OPS[name](*operands, **attrs)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9),
       ic=st.integers(1, 6), oc=st.integers(1, 5), kh=st.integers(1, 3), kw=st.integers(1, 3),
       sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 2),
       pad=st.lists(st.integers(0, 2), min_size=4, max_size=4), izp=st.integers(*I8), wzp=st.integers(*I8),
       extreme=st.booleans(), per_tensor_bias=st.booleans(), depthwise=st.booleans())
def test_int8_convolutions_equal_the_generic_kernel(seed, n, h, w, ic, oc, kh, kw, sh, sw, dh, dw, pad, izp, wzp,
                                                     extreme, per_tensor_bias, depthwise) -> None:
    rng = np.random.default_rng(seed)
    # the output size must divide exactly (the generic kernel's ERROR_IF): grow the input until it does
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    h, w = max(h, eh), max(w, ew)
    h += (-(h + pad[0] + pad[1] - eh)) % sh
    w += (-(w + pad[2] + pad[3] - ew)) % sw
    x = _ints(rng, (n, h, w, ic), np.int8, extreme)
    if depthwise:
        weight, name, oc = _ints(rng, (kh, kw, ic, oc), np.int8, extreme), "DEPTHWISE_CONV2D", ic * oc
    else:
        weight, name = _ints(rng, (oc, kh, kw, ic), np.int8, extreme), "CONV2D"
    bias = rng.integers(-(1 << 20), 1 << 20, size=1 if per_tensor_bias else oc, dtype=np.int32)
    attrs = {"pad": pad, "stride": [sh, sw], "dilation": [dh, dw], "acc_type": "int32"}
    fast, generic = _both(name, [x, weight, bias, _zp(izp), _zp(wzp)], attrs, (1, 2, 3, 4))
    assert fast.dtype == generic.dtype == np.int32
    np.testing.assert_array_equal(fast, generic)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ic=st.integers(100, 700), izp=st.sampled_from([-128, 0, 127]),
       wzp=st.sampled_from([-128, 0, 127]), extreme=st.booleans())
def test_long_reductions_split_into_exact_float32_pieces_equal_the_generic_kernel(seed, ic, izp, wzp,
                                                                                   extreme) -> None:
    """3x3 over hundreds of channels: float32 sums only up to 2^24, so the GEMM is split along the
    reduction (several pieces; with extreme values and zero points, a single float32 GEMM would round)."""
    rng = np.random.default_rng(seed)
    x = _ints(rng, (1, 4, 4, ic), np.int8, extreme)
    weight = _ints(rng, (3, 3, 3, ic), np.int8, extreme)
    args = [x, weight, rng.integers(-1000, 1000, size=3, dtype=np.int32), _zp(izp), _zp(wzp)]
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}
    form = exact_form("CONV2D", [None, *args[1:]], attrs)
    assert form is not None and len(form.pieces) > 1
    np.testing.assert_array_equal(form(*args), OPS["CONV2D"](*args, **attrs))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), h=st.integers(1, 6), w=st.integers(1, 6), ic=st.integers(1, 4),
       oc=st.integers(1, 4), k=st.integers(1, 3), extreme=st.booleans())
def test_int16_convolution_to_int48_equals_the_generic_kernel(seed, h, w, ic, oc, k, extreme) -> None:
    rng = np.random.default_rng(seed)
    h, w = max(h, k), max(w, k)
    x = _ints(rng, (1, h, w, ic), np.int16, extreme)
    weight = _ints(rng, (oc, k, k, ic), np.int8, extreme)
    bias = rng.integers(-(1 << 40), 1 << 40, size=oc, dtype=np.int64)
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int48"}
    fast, generic = _both("CONV2D", [x, weight, bias, _zp(0, np.int16), _zp(0)], attrs, (1, 2, 3, 4))
    assert fast.dtype == generic.dtype == np.int64
    np.testing.assert_array_equal(fast, generic)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), b=st.integers(1, 3), h=st.integers(1, 6), c=st.integers(1, 40),
       wd=st.integers(1, 6), azp=st.integers(*I8), bzp=st.integers(*I8), extreme=st.booleans())
def test_int8_matmul_equals_the_generic_kernel(seed, b, h, c, wd, azp, bzp, extreme) -> None:
    rng = np.random.default_rng(seed)
    a, bm = _ints(rng, (b, h, c), np.int8, extreme), _ints(rng, (b, c, wd), np.int8, extreme)
    fast, generic = _both("MATMUL", [a, bm, _zp(azp), _zp(bzp)], {}, ())
    assert fast.dtype == generic.dtype == np.int32
    np.testing.assert_array_equal(fast, generic)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       in_t=st.sampled_from(["int8", "int16", "int32"]), out_t=st.sampled_from(["int8", "int16", "int32"]),
       per_channel=st.booleans(), izp=st.integers(*I8), ozp=st.integers(*I8), extreme=st.booleans(),
       rounding=st.sampled_from(["SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"]))
def test_rescale_equals_the_generic_kernel(seed, shape, in_t, out_t, per_channel, izp, ozp, extreme,
                                           rounding) -> None:
    rng = np.random.default_rng(seed)
    dt = {"int8": np.int8, "int16": np.int16, "int32": np.int32}
    x = _ints(rng, tuple(shape), dt[in_t], extreme)
    nc = shape[-1] if per_channel else 1
    bits = {"int8": 8, "int16": 16, "int32": 32}[in_t]
    # shifts large enough for the input range (the REQUIRE |value| < 2^(shift-1)); multipliers up to 2^31 - 1
    shift = rng.integers(bits + 2, 63, size=nc).astype(np.int8)
    mult = rng.integers(0, 1 << 31, size=nc, dtype=np.int64).astype(np.int32)
    if extreme:
        mult[:] = (1 << 31) - 1  # the largest factors: saturation at both ends
        shift[:] = bits + 2
    izp = izp if in_t == "int8" else 0
    ozp = ozp if out_t == "int8" else 0
    attrs = {"output_dtype": out_t, "scale32": True, "rounding_mode": rounding, "per_channel": per_channel,
             "input_unsigned": False, "output_unsigned": False}
    fast, generic = _both("RESCALE", [x, mult, shift, _zp(izp, dt[in_t]), _zp(ozp, dt[out_t])], attrs, (1, 2, 3, 4))
    assert fast.dtype == generic.dtype
    np.testing.assert_array_equal(fast, generic)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       dtype=st.sampled_from([np.int8, np.int16]), lo=st.integers(-200, 200), width=st.integers(0, 300))
def test_integer_clamp_equals_the_generic_kernel(seed, shape, dtype, lo, width) -> None:
    rng = np.random.default_rng(seed)
    x = _ints(rng, tuple(shape), dtype, False)
    attrs = {"min_val": lo, "max_val": lo + width}
    form = exact_form("CLAMP", [None], attrs)
    assert form is not None
    try:
        expected = OPS["CLAMP"](x, **attrs)
    except Exception:  # noqa: BLE001 - bounds outside the type: the fast form declines, the kernel raises
        assert form(x) is NotImplemented
        return
    got = form(x)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


_SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 126.5, 127.5, 128.0, -128.5, -129.0, 1e9, -1e9,
                     np.inf, -np.inf, np.nan, 3e-45, 32767.5, -32768.5], np.float32)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), to=st.sampled_from(["int8", "int16"]))
def test_casts_equal_the_generic_kernel(seed, n, to) -> None:
    """fp32 -> int8/int16 (ties to even, NaN, infinities, saturation) and back."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([_SPECIAL, (rng.standard_normal(n) * 10 ** rng.uniform(-2, 6, n)).astype(np.float32)])
    form = exact_form("CAST", [None], {"output_dtype": to})
    assert form is not None
    got, expected = form(x), OPS["CAST"](x, output_dtype=to)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    back = exact_form("CAST", [None], {"output_dtype": "fp32"})
    np.testing.assert_array_equal(back(got), OPS["CAST"](got, output_dtype="fp32"))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       name=st.sampled_from(["ADD", "SUB", "MUL", "ABS", "FLOOR", "CEIL", "GREATER_EQUAL", "SELECT"]))
def test_fp32_elementwise_forms_give_the_generic_kernels_bits(seed, shape, name) -> None:
    rng = np.random.default_rng(seed)

    def f32() -> np.ndarray:
        v = (rng.standard_normal(shape) * 10 ** rng.uniform(-40, 38, shape)).astype(np.float32)
        return np.where(rng.random(shape) < 0.2, rng.choice(_SPECIAL, shape), v).astype(np.float32)

    a, b = f32(), f32()
    operands = {"ABS": [a], "FLOOR": [a], "CEIL": [a], "MUL": [a, b, np.zeros(1, np.int8)],
                "SELECT": [a > b, a, b]}.get(name, [a, b])
    form = exact_form(name, [o if o.dtype == np.int8 else None for o in operands], {})
    assert form is not None
    with np.errstate(over="ignore", invalid="ignore"):  # as the runner calls the forms
        got, expected = form(*operands), OPS[name](*operands)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()  # the same bits: signed zeros and NaNs included


def test_a_rescale_input_beyond_the_shift_goes_to_the_generic_kernel_which_raises() -> None:
    """|value| >= 2^(shift-1) is a REQUIRE: the fast form does not compute it, the generic kernel raises."""
    x = np.array([100, -100], np.int32)
    args = [x, np.array([1 << 30], np.int32), np.array([7], np.int8), _zp(0, np.int32), _zp(0)]
    attrs = {"output_dtype": "int8", "scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False}
    form = exact_form("RESCALE", [None, *args[1:]], attrs)
    assert form is not None and form(*args) is NotImplemented
    with pytest.raises(TosaUnpredictable):
        OPS["RESCALE"](*args, **attrs)


def test_an_accumulator_beyond_int32_goes_to_the_generic_kernel_which_raises() -> None:
    """The REQUIRE that the accumulator fits int32 (a long reduction of extreme values, and a bias on top)."""
    x = np.full((1, 1, 1, 40000), -128, np.int8)
    weight = np.full((1, 1, 1, 40000), -128, np.int8)
    args = [x, weight, np.array([0], np.int32), _zp(127), _zp(127)]  # 40000 * 255 * 255 > 2^31
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}
    form = exact_form("CONV2D", [None, *args[1:]], attrs)
    assert form is not None and form(*args) is NotImplemented
    with pytest.raises(TosaUnpredictable):
        OPS["CONV2D"](*args, **attrs)


def test_no_fast_form_beyond_the_float64_bound_or_for_other_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reduction too long for exact float64 sums (taps * max|x - zp| * max|w - zp| above the bound) has no
    form, so the generic kernel runs; the bound is lowered here to make one at test size; fp32 has no form."""
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}

    def form(taps: int) -> object:
        weight = np.full((2, 1, 1, taps), -128, np.int8)  # max |w - 0| = 128
        return exact_form("CONV2D", [None, weight, np.zeros(2, np.int32), _zp(0), _zp(0)], attrs)

    monkeypatch.setattr("skriptnd.tosa.program.exact.EXACT", float(10 * 255 * 128))
    assert form(10) is not None and form(11) is None
    f32 = [None, np.ones((1, 1, 1, 1), np.float32), np.zeros(1, np.float32), _zp(0, np.float32),
           _zp(0, np.float32)]
    assert exact_form("CONV2D", f32, {**attrs, "acc_type": "fp32"}) is None


@pytest.mark.parametrize("model", ["digits_int8"])
def test_a_quantized_model_runs_bit_exactly_as_on_the_generic_kernels(model: str) -> None:
    """The whole integer graph: the runner with fast forms gives the generic kernels' outputs bit for bit,
    and does use fast forms for its convolutions, MATMUL and RESCALEs."""
    graph = skriptnd.load(f"models/{model}").compose()
    ig = lower_quantized(graph)
    rng = np.random.default_rng(1)
    inputs = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in graph.inputs}
    sg = ig.subgraph()
    runner = Runner(sg)
    used = {o.name for o, f in zip(sg.ops, runner.forms, strict=True) if f is not None}
    assert {"CONV2D", "MATMUL", "RESCALE"} <= used
    expected = run_subgraph(sg, ig.quantize_inputs(inputs))
    got = ig.run(inputs)
    for (name, _), e in zip(ig.outputs, expected, strict=True):
        assert got[name].dtype == e.dtype
        np.testing.assert_array_equal(got[name], e)


def test_a_profile_sees_the_integer_graphs_tosa_operators() -> None:
    """``sknd run --profile`` of a quantized model: each TOSA operator of the integer graph is timed, under
    one entry for the graph (before, the whole run was 'between operations')."""
    graph = skriptnd.load("models/digits_int8").compose()
    ig = lower_quantized(graph)
    inputs = {t.name: np.zeros(t.shape, np.float32) for t in graph.inputs}
    with profiling(Profile()) as prof:
        ig.run(inputs)
    (entry,) = prof.entries.values()
    assert entry.operator == "integer TOSA graph" and entry.calls == len(ig.subgraph().ops)
    assert {"CONV2D", "RESCALE", "MATMUL"} <= {k.name for k in by_tosa(prof)}
