"""Element-wise arithmetic: one math.* operator per TFLite operator (TFLite broadcasts as numpy, SkriptND's
default alignment), the fused activation after it."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter

#: operators whose options hold a fused activation (slot 0)
FUSED = {"ADD": "math.add", "SUB": "math.sub", "MUL": "math.mul", "DIV": "math.div"}
BINARY = {"MINIMUM": "math.min", "MAXIMUM": "math.max", "POW": "math.pow", "LESS": "math.lt",
          "GREATER": "math.gt", "LESS_EQUAL": "math.le", "GREATER_EQUAL": "math.ge", "EQUAL": "math.eq",
          "NOT_EQUAL": "math.ne", "LOGICAL_AND": "math.and", "LOGICAL_OR": "math.or"}
UNARY = {"RSQRT": "math.rsqrt", "SQRT": "math.sqrt", "EXP": "math.exp", "LOG": "math.log", "ABS": "math.abs",
         "NEG": "math.neg", "SIN": "math.sin", "COS": "math.cos", "FLOOR": "math.floor", "CEIL": "math.ceil",
         "SQUARE": "math.sqr", "SIGN": "math.sign", "LOGICAL_NOT": "math.not"}


def _check_real(ctx: Context, op: Operator) -> None:
    if op.name in ("DIV", "POW") and ctx.dtype(ctx.input(0)) != "real":
        raise ImportProblem("E0863", f"{ctx.here}: {op.name} of integers is not supported (float models only)")


@converter(*FUSED, target="`math.add` / `math.sub` / `math.mul` / `math.div`, then the fused activation",
           caveats="DIV of integers is refused")
def _fused(ctx: Context, op: Operator) -> None:
    _check_real(ctx, op)
    ctx.activate(FUSED[op.name], [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))], activation=ctx.option(0, 0, "b"))


def _binary(ctx: Context, op: Operator) -> None:
    _check_real(ctx, op)
    ctx.emit(BINARY[op.name], [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))])


for _op, _target in BINARY.items():
    converter(_op, target=f"`{_target}`", caveats="POW of integers is refused" if _op == "POW" else "")(_binary)


def _unary(ctx: Context, op: Operator) -> None:
    ctx.emit(UNARY[op.name], [ctx.arg(ctx.input(0))])


for _op, _target in UNARY.items():
    converter(_op, target=f"`{_target}`")(_unary)


@converter("SQUARED_DIFFERENCE", target="`math.sqr`(`math.sub`(x, y))")
def _squared_difference(ctx: Context, op: Operator) -> None:
    diff = tmp(ctx, "math.sub", [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))])
    ctx.emit("math.sqr", [diff])


@converter("SELECT", "SELECT_V2", target="`math.select`(condition, x, y)")
def _select(ctx: Context, op: Operator) -> None:
    ctx.emit("math.select", [ctx.arg(ctx.input(i)) for i in range(3)])


@converter("FLOOR_DIV", target="`math.floor`(`math.div`(x, y)) for reals, `math.div` for integers (flooring, as "
           "TFLite's)")
def _floor_div(ctx: Context, op: Operator) -> None:
    x, y = ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))
    if ctx.dtype(ctx.input(0)) == "int":
        ctx.emit("math.div", [x, y])
        return
    ctx.emit("math.floor", [tmp(ctx, "math.div", [x, y])])
