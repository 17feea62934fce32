"""Winograd F(2x2,3x3) / F(4x4,3x3) convolution (skriptnd.tosa.program.winograd) and its use by the fast CONV2D.

Tolerance: against the generic kernel OPS["CONV2D"] (float64 accumulation, rounded once), element-wise

    |y - expected| <= k * eps32 * max over the output's Winograd tile of (|x| conv |w| + |b|)

(a tile's outputs share its transformed inputs, so each carries error from the whole tile; the
element's own bound alone was beaten at a padded corner: 34 eps32, m=2, ic=1, seed 9), with k = 32 for F(2,3) and k = 512 for F(4,3). The transforms add and scale terms before the
products, so the rounding error grows with the transforms' entries: over 300 random shapes
(channels < 40, pads 0-2, batch 1-2) the largest error measured was 9 eps32 of that bound for
F(2,3) (im2col: 1 eps32) and 170 eps32 for F(4,3) with the points 0, +-1, 1/2, -2 (the points
0, +-1, +-2 give about twice that); relative to the largest output magnitude, 3.6e-7 for F(2,3)
and 2.5e-6 for F(4,3) (benchmarks/winograd.py, ResNet-18 shapes: 3e-7, 2e-6; im2col 2e-7 to 5e-7).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from skriptnd import parallel
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program import winograd as W
from skriptnd.tosa.program.fast import specialise

EPS = float(np.finfo(np.float32).eps)
TOLERANCE = {2: 32 * EPS, 4: 512 * EPS}


def _bound(x: np.ndarray, w: np.ndarray, b: np.ndarray, pads: list[int]) -> np.ndarray:
    """|x| conv |w| + |b| in float64 (the scale of the rounding error of any summation order)."""
    xp = np.pad(np.abs(x.astype(np.float64)), [(0, 0), (pads[0], pads[1]), (pads[2], pads[3]), (0, 0)])
    oh, ow = xp.shape[1] - 2, xp.shape[2] - 2
    out = np.zeros((x.shape[0], oh, ow, w.shape[0])) + np.abs(b.astype(np.float64))
    for ky in range(3):
        for kx in range(3):
            out += xp[:, ky:ky + oh, kx:kx + ow] @ np.abs(w[:, ky, kx].astype(np.float64)).T
    return out


def _tile_bound(bound: np.ndarray, m: int) -> np.ndarray:
    """The bound's largest value over the m x m output tile holding each element: one Winograd tile's
    outputs share its transformed input tile, so each carries rounding error from all of them (an
    element whose own window is small, e.g. at a padded corner, may carry its neighbours' error)."""
    n, oh, ow, oc = bound.shape
    th, tw = -(-oh // m), -(-ow // m)
    padded = np.zeros((n, th * m, tw * m, oc))
    padded[:, :oh, :ow] = bound
    tiles = padded.reshape(n, th, m, tw, m, oc).max(axis=(2, 4))
    return np.repeat(np.repeat(tiles, m, axis=1), m, axis=2)[:, :oh, :ow]


@pytest.mark.parametrize(("m", "points"), [(2, None), (4, None), (4, (0, 1, -1, 2, -2)), (2, (0, 1, 2)),
                                           (4, (0, 1, -1, Fraction(1, 2), Fraction(-1, 2)))])
def test_transform_matrices_compute_the_correlation_exactly(m: int, points: tuple | None) -> None:
    at, g, bt = W.matrices(m, None if points is None else [Fraction(p) for p in points])
    a = m + 2
    rng = np.random.default_rng(m)
    for _ in range(5):
        d = [Fraction(int(v)) for v in rng.integers(-9, 10, a)]
        k = [Fraction(int(v)) for v in rng.integers(-9, 10, 3)]
        gk = [sum(g[i][j] * k[j] for j in range(3)) for i in range(a)]
        bd = [sum(bt[i][j] * d[j] for j in range(a)) for i in range(a)]
        y = [sum(at[i][j] * gk[j] * bd[j] for j in range(a)) for i in range(m)]
        assert y == [sum(d[i + j] * k[j] for j in range(3)) for i in range(m)]
    assert all(x.denominator == 1 for row in bt for x in row)  # B^T scaled to integers


def test_f23_matrices_are_the_documented_ones() -> None:
    at, g, bt = W.matrices(2)
    assert bt == [[1, 0, -1, 0], [0, 1, 1, 0], [0, 1, -1, 0], [0, 1, 0, -1]]
    assert at == [[1, 1, 1, 0], [0, 1, -1, 1]]
    assert g == [[1, 0, 0], [Fraction(1, 2)] * 3, [Fraction(-1, 2), Fraction(1, 2), Fraction(-1, 2)], [0, 0, -1]]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([2, 4]), st.integers(1, 2), st.integers(1, 13), st.integers(1, 13), st.integers(1, 9),
       st.integers(1, 9), st.lists(st.integers(0, 2), min_size=4, max_size=4), st.booleans(),
       st.integers(1, 1 << 16), st.integers(0, 2**31))
@example(2, 2, 9, 12, 1, 3, [1, 0, 2, 0], False, 1, 9)  # 34 eps32 of the element's own bound, 3.8 of the tile's
def test_winograd_matches_the_generic_kernel(m: int, n: int, ih: int, iw: int, ic: int, oc: int, pads: list[int],
                                             clamp: bool, band_bytes: int, seed: int) -> None:
    if ih + pads[0] + pads[1] < 3 or iw + pads[2] + pads[3] < 3:
        return
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((n, ih, iw, ic))).astype(np.float32)
    w = rng.standard_normal((oc, 3, 3, ic)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    expected = OPS["CONV2D"](x, w, b, pad=pads, stride=[1, 1], dilation=[1, 1])
    bound = _tile_bound(_bound(x, w, b, pads), m)
    if clamp:
        expected = np.clip(expected, -0.5, 1.0)
    conv = W.Winograd(w, b, pads, m=m, clamp=(-0.5, 1.0) if clamp else None, band_bytes=band_bytes, scratch={})
    first = conv(x)
    assert first.shape == expected.shape and first.dtype == np.float32
    assert np.all(np.abs(first - expected) <= TOLERANCE[m] * bound + 1e-30)
    second = conv(x)  # buffers reused; the first result is a separate array
    np.testing.assert_array_equal(first, second)
    assert not np.shares_memory(first, second)


def test_convolutions_sharing_scratch_buffers() -> None:
    """Two convolutions of different shapes alternating on one scratch dict (as in a TOSA program)."""
    rng = np.random.default_rng(0)
    scratch: dict[str, np.ndarray] = {}
    cases = []
    for size, ic, oc in ((6, 3, 5), (11, 4, 2)):
        x = rng.standard_normal((1, size, size, ic)).astype(np.float32)
        w = rng.standard_normal((oc, 3, 3, ic)).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        expected = OPS["CONV2D"](x, w, b, pad=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1])
        cases.append((W.Winograd(w, b, [1, 1, 1, 1], m=2, scratch=scratch), x, expected,
                      TOLERANCE[2] * _bound(x, w, b, [1, 1, 1, 1])))
    for _ in range(2):
        for conv, x, expected, tol in cases:
            assert np.all(np.abs(conv(x) - expected) <= tol)


def test_fast_conv2d_uses_winograd_where_measured_faster() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 14, 14, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 3, 3, 64)) / 24).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    expected = np.clip(OPS["CONV2D"](x, w, b, **attrs), 0.0, 6.0)
    tol = TOLERANCE[2] * _bound(x, w, b, [1, 1, 1, 1])
    with threadpool_limits(1), parallel.using(1):
        fast = specialise("CONV2D", [None, w, b], attrs, (0.0, 6.0))
        assert np.all(np.abs(fast(x, w, b) - expected) <= tol)
        assert fast.winograd is not None  # 14x14x64 -> 64: F(2,3) with one thread
    strided = specialise("CONV2D", [None, w, b], {**attrs, "stride": [2, 2]}, None)
    strided(x, w, b)
    assert strided.winograd is None
    assert W.preferred(64, 64, 1, 56, 56) == (True, False)
    assert W.preferred(256, 256, 1, 14, 14) == (True, True)
    assert W.preferred(512, 512, 1, 7, 7) == (False, False)
    assert W.preferred(16, 16, 1, 56, 56) == (False, False)


def test_non_finite_or_huge_inputs_take_the_direct_convolution() -> None:
    """A NaN or infinity would spread over its Winograd tile: the fast CONV2D then runs im2col."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 14, 14, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 3, 3, 64)) / 24).astype(np.float32)
    b = np.zeros(64, np.float32)
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
    with threadpool_limits(1), parallel.using(1):
        fast = specialise("CONV2D", [None, w, b], attrs, None)
        fast(x, w, b)
        assert fast.winograd is not None and fast.winograd.accepts(x)
        for bad in (np.nan, np.inf, 3e38):
            y = x.copy()
            y[0, 5, 6, 7] = bad
            assert not fast.winograd.accepts(y)
            expected = OPS["CONV2D"](y, w, b, **attrs)
            got = fast(y, w, b)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
            np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
