"""Reductions (NNEF keeps reduced axes as singletons, as SkriptND does without `squeeze`) and moments."""

from __future__ import annotations

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.registry import converter

TARGETS = {"sum_reduce": "math.sum_reduce", "mean_reduce": "math.mean_reduce", "min_reduce": "math.min_reduce",
           "max_reduce": "math.max_reduce", "any_reduce": "math.any_reduce", "all_reduce": "math.all_reduce"}


def _reduce(ctx: Context, op: Operation) -> None:
    target = TARGETS[op.name]
    if op.name == "sum_reduce" and op.attribs.get("normalize"):
        target = "math.mean_reduce"
    ctx.emit(ctx.output(), target, [ctx.arg(op.inputs["input"])], {"axes": list(op.attribs["axes"])})


for _name, _target in TARGETS.items():
    converter(_name, target=_target, note="sum_reduce{normalize} -> math.mean_reduce" if _name == "sum_reduce"
              else "")(_reduce)


def _arg_reduce(ctx: Context, op: Operation) -> None:
    axes = list(op.attribs["axes"])
    if len(axes) != 1:
        raise ctx.problem(f"over {len(axes)} axes ({axes}): only one axis is supported "
                          "(NNEF returns a flat index into the reduced axes)", "axes")
    target = "math.argmax" if op.name == "argmax_reduce" else "math.argmin"
    ctx.emit(ctx.output(), target, [ctx.arg(op.inputs["input"])], {"axis": int(axes[0])})


converter("argmax_reduce", target="math.argmax{axis}", note="one axis")(_arg_reduce)
converter("argmin_reduce", target="math.argmin{axis}", note="one axis")(_arg_reduce)


@converter("moments", target="math.moments")
def moments(ctx: Context, op: Operation) -> None:
    ctx.emit([ctx.output("mean"), ctx.output("variance")], "math.moments", [ctx.arg(op.inputs["input"])],
             {"axes": list(op.attribs["axes"])})
