"""Reductions: Reduce* -> math.*_reduce{axes, squeeze = !keepdims}; ArgMax/ArgMin -> math.argmax/argmin."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter
from skriptnd.interop.writer import Expr

_DIRECT = {"ReduceSum": "math.sum_reduce", "ReduceMean": "math.mean_reduce", "ReduceMax": "math.max_reduce",
           "ReduceMin": "math.min_reduce", "ReduceProd": "math.prod_reduce"}
_COMPOSED = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _axes(ctx: Context, node: Node) -> list[int] | Expr | None:
    """The reduced axes (normalized, sorted); None for 'no reduction' (noop_with_empty_axes); for axes fed at
    run time (a graph attribute), their expression, the output's extents recorded as expressions of it."""
    rank = ctx.rank(node.input(0))
    param = ctx.param(node.input(1))
    if param is not None and param.length != 0:
        return _param_axes(ctx, node, param.name if param.length is not None else f"[{param.name}]", rank)
    if param is not None:  # an empty pack: no axes, known now
        axes: list[int] = []
    elif node.input(1):
        axes = [int(a) for a in ctx.need_const(node.input(1), "axes input").reshape(-1)]
    else:
        axes = list(node.attr("axes", []))
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted(norm_axis(a, rank) for a in axes)


def _param_axes(ctx: Context, node: Node, axes: str, rank: int) -> Expr:
    """`(axes + r) % r` (ONNX counts negative axes from the end), and the output's extents: 1 (keepdims) or
    left out where an axis is reduced."""
    normalized = f"({axes} + {rank}) % {rank}"
    extents = [_text(ctx.extent(d)) for d in ctx.shape(node.input(0))]
    if node.attr("keepdims", 1):
        shape = [Expr(f"({k} in {normalized}) ? 1 : {d}") for k, d in enumerate(extents)]
    else:
        mask = ", ".join(f"!({k} in {normalized})" for k in range(rank))
        shape = [Expr(f"[{', '.join(extents)}][[{mask}]]..")]
    ctx.symbolic_shapes[node.outputs[0]] = shape
    return Expr(normalized)


def _text(extent: int | Expr) -> str:
    return extent.text if isinstance(extent, Expr) else str(extent)


@converter(*_DIRECT, *sorted(_COMPOSED), target="`math.{sum,mean,max,min,prod}_reduce{axes, squeeze}` "
           "(L1, L2, LogSum, LogSumExp, SumSquare composed with math.abs/sqr/sqrt/log/exp)",
           caveats="axes given as a graph input become a graph attribute (given at run time)", params=(1,))
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
    if ctx.dtype(node.input(0)) == "bool" and op in ("ReduceMax", "ReduceMin"):
        ctx.emit("math.any_reduce" if op == "ReduceMax" else "math.all_reduce", [x], attribs)
        return
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
    x = ctx.arg(node.input(0))
    if ctx.dtype(node.input(0)) != "real":
        x = ctx.emit("layout.cast", [x], outputs=ctx.fresh("real"), types=["real"], label=False)
    k = norm_axis(int(node.attr("axis", 0)), ctx.rank(node.input(0)))
    attribs: dict = {"axis": k}
    if not node.attr("keepdims", 1):
        attribs["squeeze"] = True
    op = "math.argmax" if node.op_type == "ArgMax" else "math.argmin"
    if not node.attr("select_last_index", 0):
        ctx.emit(op, [x], attribs)
        return
    # the last extreme: the first one of the reversed axis, counted from the end
    n = ctx.static_shape(node.input(0), axes=[k])[k]
    flipped = _tmp(ctx, "layout.slice", [x], axes=[k], begin=[n - 1], end=[-1], stride=[-1])
    index = _tmp(ctx, op, [flipped], **attribs)
    ctx.emit("math.sub", [ctx.literal_arg(np.array(n - 1, np.int64), "last"), index])
