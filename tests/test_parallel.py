"""The numpy backend on several threads (skriptnd.parallel): the pool itself, and the threaded fast
TOSA operators against their serial forms and against the generic kernels.

Threaded and serial forms compute each output element with the same float32 operations in the same
order (a thread takes whole output rows or elements; depthwise convolution is one einsum, whose activation
may split), so depthwise convolution and pooling must be bit-identical. A convolution's GEMM
is split into row blocks: OpenBLAS computes an element's dot product the same way whatever rows
surround it in practice, but that is BLAS's business, so those are compared within float32
reassociation (a few eps32 of |x| conv |w| + |b|, the scale of any summation order's error). The
split thresholds are set to 0 so that tiny shapes (chunks of one row, more threads than rows) split.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_winograd import TOLERANCE, _bound, _tile_bound

from skriptnd import parallel
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program import fast as F
from skriptnd.tosa.program import winograd as W
from skriptnd.tosa.program.fast import Clamp, specialise

EPS = float(np.finfo(np.float32).eps)


# --- the pool --------------------------------------------------------------------------------------


@given(st.integers(0, 40), st.integers(1, 9))
def test_split_covers_the_range_in_near_equal_contiguous_chunks(n: int, parts: int) -> None:
    chunks = parallel.split(n, parts)
    assert len(chunks) == min(n, parts)
    assert [i for a, b in chunks for i in range(a, b)] == list(range(n))
    sizes = [b - a for a, b in chunks]
    assert all(s >= 1 for s in sizes) and (not sizes or max(sizes) - min(sizes) <= 1)


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64])
def test_parallel_for_calls_every_index_once(threads: int, n: int) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> None:
        with lock:
            seen.append(i)

    with parallel.using(threads):
        parallel.parallel_for(n, fn)
    assert sorted(seen) == list(range(n))


def test_parallel_for_raises_a_chunks_error_and_stays_usable() -> None:
    def fn(i: int) -> None:
        if i == 3:
            raise ValueError("chunk 3")

    with parallel.using(2):
        with pytest.raises(ValueError, match="chunk 3"):
            parallel.parallel_for(6, fn)
        out = np.zeros(6)
        parallel.parallel_for(6, lambda i: out.__setitem__(i, i + 1))
    assert out.tolist() == [1, 2, 3, 4, 5, 6]


def test_nested_parallel_for_runs_inner_loops_serially() -> None:
    out = np.zeros((4, 5))
    inner_threads: list[int] = []

    def outer(i: int) -> None:
        inner_threads.append(threading.get_ident())
        parallel.parallel_for(5, lambda j: out.__setitem__((i, j), 10 * i + j))

    with parallel.using(3):
        parallel.parallel_for(4, outer)
    assert (out == 10 * np.arange(4)[:, None] + np.arange(5)).all()


def test_using_sets_the_count_for_the_block_and_restores_it() -> None:
    default = parallel.default_threads()
    assert default >= 1
    with parallel.using(3):
        assert parallel.threads() == 3
        assert parallel.worth(10, 100) == 1 and parallel.worth(100, 100) == 3 * parallel.PARTS_PER_THREAD
        with parallel.using(1):
            assert parallel.threads() == 1 and parallel.worth(10**9) == 1
        assert parallel.threads() == 3
    with parallel.using(None):
        assert parallel.threads() == default


def test_threads_in_other_threads_follow_their_own_setting() -> None:
    got: list[int] = []
    with parallel.using(4):
        t = threading.Thread(target=lambda: got.append(parallel.threads()))
        t.start()
        t.join()
    assert got == [parallel.default_threads()]


def test_blas_limit_restores_openblas_threads() -> None:
    before = parallel.blas_threads()
    with parallel.blas_single():
        assert parallel.blas_threads() == 1
    assert parallel.blas_threads() == before


# --- threaded operators ----------------------------------------------------------------------------


@pytest.fixture
def always_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "_CONV_SPLIT_POSITIONS", 0)
    monkeypatch.setattr(F, "_POOL_SPLIT_BYTES", 0)
    monkeypatch.setattr(F, "_ELEMENTWISE_SPLIT_BYTES", 0)
    monkeypatch.setattr(F, "_TRANSCENDENTAL_SPLIT_BYTES", 0)


def _run(fn: object, threads: int, *args: np.ndarray) -> np.ndarray:
    with parallel.using(threads):
        return np.array(fn(*args), copy=True)  # type: ignore[operator]


def _abs_conv_bound(x: np.ndarray, w_ohwi: np.ndarray, b: np.ndarray, attrs: dict) -> np.ndarray:
    """|x| conv |w| + |b| in float64: the scale of any summation order's rounding error."""
    return OPS["CONV2D"](np.abs(x), np.abs(w_ohwi), np.abs(b), **attrs).astype(np.float64)


windows = st.fixed_dictionaries({
    "n": st.integers(1, 3), "h": st.integers(1, 12), "w": st.integers(1, 12), "c": st.integers(1, 9),
    "kh": st.integers(1, 4), "kw": st.integers(1, 4), "sy": st.integers(1, 3), "sx": st.integers(1, 3),
    "dy": st.integers(1, 2), "dx": st.integers(1, 2), "pad": st.lists(st.integers(0, 2), min_size=4, max_size=4),
    "threads": st.integers(2, 5), "seed": st.integers(0, 2**16), "clamp": st.booleans()})


def _geometry(p: dict) -> tuple[int, int] | None:
    """The output size, after growing the bottom / right pads so that the strides divide the padded
    extents exactly (TOSA's ERROR_IF for the generic kernels); None if the window does not fit."""
    t, b, left, r = p["pad"]
    b += -(p["h"] + t + b - (p["kh"] - 1) * p["dy"] - 1) % p["sy"]
    r += -(p["w"] + left + r - (p["kw"] - 1) * p["dx"] - 1) % p["sx"]
    p["pad"] = [t, b, left, r]
    oh = (p["h"] + t + b - (p["kh"] - 1) * p["dy"] - 1) // p["sy"] + 1
    ow = (p["w"] + left + r - (p["kw"] - 1) * p["dx"] - 1) // p["sx"] + 1
    return (oh, ow) if oh >= 1 and ow >= 1 else None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(windows, st.integers(1, 3), st.booleans())
def test_threaded_depthwise_equals_serial_bit_for_bit(always_split: None, p: dict, m: int, wide: bool) -> None:
    if _geometry(p) is None:
        return
    saved = F._DEPTHWISE_WIDE
    F._DEPTHWISE_WIDE = 1 if wide else saved  # the per-channel windows instead of rows of ow * c
    try:
        _check_threaded_depthwise(p, m)
    finally:
        F._DEPTHWISE_WIDE = saved


def _check_threaded_depthwise(p: dict, m: int) -> None:
    rng = np.random.default_rng(p["seed"])
    x = rng.standard_normal((p["n"], p["h"], p["w"], p["c"])).astype(np.float32)
    w = rng.standard_normal((p["kh"], p["kw"], p["c"], m)).astype(np.float32)
    b = rng.standard_normal(p["c"] * m).astype(np.float32)
    attrs = {"pad": p["pad"], "stride": [p["sy"], p["sx"]], "dilation": [p["dy"], p["dx"]]}
    clamp = Clamp(-0.5, 1.0) if p["clamp"] else None
    fn = specialise("DEPTHWISE_CONV2D", [None, w, b], attrs, clamp)
    serial = _run(fn, 1, x)
    threaded = _run(fn, p["threads"], x)
    again = _run(fn, p["threads"], x)  # the per-band buffers are reused: same result
    np.testing.assert_array_equal(threaded, serial)
    np.testing.assert_array_equal(again, serial)
    expected = OPS["DEPTHWISE_CONV2D"](x, w, b, **attrs, acc_type="FP32")
    if clamp is not None:
        expected = np.clip(expected, -0.5, 1.0)
    # an independent check of the threaded schedule: the generic kernel (float64 sums, one rounding)
    bound = OPS["DEPTHWISE_CONV2D"](np.abs(x), np.abs(w), np.abs(b), **attrs, acc_type="FP32").astype(np.float64)
    assert np.all(np.abs(threaded - expected) <= 4 * p["kh"] * p["kw"] * EPS * bound)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(windows, st.integers(1, 7))
def test_threaded_conv2d_equals_serial(always_split: None, p: dict, oc: int) -> None:
    if _geometry(p) is None:
        return
    rng = np.random.default_rng(p["seed"])
    x = rng.standard_normal((p["n"], p["h"], p["w"], p["c"])).astype(np.float32)
    w = rng.standard_normal((oc, p["kh"], p["kw"], p["c"])).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    attrs = {"pad": p["pad"], "stride": [p["sy"], p["sx"]], "dilation": [p["dy"], p["dx"]]}
    clamp = Clamp(-0.5, 1.0) if p["clamp"] else None
    fn = specialise("CONV2D", [None, w, b], attrs, clamp, {})
    serial = _run(fn, 1, x)
    threaded = _run(fn, p["threads"], x)
    again = _run(fn, p["threads"], x)
    bound = _abs_conv_bound(x, w, b, attrs)
    k = p["kh"] * p["kw"] * p["c"]
    assert np.all(np.abs(threaded - serial) <= 2 * k * EPS * bound)
    np.testing.assert_array_equal(again, threaded)
    expected = OPS["CONV2D"](x, w, b, **attrs, acc_type="FP32")
    if clamp is not None:
        expected = np.clip(expected, -0.5, 1.0)
    assert np.all(np.abs(threaded - expected) <= 2 * k * EPS * bound)


def test_pointwise_strided_conv2d_splits_over_images_and_rows(always_split: None) -> None:
    """1x1 stride-2 convolutions (ResNet's downsamples) take the no-im2col path; batch 3 on 2 threads
    splits whole images, batch 1 on 3 threads splits rows."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 1, 1, 4)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    attrs = {"pad": [0, 0, 0, 0], "stride": [2, 2], "dilation": [1, 1]}
    for shape, threads in (((3, 9, 7, 4), 2), ((1, 9, 7, 4), 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        fn = specialise("CONV2D", [None, w, b], attrs, None, {})
        expected = OPS["CONV2D"](x, w, b, **attrs, acc_type="FP32")
        got = _run(fn, threads, x)
        bound = _abs_conv_bound(x, w, b, attrs)
        assert got.shape == expected.shape == (shape[0], 5, 4, 6)
        assert np.all(np.abs(got - expected) <= 8 * EPS * bound)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(windows)
def test_threaded_max_pool_equals_serial_and_the_generic_kernel(always_split: None, p: dict) -> None:
    p["dy"] = p["dx"] = 1
    p["pad"] = [min(v, p["kh" if i < 2 else "kw"] - 1) for i, v in enumerate(p["pad"])]  # TOSA: pad < kernel
    if _geometry(p) is None or max(p["pad"][:2]) >= p["kh"] or max(p["pad"][2:]) >= p["kw"]:
        return
    x = np.random.default_rng(p["seed"]).standard_normal((p["n"], p["h"], p["w"], p["c"])).astype(np.float32)
    attrs = {"kernel": [p["kh"], p["kw"]], "stride": [p["sy"], p["sx"]], "pad": p["pad"], "nan_mode": "PROPAGATE"}
    fn = specialise("MAX_POOL2D", [None], attrs)
    threaded = _run(fn, p["threads"], x)
    np.testing.assert_array_equal(threaded, _run(fn, 1, x))
    np.testing.assert_array_equal(threaded, OPS["MAX_POOL2D"](x, **attrs))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("name", ["ADD", "SUB", "MAXIMUM", "MINIMUM", "MUL", "CLAMP"])
def test_threaded_elementwise_equals_the_generic_kernel(always_split: None, name: str, threads: int) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 7, 5, 3)).astype(np.float32)
    b = rng.standard_normal((1, 7, 5, 3)).astype(np.float32)
    a[0, 1, 2, 0] = np.nan
    if name == "CLAMP":
        attrs = {"min_val": -0.5, "max_val": 0.75, "nan_mode": "PROPAGATE"}
        fn, args = specialise(name, [None], attrs), (a,)
    else:
        attrs = {}
        fn, args = specialise(name, [None, None] + ([np.zeros(1, np.int8)] if name == "MUL" else []), attrs), (a, b)
    got = _run(fn, threads, *args)
    np.testing.assert_array_equal(got, _run(fn, 1, *args))
    np.testing.assert_array_equal(got, OPS[name](*args, *([np.zeros(1, np.int8)] if name == "MUL" else []), **attrs))
    assert not np.shares_memory(got, a)


@pytest.mark.parametrize("epilogue", ["silu", "hardswish"])
@pytest.mark.parametrize("kind", ["CONV2D", "DEPTHWISE_CONV2D"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(windows)
def test_threaded_fused_activation_equals_serial_and_the_unfused_forms(always_split: None, kind: str, epilogue: str,
                                                                       p: dict) -> None:
    """A SiLU or hardswish fused into a convolution (fast.Silu, fast.HardSwish) applied per thread's block:
    the bits of the serial run and of the activation's own fast forms after the convolution."""
    if _geometry(p) is None:
        return
    rng = np.random.default_rng(p["seed"])
    x = (rng.standard_normal((p["n"], p["h"], p["w"], p["c"])) * 3).astype(np.float32)
    shape = (4, p["kh"], p["kw"], p["c"]) if kind == "CONV2D" else (p["kh"], p["kw"], p["c"], 1)
    w = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(4 if kind == "CONV2D" else p["c"]).astype(np.float32)
    attrs = {"pad": p["pad"], "stride": [p["sy"], p["sx"]], "dilation": [p["dy"], p["dx"]]}
    form = F.Silu() if epilogue == "silu" else F.HardSwish(1 / 6, 0.5, Clamp(0.0, 1.0))
    fused, plain = specialise(kind, [None, w, b], attrs, form), specialise(kind, [None, w, b], attrs)
    shift = np.zeros(1, np.int8)
    mul, add = specialise("MUL", [None, None, shift], {}), specialise("ADD", [None, None], {})
    sigmoid = specialise("SIGMOID", [None], {})
    clamp = specialise("CLAMP", [None], {"min_val": 0.0, "max_val": 1.0})
    sixth, half = np.full((1, 1, 1, 1), 1 / 6, np.float32), np.full((1, 1, 1, 1), 0.5, np.float32)
    results = []
    for threads in (1, p["threads"]):  # a threaded GEMM may round otherwise than the serial one: per count
        y = _run(plain, threads, x, w, b)
        results.append(_run(fused, threads, x, w, b))
        if epilogue == "silu":
            unfused = mul(y, sigmoid(y), shift)  # type: ignore[misc]
        else:
            unfused = mul(y, clamp(add(mul(y, sixth, shift), half)), shift)  # type: ignore[misc]
        np.testing.assert_array_equal(results[-1], unfused)
    if kind == "DEPTHWISE_CONV2D":
        np.testing.assert_array_equal(results[0], results[1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(0, 2**16), st.integers(2, 4),
       st.sampled_from(["ADD", "SUB", "MAXIMUM", "MINIMUM", "MUL"]))
def test_threaded_broadcasting_binary_equals_serial_and_the_generic_kernel(always_split: None, shape: list[int],
                                                                          seed: int, threads: int,
                                                                          name: str) -> None:
    """One operand broadcast over the other (a per-channel scale, a scalar constant, both ways at once), an
    ADD maybe with a fused CLAMP: on several threads, the same bits as on one and as the generic kernels."""
    rng = np.random.default_rng(seed)
    # each operand keeps or drops (to 1) each axis at random
    sa = [d if rng.random() < 0.6 else 1 for d in shape]
    sb = [d if rng.random() < 0.6 else 1 for d in shape]
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    a.flat[0] = np.nan
    shift = [np.zeros(1, np.int8)] if name == "MUL" else []
    clamp = Clamp(-0.5, 0.75) if name == "ADD" and seed % 2 else None  # ADD with a fused CLAMP (residual + relu)
    fn = specialise(name, [None, None, *shift], {}, clamp)
    got = _run(fn, threads, a, b, *shift)
    np.testing.assert_array_equal(got, _run(fn, 1, a, b, *shift))
    expected = OPS[name](a, b, *shift)
    if clamp is not None:
        expected = OPS["CLAMP"](expected, min_val=-0.5, max_val=0.75, nan_mode="PROPAGATE")
    np.testing.assert_array_equal(got, expected)
    assert got.shape == tuple(max(p, q) for p, q in zip(sa, sb, strict=True))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("name", ["SIGMOID", "EXP", "LOG", "TANH", "SIN", "COS"])
def test_threaded_transcendental_equals_serial_and_the_generic_kernel(always_split: None, name: str,
                                                                      threads: int) -> None:
    """Split over threads, the same bits as in one piece; within the TOSA tolerances of the generic kernel
    (float64, rounded once: SIGMOID 3 ulp, the others 2 ulp), NaN, infinities and overflow included."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 9, 7, 5)) * 4).astype(np.float32)
    x.flat[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 95.0]
    if name == "LOG":
        x = np.abs(x)
    fn = specialise(name, [None], {})
    got = _run(fn, threads, x)
    np.testing.assert_array_equal(got, _run(fn, 1, x))
    ref = OPS[name](x)
    ulps = 3 if name == "SIGMOID" else 2
    finite = np.isfinite(ref) & (np.abs(ref) > np.finfo(np.float32).tiny)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got[~finite & ~np.isnan(ref)],
                                                                           ref[~finite & ~np.isnan(ref)])
    spacing = np.spacing(np.abs(ref[finite]))
    assert np.all(np.abs(got[finite] - ref[finite]) <= ulps * spacing + (1e-6 if name in ("SIN", "COS") else 0))
    assert not np.shares_memory(got, x)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 3), st.integers(2, 13), st.integers(2, 13), st.integers(1, 6), st.integers(1, 6),
       st.lists(st.integers(0, 2), min_size=4, max_size=4), st.integers(2, 5), st.integers(0, 2**16))
def test_threaded_winograd_equals_serial_within_its_rounding(monkeypatch: pytest.MonkeyPatch, n: int, h: int, w: int,
                                                             ic: int, oc: int, pads: list[int], threads: int,
                                                             seed: int) -> None:
    """Winograd F(2,3) with its tiles shared over threads (each share with its own buffers, bias and
    clamp) against the serial banded form and the generic kernel, within test_winograd's bound."""
    if h + pads[0] + pads[1] < 3 or w + pads[2] + pads[3] < 3:
        return
    monkeypatch.setattr(W, "PARALLEL_TILES", 0)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, ic)).astype(np.float32)
    wt = (rng.standard_normal((oc, 3, 3, ic)) / 3).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    conv = W.Winograd(wt, b, pads, m=2, clamp=(-1.0, 2.0), band_bytes=256, scratch={})
    serial = _run(conv, 1, x)
    threaded = _run(conv, threads, x)
    tol = TOLERANCE[2] * _tile_bound(_bound(x, wt, b, pads), 2)
    assert np.all(np.abs(threaded - serial) <= tol)
    expected = np.clip(OPS["CONV2D"](x, wt, b, pad=pads, stride=[1, 1], dilation=[1, 1], acc_type="FP32"), -1, 2)
    assert np.all(np.abs(threaded - expected) <= tol)
    np.testing.assert_array_equal(_run(conv, threads, x), threaded)


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((300, 40), (40, 70)),       # rows
    ((5, 64), (64, 900)),        # few rows: columns
    ((6, 50, 30), (6, 30, 40)),  # batch
    ((3, 50, 30), (30, 40)),     # batch against one matrix
    ((1, 3, 40), (1, 40, 2)),    # too small to split
])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gemm_splits_rows_columns_or_batch_like_one_matmul(monkeypatch: pytest.MonkeyPatch, a_shape: tuple,
                                                           b_shape: tuple, threads: int) -> None:
    monkeypatch.setattr(parallel, "MIN_GEMM_FLOPS", 0)
    rng = np.random.default_rng(4)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    with parallel.using(threads), parallel.blas_single():
        got = parallel.gemm(a, b)
    assert got.shape == expected.shape and got.dtype == np.float32
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(got - expected) <= 2 * a_shape[-1] * EPS * bound)


def _collect(threads: int) -> list[int]:
    seen: list[int] = []
    lock = threading.Lock()

    def add(i: int) -> None:
        with lock:
            seen.append(i)

    with parallel.using(threads):
        parallel.parallel_for(9, add)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("name", ["SELECT", "GREATER", "GREATER_EQUAL", "EQUAL"])
def test_fast_select_and_comparisons_equal_the_generic_kernel(name: str, dtype: type) -> None:
    """The program's fast SELECT and comparisons give the generic kernels' results, NaN and broadcasting
    included, and leave other operand types to them."""
    rng = np.random.default_rng(11)
    a = rng.integers(-2, 3, (3, 1, 5)).astype(dtype)
    b = rng.integers(-2, 3, (3, 4, 1)).astype(dtype)
    if dtype == np.float32:
        a[0, 0, :2] = np.nan
        b[1, 2, 0] = -0.0
    fn = specialise(name, [None] * (3 if name == "SELECT" else 2), {})
    args = (rng.random((1, 4, 5)) < 0.5, a, b) if name == "SELECT" else (a, b)
    got = fn(*args)
    ref = OPS[name](*args)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)
    if name == "SELECT":
        assert fn(args[0], a, b.astype(np.float64)) is NotImplemented
    else:
        assert fn(a.astype(np.float64), b.astype(np.float64)) is NotImplemented
