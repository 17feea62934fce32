"""Activations: nn.* where the stdlib has the operator, else a few math.* statements."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.registry import converter


def _k(ctx: Context, value: float) -> str:
    return ctx.literal_arg(np.array(value, np.float32), "k")


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


@converter("Relu", target="`nn.relu`")
def _relu(ctx: Context, node: Node) -> None:
    if ctx.dtype(node.input(0)) != "real":
        x = ctx.arg(node.input(0))
        ctx.emit("math.max", [x, ctx.literal_arg(np.array(0, np.int64), "zero")])
        return
    ctx.emit("nn.relu", [ctx.arg(node.input(0))])


@converter("LeakyRelu", target="`nn.relu{alpha}`", caveats="alpha outside [0, 1]: `math.select`")
def _leaky(ctx: Context, node: Node) -> None:
    x, alpha = ctx.arg(node.input(0)), float(node.attr("alpha", 0.01))
    if 0.0 <= alpha <= 1.0:
        ctx.emit("nn.relu", [x], {"alpha": alpha})
        return
    neg = _tmp(ctx, "math.lt", [x, _k(ctx, 0.0)])
    ctx.emit("math.select", [neg, _tmp(ctx, "math.mul", [x, _k(ctx, alpha)]), x])


@converter("PRelu", target="`math.select` of x < 0, x * slope, x",
           caveats="slope broadcast per ONNX rules (not only per channel)")
def _prelu(ctx: Context, node: Node) -> None:
    x, slope = ctx.arg(node.input(0)), ctx.arg(node.input(1))
    neg = _tmp(ctx, "math.lt", [x, _k(ctx, 0.0)])
    ctx.emit("math.select", [neg, _tmp(ctx, "math.mul", [x, slope]), x])


@converter("Sigmoid", target="`nn.sigmoid`")
def _sigmoid(ctx: Context, node: Node) -> None:
    ctx.emit("nn.sigmoid", [ctx.arg(node.input(0))])


@converter("Softplus", target="`nn.softplus`")
def _softplus(ctx: Context, node: Node) -> None:
    ctx.emit("nn.softplus", [ctx.arg(node.input(0))])


@converter("Erf", target="`nn.erf`")
def _erf(ctx: Context, node: Node) -> None:
    ctx.emit("nn.erf", [ctx.arg(node.input(0))])


@converter("Elu", target="`nn.elu{alpha}`")
def _elu(ctx: Context, node: Node) -> None:
    ctx.emit("nn.elu", [ctx.arg(node.input(0))], {"alpha": float(node.attr("alpha", 1.0))})


@converter("Selu", target="`nn.selu{alpha, lambda}`")
def _selu(ctx: Context, node: Node) -> None:
    ctx.emit("nn.selu", [ctx.arg(node.input(0))], {"alpha": float(node.attr("alpha", 1.67326319217681884765625)),
                                                   "lambda": float(node.attr("gamma", 1.05070102214813232421875))})


@converter("Celu", target="`math.max`/`math.min`/`math.exp`: max(0, x) + min(0, alpha (exp(x / alpha) - 1))")
def _celu(ctx: Context, node: Node) -> None:
    x, alpha = ctx.arg(node.input(0)), float(node.attr("alpha", 1.0))
    e = _tmp(ctx, "math.exp", [_tmp(ctx, "math.div", [x, _k(ctx, alpha)])])
    neg = _tmp(ctx, "math.min", [_tmp(ctx, "math.mul", [_tmp(ctx, "math.sub", [e, _k(ctx, 1.0)]), _k(ctx, alpha)]),
                                 _k(ctx, 0.0)])
    ctx.emit("math.add", [_tmp(ctx, "math.max", [x, _k(ctx, 0.0)]), neg])


@converter("ThresholdedRelu", target="`nn.thresholded_relu{theta}`")
def _thresholded(ctx: Context, node: Node) -> None:
    ctx.emit("nn.thresholded_relu", [ctx.arg(node.input(0))], {"theta": float(node.attr("alpha", 1.0))})


@converter("Gelu", target="`nn.gelu{approximate}`")
def _gelu(ctx: Context, node: Node) -> None:
    approximate = node.attr("approximate", "none")
    attribs = {"approximate": "TANH"} if approximate == "tanh" else {}
    ctx.emit("nn.gelu", [ctx.arg(node.input(0))], attribs)


@converter("HardSigmoid", target="`math.clamp`(alpha x + beta, 0, 1)")
def _hard_sigmoid(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    alpha, beta = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
    y = _tmp(ctx, "math.add", [_tmp(ctx, "math.mul", [x, _k(ctx, alpha)]), _k(ctx, beta)])
    ctx.emit("math.clamp", [y, _k(ctx, 0.0), _k(ctx, 1.0)])


@converter("HardSwish", target="`math.mul`(x, `math.clamp`(x / 6 + 1/2, 0, 1))")
def _hard_swish(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    y = _tmp(ctx, "math.add", [_tmp(ctx, "math.mul", [x, _k(ctx, 1.0 / 6.0)]), _k(ctx, 0.5)])
    ctx.emit("math.mul", [x, _tmp(ctx, "math.clamp", [y, _k(ctx, 0.0), _k(ctx, 1.0)])])


@converter("Mish", target="`math.mul`(x, `math.tanh`(`nn.softplus`(x)))")
def _mish(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    ctx.emit("math.mul", [x, _tmp(ctx, "math.tanh", [_tmp(ctx, "nn.softplus", [x])])])


@converter("Softsign", target="x / (1 + |x|)")
def _softsign(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    ctx.emit("math.div", [x, _tmp(ctx, "math.add", [_tmp(ctx, "math.abs", [x]), _k(ctx, 1.0)])])


@converter("Clip", target="`nn.relu{max}` for [0, max], else `math.clamp`",
           caveats="a missing bound is ±inf (for integers: no bound, so no constant beyond int32 is written)")
def _clip(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    kind = ctx.dtype(node.input(0))
    lo = ctx.const(node.input(1)) if node.input(1) else None
    hi = ctx.const(node.input(2)) if node.input(2) else None
    if kind == "real" and lo is not None and float(lo) == 0.0 and hi is not None and float(hi) > 0:
        ctx.emit("nn.relu", [x], {"max": float(hi)})
        return
    if kind == "real" and lo is not None and float(lo) == 0.0 and not node.input(2):
        ctx.emit("nn.relu", [x])
        return
    if kind != "real" and (lo is None or hi is None):  # a missing integer bound is no bound: no constant for it
        if node.input(1):
            x = ctx.emit("math.max", [x, ctx.arg(node.input(1))], outputs=None if not node.input(2) else
                         ctx.fresh("lo"), label=not node.input(2))
        if node.input(2):
            ctx.emit("math.min", [x, ctx.arg(node.input(2))])
        elif not node.input(1):
            ctx.emit("math.iden", [x])
        return
    big = np.array(np.inf, np.float32)
    a = ctx.arg(node.input(1)) if node.input(1) else ctx.literal_arg(-big, "lo")
    b = ctx.arg(node.input(2)) if node.input(2) else ctx.literal_arg(big, "hi")
    if lo is None or hi is None or float(lo) > float(hi):  # ONNX: min > max makes everything max
        ctx.emit("math.min", [ctx.emit("math.max", [x, a], outputs=ctx.fresh("lo"), label=False), b])
        return
    ctx.emit("math.clamp", [x, a, b])
