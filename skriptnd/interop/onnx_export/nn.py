"""Converters for the ``nn`` module: convolutions, pooling, activations, normalizations, linear, LSTM."""

from __future__ import annotations

import math
from typing import Any

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
    per_dim,
    product,
    shape,
)
from skriptnd.tosa.legalize.tensor import pool_geometry

#: data / filter layouts -> the permutation to ONNX's N,C,X.. (O,I,X.. for filters)
_DATA_TO_NCX = {"NCX": lambda d: list(range(d + 2)), "NXC": lambda d: [0, d + 1, *range(1, d + 1)],
                "XCN": lambda d: [d + 1, d, *range(d)]}
_FILTER_TO_NCX = {"NCX": lambda d: list(range(d + 2)), "NXC": lambda d: [0, d + 1, *range(1, d + 1)],
                  "XCN": lambda d: [d + 1, d, *range(d)], "CXN": lambda d: [d + 1, 0, *range(1, d + 1)]}


def _crop_and_pads(ctx: Context, x: str, sizes: list[int], axes: list[int], before: list[int], extents: list[int],
                   strides: list[int], outs: list[int]) -> tuple[str, list[int]]:
    """ONNX pads (all begins, then all ends) giving exactly ``outs`` windows of ``extents`` at ``strides``
    whose first window starts at ``-before``; negative pads (the stdlib allows them) become a Slice."""
    lo_pads, hi_pads, starts, ends = [], [], [], []
    for size, lo, ext, stride, out in zip(sizes, before, extents, strides, outs, strict=True):
        first = max(-lo, 0)
        lo, size2 = max(lo, 0), size - first
        hi = (out - 1) * stride + ext - size2 - lo
        end = size
        if hi < 0:
            end, hi = size + hi, 0
        lo_pads.append(lo)
        hi_pads.append(hi)
        starts.append(first)
        ends.append(end)
    if any(s != 0 for s in starts) or ends != sizes:
        if any(e <= s for s, e in zip(starts, ends, strict=True)):
            raise Unsupported("every window lies wholly in the padding")
        x = ctx.slice(x, starts, ends, axes)
    return x, lo_pads + hi_pads


def _to_ncx(ctx: Context, op: Operation, d: int) -> tuple[str, list[int], list[int], str, list[int], list[int]]:
    fmt, ffmt = op.attribs.get("data_format", "NCX"), op.attribs.get("filter_format", "NCX")
    if fmt not in _DATA_TO_NCX or ffmt not in _FILTER_TO_NCX:
        raise Unsupported(f"data_format {fmt!r} / filter_format {ffmt!r}")
    perm, fperm = _DATA_TO_NCX[fmt](d), _FILTER_TO_NCX[ffmt](d)
    s, fs = shape(op.inputs[0]), shape(op.inputs[1])
    x = ctx.transpose(ctx.value(op.inputs[0]), perm)
    w = ctx.transpose(ctx.value(op.inputs[1]), fperm)
    return x, [s[p] for p in perm], perm, w, [fs[p] for p in fperm], fperm


@converter("nn.conv", onnx="Conv (Slice for negative padding, Transpose for other layouts)")
def conv(ctx: Context, op: Operation) -> Results:
    d = len(shape(op.inputs[0])) - 2
    if d < 1:
        raise Unsupported("a convolution needs at least one spatial dimension")
    x, s, perm, w, fs, _ = _to_ncx(ctx, op, d)
    stride, dilation = per_dim(op.attribs.get("stride"), d), per_dim(op.attribs.get("dilation"), d)
    ox, offset, fd = ints(env(op, "ox")), ints(env(op, "offset")), ints(env(op, "fd"))
    g = int(env(op, "g"))
    x, pads = _crop_and_pads(ctx, x, s[2:], list(range(2, d + 2)), offset, fd, stride, ox)
    bias = ctx.value(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    y = ctx.node("Conv", [x, w, bias], kernel_shape=fs[2:], strides=stride, dilations=dilation, pads=pads,
                 group=g)
    return [ctx.transpose(y, inverse(perm))]


@converter("nn.deconv", onnx="ConvTranspose (Pad/Slice/Add when the window leaves the full output)")
def deconv(ctx: Context, op: Operation) -> Results:
    """ConvTranspose with the stdlib's window of the full output: ONNX pads where the window starts inside
    the full output and ends at most a stride beyond it (output_padding); otherwise the full output is
    computed, padded/sliced to the window, and the bias added."""
    d = len(shape(op.inputs[0])) - 2
    if d < 1:
        raise Unsupported("a deconvolution needs at least one spatial dimension")
    x, s, perm, w, fs, _ = _to_ncx(ctx, op, d)
    stride, dilation = per_dim(op.attribs.get("stride"), d), per_dim(op.attribs.get("dilation"), d)
    ox, offset, fd = ints(env(op, "ox")), ints(env(op, "offset")), ints(env(op, "fd"))
    g = int(env(op, "g"))
    full = [(s[2 + k] - 1) * stride[k] + fd[k] for k in range(d)]
    ends = [full[k] - offset[k] - ox[k] for k in range(d)]
    bias = ctx.value(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    attrs = {"kernel_shape": fs[2:], "strides": stride, "dilations": dilation, "group": g}
    if all(o >= 0 for o in offset) and all(e > -st for e, st in zip(ends, stride, strict=True)):
        extra = [max(-e, 0) for e in ends]
        y = ctx.node("ConvTranspose", [x, w, bias], pads=offset + [max(e, 0) for e in ends],
                     output_padding=extra if any(extra) else None, **attrs)
        return [ctx.transpose(y, inverse(perm))]
    y = ctx.node("ConvTranspose", [x, w], pads=[0] * (2 * d), **attrs)
    lo = [max(-o, 0) for o in offset]
    hi = [max(-e, 0) for e in ends]
    if any(lo) or any(hi):
        y = ctx.node("Pad", [y, ctx.i64([0, 0, *lo, 0, 0, *hi], "pads")])
    y = ctx.slice(y, [o + p for o, p in zip(offset, lo, strict=True)],
                  [o + p + n for o, p, n in zip(offset, lo, ox, strict=True)], list(range(2, d + 2)))
    if bias is not None:
        y = ctx.node("Add", [y, ctx.reshape(bias, [-1] + [1] * d)])
    return [ctx.transpose(y, inverse(perm))]


# -- pooling -------------------------------------------------------------------------------------


def _pool_geometry(op: Operation) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """The window of a pooling operation (skriptnd.tosa.legalize's reading of the same attributes);
    a dynamic input or output extent is Unsupported here."""
    for t in (op.inputs[0], op.outputs[0]):
        if t.dynamic:
            raise Unsupported(f"tensor '{t.name}' has a dynamic extent ({', '.join(map(str, shape(t)))}); the "
                              "pooling window's padding is computed for static sizes")
    return pool_geometry(op)


def _pool(ctx: Context, op: Operation, op_type: str, fill: float | None = None, **attrs: Any) -> str:
    """An ONNX pool over the operation's axes: they are moved last behind an (N, C) pair (merging the
    other axes) when they are not already the axes 2.. of the input. Padding as wide as the window is
    an explicit Pad with ``fill`` (when padding never counts, as for max and sum)."""
    s = shape(op.inputs[0])
    axes, size, stride, dilation, offset, outs = _pool_geometry(op)
    x = ctx.value(op.inputs[0])
    others = [a for a in range(len(s)) if a not in axes]
    simple = len(others) == 2 and others == [0, 1] and axes == list(range(2, len(s)))
    if simple:
        lead = s[:2]
    else:
        perm = others + axes
        x = ctx.transpose(x, perm)
        lead = [product(s[a] for a in others[:-1]), s[others[-1]] if others else 1]
        x = ctx.reshape(x, lead + [s[a] for a in axes])
    fd = [(kk - 1) * dl + 1 for kk, dl in zip(size, dilation, strict=True)]
    x, pads = _crop_and_pads(ctx, x, [s[a] for a in axes], list(range(2, 2 + len(axes))), offset, fd, stride, outs)
    k = len(axes)
    if any(p >= kk for p, kk in zip(pads, size + size, strict=True)):  # onnxruntime wants pads < kernel
        if fill is None:
            raise Unsupported("padding as wide as the window (onnxruntime needs pads < kernel here)")
        x = ctx.node("Pad", [x, ctx.i64([0, 0, *pads[:k], 0, 0, *pads[k:]], "pads"), ctx.scalar(fill)])
        pads = [0] * (2 * k)
    y = ctx.node(op_type, [x], kernel_shape=size, strides=stride, pads=pads, **attrs,
                 dilations=dilation if any(dl != 1 for dl in dilation) else None)
    if op_type == "MaxPool":  # windows wholly in the padding: -inf (onnxruntime gives the lowest float)
        empty = _empty_windows([s[a] for a in axes], offset, size, stride, dilation, outs)
        if empty.any():
            y = ctx.node("Where", [ctx.const(empty.reshape([1, 1, *outs]), np.bool_, "empty_windows"),
                                   ctx.scalar(-np.inf), y])
    if simple:
        return y
    y = ctx.reshape(y, [s[a] for a in others] + outs)
    return ctx.transpose(y, inverse(others + axes))


def _empty_windows(sizes: list[int], offset: list[int], size: list[int], stride: list[int], dilation: list[int],
                   outs: list[int]) -> np.ndarray:
    """A mask over the pooled output: the windows none of whose taps lies inside the input."""
    mask = np.zeros(outs, np.bool_)
    for k, (n, lo, kk, st, dl, o) in enumerate(zip(sizes, offset, size, stride, dilation, outs, strict=True)):
        taps = np.arange(o)[:, None] * st - lo + np.arange(kk)[None, :] * dl
        empty = ~((taps >= 0) & (taps < n)).any(axis=1)
        mask |= empty.reshape([o if j == k else 1 for j in range(len(outs))])
    return mask


@converter("nn.max_pool", onnx="MaxPool (Pad for wide padding, Where for windows wholly in the padding)")
def max_pool(ctx: Context, op: Operation) -> Results:
    return [_pool(ctx, op, "MaxPool", fill=-np.inf)]


def _no_dilation(ctx: Context, op: Operation) -> None:
    if any(dl != 1 for dl in _pool_geometry(op)[3]) and ctx.opset < 19:
        raise Unsupported("dilated average/sum pooling needs ONNX opset 19 (AveragePool dilations)")


@converter("nn.sum_pool", onnx="AveragePool (count_include_pad), Mul")
def sum_pool(ctx: Context, op: Operation) -> Results:
    _no_dilation(ctx, op)
    size = _pool_geometry(op)[1]
    y = _pool(ctx, op, "AveragePool", fill=0.0, count_include_pad=1)
    return [ctx.node("Mul", [y, ctx.scalar(float(np.prod(size)))])]


@converter("nn.avg_pool", onnx="AveragePool (ignore_border=false through @compose)")
def avg_pool(ctx: Context, op: Operation) -> Results:
    _no_dilation(ctx, op)
    if not op.attribs.get("ignore_border", True):  # its @compose: sum_pool / window size
        raise Unsupported("ignore_border=false (exported through its components)")
    return [_pool(ctx, op, "AveragePool", count_include_pad=0)]


# -- activations ---------------------------------------------------------------------------------


def _x(ctx: Context, op: Operation) -> str:
    return ctx.value(op.inputs[0])


@converter("nn.relu", onnx="Relu, LeakyRelu (alpha), Clip (max: relu6), Min/Max (alpha and max)")
def relu(ctx: Context, op: Operation) -> Results:
    x = _x(ctx, op)
    alpha, top = op.attribs.get("alpha"), op.attribs.get("max")
    if top is not None and alpha is None:  # one Clip, which onnxruntime fuses into the convolution before it
        return [ctx.node("Clip", [x, ctx.scalar(0.0), ctx.scalar(float(top))])]
    if top is not None:
        x = ctx.node("Min", [x, ctx.scalar(float(top))])
    if alpha is None:
        return [ctx.node("Relu", [x])] if top is None else [ctx.node("Max", [x, ctx.scalar(0.0)])]
    return [ctx.node("LeakyRelu", [x], alpha=float(alpha))] if top is None else \
        [ctx.node("Max", [x, ctx.node("Mul", [_x(ctx, op), ctx.scalar(float(alpha))])])]


@converter("nn.prelu", onnx="PRelu")
def prelu(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axis = norm_axes(op.attribs.get("axis", 1), len(s))[0]
    slope = ctx.reshape(ctx.value(op.inputs[1]), [s[axis]] + [1] * (len(s) - axis - 1))
    return [ctx.node("PRelu", [_x(ctx, op), slope])]


@converter("nn.thresholded_relu", onnx="ThresholdedRelu")
def thresholded_relu(ctx: Context, op: Operation) -> Results:
    return [ctx.node("ThresholdedRelu", [_x(ctx, op)], alpha=float(op.attribs.get("theta", 0.0)))]


@converter("nn.elu", onnx="Elu")
def elu(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Elu", [_x(ctx, op)], alpha=float(op.attribs.get("alpha", 1.0)))]


@converter("nn.selu", onnx="Selu")
def selu(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Selu", [_x(ctx, op)], alpha=float(op.attribs.get("alpha", 1.67326319)),
                     gamma=float(op.attribs.get("lambda", 1.05070102)))]


@converter("nn.gelu", onnx="Gelu from opset 20, else Erf/Tanh formula; SIGMOID: Mul, Sigmoid")
def gelu(ctx: Context, op: Operation) -> Results:
    x = _x(ctx, op)
    approximate = op.attribs.get("approximate")
    if approximate == "SIGMOID":  # x * sigmoid(1.702 x)
        return [ctx.node("Mul", [x, ctx.node("Sigmoid", [ctx.node("Mul", [x, ctx.scalar(1.702)])])])]
    if approximate not in (None, "TANH"):
        raise Unsupported(f"gelu approximation {approximate!r}")
    tanh = approximate == "TANH"
    if ctx.opset >= 20:
        return [ctx.node("Gelu", [x], approximate="tanh" if tanh else "none")]
    half = ctx.node("Mul", [x, ctx.scalar(0.5)])
    if tanh:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = ctx.node("Mul", [ctx.node("Mul", [x, x]), x])
        inner = ctx.node("Add", [x, ctx.node("Mul", [cube, ctx.scalar(0.044715)])])
        t = ctx.node("Tanh", [ctx.node("Mul", [inner, ctx.scalar(math.sqrt(2.0 / math.pi))])])
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t = ctx.node("Erf", [ctx.node("Mul", [x, ctx.scalar(1.0 / math.sqrt(2.0))])])
    return [ctx.node("Mul", [half, ctx.node("Add", [t, ctx.scalar(1.0)])])]


@converter("nn.silu", onnx="Sigmoid, Mul")
def silu(ctx: Context, op: Operation) -> Results:
    x = _x(ctx, op)
    return [ctx.node("Mul", [x, ctx.node("Sigmoid", [x])])]


@converter("nn.sigmoid", onnx="Sigmoid")
def sigmoid(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Sigmoid", [_x(ctx, op)])]


@converter("nn.softplus", onnx="Softplus")
def softplus(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Softplus", [_x(ctx, op)])]


@converter("nn.erf", onnx="Erf")
def erf(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Erf", [_x(ctx, op)])]


# -- normalization, softmax, linear ------------------------------------------------------------


@converter("nn.batch_norm", onnx="BatchNormalization (channel_axis 1; others through @compose)")
def batch_norm(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axis = norm_axes(op.attribs.get("channel_axis", 1), len(s))[0]
    if axis != 1 or len(s) < 2:
        raise Unsupported("channel_axis other than 1 (ONNX BatchNormalization normalizes axis 1)")
    c = s[1]
    mean, var = ctx.value(op.inputs[1]), ctx.value(op.inputs[2])
    bias = ctx.value(op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] is not None else ctx.const(np.zeros(c))
    scale = ctx.value(op.inputs[4]) if len(op.inputs) > 4 and op.inputs[4] is not None else ctx.const(np.ones(c))
    return [ctx.node("BatchNormalization", [_x(ctx, op), scale, bias, mean, var],
                     epsilon=float(op.attribs.get("epsilon", 1e-5)))]


@converter("nn.softmax", onnx="Softmax (one axis; several through @compose)")
def softmax(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axes = norm_axes(op.attribs.get("axes", [1]), len(s))
    if len(axes) != 1:
        raise Unsupported("softmax over several axes")
    return [ctx.node("Softmax", [_x(ctx, op)], axis=axes[0])]


@converter("nn.linear", onnx="Gemm (transB)")
def linear(ctx: Context, op: Operation) -> Results:
    bias = ctx.value(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] is not None else None
    return [ctx.node("Gemm", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1]), bias], transB=1)]


@converter("nn.local_response_norm", onnx="LRN (axes [1]; others through @compose)")
def local_response_norm(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axes = norm_axes(op.attribs.get("axes", [1]), len(s))
    size = ints(op.attribs["size"])
    if axes != [1] or len(s) < 3 or len(size) != 1:
        raise Unsupported("ONNX LRN normalizes across axis 1 only (of a rank >= 3 input)")
    return [ctx.node("LRN", [_x(ctx, op)], size=size[0], alpha=float(op.attribs.get("alpha", 1.0)),
                     beta=float(op.attribs.get("beta", 0.5)), bias=float(op.attribs.get("bias", 1.0)))]


# -- LSTM ----------------------------------------------------------------------------------------


def _gates_iofc(ctx: Context, t: str, n: int) -> str:
    """SkriptND packs LSTM gates [i, f, g, o] along the first axis, ONNX [i, o, f, c]."""
    i, f, g, o = ctx.node("Split", [t, ctx.i64([n] * 4)], outputs=4, axis=0)
    return ctx.node("Concat", [i, o, f, g], axis=0)


@converter("nn.lstm", "nn.lstm_loop", "nn._jagged_lstm_loops", onnx="LSTM (gates reordered; steps as sequence_lens)")
def lstm(ctx: Context, op: Operation) -> Results:
    """ONNX LSTM (gates reordered, the recurrence bias zero). Step counts (``steps``: one for all items
    in lstm_loop, one per item otherwise) are its sequence_lens; Y then has ``steps[0]`` items (the items'
    counts are equal, see nn.lstm) and the final states are those at each item's last step."""
    X, W, R, B = op.inputs[:4]
    h0 = op.inputs[4] if len(op.inputs) > 4 else None
    c0 = op.inputs[5] if len(op.inputs) > 5 else None
    steps = op.inputs[6] if len(op.inputs) > 6 else None
    n = shape(R)[1]
    w = ctx.unsqueeze(_gates_iofc(ctx, ctx.value(W), n), [0])
    r = ctx.unsqueeze(_gates_iofc(ctx, ctx.value(R), n), [0])
    bias = ctx.node("Concat", [_gates_iofc(ctx, ctx.value(B), n), ctx.const(np.zeros(4 * n))], axis=0)
    bias = ctx.unsqueeze(bias, [0])
    lens = first = None
    if steps is not None:
        counts = ctx.value(steps)
        if steps.rank == 0:  # lstm_loop: one count for every item
            counts = ctx.node("Expand", [counts, ctx.i64([shape(X)[1] if X.shape[1] is not None else 1])])
        lens = ctx.cast(counts, "int32")
        first = ctx.slice(counts, [0], [1], [0])
    ih = ctx.unsqueeze(ctx.value(h0), [0]) if h0 is not None else None
    ic = ctx.unsqueeze(ctx.value(c0), [0]) if c0 is not None else None
    y, yh, yc = ctx.node("LSTM", [ctx.value(X), w, r, bias, lens, ih, ic], outputs=3, hidden_size=n)
    y = ctx.squeeze(y, [1])
    if first is not None:
        y = ctx.node("Slice", [y, ctx.i64([0]), first, ctx.i64([0])])
    return [y, ctx.squeeze(yh, [0]), ctx.squeeze(yc, [0])]
