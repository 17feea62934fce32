"""Pooling over the spatial axes of NHWC tensors: MAX_POOL_2D / AVERAGE_POOL_2D -> nn.max_pool / nn.avg_pool
{axes=[1, 2]} with explicit paddings; SAME average pools count only the window's part inside the input, as
TFLite's kernel (`ignore_border`)."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import paddings
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


def _attribs(ctx: Context) -> dict:
    x = ctx.shape(ctx.input(0))
    if len(x) != 4:
        raise ImportProblem("E0863", f"{ctx.here}: the input must have rank 4 (NHWC)")
    size = [ctx.option(4, 1), ctx.option(3, 1)]
    stride = [ctx.option(2, 1), ctx.option(1, 1)]
    if min(size + stride) < 1:
        raise ImportProblem("E0863", f"{ctx.here}: filter size {size} / stride {stride} must be positive")
    attribs: dict = {"axes": [1, 2], "size": size}
    if stride != [1, 1]:
        attribs["stride"] = stride
    attribs["padding"] = paddings(ctx, ctx.option(0, 0, "b"), x[1:3], size, stride, [1, 1])
    return attribs


@converter("MAX_POOL_2D", target="`nn.max_pool{axes=[1, 2], size, stride, padding}`")
def _max_pool(ctx: Context, op: Operator) -> None:
    ctx.activate("nn.max_pool", [ctx.arg(ctx.input(0))], _attribs(ctx), activation=ctx.option(5, 0, "b"))


@converter("AVERAGE_POOL_2D", target="`nn.avg_pool{axes=[1, 2], size, stride, padding, ignore_border=true}`")
def _avg_pool(ctx: Context, op: Operator) -> None:
    attribs = _attribs(ctx)
    attribs["ignore_border"] = True
    ctx.activate("nn.avg_pool", [ctx.arg(ctx.input(0))], attribs, activation=ctx.option(5, 0, "b"))
