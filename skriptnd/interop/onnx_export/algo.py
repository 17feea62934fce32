"""Converters for the ``algo`` module: TopK and NonMaxSuppression (ONNX has both)."""

from __future__ import annotations

from skriptnd.compose.ir import Operation
from skriptnd.interop.onnx_export.core import Context, Results, converter, norm_axes, shape


@converter("algo.top_k", onnx="TopK")
def top_k(ctx: Context, op: Operation) -> Results:
    s = shape(op.inputs[0])
    axis = norm_axes(op.attribs.get("axis", 0), len(s))[0]
    k = min(int(op.attribs["k"]), s[axis])
    values, indices = ctx.node("TopK", [ctx.value(op.inputs[0]), ctx.i64([k], "k")], outputs=2, axis=axis,
                               largest=int(bool(op.attribs.get("largest", True))),
                               sorted=int(bool(op.attribs.get("sorted", True))))
    return [values, indices]


@converter("algo.nonmax_suppress", onnx="NonMaxSuppression (center_point_box for CENTER)")
def nonmax_suppress(ctx: Context, op: Operation) -> Results:
    n = shape(op.inputs[0])[1]
    limit = int(op.attribs.get("max_outputs_per_class", n))
    threshold = op.attribs.get("score_threshold")
    ins = [ctx.value(op.inputs[0]), ctx.value(op.inputs[1]), ctx.i64([limit], "max_outputs"),
           ctx.scalar(float(op.attribs.get("iou_threshold", 0.0)))]
    if threshold is not None:
        ins.append(ctx.scalar(float(threshold)))
    center = 1 if op.attribs.get("box_format", "CORNERS") == "CENTER" else 0
    return [ctx.node("NonMaxSuppression", ins, center_point_box=center)]
