"""Matrix products: FULLY_CONNECTED -> nn.linear ([out, in] weights, as TFLite's) between the reshapes TFLite
implies (inputs of any rank are read as [-1, in]), BATCH_MATMUL -> linalg.matmul{transA, transB}."""

from __future__ import annotations

import math

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("FULLY_CONNECTED", target="`nn.linear` (with `layout.reshape` to [-1, in] before and to the output's "
           "shape after, where the ranks differ), then the fused activation",
           caveats="weights_format SHUFFLED4x16INT8 is refused")
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
        arg = tmp(ctx, "layout.reshape", [arg], {"shape": [rows, ws[1]]})
    args = [arg, ctx.arg(w), ctx.arg(ctx.input(2))]
    activation = ctx.option(0, 0, "b")
    if list(out) == [rows, ws[0]]:
        ctx.activate("nn.linear", args, activation=activation)
        return
    ctx.activate("layout.reshape", [tmp(ctx, "nn.linear", args)], {"shape": list(out)}, activation=activation)


@converter("BATCH_MATMUL", target="`linalg.matmul{transA, transB}`")
def _batch_matmul(ctx: Context, op: Operator) -> None:
    attribs = {}
    if ctx.flag(0):
        attribs["transA"] = True
    if ctx.flag(1):
        attribs["transB"] = True
    ctx.emit("linalg.matmul", [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))], attribs)
