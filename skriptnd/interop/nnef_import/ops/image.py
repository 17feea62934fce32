"""Up/down-sampling over the spatial axes, and the ROI operations (not imported)."""

from __future__ import annotations

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.registry import converter, unsupported

unsupported("ROI pooling/resampling: the NNEF box convention is not verified against image.*_roi_pool",
            "avg_roi_pool", "max_roi_pool", "roi_resample", "avg_roi_align", "max_roi_align")

TARGETS = {"nearest_downsample": "image.nearest_downsample", "nearest_upsample": "image.nearest_upsample",
           "area_downsample": "image.area_downsample"}


def _sample(ctx: Context, op: Operation) -> None:
    factor = [int(f) for f in op.attribs["factor"]]
    ctx.emit(ctx.output(), TARGETS[op.name], [ctx.arg(op.inputs["input"])],
             {"axes": list(range(2, 2 + len(factor))), "factor": factor})


for _name, _target in TARGETS.items():
    converter(_name, target=_target, note="axes = the spatial axes")(_sample)


@converter("multilinear_upsample", target="image.linear_upsample",
           note="method symmetric/asymmetric, border replicate/constant; method 'aligned' is refused")
def multilinear_upsample(ctx: Context, op: Operation) -> None:
    method, border = op.attribs["method"], op.attribs["border"]
    if method not in ("symmetric", "asymmetric"):
        raise ctx.problem(f"method '{method}' is not supported (symmetric, asymmetric are)", "method")
    if border not in ("replicate", "constant"):
        raise ctx.problem(f"border '{border}' is not supported (replicate, constant are)", "border")
    factor = [int(f) for f in op.attribs["factor"]]
    ctx.emit(ctx.output(), "image.linear_upsample", [ctx.arg(op.inputs["input"])],
             {"axes": list(range(2, 2 + len(factor))), "factor": factor, "symmetric": method == "symmetric",
              "replicate_border": border == "replicate"})
