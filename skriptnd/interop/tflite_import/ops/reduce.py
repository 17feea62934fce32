"""Reductions: MEAN / SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD -> math.*_reduce{axes, squeeze} (the axes
input must be a constant)."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import axis
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter

REDUCE = {"MEAN": "math.mean_reduce", "SUM": "math.sum_reduce", "REDUCE_MAX": "math.max_reduce",
          "REDUCE_MIN": "math.min_reduce", "REDUCE_PROD": "math.prod_reduce"}


def _reduce(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    axes = sorted({axis(int(a), rank) for a in ctx.need_const(ctx.input(1), "axes").reshape(-1)})
    x = ctx.arg(ctx.input(0))
    if not axes:
        ctx.emit("math.iden", [x])
        return
    ctx.emit(REDUCE[op.name], [x], {"axes": axes, "squeeze": not ctx.flag(0)})


for _op, _target in REDUCE.items():
    converter(_op, target=f"`{_target}{{axes, squeeze}}`", caveats="constant axes only")(_reduce)


@converter("ARG_MAX", "ARG_MIN", target="`math.argmax` / `math.argmin{axis, squeeze=true}`",
           caveats="a constant axis; the output is `int` whatever its TFLite width")
def _arg(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    given = ctx.need_const(ctx.input(1), "axis").reshape(-1)
    if given.size != 1:
        raise ImportProblem("E0863", f"{ctx.here}: the axis must be one value, not {given.size}")
    ctx.emit("math.argmax" if op.name == "ARG_MAX" else "math.argmin", [ctx.arg(ctx.input(0))],
             {"axis": axis(int(given[0]), rank), "squeeze": True})


@converter("CUMSUM", target="`math.cumsum{axis, exclusive, reverse}`", caveats="a constant axis")
def _cumsum(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    given = ctx.need_const(ctx.input(1), "axis").reshape(-1)
    if given.size != 1:
        raise ImportProblem("E0863", f"{ctx.here}: the axis must be one value, not {given.size}")
    attribs: dict = {"axis": axis(int(given[0]), rank)}
    if ctx.flag(0):
        attribs["exclusive"] = True
    if ctx.flag(1):
        attribs["reverse"] = True
    ctx.emit("math.cumsum", [ctx.arg(ctx.input(0))], attribs)
