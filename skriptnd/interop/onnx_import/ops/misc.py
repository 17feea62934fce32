"""Operators that are identities at inference (Dropout), top-k, cumulative sums, non-max suppression."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter
from skriptnd.interop.writer import Expr


@converter("Dropout", target="`math.iden` (inference)", caveats="training_mode=1 only with ratio 0; the mask is all true")
def _dropout(ctx: Context, node: Node) -> None:
    training = node.input(2) and (ctx.const(node.input(2)) is None or bool(ctx.const(node.input(2))))
    ratio = ctx.const(node.input(1)) if node.input(1) else np.array(0.5)
    if training and ratio is None:
        ctx.need_const(node.input(1), "ratio (in training mode)")
    if training and float(ratio) != 0.0:
        raise ImportProblem("E0807", f"{node.where}: training_mode Dropout (random) is not supported")
    x = ctx.arg(node.input(0))
    ctx.emit("math.iden", [x])
    if len(node.outputs) > 1 and node.outputs[1]:  # inference: the mask keeps everything
        ctx.emit("layout.uniform", [ctx.literal_arg(np.array(True), "keep")], {"shape": list(ctx.static_shape(
            node.input(0)))}, outputs=ctx.out(1), types=["bool"], label=False)


@converter("TopK", target="`algo.top_k{k, axis, largest, sorted}`",
           caveats="K given as a graph input becomes a graph attribute (given at run time)", params=(1,))
def _top_k(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    axis = norm_axis(int(node.attr("axis", -1)), rank)
    k: int | Expr | None = ctx.param_scalar(node.input(1))
    if k is not None:  # the outputs' extent along the axis is K
        extents = ctx.extent_texts(node.input(0))
        for out in node.outputs[:2]:
            ctx.symbolic_shapes[out] = [Expr(e) for e in extents[:axis]] + [k] + \
                [Expr(e) for e in extents[axis + 1:]]
    else:
        k = int(ctx.need_const(node.input(1), "K").reshape(-1)[0])
    attribs = {"k": k, "axis": axis}
    if not node.attr("largest", 1):
        attribs["largest"] = False
    if not node.attr("sorted", 1):
        attribs["sorted"] = False
    ctx.emit("algo.top_k", [ctx.arg(node.input(0))], attribs, outputs=[ctx.out(0), ctx.out(1)])


@converter("CumSum", target="`math.cumsum{axis, exclusive, reverse}`",
           caveats="axis given as a graph input becomes a graph attribute (given at run time)", params=(1,))
def _cumsum(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    axis = ctx.param_scalar(node.input(1))
    attribs: dict = {"axis": Expr(f"({axis.text} + {rank}) % {rank}") if axis is not None else
                     norm_axis(int(ctx.need_const(node.input(1), "axis").reshape(-1)[0]), rank)}
    if node.attr("exclusive", 0):
        attribs["exclusive"] = True
    if node.attr("reverse", 0):
        attribs["reverse"] = True
    ctx.emit("math.cumsum", [ctx.arg(node.input(0))], attribs)


@converter("NonMaxSuppression", target="`algo.nonmax_suppress{box_format, max_outputs_per_class, "
           "iou_threshold, score_threshold}`", caveats="the limits and thresholds given as graph inputs become "
           "graph attributes (given at run time)", params=(2, 3, 4))
def _nms(ctx: Context, node: Node) -> None:
    attribs: dict = {}
    if node.attr("center_point_box", 0):
        attribs["box_format"] = "CENTER"
    for i, what, name, cast in ((2, "max_output_boxes_per_class", "max_outputs_per_class", int),
                                (3, "iou_threshold", "iou_threshold", float),
                                (4, "score_threshold", "score_threshold", float)):
        param = ctx.param_scalar(node.input(i))
        if param is not None and ctx.dtype(node.input(i)) == ("int" if cast is int else "real"):
            attribs[name] = param
        elif node.input(i):
            attribs[name] = cast(ctx.need_const(node.input(i), what).reshape(-1)[0])
    attribs.setdefault("max_outputs_per_class", 0)
    ctx.emit("algo.nonmax_suppress", [ctx.arg(node.input(0)), ctx.arg(node.input(1))], attribs)


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _iota(ctx: Context, n: int, axis: int, rank: int) -> str:
    """0..n-1 along `axis` of a rank-`rank` constant (1 elsewhere), for one-hot comparisons."""
    shape = [1] * rank
    shape[axis] = n
    return ctx.literal_arg(np.arange(n, dtype=np.int64).reshape(shape), "iota")


@converter("Shrink", target="`math.select` of x < -lambd, x > lambd")
def _shrink(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    kind = ctx.dtype(node.input(0))
    typ = np.float32 if kind == "real" else np.int64
    bias, lambd = node.attr("bias", 0.0), node.attr("lambd", 0.5)

    def k(v: float) -> str:
        return ctx.literal_arg(np.array(v).astype(typ), "k")

    low = _tmp(ctx, "math.lt", [x, k(-lambd)])
    high = _tmp(ctx, "math.gt", [x, k(lambd)])
    inner = _tmp(ctx, "math.select", [high, _tmp(ctx, "math.sub", [x, k(bias)]), k(0)])
    ctx.emit("math.select", [low, _tmp(ctx, "math.add", [x, k(bias)]), inner])


@converter("Hardmax", target="`math.argmax` then a one-hot comparison (`math.eq`, `layout.cast`)")
def _hardmax(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    axis = norm_axis(int(node.attr("axis", -1)), rank)
    shape = ctx.static_shape(node.input(0), axes=[axis])  # only the one-hot axis must be a number
    index = _tmp(ctx, "math.argmax", [ctx.arg(node.input(0))], axis=axis)
    hot = _tmp(ctx, "math.eq", [index, _iota(ctx, shape[axis], axis, len(shape))])
    ctx.emit("layout.cast", [hot], types=["real"])


@converter("OneHot", target="`math.eq` with an index range, then `math.select`(on, off)",
           caveats="depth given as a graph input becomes a graph attribute (given at run time; the index range "
           "is then a `layout.range`)", params=(1,))
def _one_hot(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0)) + 1
    axis = norm_axis(int(node.attr("axis", -1)), rank)
    param = ctx.param_scalar(node.input(1))
    depth: int | Expr
    if param is not None:  # `int(...)`: ONNX allows a real depth (it is truncated)
        depth = param if ctx.dtype(node.input(1)) == "int" else Expr(f"int({param.text})")
        extents = ctx.extent_texts(node.input(0))
        ctx.symbolic_shapes[node.outputs[0]] = [Expr(e) for e in extents[:axis]] + [depth] + \
            [Expr(e) for e in extents[axis:]]
        n: str | Expr = depth
        iota = _tmp(ctx, "layout.range", [], first=0, last=depth)
        iota = _tmp(ctx, "layout.reshape", [iota], shape=[1] * axis + [depth] + [1] * (rank - axis - 1))
    else:
        depth = int(ctx.need_const(node.input(1), "depth").reshape(-1)[0])
        n, iota = ctx.literal_arg(np.array(depth, np.int64), "depth"), _iota(ctx, depth, axis, rank)
    index = ctx.arg(node.input(0))
    if ctx.dtype(node.input(0)) != "int":
        index = ctx.emit("layout.cast", [index], outputs=ctx.fresh("index"), types=["int"], label=False)
    zero = ctx.literal_arg(np.array(0, np.int64), "zero")
    index = _tmp(ctx, "math.select", [_tmp(ctx, "math.lt", [index, zero]), _tmp(ctx, "math.add", [index, n]), index])
    hot = _tmp(ctx, "math.eq", [_tmp(ctx, "layout.unsqueeze", [index], axes=[axis]), iota])
    values = ctx.const(node.input(2))
    if values is not None:
        off, on = (ctx.literal_arg(v, "value") for v in values.reshape(-1)[:2])
    else:
        off, on = ctx.fresh("off"), ctx.fresh("on")
        ctx.emit("layout.split", [ctx.arg(node.input(2))], {"axis": 0, "count": 2}, outputs=[[off, on]], label=False)
        off, on = (_tmp(ctx, "layout.reshape", [v], shape=[]) for v in (off, on))
    ctx.emit("math.select", [hot, on, off])


@converter("Trilu", target="`math.select` with a constant triangular mask",
           caveats="k given as a graph input becomes a graph attribute: the mask compares the constant column - "
           "row offsets with it", params=(1,))
def _trilu(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    shape = ctx.static_shape(node.input(0), axes=[rank - 2, rank - 1])  # the matrices' extents; batches may be symbolic
    rows, cols = np.arange(shape[-2])[:, None], np.arange(shape[-1])[None, :]
    zero = np.array(0, np.float32 if ctx.dtype(node.input(0)) == "real" else np.int64)
    k_param = ctx.param_scalar(node.input(1))
    if k_param is not None:
        offsets = ctx.literal_arg((cols - rows).astype(np.int64), "offsets")
        mask = ctx.emit("math.ge" if node.attr("upper", 1) else "math.le", [offsets, k_param],
                        outputs=ctx.fresh("mask"), label=False)
    else:
        k = int(ctx.need_const(node.input(1), "k").reshape(-1)[0]) if node.input(1) else 0
        mask = ctx.literal_arg((cols - rows >= k) if node.attr("upper", 1) else (cols - rows <= k), "mask")
    ctx.emit("math.select", [mask, ctx.arg(node.input(0)), ctx.literal_arg(zero, "zero")])


@converter("EyeLike", target="a constant (`math.iden` of it)")
def _eye_like(ctx: Context, node: Node) -> None:
    n, m = ctx.static_shape(node.input(0))
    kind = ctx.dtype(node.outputs[0])
    eye = np.eye(n, m, int(node.attr("k", 0))).astype({"real": np.float32, "int": np.int64, "bool": np.bool_}[kind])
    ctx.emit("math.iden", [ctx.literal_arg(eye, "eye")])


_GRID_MODES = {"bilinear": "LINEAR", "linear": "LINEAR", "nearest": "NEAREST", "bicubic": "CUBIC", "cubic": "CUBIC"}
_GRID_PADDING = {"zeros": "ZEROS", "border": "REPLICATE", "reflection": "REFLECT"}


@converter("GridSample", target="`image.grid_sample{mode, padding, aligned}`",
           caveats="linear and cubic modes; zeros and border padding")
def _grid_sample(ctx: Context, node: Node) -> None:
    if node.attr("mode", "linear") == "nearest" or node.attr("padding_mode", "zeros") == "reflection":
        raise ImportProblem("E0807", f"{node.where}: GridSample with mode 'nearest' or padding_mode 'reflection' "
                            "is not supported (SkriptND rounds and reflects differently)")
    attribs = {"mode": _GRID_MODES[node.attr("mode", "linear")],
               "padding": _GRID_PADDING[node.attr("padding_mode", "zeros")],
               "aligned": bool(node.attr("align_corners", 0))}
    ctx.emit("image.grid_sample", [ctx.arg(node.input(0)), ctx.arg(node.input(1))], attribs)
