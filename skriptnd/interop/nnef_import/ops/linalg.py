"""matmul and linear (NNEF linear: input [B, C], filter [N, C], bias [1, N])."""

from __future__ import annotations

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.ops.conv import _add_bias, _bias
from skriptnd.interop.nnef_import.registry import converter


@converter("matmul", target="linalg.matmul{transA, transB}")
def matmul(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "linalg.matmul", [ctx.arg(op.inputs["A"]), ctx.arg(op.inputs["B"])],
             {"transA": bool(op.attribs["transposeA"]), "transB": bool(op.attribs["transposeB"])})


@converter("linear", target="nn.linear", note="bias [1, N] squeezed; another bias shape is added after")
def linear(ctx: Context, op: Operation) -> None:
    x, w = op.inputs["input"], op.inputs["filter"]
    ys = ctx.shape(op.outputs["output"])
    if ctx.rank(x) != 2 or ctx.rank(w) != 2:
        raise ctx.problem(f"input rank {ctx.rank(x)} / filter rank {ctx.rank(w)}: nn.linear needs rank 2", "input")
    bias_arg, bias_after = _bias(ctx, op.inputs["bias"], ys[1])
    out = ctx.output()
    result = ctx.tmp("linear") if bias_after is not None else out
    ctx.emit(result, "nn.linear", [ctx.arg(x), ctx.arg(w), bias_arg])
    if bias_after is not None:
        _add_bias(ctx, result, bias_after, out, 2)
