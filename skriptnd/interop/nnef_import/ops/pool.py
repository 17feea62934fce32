"""Pooling over any axes: box (sum / normalized), max_pool, avg_pool, rms_pool. NNEF windows span every axis;
the SkriptND operator gets the axes where the window does something. NNEF border modes: 'constant' pads with
zeros that take part (in the maximum, in the average's count), 'ignore' leaves padding out, reflect/replicate/
reflect-even become an explicit layout.pad first."""

from __future__ import annotations

from typing import Any

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.ops.window import PAD_METHODS, defaults, explicit_padding, flat, pre_pad
from skriptnd.interop.nnef_import.registry import converter, unsupported
from skriptnd.interop.nnef_import.writer_exprs import real
from skriptnd.interop.writer import TensorDecl

unsupported("index-based pooling (argmax_pool/sample/desample) has no standard SkriptND operator",
            "argmax_pool", "sample", "desample")
unsupported("declared by NNEF's shape functions but not by its parser's standard library (the parser refuses "
            "it as an undefined operation); no standard SkriptND operator", "avg_unpool", "max_unpool")

TARGETS = {"box": "nn.sum_pool", "max_pool": "nn.max_pool", "avg_pool": "nn.avg_pool", "rms_pool": "nn.rms_pool"}


def _pool(ctx: Context, op: Operation) -> None:
    x = op.inputs["input"]
    xs, ys = ctx.shape(x), ctx.shape(op.outputs["output"])
    rank = len(xs)
    size = [int(v) for v in op.attribs["size"]]
    stride, dilation = defaults(op.attribs["stride"], rank), defaults(op.attribs["dilation"], rank)
    pads = explicit_padding(op.attribs["padding"], xs, ys, size, stride, dilation)
    border = op.attribs["border"]
    name = "max_pool" if op.name == "max_pool_with_index" else op.name
    if name == "box" and op.attribs["normalize"]:
        name = "avg_pool"
    source: Any = ctx.arg(x)
    padded = any(p or q for p, q in pads)
    axes = [i for i in range(rank) if size[i] != 1 or stride[i] != 1 or dilation[i] != 1 or pads[i] != (0, 0)]
    if border in PAD_METHODS or (border == "constant" and name == "max_pool" and padded):
        # the padded values take part: pad explicitly (zeros for 'constant'), then pool without padding
        source = pre_pad(ctx, source, axes, [pads[i] for i in axes], border)
        pads = [(0, 0)] * rank
    elif border not in ("constant", "ignore"):
        raise ctx.problem(f"border '{border}' is not one of constant, ignore, reflect, replicate, reflect-even",
                          "border")
    if not axes:  # a 1x1 window with unit stride: the identity (rms of one value is its magnitude)
        ctx.emit(ctx.output(), "math.abs" if name == "rms_pool" else "math.iden", [source])
        return
    attribs: dict[str, Any] = {"axes": axes, "size": [size[i] for i in axes], "stride": [stride[i] for i in axes],
                               "dilation": [dilation[i] for i in axes], "padding": flat([pads[i] for i in axes])}
    if name in ("avg_pool", "rms_pool"):
        attribs["ignore_border"] = border == "ignore"
    ctx.emit(ctx.output(), TARGETS[name], [source], attribs)


converter("box", target="nn.sum_pool / nn.avg_pool (normalize)",
          note="border constant/ignore: zero padding (normalize: ignore_border); reflect etc.: layout.pad")(_pool)
converter("max_pool", target="nn.max_pool",
          note="border 'constant' pads zeros that take part (layout.pad), 'ignore' leaves them out")(_pool)
converter("avg_pool", target="nn.avg_pool", note="border 'ignore' -> ignore_border=true, 'constant' -> false")(_pool)
converter("rms_pool", target="nn.rms_pool", note="as avg_pool")(_pool)


@converter("debox", target="nn.deconv (depthwise, filter of ones)",
           note="windows over the spatial axes only; normalize divides by the window volume (border 'constant'); "
                "normalize with border 'ignore' is refused")
def debox(ctx: Context, op: Operation) -> None:
    """The transpose of box: each input item is added to every output item of its window, which is a
    depthwise transposed convolution with a filter of ones."""
    x = op.inputs["input"]
    xs, ys = ctx.shape(x), ctx.shape(op.outputs["output"])
    rank = len(xs)
    size = [int(v) for v in op.attribs["size"]]
    stride, dilation = defaults(op.attribs["stride"], rank), defaults(op.attribs["dilation"], rank)
    pads = explicit_padding(op.attribs["padding"], ys, xs, size, stride, dilation)
    border, normalize = op.attribs["border"], bool(op.attribs["normalize"])
    if rank < 3 or any(v != 1 for v in size[:2] + stride[:2] + dilation[:2]) or pads[:2] != [(0, 0), (0, 0)]:
        raise ctx.problem("a window over the batch or channel axis is not supported (spatial axes only)", "size")
    if border not in ("constant", "ignore") or (normalize and border == "ignore" and any(p or q for p, q in pads)):
        raise ctx.problem(f"border '{border}'{' with normalize' if normalize else ''} is not supported", "border")
    channels = xs[1]
    ones = ctx.tmp("ones")
    volume = 1
    for v in size[2:]:
        volume *= v
    ctx.constants.append(TensorDecl(ones, "real", [channels, 1, *size[2:]], [1.0] * (channels * volume)))
    out = ctx.output()
    result = ctx.tmp("debox") if normalize else out
    ctx.emit(result, "nn.deconv", [ctx.arg(x), ones, None],
             {"stride": stride[2:], "dilation": dilation[2:], "padding": flat(pads[2:]), "groups": channels,
              "output_size": ys[2:]})
    if normalize:
        ctx.emit(out, "math.div", [result, real(float(volume))])


def _used(ctx: Context, tensor: str) -> bool:
    if tensor in ctx.graph.outputs:
        return True
    for op in ctx.graph.operations:
        for value in op.inputs.values():
            if value == tensor or (isinstance(value, list) and tensor in value):
                return True
    return False


@converter("max_pool_with_index", target="nn.max_pool",
           note="only when the index output is unused (argmax_pool has no SkriptND counterpart)")
def max_pool_with_index(ctx: Context, op: Operation) -> None:
    if _used(ctx, op.outputs["index"]):
        raise ctx.problem("the index output is used; index-based pooling has no standard SkriptND operator "
                          "(only the pooled output can be imported)", "index")
    _pool(ctx, op)
