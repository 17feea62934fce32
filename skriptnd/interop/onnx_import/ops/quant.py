"""QuantizeLinear / DequantizeLinear.

A QDQ pair (a QuantizeLinear whose every reader is a DequantizeLinear with the same scale and zero
point) is no statement: the real tensor it quantizes gets a `@quantize` entry
`quant.zero_point_linear_quantize{zero_point, scale, bits, signed, channel_axis}` and the
DequantizeLinear's output *is* that tensor, so the graph is a SkriptND @quantize graph (it runs as an
integer TOSA graph where legal, else with fake quantization). A DequantizeLinear of constant integer
weights (or int32 biases) becomes the real-valued variable `(w - zero_point) * scale` with its
@quantize entry. A lone QuantizeLinear or DequantizeLinear on run-time values is spelled out
arithmetically (round half to even, saturate, cast)."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter
from skriptnd.interop.writer import Quantize

_RANGES = {np.dtype(np.int8): (8, True), np.dtype(np.uint8): (8, False), np.dtype(np.int16): (16, True),
           np.dtype(np.uint16): (16, False), np.dtype(np.int32): (32, True)}


def _params(ctx: Context, node: Node, dtype: np.dtype | None) -> tuple[np.ndarray, np.ndarray, int, np.dtype]:
    scale = ctx.need_const(node.input(1), "scale").astype(np.float64)
    zp = ctx.const(node.input(2)) if node.input(2) else None
    if node.input(2) and zp is None:
        ctx.need_const(node.input(2), "zero point")
    if zp is not None:
        dtype = zp.dtype
    zp = np.zeros_like(scale, np.int64) if zp is None else zp.astype(np.int64)
    if node.attr("block_size", 0):
        raise ImportProblem("E0807", f"{node.where}: blocked quantization (block_size) is not supported")
    if scale.size == 1 and zp.size == 1:  # a one-element 1-D scale is per-tensor (onnxruntime's quantizer
        scale, zp = scale.reshape(()), zp.reshape(())  # writes them for biases, whose default axis 1 is no axis)
    return scale, zp, int(node.attr("axis", 1)), np.dtype(dtype or np.uint8)


def _channel_axis(where: str, axis: int, rank: int) -> int:
    """The per-axis quantization axis of a rank-``rank`` tensor; E0807 when the model's ``axis`` is not one."""
    if not -rank <= axis < rank:
        raise ImportProblem("E0807", f"{where}: per-axis quantization along axis {axis} of a tensor of "
                            f"rank {rank}: no such axis", hint="give the node an 'axis' attribute within the "
                            "tensor's rank, or a scalar scale and zero point for per-tensor quantization")
    return norm_axis(axis, rank)


def _entry(name: str, scale: np.ndarray, zp: np.ndarray, axis: int, rank: int, dtype: np.dtype,
           where: str) -> Quantize:
    if dtype not in _RANGES:
        raise ImportProblem("E0810", f"{where}: quantized type {dtype} is not supported (int8/uint8/int16/uint16/int32)")
    bits, signed = _RANGES[dtype]
    attribs: dict = {"zero_point": int(zp) if zp.ndim == 0 else zp.reshape(-1).tolist(),
                     "scale": float(scale) if scale.ndim == 0 else scale.reshape(-1).tolist(), "bits": bits}
    if not signed:
        attribs["signed"] = False
    if scale.ndim:
        attribs["channel_axis"] = _channel_axis(where, axis, rank)
    return Quantize(name, "quant.zero_point_linear_quantize", attribs)


def _same(a: tuple, b: tuple) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and (a[0].ndim == 0 or a[2] == b[2])


@converter("QuantizeLinear", target="@quantize `quant.zero_point_linear_quantize` (QDQ pairs); else arithmetic",
           caveats="constant scale and zero point; no block_size; int8/uint8/int16/uint16 outputs")
def _quantize(ctx: Context, node: Node) -> None:
    """QDQ graphs become SkriptND @quantize graphs: a QuantizeLinear -> DequantizeLinear pair on a real
    tensor adds a `quant.zero_point_linear_quantize{zero_point, scale, bits, signed, channel_axis}` entry to
    the graph's @quantize block for that tensor (the DequantizeLinear's output is the tensor itself), and
    a DequantizeLinear of constant integer weights or int32 biases becomes the real variable
    `(w - zero_point) * scale` with its own entry. Such a graph runs as an integer TOSA graph where legal
    (`sknd run`, `sknd export`), else with fake quantization. A lone QuantizeLinear or DequantizeLinear on
    run-time values is written arithmetically (round half to even, saturate, cast)."""
    out_dtype = np.dtype({3: np.int8, 2: np.uint8, 5: np.int16, 4: np.uint16}.get(node.attr("output_dtype", 0),
                                                                                 np.uint8))
    if ctx.const(node.input(1)) is None or (node.input(2) and ctx.const(node.input(2)) is None):
        _runtime_quantize(ctx, node)
        return
    scale, zp, axis, dtype = _params(ctx, node, out_dtype if node.attr("output_dtype") else None)
    readers = ctx.consumers.get(node.outputs[0], [])
    if readers and node.outputs[0] not in ctx.graph_outputs and all(r.op_type == "DequantizeLinear" for r in readers):
        ctx.pending[node.outputs[0]] = (node.input(0), (scale, zp, axis, dtype))
        return
    rank = ctx.rank(node.input(0))
    shape = [1] * rank
    if scale.ndim:
        shape[_channel_axis(node.where, axis, rank)] = -1
    s = ctx.literal_arg(scale.reshape(shape).astype(np.float32), "scale")
    z = ctx.literal_arg(zp.reshape(shape).astype(np.float32), "zero_point")
    _emit_quantize(ctx, node, s, z, dtype)


def _runtime_quantize(ctx: Context, node: Node) -> None:
    """Scale and zero point computed by the graph (DynamicQuantizeLinear's expansion): scalars only."""
    if node.attr("block_size", 0):
        raise ImportProblem("E0807", f"{node.where}: blocked quantization (block_size) is not supported")
    rank = ctx.rank(node.input(0))
    shape = [1] * rank
    per_axis = ctx.rank(node.input(1)) == 1
    if per_axis:
        shape[_channel_axis(node.where, int(node.attr("axis", 1)), rank)] = -1

    def broadcastable(name: str) -> str:
        arg = ctx.arg(name)
        return ctx.emit("layout.reshape", [arg], {"shape": shape}, outputs=ctx.fresh("b"), label=False) \
            if per_axis else arg  # type: ignore[return-value]

    s = broadcastable(node.input(1))
    dtype = np.dtype(np.uint8)  # ONNX's default without a zero point
    if node.input(2):
        elem = ctx.values[node.input(2)].elem if node.input(2) in ctx.values else None
        dtype = np.dtype({3: np.int8, 2: np.uint8, 5: np.int16, 4: np.uint16}.get(elem or 2, np.uint8))
        z = ctx.emit("layout.cast", [broadcastable(node.input(2))], outputs=ctx.fresh("zp"), types=["real"],
                     label=False)
    else:
        z = ctx.literal_arg(np.array(0.0, np.float32), "zero_point")
    _emit_quantize(ctx, node, s, z, dtype)


def _emit_quantize(ctx: Context, node: Node, s: str, z: str, dtype: np.dtype) -> None:
    bits, signed = _RANGES[dtype]
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    x = ctx.arg(node.input(0))

    def tmp(op: str, *args: str) -> str:
        return ctx.emit(op, list(args), outputs=ctx.fresh(op.rpartition(".")[2]), label=False)

    scaled = tmp("math.div", x, s)
    half = ctx.literal_arg(np.array(0.5, np.float32), "half")
    two = ctx.literal_arg(np.array(2.0, np.float32), "two")
    tie = tmp("math.eq", tmp("math.sub", scaled, tmp("math.floor", scaled)), half)
    rounded = ctx.emit("math.select", [tie, tmp("math.mul", tmp("math.round", tmp("math.mul", scaled, half)), two),
                                       tmp("math.round", scaled)], outputs=ctx.fresh("rounded"), label=False)
    clamped = ctx.emit("math.clamp", [tmp("math.add", rounded, z), ctx.literal_arg(np.array(float(lo), np.float32),
                                                                                   "lo"),
                                      ctx.literal_arg(np.array(float(hi), np.float32), "hi")],
                       outputs=ctx.fresh("clamped"), label=False)
    ctx.emit("layout.cast", [clamped], types=["int"])


@converter("DequantizeLinear", target="the quantized tensor itself (QDQ), a real variable (constant weights), "
           "else (x - zero_point) * scale", caveats="constant scale and zero point; no block_size")
def _dequantize(ctx: Context, node: Node) -> None:
    src = node.input(0)
    if src in ctx.pending:
        tensor, (scale, zp, axis, dtype) = ctx.pending[src]
        mine = _params(ctx, node, dtype)
        if not _same((scale, zp, axis), mine[:3]):
            raise ImportProblem("E0807", f"{node.where}: its scale / zero point differ from its QuantizeLinear's")
        name = ctx.arg(tensor)
        assert name is not None
        ctx.bound[node.outputs[0]] = name
        entry = _entry(name, scale, zp, axis, ctx.rank(tensor), dtype, node.where)
        if name in ctx.quantize and ctx.quantize[name] != entry:
            raise ImportProblem("E0807", f"{node.where}: tensor '{tensor}' is quantized twice, differently")
        ctx.quantize[name] = entry
        ctx.imports["quant"] = None
        return
    value = ctx.const(src)
    scale, zp, axis, dtype = _params(ctx, node, value.dtype if value is not None else None)
    rank = ctx.rank(src)
    shape = [1] * rank
    if scale.ndim:
        shape[_channel_axis(node.where, axis, rank)] = -1
    if value is not None:  # weights: the real values, quantized again by their @quantize entry
        real = ((value.astype(np.float64) - zp.reshape(shape)) * scale.reshape(shape)).astype(np.float32)
        if node.outputs[0] in ctx.graph_outputs:  # the output declaration copies it
            name = ctx.literal_arg(real, "w")
            ctx.bound[node.outputs[0]] = name
        else:
            name = ctx._declare(node.outputs[0], real)  # named as the DequantizeLinear's output
        if value.dtype in _RANGES and real.size > 1 and node.outputs[0] not in ctx.graph_outputs:
            ctx.quantize[name] = _entry(name, scale, zp, axis, rank, value.dtype, node.where)
            ctx.imports["quant"] = None
        return
    x = ctx.emit("layout.cast", [ctx.arg(src)], outputs=ctx.fresh("real"), types=["real"], label=False)
    z = ctx.literal_arg(zp.reshape(shape).astype(np.float32), "zero_point")
    centered = ctx.emit("math.sub", [x, z], outputs=ctx.fresh("centered"), label=False)
    ctx.emit("math.mul", [centered, ctx.literal_arg(scale.reshape(shape).astype(np.float32), "scale")])
