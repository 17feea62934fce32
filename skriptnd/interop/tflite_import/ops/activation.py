"""Activations and softmax: nn.* where the stdlib has the operator, else a few math.* statements."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.ops._util import real, tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("LOGISTIC", target="`nn.sigmoid`")
def _logistic(ctx: Context, op: Operator) -> None:
    ctx.emit("nn.sigmoid", [ctx.arg(ctx.input(0))])


@converter("TANH", target="`math.tanh`")
def _tanh(ctx: Context, op: Operator) -> None:
    ctx.emit("math.tanh", [ctx.arg(ctx.input(0))])


@converter("GELU", target="`nn.gelu` (`{approximate='TANH'}` for the approximate form)")
def _gelu(ctx: Context, op: Operator) -> None:
    ctx.emit("nn.gelu", [ctx.arg(ctx.input(0))], {"approximate": "TANH"} if ctx.flag(0) else {})


@converter("HARD_SWISH", target="`math.div`(`math.mul`(x, `nn.relu{max=6}`(x + 3)), 6), TFLite's reference formula")
def _hard_swish(ctx: Context, op: Operator) -> None:
    x = ctx.arg(ctx.input(0))
    r = tmp(ctx, "nn.relu", [tmp(ctx, "math.add", [x, real(ctx, 3.0)])], {"max": 6.0})
    ctx.emit("math.div", [tmp(ctx, "math.mul", [x, r]), real(ctx, 6.0)])


@converter("RELU", target="`nn.relu`")
def _relu(ctx: Context, op: Operator) -> None:
    ctx.emit("nn.relu", [ctx.arg(ctx.input(0))])


@converter("RELU6", target="`nn.relu{max=6}`")
def _relu6(ctx: Context, op: Operator) -> None:
    ctx.emit("nn.relu", [ctx.arg(ctx.input(0))], {"max": 6.0})


@converter("RELU_N1_TO_1", "RELU_0_TO_1", target="`math.clamp`(x, -1 or 0, 1)")
def _relu_clamp(ctx: Context, op: Operator) -> None:
    lo = -1.0 if op.name == "RELU_N1_TO_1" else 0.0
    ctx.emit("math.clamp", [ctx.arg(ctx.input(0)), real(ctx, lo), real(ctx, 1.0)])


@converter("LEAKY_RELU", target="`nn.relu{alpha}`", caveats="alpha outside [0, 1]: `math.select`")
def _leaky(ctx: Context, op: Operator) -> None:
    x, alpha = ctx.arg(ctx.input(0)), ctx.real_option(0, 0.2)
    if 0.0 <= alpha <= 1.0:
        ctx.emit("nn.relu", [x], {"alpha": alpha})
        return
    neg = tmp(ctx, "math.lt", [x, real(ctx, 0.0)])
    ctx.emit("math.select", [neg, tmp(ctx, "math.mul", [x, real(ctx, alpha)]), x])


@converter("PRELU", target="`math.select` of x < 0, x * alpha, x", caveats="alpha broadcast as numpy")
def _prelu(ctx: Context, op: Operator) -> None:
    x, alpha = ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))
    neg = tmp(ctx, "math.lt", [x, real(ctx, 0.0)])
    ctx.emit("math.select", [neg, tmp(ctx, "math.mul", [x, alpha]), x])


@converter("SOFTMAX", target="`nn.softmax{axes=[-1]}` (of beta x when beta is not 1)")
def _softmax(ctx: Context, op: Operator) -> None:
    x = ctx.arg(ctx.input(0))
    beta = ctx.real_option(0, 0.0)  # as the kernel reads it: an absent beta is 0 (a uniform result)
    if beta != 1.0:
        x = tmp(ctx, "math.mul", [x, real(ctx, beta)])
    ctx.emit("nn.softmax", [x], {"axes": [ctx.rank(ctx.input(0)) - 1]})


@converter("LOG_SOFTMAX", target="`math.log`(`nn.softmax{axes=[-1]}`)")
def _log_softmax(ctx: Context, op: Operator) -> None:
    s = tmp(ctx, "nn.softmax", [ctx.arg(ctx.input(0))], {"axes": [ctx.rank(ctx.input(0)) - 1]})
    ctx.emit("math.log", [s])


@converter("L2_NORMALIZATION", target="`nn.l2_norm{axes=[-1], epsilon=1e-6}`", caveats="TFLite's epsilon is 1e-6")
def _l2_norm(ctx: Context, op: Operator) -> None:
    ctx.activate("nn.l2_norm", [ctx.arg(ctx.input(0))], {"axes": [ctx.rank(ctx.input(0)) - 1], "epsilon": 1e-6},
                 activation=ctx.option(0, 0, "b"))


@converter("ELU", target="`nn.elu`")
def _elu(ctx: Context, op: Operator) -> None:
    ctx.emit("nn.elu", [ctx.arg(ctx.input(0))])
