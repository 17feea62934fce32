"""Converters for the ``layout`` module: reshaping (all to one static Reshape), transposes, concatenation
and splitting, slicing, padding, tiling, broadcasting, gathers and scatters, casts and constant makers."""

from __future__ import annotations

from typing import Any

import numpy as np

from skriptnd.compose.extents import is_symbolic
from skriptnd.compose.ir import Operation
from skriptnd.interop.onnx_export.core import (
    NUMPY,
    Context,
    Results,
    Unsupported,
    converter,
    ints,
    norm_axes,
    shape,
)


@converter("layout.reshape", "layout.flatten", "layout.unflatten", "layout.squeeze", "layout.unsqueeze", onnx="Reshape to the static output shape")
def reshape(ctx: Context, op: Operation) -> Results:
    """Every reshaping operator is a Reshape to the output shape; with dynamic extents (issue 25), an extent
    that is the input's at the same position is 0 (ONNX copies it) and one other may be -1 (ONNX infers it:
    the output's size is the input's at every size)."""
    out = shape(op.outputs[0])
    if any(is_symbolic(d) for d in out):
        have = shape(op.inputs[0])
        dims = [0 if k < len(have) and is_symbolic(have[k]) and d.expr == have[k].expr else -1  # type: ignore[attr-defined]
                if is_symbolic(d) else d for k, d in enumerate(out)]
        if dims.count(-1) > 1 or 0 in [d for d in out if not is_symbolic(d)]:
            raise Unsupported(f"the target shape [{', '.join(map(str, out))}] has more than one dynamic extent "
                              "that ONNX's Reshape cannot copy from the input")
        out = dims
    return [ctx.reshape(ctx.value(op.inputs[0]), out)]


@converter("layout.transpose", onnx="Transpose")
def transpose(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.inputs[0]))
    axis = norm_axes(op.attribs.get("axis", 0), rank)[0]
    d = rank - axis
    perm = ints(op.attribs.get("perm")) or list(range(axis + d - 1, axis - 1, -1))
    full = list(range(axis)) + perm
    x = ctx.value(op.inputs[0])
    return [ctx.transpose(x, full) if full != list(range(rank)) else ctx.node("Identity", [x])]


@converter("layout.concat", onnx="Concat")
def concat(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.outputs[0]))
    xs = [ctx.value(t) for t in op.inputs[0]]
    return [ctx.node("Concat", xs, axis=norm_axes(op.attribs["axis"], rank)[0])]


@converter("layout.split", onnx="Split")
def split(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axis = norm_axes(op.attribs["axis"], len(s))[0]
    sizes = [shape(t)[axis] for t in op.outputs[0]]
    if len(sizes) == 1:
        return [[ctx.node("Identity", [ctx.value(op.inputs[0])])]]
    outs = ctx.node("Split", [ctx.value(op.inputs[0]), ctx.i64(sizes, "split")], outputs=len(sizes), axis=axis)
    return [list(outs)]


@converter("layout.stack", onnx="Unsqueeze, Concat")
def stack(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.outputs[0]))
    axis = norm_axes(op.attribs["axis"], rank)[0]
    xs = [ctx.value(t) for t in op.inputs[0]]
    if not op.attribs.get("squeeze", False):
        xs = [ctx.unsqueeze(x, [axis]) for x in xs]
    return [ctx.node("Concat", xs, axis=axis) if len(xs) > 1 else ctx.node("Identity", xs)]


@converter("layout.unstack", onnx="Split, Squeeze")
def unstack(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axis = norm_axes(op.attribs["axis"], len(s))[0]
    n = s[axis]
    x = ctx.value(op.inputs[0])
    parts = ctx.node("Split", [x, ctx.i64([1] * n, "split")], outputs=n, axis=axis) if n > 1 else [x]
    if op.attribs.get("squeeze", True):
        parts = [ctx.squeeze(p, [axis]) for p in parts]
    elif n == 1:
        parts = [ctx.node("Identity", [x])]
    return [list(parts)]


@converter("layout.tile", onnx="Tile")
def tile(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axes = norm_axes(op.attribs.get("axes"), len(s)) if op.attribs.get("axes") is not None else list(range(len(s)))
    reps = [1] * len(s)
    for a, r in zip(axes, ints(op.attribs["repeats"]), strict=True):
        reps[a] = r
    return [ctx.node("Tile", [ctx.value(op.inputs[0]), ctx.i64(reps, "repeats")])]


@converter("layout.broadcast", onnx="Expand")
def broadcast(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Expand", [ctx.value(op.inputs[0]), ctx.i64(shape(op.outputs[0]))])]


@converter("layout.uniform", onnx="Expand")
def uniform(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Expand", [ctx.value(op.inputs[0]), ctx.i64(shape(op.outputs[0]))])]


@converter("layout.slice", onnx="Slice")
def slice_(ctx: Context, op: Operation) -> Results:
    """output[i] = input[begin + stride * i] along each axis, for the output's (static) extents."""
    s, o = shape(op.inputs[0]), shape(op.outputs[0])
    axes = norm_axes(op.attribs.get("axes"), len(s)) if op.attribs.get("axes") is not None else list(range(len(s)))
    begin, stride = ints(op.attribs["begin"]), ints(op.attribs.get("stride")) or [1] * len(axes)
    if len(stride) == 1 and len(axes) > 1:
        stride = stride * len(axes)
    starts, ends = [], []
    for a, b, st in zip(axes, begin, stride, strict=True):
        if o[a] == 0:
            raise Unsupported("an empty slice")
        if b < 0 or b >= s[a]:
            raise Unsupported(f"slice begin {b} outside the axis (size {s[a]})")
        e = b + st * o[a]
        starts.append(b)
        ends.append(e if e >= 0 else -s[a] - 1)
    return [ctx.slice(ctx.value(op.inputs[0]), starts, ends, axes, stride)]


_PAD_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "REPLICATE": "edge"}


@converter("layout.pad", onnx="Pad (CONSTANT, REFLECT, REPLICATE = edge); SYMMETRIC as reversed Slices + Concat")
def pad(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    method = op.attribs.get("method", "CONSTANT")
    axes = norm_axes(op.attribs.get("axes"), len(s)) if op.attribs.get("axes") is not None else list(range(len(s)))
    padding = ints(op.attribs["padding"])
    k = len(axes)
    if method == "SYMMETRIC":
        return [_symmetric_pad(ctx, ctx.value(op.inputs[0]), s, axes, padding[:k], padding[k:])]
    if method not in _PAD_MODES:
        raise Unsupported(f"padding method {method!r}")
    value = None
    if method == "CONSTANT" and len(op.inputs) > 1 and op.inputs[1] is not None:
        value = ctx.value(op.inputs[1])
    x = ctx.value(op.inputs[0])
    if method == "REFLECT" and any(p >= s[a] for a, p in zip(axes * 2, padding, strict=True)):
        raise Unsupported("reflect padding as wide as the axis")
    pads = [0] * (2 * len(s))
    for j, a in enumerate(axes):
        pads[a], pads[len(s) + a] = padding[j], padding[k + j]
    return [ctx.node("Pad", [x, ctx.i64(pads, "pads"), value], mode=_PAD_MODES[method])]


def _symmetric_pad(ctx: Context, x: str, s: list[int], axes: list[int], before: list[int], after: list[int]) -> str:
    """Mirror padding that repeats the border item (ONNX Pad has none): per axis, the reversed first
    ``before`` and last ``after`` items concatenated around the input."""
    for a, lo, hi in zip(axes, before, after, strict=True):
        n = s[a]
        if lo > n or hi > n:
            raise Unsupported(f"symmetric padding wider than the axis (size {n})")
        parts = []
        if lo:
            parts.append(ctx.slice(x, [lo - 1], [-n - 1], [a], [-1]))
        parts.append(x)
        if hi:
            end = n - 1 - hi  # exclusive; -1 would mean the last item to ONNX: before-the-start is -n-1
            parts.append(ctx.slice(x, [n - 1], [end if end >= 0 else -n - 1], [a], [-1]))
        if len(parts) > 1:
            x = ctx.node("Concat", parts, axis=a)
    return x


@converter("layout.gather", onnx="Gather")
def gather(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.inputs[0]))
    return [ctx.node("Gather", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])],
                     axis=norm_axes(op.attribs["axis"], rank)[0])]


@converter("ops.index.gather_elements", onnx="GatherElements")
def gather_elements(ctx: Context, op: Operation) -> Results:
    """The operator ``sknd import`` writes for ONNX GatherElements (in the model's ops/index.sknd: the standard
    library has none), mapped back to it: without this, every imported BERT was refused (E0840)."""
    rank = len(shape(op.inputs[0]))
    return [ctx.node("GatherElements", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])],
                     axis=norm_axes(op.attribs["axis"], rank)[0])]


@converter("layout.gather_nd", onnx="GatherND")
def gather_nd(ctx: Context, op: Operation) -> Results:
    return [ctx.node("GatherND", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])],
                     batch_dims=int(op.attribs.get("batch_dims", 0)))]


@converter("layout.scatter", onnx="ScatterElements")
def scatter(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.inputs[0]))
    return [ctx.node("ScatterElements", [ctx.value(t) for t in op.inputs[:3]],
                     axis=norm_axes(op.attribs["axis"], rank)[0])]


@converter("layout.scatter_nd", onnx="ScatterND (batch_dims 0)")
def scatter_nd(ctx: Context, op: Operation) -> Results:
    if int(op.attribs.get("batch_dims", 0)) != 0:
        raise Unsupported("batch_dims other than 0 (ONNX ScatterND has none)")
    return [ctx.node("ScatterND", [ctx.value(t) for t in op.inputs[:3]])]


@converter("layout.cast", onnx="Cast")
def cast(ctx: Context, op: Operation) -> Results:
    x = ctx.value(op.inputs[0])
    out = op.outputs[0].dtype
    if out not in NUMPY:
        raise Unsupported(f"a cast to {out}")
    return [ctx.cast(x, out)]


def _constant(ctx: Context, op: Operation, a: np.ndarray) -> list[Any]:
    t = op.outputs[0]
    return [ctx.node("Identity", [ctx.const(np.asarray(a, NUMPY[t.dtype]).reshape(shape(t)), None, "value")])]


@converter("layout.shape", onnx="an initializer")
def shape_of(ctx: Context, op: Operation) -> Results:
    return _constant(ctx, op, np.asarray(shape(op.inputs[0]), np.int64))


@converter("layout.tensor", onnx="an initializer")
def tensor(ctx: Context, op: Operation) -> Results:
    t = op.outputs[0]
    value = op.attribs.get("value")
    a = np.asarray(value if isinstance(value, list | tuple) else [value], NUMPY.get(t.dtype, np.float32))
    return _constant(ctx, op, np.broadcast_to(a, shape(t)) if a.size == 1 else a)


@converter("layout.range", onnx="an initializer")
def range_(ctx: Context, op: Operation) -> Results:
    t = op.outputs[0]
    first, stride = op.attribs["first"], op.attribs.get("stride", 1)
    n = shape(t)[0]
    return _constant(ctx, op, np.asarray([first + stride * i for i in range(n)]))


@converter("layout.nonzero", onnx="NonZero")
def nonzero(ctx: Context, op: Operation) -> Results:
    return [ctx.node("NonZero", [ctx.value(op.inputs[0])])]
