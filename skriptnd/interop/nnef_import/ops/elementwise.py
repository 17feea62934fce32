"""Element-wise operations: unary and binary math, comparisons, logic, select, clamp, add_n, copy_n.

NNEF broadcasting pads the shorter shape with trailing singleton axes; `Context.broadcast_args` turns that
into SkriptND's alignment attributes."""

from __future__ import annotations

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.registry import converter

UNARY = {
    "copy": "math.iden", "neg": "math.neg", "rcp": "math.rcp", "exp": "math.exp", "log": "math.log",
    "sin": "math.sin", "cos": "math.cos", "tan": "math.tan", "sinh": "math.sinh", "cosh": "math.cosh",
    "tanh": "math.tanh", "asin": "math.asin", "acos": "math.acos", "atan": "math.atan", "asinh": "math.asinh",
    "acosh": "math.acosh", "atanh": "math.atanh", "abs": "math.abs", "sign": "math.sign", "not": "math.not",
    "floor": "math.floor", "ceil": "math.ceil", "round": "math.round", "sqr": "math.sqr", "sqrt": "math.sqrt",
    "rsqr": "math.rsqr", "rsqrt": "math.rsqrt", "log2": "math.log2",
}
BINARY = {
    "add": "math.add", "sub": "math.sub", "mul": "math.mul", "div": "math.div", "pow": "math.pow",
    "lt": "math.lt", "gt": "math.gt", "le": "math.le", "ge": "math.ge", "eq": "math.eq", "ne": "math.ne",
    "and": "math.and", "or": "math.or", "min": "math.min", "max": "math.max",
}


def _unary(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), UNARY[op.name], [ctx.arg(op.inputs["x"])])


def _binary(ctx: Context, op: Operation) -> None:
    args, align = ctx.broadcast_args([op.inputs["x"], op.inputs["y"]], ["lhs_align", "rhs_align"])
    ctx.emit(ctx.output(), BINARY[op.name], args, align)


for _name, _target in UNARY.items():
    converter(_name, target=_target)(_unary)
for _name, _target in BINARY.items():
    converter(_name, target=_target, note="NNEF trailing-singleton broadcasting as `lhs_align`/`rhs_align`")(_binary)


@converter("select", target="math.select", note="alignment attributes for NNEF broadcasting")
def select(ctx: Context, op: Operation) -> None:
    args, align = ctx.broadcast_args([op.inputs["condition"], op.inputs["true_value"], op.inputs["false_value"]],
                                     ["cond_align", "lhs_align", "rhs_align"])
    ctx.emit(ctx.output(), "math.select", args, align)


@converter("clamp", target="math.clamp", note="alignment attributes for NNEF broadcasting")
def clamp(ctx: Context, op: Operation) -> None:
    args, align = ctx.broadcast_args([op.inputs["x"], op.inputs["a"], op.inputs["b"]],
                                     ["val_align", "min_align", "max_align"])
    ctx.emit(ctx.output(), "math.clamp", args, align)


@converter("add_n", target="math.sum_n")
def add_n(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "math.sum_n", [[ctx.arg(x) for x in op.inputs["x"]]])


@converter("copy_n", target="math.iden", note="one copy per output")
def copy_n(ctx: Context, op: Operation) -> None:
    for out in op.outputs["y"]:
        ctx.emit(ctx.name(out), "math.iden", [ctx.arg(op.inputs["x"])])
