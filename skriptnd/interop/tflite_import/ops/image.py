"""Resizing NHWC images: RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR -> image.resize{axes=[1, 2], size, mode,
coordinate_transform, rounding_method, antialias=false} spelling out TFLite's sampling:

- bilinear: align_corners -> ALIGNED, half_pixel_centers -> SYMMETRIC, neither -> ASYMMETRIC;
- nearest: neither -> ASYMMETRIC with FLOOR (floor(out * scale)); half_pixel_centers -> SYMMETRIC with
  ROUND_PREFER_CEIL (floor((out + 0.5) * scale)); align_corners -> ALIGNED with ROUND_PREFER_CEIL
  (TFLite rounds half away from zero).
"""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


def _resize(ctx: Context, op: Operator, mode: str, align: bool, half: bool) -> None:
    x, out = ctx.shape(ctx.input(0)), ctx.shape(op.outputs[0])
    if len(x) != 4:
        raise ImportProblem("E0863", f"{ctx.here}: the input must have rank 4 (NHWC)")
    if align and half:
        raise ImportProblem("E0863", f"{ctx.here}: align_corners together with half_pixel_centers is not supported")
    attribs: dict = {"axes": [1, 2], "size": list(out[1:3]), "mode": mode,
                     "coordinate_transform": "ALIGNED" if align else "SYMMETRIC" if half else "ASYMMETRIC"}
    if mode == "NEAREST":
        attribs["rounding_method"] = "FLOOR" if not (align or half) else "ROUND_PREFER_CEIL"
    else:
        attribs["antialias"] = False
    ctx.emit("image.resize", [ctx.arg(ctx.input(0))], attribs)


@converter("RESIZE_BILINEAR", target="`image.resize{mode='LINEAR', antialias=false}` over axes [1, 2]",
           caveats="align_corners with half_pixel_centers is refused")
def _bilinear(ctx: Context, op: Operator) -> None:
    _resize(ctx, op, "LINEAR", ctx.flag(2), ctx.flag(3))


@converter("RESIZE_NEAREST_NEIGHBOR", target="`image.resize{mode='NEAREST'}` over axes [1, 2]",
           caveats="align_corners with half_pixel_centers is refused")
def _nearest(ctx: Context, op: Operator) -> None:
    _resize(ctx, op, "NEAREST", ctx.flag(0), ctx.flag(1))
