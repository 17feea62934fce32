"""Reductions: Reduce* -> math.*_reduce{axes, squeeze = !keepdims}; ArgMax/ArgMin -> math.argmax/argmin."""

from __future__ import annotations

from ..context import Context, Node
from ..errors import ImportProblem
from ..registry import converter
from ._util import axis as norm_axis

_DIRECT = {"ReduceSum": "math.sum_reduce", "ReduceMean": "math.mean_reduce", "ReduceMax": "math.max_reduce",
           "ReduceMin": "math.min_reduce", "ReduceProd": "math.prod_reduce"}
_COMPOSED = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _axes(ctx: Context, node: Node) -> list[int] | None:
    """The reduced axes (normalized, sorted); None for 'no reduction' (noop_with_empty_axes)."""
    rank = ctx.rank(node.input(0))
    if node.input(1):
        axes = [int(a) for a in ctx.need_const(node.input(1), "axes input").reshape(-1)]
    else:
        axes = list(node.attr("axes", []))
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted(norm_axis(a, rank) for a in axes)


@converter(*_DIRECT, *sorted(_COMPOSED), target="`math.{sum,mean,max,min,prod}_reduce{axes, squeeze}` "
           "(L1, L2, LogSum, LogSumExp, SumSquare composed with math.abs/sqr/sqrt/log/exp)",
           caveats="axes given as an input must be constant")
def _reduce(ctx: Context, node: Node) -> None:
    axes = _axes(ctx, node)
    x = ctx.arg(node.input(0))
    if axes is None:
        ctx.emit("math.iden", [x])
        return
    attribs = {"axes": axes}
    if not node.attr("keepdims", 1):
        attribs["squeeze"] = True
    op = node.op_type
    if op in _DIRECT:
        if op == "ReduceMean" and ctx.dtype(node.input(0)) != "real":
            raise ImportProblem("E0810", f"{node.where}: ReduceMean of integers is not supported")
        ctx.emit(_DIRECT[op], [x], attribs)
    elif op == "ReduceL1":
        ctx.emit("math.sum_reduce", [_tmp(ctx, "math.abs", [x])], attribs)
    elif op == "ReduceSumSquare":
        ctx.emit("math.sum_reduce", [_tmp(ctx, "math.sqr", [x])], attribs)
    elif op == "ReduceL2":
        ctx.emit("math.sqrt", [_tmp(ctx, "math.sum_reduce", [_tmp(ctx, "math.sqr", [x])], **attribs)])
    elif op == "ReduceLogSum":
        ctx.emit("math.log", [_tmp(ctx, "math.sum_reduce", [x], **attribs)])
    else:  # ReduceLogSumExp
        ctx.emit("math.log", [_tmp(ctx, "math.sum_reduce", [_tmp(ctx, "math.exp", [x])], **attribs)])


@converter("ArgMax", "ArgMin", target="`math.argmax{axis, squeeze}` / `math.argmin`",
           caveats="select_last_index=1 is refused; integer inputs are compared as reals")
def _arg(ctx: Context, node: Node) -> None:
    if node.attr("select_last_index", 0):
        raise ImportProblem("E0807", f"{node.where}: select_last_index=1 is not supported")
    x = ctx.arg(node.input(0))
    if ctx.dtype(node.input(0)) != "real":
        x = ctx.emit("layout.cast", [x], outputs=ctx.fresh("real"), types=["real"], label=False)
    attribs: dict = {"axis": norm_axis(int(node.attr("axis", 0)), ctx.rank(node.input(0)))}
    if not node.attr("keepdims", 1):
        attribs["squeeze"] = True
    ctx.emit("math.argmax" if node.op_type == "ArgMax" else "math.argmin", [x], attribs)
