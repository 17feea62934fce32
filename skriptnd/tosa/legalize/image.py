"""image.* up/down-sampling and resizing, and the zero-point fake quantization.

Every resize here is separable with source positions and weights known when composing, so each
resized axis becomes GATHERs with constant int32 indices (along that axis), MULs by constant
weights and ADDs, computed from the same formulas as the operator's @lower (in fp32)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.compose.ir import Operation
from skriptnd.tosa.legalize.core import Builder, Rule, Subgraph, env, ints, norm_axes, shape_of
from skriptnd.tosa.legalize.elementwise import _round, gt_select, lt_select
from skriptnd.tosa.legalize.layout import strided


def gather_axis(b: Builder, x: str, shape: list[int], axis: int, index: np.ndarray) -> tuple[str, list[int]]:
    """``x`` taken at constant ``index`` along ``axis`` (TRANSPOSE/RESHAPE to [1, K, rest], GATHER)."""
    rank = len(shape)
    n = len(index)
    if list(index) == list(range(shape[axis])):
        return x, list(shape)
    others = [shape[a] for a in range(rank) if a != axis]
    rest = int(np.prod(others, dtype=np.int64))
    perm = [axis, *[a for a in range(rank) if a != axis]]
    v = b.reshape(b.transpose(x, perm), [shape[axis], *others], [1, shape[axis], rest])
    y = b.emit("GATHER", v, b.const(np.asarray(index).reshape(1, n), np.int32))
    y = b.reshape(y, [1, n, rest], [n, *others])
    inv = [0] * rank
    for i, p in enumerate(perm):
        inv[p] = i
    out = list(shape)
    out[axis] = n
    return b.transpose(y, inv), out


def linear_map(b: Builder, x: str, shape: list[int], axis: int, taps: list[list[tuple[int, float]]]) -> tuple[str, list[int]]:
    """output[o] = sum_t w[o][t] * x[idx[o][t]] along ``axis``, taps in order (missing taps: weight 0)."""
    n = len(taps)
    width = max(len(t) for t in taps)
    rank = len(shape)
    acc = None
    out = list(shape)
    for t in range(width):
        idx = np.array([tap[t][0] if t < len(tap) else 0 for tap in taps])
        w = np.array([tap[t][1] if t < len(tap) else 0.0 for tap in taps], np.float32)
        g, out = gather_axis(b, x, shape, axis, idx)
        if not np.all(w == 1.0):
            wshape = [1] * rank
            wshape[axis] = n
            g = b.mul(g, b.const(w.reshape(wshape)))
        acc = g if acc is None else b.emit("ADD", acc, g)
    return acc, out


def _axes(op: Operation) -> list[int]:
    rank = len(shape_of(op.inputs[0]))
    axes = op.attribs.get("axes")
    return norm_axes(axes, rank) if axes is not None else list(range(rank))


def _per_axis(v: ArrayLike, k: int) -> list[Any]:
    v = list(v) if isinstance(v, list | tuple | np.ndarray) else [v]
    return v * k if len(v) == 1 else v


def _nearest_downsample(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    out = shape_of(op.outputs[0])
    x = b.arg(0)
    axes = _axes(op)
    zero = b.const([0.0])
    for a, f in zip(axes, _per_axis(ints(op.attribs["factor"]), len(axes)), strict=True):
        x, shape = strided(b, x, shape, a, 0, f, out[a], zero)
    return b.done(x)


def _nearest_upsample(op: Operation) -> Subgraph:
    """Per axis: RESHAPE [.., s, 1, ..], TILE the unit axis by factor, RESHAPE [.., s*factor, ..]."""
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    x = b.arg(0)
    axes = _axes(op)
    for a, f in zip(axes, _per_axis(ints(op.attribs["factor"]), len(axes)), strict=True):
        if f == 1:
            continue
        split = [*shape[:a + 1], 1, *shape[a + 1:]]
        x = b.reshape(x, shape, split)
        multiples = [1] * len(split)
        multiples[a + 1] = f
        x = b.emit("TILE", x, b.shape(multiples))
        split[a + 1] = f
        merged = list(shape)
        merged[a] *= f
        x = b.reshape(x, split, merged)
        shape = merged
    return b.done(x)


def _f32(v: ArrayLike) -> np.float32:
    return np.float32(v)


def _resize_axes(op: Operation) -> list[tuple[int, int, Any, Any]]:
    """(axis, output size, scale, offset) per resized axis: the ``size`` attribute and @lower's
    ``scale`` and ``offset``, one value each or one per axis."""
    axes = _axes(op)
    sizes = _per_axis(ints(op.attribs["size"]), len(axes))
    scales = _per_axis(env(op, "scale"), len(axes))
    offsets = _per_axis(env(op, "offset"), len(axes))
    return list(zip(axes, sizes, scales, offsets, strict=True))


def _source_coordinates(size: int, scale: ArrayLike, offset: ArrayLike) -> np.ndarray:
    """@lower's fp32 source coordinate of each output position o: o * scale + offset."""
    return np.arange(size).astype(np.float32) * _f32(scale) + _f32(offset)


def _nearest_resize(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    x = b.arg(0)
    method = op.attribs.get("rounding_method", "ROUND_PREFER_FLOOR")
    for a, size, scale, offset in _resize_axes(op):
        with np.errstate(all="ignore"):
            r = _source_coordinates(size, scale, offset)
            r = {"FLOOR": np.floor(r), "CEIL": np.ceil(r), "ROUND_PREFER_FLOOR": np.ceil(r - np.float32(0.5)),
                 "ROUND_PREFER_CEIL": np.floor(r + np.float32(0.5))}[method]
        idx = np.clip(r.astype(np.int64), 0, shape[a] - 1)
        x, shape = gather_axis(b, x, shape, a, idx)
    return b.done(x)


def _linear_resize(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    x = b.arg(0)
    for a, size, scale, offset in _resize_axes(op):
        r = _source_coordinates(size, scale, offset)
        fr = np.abs(r) - np.floor(np.abs(r))
        base = np.floor(r).astype(np.int64)
        taps = [[(int(np.clip(base[o] + j, 0, shape[a] - 1)), float(np.abs(np.float32(1 - j) - fr[o])))
                 for j in range(2)] for o in range(size)]
        x, shape = linear_map(b, x, shape, a, taps)
    return b.done(x)


def keys_weight(t: float, a: float) -> float:
    """Keys' cubic convolution kernel (1981) with coefficient a."""
    t = abs(t)
    if t <= 1.0:
        return (a + 2.0) * t ** 3 - (a + 3.0) * t ** 2 + 1.0
    if t < 2.0:
        return a * t ** 3 - 5.0 * a * t ** 2 + 8.0 * a * t - 4.0 * a
    return 0.0


def _cubic_resize(op: Operation) -> Subgraph:
    """The intrinsic's conventions (linear_resize's coordinate transform, the 4 taps floor(r) - 1 ..
    floor(r) + 2 clamped to the axis, Keys' weights of the unclamped offsets): per axis, constant
    indices and weights (fp32), GATHERs, MULs, ADDs."""
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    x = b.arg(0)
    axes = _axes(op)
    sizes = _per_axis(ints(op.attribs["size"]), len(axes))
    a = float(op.attribs.get("coeff_a", -0.75))
    transform = op.attribs.get("coordinate_transform", "SYMMETRIC")
    for ax, size in zip(axes, sizes, strict=True):
        extent = shape[ax]
        if transform == "ALIGNED":
            scale = 0.0 if size <= 1 else (extent - 1) / (size - 1)
        else:
            scale = extent / size
        offset = 0.5 * scale - 0.5 if transform == "SYMMETRIC" else 0.0
        taps = []
        for o in range(size):
            r = o * scale + offset
            base = math.floor(r)
            taps.append([(min(max(base + j, 0), extent - 1), keys_weight(r - (base + j), a)) for j in range(-1, 3)])
        x, shape = linear_map(b, x, shape, ax, taps)
    return b.done(x)


def _linear_upsample(op: Operation) -> Subgraph:
    """@lower: output[factor*i + j - padding] += input[clamped i - c] * filter[j] with a separable
    filter; per axis the taps reaching each output position (at most ceil(fs / factor))."""
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    x = b.arg(0)
    axes = _axes(op)
    factors = _per_axis(ints(op.attribs["factor"]), len(axes))
    symmetric = bool(op.attribs.get("symmetric", True))
    replicate = bool(op.attribs.get("replicate_border", True))
    c = int(symmetric)
    for a, f in zip(axes, factors, strict=True):
        fs = 2 * f - f % 2 if symmetric else 2 * f - 1
        padding = (f + f // 2 if replicate else f // 2) if symmetric else f - 1
        offset = 0.5 if symmetric and f % 2 == 0 else 1.0
        filt = [np.float32(1.0 - abs(float(np.float32(j - f)) + offset) / float(f)) for j in range(fs)]
        s = shape[a]
        count = s + c + 1 if replicate else s
        taps: list[list[tuple[int, float]]] = [[] for _ in range(s * f)]
        for i in range(count):
            for j in range(fs):
                o = f * i + j - padding
                if 0 <= o < s * f:
                    src = min(max(i - c, 0), s - 1) if replicate else i
                    taps[o].append((src, float(filt[j])))
        x, shape = linear_map(b, x, shape, a, [t or [(0, 0.0)] for t in taps])
    return b.done(x)


def _pow2(v: float) -> bool:
    m, _ = math.frexp(float(v))
    return v > 0 and m == 0.5


def _exact_levels_check(op: Operation, scales: np.ndarray, inexact: str) -> str | None:
    """Why a fake quantization with these ``scales`` has no exact TOSA form (``inexact`` when a scale is
    not a power of two), or None."""
    if not all(_pow2(float(s)) for s in scales):
        return inexact
    if int(op.attribs["bits"]) > 24:
        return "more than 24 bits (quantization levels not exact in fp32)"
    return None


def _per_channel_consts(b: Builder, op: Operation) -> tuple[int, Callable[[Any], str]]:
    """The input's rank and a maker of constants broadcasting along its ``channel_axis``: one value
    becomes a [1, ..., 1] tensor, several values a tensor of their count along that axis."""
    rank = len(shape_of(op.inputs[0]))
    axis = norm_axes(op.attribs.get("channel_axis", 1), rank)[0] if rank else 0

    def per_channel(v: ArrayLike) -> str:
        a = np.atleast_1d(np.asarray(v, np.float32))
        if a.size == 1:
            return b.const(np.full([1] * rank, a[0]))
        cs = [1] * rank
        cs[axis] = a.size
        return b.const(a.reshape(cs))

    return rank, per_channel


def _quant_check(op: Operation) -> str | None:
    scales = np.atleast_1d(np.asarray(op.attribs["scale"], np.float64))
    return _exact_levels_check(op, scales, "scale that is not a power of two: x / scale has no exact TOSA form "
                               "(x * RECIPROCAL(scale) can differ by 1 ulp and move x across a rounding tie to "
                               "the neighbouring level)")


def _zero_point_quantize(op: Operation) -> Subgraph:
    """q = clamp(zp + round(x * 2^-e), m, r); output = (q - zp) * scale (all exact in fp32)."""
    b = Builder(op)
    rank, per_channel = _per_channel_consts(b, op)
    env_ = op.binding.env
    lo, hi = float(env_["m"]), float(env_["r"])
    scale = np.atleast_1d(np.asarray(op.attribs["scale"], np.float64))
    zp = per_channel(op.attribs["zero_point"])
    q = _round(b, b.mul(b.arg(0), per_channel(1.0 / scale)), rank)
    q = b.emit("ADD", zp, q)
    q = b.emit("CLAMP", q, min_val=lo, max_val=hi)
    return b.done(b.mul(b.emit("SUB", q, zp), per_channel(scale)))


def _min_max_check(op: Operation) -> str | None:
    lo = np.atleast_1d(np.asarray(op.attribs["min"], np.float32))
    hi = np.atleast_1d(np.asarray(op.attribs["max"], np.float32))
    return _exact_levels_check(op, (hi - lo).astype(np.float32), "max - min that is not a power of two: (x - min) "
                               "/ (max - min) has no exact TOSA form (x * RECIPROCAL(y) can differ by 1 ulp and "
                               "move x across a rounding tie to the neighbouring level)")


def _min_max_quantize(op: Operation) -> Subgraph:
    """@lower's sequence: v = (x >? min) <? max; q = round((v - min) * 2^-e * r) - p;
    ((q + p) * RECIPROCAL(r)) * (max - min) + min (the last division within 1 ulp)."""
    b = Builder(op)
    rank, per_channel = _per_channel_consts(b, op)
    env_ = op.binding.env
    r, p = float(env_["r"]), float(env_["p"])
    lo = np.atleast_1d(np.asarray(op.attribs["min"], np.float32))
    hi = np.atleast_1d(np.asarray(op.attribs["max"], np.float32))
    sc = (hi - lo).astype(np.float32)
    mn, mx = per_channel(lo), per_channel(hi)
    v = lt_select(b, gt_select(b, b.arg(0), mn), mx)
    t = b.mul(b.mul(b.emit("SUB", v, mn), per_channel(1.0 / sc.astype(np.float64))), b.scalar(r, rank))
    q = b.emit("SUB", _round(b, t, rank), b.scalar(p, rank))
    y = b.mul(b.emit("ADD", q, b.scalar(p, rank)), b.emit("RECIPROCAL", b.scalar(r, rank)))
    return b.done(b.emit("ADD", b.mul(y, per_channel(sc)), mn))


RULES: dict[str, list[Rule]] = {
    "quant.min_max_linear_quantize": [Rule("power-of-two max - min: (x >? min) <? max, round((v - min) * 2^-e * r) "
                                           "exactly, then (q / r) * (max - min) + min (within 1 ulp)",
                                           _min_max_quantize, _min_max_check)],
    "image.nearest_downsample": [Rule("strided SLICE (PAD/RESHAPE/SLICE) per axis", _nearest_downsample)],
    "image.nearest_upsample": [Rule("RESHAPE, TILE, RESHAPE per axis", _nearest_upsample)],
    "image.nearest_resize": [Rule("GATHER per axis with constant int32 indices (from @lower's coordinate "
                                  "transform and rounding, in fp32)", _nearest_resize)],
    "image.linear_resize": [Rule("per axis: 2 GATHERs with constant indices, MUL by constant weights, ADD",
                                 _linear_resize)],
    "image.linear_upsample": [Rule("per axis: GATHERs of the taps reaching each output, MUL by constant filter "
                                   "weights, ADD", _linear_upsample)],
    "quant.zero_point_linear_quantize": [Rule("power-of-two scales: round(x * 2^-e) exactly (FLOOR/SELECT), "
                                              "ADD zp, CLAMP, SUB zp, MUL scale", _zero_point_quantize,
                                              _quant_check)],
}

NOT_LEGALIZABLE: dict[str, str] = {}


# -- grid sampling -------------------------------------------------------------------------------


def _grid_sample(op: Operation) -> Subgraph:
    """@lower's coordinate arithmetic in fp32 (g = (grid + 1) * 0.5, x = g * (s - 1) or g * s - 0.5),
    the index round(x) (nearest, half away from zero) or floor(x) + j with weights 1 - |i - x| (linear),
    padding as SELECTs (ZEROS: out-of-range items contribute 0; REPLICATE: CLAMP; REFLECT: once, then
    out-of-range items contribute 0, where @lower stops with an error), a flat index (fp32, exact),
    CAST to int32 and GATHER per batch."""
    b = Builder(op)
    linear = op.op == "image._linear_grid_sample"
    cubic = op.op == "image._cubic_grid_sample"
    padding = op.attribs.get("padding", "ZEROS")
    aligned = bool(op.attribs.get("aligned", False))
    ishape = shape_of(op.inputs[0])
    n, c, s = ishape[0], ishape[1], list(ishape[2:])
    d = len(s)
    gshape = shape_of(op.inputs[1])
    z = list(gshape[1:-1])
    nz = int(np.prod(z, dtype=np.int64))
    ns = int(np.prod(s, dtype=np.int64))
    grid = b.reshape(b.arg(1), gshape, [n, nz, d])

    def k1(v: float) -> str:
        return b.const(np.full([1, 1], v))

    coords = []
    for k in range(d):
        g = b.reshape(b.slice(grid, [n, nz, d], [0, 0, d - 1 - k], [n, nz, 1]), [n, nz, 1], [n, nz])
        g = b.mul(b.emit("ADD", g, k1(1.0)), k1(0.5))
        x = b.mul(g, k1(float(s[k] - 1))) if aligned else b.emit("SUB", b.mul(g, k1(float(s[k]))), k1(0.5))
        coords.append(x)

    def place(i: str, size: int) -> tuple[str, str | None]:
        """(index in range, validity mask or None) for an integral fp32 index."""
        lo, hi = k1(0.0), k1(float(size - 1))
        if padding == "REPLICATE":
            return b.emit("CLAMP", i, min_val=0.0, max_val=float(size - 1)), None
        if padding == "REFLECT" and cubic:  # the intrinsic's periodic reflection (period 2(s - 1))
            if size == 1:
                return k1(0.0), None
            period = 2.0 * (size - 1)
            m = b.emit("SUB", i, b.mul(k1(period), b.emit("FLOOR", b.mul(i, k1(1.0 / period)))))
            m = b.emit("SELECT", b.emit("GREATER", lo, m), b.emit("ADD", m, k1(period)), m)
            m = b.emit("SELECT", b.emit("GREATER_EQUAL", m, k1(period)), b.emit("SUB", m, k1(period)), m)
            return b.emit("SELECT", b.emit("GREATER", m, hi), b.emit("SUB", k1(period), m), m), None
        if padding == "REFLECT":
            i = b.emit("SELECT", b.emit("GREATER", lo, i), b.neg(i),
                       b.emit("SELECT", b.emit("GREATER", i, hi), b.emit("SUB", k1(2.0 * (size - 1)), i), i))
        valid = b.emit("LOGICAL_AND", b.emit("GREATER_EQUAL", i, lo), b.emit("GREATER_EQUAL", hi, i))
        return b.emit("SELECT", valid, i, lo), valid

    data = b.transpose(b.reshape(b.arg(0), ishape, [n, c, ns]), [0, 2, 1])  # [n, S, c]
    if cubic:
        base = [b.emit("FLOOR", x) for x in coords]
        frac = [b.emit("SUB", x, f) for x, f in zip(coords, base, strict=True)]
        kw = [[_keys(b, b.emit("SUB", f, k1(float(j))), -0.75) for j in range(-1, 3)] for f in frac]
    taps = list(np.ndindex(*([4 if cubic else 2] * d))) if linear or cubic else [None]
    acc = None
    for tap in taps:
        flat, mask, weight = None, None, None
        stride = ns
        for k in range(d):
            stride //= s[k]
            if cubic:
                i = b.emit("ADD", base[k], k1(float(tap[k] - 1)))
                w = kw[k][tap[k]]
                weight = w if weight is None else b.mul(weight, w)
            elif linear:
                i = b.emit("ADD", b.emit("FLOOR", coords[k]), k1(float(tap[k])))
                w = b.emit("SUB", k1(1.0), b.emit("ABS", b.emit("SUB", i, coords[k])))
                weight = w if weight is None else b.mul(weight, w)
            else:
                i = _round(b, coords[k], 2)
            idx, valid = place(i, s[k])
            term = idx if stride == 1 else b.mul(idx, k1(float(stride)))
            flat = term if flat is None else b.emit("ADD", flat, term)
            if valid is not None:
                mask = valid if mask is None else b.emit("LOGICAL_AND", mask, valid)
        v = b.emit("GATHER", data, b.emit("CAST", flat, output_dtype="int32"))  # [n, Z, c]
        if weight is not None:
            v = b.mul(b.reshape(weight, [n, nz], [n, nz, 1]), v)
        if mask is not None:
            v = b.emit("SELECT", b.reshape(mask, [n, nz], [n, nz, 1]), v, b.const(np.zeros([1, 1, 1])))
        acc = v if acc is None else b.emit("ADD", acc, v)
    y = b.transpose(acc, [0, 2, 1])
    return b.done(b.reshape(y, [n, c, nz], shape_of(op.outputs[0])))


def _keys(b: Builder, t: str, a: float) -> str:
    """Keys' kernel W(t) on a [n, Z] tensor, both pieces and SELECTs."""
    def c(v: float) -> str:
        return b.const(np.full([1, 1], v))

    t = b.emit("ABS", t)
    t2 = b.mul(t, t)
    t3 = b.mul(t2, t)
    near = b.emit("ADD", b.emit("SUB", b.mul(c(a + 2.0), t3), b.mul(c(a + 3.0), t2)), c(1.0))
    far = b.emit("SUB", b.emit("ADD", b.emit("SUB", b.mul(c(a), t3), b.mul(c(5.0 * a), t2)), b.mul(c(8.0 * a), t)),
                 c(4.0 * a))
    return b.emit("SELECT", b.emit("GREATER_EQUAL", c(1.0), t), near,
                  b.emit("SELECT", b.emit("GREATER", c(2.0), t), far, c(0.0)))


def _grid_check(op: Operation) -> str | None:
    ns = int(np.prod(shape_of(op.inputs[0])[2:], dtype=np.int64))
    if ns >= 2 ** 24:
        return "more than 2^24 spatial items (flat indices not exact in fp32)"
    return None


RULES.update({
    "image.cubic_resize": [Rule("per axis: 4 GATHERs with constant clamped indices, MUL by constant Keys weights "
                                "(the intrinsic's conventions), ADD", _cubic_resize)],
    "image._cubic_grid_sample": [Rule("fp32 coordinates, FLOOR + 4^d tap GATHERs weighted by Keys' kernel "
                                      "(a = -0.75) as SELECTed polynomials, padding as the intrinsic (REFLECT "
                                      "periodic), ADD", _grid_sample, _grid_check)],
    "image._nearest_grid_sample": [Rule("fp32 coordinates as @lower, round half away from zero, padding SELECTs, "
                                        "CAST to int32, GATHER", _grid_sample, _grid_check)],
    "image._linear_grid_sample": [Rule("fp32 coordinates as @lower, FLOOR + 2^d corner GATHERs weighted by "
                                       "1 - |i - x|, padding SELECTs, ADD", _grid_sample, _grid_check)],
})


# -- ROI pooling ---------------------------------------------------------------------------------


def _idiv(b: Builder, m: str, p: int, ceil: bool) -> str:
    """floor (or ceil) of m / p for integral fp32 m >= 0 and int p, exactly (FLOOR(m * 1/p) corrected)."""
    def c(v: float) -> str:
        return b.const(np.full([1, 1], v))

    if ceil:
        m = b.emit("ADD", m, c(float(p - 1)))
    q = b.emit("FLOOR", b.mul(m, c(1.0 / p)))
    q = b.emit("SELECT", b.emit("GREATER", b.mul(q, c(float(p))), m), b.emit("SUB", q, c(1.0)), q)
    return b.emit("SELECT", b.emit("GREATER_EQUAL", m, b.mul(b.emit("ADD", q, c(1.0)), c(float(p)))),
                  b.emit("ADD", q, c(1.0)), q)


def _roi_pool(op: Operation) -> Subgraph:
    """The intrinsic's conventions: begins/ends rounded half away from zero, e = max(end - begin + 1, 1)
    pixels, bin p covering [begin + floor(p e / P), begin + ceil((p + 1) e / P)) clipped (exact integer
    arithmetic in fp32); the batch item by GATHER; per axis a bin mask (GREATER_EQUAL/GREATER) and
    REDUCE_MAX of SELECT(mask, x, -inf) or REDUCE_SUM of SELECT(mask, x, 0) / count; empty bins 0."""
    b = Builder(op)
    is_max = op.op == "image.max_roi_pool"
    xs = shape_of(op.inputs[0])
    bsz, c, s = xs[0], xs[1], list(xs[2:])
    d = len(s)
    n = shape_of(op.inputs[1])[0]
    sizes = [int(p) for p in _per_axis(ints(op.attribs["output_size"]), d)]
    rest = c * int(np.prod(s, dtype=np.int64))
    data = b.reshape(b.arg(0), xs, [1, bsz, rest])
    cur = b.reshape(b.emit("GATHER", data, b.reshape(b.arg(2), [n], [1, n])), [1, n, rest], [n, c, *s])
    shape = [n, c, *s]
    rois = _round(b, b.arg(1), 2)  # [n, 2d]

    def col(j: int) -> str:
        return b.slice(rois, [n, 2 * d], [0, j], [n, 1])

    count = None
    for k in range(d):
        bins, extent = sizes[k], s[k]
        begin = col(k)
        length = b.emit("MAXIMUM", b.emit("ADD", b.emit("SUB", col(d + k), begin), b.const(np.ones([1, 1]))),
                        b.const(np.ones([1, 1])))  # [n, 1]
        pe = b.mul(length, b.const(np.arange(bins, dtype=np.float32).reshape(1, bins)))  # [n, P]
        lo = b.emit("ADD", _idiv(b, pe, bins, ceil=False), begin)
        hi = b.emit("ADD", _idiv(b, b.emit("ADD", pe, length), bins, ceil=True), begin)
        lo = b.emit("CLAMP", lo, min_val=0.0, max_val=float(extent))
        hi = b.emit("CLAMP", hi, min_val=0.0, max_val=float(extent))
        size = b.emit("SUB", hi, lo)
        count = size if count is None else b.mul(b.reshape(count, [n, *sizes[:k]], [n, *sizes[:k], 1]),
                                                 b.reshape(size, [n, bins], [n, *([1] * k), bins]))
        pos = b.const(np.arange(extent, dtype=np.float32).reshape(1, 1, extent))
        lo3, hi3 = b.reshape(lo, [n, bins], [n, bins, 1]), b.reshape(hi, [n, bins], [n, bins, 1])
        mask = b.emit("LOGICAL_AND", b.emit("GREATER_EQUAL", pos, lo3), b.emit("GREATER", hi3, pos))  # [n, P, s]
        axis = 2 + k  # of s_k in cur; the bins go in front of it
        expanded = [*shape[:axis], 1, *shape[axis:]]
        mshape = [n, 1, *([1] * k), bins, extent, *([1] * (d - k - 1))]
        fill = b.const(np.full([1] * len(expanded), -np.inf if is_max else 0.0))
        sel = b.emit("SELECT", b.reshape(mask, [n, bins, extent], mshape), b.reshape(cur, shape, expanded), fill)
        red = b.emit("REDUCE_MAX" if is_max else "REDUCE_SUM", sel, axis=axis + 1)
        shape = [*shape[:axis], bins, *shape[axis + 1:]]
        cur = b.reshape(red, [*shape[:axis + 1], 1, *shape[axis + 1:]], shape)
    cnt = b.reshape(count, [n, *sizes], [n, 1, *sizes])
    zero = b.const(np.zeros([1] * (2 + d)))
    if not is_max:
        cur = b.mul(cur, b.emit("RECIPROCAL", b.emit("MAXIMUM", cnt, b.const(np.ones([1] * (2 + d))))))
    return b.done(b.emit("SELECT", b.emit("EQUAL", cnt, zero), zero, cur))


def _roi_check(op: Operation) -> str | None:
    xs = shape_of(op.inputs[0])
    d = len(xs) - 2
    if d > 3:
        return f"{d}-D ROI pooling (masks beyond TOSA's rank 6)"
    n = shape_of(op.inputs[1])[0]
    sizes = [int(p) for p in _per_axis(ints(op.attribs["output_size"]), d)]
    largest = n * xs[1] * max(int(np.prod(sizes[:k + 1] + list(xs[2 + k:]), dtype=np.int64)) for k in range(d))
    if largest > 2 ** 24:
        return f"ROI pooling masks of {largest} items (> 2^24)"
    return None


RULES.update({
    "image.max_roi_pool": [Rule("GATHER the batch item, per axis SELECT(bin mask, x, -inf) + REDUCE_MAX (bins "
                                "from rounded ROIs in exact fp32 integer arithmetic), 0 for empty bins",
                                _roi_pool, _roi_check)],
    "image.avg_roi_pool": [Rule("GATHER the batch item, per axis SELECT(bin mask, x, 0) + REDUCE_SUM, MUL by "
                                "RECIPROCAL(count), 0 for empty bins", _roi_pool, _roi_check)],
})
