"""Converters for the ``image`` module: nearest up/down-sampling (Expand / strided Slice), nearest resizing
(a Gather per axis with the @lower formula's indices), linear and cubic resizing through ONNX Resize (the
coordinate transforms map one to one: SYMMETRIC = half_pixel, ASYMMETRIC = asymmetric, ALIGNED =
align_corners), linear upsampling as a fixed matrix per axis, and grid sampling through GridSample.

SkriptND's linear and cubic resize formulas do not antialias (the attribute exists but the @lower
formula and kernels ignore it), so Resize is written with ``antialias=0``. onnxruntime's Resize interpolates
linearly and cubically over at most the two innermost axes: the resized axes are moved last, two at a
time (the interpolation is separable), the others merged in front."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.interop.onnx_export.core import (
    Context,
    Results,
    Unsupported,
    converter,
    env,
    ints,
    inverse,
    norm_axes,
    product,
    shape,
)

_TRANSFORM = {"SYMMETRIC": "half_pixel", "ASYMMETRIC": "asymmetric", "ALIGNED": "align_corners"}
_ROUNDING = {"FLOOR": "floor", "CEIL": "ceil", "ROUND_PREFER_FLOOR": "round_prefer_floor",
             "ROUND_PREFER_CEIL": "round_prefer_ceil"}


def _axes(op: Operation) -> list[int]:
    rank = len(shape(op.inputs[0]))
    axes = op.attribs.get("axes")
    return norm_axes(axes, rank) if axes is not None else list(range(rank))


@converter("image.nearest_downsample", onnx="Slice with steps")
def nearest_downsample(ctx: Context, op: Operation) -> Results:
    s, axes = shape(op.inputs[0]), _axes(op)
    factor = ints(op.attribs["factor"])
    factor = factor * len(axes) if len(factor) == 1 else factor
    return [ctx.slice(ctx.value(op.inputs[0]), [0] * len(axes), [s[a] for a in axes], axes, factor)]


@converter("image.nearest_upsample", onnx="Reshape, Expand, Reshape")
def nearest_upsample(ctx: Context, op: Operation) -> Results:
    """Each item repeated ``factor`` times: a unit axis after each upsampled axis, Expand, Reshape."""
    s, axes = shape(op.inputs[0]), _axes(op)
    factor = ints(op.attribs["factor"])
    factor = factor * len(axes) if len(factor) == 1 else factor
    split, expanded = [], []
    for i, n in enumerate(s):
        split.append(n)
        expanded.append(n)
        if i in axes:
            split.append(1)
            expanded.append(factor[axes.index(i)])
    x = ctx.reshape(ctx.value(op.inputs[0]), split)
    x = ctx.node("Expand", [x, ctx.i64(expanded)])
    return [ctx.reshape(x, shape(op.outputs[0]))]


def _resize(ctx: Context, op: Operation, mode: str, **attrs: Any) -> str:
    """Resize over the changed axes, two at a time (linear and cubic interpolation are separable)."""
    s, o = shape(op.inputs[0]), shape(op.outputs[0])
    axes = [a for a in _axes(op) if s[a] != o[a]]
    transform = op.attribs.get("coordinate_transform", "SYMMETRIC")
    if transform not in _TRANSFORM:
        raise Unsupported(f"coordinate_transform {transform!r}")
    x = ctx.value(op.inputs[0])
    if not axes:
        return ctx.node("Identity", [x])
    current = list(s)
    chunks = [sorted(axes)[max(k - 2, 0):k] for k in range(len(axes), 0, -2)]  # innermost pair first
    for chunk in chunks:
        x = _resize_axes(ctx, x, current, chunk, o, mode, _TRANSFORM[transform], attrs)
        for a in chunk:
            current[a] = o[a]
    return x


def _resize_axes(ctx: Context, x: str, s: list[int], axes: list[int], o: list[int], mode: str, transform: str,
                 attrs: dict[str, Any]) -> str:
    """Resize of one or two axes as a 4-D Resize of the two innermost axes (what onnxruntime interpolates):
    [others merged, 1, 1.., resized..]. The Reshape around the Transpose always changes the shape: onnxruntime's
    layout optimizer otherwise turns Transpose + Resize into an NHWC Resize, which it refuses for cubic
    downscaling; when the other axes are all 1 no Transpose is needed at all."""
    others = [a for a in range(len(s)) if a not in axes]
    p = product(s[a] for a in others)
    pad = [1] * (2 - len(axes))
    inner, outer = [s[a] for a in axes], [o[a] for a in axes]
    out_shape = [o[a] if a in axes else s[a] for a in range(len(s))]
    if p == 1:  # only the resized axes have extents: their order in memory is kept
        y = ctx.node("Resize", [ctx.reshape(x, [1, 1, *pad, *inner]), None, None, ctx.i64([1, 1, *pad, *outer], "sizes")],
                     mode=mode, coordinate_transformation_mode=transform, **attrs)
        return ctx.reshape(y, out_shape)
    lead = [p, 1, *pad]
    if [s[a] for a in others + axes] == lead + inner:
        lead = [1, p, *pad]
    x = ctx.reshape(ctx.transpose(x, others + axes), lead + inner)
    y = ctx.node("Resize", [x, None, None, ctx.i64(lead + outer, "sizes")], mode=mode,
                 coordinate_transformation_mode=transform, **attrs)
    y = ctx.reshape(y, [s[a] for a in others] + outer)
    return ctx.transpose(y, inverse(others + axes))


T = TypeVar("T")


def _per_axis(v: T | list[T] | tuple[T, ...], k: int) -> list[T]:
    v = list(v) if isinstance(v, list | tuple) else [v]
    return v * k if len(v) == 1 else v


@converter("image.nearest_resize", onnx="Gather per axis (the @lower formula's fp32 indices)")
def nearest_resize(ctx: Context, op: Operation) -> Results:
    """A Gather per resized axis with the source indices of the @lower formula, computed here in fp32 as
    the formula computes them (ONNX Resize computes the coordinates differently and rounds ties that fall
    exactly halfway, e.g. at scale 1.5, to the other side)."""
    rounding = op.attribs.get("rounding_method", "ROUND_PREFER_FLOOR")
    if rounding not in _ROUNDING:
        raise Unsupported(f"rounding_method {rounding!r}")
    s, axes = shape(op.inputs[0]), _axes(op)
    sizes = _per_axis(ints(op.attribs["size"]), len(axes))
    scales = _per_axis(env(op, "scale"), len(axes))
    offsets = _per_axis(env(op, "offset"), len(axes))
    x = ctx.value(op.inputs[0])
    for a, n, scale, offset in zip(axes, sizes, scales, offsets, strict=True):
        with np.errstate(all="ignore"):
            r = np.arange(n).astype(np.float32) * np.float32(float(scale)) + np.float32(float(offset))
            r = {"FLOOR": np.floor(r), "CEIL": np.ceil(r), "ROUND_PREFER_FLOOR": np.ceil(r - np.float32(0.5)),
                 "ROUND_PREFER_CEIL": np.floor(r + np.float32(0.5))}[rounding]
        idx = np.clip(r.astype(np.int64), 0, s[a] - 1)
        if n == s[a] and (idx == np.arange(n)).all():
            continue
        x = ctx.node("Gather", [x, ctx.i64(idx, "indices")], axis=a)
    return [x if x != ctx.value(op.inputs[0]) else ctx.node("Identity", [x])]


def _along_axis(ctx: Context, x: str, rank: int, axis: int, matrix: np.ndarray) -> str:
    """``matrix`` [out, in] applied along ``axis`` (moved last for a MatMul, then back)."""
    perm = [a for a in range(rank) if a != axis] + [axis]
    y = ctx.node("MatMul", [ctx.transpose(x, perm), ctx.const(matrix.T.astype(np.float32), None, "weights")])
    return ctx.transpose(y, inverse(perm))


@converter("image.linear_upsample", onnx="MatMul per axis (a fixed interpolation matrix)")
def linear_upsample(ctx: Context, op: Operation) -> Results:
    """The @lower formula is separable: along each upsampled axis a fixed [out, in] matrix (the tent filter
    scattered at stride ``factor``, border replication folded in), applied with a MatMul."""
    s, axes = shape(op.inputs[0]), _axes(op)
    factors = _per_axis(ints(op.attribs["factor"]), len(axes))
    symmetric = bool(op.attribs.get("symmetric", True))
    replicate = bool(op.attribs.get("replicate_border", True))
    x = ctx.value(op.inputs[0])
    for a, f in zip(axes, factors, strict=True):
        n = s[a]
        fs = 2 * f - f % 2 if symmetric else 2 * f - 1
        padding = (f + f // 2 if replicate else f // 2) if symmetric else f - 1
        offset = 0.5 if symmetric and f % 2 == 0 else 1.0
        c = int(symmetric)
        taps = np.asarray([1.0 - abs(float(j - f) + offset) / f for j in range(fs)], np.float32)
        m = np.zeros([f * n, n], np.float64)
        for i in range(n + c + 1 if replicate else n):
            src = min(max(i - c, 0), n - 1) if replicate else i
            for j in range(fs):
                o = f * i + j - padding
                if 0 <= o < f * n:
                    m[o, src] += taps[j]
        x = _along_axis(ctx, x, len(s), a, m)
    return [x]


@converter("image.linear_resize", onnx="Resize linear (antialias 0; two axes at a time)")
def linear_resize(ctx: Context, op: Operation) -> Results:
    return [_resize(ctx, op, "linear")]


@converter("image.cubic_resize", onnx="Resize cubic (antialias 0; two axes at a time)")
def cubic_resize(ctx: Context, op: Operation) -> Results:
    return [_resize(ctx, op, "cubic", cubic_coeff_a=float(op.attribs.get("coeff_a", -0.75)))]


_GRID_MODE = {"image._nearest_grid_sample": "nearest", "image._linear_grid_sample": "linear",
              "image._cubic_grid_sample": "cubic"}
_GRID_PADDING = {"ZEROS": "zeros", "REPLICATE": "border"}


@converter(*_GRID_MODE, onnx="GridSample (ZEROS, REPLICATE; 2-D before opset 20)")
def grid_sample(ctx: Context, op: Operation) -> Results:
    d = len(shape(op.inputs[0])) - 2
    if d != 2 and ctx.opset < 20:
        raise Unsupported(f"{d}-D grid sampling needs ONNX opset 20 (GridSample-16 is 2-D)")
    padding = op.attribs.get("padding", "ZEROS")
    if padding not in _GRID_PADDING:
        raise Unsupported(f"padding {padding!r} (ONNX GridSample reflects about the image border, SkriptND about "
                          "the border pixels)")
    mode = _GRID_MODE[op.op]
    if ctx.opset < 20:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return [ctx.node("GridSample", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])], mode=mode,
                     padding_mode=_GRID_PADDING[padding], align_corners=int(bool(op.attribs.get("aligned", False))))]


@converter("image.max_roi_pool", onnx="MaxRoiPool (2-D)")
def max_roi_pool(ctx: Context, op: Operation) -> Results:
    """ONNX MaxRoiPool (Fast R-CNN ROI pooling, as the SkriptND kernel defines it: coordinates rounded
    half away from zero, inclusive ends, bins floor/ceil, empty bins 0) for 2-D ROIs; the boxes are
    [batch index, x1, y1, x2, y2] there, [y1, x1, y2, x2] with a separate index here."""
    if len(shape(op.inputs[0])) != 4:
        raise Unsupported("ROI pooling other than 2-D (ONNX MaxRoiPool pools 2-D)")
    boxes = ctx.node("Gather", [ctx.value(op.inputs[1]), ctx.i64([1, 0, 3, 2], "xy_order")], axis=1)
    index = ctx.unsqueeze(ctx.cast(ctx.value(op.inputs[2]), "real"), [1])
    rois = ctx.node("Concat", [index, boxes], axis=1)
    return [ctx.node("MaxRoiPool", [ctx.value(op.inputs[0]), rois], pooled_shape=ints(op.attribs["output_size"]),
                     spatial_scale=1.0)]
