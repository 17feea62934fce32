"""Convolutions: conv, deconv (transposed, `output_shape`), groups (0 = depthwise), border modes, and
separable_conv/separable_deconv through their NNEF definitions."""

from __future__ import annotations

from typing import Any

from skriptnd.interop.nnef_import.context import Arg, Context, Operation
from skriptnd.interop.nnef_import.ops.window import PAD_METHODS, defaults, explicit_padding, flat, pre_pad
from skriptnd.interop.nnef_import.registry import converter, expanded

expanded("NNEF definition: a depthwise conv (groups = 0) then a 1x1 conv", "separable_conv")
expanded("NNEF definition: a 1x1 deconv then a depthwise deconv (groups = 0)", "separable_deconv")


def _bias(ctx: Context, bias: Arg, channels: int) -> tuple[Any, Any]:
    """(argument for the operator's bias, tensor to add afterwards) from NNEF's [1, C] / scalar bias."""
    if not ctx.is_tensor(bias):
        if float(bias) == 0.0:
            return None, None
        return None, bias
    shape = ctx.shape(bias)
    if len(shape) == 2 and shape[0] == 1 and shape[1] == channels:
        return ctx.squeeze_to(bias, 1, "bias"), None
    if len(shape) == 1 and shape[0] == channels:
        return ctx.arg(bias), None
    return None, bias


def _add_bias(ctx: Context, result: str, bias: Arg, out: str, rank: int) -> None:
    """result + bias with NNEF broadcasting (the bias is aligned at the first axis)."""
    align = {"rhs_align": 0} if ctx.is_tensor(bias) and 0 < ctx.rank(bias) < rank else {}
    ctx.emit(out, "math.add", [result, ctx.arg(bias)], align)


def _conv(ctx: Context, op: Operation, transposed: bool) -> None:
    x, w = op.inputs["input"], op.inputs["filter"]
    xs, ws, ys = ctx.shape(x), ctx.shape(w), ctx.shape(op.outputs["output"])
    d = len(xs) - 2
    stride, dilation = defaults(op.attribs["stride"], d), defaults(op.attribs["dilation"], d)
    big, small = (ys[2:], xs[2:]) if transposed else (xs[2:], ys[2:])
    pads = explicit_padding(op.attribs["padding"], big, small, ws[2:], stride, dilation)
    border = op.attribs["border"]
    groups = int(op.attribs["groups"])
    if groups == 0:  # NNEF: the output channels for a deconv with output_shape, else the input channels
        groups = ys[1] if transposed and op.attribs["output_shape"] else xs[1]
    out_channels = ys[1]
    bias_arg, bias_after = _bias(ctx, op.inputs["bias"], out_channels)
    source = ctx.arg(x)
    if border in PAD_METHODS and not transposed:
        source = pre_pad(ctx, source, list(range(2, 2 + d)), pads, border)
        pads = [(0, 0)] * d
    elif border != "constant" and any(p or q for p, q in pads):
        raise ctx.problem(f"border '{border}' is not expressible for {'a transposed' if transposed else 'a'} "
                          "convolution with padding (constant, reflect, replicate and reflect-even are)", "border")
    attribs: dict[str, Any] = {"stride": stride, "dilation": dilation, "padding": flat(pads), "groups": groups}
    if transposed:
        attribs["output_size"] = list(big)
    out = ctx.output()
    result = ctx.tmp("conv") if bias_after is not None else out
    ctx.emit(result, "nn.deconv" if transposed else "nn.conv", [source, ctx.arg(w), bias_arg], attribs)
    if bias_after is not None:
        _add_bias(ctx, result, bias_after, out, len(ys))


@converter("conv", target="nn.conv",
           note="explicit padding always; groups 0 -> input channels; border reflect/replicate/reflect-even "
                "as a layout.pad first; bias [1, C] squeezed")
def conv(ctx: Context, op: Operation) -> None:
    _conv(ctx, op, transposed=False)


@converter("deconv", target="nn.deconv",
           note="explicit padding and output_size (from output_shape or inferred); border must be constant")
def deconv(ctx: Context, op: Operation) -> None:
    _conv(ctx, op, transposed=True)
