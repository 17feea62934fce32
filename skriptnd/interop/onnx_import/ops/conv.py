"""Convolutions: Conv -> nn.conv, ConvTranspose -> nn.deconv (NCX data and filter layouts, as ONNX)."""

from __future__ import annotations

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._window import window
from skriptnd.interop.onnx_import.registry import converter


@converter("Conv", target="`nn.conv{stride, dilation, padding, groups}`",
           caveats="auto_pad SAME_UPPER/SAME_LOWER/VALID become explicit paddings")
def _conv(ctx: Context, node: Node) -> None:
    x, w = node.input(0), node.input(1)
    wshape = ctx.static_shape(w)
    kernel = list(node.attr("kernel_shape", wshape[2:]))
    spatial = ctx.static_shape(x, axes=range(2, ctx.rank(x)))[2:] if node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID") else \
        tuple(0 for _ in kernel)
    strides, dilations, pads = window(ctx, node, spatial, kernel)
    attribs: dict = {"stride": strides, "dilation": dilations, "padding": pads}
    for key in ("stride", "dilation"):
        if all(v == 1 for v in attribs[key]):
            del attribs[key]
    if node.attr("group", 1) != 1:
        attribs["groups"] = int(node.attr("group"))
    ctx.emit("nn.conv", [ctx.arg(x), ctx.arg(w), ctx.arg(node.input(2))], attribs)


@converter("ConvTranspose", target="`nn.deconv{stride, dilation, padding, output_size, groups}`",
           caveats="output_padding / output_shape become an explicit output_size")
def _deconv(ctx: Context, node: Node) -> None:
    x, w = node.input(0), node.input(1)
    wshape = ctx.static_shape(w)
    kernel = list(node.attr("kernel_shape", wshape[2:]))
    spatial = ctx.static_shape(x, axes=range(2, ctx.rank(x)))[2:]
    d = len(kernel)
    strides = list(node.attr("strides", [1] * d))
    dilations = list(node.attr("dilations", [1] * d))
    out_shape = ctx.static_shape(node.outputs[0], axes=range(2, 2 + d))[2:]
    output_padding = list(node.attr("output_padding", [0] * d))
    # the total padding follows from the output size: out = s (in - 1) + op + fd - pads
    totals = [strides[i] * (spatial[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1 - out_shape[i]
              for i in range(d)]
    if "output_shape" in node.attrs or node.attr("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        upper = node.attr("auto_pad", "NOTSET") == "SAME_UPPER"  # else the begin takes the larger half
        begin = [t // 2 if upper else t - t // 2 for t in totals]
        pads = begin + [t - b for t, b in zip(totals, begin, strict=True)]
    elif node.attr("auto_pad", "NOTSET") == "VALID":
        pads = [0] * (2 * d)
    else:
        pads = list(node.attr("pads", [0] * (2 * d)))
    if any(p < 0 for p in pads):
        raise ImportProblem("E0807", f"{node.where}: output_shape larger than the full transposed convolution "
                            "(negative padding) is not supported")
    attribs = {"stride": strides, "dilation": dilations, "padding": pads, "output_size": list(out_shape)}
    if node.attr("group", 1) != 1:
        attribs["groups"] = int(node.attr("group"))
    ctx.emit("nn.deconv", [ctx.arg(x), ctx.arg(w), ctx.arg(node.input(2))], attribs)
