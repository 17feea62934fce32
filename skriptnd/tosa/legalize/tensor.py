"""Tensor operators: matmul/linear/dot/matvec/outer, conv (1-D/2-D/3-D, any format, groups,
dilation, padding), deconv (TRANSPOSE_CONV2D), and pooling."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.compose.ir import Operation, flat_tensors
from skriptnd.tosa.legalize.core import Builder, Rule, Subgraph, env, ints, norm_axes, shape_of
from skriptnd.tosa.legalize.layout import strided

# -- linear algebra ------------------------------------------------------------------------------


def _matmul_op(b: Builder, x: str, y: str) -> str:
    return b.emit("MATMUL", x, y, b.const([0.0]), b.const([0.0]))


def _folded_matmul(b: Builder, x: str, x_mat: Sequence[int], y: str, y_mat: Sequence[int],
                   ey: Sequence[int], z: Sequence[int]) -> str:
    """``x @ y`` with ``x: [*z, M, K]`` and ``y: [*ey, K, N]`` (``ey[d]`` is ``z[d]`` or 1); returns
    ``[*z, M, N]``.

    TOSA MATMUL has no batch broadcast. Rather than copying ``y`` once per batch element it is shared
    over (a tiled weight, ``prod(z)/prod(ey)`` times its size in every program and export, growing with
    the batch or sequence length), those batch dims are folded into the rows of ``x``:
    ``[B, M, K] @ [K, N]`` is ``[1, B*M, K] @ [1, K, N]`` (RESHAPEs, no data movement). Shared dims that
    are not the innermost batch dims are first moved there by a TRANSPOSE of ``x`` (and back after)."""
    m, k = x_mat
    n = y_mat[1]
    live = [d for d in range(len(z)) if z[d] != 1]  # size-1 batch dims play no part
    kept = [d for d in live if ey[d] != 1]
    shared = [d for d in live if ey[d] == 1]
    perm = [live.index(d) for d in (*kept, *shared)]
    zl = [z[d] for d in live]
    g = int(np.prod([z[d] for d in kept], dtype=np.int64))
    r = int(np.prod([z[d] for d in shared], dtype=np.int64)) * m
    xt = b.transpose(b.reshape(x, [*z, m, k], [*zl, m, k]), [*perm, len(live), len(live) + 1])
    xr = b.reshape(xt, [*(zl[p] for p in perm), m, k], [g, r, k])
    yr = b.reshape(y, [*ey, k, n], [g, k, n])
    out = b.reshape(_matmul_op(b, xr, yr), [g, r, n], [*(zl[p] for p in perm), m, n])
    inv = [perm.index(i) for i in range(len(live))]
    return b.reshape(b.transpose(out, [*inv, len(live), len(live) + 1]), [*zl, m, n], [*z, m, n])


def _matmul(op: Operation) -> Subgraph:
    b = Builder(op)
    z = ints(env(op, "z"))
    ea, eb = ints(env(op, "ea")), ints(env(op, "eb"))
    ta, tb = bool(op.attribs.get("transA")), bool(op.attribs.get("transB"))
    out = shape_of(op.outputs[0])
    nb = len(z)
    a_bc = [d for d in range(nb) if ea[d] == 1 and z[d] != 1]  # batch dims A is shared over
    b_bc = [d for d in range(nb) if eb[d] == 1 and z[d] != 1]

    def operand(i: int, e: list[int], trans: bool, tile: Sequence[int]) -> tuple[str, list[int], list[int]]:
        """Operand ``i`` as ``[*e, rows, cols]`` (transposed if ``trans``), tiled over ``tile``."""
        shape = shape_of(op.inputs[i])
        mat = list(shape[-2:])
        x = b.reshape(b.arg(i), shape, [*e, *mat])
        if tile:
            x = b.emit("TILE", x, b.shape([z[d] if d in tile else 1 for d in range(nb)] + [1, 1]))
            e = list(z)
        if trans:
            x = b.transpose(x, [*range(nb), nb + 1, nb])
            mat = mat[::-1]
        return x, e, mat

    # Each batch dim is shared by A, by B or by neither. Only where both share some dims (an outer
    # product over the batch, whose result outgrows either operand) is one of them tiled: the smaller copy.
    size_a = int(np.prod(shape_of(op.inputs[0]), dtype=np.int64)) * int(np.prod([z[d] for d in a_bc], dtype=np.int64))
    size_b = int(np.prod(shape_of(op.inputs[1]), dtype=np.int64)) * int(np.prod([z[d] for d in b_bc], dtype=np.int64))
    if a_bc and (not b_bc or size_b <= size_a):
        # A shared: Zᵀ = Bᵀ·Aᵀ, with the dims A is shared over folded into the rows of Bᵀ
        x, _, xm = operand(1, eb, not tb, b_bc)
        y, ey, ym = operand(0, ea, not ta, [])
        y = b.transpose(_folded_matmul(b, x, xm, y, ym, ey, z), [*range(nb), nb + 1, nb])
    else:  # B shared (its batch dims folded into A's rows), or nothing broadcast
        x, _, xm = operand(0, ea, ta, a_bc)
        y, ey, ym = operand(1, eb, tb, [])
        y = _folded_matmul(b, x, xm, y, ym, ey, z)
    y = b.reshape(y, [*z, *out[-2:]], out)
    if b.arg(2) is not None:
        c = b.reshape(b.arg(2), shape_of(op.inputs[2]), [*ints(env(op, "ec")), *out[-2:]])
        y = b.emit("ADD", y, c)
    return b.done(y)


def _linear(op: Operation) -> Subgraph:
    b = Builder(op)
    bsz, c = shape_of(op.inputs[0])
    n = shape_of(op.inputs[1])[0]
    x = b.reshape(b.arg(0), (bsz, c), (1, bsz, c))
    w = b.reshape(b.transpose(b.arg(1), [1, 0]), (c, n), (1, c, n))
    y = b.reshape(_matmul_op(b, x, w), (1, bsz, n), (bsz, n))
    if b.arg(2) is not None:
        y = b.emit("ADD", y, b.reshape(b.arg(2), (n,), (1, n)))
    return b.done(y)


def _dot(op: Operation) -> Subgraph:
    b = Builder(op)
    (n,) = shape_of(op.inputs[0])
    y = _matmul_op(b, b.reshape(b.arg(0), (n,), (1, 1, n)), b.reshape(b.arg(1), (n,), (1, n, 1)))
    y = b.reshape(y, (1, 1, 1), ())
    if b.arg(2) is not None:
        y = b.emit("ADD", y, b.arg(2))
    return b.done(y)


def _matvec(op: Operation) -> Subgraph:
    b = Builder(op)
    m, n = shape_of(op.inputs[0])
    a = b.transpose(b.arg(0), [1, 0]) if op.attribs.get("transA") else b.arg(0)
    rows, cols = (n, m) if op.attribs.get("transA") else (m, n)
    y = _matmul_op(b, b.reshape(a, (rows, cols), (1, rows, cols)), b.reshape(b.arg(1), (cols,), (1, cols, 1)))
    y = b.reshape(y, (1, rows, 1), (rows,))
    if b.arg(2) is not None:
        y = b.emit("ADD", y, b.arg(2))
    return b.done(y)


def _outer(op: Operation) -> Subgraph:
    b = Builder(op)
    sx, sy = shape_of(op.inputs[0]), shape_of(op.inputs[1])
    x = b.reshape(b.arg(0), sx, [*sx, *([1] * len(sy))])
    y = b.reshape(b.arg(1), sy, [*([1] * len(sx)), *sy])
    return b.done(b.mul(x, y))


# -- convolution ---------------------------------------------------------------------------------


def _geometry(sizes: Sequence[int], before: Sequence[int], extents: Sequence[int], strides: Sequence[int],
              outs: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """TOSA pads [lo, hi per spatial dim] and the input crop (start, size per spatial dim) giving
    exactly ``outs`` windows: TOSA requires the exact division idiv_check and non-negative pads, the
    stdlib floors or ceils and allows negative (automatic) padding."""
    pads, start, crop = [], [], []
    for size, lo, ext, stride, out in zip(sizes, before, extents, strides, outs, strict=True):
        first = max(-lo, 0)
        lo, size = max(lo, 0), size - first
        hi = (out - 1) * stride + ext - size - lo
        if hi < 0:
            size, hi = size + hi, 0
        pads += [lo, hi]
        start.append(first)
        crop.append(size)
    return pads, start, crop


def _per_dim(v: ArrayLike | None, d: int, default: int = 1) -> list[int]:
    v = ints(v) or [default]
    return v * d if len(v) == 1 else v


_TO_NXC = {"NCX": lambda d: [0, *range(2, d + 2), 1], "NXC": lambda d: list(range(d + 2)),
           "XCN": lambda d: [d + 1, *range(d), d]}
_FILTER_TO_NXC = {"NCX": lambda d: [0, *range(2, d + 2), 1], "NXC": lambda d: list(range(d + 2)),
                  "XCN": lambda d: [d + 1, *range(d), d], "CXN": lambda d: [d + 1, *range(1, d + 1), 0]}


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _conv_check(op: Operation) -> str | None:
    d = len(shape_of(op.inputs[0])) - 2
    if d not in (1, 2, 3):
        return f"{d}-D convolution (TOSA has CONV2D and CONV3D; 1-D maps through CONV2D)"
    return None


def _blank_conv(b: Builder, op: Operation, perm: list[int], d: int) -> Subgraph:
    """Every window lies wholly in the padding: @lower's output is the bias (or 0) everywhere."""
    out = [shape_of(op.outputs[0])[p] for p in perm]  # N, X.., C
    n = out[-1]
    ones = [1] * (d + 1)
    y = b.const(np.zeros([*ones, 1])) if b.arg(2) is None else b.reshape(b.arg(2), [n], [*ones, n])
    y = b.emit("TILE", y, b.shape([*out[:-1], n if b.arg(2) is None else 1]))
    return b.done(b.transpose(y, _inverse(perm)))


def _conv(op: Operation, grouped_as_depthwise: bool = False) -> Subgraph:
    """TRANSPOSE input to N,X..,C and filter to O,X..,I; a 1-D convolution gets a unit second spatial
    dimension; SLICE the input where the stdlib's padding is negative or leaves a remainder;
    CONV2D / CONV3D / DEPTHWISE_CONV2D, per group SLICE + conv + CONCAT for other groupings (or, with
    ``grouped_as_depthwise``, 1-D / 2-D groupings as one DEPTHWISE_CONV2D: :func:`conv_for_compilers`)."""
    b = Builder(op)
    d = len(shape_of(op.inputs[0])) - 2
    fmt, ffmt = op.attribs.get("data_format", "NCX"), op.attribs.get("filter_format", "NCX")
    perm, fperm = _TO_NXC[fmt](d), _FILTER_TO_NXC[ffmt](d)
    s = [shape_of(op.inputs[0])[p] for p in perm]
    fs = [shape_of(op.inputs[1])[p] for p in fperm]
    x = b.transpose(b.arg(0), perm)
    w = b.transpose(b.arg(1), fperm)
    stride, dilation = _per_dim(op.attribs.get("stride"), d), _per_dim(op.attribs.get("dilation"), d)
    ox = ints(env(op, "ox"))
    pads, start, crop = _geometry(s[1:-1], ints(env(op, "offset")), ints(env(op, "fd")), stride, ox)
    if any(c <= 0 for c in crop):
        return _blank_conv(b, op, perm, d)
    x = b.slice(x, s, [0, *start, 0], [s[0], *crop, s[-1]])
    s = [s[0], *crop, s[-1]]
    if d == 1:  # a unit W dimension
        x = b.reshape(x, s, [*s[:2], 1, s[2]])
        w = b.reshape(w, fs, [*fs[:2], 1, fs[2]])
        s, fs = [*s[:2], 1, s[2]], [*fs[:2], 1, fs[2]]
        stride, dilation, pads, ox = [*stride, 1], [*dilation, 1], [*pads, 0, 0], [*ox, 1]
    dd = max(d, 2)
    g, ic, n = int(env(op, "g")), s[-1], fs[0]
    fc, m = fs[-1], n // g
    zps = (b.const([0.0]), b.const([0.0]))
    attrs = {"pad": pads, "stride": stride, "dilation": dilation, "acc_type": "fp32"}
    bias = b.arg(2)
    if g > 1 and fc == 1 and dd == 2:  # depthwise: weight [KH, KW, C, M]
        wd = b.transpose(b.reshape(w, fs, [ic, m, fs[1], fs[2]]), [2, 3, 0, 1])
        y = b.emit("DEPTHWISE_CONV2D", x, wd, b.const(np.zeros(1)) if bias is None else bias, *zps, **attrs)
    elif g > 1 and dd == 2 and grouped_as_depthwise:
        y = _grouped_as_depthwise(b, x, w, bias, s, fs, g, ox, attrs, zps)
    else:
        name = "CONV2D" if dd == 2 else "CONV3D"
        parts = []
        for gi in range(g):
            xg = b.slice(x, s, [0] * (dd + 1) + [gi * fc], [*s[:-1], fc]) if g > 1 else x
            wg = b.slice(w, fs, [gi * m] + [0] * (dd + 1), [m, *fs[1:]]) if g > 1 else w
            if bias is None:
                bg = b.const(np.zeros(1))
            else:
                bg = b.slice(bias, [n], [gi * m], [m]) if g > 1 else bias
            parts.append(b.emit(name, xg, wg, bg, *zps, **attrs))
        y = b.concat(parts, dd + 1)
    if d == 1:
        y = b.reshape(y, [s[0], *ox, n], [s[0], ox[0], n])
    return b.done(b.transpose(y, _inverse(perm)))


def _grouped_as_depthwise(b: Builder, x: str, w: str, bias: str | None, s: list[int], fs: list[int], g: int,
                          ox: list[int], attrs: dict[str, Any], zps: tuple[str, str]) -> str:
    """A grouped 2-D convolution (``g`` groups of ``fc`` input and ``m`` output channels) as one depthwise
    convolution and a sum: the input's channels TILEd to [g, m, fc] (each group's fc channels once per
    output channel of the group), one DEPTHWISE_CONV2D with multiplier 1 over those g*m*fc channels (filter
    [KH, KW, g*m*fc, 1]: output channel o's taps for its input channel c), REDUCE_SUM over fc, ADD bias.
    Same products, summed over the taps of each input channel first; g*m*fc = fc x the output channels
    of intermediate values."""
    n, kh, kw, fc = fs
    m, lead = n // g, s[:-1]
    tiled = b.emit("TILE", b.reshape(x, s, [*lead, g, 1, fc]), b.shape([1] * len(lead) + [1, m, 1]))
    tiled = b.reshape(tiled, [*lead, g, m, fc], [*lead, n * fc])
    wd = b.reshape(b.transpose(w, [1, 2, 0, 3]), [kh, kw, n, fc], [kh, kw, n * fc, 1])
    y = b.emit("DEPTHWISE_CONV2D", tiled, wd, b.const(np.zeros(1)), *zps, **attrs)
    positions = s[0] * ox[0] * ox[1]
    y = b.emit("REDUCE_SUM", b.reshape(y, [s[0], *ox, n * fc], [positions, n, fc]), axis=2)
    y = b.reshape(y, [positions, n, 1], [s[0], *ox, n])
    return y if bias is None else b.emit("ADD", y, b.reshape(bias, [n], [1, 1, 1, n]))


def conv_for_compilers(op: Operation) -> Subgraph | None:
    """A grouped 1-D / 2-D ``nn.conv`` (neither one group nor depthwise) as one DEPTHWISE_CONV2D and a sum
    (:func:`_grouped_as_depthwise`), for a backend that compiles TOSA (the iree backend's ``extra``
    legalization); None for any other operation (the TABLE's rule applies).

    Why: the TABLE writes a grouped convolution as one CONV2D per group between a SLICE and a CONCAT, and
    IREE compiles each of those as its own dispatch: ResNeXt-50's 16 convolutions of 32 groups become 692
    dispatches (290 convolutions, 370 copies), a cold compile of minutes; in this form they are 53
    (docs/performance.md, "Grouped convolutions"). The numpy backend and the exports keep the TABLE's form
    (numpy runs per-group CONV2Ds well, and exports stay one operator per group)."""
    if op.op != "nn.conv" or any(t.dynamic for t in flat_tensors(op.inputs + op.outputs)):
        return None  # a dynamic extent: the TABLE's rule refuses it (the iree backend leaves it on numpy)
    if _conv_check(op) is not None or len(shape_of(op.inputs[0])) > 4:
        return None
    if int(env(op, "g")) <= 1:
        return None
    return _conv(op, grouped_as_depthwise=True)  # a depthwise one (one input channel per group) stays as it is


# -- deconvolution -------------------------------------------------------------------------------


def _deconv_check(op: Operation) -> str | None:
    d = len(shape_of(op.inputs[0])) - 2
    if d not in (1, 2, 3):
        return f"{d}-D deconvolution (TOSA has TRANSPOSE_CONV2D, and CONV3D for 3-D)"
    return None


def _dilate_filter(b: Builder, w: str, fs: list[int], dilation: list[int]) -> tuple[str, list[int]]:
    """Zeros between the taps of spatial axes 1.. of ``w`` (PAD a unit axis, RESHAPE, SLICE)."""
    rank = len(fs)
    for k, dl in enumerate(dilation):
        if dl > 1:
            a = 1 + k
            split = [*fs[:a + 1], 1, *fs[a + 1:]]
            w = b.reshape(w, fs, split)
            padding = [0] * (2 * len(split))
            padding[2 * (a + 1) + 1] = dl - 1
            w = b.emit("PAD", w, b.shape(padding), b.const([0.0]))
            split[a + 1] = dl
            merged = list(fs)
            merged[a] = fs[a] * dl
            w = b.reshape(w, split, merged)
            size = list(fs)
            size[a] = (fs[a] - 1) * dl + 1
            w = b.slice(w, merged, [0] * rank, size)
            fs = size
    return w, fs


def _deconv(op: Operation) -> Subgraph:
    """TRANSPOSE to N,X..,C; the filter [n=in, fc=out per group, k..] to [n, k.., fc] (dilation: zeros
    between taps). 1-D/2-D: per group TRANSPOSE_CONV2D with out_pad 0 (the full output
    oy = iy*stride + ky); 3-D: per group CONV3D of the zero-upsampled, fully padded input with the
    REVERSEd filter (the same full output). Then PAD/SLICE take the stdlib's window at -offset
    (positions no input reaches hold the bias alone)."""
    b = Builder(op)
    d = len(shape_of(op.inputs[0])) - 2
    fmt, ffmt = op.attribs.get("data_format", "NCX"), op.attribs.get("filter_format", "NCX")
    perm, fperm = _TO_NXC[fmt](d), _FILTER_TO_NXC[ffmt](d)
    s = [shape_of(op.inputs[0])[p] for p in perm]
    fs = [shape_of(op.inputs[1])[p] for p in fperm]  # [n (in), k.., fc (out per group)]
    x = b.transpose(b.arg(0), perm)
    w = b.transpose(b.arg(1), fperm)
    stride, dilation = _per_dim(op.attribs.get("stride"), d), _per_dim(op.attribs.get("dilation"), d)
    offset, ox = ints(env(op, "offset")), ints(env(op, "ox"))
    if d == 1:
        x = b.reshape(x, s, [*s[:2], 1, s[2]])
        w = b.reshape(w, fs, [*fs[:2], 1, fs[2]])
        s, fs = [*s[:2], 1, s[2]], [*fs[:2], 1, fs[2]]
        stride, dilation, offset, ox = [*stride, 1], [*dilation, 1], [*offset, 0], [*ox, 1]
    dd = len(s) - 2
    w, fs = _dilate_filter(b, w, fs, dilation)
    g, n, fc = int(env(op, "g")), fs[0], fs[-1]
    m = n // g
    full = [(s[1 + k] - 1) * stride[k] + fs[1 + k] for k in range(dd)]
    zps = (b.const([0.0]), b.const([0.0]))
    bias = b.arg(2)
    if dd == 3:  # zero-upsample by the stride, pad by the filter extent - 1
        for k in range(3):
            if stride[k] > 1:
                a = 1 + k
                split = [*s[:a + 1], 1, *s[a + 1:]]
                x = b.reshape(x, s, split)
                padding = [0] * (2 * len(split))
                padding[2 * (a + 1) + 1] = stride[k] - 1
                x = b.emit("PAD", x, b.shape(padding), b.const([0.0]))
                merged = list(s)
                merged[a] = s[a] * stride[k]
                x = b.reshape(x, [*s[:a + 1], stride[k], *s[a + 1:]], merged)
                size = list(s)
                size[a] = (s[a] - 1) * stride[k] + 1
                x = b.slice(x, merged, [0] * 5, size)
                s = size
        x = b.emit("PAD", x, b.shape([0, 0, *[p for k in range(3) for p in (fs[1 + k] - 1,) * 2], 0, 0]),
                   b.const([0.0]))
        s = [s[0], *[s[1 + k] + 2 * (fs[1 + k] - 1) for k in range(3)], s[-1]]
        for k in range(3):
            w = b.emit("REVERSE", w, axis=1 + k)
    parts = []
    for gi in range(g):
        xg = b.slice(x, s, [0] * (dd + 1) + [gi * m], [*s[:-1], m]) if g > 1 else x
        wg = b.slice(w, fs, [gi * m] + [0] * (dd + 1), [m, *fs[1:]]) if g > 1 else w
        wg = b.transpose(wg, [dd + 1, *range(1, dd + 1), 0])  # [fc, K.., m]
        if bias is None:
            bg = b.const(np.zeros(1))
        else:
            bg = b.slice(bias, [fc * g], [gi * fc], [fc]) if g > 1 else bias
        if dd == 2:
            parts.append(b.emit("TRANSPOSE_CONV2D", xg, wg, bg, *zps, out_pad=[0, 0, 0, 0], stride=stride,
                                acc_type="fp32"))
        else:
            parts.append(b.emit("CONV3D", xg, wg, bg, *zps, pad=[0] * 6, stride=[1, 1, 1], dilation=[1, 1, 1],
                                acc_type="fp32"))
    y = b.concat(parts, dd + 1)
    oc = fc * g
    shape = [s[0], *full, oc]
    # output position o reads full position o + offset; outside the full output: the bias alone
    padding, start = [0, 0], [0]
    for k in range(dd):
        lo = max(-offset[k], 0)
        hi = max(ox[k] + offset[k] - full[k], 0)
        padding += [lo, hi]
        start.append(offset[k] + lo)
    padding += [0, 0]
    if any(padding):
        y = b.emit("PAD", y, b.shape(padding), b.const([0.0]))
        shape = [shape[0], *[shape[1 + k] + padding[2 + 2 * k] + padding[3 + 2 * k] for k in range(dd)], oc]
        if bias is not None:
            mask = np.zeros([1, *shape[1:-1], 1], np.float32)
            mask[(slice(None), *[slice(padding[2 + 2 * k], padding[2 + 2 * k] + full[k]) for k in range(dd)])] = 1.0
            y = b.emit("ADD", y, b.mul(b.const(1.0 - mask), b.reshape(bias, [oc], [1] * (dd + 1) + [oc])))
    y = b.slice(y, shape, [*start, 0], [s[0], *ox, oc])
    if d == 1:
        y = b.reshape(y, [s[0], *ox, oc], [s[0], ox[0], oc])
    return b.done(b.transpose(y, _inverse(perm)))


# -- pooling -------------------------------------------------------------------------------------


def pool_geometry(op: Operation) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """A composed pooling operation's window: pooled axes, size, stride, dilation, the padding before
    each pooled axis (offset) and the output extents, from its attributes and binding (also what the
    ONNX export writes)."""
    shape = shape_of(op.inputs[0])
    rank = len(shape)
    axes = norm_axes(op.attribs.get("axes"), rank) if op.attribs.get("axes") is not None else list(range(2, rank))
    k = len(axes)
    size = _per_dim(op.attribs["size"], k)
    stride = _per_dim(op.attribs.get("stride"), k)
    dilation = _per_dim(op.attribs.get("dilation"), k)
    paddings = ints(env(op, "paddings"))
    if op.binding is not None and "offset" in op.binding.env:
        offset = ints(env(op, "offset"))
    elif op.attribs.get("padding") is not None:
        offset = ints(op.attribs["padding"])[:k]
    elif op.attribs.get("padding_align", "UPPER") == "UPPER":
        offset = [p // 2 for p in paddings]
    else:
        offset = [-(-p // 2) for p in paddings]
    return axes, size, stride, dilation, offset, [shape_of(op.outputs[0])[a] for a in axes]


def _pool2d_layout(op: Operation) -> tuple[list[int], list[int]] | None:
    """(perm to N,H,W,C, merged shape) when the pooled axes (at most 2) can become H, W: the last
    non-pooled axis is C, the others merge into N."""
    shape = shape_of(op.inputs[0])
    axes = pool_geometry(op)[0]
    if len(axes) > 2 or len(axes) == 0:
        return None
    others = [a for a in range(len(shape)) if a not in axes]
    perm = others[:-1] + axes + others[-1:] if others else axes
    n = int(np.prod([shape[a] for a in others[:-1]], dtype=np.int64))
    c = shape[others[-1]] if others else 1
    hw = [shape[a] for a in axes] + [1] * (2 - len(axes))
    return perm, [n, *hw, c]


def _tosa_pool_check(op: Operation) -> str | None:
    if _pool2d_layout(op) is None:
        return "more than 2 pooled axes (TOSA pools are 2-D)"
    axes, size, stride, dilation, offset, outs = pool_geometry(op)
    if any(d != 1 for d in dilation):
        return "dilated pooling (TOSA pools have no dilation)"
    shape = shape_of(op.inputs[0])
    pads, _, crop = _geometry([shape[a] for a in axes], offset, size, stride, outs)
    if any(c <= 0 for c in crop):
        return "pooling windows that lie wholly in the padding (TOSA SLICE cannot produce an empty crop)"
    if op.op == "nn.avg_pool" and op.attribs.get("ignore_border", True):
        if any(p >= kk for p, kk in zip(pads, [kk for kk in size for _ in range(2)], strict=True)):
            return "avg_pool padding >= window size (TOSA AVG_POOL2D requires pad < kernel)"
    return None


def _tosa_pool(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    perm, nhwc = _pool2d_layout(op)
    axes, size, stride, _, offset, outs = pool_geometry(op)
    pads, start, crop = _geometry([shape[a] for a in axes], offset, size, stride, outs)
    if len(axes) == 1:
        size, stride, pads, start, crop, outs = [*size, 1], [*stride, 1], [*pads, 0, 0], [*start, 0], [*crop, 1], [*outs, 1]
    x = b.reshape(b.transpose(b.arg(0), perm), [shape[p] for p in perm], nhwc)
    x = b.slice(x, nhwc, [0, *start, 0], [nhwc[0], *crop, nhwc[3]])
    explicit = any(p >= kk for p, kk in zip(pads, [kk for kk in size for _ in range(2)], strict=True))
    if op.op == "nn.max_pool":
        if explicit:  # padding never contributes: pad with -inf, then pool without padding
            x = b.emit("PAD", x, b.shape([0, 0, *pads, 0, 0]), b.const([-np.inf]))
            pads = [0, 0, 0, 0]
        y = b.emit("MAX_POOL2D", x, kernel=size, stride=stride, pad=pads)
    else:
        if not op.attribs.get("ignore_border", True) and any(pads):  # divide by the full window size
            x = b.emit("PAD", x, b.shape([0, 0, *pads, 0, 0]), b.const([0.0]))
            pads = [0, 0, 0, 0]
        y = b.emit("AVG_POOL2D", x, b.const([0.0]), b.const([0.0]), kernel=size, stride=stride, pad=pads,
                   acc_type="fp32")
    permuted = [shape[p] for p in perm]
    for a, o in zip(axes, outs, strict=False):
        permuted[perm.index(a)] = o
    y = b.reshape(y, [nhwc[0], *outs, nhwc[3]], permuted)
    return b.done(b.transpose(y, _inverse(perm)))


_MAX_WINDOW = 256


def _window_check(op: Operation) -> str | None:
    size = pool_geometry(op)[1]
    if int(np.prod(size, dtype=np.int64)) > _MAX_WINDOW:
        return f"window of {int(np.prod(size, dtype=np.int64))} elements (> {_MAX_WINDOW} strided SLICEs)"
    return None


def _window(op: Operation) -> Subgraph:
    """Any pooled axes, dilation, padding: PAD the input (with -inf for max, 0 for sum; SLICE where the
    padding is negative), one strided SLICE per window tap, and a MAXIMUM / ADD chain over the taps
    in @lower's order (windows wholly in the padding give -inf / 0 as @lower's initial values)."""
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    rank = len(shape)
    axes, size, stride, dilation, offset, outs = pool_geometry(op)
    is_max = op.op == "nn.max_pool"
    fill = b.const([-np.inf if is_max else 0.0])
    x = b.arg(0)
    padding, start, crop = [0] * (2 * rank), [0] * rank, list(shape)
    for a, lo, kk, st, dl, o in zip(axes, offset, size, stride, dilation, outs, strict=True):
        need = (o - 1) * st + (kk - 1) * dl + 1
        first = max(-lo, 0)
        avail = shape[a] - first
        hi = need - avail - max(lo, 0)
        start[a], crop[a] = first, avail + min(hi, 0)
        padding[2 * a], padding[2 * a + 1] = max(lo, 0), max(hi, 0)
    blank = any(c <= 0 for c in crop)
    if blank:  # every window lies wholly in the padding: all of it is the fill value
        needs = [crop[a] + padding[2 * a] + padding[2 * a + 1] for a in range(rank)]
        start, crop = [0] * rank, [1] * rank
        padding = [p for n in needs for p in (0, n - 1)]
    x = b.slice(x, shape, start, crop)
    if blank:
        x = b.emit("SELECT", b.const(np.zeros([1] * rank), np.bool_), x, b.const(np.full([1] * rank,
                                                                                      -np.inf if is_max else 0.0)))
    if any(padding):
        x = b.emit("PAD", x, b.shape(padding), fill)
    padded = [c + padding[2 * a] + padding[2 * a + 1] for a, c in enumerate(crop)]
    acc = None
    for taps in itertools.product(*[range(kk) for kk in size]):
        y, sh = x, list(padded)
        for a, j, st, dl, o in zip(axes, taps, stride, dilation, outs, strict=True):
            y, sh = strided(b, y, sh, a, j * dl, st, o, fill)
        if acc is None:
            acc = y if is_max else b.emit("ADD", b.const(np.zeros([1] * rank)), y)
        else:
            acc = b.emit("MAXIMUM", acc, y) if is_max else b.emit("ADD", acc, y)
    return b.done(acc)


RULES: dict[str, list[Rule]] = {
    "linalg.matmul": [Rule("RESHAPE to rank 3 (a shared operand's batch folded into the other's rows), TRANSPOSE if transA/B, MATMUL, RESHAPE (+ ADD C)", _matmul)],
    "linalg.dot": [Rule("MATMUL (1,1,n) x (1,n,1), RESHAPE (+ ADD b)", _dot)],
    "linalg.matvec": [Rule("MATMUL (1,m,n) x (1,n,1) (TRANSPOSE if transA), RESHAPE (+ ADD b)", _matvec)],
    "linalg.outer": [Rule("RESHAPE both, MUL (broadcast)", _outer)],
    "nn.linear": [Rule("MATMUL(x, TRANSPOSE(filter)) + ADD bias", _linear)],
    "nn.conv": [Rule("TRANSPOSE to N,X..,C / O,X..,I; 1-D as 2-D; CONV2D, CONV3D or DEPTHWISE_CONV2D (groups: SLICE "
                     "per group + CONCAT); SLICE for negative/remainder padding; TRANSPOSE back (windows wholly in "
                     "the padding: the bias, TILEd)", _conv, _conv_check)],
    "nn.deconv": [Rule("TRANSPOSE to N,X..,C; 1-D as 2-D; per group TRANSPOSE_CONV2D, 3-D: CONV3D of the "
                       "zero-upsampled padded input with the REVERSEd filter (dilation: zero-interleaved filter); "
                       "PAD/SLICE to the stdlib's output window; TRANSPOSE back", _deconv, _deconv_check)],
    "nn.max_pool": [Rule("<= 2 pooled axes, dilation 1: TRANSPOSE/RESHAPE to NHWC, MAX_POOL2D (PAD -inf if pad >= "
                         "kernel), back", _tosa_pool, _tosa_pool_check),
                    Rule("PAD -inf, strided SLICE per window tap, MAXIMUM chain", _window, _window_check)],
    "nn.sum_pool": [Rule("PAD 0, strided SLICE per window tap, ADD chain", _window, _window_check)],
    "nn.avg_pool": [Rule("<= 2 pooled axes, dilation 1: TRANSPOSE/RESHAPE to NHWC, AVG_POOL2D (PAD 0 first if "
                         "ignore_border=false), back", _tosa_pool, _tosa_pool_check)],
}
