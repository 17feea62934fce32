"""RESIZE, FFT2D, RFFT2D (skriptnd.tosa.ops.resize_fft) against the TOSA reference model, and the TOSA 0.30
FULLY_CONNECTED against a direct transcription of the 0.30 pseudocode (the 1.0 reference model lacks it).

Tolerances: integer results are bit-exact (int16 BILINEAR → int48 cannot be read back from the reference
model, so it is checked against a scalar transcription of the 1.0 pseudocode). Float RESIZE: NEAREST is
exact; BILINEAR (a convex combination of four samples) within 4 · eps(out_t) · max|sample| + 1 ulp. FFT2D /
RFFT2D (fp32): |mine - ref| <= 2 · log2(H·W) · eps(fp32) · Σ(|re| + |im|) over the batch element, + 1 ulp.
FULLY_CONNECTED floats: within 2 · IC · eps(out_t) · Σ|terms| + 1 ulp of the pseudocode value.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tosa_oracle as to  # noqa: E402

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable

EPS = {"fp32": 2.0**-23, "fp16": 2.0**-10}
_NP = {"fp16": np.float16, "fp32": np.float32}


@pytest.fixture()
def oracle():
    to.require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return to.seeded_rng("tosa-resize-fft", *key)


def _ulp(r64, t):
    return np.spacing(np.abs(r64).astype(_NP[t])).astype(np.float64)


def _close(mine, ref, tol, what):
    m64, r64 = np.asarray(mine, np.float64), np.asarray(ref, np.float64)
    assert m64.shape == r64.shape, f"{what}: shape {m64.shape} != {r64.shape}"
    assert np.array_equal(np.isnan(m64), np.isnan(r64)), what
    ok = np.isnan(r64) | (m64 == r64) | (np.abs(m64 - r64) <= tol)
    assert ok.all(), f"{what}: mine {m64[~ok][:5]} ref {r64[~ok][:5]}"


# ------------------------------------------------------------------------------------------------ RESIZE


def _resize_params(rng, ih, iw):
    """Random valid scale/offset/border (ERROR_IF bounds of TOSA 1.0, exact idiv_check)."""
    params = []
    for size in (ih, iw):
        while True:
            n = int(rng.integers(1, 9))
            d = int(rng.integers(1, min(16 * n - 1, 12) + 1))
            off = int(rng.integers(-n, min(16 * n, 3 * n)))
            base = (size - 1) * n - off
            border = n - 1 - ((base + n - 1) % d)
            if base + border >= 0 and -16 * n <= border < n:
                params.append((n, d, off, border))
                break
    (yn, yd, oy, by), (xn, xd, ox, bx) = params
    return np.array([yn, yd, xn, xd]), np.array([oy, ox]), np.array([by, bx])


def _resize_pseudocode(x, scale, offset, border, mode):
    """Scalar transcription of the TOSA 1.0 RESIZE pseudocode (integer inputs)."""
    yn, yd, xn, xd = (int(v) for v in scale)
    n_, ih, iw, c_ = x.shape
    oh = ((ih - 1) * yn - int(offset[0]) + int(border[0])) // yd + 1
    ow = ((iw - 1) * xn - int(offset[1]) + int(border[1])) // xd + 1
    out = np.zeros((n_, oh, ow, c_), np.int64)
    for n in range(n_):
        for oy in range(oh):
            for ox in range(ow):
                for c in range(c_):
                    y, x_ = oy * yd + int(offset[0]), ox * xd + int(offset[1])
                    iy, ix = y // yn, x_ // xn
                    dy, dx = y - iy * yn, x_ - ix * xn
                    iy0, iy1, ix0, ix1 = max(iy, 0), min(iy + 1, ih - 1), max(ix, 0), min(ix + 1, iw - 1)
                    def v(a, b, n=n, c=c):
                        return int(x[n, a, b, c])
                    if mode == "BILINEAR":
                        out[n, oy, ox, c] = (v(iy0, ix0) * (yn - dy) * (xn - dx) + v(iy0, ix1) * (yn - dy) * dx
                                             + v(iy1, ix0) * dy * (xn - dx) + v(iy1, ix1) * dy * dx)
                    else:
                        out[n, oy, ox, c] = v(iy1 if 2 * dy >= yn else iy0, ix1 if 2 * dx >= xn else ix0)
    return out


@pytest.mark.parametrize("t", ["int8", "int16", "fp16", "fp32"])
@pytest.mark.parametrize("mode", ["NEAREST_NEIGHBOR", "BILINEAR"])
def test_resize_random(oracle, t, mode):
    rng = _rng("resize", t, mode)
    out_t = {("int8", "BILINEAR"): "int32", ("int16", "BILINEAR"): "int48"}.get((t, mode), t)
    for _ in range(12):
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 3)))
        x = to.rand_int(rng, t, shape) if t.startswith("int") else to.make_float(rng.uniform(-8, 8, shape), t)
        scale, offset, border = _resize_params(rng, shape[1], shape[2])
        mine = OPS["RESIZE"](x, scale, offset, border, mode=mode)
        if t.startswith("int"):
            expect = _resize_pseudocode(x, scale, offset, border, "BILINEAR" if mode == "BILINEAR" else "NEAREST")
            assert mine.dtype == np.dtype(to._NP_INT[out_t]) and np.array_equal(mine, expect)
        if out_t == "int48":
            continue  # int48 outputs are not returned by the reference model
        ref = to.run_reference("RESIZE", [x, scale, offset, border], {"mode": mode}, out_t)
        assert not isinstance(ref, to.ReferenceError), ref
        if out_t.startswith("int") or mode != "BILINEAR":
            assert mine.dtype == ref.dtype and np.array_equal(mine, ref), (scale, offset, border, mine, ref)
        else:
            r64 = ref.astype(np.float64)
            _close(mine, ref, 4 * EPS[t] * np.abs(x.astype(np.float64)).max() + _ulp(r64, t), f"RESIZE {t}")


def test_resize_hand_vectors():
    # half-pixel 2x upscale in 1.0 form: scale x = 4/2, offset -1, border 1 -> OW 6, factor 1*4
    x = np.array([1, 2, 3], np.int8).reshape(1, 1, 3, 1)
    args = (np.array([1, 1, 4, 2]), np.array([0, -1]), np.array([0, 1]))
    assert OPS["RESIZE"](x, *args, mode="BILINEAR").reshape(-1).tolist() == [4, 5, 7, 9, 11, 12]
    assert OPS["RESIZE"](x, *args, mode="NEAREST_NEIGHBOR").reshape(-1).tolist() == [1, 1, 2, 2, 3, 3]
    # int16 -> int48 bilinear, extreme values: 2x with scale_n = 2048 (unit 2048 on x)
    x16 = np.array([-32768, 32767], np.int16).reshape(1, 1, 2, 1)
    out = OPS["RESIZE"](x16, np.array([1, 1, 2048, 1024]), np.array([0, 0]), np.array([0, 0]), mode="BILINEAR")
    assert out.dtype == np.int64
    assert out.reshape(-1).tolist() == [-32768 * 2048, (-32768 + 32767) * 1024, 32767 * 2048]
    fx = np.array([0.0, 1.0], np.float32).reshape(1, 1, 2, 1)
    out = OPS["RESIZE"](fx, np.array([1, 1, 4, 1]), np.array([0, 0]), np.array([0, 0]), mode="BILINEAR")
    assert out.reshape(-1).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("scale, offset, border", [
    ([4, 3, 4, 3], [0, 0], [0, 0]),      # idiv_check not exact
    ([2, 1, 2, 1], [-3, 0], [0, 0]),     # offset_y < -scale_y_n
    ([2, 1, 2, 1], [0, 32], [0, 0]),     # offset_x >= 16 * scale_x_n
    ([2, 1, 2, 1], [0, 0], [2, 0]),      # border_y >= scale_y_n
    ([1, 16, 1, 1], [0, 0], [0, 0]),     # scale_y_d >= 16 * scale_y_n
    ([4096, 1, 2, 1], [0, 0], [0, 0]),   # scale_y_n > 1 << 11
    ([0, 1, 2, 1], [0, 0], [0, 0]),      # scale_y_n <= 0
    ([2, 1, 2, 1], [0, 0], [-33, 0]),    # border_y < -16 * scale_y_n
])
def test_resize_errors(oracle, scale, offset, border):
    x = np.arange(6, dtype=np.int8).reshape(1, 2, 3, 1)
    args = [np.array(scale), np.array(offset), np.array(border)]
    yn, yd, xn, xd = scale
    oh = max(((1 * yn - offset[0] + border[0]) // max(yd, 1)) + 1, 1)
    ow = max(((2 * xn - offset[1] + border[1]) // max(xd, 1)) + 1, 1)
    ref = to.run_reference("RESIZE", [x] + args, {"mode": "BILINEAR"}, "int32", output_shape=(1, oh, ow, 1))
    assert isinstance(ref, to.ReferenceError) and ref.is_error, ref
    with pytest.raises(TosaError):
        OPS["RESIZE"](x, *args, mode="BILINEAR")


def test_resize_type_errors():
    args = (np.array([2, 1, 2, 1]), np.array([0, 0]), np.array([0, 0]))
    with pytest.raises(TosaError):
        OPS["RESIZE"](np.zeros((1, 2, 2, 1), np.int32), *args, mode="BILINEAR")
    with pytest.raises(TosaError):
        OPS["RESIZE"](np.zeros((2, 2, 1), np.int8), *args, mode="BILINEAR")
    with pytest.raises(TosaError):
        OPS["RESIZE"](np.zeros((1, 2, 2, 1), np.int8), *args, mode="BICUBIC")


# ------------------------------------------------------------------------------------------------ FFT


def _fft_tol(re, im, ref):
    h, w = re.shape[1], re.shape[2]
    s = (np.abs(re.astype(np.float64)) + np.abs(im.astype(np.float64))).sum(axis=(1, 2), keepdims=True)
    return 2 * max(np.log2(h * w), 1) * EPS["fp32"] * s + _ulp(ref.astype(np.float64), "fp32")


@pytest.mark.parametrize("inverse", [False, True])
def test_fft2d_random(oracle, inverse):
    rng = _rng("fft2d", inverse)
    for h, w in ((1, 1), (1, 8), (4, 4), (8, 2), (16, 32)):
        re = rng.uniform(-10, 10, (2, h, w)).astype(np.float32)
        im = rng.uniform(-10, 10, (2, h, w)).astype(np.float32)
        mr, mi = OPS["FFT2D"](re, im, inverse=inverse)
        rr, ri = to.run_reference("FFT2D", [re, im], {"inverse": inverse}, "fp32")
        _close(mr, rr, _fft_tol(re, im, rr), f"FFT2D real {h}x{w}")
        _close(mi, ri, _fft_tol(re, im, ri), f"FFT2D imag {h}x{w}")


def test_fft2d_sign_convention():
    # a single impulse at (0, 1) of a 1x4 signal: forward gives exp(-2πi·ox/4), inverse exp(+2πi·ox/4)
    re = np.array([[[0, 1, 0, 0]]], np.float32)
    im = np.zeros_like(re)
    fr, fi = OPS["FFT2D"](re, im)
    assert fr.reshape(-1).tolist() == [1, 0, -1, 0] and fi.reshape(-1).tolist() == [0, -1, 0, 1]
    ir, ii = OPS["FFT2D"](re, im, inverse=True)
    assert ir.reshape(-1).tolist() == [1, 0, -1, 0] and ii.reshape(-1).tolist() == [0, 1, 0, -1]
    # no normalisation: inverse(forward(x)) = H*W*x
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    br, bi = OPS["FFT2D"](*OPS["FFT2D"](x, np.zeros_like(x)), inverse=True)
    assert np.allclose(br, 8 * x, atol=1e-4) and np.allclose(bi, 0, atol=1e-4)


def test_rfft2d_random(oracle):
    rng = _rng("rfft2d")
    for h, w in ((1, 1), (2, 1), (1, 8), (4, 4), (8, 16)):
        x = rng.uniform(-10, 10, (2, h, w)).astype(np.float32)
        mr, mi = OPS["RFFT2D"](x)
        assert mr.shape == (2, h, w // 2 + 1)
        rr, ri = to.run_reference("RFFT2D", [x], {}, "fp32")
        _close(mr, rr, _fft_tol(x, np.zeros_like(x), rr), f"RFFT2D real {h}x{w}")
        _close(mi, ri, _fft_tol(x, np.zeros_like(x), ri), f"RFFT2D imag {h}x{w}")
        # matches FFT2D on the first W/2+1 columns
        fr, fi = OPS["FFT2D"](x, np.zeros_like(x))
        assert np.allclose(mr, fr[:, :, : w // 2 + 1], atol=1e-3) and np.allclose(mi, fi[:, :, : w // 2 + 1], atol=1e-3)


def test_rfft2d_030_shape():
    x = np.arange(32, dtype=np.float32).reshape(1, 4, 8)
    r, i = OPS["RFFT2D"](x, version="0.30")
    assert r.shape == i.shape == (1, 3, 5)
    full = np.fft.fft2(x.astype(np.float64))
    assert np.allclose(r, full.real[:, :3, :5], atol=1e-3) and np.allclose(i, full.imag[:, :3, :5], atol=1e-3)


@pytest.mark.parametrize("op, shape", [("FFT2D", (1, 3, 4)), ("FFT2D", (1, 4, 6)), ("RFFT2D", (1, 4, 3)),
                                       ("RFFT2D", (1, 6, 2))])
def test_fft_not_power_of_two(oracle, op, shape):
    x = np.ones(shape, np.float32)
    inputs = [x, x] if op == "FFT2D" else [x]
    out_shape = shape if op == "FFT2D" else (shape[0], shape[1], shape[2] // 2 + 1)
    ref = to.run_reference(op, inputs, {}, "fp32", output_shape=out_shape)
    assert isinstance(ref, to.ReferenceError) and ref.is_error, ref
    with pytest.raises(TosaError):
        OPS[op](*inputs)


def test_fft_type_errors():
    with pytest.raises(TosaError):
        OPS["FFT2D"](np.ones((1, 2, 2), np.float16), np.ones((1, 2, 2), np.float16))
    with pytest.raises(TosaError):
        OPS["FFT2D"](np.ones((1, 2, 2), np.float32), np.ones((1, 2, 4), np.float32))
    with pytest.raises(TosaError):
        OPS["RFFT2D"](np.ones((2, 2), np.float32))


# ------------------------------------------------------------------------------------------------ FULLY_CONNECTED


def _fc_pseudocode(x, w, b, izp, wzp):
    """TOSA 0.30 §2.3.7 pseudocode, integer types (Python ints, apply_add overflow is not exercised)."""
    n_, ic_ = x.shape
    oc_ = w.shape[0]
    out = np.zeros((n_, oc_), np.int64)
    for n in range(n_):
        for oc in range(oc_):
            acc = 0
            for ic in range(ic_):
                acc += (int(x[n, ic]) - izp) * (int(w[oc, ic]) - wzp)
            out[n, oc] = acc + int(b[oc])
    return out


@pytest.mark.parametrize("it", ["int8", "int16"])
def test_fully_connected_int(it):
    rng = _rng("fc", it)
    out_t = "int32" if it == "int8" else "int48"
    for _ in range(10):
        n, ic, oc = (int(v) for v in rng.integers(1, 6, 3))
        x, w = to.rand_int(rng, it, (n, ic)), to.rand_int(rng, "int8", (oc, ic))
        b = to.rand_int(rng, out_t, (oc,), -1000, 1000)
        izp, wzp = (int(v) for v in rng.integers(-128, 128, 2)) if it == "int8" else (0, 0)
        mine = OPS["FULLY_CONNECTED"](x, w, b, izp, wzp, version="0.30")
        assert mine.dtype == np.dtype(to._NP_INT[out_t])
        assert np.array_equal(mine, _fc_pseudocode(x, w, b, izp, wzp))


@pytest.mark.parametrize("it, acc", [("fp32", None), ("fp16", "fp16"), ("fp16", "fp32")])
def test_fully_connected_float(it, acc):
    rng = _rng("fc", it, acc)
    out_t = acc or it
    for _ in range(10):
        n, ic, oc = (int(v) for v in rng.integers(1, 6, 3))
        x = to.make_float(rng.uniform(-4, 4, (n, ic)), it)
        w = to.make_float(rng.uniform(-4, 4, (oc, ic)), it)
        b = to.make_float(rng.uniform(-4, 4, (oc,)), out_t)
        mine = OPS["FULLY_CONNECTED"](x, w, b, acc_type=acc, version="0.30")
        assert mine.dtype == np.dtype(_NP[out_t])
        exact = np.array([[sum(float(x[i, k]) * float(w[o, k]) for k in range(ic)) + float(b[o]) for o in range(oc)]
                          for i in range(n)])
        terms = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T + np.abs(b.astype(np.float64))
        _close(mine, exact, 2 * ic * EPS[out_t] * terms + _ulp(exact, out_t), "FULLY_CONNECTED")


def test_fully_connected_hand_and_errors():
    x = np.array([[1, 2, 3]], np.int8)
    w = np.array([[1, 0, -1], [2, 2, 2]], np.int8)
    b = np.array([10, -1], np.int32)
    assert OPS["FULLY_CONNECTED"](x, w, b, version="0.30").tolist() == [[8, 11]]
    # zero points 1: (0,1,2)·(0,-1,-2) + 10 = 5, (0,1,2)·(1,1,1) - 1 = 2
    assert OPS["FULLY_CONNECTED"](x, w, b, 1, 1, version="0.30").tolist() == [[5, 2]]
    with pytest.raises(TosaError):  # not a TOSA 1.0 operator
        OPS["FULLY_CONNECTED"](x, w, b)
    with pytest.raises(TosaError):  # weight IC mismatch
        OPS["FULLY_CONNECTED"](x, w[:, :2], b, version="0.30")
    with pytest.raises(TosaError):  # bias type must be out_t
        OPS["FULLY_CONNECTED"](x, w, b.astype(np.int8), version="0.30")
    with pytest.raises(TosaError):  # zero point only for int8
        OPS["FULLY_CONNECTED"](x.astype(np.int16), w, b.astype(np.int64), 1, 0, version="0.30")
    with pytest.raises(TosaError):  # fp32 bias for fp16/fp16 accumulate
        OPS["FULLY_CONNECTED"](x.astype(np.float16), w.astype(np.float16), b.astype(np.float32), version="0.30")
    big = np.full((1, 140000), -128, np.int8)  # 140000 * 2^14 > 2^31 - 1
    with pytest.raises(TosaUnpredictable):  # partial sums exceed int32 (apply_add REQUIRE)
        OPS["FULLY_CONNECTED"](big, big, np.zeros(1, np.int32), version="0.30")


@pytest.mark.parametrize("mode", ["NEAREST_NEIGHBOR", "BILINEAR"])
def test_resize_float_specials(oracle, mode):
    # bilinear evaluates all four products as written: inf * 0 weight -> NaN (the reference agrees)
    x = np.array([1.0, np.inf, np.nan, -2.0, -0.0], np.float32).reshape(1, 1, 5, 1)
    args = [np.array([1, 1, 2, 1]), np.array([0, 0]), np.array([0, 0])]
    ref = to.run_reference("RESIZE", [x] + args, {"mode": mode}, "fp32")
    assert to.same_bits(OPS["RESIZE"](x, *args, mode=mode), ref, "fp32")
