"""Reductions: MEAN / SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD -> math.*_reduce{axes, squeeze} (the axes
input must be a constant)."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
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
