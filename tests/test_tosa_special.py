"""The float32 special functions of compiled programs (skriptnd.tosa.program.special) against math.erf.

ERF's fast form replaces the generic kernel's per-element ``math.erf`` (float64, rounded once); TOSA
bounds ERF's fp32 error rather than fixing its bits, so the check is a bound in ulps of the exact
value (computed in float64 by ``math.erf``), with NaN, infinities, signed zeros and subnormals, and
the same bits in one piece, in blocks and split over threads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skriptnd import parallel
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.program import fast as F
from skriptnd.tosa.program import special
from skriptnd.tosa.program.fast import specialise

F32 = np.float32
#: measured worst case 3.3 ulp just above |x| = 0.5, where 1 - erfc(|x|) cancels a little
ERF_ULPS = 4


def _exact_erf(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(v)) for v in x.reshape(-1)], np.float64).reshape(x.shape)


def _assert_erf(got: np.ndarray, x: np.ndarray) -> None:
    exact = _exact_erf(x)
    assert got.dtype == F32 and got.shape == x.shape
    nan = np.isnan(x)
    assert np.array_equal(np.isnan(got), nan)
    exact32 = exact.astype(F32)
    # within ERF_ULPS of the exact value; an absolute float32 ulp of the smallest normal below it
    spacing = np.maximum(np.spacing(np.abs(exact32)), np.finfo(F32).smallest_subnormal).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err[~nan] <= ERF_ULPS * spacing[~nan] + 1e-44), float(np.max(err[~nan] / spacing[~nan]))
    # the sign is x's (erf is odd; erf(-0) = -0), infinities give +-1
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(x[~nan]))
    assert np.all(got[np.isposinf(x)] == 1) and np.all(got[np.isneginf(x)] == -1)


floats = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(F32, hnp.array_shapes(min_dims=1, max_dims=4, max_side=9), elements=floats))
def test_erf_within_its_ulp_bound_on_any_floats(x: np.ndarray) -> None:
    out = np.empty_like(x)
    special.erf_into(x, out)
    _assert_erf(out, x)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31), st.floats(0.01, 8.0), st.integers(1, 5000))
def test_erf_of_normal_values_and_across_blocks(seed: int, scale: float, size: int) -> None:
    x = (np.random.default_rng(seed).standard_normal(size) * scale).astype(F32)
    one, blocked = np.empty_like(x), np.empty_like(x)
    special.erf_into(x, one)
    saved = special.BLOCK
    try:
        special.BLOCK = 7  # many blocks, a short last one
        special.erf_into(x, blocked)
    finally:
        special.BLOCK = saved
    np.testing.assert_array_equal(blocked, one)
    _assert_erf(one, x)


def test_erf_on_a_dense_grid_and_edges() -> None:
    x = np.concatenate([np.linspace(-7, 7, 70001), [0.0, -0.0, 0.5, -0.5, np.nextafter(0.5, 0), 1e-30, -1e-40,
                                                    3.9e-38, np.inf, -np.inf, np.nan, 3e38, -3e38]]).astype(F32)
    out = np.empty_like(x)
    special.erf_into(x, out)
    _assert_erf(out, x)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_program_form_of_erf_splits_over_threads_with_the_same_bits(monkeypatch: pytest.MonkeyPatch,
                                                                        threads: int) -> None:
    """specialise("ERF") is the fast form, in flat chunks over threads, and within the bound of the
    generic kernel's value too (which is math.erf rounded once)."""
    monkeypatch.setattr(F, "_TRANSCENDENTAL_SPLIT_BYTES", 0)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 9, 7, 5)) * 2).astype(F32)
    x.flat[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    fn = specialise("ERF", [None], {})
    assert fn is not None
    with parallel.using(threads):
        got = np.array(fn(x), copy=True)
    with parallel.using(1):
        np.testing.assert_array_equal(got, fn(x))
    _assert_erf(got, x)
    generic = OPS["ERF"](x)
    finite = np.isfinite(generic)
    assert np.all(np.abs(got[finite] - generic[finite]) <= (ERF_ULPS + 1) * np.spacing(np.abs(generic[finite])))
    assert not np.shares_memory(got, x)
    # a non-contiguous operand (a transposed view) gives the same values
    xt = np.transpose(x, (0, 3, 1, 2))
    np.testing.assert_array_equal(fn(xt), np.transpose(got, (0, 3, 1, 2)))
