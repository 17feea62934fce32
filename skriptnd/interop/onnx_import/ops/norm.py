"""Normalizations and softmax."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _k(ctx: Context, value: float) -> str:
    return ctx.literal_arg(np.array(value, np.float32), "k")


def _only_first_output(node: Node, what: str) -> None:
    if any(node.outputs[1:]):
        raise ImportProblem("E0807", f"{node.where}: the {what} outputs are not supported (inference only)")


@converter("BatchNormalization", target="`nn.batch_norm{epsilon}`(x, mean, var, bias, scale)",
           caveats="training_mode=1: batch statistics, running mean/variance updated with momentum")
def _batch_norm(ctx: Context, node: Node) -> None:
    x, scale, bias, mean, var = (ctx.arg(node.input(i)) for i in range(5))
    epsilon = float(node.attr("epsilon", 1e-5))
    if not node.attr("training_mode", 0):
        _only_first_output(node, "running mean/variance")
        ctx.emit("nn.batch_norm", [x, mean, var, bias, scale], {"epsilon": epsilon})
        return
    # training mode: normalize with the batch's statistics, and update the running ones
    rank = ctx.rank(node.input(0))
    batch_mean, batch_var = ctx.fresh("mean"), ctx.fresh("var")
    ctx.emit("math.moments", [x], {"axes": [0, *range(2, rank)], "squeeze": True}, outputs=[batch_mean, batch_var],
             label=False)
    ctx.emit("nn.batch_norm", [x, batch_mean, batch_var, bias, scale], {"epsilon": epsilon})
    momentum = float(node.attr("momentum", 0.9))
    for k, (old, new) in enumerate(((mean, batch_mean), (var, batch_var)), start=1):
        if len(node.outputs) > k and node.outputs[k]:
            kept = _tmp(ctx, "math.mul", [old, _k(ctx, momentum)])
            ctx.emit("math.add", [kept, _tmp(ctx, "math.mul", [new, _k(ctx, 1.0 - momentum)])], outputs=ctx.out(k),
                     label=False)


@converter("InstanceNormalization", target="`nn.mean_variance_norm{epsilon}`(x, bias, scale)")
def _instance_norm(ctx: Context, node: Node) -> None:
    x, scale, bias = (ctx.arg(node.input(i)) for i in range(3))
    ctx.emit("nn.mean_variance_norm", [x, bias, scale], {"epsilon": float(node.attr("epsilon", 1e-5))})


@converter("LRN", target="`nn.local_response_norm{size, alpha, beta, bias}` over the channel axis")
def _lrn(ctx: Context, node: Node) -> None:
    ctx.emit("nn.local_response_norm", [ctx.arg(node.input(0))],
             {"axes": [1], "size": [int(node.attr("size"))], "alpha": float(node.attr("alpha", 1e-4)),
              "beta": float(node.attr("beta", 0.75)), "bias": float(node.attr("bias", 1.0))})


@converter("LayerNormalization", target="`math.moments` then (x - mean) / sqrt(var + epsilon) * scale + bias",
           caveats="the Mean / InvStdDev outputs are not supported")
def _layer_norm(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    first = norm_axis(int(node.attr("axis", -1)), rank)
    x = ctx.arg(node.input(0))
    mean, var = ctx.fresh("mean"), ctx.fresh("var")
    ctx.emit("math.moments", [x], {"axes": list(range(first, rank))}, outputs=[mean, var], label=False)
    centered = _tmp(ctx, "math.sub", [x, mean])
    dev = _tmp(ctx, "math.sqrt", [_tmp(ctx, "math.add", [var, _k(ctx, float(node.attr("epsilon", 1e-5)))])])
    normalized = _tmp(ctx, "math.div", [centered, dev])
    if node.input(2):
        ctx.emit("math.add", [_tmp(ctx, "math.mul", [normalized, ctx.arg(node.input(1))]), ctx.arg(node.input(2))])
    else:
        ctx.emit("math.mul", [normalized, ctx.arg(node.input(1))])
    if len(node.outputs) > 1 and node.outputs[1]:  # Mean, kept dims as ONNX
        ctx.emit("math.iden", [mean], outputs=ctx.out(1), label=False)
    if len(node.outputs) > 2 and node.outputs[2]:  # InvStdDev
        ctx.emit("math.rcp", [dev], outputs=ctx.out(2), label=False)


@converter("MeanVarianceNormalization", target="`math.moments` then (x - mean) / sqrt(var)")
def _mvn(ctx: Context, node: Node) -> None:
    x = ctx.arg(node.input(0))
    rank = ctx.rank(node.input(0))
    axes = sorted(norm_axis(a, rank) for a in node.attr("axes", [0, 2, 3]))
    mean, var = ctx.fresh("mean"), ctx.fresh("var")
    ctx.emit("math.moments", [x], {"axes": axes}, outputs=[mean, var], label=False)
    dev = _tmp(ctx, "math.add", [_tmp(ctx, "math.sqrt", [var]), _k(ctx, 1e-9)])
    ctx.emit("math.div", [_tmp(ctx, "math.sub", [x, mean]), dev])


@converter("LpNormalization", target="x / (sum |x| or sqrt(sum x²)) over the axis, 0 where the norm is 0")
def _lp_norm(ctx: Context, node: Node) -> None:
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise ImportProblem("E0807", f"{node.where}: p={p} (only 1 and 2 exist in ONNX)")
    rank = ctx.rank(node.input(0))
    x = ctx.arg(node.input(0))
    axes = [norm_axis(int(node.attr("axis", -1)), rank)]
    # spelled out: ONNX gives 0 where the norm is 0 (nn.l2_norm would divide by it)
    norm = _tmp(ctx, "math.sum_reduce", [_tmp(ctx, "math.abs" if p == 1 else "math.sqr", [x])], axes=axes)
    if p == 2:
        norm = _tmp(ctx, "math.sqrt", [norm])
    zero = _k(ctx, 0.0)
    ctx.emit("math.select", [_tmp(ctx, "math.eq", [norm, zero]), zero, _tmp(ctx, "math.div", [x, norm])])


@converter("Softmax", target="`nn.softmax{axes=[axis]}`")
def _softmax(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    ctx.emit("nn.softmax", [ctx.arg(node.input(0))], {"axes": [norm_axis(int(node.attr("axis", -1)), rank)]})


@converter("LogSoftmax", target="x - max - log(sum(exp(x - max))) (`math.*_reduce`)")
def _log_softmax(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    axes = [norm_axis(int(node.attr("axis", -1)), rank)]
    x = ctx.arg(node.input(0))
    shifted = _tmp(ctx, "math.sub", [x, _tmp(ctx, "math.max_reduce", [x], axes=axes)])
    total = _tmp(ctx, "math.sum_reduce", [_tmp(ctx, "math.exp", [shifted])], axes=axes)
    ctx.emit("math.sub", [shifted, _tmp(ctx, "math.log", [total])])
