"""Convolutions in TFLite's layouts: CONV_2D -> nn.conv{data_format='NXC', filter_format='NXC'} ([out, h, w, in]
filters), DEPTHWISE_CONV_2D -> nn.conv{filter_format='CXN', groups=0} ([1, h, w, in * multiplier] filters,
one group per input channel); SAME padding written out explicitly, the fused activation after."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._hybrid import (
    asymmetric,
    finish,
    hybrid_weights,
    quantize_input,
    rescale,
)
from skriptnd.interop.tflite_import.ops._util import paddings, tmp
from skriptnd.interop.tflite_import.quantized import entry, is_quantized, real_value
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


def _window(ctx: Context, kernel: list[int], stride_slots: tuple[int, int], dilation_slots: tuple[int, int]) \
        -> dict:
    x = ctx.shape(ctx.input(0))
    stride = [ctx.option(stride_slots[1], 1), ctx.option(stride_slots[0], 1)]  # (h, w); the table says w first
    dilation = [ctx.option(dilation_slots[1], 1), ctx.option(dilation_slots[0], 1)]
    if min(stride + dilation) < 1:
        raise ImportProblem("E0863", f"{ctx.here}: stride {stride} / dilation {dilation} must be positive")
    attribs: dict = {"data_format": "NXC", "padding": paddings(ctx, ctx.option(0, 0, "b"), x[1:3], kernel,
                                                                stride, dilation)}
    if stride != [1, 1]:
        attribs["stride"] = stride
    if dilation != [1, 1]:
        attribs["dilation"] = dilation
    return attribs


def _check_rank(ctx: Context) -> None:
    if ctx.rank(ctx.input(0)) != 4 or ctx.rank(ctx.input(1)) != 4:
        raise ImportProblem("E0863", f"{ctx.here}: input and filter must have rank 4 (NHWC, OHWI)")


@converter("CONV_2D", target="`nn.conv{data_format='NXC', filter_format='NXC', stride, dilation, padding, groups}`",
           caveats="grouped convolutions (filter channels dividing the input's) become `groups`; int8 filter "
           "codes with a float input: LiteRT's hybrid kernel (dynamic-range)")
def _conv(ctx: Context, op: Operator) -> None:
    _check_rank(ctx)
    w = ctx.shape(ctx.input(1))
    attribs = _window(ctx, list(w[1:3]), (1, 2), (4, 5))
    attribs["filter_format"] = "NXC"
    channels = ctx.shape(ctx.input(0))[3]
    if channels != w[3]:
        if w[3] == 0 or channels % w[3]:
            raise ImportProblem("E0863", f"{ctx.here}: {channels} input channels for a filter of {w[3]}")
        attribs["groups"] = channels // w[3]
    _convolve(ctx, attribs, ctx.option(3, 0, "b"))


def _convolve(ctx: Context, attribs: dict, activation: int, depthwise: bool = False) -> None:
    """nn.conv of the operator's input, filter and bias; with int8 filter codes and a float input (dynamic-range
    quantization), LiteRT's hybrid kernel: the input quantized per batch item (the reference kernel: asymmetric
    with per-channel filter scales, symmetric with one), an integer convolution, rescaled before the bias. A
    static quantized model's depthwise filter is written channels-first (`_channels_first`)."""
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    hybrid = hybrid_weights(ctx, x, w)
    if hybrid is None:
        filt = _channels_first(ctx, w, attribs) if depthwise else ctx.arg(w)
        ctx.activate("nn.conv", [ctx.arg(x), filt, ctx.arg(b)], attribs, activation=activation)
        return
    codes, scale = quantize_input(ctx, ctx.arg(x), [1, 2, 3], asymmetric(ctx, hybrid.axis >= 0))
    acc = tmp(ctx, "nn.conv", [codes, ctx.literal_arg(hybrid.codes, "wcodes")], attribs)
    finish(ctx, rescale(ctx, acc, scale, hybrid, [1, 1, 1, -1]), b, activation)


@converter("DEPTHWISE_CONV_2D", target="`nn.conv{data_format='NXC', filter_format='CXN', groups=0, stride, dilation, "
           "padding}`", caveats="the depth multiplier follows from the filter's last extent; int8 filter codes with a "
           "float input: LiteRT's hybrid kernel (dynamic-range)")
def _depthwise(ctx: Context, op: Operator) -> None:
    _check_rank(ctx)
    w = ctx.shape(ctx.input(1))
    attribs = _window(ctx, list(w[1:3]), (1, 2), (5, 6))
    attribs.update({"filter_format": "CXN", "groups": 0})
    channels = ctx.shape(ctx.input(0))[3]
    if w[0] != 1 or channels == 0 or w[3] % channels:
        raise ImportProblem("E0863", f"{ctx.here}: a depthwise filter of shape {list(w)} for {channels} channels")
    _convolve(ctx, attribs, ctx.option(4, 0, "b"), depthwise=True)


def _channels_first(ctx: Context, index: int, attribs: dict) -> str | None:
    """A depthwise filter quantized per channel (along its last axis, as TFLite stores [1, h, w, channels]) in a
    static quantized model: written [channels, 1, h, w] (`filter_format` NCX) with its @quantize entry along
    axis 0, the output channels, as the integer lowering takes per-channel filters."""
    t = ctx.tensor(index)
    value = ctx.const(index)
    if not (ctx.static and value is not None and is_quantized(t) and t.quantization is not None and
            len(t.quantization.scale) > 1):
        return ctx.arg(index)
    name = ctx.literal_arg(real_value(t, value).transpose(3, 0, 1, 2), "filter")
    ctx.quantize[name] = entry(name, t, axis=0)
    attribs["filter_format"] = "NCX"
    return name


@converter("TRANSPOSE_CONV", target="`nn.deconv{data_format='NXC', filter_format='CXN', stride, padding, output_size}`"
           ", then the fused activation",
           caveats="constant output shape; an output larger than the full transposed convolution is refused")
def _transpose_conv(ctx: Context, op: Operator) -> None:
    x, w = ctx.input(2), ctx.input(1)
    if ctx.rank(x) != 4 or ctx.rank(w) != 4:
        raise ImportProblem("E0863", f"{ctx.here}: input and filter must have rank 4 (NHWC, OHWI)")
    out = [int(d) for d in ctx.need_const(ctx.input(0), "output shape").reshape(-1)]
    xs, ws = ctx.shape(x), ctx.shape(w)
    stride = [ctx.option(2, 1), ctx.option(1, 1)]
    if len(out) != 4 or min(stride) < 1 or ws[3] != xs[3] or out[3] != ws[0] or out[0] != xs[0]:
        raise ImportProblem("E0863", f"{ctx.here}: output shape {out}, filter {list(ws)}, input {list(xs)}, "
                            f"stride {stride} do not agree")
    begin, end = [], []
    for i in range(2):  # TFLite pads as the forward convolution from the output back to the input would
        full = (xs[1 + i] - 1) * stride[i] + ws[1 + i]
        total = max(0, full - out[1 + i]) if ctx.option(0, 0, "b") == 0 else 0
        begin.append(total // 2)
        end.append(full - out[1 + i] - total // 2)
    if min(end) < 0:
        raise ImportProblem("E0863", f"{ctx.here}: an output shape {out} larger than the full transposed "
                            "convolution is not supported")
    attribs: dict = {"data_format": "NXC", "filter_format": "CXN", "padding": begin + end, "output_size": out[1:3]}
    if stride != [1, 1]:
        attribs["stride"] = stride
    ctx.activate("nn.deconv", [ctx.arg(x), ctx.arg(w), ctx.arg(ctx.input(3))], attribs,
                 activation=ctx.option(3, 0, "b"))
