"""Normalizations. All of NNEF's are compound fragments; those whose SkriptND counterpart is not defined the
same way are imported through their NNEF definition (exact by construction)."""

from __future__ import annotations

from typing import Any

from skriptnd.interop.nnef_import.context import Arg, Context, Operation
from skriptnd.interop.nnef_import.registry import converter, expanded
from skriptnd.interop.nnef_import.writer_exprs import real

expanded("NNEF definition: input - box(input, normalize)", "local_mean_normalization")
expanded("NNEF definition: input / max(sqrt(box(sqr(input), normalize)) + bias, epsilon)",
         "local_variance_normalization")
expanded("NNEF definition: local mean then local variance normalization", "local_contrast_normalization")


def _per_channel(ctx: Context, value: Arg, channels: int) -> bool:
    shape = ctx.shape(value)
    return ctx.is_tensor(value) and len(shape) >= 2 and shape[1] == channels and \
        all(d == 1 for i, d in enumerate(shape) if i != 1)


@converter("batch_normalization", target="nn.batch_norm{epsilon}",
           note="per-channel ([1, C, 1..]) mean, variance, offset, scale (offset 0.0 / scale 1.0 omitted); "
                "other shapes as NNEF's formula offset + scale * (input - mean) / sqrt(variance + epsilon)")
def batch_normalization(ctx: Context, op: Operation) -> None:
    x = op.inputs["input"]
    xs = ctx.shape(x)
    channels = xs[1] if len(xs) >= 2 else 0
    mean, variance, offset, scale = (op.inputs[k] for k in ("mean", "variance", "offset", "scale"))
    epsilon = float(op.attribs["epsilon"])
    plain_offset = not ctx.is_tensor(offset) and float(offset) == 0.0
    plain_scale = not ctx.is_tensor(scale) and float(scale) == 1.0
    if channels and _per_channel(ctx, mean, channels) and _per_channel(ctx, variance, channels) \
            and (plain_offset or _per_channel(ctx, offset, channels)) \
            and (plain_scale or _per_channel(ctx, scale, channels)):
        args = [ctx.arg(x), ctx.squeeze_to(mean, 1, "mean"), ctx.squeeze_to(variance, 1, "variance"),
                None if plain_offset else ctx.squeeze_to(offset, 1, "offset"),
                None if plain_scale else ctx.squeeze_to(scale, 1, "scale")]
        ctx.emit(ctx.output(), "nn.batch_norm", args, {"epsilon": epsilon, "channel_axis": 1})
        return
    _formula(ctx, x, mean, variance, offset, scale, epsilon)


def _formula(ctx: Context, x: Arg, mean: Arg, variance: Arg, offset: Arg, scale: Arg, epsilon: float) -> None:
    """offset + scale * (input - mean) / sqrt(variance + epsilon), NNEF broadcasting made explicit."""
    rank = len(ctx.shape(x))

    def align(value: Arg) -> dict[str, int]:
        return {"rhs_align": 0} if ctx.is_tensor(value) and 0 < ctx.rank(value) < rank else {}

    centered, stabilized, std, normalized, scaled = (ctx.tmp(n) for n in
                                                     ("centered", "stabilized", "std", "normalized", "scaled"))
    ctx.emit(centered, "math.sub", [ctx.arg(x), ctx.arg(mean)], align(mean))
    ctx.emit(stabilized, "math.add", [ctx.arg(variance), real(epsilon)])
    ctx.emit(std, "math.sqrt", [stabilized])
    ctx.emit(normalized, "math.div", [centered, std], align(variance))
    ctx.emit(scaled, "math.mul", [normalized, ctx.arg(scale)], align(scale))
    ctx.emit(ctx.output(), "math.add", [scaled, ctx.arg(offset)], align(offset))


def _lp_norm(ctx: Context, op: Operation) -> None:
    bias, epsilon = float(op.attribs["bias"]), float(op.attribs["epsilon"])
    if bias < 0.0 or epsilon < 0.0:
        raise ctx.problem(f"bias {bias} / epsilon {epsilon}: must be non-negative for nn.l1_norm/nn.l2_norm",
                          "bias" if bias < 0.0 else "epsilon")
    attribs: dict[str, Any] = {"axes": list(op.attribs["axes"])}
    if bias:
        attribs["bias"] = bias
    if epsilon:
        attribs["epsilon"] = epsilon
    target = "nn.l1_norm" if op.name == "l1_normalization" else "nn.l2_norm"
    ctx.emit(ctx.output(), target, [ctx.arg(op.inputs["input"])], attribs)


converter("l1_normalization", target="nn.l1_norm", note="same definition; bias/epsilon 0 omitted")(_lp_norm)
converter("l2_normalization", target="nn.l2_norm", note="same definition; bias/epsilon 0 omitted")(_lp_norm)


@converter("local_response_normalization", target="nn.local_response_norm",
           note="axes = those where size > 1; same centered window and normalization by the full size")
def local_response_normalization(ctx: Context, op: Operation) -> None:
    size = [int(v) for v in op.attribs["size"]]
    axes = [i for i, v in enumerate(size) if v != 1] or [1]
    bias = float(op.attribs["bias"])
    if bias < 0.0:
        raise ctx.problem(f"bias {bias}: must be non-negative for nn.local_response_norm", "bias")
    ctx.emit(ctx.output(), "nn.local_response_norm", [ctx.arg(op.inputs["input"])],
             {"axes": axes, "size": [size[i] for i in axes], "alpha": float(op.attribs["alpha"]),
              "beta": float(op.attribs["beta"]), "bias": bias})
