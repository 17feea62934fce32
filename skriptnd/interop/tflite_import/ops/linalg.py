"""Matrix products: FULLY_CONNECTED -> nn.linear ([out, in] weights, as TFLite's) between the reshapes TFLite
implies (inputs of any rank are read as [-1, in]), BATCH_MATMUL -> linalg.matmul{transA, transB}."""

from __future__ import annotations

import math

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._hybrid import (
    HybridWeights,
    asymmetric,
    finish,
    hybrid_weights,
    quantize_input,
    rescale,
)
from skriptnd.interop.tflite_import.ops._util import tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("FULLY_CONNECTED", target="`nn.linear` (with `layout.reshape` to [-1, in] before and to the output's "
           "shape after, where the ranks differ), then the fused activation",
           caveats="weights_format SHUFFLED4x16INT8 is refused; int8 weight codes with a float input: "
           "LiteRT's hybrid kernel (dynamic-range)")
def _fully_connected(ctx: Context, op: Operator) -> None:
    if ctx.option(1, 0, "b") != 0:
        raise ImportProblem("E0863", f"{ctx.here}: the shuffled weights format is not supported")
    x, w = ctx.input(0), ctx.input(1)
    xs, ws, out = ctx.shape(x), ctx.shape(w), ctx.shape(op.outputs[0])
    if len(ws) != 2 or ws[1] == 0 or math.prod(xs) % ws[1]:
        raise ImportProblem("E0863", f"{ctx.here}: weights of shape {list(ws)} for an input of shape {list(xs)}")
    arg = ctx.arg(x)
    rows = math.prod(xs) // ws[1]
    if list(xs) != [rows, ws[1]]:
        arg = tmp(ctx, "layout.reshape", [arg], {"shape": [-1 if ctx.dynamic else rows, ws[1]]})
    if ctx.dynamic and len(out) > 2:  # keep_num_dims: the leading axes back, the batch first (dynamic.py)
        out = (-1, *out[1:])
    activation = ctx.option(0, 0, "b")
    hybrid = hybrid_weights(ctx, x, w)
    if hybrid is not None:  # dynamic-range: LiteRT's hybrid kernel, the input quantized per row
        codes, scale = quantize_input(ctx, arg, [1], asymmetric(ctx, ctx.flag(3)))
        acc = tmp(ctx, "nn.linear", [codes, ctx.literal_arg(hybrid.codes, "wcodes")])
        if list(out) != [rows, ws[0]]:
            acc = tmp(ctx, "layout.reshape", [acc], {"shape": list(out)})
            scale = tmp(ctx, "layout.reshape", [scale], {"shape": [*out[:-1], 1]})
        finish(ctx, rescale(ctx, acc, scale, hybrid, [1] * (len(out) - 1) + [-1]), ctx.input(2), activation)
        return
    args = [arg, ctx.arg(w), ctx.arg(ctx.input(2))]
    if list(out) == [rows, ws[0]]:
        ctx.activate("nn.linear", args, activation=activation)
        return
    ctx.activate("layout.reshape", [tmp(ctx, "nn.linear", args)], {"shape": list(out)}, activation=activation)


@converter("BATCH_MATMUL", target="`linalg.matmul{transA, transB}`", caveats="a constant int8 right side "
           "with one scale and a float left side without adj_x: LiteRT's hybrid kernel (dynamic-range)")
def _batch_matmul(ctx: Context, op: Operator) -> None:
    hybrid = hybrid_weights(ctx, ctx.input(0), ctx.input(1))
    if hybrid is not None:
        _hybrid_batch_matmul(ctx, hybrid)
        return
    attribs = {}
    if ctx.flag(0):
        attribs["transA"] = True
    if ctx.flag(1):
        attribs["transB"] = True
    ctx.emit("linalg.matmul", [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))], attribs)


def _hybrid_batch_matmul(ctx: Context, hybrid: HybridWeights) -> None:
    """BATCH_MATMUL of a float left side by int8 codes (dynamic-range): LiteRT's hybrid kernel quantizes each row
    of the left side (its last axis) and scales the integer product by the row's scale times the right side's
    one scale."""
    x = ctx.input(0)
    if ctx.flag(0) or hybrid.axis >= 0:
        raise ImportProblem("E0863", f"{ctx.here}: a hybrid BATCH_MATMUL with adj_x or per-channel scales is not "
                            "supported")
    rank = ctx.rank(x)
    codes, scale = quantize_input(ctx, ctx.arg(x), [rank - 1], asymmetric(ctx, ctx.flag(2)))
    attribs = {"transB": True} if ctx.flag(1) else {}
    acc = tmp(ctx, "linalg.matmul", [codes, ctx.literal_arg(hybrid.codes, "wcodes")], attribs)
    finish(ctx, rescale(ctx, acc, scale, hybrid, []), -1, 0)
