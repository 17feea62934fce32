"""Operators that are identities at inference (Dropout), top-k, cumulative sums, non-max suppression."""

from __future__ import annotations

import numpy as np

from ..context import Context, Node
from ..errors import ImportProblem
from ..registry import converter
from ._util import axis as norm_axis


@converter("Dropout", target="`math.iden` (inference)", caveats="training_mode=1 only with ratio 0; the mask is all true")
def _dropout(ctx: Context, node: Node) -> None:
    training = node.input(2) and (ctx.const(node.input(2)) is None or bool(ctx.const(node.input(2))))
    ratio = ctx.const(node.input(1)) if node.input(1) else np.array(0.5)
    if training and ratio is None:
        ctx.need_const(node.input(1), "ratio (in training mode)")
    if training and float(ratio) != 0.0:
        raise ImportProblem("E0807", f"{node.where}: training_mode Dropout (random) is not supported")
    x = ctx.arg(node.input(0))
    ctx.emit("math.iden", [x])
    if len(node.outputs) > 1 and node.outputs[1]:  # inference: the mask keeps everything
        ctx.emit("layout.uniform", [ctx.literal_arg(np.array(True), "keep")], {"shape": list(ctx.static_shape(
            node.input(0)))}, outputs=ctx.out(1), types=["bool"], label=False)


@converter("TopK", target="`algo.top_k{k, axis, largest, sorted}`", caveats="K must be constant")
def _top_k(ctx: Context, node: Node) -> None:
    k = int(ctx.need_const(node.input(1), "K").reshape(-1)[0])
    rank = ctx.rank(node.input(0))
    attribs = {"k": k, "axis": norm_axis(int(node.attr("axis", -1)), rank)}
    if not node.attr("largest", 1):
        attribs["largest"] = False
    if not node.attr("sorted", 1):
        attribs["sorted"] = False
    ctx.emit("algo.top_k", [ctx.arg(node.input(0))], attribs, outputs=[ctx.out(0), ctx.out(1)])


@converter("CumSum", target="`math.cumsum{axis, exclusive, reverse}`", caveats="axis must be constant")
def _cumsum(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    attribs: dict = {"axis": norm_axis(int(ctx.need_const(node.input(1), "axis").reshape(-1)[0]), rank)}
    if node.attr("exclusive", 0):
        attribs["exclusive"] = True
    if node.attr("reverse", 0):
        attribs["reverse"] = True
    ctx.emit("math.cumsum", [ctx.arg(node.input(0))], attribs)


@converter("NonMaxSuppression", target="`algo.nonmax_suppress{box_format, max_outputs_per_class, "
           "iou_threshold, score_threshold}`", caveats="the limits and thresholds must be constant")
def _nms(ctx: Context, node: Node) -> None:
    attribs: dict = {}
    if node.attr("center_point_box", 0):
        attribs["box_format"] = "CENTER"
    if node.input(2):
        attribs["max_outputs_per_class"] = int(ctx.need_const(node.input(2), "max_output_boxes_per_class")
                                               .reshape(-1)[0])
    else:
        attribs["max_outputs_per_class"] = 0
    if node.input(3):
        attribs["iou_threshold"] = float(ctx.need_const(node.input(3), "iou_threshold").reshape(-1)[0])
    if node.input(4):
        attribs["score_threshold"] = float(ctx.need_const(node.input(4), "score_threshold").reshape(-1)[0])
    ctx.emit("algo.nonmax_suppress", [ctx.arg(node.input(0)), ctx.arg(node.input(1))], attribs)
