"""Pooling: MaxPool/AveragePool/LpPool -> nn.*_pool with explicit paddings; Global*Pool -> math.*_reduce."""

from __future__ import annotations

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._window import window
from skriptnd.interop.onnx_import.registry import converter


def _pool_attribs(ctx: Context, node: Node) -> dict:
    kernel = list(node.attr("kernel_shape"))
    shape = ctx.static_shape(node.input(0), axes=range(2, ctx.rank(node.input(0))))  # the batch may be symbolic
    spatial = shape[2:]
    strides, dilations, pads = window(ctx, node, spatial, kernel)
    attribs: dict = {"size": kernel}
    if any(s != 1 for s in strides):
        attribs["stride"] = strides
    if any(d != 1 for d in dilations):
        attribs["dilation"] = dilations
    attribs["padding"] = pads
    if node.attr("ceil_mode", 0):
        # ONNX (and PyTorch) drop a last window that would start in the end padding; where that makes
        # ceil mode equal to floor mode, floor mode is written
        d = len(kernel)
        extent = [spatial[i] + pads[i] + pads[d + i] - ((kernel[i] - 1) * dilations[i] + 1) for i in range(d)]
        floor_out = [extent[i] // strides[i] + 1 for i in range(d)]
        ceil_out = [-(-extent[i] // strides[i]) + 1 for i in range(d)]
        onnx_out = [c - 1 if (c - 1) * strides[i] >= spatial[i] + pads[i] else c for i, c in enumerate(ceil_out)]
        out = ctx.values.get(node.outputs[0])
        if out is not None and out.shape is not None:  # onnx's shape inference keeps the dropped window
            out.shape = tuple(out.shape[:2]) + tuple(onnx_out)
        if onnx_out != floor_out:
            if onnx_out != ceil_out:
                # some axes keep their last window, others drop it: grow the end padding of the others
                raise ImportProblem("E0807", f"{node.where}: ceil_mode with a last window that starts in the "
                                    "padding on some axes only is not supported")
            attribs["ceil_mode"] = True
    return attribs


@converter("MaxPool", target="`nn.max_pool{size, stride, dilation, padding, ceil_mode}`",
           caveats="the Indices output and storage_order are not supported")
def _max_pool(ctx: Context, node: Node) -> None:
    if len(node.outputs) > 1 and node.outputs[1]:
        raise ImportProblem("E0807", f"{node.where}: the Indices output of MaxPool is not supported")
    if ctx.dtype(node.input(0)) != "real":  # 8-bit images: pooled as reals (exact), cast back
        x = ctx.emit("layout.cast", [ctx.arg(node.input(0))], outputs=ctx.fresh("real"), types=["real"], label=False)
        y = ctx.emit("nn.max_pool", [x], _pool_attribs(ctx, node), outputs=ctx.fresh("pooled"), label=False)
        ctx.emit("layout.cast", [y], types=["int"])
        return
    ctx.emit("nn.max_pool", [ctx.arg(node.input(0))], _pool_attribs(ctx, node))


@converter("AveragePool", target="`nn.avg_pool{size, stride, dilation, padding, ignore_border, ceil_mode}`",
           caveats="count_include_pad=0 is ignore_border=true")
def _avg_pool(ctx: Context, node: Node) -> None:
    attribs = _pool_attribs(ctx, node)
    attribs["ignore_border"] = not node.attr("count_include_pad", 0)
    if attribs.get("ceil_mode") and not attribs["ignore_border"]:
        raise ImportProblem("E0807", f"{node.where}: ceil_mode=1 with count_include_pad=1 is not supported "
                            "(ONNX does not count the window's part past the padding)")
    ctx.emit("nn.avg_pool", [ctx.arg(node.input(0))], attribs)


@converter("LpPool", target="`nn.lp_pool{size, stride, padding, p}`")
def _lp_pool(ctx: Context, node: Node) -> None:
    attribs = _pool_attribs(ctx, node)
    attribs["p"] = float(node.attr("p", 2))
    ctx.emit("nn.lp_pool", [ctx.arg(node.input(0))], attribs)


_GLOBAL = {"GlobalAveragePool": "math.mean_reduce", "GlobalMaxPool": "math.max_reduce",
           "GlobalLpPool": "math.lp_reduce"}


@converter(*_GLOBAL, target="`math.mean_reduce`/`math.max_reduce`/`math.lp_reduce` over the spatial axes")
def _global(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    attribs: dict = {"axes": list(range(2, rank))}
    if node.op_type == "GlobalLpPool":
        attribs["p"] = float(node.attr("p", 2))
    ctx.emit(_GLOBAL[node.op_type], [ctx.arg(node.input(0))], attribs)
