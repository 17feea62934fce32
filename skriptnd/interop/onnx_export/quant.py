"""@quantize graphs (spec §2.14) as QDQ ONNX graphs, and the ``quant`` module's operators.

Every tensor with a @quantize entry is replaced, for all its readers, by its quantized-and-dequantized
value, which is what the quantize operator computes (``sknd run --via kernels`` runs the same fake
quantization; the integer TOSA graph of ``sknd run`` computes the same integers up to rounding ties):

- variables and constants (weights, biases) are quantized here, with the operator's own numbers
  (:func:`skriptnd.compose.quantization.quantize`: round half away from zero), and stored as int8 / int16 /
  int32 initializers read through ``DequantizeLinear`` (per channel with ``axis``);
- graph inputs and computed tensors go through ``QuantizeLinear`` → ``DequantizeLinear`` when their
  integer type is int8 (int16 from opset 21); a range narrower than the type (symmetric, fewer bits) is
  clamped after dequantization. Other widths (int32 activations) are quantized arithmetically
  (Div, round half away from zero, Add, Clip, Sub, Mul) in float.

ONNX ``QuantizeLinear`` rounds half to even where the operator rounds half away from zero: the two differ
only for values exactly halfway between two quantization levels.
"""

from __future__ import annotations

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.compose.quantization import QParams, dequantize, qparams, quantize
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.onnx_export.core import Context, Results, Unsupported, converter, shape

_ONNX_INT = {"int8": 3, "int16": 5, "int32": 6}  # TensorProto.INT8, INT16, INT32


def _qparams(t: Tensor) -> QParams:
    try:
        return qparams(t)
    except DiagnosticError as e:
        raise Unsupported(e.diagnostics[0].message) from None


def _params(ctx: Context, qp: QParams, hint: str) -> tuple[str, str, int | None]:
    """(scale, zero point, axis) initializers of a QDQ pair."""
    scale = qp.scale.astype(np.float32)
    zp = qp.zero_point.astype({"int8": np.int8, "int16": np.int16, "int32": np.int32}[qp.dtype])
    if qp.axis is None:
        return ctx.const(scale.reshape(()), None, f"{hint}.scale"), ctx.const(zp.reshape(()), None,
                                                                               f"{hint}.zero_point"), None
    return ctx.const(scale, None, f"{hint}.scale"), ctx.const(zp, None, f"{hint}.zero_point"), qp.axis


def _along(values: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    if axis is None:
        return values.reshape(())
    dims = [1] * rank
    dims[axis] = values.size
    return values.reshape(dims)


def _fake_quantize(ctx: Context, x: str, t: Tensor, qp: QParams) -> str:
    """``x`` quantized and dequantized as ``t``'s quantize operator does."""
    rank = len(shape(t))
    lo = ((qp.qmin - qp.zero_point) * qp.scale).astype(np.float32)
    hi = ((qp.qmax - qp.zero_point) * qp.scale).astype(np.float32)
    native = qp.dtype == "int8" or (qp.dtype == "int16" and ctx.opset >= 21)
    if native:
        scale, zp, axis = _params(ctx, qp, t.name)
        q = ctx.node("QuantizeLinear", [x, scale, zp], axis=axis)
        y = ctx.node("DequantizeLinear", [q, scale, zp], axis=axis)
        full = {"int8": (-128, 127), "int16": (-32768, 32767)}[qp.dtype]
        if (qp.qmin, qp.qmax) == full:
            return y
    else:  # q = clamp(zp + round(x / scale), qmin, qmax) in float, then (q - zp) * scale
        scale = ctx.const(_along(qp.scale.astype(np.float32), qp.axis, rank), None, f"{t.name}.scale")
        r = ctx.node("Div", [x, scale])
        a = ctx.node("Abs", [r])
        f = ctx.node("Floor", [a])
        up = ctx.node("GreaterOrEqual", [ctx.node("Sub", [a, f]), ctx.scalar(0.5)])
        r = ctx.node("Mul", [ctx.node("Where", [up, ctx.node("Add", [f, ctx.scalar(1.0)]), f]),
                             ctx.node("Sign", [r])])
        y = ctx.node("Mul", [r, scale])
    return ctx.node("Min", [ctx.node("Max", [y, ctx.const(_along(lo, qp.axis, rank), None, f"{t.name}.min")]),
                            ctx.const(_along(hi, qp.axis, rank), None, f"{t.name}.max")])


def quantize_graph_inputs(ctx: Context, graph: Graph) -> None:
    """Quantized variables and constants become integer initializers read through DequantizeLinear,
    quantized graph inputs go through a QDQ pair (ONNX names bound in ``ctx``)."""
    for t in graph.tensors:
        if t.quant is None:
            continue
        qp = _qparams(t)
        if t.kind == "input":
            ctx.names[id(t)] = _fake_quantize(ctx, ctx.value(t), t, qp)
        elif t.kind in ("variable", "constant"):
            float_name = ctx.value(t)  # the float values (through the initializer just made)
            values = next(i for i in ctx.initializers if i.name == float_name)
            from onnx import numpy_helper

            a = numpy_helper.to_array(values)
            ctx.initializers.remove(values)
            q = quantize(a, qp)
            if qp.dtype == "int16" and ctx.opset < 21:  # no int16 DequantizeLinear before opset 21
                ctx.names[id(t)] = ctx.const(dequantize(q, qp), None, t.name)
                continue
            qname = ctx.const(q, None, f"{t.name}.quantized")
            scale, zp, axis = _params(ctx, qp, t.name)
            ctx.names[id(t)] = ctx.node("DequantizeLinear", [qname, scale, zp], axis=axis)


def quantized_value(ctx: Context, op: Operation) -> None:
    """After ``op``: its quantized outputs replaced by their quantized-and-dequantized values."""
    for v in op.outputs:
        for t in v if isinstance(v, list) else [v]:
            if t is not None and t.quant is not None and id(t) in ctx.names:
                ctx.names[id(t)] = _fake_quantize(ctx, ctx.names[id(t)], t, _qparams(t))


# -- the quant module's operators, invoked in a graph ------------------------------------------


@converter("quant.zero_point_linear_quantize", "quant.min_max_linear_quantize", onnx="QuantizeLinear, DequantizeLinear (int8; int16 from opset 21; else arithmetic)")
def quantize_op(ctx: Context, op: Operation) -> Results:
    """An explicit invocation: the same fake quantization, with the operation's attributes."""
    t = op.inputs[0]
    probe = Tensor(name=t.name, dtype="real", shape=t.shape,
                   quant={"op": op.op, "attribs": dict(op.attribs), "dtypes": []})
    return [_fake_quantize(ctx, ctx.value(t), probe, _qparams(probe))]
