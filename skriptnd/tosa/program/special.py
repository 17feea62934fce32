"""Float32 forms of special functions for compiled programs (skriptnd.tosa.program.fast), vectorised numpy.

The generic TOSA kernel of ERF calls ``math.erf`` once per element through a Python object array (~0.3 us
an element: ConvNeXt-T's GELUs took 82 % of its run, `sknd run --profile`). Here ERF is a handful of
numpy passes over cache-sized blocks of the tensor:

* ``|x| < 0.5``: the Taylor series ``2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))`` to n = 6 (the next
  term is below 1e-9 there);
* elsewhere ``1 - erfc(|x|)`` with the sign of ``x``, ``erfc(z) = t exp(-z^2 + P(t))``, ``t = 1 / (1 + z/2)``:
  the Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7), the one skriptnd.lower.ops.erf and
  the native GELU kernel (skriptnd.execute.pointwise) use, here in float32.

The result is within a few float32 ulps of the exact error function (tests/test_tosa_special.py checks
it against ``math.erf`` and the generic kernel); TOSA specifies ERF's fp32 accuracy as an error bound,
not a bit pattern. NaN stays NaN, +-inf gives +-1.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32

#: elements per block: a few float32 temporaries of this size stay in L2 (and the Python overhead of
#: ~30 numpy calls per block stays small against the block's work)
BLOCK = 1 << 15

_SERIES = [F32(2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))) for n in range(7)]
#: P(t)'s coefficients, highest first (Numerical Recipes' erfc fit; skriptnd.lower.ops.erf)
_ERFC_FIT = [F32(c) for c in (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
                              0.09678418, 0.37409196, 1.00002368, -1.26551223)]


def erf_into(x: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = erf(x)`` for float32 ``x`` and ``out`` of one shape, C-contiguous (flat blocks)."""
    src, dst = x.reshape(-1), out.reshape(-1)
    size = src.size
    if size == 0:
        return
    k = min(BLOCK, size)
    z, t, p = np.empty(k, F32), np.empty(k, F32), np.empty(k, F32)
    mask, near = np.empty(k, np.int32), np.empty(k, np.bool_)
    with np.errstate(all="ignore"):  # inf - inf in the exponent of erfc(inf) gives exp(-inf) = 0, as wanted
        for a in range(0, size, k):
            b = min(size, a + k)
            _erf_block(src[a:b], dst[a:b], z[:b - a], t[:b - a], p[:b - a], mask[:b - a], near[:b - a])


def _erf_block(x: np.ndarray, out: np.ndarray, z: np.ndarray, t: np.ndarray, p: np.ndarray,
               mask: np.ndarray, near: np.ndarray) -> None:
    np.abs(x, out=z)
    # far from zero: 1 - t exp(-z^2 + P(t)), into ``out``
    np.multiply(z, F32(0.5), out=t)
    t += F32(1)
    np.divide(F32(1), t, out=t)
    np.multiply(t, _ERFC_FIT[0], out=p)
    for c in _ERFC_FIT[1:-1]:
        p += c
        p *= t
    p += _ERFC_FIT[-1]
    np.multiply(z, z, out=out)
    np.subtract(p, out, out=p)
    np.exp(p, out=p)
    p *= t
    np.subtract(F32(1), p, out=out)
    # near zero: z * S(z^2), into ``p`` (z^2 into ``t``)
    np.multiply(z, z, out=t)
    np.multiply(t, _SERIES[-1], out=p)
    for c in reversed(_SERIES[1:-1]):
        p += c
        p *= t
    p += _SERIES[0]
    p *= z
    # out = near where z < 0.5 (NaN: not), as bit masks (np.copyto(where=) is ~4x slower)
    np.less(z, F32(0.5), out=near)
    np.negative(near.view(np.int8), out=mask, casting="unsafe")  # -1: all bits set, or 0
    bits, nbits = out.view(np.int32), p.view(np.int32)
    nbits &= mask
    np.invert(mask, out=mask)
    bits &= mask
    bits |= nbits
    # the sign of x (out >= 0 here)
    np.bitwise_and(x.view(np.int32), np.int32(-2 ** 31), out=mask)
    bits |= mask
