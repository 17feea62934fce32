"""RESIZE with ``version="0.30"`` (output_size / stride / offset / border / shift attributes).

The reference model implements TOSA 1.0 only (rational ``scale`` operands), so the expectations are the
hand-derived vectors of ``shared/notes/tosa-digest.md`` (Part G #18, re-derived from the 0.30
pseudocode) and a scalar-loop transcription of the 0.30 pseudocode below, on random valid attributes.
Float cases use dyadic strides/offsets and quarter-integer samples, so every intermediate is exact and
only the final rounding to the output type matters (results must be bit-exact).
"""

from __future__ import annotations

import itertools
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tosa_oracle as to  # noqa: E402

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable, bf16

RESIZE = OPS["RESIZE"]


def _rng(*key: object) -> np.random.Generator:
    return to.seeded_rng("tosa-resize-030", *key)


def _run(x, *, stride, offset, border, shift, mode, output_size=None):
    return RESIZE(x, stride=stride, offset=offset, border=border, shift=shift, mode=mode, output_size=output_size,
                  version="0.30")


def _idiv(a: int, b: int) -> int:
    """0.30 idiv: C division, truncating toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def pseudocode_resize(x, stride, offset, border, shift, mode):
    """Direct transcription of TOSA 0.30 §2.12.1 (one output element at a time). Returns
    (output values as Python numbers, [OH, OW]) or None when a REQUIRE fails."""
    n_, ih, iw, c_ = x.shape
    is_fp = x.dtype.kind == "f" or type(x).__name__ == "BF16Array"
    if is_fp:
        oh = math.trunc((ih - 1 - float(offset[0])) / float(stride[0])) + 1 + border[0]
        ow = math.trunc((iw - 1 - float(offset[1])) / float(stride[1])) + 1 + border[1]
    else:
        oh = _idiv((ih - 1) * (1 << shift) - offset[0], stride[0]) + 1 + border[0]
        ow = _idiv((iw - 1) * (1 << shift) - offset[1], stride[1]) + 1 + border[1]
    if min(oh, ow) < 1:
        return np.zeros((0,)), [oh, ow]
    out = np.zeros((n_, oh, ow, c_), object)
    f32 = np.float32
    for n, oy, ox, c in itertools.product(range(n_), range(oh), range(ow), range(c_)):
        unit = 1.0 if is_fp else (1 << shift)
        if is_fp:
            y = f32(f32(oy) * f32(stride[0])) + f32(offset[0])
            xx = f32(f32(ox) * f32(stride[1])) + f32(offset[1])
            iy = math.floor(y)
            dy = float(y) - iy
            ix = math.floor(xx)
            dx = float(xx) - ix
        else:
            y = oy * stride[0] + offset[0]
            xx = ox * stride[1] + offset[1]
            iy = y >> shift
            dy = y - (iy << shift)
            ix = xx >> shift
            dx = xx - (ix << shift)
        iy0, iy1 = max(iy, 0), min(iy + 1, ih - 1)
        ix0, ix1 = max(ix, 0), min(ix + 1, iw - 1)
        if not (ix0 <= ix1 and iy0 <= iy1):
            return None
        v = x if not is_fp else np.asarray(x, np.float64)
        if mode == "BILINEAR":
            v00, v01 = v[n, iy0, ix0, c].item(), v[n, iy0, ix1, c].item()
            v10, v11 = v[n, iy1, ix0, c].item(), v[n, iy1, ix1, c].item()
            acc = v00 * (unit - dy) * (unit - dx) + v01 * (unit - dy) * dx
            acc = acc + v10 * dy * (unit - dx) + v11 * dy * dx
            out[n, oy, ox, c] = acc
        else:
            iy = iy1 if dy >= unit / 2 else iy0
            ix = ix1 if dx >= unit / 2 else ix0
            out[n, oy, ox, c] = v[n, iy, ix, c].item()
    return out, [oh, ow]


# ----------------------------------------------------------------------------------- hand-derived cases


def test_digest_g18_integer():
    x = np.array([10, 20], np.int8).reshape(1, 1, 2, 1)
    kw = dict(stride=[2, 1], offset=[0, 0], border=[0, 0], shift=1)
    b = _run(x, mode="BILINEAR", output_size=[1, 3], **kw)
    assert b.dtype == np.int32 and b.reshape(-1).tolist() == [40, 60, 80]  # scale 4 = 2^(2*shift)
    nn = _run(x, mode="NEAREST", **kw)
    assert nn.dtype == np.int8 and nn.reshape(-1).tolist() == [10, 20, 20]  # dx == unit/2 picks the right sample


def test_digest_g18_half_pixel_upscale():
    """2x upscale with shift 2, stride 2, offset -1 (the corrected recipe), border 1: OW = 6."""
    x = np.array([1, 2, 3], np.int8).reshape(1, 1, 3, 1)
    out = _run(x, stride=[4, 2], offset=[0, -1], border=[0, 1], shift=2, mode="BILINEAR")
    assert out.shape == (1, 1, 6, 1)
    assert out.reshape(-1).tolist() == [16, 20, 28, 36, 44, 48]  # /16 = 1, 1.25, 1.75, 2.25, 2.75, 3


def test_int16_bilinear_is_int48():
    x = np.array([30000, -30000], np.int16).reshape(1, 1, 2, 1)
    out = _run(x, stride=[8, 1], offset=[0, 0], border=[0, 0], shift=3, mode="BILINEAR")
    # unit 8: x positions 0..8/8; acc = 8 * (v0 * (8 - dx) + v1 * dx)
    assert out.dtype == np.int64 and out.shape == (1, 1, 9, 1)
    assert out.reshape(-1).tolist() == [8 * (30000 * (8 - d) - 30000 * d) for d in range(9)]


def test_float_hand_values():
    x = np.array([1, 2, 3], np.float32).reshape(1, 1, 3, 1)
    kw = dict(stride=[1.0, 0.5], offset=[0.0, 0.0], border=[0, 0], shift=0)
    assert _run(x, mode="BILINEAR", **kw).reshape(-1).tolist() == [1, 1.5, 2, 2.5, 3]
    assert _run(x, mode="NEAREST", **kw).reshape(-1).tolist() == [1, 2, 2, 3, 3]
    # offset -0.25: x = -0.25 → floor -1, dx 0.75, both samples clamp to column 0
    out = _run(x, stride=[1.0, 0.5], offset=[0.0, -0.25], border=[0, 0], shift=0, mode="BILINEAR")
    assert out.reshape(-1).tolist() == [1, 1.25, 1.75, 2.25, 2.75]


def test_bf16_and_fp16_keep_their_type():
    x16 = np.array([1, 2], np.float16).reshape(1, 1, 2, 1)
    out = _run(x16, stride=[1.0, 0.25], offset=[0.0, 0.0], border=[0, 0], shift=0, mode="BILINEAR")
    assert out.dtype == np.float16 and out.reshape(-1).tolist() == [1, 1.25, 1.5, 1.75, 2]
    xb = bf16(np.array([1, 3], np.float32).reshape(1, 1, 2, 1))
    out = _run(xb, stride=[1.0, 0.5], offset=[0.0, 0.0], border=[0, 0], shift=0, mode="NEAREST")
    assert type(out).__name__ == "BF16Array" and np.asarray(out).reshape(-1).tolist() == [1, 3, 3]


@pytest.mark.parametrize("kwargs, what", [
    (dict(shift=0), "shift < 1"),
    (dict(shift=12), "shift < 1"),
    (dict(stride=[0, 2]), "stride_x <= 0"),
    (dict(stride=[2, 16 << 2]), "stride_x >= "),
    (dict(offset=[16 << 2, 0]), "offset_y <= "),
    (dict(offset=[0, -16 << 2]), "offset_x <= "),
    (dict(output_size=[1, 4]), "output_size"),
])
def test_integer_error_if(kwargs, what):
    x = np.zeros((1, 1, 3, 1), np.int8)
    kw = dict(stride=[4, 2], offset=[0, -1], border=[0, 1], shift=2, mode="BILINEAR")
    kw.update(kwargs)
    with pytest.raises(TosaError, match=what):
        _run(x, **kw)


def test_float_error_if_and_version_arguments():
    x = np.zeros((1, 2, 3, 1), np.float32)
    kw = dict(stride=[1.0, 1.0], offset=[0.0, 0.0], border=[0, 0], mode="BILINEAR")
    with pytest.raises(TosaError, match="shift != 0"):
        _run(x, shift=1, **kw)
    with pytest.raises(TosaError, match="stride_x > IW"):
        _run(x, shift=0, **{**kw, "stride": [1.0, 4.0]})
    with pytest.raises(TosaError, match="scale"):
        RESIZE(x, [1, 1, 1, 1], [0, 0], [0, 0], mode="BILINEAR", version="0.30")
    with pytest.raises(TosaError, match="0.30"):
        RESIZE(x, [1, 1, 1, 1], [0, 0], [0, 0], mode="BILINEAR", stride=[1, 1])
    with pytest.raises(TosaError, match="mode"):
        _run(x, shift=0, **{**kw, "mode": "BICUBIC"})


def test_sample_outside_the_input_is_unpredictable():
    """IH = 2, shift 1, stride 2 (1.0), offset 0, border 1: OH = 1 + 1 + 1 = 3 and oy = 2 gives y = 4,
    iy = 2, iy0 = 2 > iy1 = min(3, IH - 1) = 1. With offset -1 (-0.5) the last row samples iy = 1: valid."""
    x = np.arange(4, dtype=np.int8).reshape(1, 2, 2, 1)
    assert pseudocode_resize(x, [2, 2], [0, 0], [1, 0], 1, "NEAREST") is None
    with pytest.raises(TosaUnpredictable):
        _run(x, stride=[2, 2], offset=[0, 0], border=[1, 0], shift=1, mode="NEAREST")
    out = _run(x, stride=[2, 2], offset=[-1, 0], border=[1, 0], shift=1, mode="NEAREST")
    # y = -1, 1, 3 → (iy, dy) = (-1, 1), (0, 1), (1, 1): dy >= unit/2 picks iy1 = 0, 1, 1
    assert out[0, :, :, 0].tolist() == [[0, 1], [2, 3], [2, 3]]


# --------------------------------------------------------------------------------- random vs pseudocode


def _random_int_params(rng, ih, iw):
    shift = int(rng.integers(1, 12))
    unit = 1 << shift
    stride, offset, border = [], [], []
    for _ in (ih, iw):
        stride.append(int(rng.integers(max(1, unit // 4), 3 * unit + 1)))
        offset.append(int(rng.integers(-unit + 1, unit)))
        border.append(int(rng.integers(-1, 2)))
    return stride, offset, border, shift


@pytest.mark.parametrize("t", ["int8", "int16"])
@pytest.mark.parametrize("mode", ["NEAREST", "BILINEAR"])
@pytest.mark.parametrize("case", range(8))
def test_random_integer_against_pseudocode(t, mode, case):
    rng = _rng("int", t, mode, case)
    for _ in range(100):
        n, ih, iw, c = (int(v) for v in rng.integers(1, 5, size=4))
        stride, offset, border, shift = _random_int_params(rng, ih, iw)
        x = to.rand_int(rng, t, (n, ih, iw, c))
        expected = pseudocode_resize(x, stride, offset, border, shift, mode)
        if expected is None:
            with pytest.raises(TosaUnpredictable):
                _run(x, stride=stride, offset=offset, border=border, shift=shift, mode=mode)
            continue
        values, size = expected
        if min(size) < 1:
            with pytest.raises(TosaError):
                _run(x, stride=stride, offset=offset, border=border, shift=shift, mode=mode)
            continue
        out = _run(x, stride=stride, offset=offset, border=border, shift=shift, mode=mode, output_size=size)
        want_dtype = {("int8", "BILINEAR"): np.int32, ("int16", "BILINEAR"): np.int64}.get((t, mode), x.dtype)
        assert out.dtype == want_dtype and out.shape == values.shape
        assert out.astype(object).tolist() == values.tolist(), (stride, offset, border, shift)
        return
    pytest.fail("no valid parameters drawn")


@pytest.mark.parametrize("t", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("mode", ["NEAREST", "BILINEAR"])
@pytest.mark.parametrize("case", range(6))
def test_random_float_against_pseudocode(t, mode, case):
    rng = _rng("float", t, mode, case)
    for _ in range(100):
        n, ih, iw, c = (int(v) for v in rng.integers(1, 5, size=4))
        stride = [float(rng.integers(1, 8 * s + 1)) / 8 for s in (ih, iw)]
        offset = [float(rng.integers(-8, 9)) / 8 for _ in range(2)]
        border = [int(v) for v in rng.integers(-1, 2, size=2)]
        x = to.make_float(rng.integers(-64, 65, size=(n, ih, iw, c)) / 4, t)
        expected = pseudocode_resize(x, stride, offset, border, 0, mode)
        if expected is None or min(expected[1]) < 1:
            with pytest.raises(TosaUnpredictable if expected is None else TosaError):
                _run(x, stride=stride, offset=offset, border=border, shift=0, mode=mode)
            continue
        values, size = expected
        out = _run(x, stride=stride, offset=offset, border=border, shift=0, mode=mode, output_size=size)
        want = to.make_float(values.astype(np.float64), t)
        assert to.same_bits(np.asarray(out), np.asarray(want), t), (stride, offset, border)
        return
    pytest.fail("no valid parameters drawn")
