"""Converters for the ``linalg`` module: matmul (batched, transposed, with an addend), dot, matvec, outer."""

from __future__ import annotations

from skriptnd.compose.ir import Operation
from skriptnd.interop.onnx_export.core import Context, Results, converter, ints, shape


def _t(ctx: Context, x: str, rank: int) -> str:
    return ctx.transpose(x, [*range(rank - 2), rank - 1, rank - 2])


@converter("linalg.matmul", onnx="MatMul (Transpose for transA/transB, Add for C)")
def matmul(ctx: Context, op: Operation) -> Results:
    A, B = op.inputs[0], op.inputs[1]
    C = op.inputs[2] if len(op.inputs) > 2 else None
    a, b = ctx.value(A), ctx.value(B)
    ra, rb = len(shape(A)), len(shape(B))
    if op.attribs.get("transA", False):
        a = _t(ctx, a, ra)
    if op.attribs.get("transB", False):
        b = _t(ctx, b, rb)
    z = ctx.node("MatMul", [a, b])
    if C is not None:
        c = ctx.value(C)
        want = ints(op.binding.env["ec"]) + list(shape(C)[-2:]) if op.binding and "ec" in op.binding.env else None
        if want is not None and want != shape(C):
            c = ctx.reshape(c, want)
        z = ctx.node("Add", [z, c])
    return [z]


@converter("linalg.dot", onnx="Mul, ReduceSum")
def dot(ctx: Context, op: Operation) -> Results:
    z = ctx.node("ReduceSum", [ctx.node("Mul", [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])]),
                               ctx.i64([0], "axes")], keepdims=0)
    if len(op.inputs) > 2 and op.inputs[2] is not None:
        z = ctx.node("Add", [z, ctx.value(op.inputs[2])])
    return [z]


@converter("linalg.matvec", onnx="MatMul")
def matvec(ctx: Context, op: Operation) -> Results:
    a, x = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    # transA: x A (a vector-matrix product; onnxruntime 1.32 fuses Transpose + matrix-vector MatMul wrongly)
    z = ctx.node("MatMul", [x, a] if op.attribs.get("transA", False) else [a, x])
    if len(op.inputs) > 2 and op.inputs[2] is not None:
        z = ctx.node("Add", [z, ctx.value(op.inputs[2])])
    return [z]


@converter("linalg.outer", onnx="Reshape, Mul")
def outer(ctx: Context, op: Operation) -> Results:
    sx, sy = shape(op.inputs[0]), shape(op.inputs[1])
    x = ctx.reshape(ctx.value(op.inputs[0]), sx + [1] * len(sy))
    return [ctx.node("Mul", [x, ctx.value(op.inputs[1])])]
