"""Resize -> image.resize{size} (sizes given) or image.rescale{factor} (scales given), every ONNX mode
spelled out (SkriptND's defaults differ: antialias is on by default there, off in ONNX)."""

from __future__ import annotations

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter

_MODES = {"nearest": "NEAREST", "linear": "LINEAR", "cubic": "CUBIC"}
_TRANSFORMS = {"half_pixel": "SYMMETRIC", "asymmetric": "ASYMMETRIC", "align_corners": "ALIGNED",
               "pytorch_half_pixel": "SYMMETRIC"}
_ROUNDING = {"round_prefer_floor": "ROUND_PREFER_FLOOR", "round_prefer_ceil": "ROUND_PREFER_CEIL",
             "floor": "FLOOR", "ceil": "CEIL"}


@converter("Resize", target="`image.resize{axes, size, mode, coordinate_transform, rounding_method, antialias, "
           "cubic_coeff_a}` (from sizes, or from scales that give whole extents)",
           caveats="coordinate modes half_pixel, asymmetric, align_corners, pytorch_half_pixel (output sizes > 1); "
           "tf_crop_and_resize, half_pixel_symmetric, exclude_outside=1, antialias=1, keep_aspect_ratio_policy with "
           "a fractional scale, "
           "scales giving fractional extents and nearest half_pixel upsampling by a non-integer ratio are refused")
def _resize(ctx: Context, node: Node) -> None:
    shape, out = ctx.dims(node.input(0)), ctx.dims(node.outputs[0])  # a symbolic batch is left as it is
    rank = len(shape)
    mode = node.attr("mode", "nearest")
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS:
        raise ImportProblem("E0807", f"{node.where}: coordinate_transformation_mode '{transform}' is not supported")
    if node.attr("exclude_outside", 0):
        raise ImportProblem("E0807", f"{node.where}: exclude_outside=1 is not supported")
    axes = [norm_axis(a, rank) for a in node.attr("axes", list(range(rank)))]
    changed = [a for a in axes if out[a] != shape[a]]
    ctx.static_shape(node.input(0), axes=changed)  # the resized extents must be numbers
    ctx.static_shape(node.outputs[0], axes=changed)
    if transform == "pytorch_half_pixel" and any(out[a] == 1 for a in changed):
        raise ImportProblem("E0807", f"{node.where}: pytorch_half_pixel with an output extent of 1 is not supported")
    attribs: dict = {"axes": changed, "mode": _MODES[mode], "coordinate_transform": _TRANSFORMS[transform]}
    if mode == "nearest":
        attribs["rounding_method"] = _ROUNDING[node.attr("nearest_mode", "round_prefer_floor")]
    else:
        attribs["antialias"] = bool(node.attr("antialias", 0))
    if mode == "cubic":
        attribs["cubic_coeff_a"] = float(node.attr("cubic_coeff_a", -0.75))
    if node.attr("antialias", 0) and mode != "nearest":
        raise ImportProblem("E0807", f"{node.where}: antialias=1 is not supported (SkriptND's antialiasing "
                            "filter differs from ONNX's)")
    if mode == "nearest" and transform in ("half_pixel", "pytorch_half_pixel") and \
            any(out[a] > shape[a] and out[a] % shape[a] for a in changed):
        raise ImportProblem("E0807", f"{node.where}: nearest upsampling by a non-integer ratio with "
                            f"coordinate_transformation_mode '{transform}' is not supported")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch" and node.input(3):
        # ONNX samples at one scale for all axes: the same as the extents' ratio only when it is exact
        sizes = ctx.need_const(node.input(3), "sizes").reshape(-1).tolist()
        ctx.static_shape(node.input(0), axes=axes)  # the scale is the ratio over every listed axis
        ratios = [sizes[k] / shape[a] for k, a in enumerate(axes)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        if any(abs(scale * shape[a] - out[a]) > 1e-6 for a in changed):
            raise ImportProblem("E0807", f"{node.where}: keep_aspect_ratio_policy '{policy}' with a scale that does "
                                "not give whole output extents is not supported")
    x = ctx.arg(node.input(0))
    if not changed:
        ctx.emit("math.iden", [x])
        return
    scales = ctx.need_const(node.input(2), "scales input") if node.input(2) and not node.input(3) else None
    if scales is not None and scales.size:
        factor = [float(f) for f in scales.reshape(-1)]
        by_axis = dict(zip(axes, factor, strict=False)) if len(factor) == len(axes) else dict(enumerate(factor))
        factors = [by_axis[a] for a in changed]
        if all(abs(f * shape[a] - out[a]) < 1e-5 * out[a] for f, a in zip(factors, changed, strict=True)):
            attribs = {"axes": changed, "size": [out[a] for a in changed], **{k: v for k, v in attribs.items()
                                                                           if k != "axes"}}
            ctx.emit("image.resize", [x], attribs)
            return
        raise ImportProblem("E0807", f"{node.where}: scales {factors} do not give whole output extents "
                            f"(ONNX then samples at the scale, not at the extents' ratio); give sizes instead")
    ctx.emit("image.resize", [x], {"axes": changed, "size": [out[a] for a in changed],
                                   **{k: v for k, v in attribs.items() if k != "axes"}})
