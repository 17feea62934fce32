"""Other operators: DEQUANTIZE of float16 constants (weights LiteRT stores in half precision) -> the constant
as a real; QUANTIZE and DEQUANTIZE of activations in static int8 models -> `math.iden` between a tensor and
its differently quantized (or real) copy (skriptnd.interop.tflite_import.quantized)."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.quantized import is_quantized
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("DEQUANTIZE", target="a real constant: float16 weights, or int8/int16 weights (weight-only quantization) "
           "as (q - zero_point) * scale per tensor or per channel, in double then float32 as TFLite's kernel; "
           "of an activation of a static int8 model: `math.iden` into a tensor without @quantize entry (real)",
           caveats="an int8/uint8/int16 activation only in a static quantized model")
def _dequantize(ctx: Context, op: Operator) -> None:
    x = ctx.input(0)
    t = ctx.tensor(x)
    value = ctx.const(x)
    if value is None and ctx.static and is_quantized(t):
        ctx.emit("math.iden", [ctx.arg(x)])
        return
    if value is None or (t.type != 1 and t.quantization is None):
        raise ImportProblem("E0864", f"{ctx.here}: DEQUANTIZE of a computed {t.type_name} tensor (a quantized "
                            "model) is not supported yet")
    if t.type == 1:  # float16
        ctx.fold(op.outputs[0], value.astype(np.float32))
        return
    q = t.quantization
    assert q is not None
    if len(q.scale) == 1:
        scale, zero = q.scale.astype(np.float64)[0], q.zero_point[0]
    else:
        if not 0 <= q.axis < value.ndim or value.shape[q.axis] != len(q.scale):
            raise ImportProblem("E0861", f"corrupt TFLite file: {len(q.scale)} scales along axis {q.axis} of "
                                f"tensor '{t.name}' of shape {list(value.shape)}")
        shape = [1] * value.ndim
        shape[q.axis] = len(q.scale)
        scale = q.scale.astype(np.float64).reshape(shape)
        zero = q.zero_point.reshape(shape)
    ctx.fold(op.outputs[0], (scale * (value.astype(np.int64) - zero)).astype(np.float32))


@converter("QUANTIZE", target="`math.iden` into the output, whose @quantize entry quantizes (a real input) or "
           "requantizes (int8 <-> uint8, another scale: an integer RESCALE) it",
           caveats="static quantized models only (a quantized output and a real or quantized input)")
def _quantize(ctx: Context, op: Operator) -> None:
    x, out = ctx.tensor(ctx.input(0)), ctx.tensor(op.outputs[0])
    if not (ctx.static and is_quantized(out) and out.type in (9, 3, 7) and
            (x.type == 0 or (is_quantized(x) and x.type in (9, 3, 7)))):  # FLOAT32, or INT8 / UINT8 / INT16 codes
        raise ImportProblem("E0864", f"{ctx.here}: QUANTIZE of '{x.name}' ({x.type_name}) into '{out.name}' "
                            f"({out.type_name}) is not supported (a static quantized model's QUANTIZE of a FLOAT32 "
                            "or quantized integer tensor)")
    ctx.emit("math.iden", [ctx.arg(ctx.input(0))])


@converter("STABLEHLO_COMPOSITE", target="its decomposition subgraph, converted in place",
           caveats="every operator of the decomposition must be supported")
def _composite(ctx: Context, op: Operator) -> None:
    if op.options2 is None:
        raise ImportProblem("E0861", f"corrupt TFLite file: {ctx.here} has no composite options")
    outs = ctx.inline(op.options2.int(1, -1), [ctx.arg(i) or "" for i in op.inputs])
    if len(outs) != len(op.outputs):
        raise ImportProblem("E0863", f"{ctx.here}: its decomposition gives {len(outs)} outputs, not {len(op.outputs)}")
    for index, name in zip(op.outputs, outs, strict=True):
        ctx.alias(index, name)


#: a reduce-window body (one builtin on its two scalar arguments) -> (pool, the init value it must start from)
_WINDOW_BODIES = {"MAXIMUM": ("nn.max_pool", -np.inf), "STABLEHLO_MAXIMUM": ("nn.max_pool", -np.inf),
                  "ADD": ("nn.sum_pool", 0.0), "STABLEHLO_ADD": ("nn.sum_pool", 0.0)}


@converter("STABLEHLO_REDUCE_WINDOW", target="`nn.max_pool` / `nn.sum_pool{axes, size, stride, dilation, padding}` "
           "for a MAXIMUM body from -inf / an ADD body from 0",
           caveats="one operand; other bodies, init values and base dilations are refused")
def _reduce_window(ctx: Context, op: Operator) -> None:
    o = op.options2
    if o is None or len(op.inputs) != 2:
        raise ImportProblem("E0863", f"{ctx.here}: one operand and one init value (with window options) are supported")
    x = ctx.input(0)
    rank = ctx.rank(x)

    def longs(slot: int, default: int) -> list[int]:
        values = o.array(slot, "<i8", f"{ctx.here}'s window options")
        return [default] * rank if values is None or not len(values) else [int(v) for v in values]

    size, stride, base, dilation = longs(0, 1), longs(1, 1), longs(2, 1), longs(3, 1)
    pads = longs(4, 0) if o.has(4) else [0] * (2 * rank)
    if not len(size) == len(stride) == len(base) == len(dilation) == rank or len(pads) != 2 * rank or \
            min(size + stride + dilation) < 1 or min(pads) < 0:
        raise ImportProblem("E0863", f"{ctx.here}: window {size}, strides {stride}, dilations {dilation}, padding "
                            f"{pads} for rank {rank}")
    if any(b != 1 for b in base):
        raise ImportProblem("E0863", f"{ctx.here}: base dilations {base} are not supported")
    body_index = o.int(5, -1)
    if not 0 <= body_index < len(ctx.model.subgraphs):
        raise ImportProblem("E0861", f"corrupt TFLite file: {ctx.here} names body subgraph {body_index}")
    body = ctx.model.subgraphs[body_index]
    ops = [b.name for b in body.operators]
    if len(ops) != 1 or ops[0] not in _WINDOW_BODIES:
        raise ImportProblem("E0863", f"{ctx.here}: a body of {ops} is not supported (one MAXIMUM or ADD)")
    pool, identity = _WINDOW_BODIES[ops[0]]
    init = ctx.const(ctx.input(1))
    if init is None or init.size != 1 or float(init.reshape(-1)[0]) != identity:
        raise ImportProblem("E0863", f"{ctx.here}: {ops[0]} windows must start from {identity}, a constant")
    axes = [a for a in range(rank) if (size[a], stride[a], dilation[a], pads[2 * a], pads[2 * a + 1]) !=
            (1, 1, 1, 0, 0)]
    if not axes:
        ctx.emit("math.iden", [ctx.arg(x)])
        return
    attribs: dict = {"axes": axes, "size": [size[a] for a in axes]}
    if any(stride[a] != 1 for a in axes):
        attribs["stride"] = [stride[a] for a in axes]
    if any(dilation[a] != 1 for a in axes):
        attribs["dilation"] = [dilation[a] for a in axes]
    attribs["padding"] = [pads[2 * a] for a in axes] + [pads[2 * a + 1] for a in axes]
    ctx.emit(pool, [ctx.arg(x)], attribs)


_NUMPY = {0: np.float32, 1: np.float32, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8,
          10: np.float64}


def _dtype(ctx: Context, index: int) -> type:
    t = ctx.tensor(index)
    if t.type not in _NUMPY:
        raise ImportProblem("E0864", f"{ctx.here}: its output has type {t.type_name}")
    return _NUMPY[t.type]


@converter("SHAPE", target="a constant (shapes are static)")
def _shape(ctx: Context, op: Operator) -> None:
    ctx.fold(op.outputs[0], np.array(ctx.shape(ctx.input(0)), _dtype(ctx, op.outputs[0])))


@converter("ZEROS_LIKE", target="a constant of the input's shape")
def _zeros_like(ctx: Context, op: Operator) -> None:
    ctx.fold(op.outputs[0], np.zeros(ctx.shape(ctx.input(0)), _dtype(ctx, op.outputs[0])))


@converter("FILL", target="a constant", caveats="constant dimensions and value")
def _fill(ctx: Context, op: Operator) -> None:
    dims = [int(d) for d in ctx.need_const(ctx.input(0), "dimensions").reshape(-1)]
    value = ctx.need_const(ctx.input(1), "value").reshape(-1)
    if value.size != 1 or list(ctx.shape(op.outputs[0])) != dims:
        raise ImportProblem("E0863", f"{ctx.here}: dimensions {dims} for an output of shape "
                            f"{list(ctx.shape(op.outputs[0]))} and a value of {value.size} items")
    ctx.fold(op.outputs[0], np.full(dims, value[0], _dtype(ctx, op.outputs[0])))


@converter("RANGE", target="a constant", caveats="constant start, limit and delta")
def _range(ctx: Context, op: Operator) -> None:
    start, limit, delta = (ctx.need_const(ctx.input(i), what).reshape(-1) for i, what in
                           enumerate(("start", "limit", "delta")))
    if start.size != 1 or limit.size != 1 or delta.size != 1 or delta[0] == 0:
        raise ImportProblem("E0863", f"{ctx.here}: start, limit and delta must be single values, delta not 0")
    values = np.arange(start[0], limit[0], delta[0]).astype(_dtype(ctx, op.outputs[0]))
    if values.shape != ctx.shape(op.outputs[0]):
        raise ImportProblem("E0863", f"{ctx.here}: {values.size} values for an output of shape "
                            f"{list(ctx.shape(op.outputs[0]))}")
    ctx.fold(op.outputs[0], values)
