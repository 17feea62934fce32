"""Winograd convolution F(m x m, 3 x 3) for fp32 CONV2D (NHWC x OHWI, stride 1, dilation 1).

A 3x3 stride-1 convolution computes each m x m output tile from an a x a input tile (a = m + 2) as

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A

(``(.)``: element-wise product over the a x a transform domain), so that over all tiles and channels
the a*a element-wise products become a*a independent GEMMs ``[P, IC] @ [IC, OC]`` (P tiles) with
a*a / (9 m*m) of the multiplications of the direct (im2col) form: 4/9 for F(2,3), 1/4 for F(4,3).

Transform matrices (Cook-Toom). Choose a-1 distinct finite points p_j and the point at infinity. The
linear convolution s = g * h of a 3-tap g and an m-tap h (degree a-1) is
``s = V^-1 [(E_3 g) (.) (E_m h)]`` where ``E_k`` evaluates a polynomial with k coefficients at the
points (row j = [1, p_j, ..., p_j^(k-1)], the infinite point's row = [0, ..., 0, 1]: the leading
coefficient) and ``V = E_a``. Correlation is the transpose of convolution (sum_n d_n s_n =
sum_i h_i y_i with y_i = sum_k d_(i+k) g_k), hence

    y = E_m^T [ (V^-T d) (.) (E_3 g) ]:   A^T = E_m^T,  B^T = V^-T,  G = E_3,

and a row j of B^T may be scaled by c_j if row j of G is scaled by 1/c_j: :func:`matrices` scales
each B^T row to primitive integers with a positive first entry (computed exactly in
:class:`fractions.Fraction`). F(2,3), points 0, 1, -1 (:data:`POINTS`)::

    B^T = [1 0 -1  0]    G = [ 1    0    0  ]    A^T = [1 1  1 0]
          [0 1  1  0]        [ 1/2  1/2  1/2]          [0 1 -1 1]
          [0 1 -1  0]        [-1/2  1/2 -1/2]
          [0 1  0 -1]        [ 0    0   -1  ]

F(4,3), points 0, 1, -1, 1/2, -2::

    B^T = [2 -3 -4  3  2 0]    G = [ 1/2    0     0   ]    A^T = [1  1  1  1    1 0]
          [0  2 -1 -5 -2 0]        [-1/6  -1/6  -1/6  ]          [0  1 -1  1/2 -2 0]
          [0  2 -5  1  2 0]        [-1/6   1/6  -1/6  ]          [0  1  1  1/4  4 0]
          [0  2  1 -2 -1 0]        [16/15  8/15  4/15 ]          [0  1 -1  1/8 -8 1]
          [0  1 -2 -1  2 0]        [ 1/30 -1/15  2/15 ]
          [0  2 -3 -4  3 2]        [ 0     0     1/2  ]

The classic points 0, 1, -1, 2, -2 (B^T rows [4 0 -5 0 1 0], [0 4 4 -1 -1 0], ...: fewer ufunc
calls) round about twice as badly (tests/test_winograd.py states the measured errors: F(2,3)
within 9 eps32 of |x| conv |w|, F(4,3) within 170 eps32, im2col 1 eps32).

Execution (:class:`Winograd`): the input is copied into a zero-padded buffer whose size is a
whole number of tiles; the input transform runs separably on the whole image — B^T over the rows
(each of the a outputs is a signed sum of row slices ``padded[:, j::m]``), then over the columns
(slices ``[..., k::m, :]``) — writing a ``[a*a, P, IC]`` buffer; one batched ``np.matmul`` with the
plan-time weights ``[a*a, IC, OC]``; the output transform separably again (A^T over the transform
columns, then over the rows, the latter writing the interleaved m x m output tiles); bias; optional
clamp. Each 1-D transform is compiled once into a list of numpy ufunc calls with ``out=`` on
preallocated buffers (terms grouped by coefficient magnitude; two rows u+v / u-v share their
even and odd parts, as the rows of the points +-p do). The work runs in bands of tile rows (each
band's transform-domain data fits in cache) when the transformed filter is small enough to be
read once per band. Buffers are kept per input shape, shareable between convolutions (``scratch``).
On skriptnd.parallel's threads (from :data:`PARALLEL_TILES` tiles) the tile rows split into shares,
each with its own transform buffers: input transforms in parallel, then one GEMM split over the a*a
products (each thread reads its half of the transformed filter once), then output transforms,
bias and clamp in parallel (no banding: fewer, larger numpy calls pass the GIL less often).

Measured (benchmarks/winograd.py, ResNet-18's 3x3 stride-1 layers, batch 1, 2-CPU Xeon, best of
N, interleaved): with one thread F(2,3) beats im2col by 10-30% at 56x56x64, 28x28x128 and
14x14x256; at 7x7x512 (16 tiles) it is faster alone but slower inside the network, where its 1.8x
larger filter (16.8 MB) comes from memory every run. With two threads im2col's GEMM speeds up while
the transforms stay single-threaded numpy, and F(2,3) wins only at 14x14x256 (the transforms' share
falls as 1/channels). Running the two halves of the tile rows in two Python threads with one-thread
GEMMs was slower still (numpy releases the GIL, but each strided transform pass took 2-3x longer
while the other thread ran). F(4,3) (1/4 of the products) beat F(2,3) only at 28x28x128 with one
thread (by ~8%): elsewhere its transforms cost more numpy passes than the GEMM time they save, and
its filter is 36/9 = 4x larger; it also rounds ~7x worse. End to end (ResNet-18, 224x224) the
choice of :func:`preferred` saves 3-5% with one thread and nothing measurable with two: numpy
Winograd is no way to the issue's target. :func:`preferred` encodes this for skriptnd.tosa.program.fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import gcd, lcm
from typing import Any, Protocol

import numpy as np

from skriptnd import parallel


class InPlaceClamp(Protocol):
    """A clamp that applies itself to an output block in place (skriptnd.tosa.program.fast.Clamp, which imports
    this module: the protocol keeps the dependency one way)."""

    def apply(self, y: np.ndarray) -> object: ...

F32 = np.float32

#: Cook-Toom finite points per output tile size m (plus the point at infinity)
POINTS: dict[int, tuple[Fraction, ...]] = {
    2: (Fraction(0), Fraction(1), Fraction(-1)),
    4: (Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-2)),
}


def _inverse(mat: list[list[Fraction]]) -> list[list[Fraction]]:
    n = len(mat)
    aug = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(mat)]
    for c in range(n):
        p = next(r for r in range(c, n) if aug[r][c] != 0)
        aug[c], aug[p] = aug[p], aug[c]
        pivot = aug[c][c]
        aug[c] = [v / pivot for v in aug[c]]
        for r in range(n):
            if r != c and aug[r][c] != 0:
                f = aug[r][c]
                aug[r] = [v - f * w for v, w in zip(aug[r], aug[c], strict=True)]
    return [row[n:] for row in aug]


def matrices(m: int, points: Sequence[Fraction] | None = None, r: int = 3
             ) -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
    """Exact (A^T [m, a], G [a, r], B^T [a, a]) of F(m, r) for ``points`` (a - 1 finite points)."""
    pts = list(POINTS[m] if points is None else points)
    a = m + r - 1
    if len(pts) != a - 1 or len(set(pts)) != a - 1:
        raise ValueError(f"F({m},{r}) needs {a - 1} distinct finite points")

    def evaluation(k: int) -> list[list[Fraction]]:
        rows = [[p ** i for i in range(k)] for p in pts]
        return rows + [[Fraction(int(i == k - 1)) for i in range(k)]]

    e_m, g, v = evaluation(m), evaluation(r), evaluation(a)
    v_inv = _inverse(v)
    bt = [[v_inv[i][j] for i in range(a)] for j in range(a)]  # V^-T
    for j, row in enumerate(bt):  # scale row j to primitive integers, G's row j inversely
        den = lcm(*(x.denominator for x in row))
        num = gcd(*(int(x * den) for x in row))
        first = next(x for x in row if x != 0)
        scale = Fraction(den, num) * (1 if first > 0 else -1)
        bt[j] = [x * scale for x in row]
        g[j] = [x / scale for x in g[j]]
    at = [[e_m[j][i] for j in range(a)] for i in range(m)]
    return at, g, bt


# --- 1-D transforms compiled into ufunc calls ------------------------------------------------------

Op = tuple[Any, tuple[Any, ...], np.ndarray]


def _emit_lin(terms: list[tuple[Fraction, int]], srcs: Sequence[np.ndarray], dest: np.ndarray,
              tmp: np.ndarray, ops: list[Op]) -> None:
    """Append ops computing dest = sum c * srcs[j] over ``terms`` (c != 0)."""
    groups: dict[Fraction, list[tuple[int, int]]] = {}
    for c, j in terms:
        groups.setdefault(abs(c), []).append((1 if c > 0 else -1, j))
    order = sorted(groups, key=lambda mag: (mag != 1, mag))

    def emit_sum(group: list[tuple[int, int]], out: np.ndarray) -> int:
        """out = sign * sum(signed terms); returns sign."""
        group = sorted(group, key=lambda t: -t[0])  # positive first
        (s0, j0), rest = group[0], group[1:]
        if not rest:
            ops.append((np.copyto, (out, srcs[j0]), None))
            return s0
        s1, j1 = rest[0]
        if s0 == s1:
            ops.append((np.add, (srcs[j0], srcs[j1]), out))
        else:
            ops.append((np.subtract, (srcs[j0], srcs[j1]), out))
        for s, j in rest[1:]:
            ops.append((np.add if s == s0 else np.subtract, (out, srcs[j]), out))
        return s0

    sign = 1
    for k, mag in enumerate(order):
        if k == 0:
            s = emit_sum(groups[mag], dest)
            if mag != 1 or (s < 0 and len(order) == 1):
                ops.append((np.multiply, (dest, F32(s * mag)), dest))
                s = 1
            sign = s
            continue
        if len(groups[mag]) == 1 and mag != 1:
            s, j = groups[mag][0]
            ops.append((np.multiply, (srcs[j], F32(mag)), tmp))
        else:
            s = emit_sum(groups[mag], tmp)
            if mag != 1:
                ops.append((np.multiply, (tmp, F32(mag)), tmp))
        ops.append((np.add if s * sign > 0 else np.subtract, (dest, tmp), dest))
    if sign < 0:
        ops.append((np.negative, (dest,), dest))


def compile_1d(mat: list[list[Fraction]], srcs: Sequence[np.ndarray], outs: Sequence[np.ndarray],
               tmp: np.ndarray, tmp2: np.ndarray) -> list[Op]:
    """Ops computing outs[i] = sum_j mat[i][j] * srcs[j] (arrays of one shape)."""
    rows = [[(c, j) for j, c in enumerate(row) if c != 0] for row in mat]
    ops: list[Op] = []
    done: set[int] = set()
    for i, row in enumerate(rows):
        if i in done:
            continue
        done.add(i)
        pair = None
        for i2 in range(i + 1, len(rows)):
            if i2 in done:
                continue
            sup = {j: abs(c) for c, j in row}
            if sup == {j: abs(c) for c, j in rows[i2]} and len(row) > 1:
                other = {j: c for c, j in rows[i2]}
                even = [(c, j) for c, j in row if other[j] == c]
                odd = [(c, j) for c, j in row if other[j] == -c]
                if even and odd:
                    pair = (i2, even, odd)
                    break
        if pair is None:
            _emit_lin(row, srcs, outs[i], tmp, ops)
            continue
        i2, even, odd = pair
        done.add(i2)
        _emit_lin(even, srcs, outs[i], tmp, ops)  # u
        _emit_lin(odd, srcs, tmp2, tmp, ops)  # v
        ops.append((np.subtract, (outs[i], tmp2), outs[i2]))  # u - v
        ops.append((np.add, (outs[i], tmp2), outs[i]))  # u + v
    return ops


def _run(ops: list[Op]) -> None:
    for fn, args, out in ops:
        if out is None:
            fn(*args)
        else:
            fn(*args, out=out)


# --- the convolution -------------------------------------------------------------------------------


def transform_weight(weight: np.ndarray, m: int) -> np.ndarray:
    """OHWI 3x3 weight -> [a*a, IC, OC] float32 (G g G^T per (oc, ic), computed in float64)."""
    _, g, _ = matrices(m)
    gm = np.array(g, dtype=np.float64)
    a, (oc, _, _, ic) = m + 2, weight.shape
    out = np.empty((a * a, ic, oc), F32)
    for o in range(0, oc, 64):  # in blocks of output channels: the float64 temporaries stay small
        u = np.einsum("ak,okli,bl->abio", gm, weight[o:o + 64].astype(np.float64), gm)
        out[:, :, o:o + 64] = u.reshape(a * a, ic, -1)
    return out


#: from this many tiles the transforms split over threads (ResNet-18's 14x14 layers have 49)
PARALLEL_TILES = 40


class Winograd:
    """fp32 CONV2D NHWC x OHWI (3x3, stride 1, dilation 1, any pads) by Winograd F(m x m, 3 x 3).

    ``scratch``: a dict of buffers shared with other convolutions that never run concurrently
    (a TOSA program's), so that the transform-domain buffers stay in cache from layer to layer;
    the zero-padded input buffer is the instance's own (its border stays zero)."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, pad: Sequence[int], m: int = 2,
                 clamp: InPlaceClamp | tuple[float, float] | None = None, band_bytes: int = 1 << 19,
                 scratch: dict[str, np.ndarray] | None = None) -> None:
        oc, kh, kw, ic = weight.shape
        if (kh, kw) != (3, 3):
            raise ValueError("Winograd F(m, 3) needs a 3x3 kernel")
        self.m, self.a = m, m + 2
        self.w = transform_weight(weight, m)
        self.b = np.broadcast_to(np.asarray(bias, F32), (oc,)).astype(F32)
        self.pad = [int(p) for p in pad]
        self.clamp = clamp
        self.oc = oc
        self.at, _, self.bt = matrices(m)
        self.band_bytes = band_bytes
        self.scratch = scratch
        # inputs up to this magnitude cannot overflow: |V| <= amp_in |x| (B^T on both sides),
        # |M| <= ic max|w_t| |V|, |y| <= amp_out |M|; kept below 1e37 (float32 max: 3.4e38)
        amp_in = max(sum(abs(c) for c in row) for row in self.bt) ** 2
        amp_out = max(sum(abs(c) for c in row) for row in self.at) ** 2
        self.limit = 1e37 / float(amp_in * amp_out * ic * max(float(np.abs(self.w).max()), 1e-30))
        self._shape: tuple[int, ...] | None = None

    def _buffer(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        if self.scratch is None:
            return np.empty(shape, F32)
        buf = self.scratch.get("winograd." + key)
        if buf is None or buf.size < size:
            buf = self.scratch["winograd." + key] = np.empty(size, F32)
        return buf[:size].reshape(shape)

    def _compile(self, items: list[tuple[int, int, int]], band: int, ic: int, wp: int, part: str = "",
                 shared: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
        """Ops for the (image, first tile row, tile rows) ``items``, on buffers of their own per
        ``part`` (a thread's share). With ``shared`` (V [a*a, all tiles, IC], M [a*a, all tiles, OC]):
        the transforms only, as (input ops writing V's rows of the items, output ops reading M's),
        for one GEMM over all tiles in between (split over the a*a products: each thread reads its
        part of the transformed filter once)."""
        m, a, oc = self.m, self.a, self.oc
        tx = (wp - 2) // m
        u = self._buffer("u" + part, (a, band, wp, ic))
        tmp1, tmp2 = self._buffer("t1" + part, (2, band, wp, ic))
        if shared is None:
            v = self._buffer("v" + part, (a * a, band * tx, ic))
        tmp3, tmp4 = self._buffer("t2" + part, (2, a, band, tx, ic))
        if shared is None:
            mm = self._buffer("m" + part, (a * a, band * tx, oc))
        z = self._buffer("z" + part, (a, band, tx, m, oc))
        tmp5, tmp6 = self._buffer("t3" + part, (2, a, band, tx, oc))
        tmp7, tmp8 = self._buffer("t4" + part, (2, band, tx, m, oc))
        ops: list[Op] = []
        ops_out: list[Op] = []
        ty = self.dims[3]
        for i, b0, nb in items:
            if shared is not None:
                at = (i * ty + b0) * tx
                v, mm = shared[0][:, at:at + nb * tx], shared[1][:, at:at + nb * tx]
            src = self.padded[i, b0 * m:(b0 + nb) * m + 2]
            # input transform, rows: a outputs [nb, wp, ic]
            rows = [src[j:j + m * (nb - 1) + 1:m] for j in range(a)]
            ub = u[:, :nb]
            ops += compile_1d(self.bt, rows, list(ub), tmp1[:nb], tmp2[:nb])
            # columns: a outputs [a, nb, tx, ic] into V [a(row), a(col), nb, tx, ic]
            vb = v[:, :nb * tx]
            v5 = vb.reshape(a, a, nb, tx, ic)
            cols = [ub[:, :, k:k + m * (tx - 1) + 1:m] for k in range(a)]
            ops += compile_1d(self.bt, cols, [v5[:, k] for k in range(a)], tmp3[:, :nb], tmp4[:, :nb])
            mb = mm[:, :nb * tx]
            if shared is None:
                ops.append((parallel.gemm, (vb, self.w), mb))  # the a*a GEMMs over threads
            else:
                ops, ops_out = ops_out, ops  # from here on: the output transform's ops
            # output transform: M [a*a, nb*tx, oc] -> columns: Z [a, nb, tx, m, oc] -> rows: Y tiles
            m5 = mb.reshape(a, a, nb, tx, oc)
            zb = z[:, :nb]
            ops += compile_1d(self.at, [m5[:, k] for k in range(a)], [zb[..., q, :] for q in range(m)],
                              tmp5[:, :nb], tmp6[:, :nb])
            y5 = self.ybuf[i, b0 * m:(b0 + nb) * m].reshape(nb, m, tx, m, oc)
            ops += compile_1d(self.at, list(zb), [y5[:, p] for p in range(m)], tmp7[:nb], tmp8[:nb])
            if shared is not None:
                ops, ops_out = ops_out, ops
        return ops if shared is None else (ops, ops_out)

    def _setup(self, shape: tuple[int, ...]) -> None:
        n, ih, iw, ic = shape
        m, a, oc = self.m, self.a, self.oc
        t, b, left, r = self.pad
        oh, ow = ih + t + b - 2, iw + left + r - 2
        ty, tx = -(-oh // m), -(-ow // m)
        hp, wp = ty * m + 2, tx * m + 2
        self.dims = (n, oh, ow, ty, tx)
        self.padded = np.zeros((n, hp, wp, ic), F32)
        self.ybuf = self._buffer("y", (n, ty * m, tx * m, oc))
        # bands of tile rows, so that one band's transform-domain data stays in cache
        # (only when the transformed filter fits in cache too: each band's GEMM reads all of it)
        band = ty
        if self.w.nbytes <= 1 << 20:
            band = max(1, min(ty, self.band_bytes // (4 * a * a * tx * max(ic, oc))))
        items = [(i, b0, min(band, ty - b0)) for i in range(n) for b0 in range(0, ty, band)]
        self.ops = self._compile(items, band, ic, wp)
        self._shape = shape
        self._parts: list[tuple[tuple[list[Op], list[Op]], tuple[int, int, int, int]]] = []
        self._parts_for = 0

    def _split(self, parts: int) -> list[tuple[tuple[list[Op], list[Op]], tuple[int, int, int, int]]]:
        """The tiles in ``parts`` shares (whole images, else bands of tile rows), each with its own
        buffers, for as many threads: their transforms then run in parallel (not banded for cache:
        fewer, larger numpy calls hand the GIL over less often)."""
        n, _, _, ty, tx = self.dims
        ic, wp = self.padded.shape[3], self.padded.shape[2]
        if n >= parts:
            shares = [[(i, 0, ty) for i in range(i0, i1)] for i0, i1 in parallel.split(n, parts)]
            band = ty
        else:
            per = -(-parts // n)
            band = -(-ty // per)
            shares = [[(i, b0, min(band, ty - b0))] for i in range(n) for b0 in range(0, ty, band)]
        oh, a = self.dims[1], self.a
        self.vm = (self._buffer("V", (a * a, n * ty * tx, ic)), self._buffer("M", (a * a, n * ty * tx, self.oc)))
        return [(self._compile(items, band, ic, wp, f".{k}", self.vm),
                 (items[0][0], items[-1][0] + 1, items[0][1] * self.m, min(oh, (items[0][1] + items[0][2]) * self.m)))
                for k, items in enumerate(shares)]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.shape != self._shape:
            self._setup(x.shape)
        n, oh, ow, ty, tx = self.dims
        t, _, left, _ = self.pad
        self.padded[:, t:t + x.shape[1], left:left + x.shape[2], :] = x
        y = np.empty((n, oh, ow, self.oc), F32)
        parts = parallel.worth(n * ty * tx, PARALLEL_TILES) if n * ty > 1 else 1
        if parts == 1:
            _run(self.ops)
            self._finish(y, 0, n, 0, oh)
            return y
        if self._parts_for != parts:
            self._parts, self._parts_for = self._split(parts), parts

        def transform_in(k: int) -> None:
            _run(self._parts[k][0][0])

        def transform_out(k: int) -> None:
            (_, ops), (i0, i1, r0, r1) = self._parts[k]
            _run(ops)
            self._finish(y, i0, i1, r0, r1)

        parallel.parallel_for(len(self._parts), transform_in)
        parallel.gemm(self.vm[0], self.w, out=self.vm[1])
        parallel.parallel_for(len(self._parts), transform_out)
        return y

    def _finish(self, y: np.ndarray, i0: int, i1: int, r0: int, r1: int) -> None:
        """Output rows [r0, r1) of images [i0, i1): cropped from the tiles, plus bias, clamped."""
        block = y[i0:i1, r0:r1]
        np.add(self.ybuf[i0:i1, r0:r1, :y.shape[2]], self.b, out=block)
        if self.clamp is not None:  # (lo, hi) or an object applying itself in place
            if hasattr(self.clamp, "apply"):
                self.clamp.apply(block)
            else:
                np.clip(block, F32(self.clamp[0]), F32(self.clamp[1]), out=block)

    def accepts(self, x: np.ndarray) -> bool:
        """Whether ``x`` is finite and small enough for the transforms. Winograd mixes each tile's
        inputs, so a NaN or infinity would reach outputs whose windows do not hold it (and
        inf - inf gives NaN): such inputs belong to the direct (im2col) convolution."""
        return bool(-self.limit <= x.min() and x.max() <= self.limit)


def preferred(ic: int, oc: int, n: int, oh: int, ow: int) -> tuple[bool, bool]:
    """Whether F(2x2,3x3) beats im2col for this 3x3 stride-1 convolution, (with 1 BLAS thread, with 2+).
    On skriptnd.parallel's threads both forms split into parts on one BLAS thread each, so the
    first rule applies (skriptnd.tosa.program.fast).

    From benchmarks/winograd.py (see the module docstring): at least 49 tiles (ResNet-18's 56x56,
    28x28, 14x14 layers, not 7x7) and 64 channels with one thread; also 256 channels with two.
    Untested shapes (other batch sizes, channel counts, images) follow the same rule."""
    tiles = n * -(-oh // 2) * -(-ow // 2)
    if tiles < 49 or min(ic, oc) < 64:
        return False, False
    return True, min(ic, oc) >= 256
