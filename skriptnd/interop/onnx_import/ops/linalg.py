"""Matrix products: MatMul -> linalg.matmul, Gemm -> nn.linear (the common transB=1 layer) or
linalg.matmul{transA, transB} with alpha/beta arithmetic."""

from __future__ import annotations

import numpy as np

from ..context import Context, Node
from ..errors import ImportProblem
from ..registry import converter


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


@converter("MatMul", target="`linalg.matmul`", caveats="1-D operands are unsqueezed and the result squeezed")
def _matmul(ctx: Context, node: Node) -> None:
    a, b = node.input(0), node.input(1)
    if ctx.dtype(a) != "real":
        raise ImportProblem("E0810", f"{node.where}: integer MatMul is not supported (use MatMulInteger in QDQ)")
    ra, rb = ctx.rank(a), ctx.rank(b)
    x, y = ctx.arg(a), ctx.arg(b)
    if ra == 1:
        x = _tmp(ctx, "layout.unsqueeze", [x], axes=[0])
    if rb == 1:
        y = _tmp(ctx, "layout.unsqueeze", [y], axes=[1])
    if ra > 1 and rb > 1:
        ctx.emit("linalg.matmul", [x, y])
        return
    z = _tmp(ctx, "linalg.matmul", [x, y])
    rz = max(ra, rb, 2)
    axes = ([rz - 2] if ra == 1 else []) + ([rz - 1] if rb == 1 else [])
    ctx.emit("layout.squeeze", [z], {"axes": axes})


@converter("Gemm", target="`nn.linear` (transB=1, alpha=beta=1, 1-D bias) else `linalg.matmul{transA, transB}`")
def _gemm(ctx: Context, node: Node) -> None:
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    a, b, c = node.input(0), node.input(1), node.input(2)
    n = ctx.static_shape(b)[0 if trans_b else 1]
    if trans_b and not trans_a and alpha == 1.0 and beta == 1.0 and (not c or ctx.shape(c) == (n,)):
        ctx.emit("nn.linear", [ctx.arg(a), ctx.arg(b), ctx.arg(c)])
        return
    attribs = {k: True for k, v in (("transA", trans_a), ("transB", trans_b)) if v}
    last = not c and alpha == 1.0
    y = ctx.emit("linalg.matmul", [ctx.arg(a), ctx.arg(b)], attribs,
                 outputs=None if last else ctx.fresh("product"), label=last)
    if last:
        return
    if alpha != 1.0:
        last = not c
        y = ctx.emit("math.mul", [y, ctx.literal_arg(np.array(alpha, np.float32), "alpha")],
                     outputs=None if last else ctx.fresh("scaled"), label=last)
        if last:
            return
    bias = ctx.arg(c)
    if beta != 1.0:
        bias = _tmp(ctx, "math.mul", [bias, ctx.literal_arg(np.array(beta, np.float32), "beta")])
    ctx.emit("math.add", [y, bias])
