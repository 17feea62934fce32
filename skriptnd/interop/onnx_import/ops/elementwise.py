"""Element-wise arithmetic, comparison and logic: one math.* operator per node (numpy broadcasting
is SkriptND's default alignment)."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.registry import converter

UNARY = {"Abs": "math.abs", "Neg": "math.neg", "Reciprocal": "math.rcp", "Sqrt": "math.sqrt",
         "Exp": "math.exp", "Log": "math.log", "Sin": "math.sin", "Cos": "math.cos", "Tan": "math.tan",
         "Asin": "math.asin", "Acos": "math.acos", "Atan": "math.atan", "Sinh": "math.sinh",
         "Cosh": "math.cosh", "Asinh": "math.asinh", "Acosh": "math.acosh", "Atanh": "math.atanh",
         "Tanh": "math.tanh", "Sign": "math.sign", "Not": "math.not", "Floor": "math.floor",
         "Ceil": "math.ceil", "Identity": "math.iden"}

BINARY = {"Add": "math.add", "Sub": "math.sub", "Mul": "math.mul", "Div": "math.div", "Pow": "math.pow",
          "Equal": "math.eq", "Less": "math.lt", "Greater": "math.gt", "LessOrEqual": "math.le",
          "GreaterOrEqual": "math.ge", "And": "math.and", "Or": "math.or", "Xor": "math.xor"}

VARIADIC = {"Max": "math.max", "Min": "math.min", "Sum": "math.add", "Mean": "math.add"}


def _unary(ctx: Context, node: Node) -> None:
    ctx.emit(UNARY[node.op_type], [ctx.arg(node.input(0))])


for _op, _target in UNARY.items():
    converter(_op, target=f"`{_target}`")(_unary)


def _same_type(ctx: Context, node: Node, names: list[str]) -> list[str]:
    """ONNX Pow may raise a real to an int power; SkriptND wants one type: cast the others."""
    first = ctx.dtype(names[0])
    out = []
    for name in names:
        arg = ctx.arg(name)
        if ctx.dtype(name) != first:
            arg = ctx.emit("layout.cast", [arg], outputs=ctx.fresh("cast"), types=[first], label=False)
        out.append(arg)
    return out


def _binary(ctx: Context, node: Node) -> None:
    x, y = _same_type(ctx, node, [node.input(0), node.input(1)])
    if node.op_type == "Div" and ctx.dtype(node.input(0)) == "int":
        _truncating_div(ctx, x, y)
        return
    ctx.emit(BINARY[node.op_type], [x, y])


def _truncating_div(ctx: Context, x: str, y: str) -> None:
    """ONNX integer division truncates; SkriptND's floors: one more where the remainder is non-zero and
    the signs differ."""
    def tmp(op: str, *args: str) -> str:
        return ctx.emit(op, list(args), outputs=ctx.fresh(op.rpartition(".")[2]), label=False)

    zero, one = ctx.literal_arg(np.array(0, np.int64), "zero"), ctx.literal_arg(np.array(1, np.int64), "one")
    q = tmp("math.div", x, y)
    remainder = tmp("math.ne", tmp("math.sub", x, tmp("math.mul", q, y)), zero)
    signs = tmp("math.ne", tmp("math.lt", x, zero), tmp("math.lt", y, zero))
    ctx.emit("math.select", [tmp("math.and", remainder, signs), tmp("math.add", q, one), q])


for _op, _target in BINARY.items():
    converter(_op, target=f"`{_target}`", caveats={"Pow": "numpy broadcasting; an integer exponent is cast",
                                                   "Div": "numpy broadcasting; integers truncate as in ONNX"}
              .get(_op, "numpy broadcasting"))(_binary)


@converter("Mod", target="`math.mod`", caveats="fmod=1 on integers is refused")
def _mod(ctx: Context, node: Node) -> None:
    x, y = ctx.arg(node.input(0)), ctx.arg(node.input(1))
    if node.attr("fmod", 0) and ctx.dtype(node.input(0)) == "int":
        raise ImportProblem("E0807", f"{node.where}: fmod=1 (C remainder) on integers is not supported")
    if node.attr("fmod", 0):  # C fmod: sign of the dividend = x - trunc(x / y) * y
        q = ctx.emit("math.div", [x, y], outputs=ctx.fresh("q"), label=False)
        sign = ctx.emit("math.sign", [q], outputs=ctx.fresh("s"), label=False)
        mag = ctx.emit("math.floor", [ctx.emit("math.abs", [q], outputs=ctx.fresh("a"), label=False)],
                       outputs=ctx.fresh("f"), label=False)
        t = ctx.emit("math.mul", [sign, mag], outputs=ctx.fresh("t"), label=False)
        ctx.emit("math.sub", [x, ctx.emit("math.mul", [t, y], outputs=ctx.fresh("ty"), label=False)])
        return
    ctx.emit("math.mod", [x, y])


@converter(*VARIADIC, target="`math.max`/`math.min`/`math.add` chained (Mean: then `math.div`)")
def _variadic(ctx: Context, node: Node) -> None:
    names = [i for i in node.inputs if i]
    args = _same_type(ctx, node, names)
    op = VARIADIC[node.op_type]
    if len(args) == 1:
        ctx.emit("math.iden", args)
        return
    acc = args[0]
    for k, arg in enumerate(args[1:], start=2):
        last = k == len(args) and node.op_type != "Mean"
        acc = ctx.emit(op, [acc, arg], outputs=None if last else ctx.fresh("acc"), label=last)
    if node.op_type == "Mean":
        ctx.emit("math.div", [acc, ctx.literal_arg(np.array(float(len(args)), np.float32), "n")])


@converter("Where", target="`math.select`")
def _where(ctx: Context, node: Node) -> None:
    ctx.emit("math.select", [ctx.arg(node.input(0)), ctx.arg(node.input(1)), ctx.arg(node.input(2))])


@converter("IsNaN", target="`math.ne` (x != x)")
def _isnan(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    ctx.emit("math.ne", [x, x])


@converter("IsInf", target="`math.eq` with ±inf")
def _isinf(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if pos and neg:
        a = ctx.emit("math.abs", [x], outputs=ctx.fresh("abs"), label=False)
        ctx.emit("math.eq", [a, ctx.literal_arg(np.array(np.inf, np.float32), "inf")])
    elif pos or neg:
        ctx.emit("math.eq", [x, ctx.literal_arg(np.array(np.inf if pos else -np.inf, np.float32), "inf")])
    else:
        ctx.emit("math.ne", [x, x])  # nothing detected: all false for finite input


@converter("Round", target="`math.round`, ties to even (`math.select` on the halves)")
def _round(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))

    def tmp(op: str, *args: str) -> str:
        return ctx.emit(op, list(args), outputs=ctx.fresh(op.rpartition(".")[2]), label=False)

    half = ctx.literal_arg(np.array(0.5, np.float32), "half")
    two = ctx.literal_arg(np.array(2.0, np.float32), "two")
    tie = tmp("math.eq", tmp("math.sub", x, tmp("math.floor", x)), half)
    even = tmp("math.mul", tmp("math.round", tmp("math.mul", x, half)), two)
    ctx.emit("math.select", [tie, even, tmp("math.round", x)])
