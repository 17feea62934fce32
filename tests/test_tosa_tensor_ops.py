"""Tensor operators (skriptnd.tosa.ops.tensor_ops) against the TOSA reference model.

Tolerances: integer results are bit-exact. Float results (computed here in float64 and rounded once; the
reference accumulates in acc_t) must satisfy |mine - ref| <= K · eps(acc_t) · sum(|terms|) + 1 ulp of the
output, with K = 2 · (number of accumulated terms), and the same NaN/inf positions. MAX_POOL2D is exact.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tosa_oracle as to  # noqa: E402

from skriptnd.tosa.ops import OPS, TosaError

pytestmark = pytest.mark.tosa("1.0")


@pytest.fixture(scope="module", autouse=True)
def _oracle():
    to.require_oracle()
    yield


def reference(op, inputs, attributes, out_type, out_shape):
    return to.run_reference(op, [np.asarray(x) for x in inputs], dict(attributes), out_type,
                            output_shape=tuple(int(d) for d in out_shape))


def _rng(*key: object) -> np.random.Generator:
    return to.seeded_rng("tosa-tensor", *key)


def _zp(v, t):
    return np.array([v], dtype=to._NP_INT.get(t, np.float32) if t.startswith("int") else
                    (np.float16 if t == "fp16" else np.float32))


EPS = {"fp32": 2.0**-23, "fp16": 2.0**-10}


def _compare(op, inputs, attrs, out_type, mine_kwargs=None, abs_terms=None, n_terms=1, acc="fp32"):
    """Run both; integers exact, floats within the bound described in the module docstring."""
    mine = OPS[op](*inputs, **(mine_kwargs if mine_kwargs is not None else attrs))
    ref = reference(op, inputs, attrs, out_type, mine.shape)
    assert not isinstance(ref, to.ReferenceError), f"{op}: reference failed {ref}"
    assert ref.shape == mine.shape
    if out_type.startswith("int"):
        assert mine.dtype == ref.dtype and np.array_equal(mine, ref), f"{op}: {mine} != {ref}"
        return mine
    m64, r64 = mine.astype(np.float64), ref.astype(np.float64)
    assert np.array_equal(np.isnan(m64), np.isnan(r64))
    tol = 2 * n_terms * EPS[acc] * (abs_terms if abs_terms is not None else 0) + \
        np.spacing(np.abs(r64).astype(np.float16 if out_type == "fp16" else np.float32)).astype(np.float64)
    ok = np.isnan(r64) | (m64 == r64) | (np.abs(m64 - r64) <= tol)
    assert ok.all(), f"{op}: mine {m64[~ok][:5]} ref {r64[~ok][:5]} tol {np.broadcast_to(tol, ok.shape)[~ok][:5]}"
    return mine


def _expect_error(op, inputs, attrs, out_type, out_shape):
    ref = reference(op, inputs, attrs, out_type, out_shape)
    assert isinstance(ref, to.ReferenceError) and ref.is_error, ref
    with pytest.raises(TosaError):
        OPS[op](*inputs, **attrs)


def _rand(rng, t, shape, lo=-4.0, hi=4.0):
    if t.startswith("int"):
        return to.rand_int(rng, t, shape)
    return to.make_float(rng.uniform(lo, hi, size=shape), t)


# ------------------------------------------------------------------------------------------------ MATMUL

@pytest.mark.parametrize("t,out", [("int8", "int32"), ("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32")])
def test_matmul_random(t, out):
    for seed in range(4):
        rng = _rng("MATMUL", t, out, seed)
        n, h, c, w = (int(v) for v in rng.integers(1, 6, 4))
        a, b = _rand(rng, t, (n, h, c)), _rand(rng, t, (n, c, w))
        az = int(rng.integers(-128, 128)) if t == "int8" else 0
        bz = int(rng.integers(-128, 128)) if t == "int8" else 0
        inputs = [a, b, _zp(az, t), _zp(bz, t)]
        terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        _compare("MATMUL", inputs, {}, out, mine_kwargs={"output_dtype": out}, abs_terms=terms, n_terms=c,
                 acc="fp16" if out == "fp16" else "fp32")


def test_matmul_errors():
    a = np.ones((1, 2, 3), np.int8)
    b = np.ones((1, 4, 2), np.int8)  # C mismatch
    with pytest.raises(TosaError):
        OPS["MATMUL"](a, b, _zp(0, "int8"), _zp(0, "int8"))
    f = np.ones((1, 2, 3), np.float32)
    _expect_error("MATMUL", [f, np.ones((1, 3, 2), np.float32), _zp(1, "fp32"), _zp(0, "fp32")], {}, "fp32", (1, 2, 2))
    i16 = np.ones((1, 2, 3), np.int16)
    with pytest.raises(TosaError):
        OPS["MATMUL"](i16, np.ones((1, 3, 2), np.int16), _zp(3, "int16"), _zp(0, "int16"))


def test_matmul_int16_hand():
    a = np.array([[[32767, -32768]]], np.int16)
    b = np.array([[[32767], [32767]]], np.int16)
    r = OPS["MATMUL"](a, b, _zp(0, "int16"), _zp(0, "int16"))
    assert r.dtype == np.int64 and r.tolist() == [[[32767 * 32767 - 32768 * 32767]]]


# ------------------------------------------------------------------------------------------------ convolutions

def _conv_case(rng, depthwise):
    while True:
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        sy, sx = (int(v) for v in rng.integers(1, 3, 2))
        dy, dx = (int(v) for v in rng.integers(1, 3, 2))
        pad = [int(v) for v in rng.integers(0, 3, 4)]
        ih, iw = (int(v) for v in rng.integers(1, 8, 2))
        ny = ih - 1 + pad[0] + pad[1] - (kh - 1) * dy
        nx = iw - 1 + pad[2] + pad[3] - (kw - 1) * dx
        if ny >= 0 and nx >= 0 and ny % sy == 0 and nx % sx == 0:
            return (kh, kw), [sy, sx], [dy, dx], pad, (ih, iw)


@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("t,acc", [("int8", "int32"), ("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32")])
def test_conv2d_random(t, acc, depthwise):
    op = "DEPTHWISE_CONV2D" if depthwise else "CONV2D"
    for seed in range(5):
        rng = _rng(op, t, acc, seed)
        (kh, kw), stride, dilation, pad, (ih, iw) = _conv_case(rng, depthwise)
        n, ic, oc = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        x = _rand(rng, t, (n, ih, iw, ic))
        wshape = (kh, kw, ic, oc) if depthwise else (oc, kh, kw, ic)
        w = _rand(rng, t, wshape)
        bc = ic * oc if depthwise else oc
        out_t = acc if t == "int8" else t
        bias = (to.rand_int(rng, "int32", (bc if seed % 2 else 1,), -1000, 1000) if t == "int8"
                else _rand(rng, out_t, (bc if seed % 2 else 1,)))
        iz = int(rng.integers(-128, 128)) if t == "int8" else 0
        wz = int(rng.integers(-128, 128)) if t == "int8" else 0
        attrs = {"pad": pad, "stride": stride, "dilation": dilation, "acc_type": acc}
        inputs = [x, w, bias, _zp(iz, t), _zp(wz, t)]
        terms = None
        if t != "int8":
            absx = {k: np.abs(v.astype(np.float64)) for k, v in (("x", x), ("w", w), ("b", bias))}
            terms = OPS[op](absx["x"].astype(np.float32), absx["w"].astype(np.float32),
                            absx["b"].astype(np.float32), _zp(0, "fp32"), _zp(0, "fp32"),
                            **{**attrs, "acc_type": "fp32"}).astype(np.float64)
        _compare(op, inputs, attrs, out_t, abs_terms=terms, n_terms=kh * kw * ic + 1, acc=acc)


def test_conv2d_errors():
    x = np.ones((1, 5, 5, 1), np.int8)
    w = np.ones((1, 3, 3, 1), np.int8)
    b = np.zeros((1,), np.int32)
    zp = _zp(0, "int8")
    base = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}
    # stride 2 with (5 - 3) % 2 == 0 is fine, stride 3 is not an exact division
    _expect_error("CONV2D", [x, w, b, zp, zp], {**base, "stride": [3, 1]}, "int32", (1, 1, 3, 1))
    for bad in ({"pad": [-1, 0, 0, 0]}, {"stride": [0, 1]}, {"dilation": [1, 0]}):
        with pytest.raises(TosaError):
            OPS["CONV2D"](x, w, b, zp, zp, **{**base, **bad})
    f = np.ones((1, 5, 5, 1), np.float32)
    _expect_error("CONV2D", [f, f[:, :3, :3], np.zeros(1, np.float32), _zp(1, "fp32"), _zp(0, "fp32")],
                  {**base, "acc_type": "fp32"}, "fp32", (1, 3, 3, 1))


def test_conv2d_hand():
    # digest-style check: zero points, padding skipped (not input_zp), bias added once
    x = np.array([[[[3], [5]]]], np.int8)  # [1,1,2,1]
    w = np.array([[[[2], [-1]]]], np.int8)  # [1,1,2,1]
    r = OPS["CONV2D"](x, w, np.array([10], np.int32), _zp(1, "int8"), _zp(-1, "int8"),
                      pad=[0, 0, 1, 0], stride=[1, 1], dilation=[1, 1])
    # ox=0: taps x=-1 (skipped), x=0: (3-1)*(-1+1)=0 -> 10 ; ox=1: (3-1)*(2+1) + (5-1)*0 = 6 -> 16
    assert r.tolist() == [[[[10], [16]]]]


# ------------------------------------------------------------------------------------------------ pooling

def _pool_case(rng):
    while True:
        kernel = [int(v) for v in rng.integers(1, 4, 2)]
        stride = [int(v) for v in rng.integers(1, 3, 2)]
        pad = [int(rng.integers(0, kernel[i // 2])) for i in range(4)]
        ih, iw = (int(v) for v in rng.integers(1, 8, 2))
        ny, nx = ih + pad[0] + pad[1] - kernel[0], iw + pad[2] + pad[3] - kernel[1]
        if ny >= 0 and nx >= 0 and ny % stride[0] == 0 and nx % stride[1] == 0:
            return kernel, stride, pad, (ih, iw)


@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
@pytest.mark.parametrize("t", ["int8", "int16", "fp32", "fp16"])
def test_max_pool2d_random(t, nan_mode):
    for seed in range(5):
        rng = _rng("MAX", t, nan_mode, seed)
        kernel, stride, pad, (ih, iw) = _pool_case(rng)
        shape = (int(rng.integers(1, 3)), ih, iw, int(rng.integers(1, 4)))
        x = to.rand_int(rng, t, shape) if t.startswith("int") else to.rand_float(rng, t, shape, -5, 5, 0.3)
        attrs = {"kernel": kernel, "stride": stride, "pad": pad, "nan_mode": nan_mode}
        mine = OPS["MAX_POOL2D"](x, **attrs)
        ref = reference("MAX_POOL2D", [x], attrs, t, mine.shape)
        assert not isinstance(ref, to.ReferenceError), ref
        if t.startswith("int"):
            assert np.array_equal(mine, ref)
        else:
            assert to.same_bits(mine, ref, t), (x, mine, ref)


@pytest.mark.parametrize("t,acc", [("int8", "int32"), ("int16", "int32"), ("fp32", "fp32"), ("fp16", "fp16"),
                                   ("fp16", "fp32")])
def test_avg_pool2d_random(t, acc):
    for seed in range(6):
        rng = _rng("AVG", t, acc, seed)
        kernel, stride, pad, (ih, iw) = _pool_case(rng)
        shape = (int(rng.integers(1, 3)), ih, iw, int(rng.integers(1, 4)))
        x = _rand(rng, t, shape)
        iz = int(rng.integers(-128, 128)) if t == "int8" else 0
        oz = int(rng.integers(-128, 128)) if t == "int8" else 0
        attrs = {"kernel": kernel, "stride": stride, "pad": pad, "acc_type": acc}
        inputs = [x, _zp(iz, t), _zp(oz, t)]
        terms = None
        if not t.startswith("int"):
            terms = OPS["AVG_POOL2D"](np.abs(x.astype(np.float32)), _zp(0, "fp32"), _zp(0, "fp32"),
                                      **{**attrs, "acc_type": "fp32"}).astype(np.float64)
        _compare("AVG_POOL2D", inputs, attrs, t, abs_terms=terms, n_terms=kernel[0] * kernel[1] + 1, acc=acc)


def test_avg_pool2d_rounding_hand():
    # count 2: 1.5 -> 2 and -1.5 -> -2: reciprocal_scale has numerator (1 << 30) + 1, so exact ties
    # round away from zero (digest Part B, AVG_POOL2D)
    x = np.array([[[[1], [2]]], [[[-1], [-2]]]], np.int8)  # [2,1,2,1]
    r = OPS["AVG_POOL2D"](x, _zp(0, "int8"), _zp(0, "int8"), kernel=[1, 2], stride=[1, 1], pad=[0, 0, 0, 0])
    assert r.reshape(-1).tolist() == [2, -2]


def test_pool_errors():
    x = np.ones((1, 4, 4, 1), np.int8)
    zp = _zp(0, "int8")
    base = {"kernel": [2, 2], "stride": [1, 1], "pad": [0, 0, 0, 0]}
    _expect_error("AVG_POOL2D", [x, zp, zp], {**base, "pad": [2, 0, 0, 0], "acc_type": "int32"}, "int8",
                  (1, 5, 3, 1))
    _expect_error("MAX_POOL2D", [x], {**base, "stride": [3, 1]}, "int8", (1, 1, 3, 1))
    i16 = np.ones((1, 4, 4, 1), np.int16)
    _expect_error("AVG_POOL2D", [i16, _zp(1, "int16"), _zp(0, "int16")], {**base, "acc_type": "int32"},
                  "int16", (1, 3, 3, 1))
    for bad in ({"kernel": [0, 2]}, {"stride": [1, 0]}, {"pad": [0, 0, -1, 0]}):
        with pytest.raises(TosaError):
            OPS["MAX_POOL2D"](x, **{**base, **bad})


# ------------------------------------------------------------------------------------------------ digest Part G

def test_digest_g5_avg_pool_padding_excluded():
    x = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 2, 1)
    kw = {"kernel": [2, 2], "stride": [1, 1], "pad": [1, 0, 1, 0]}
    assert OPS["AVG_POOL2D"](x, _zp(0, "int8"), _zp(0, "int8"), **kw).reshape(2, 2).tolist() == [[1, 2], [2, 3]]
    f = OPS["AVG_POOL2D"](x.astype(np.float32), _zp(0, "fp32"), _zp(0, "fp32"), **kw)
    assert f.reshape(2, 2).tolist() == [[1, 1.5], [2, 2.5]]


@pytest.mark.parametrize("values,expected", [([3, 0], 2), ([-3, 0], -2), ([1, 0], 1), ([-1, 0], -1),
                                             ([1, 1, 0], 1), ([-1, -1, 0], -1), ([5, 0, 0], 2), ([-5, 0, 0], -2)])
def test_digest_g6_avg_pool_rounding(values, expected):
    x = np.array(values, np.int8).reshape(1, 1, len(values), 1)
    attrs = {"kernel": [1, len(values)], "stride": [1, 1], "pad": [0, 0, 0, 0], "acc_type": "int32"}
    r = _compare("AVG_POOL2D", [x, _zp(0, "int8"), _zp(0, "int8")], attrs, "int8")
    assert r.reshape(-1).tolist() == [expected]


def test_digest_g7_output_size_exactness():
    x = np.ones((1, 5, 1, 1), np.int8)
    w = np.ones((1, 2, 1, 1), np.int8)
    b, zp = np.zeros(1, np.int32), _zp(0, "int8")
    base = {"stride": [2, 1], "dilation": [1, 1], "acc_type": "int32"}
    _expect_error("CONV2D", [x, w, b, zp, zp], {**base, "pad": [0, 0, 0, 0]}, "int32", (1, 2, 1, 1))
    r = _compare("CONV2D", [x, w, b, zp, zp], {**base, "pad": [0, 1, 0, 0]}, "int32")
    assert r.shape == (1, 3, 1, 1)
    x16 = np.ones((1, 2, 2, 1), np.int16)
    with pytest.raises(TosaError):
        OPS["CONV2D"](x16, np.ones((1, 1, 1, 1), np.int8), np.zeros(1, np.int64), _zp(1, "int16"), zp,
                      pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])


def test_digest_g8_conv_zero_points():
    x = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 2, 1)
    w = np.array([2, 1, 1, 2], np.int8).reshape(1, 2, 2, 1)
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}
    r = _compare("CONV2D", [x, w, np.array([10], np.int32), _zp(1, "int8"), _zp(1, "int8")], attrs, "int32")
    assert r.reshape(-1).tolist() == [13]
    x = np.array([5], np.int8).reshape(1, 1, 1, 1)
    w = np.array([1, 1, 1], np.int8).reshape(1, 3, 1, 1)
    attrs = {**attrs, "pad": [1, 1, 0, 0]}
    r = _compare("CONV2D", [x, w, np.array([0], np.int32), _zp(1, "int8"), _zp(0, "int8")], attrs, "int32")
    assert r.reshape(-1).tolist() == [4]


def test_digest_g9_depthwise_channel_order():
    x = np.array([1, 10], np.int8).reshape(1, 1, 1, 2)
    w = np.array([[1, 2], [3, 4]], np.int8).reshape(1, 1, 2, 2)
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "int32"}
    r = _compare("DEPTHWISE_CONV2D", [x, w, np.zeros(1, np.int32), _zp(0, "int8"), _zp(0, "int8")], attrs, "int32")
    assert r.reshape(-1).tolist() == [1, 2, 30, 40]


def test_conv_fp16_bias_added_after_cast():
    """TOSA 1.0 casts the accumulator to out_t before adding the bias (the reference model agrees)."""
    x = np.array([2048.0], np.float16).reshape(1, 1, 1, 1)
    w = np.array([1.0], np.float16).reshape(1, 1, 1, 1)
    bias = np.array([1.0], np.float16)
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "fp32"}
    r = _compare("CONV2D", [x, w, bias, _zp(0, "fp16"), _zp(0, "fp16")], attrs, "fp16")
    assert r.reshape(-1).tolist() == [2048.0]  # 2049 is not an fp16 value: ties to even


# ------------------------------------------------------------------------------------------------ CONV3D, TRANSPOSE_CONV2D

def _float_terms(op, x, w, bias, attrs):
    a = [np.abs(v.astype(np.float64)).astype(np.float32) for v in (x, w, bias)]
    return OPS[op](*a, _zp(0, "fp32"), _zp(0, "fp32"), **{**attrs, "acc_type": "fp32"}).astype(np.float64)


@pytest.mark.parametrize("t,acc", [("int8", "int32"), ("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32")])
def test_conv3d_random(t, acc):
    for seed in range(4):
        rng = _rng("CONV3D", t, acc, seed)
        while True:
            k = [int(v) for v in rng.integers(1, 3, 3)]
            st = [int(v) for v in rng.integers(1, 3, 3)]
            dl = [int(v) for v in rng.integers(1, 3, 3)]
            pad = [int(v) for v in rng.integers(0, 2, 6)]
            sp = [int(v) for v in rng.integers(1, 5, 3)]
            num = [sp[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (k[i] - 1) * dl[i] for i in range(3)]
            if all(v >= 0 and v % s == 0 for v, s in zip(num, st, strict=True)):
                break
        ic, oc = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        x, w = _rand(rng, t, (1, *sp, ic)), _rand(rng, t, (oc, *k, ic))
        out_t = acc if t == "int8" else t
        bias = (to.rand_int(rng, "int32", (oc,), -1000, 1000) if t == "int8" else _rand(rng, out_t, (oc,)))
        iz = int(rng.integers(-128, 128)) if t == "int8" else 0
        wz = int(rng.integers(-128, 128)) if t == "int8" else 0
        attrs = {"pad": pad, "stride": st, "dilation": dl, "acc_type": acc}
        terms = None if t == "int8" else _float_terms("CONV3D", x, w, bias, attrs)
        _compare("CONV3D", [x, w, bias, _zp(iz, t), _zp(wz, t)], attrs, out_t, abs_terms=terms,
                 n_terms=int(np.prod(k)) * ic + 1, acc=acc)


@pytest.mark.parametrize("t,acc", [("int8", "int32"), ("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32")])
def test_transpose_conv2d_random(t, acc):
    for seed in range(5):
        rng = _rng("TCONV", t, acc, seed)
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        st = [int(v) for v in rng.integers(1, 4, 2)]
        out_pad = [int(rng.integers(-kh + 1, 3)), int(rng.integers(-kh + 1, 3)),
                   int(rng.integers(-kw + 1, 3)), int(rng.integers(-kw + 1, 3))]
        ih, iw = (int(v) for v in rng.integers(1, 5, 2))
        if (ih - 1) * st[0] + out_pad[0] + out_pad[1] + kh < 1 or (iw - 1) * st[1] + out_pad[2] + out_pad[3] + kw < 1:
            out_pad = [0, 0, 0, 0]
        ic, oc = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        x, w = _rand(rng, t, (1, ih, iw, ic)), _rand(rng, t, (oc, kh, kw, ic))
        out_t = acc if t == "int8" else t
        bias = (to.rand_int(rng, "int32", (oc,), -1000, 1000) if t == "int8" else _rand(rng, out_t, (oc,)))
        iz = int(rng.integers(-128, 128)) if t == "int8" else 0
        wz = int(rng.integers(-128, 128)) if t == "int8" else 0
        attrs = {"out_pad": out_pad, "stride": st, "acc_type": acc}
        terms = None if t == "int8" else _float_terms("TRANSPOSE_CONV2D", x, w, bias, attrs)
        _compare("TRANSPOSE_CONV2D", [x, w, bias, _zp(iz, t), _zp(wz, t)], attrs, out_t, abs_terms=terms,
                 n_terms=kh * kw * ic + 1, acc=acc)


@pytest.mark.parametrize("weight,stride,out_pad,expected", [
    ([1, 1], 2, [0, 0], [1, 1, 2, 2]), ([1, 1], 1, [0, 0], [1, 3, 2]), ([1, 1], 1, [-1, 0], [3, 2]),
    ([1, 3], 2, [0, 0], [1, 3, 2, 6]),
])
def test_digest_g10_transpose_conv(weight, stride, out_pad, expected):
    x = np.array([1, 2], np.int8).reshape(1, 2, 1, 1)
    w = np.array(weight, np.int8).reshape(1, 2, 1, 1)
    attrs = {"out_pad": [*out_pad, 0, 0], "stride": [stride, 1], "acc_type": "int32"}
    r = _compare("TRANSPOSE_CONV2D", [x, w, np.zeros(1, np.int32), _zp(0, "int8"), _zp(0, "int8")], attrs, "int32")
    assert r.reshape(-1).tolist() == expected


def test_transpose_conv_errors():
    x, w = np.ones((1, 2, 2, 1), np.int8), np.ones((1, 2, 2, 1), np.int8)
    b, zp = np.zeros(1, np.int32), _zp(0, "int8")
    _expect_error("TRANSPOSE_CONV2D", [x, w, b, zp, zp], {"out_pad": [-2, 0, 0, 0], "stride": [1, 1],
                  "acc_type": "int32"}, "int32", (1, 1, 3, 1))
    with pytest.raises(TosaError):
        OPS["TRANSPOSE_CONV2D"](x, w, b, zp, zp, out_pad=[0, 0, 0, 0], stride=[0, 1])
    with pytest.raises(TosaError):
        OPS["CONV3D"](np.ones((1, 3, 3, 3, 1), np.int8), np.ones((1, 2, 2, 2, 1), np.int8), b, zp, zp,
                      pad=[0] * 6, stride=[2, 1, 1], dilation=[1, 1, 1])


def test_conv2d_int16x8_int48_hand():
    """16x8 (int48 accumulator; the reference model does not return int48 outputs): checked by hand."""
    x = np.array([32767, -32768], np.int16).reshape(1, 1, 2, 1)
    w = np.array([127, -128], np.int8).reshape(1, 1, 2, 1)
    r = OPS["CONV2D"](x, w, np.array([5], np.int64), _zp(0, "int16"), _zp(-3, "int8"),
                      pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type="int48")
    assert r.dtype == np.int64 and r.reshape(-1).tolist() == [32767 * 130 + (-32768) * (-125) + 5]
    with pytest.raises(TosaError):  # int48 accumulator only for int16 x int8
        OPS["CONV2D"](x, w, np.array([5], np.int32), _zp(0, "int16"), _zp(0, "int8"),
                      pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type="int32")
