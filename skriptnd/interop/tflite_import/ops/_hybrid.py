"""Dynamic-range (hybrid) kernels: int8 constant weights with scales read by an operator whose input and output
are float (ai-edge-quantizer's dynamic-range recipe, TFLite's post-training dynamic-range quantization).

LiteRT does not dequantize such weights: its hybrid kernels quantize the float input on the fly, per batch item
(convolutions) or per row (FULLY_CONNECTED, BATCH_MATMUL), multiply integers, and scale the int32 sums back to
float. The importer writes the same computation in real arithmetic, so that the imported model gives LiteRT's
results (measured: one operator within float rounding of LiteRT, the test transformer layer 2.4e-7, where
dequantizing the weights instead differs by the input's quantization error, 5e-3 there; deep networks amplify a
code rounded the other way, for LiteRT too: docs/import-tflite.md). LiteRT's default kernels always quantize
asymmetrically, its reference kernels (`Context.reference_kernels`) as follows:

- symmetric (`SymmetricQuantizeFloats`: per-tensor convolution weights; FULLY_CONNECTED and BATCH_MATMUL
  unless `asymmetric_quantize_inputs`): range = max |x|, q = clamp(round(x * (127 / range)), -127, 127),
  scale = range / 127 (q = 0 where the range is 0);
- asymmetric (`AsymmetricQuantizeFloats`: per-channel CONV_2D / DEPTHWISE_CONV_2D weights, and the others with
  `asymmetric_quantize_inputs`): [min(x, 0), max(x, 0)] over 256 codes, zero point
  zp = clamp(round(-128 - min / scale), -128, 127), q = clamp(round(zp + x / scale), -128, 127);

`round` is half away from zero as TfLiteRound. The operator then runs on the integer-valued reals q - zp and
the integer weight codes (products and sums exact in float32 while a sum stays under 2^24, as the int32 sums
are), and its result is `sum * (input scale * weight scale) + bias`. LiteRT computes the asymmetric scale in
double precision and SkriptND in float32: the two may pick a different code for an input exactly between two,
one step of one input's code at most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import real, tmp

#: TensorType codes of the weight codes the hybrid kernels read
INT8 = 9


@dataclass
class HybridWeights:
    codes: np.ndarray  # the int8 codes (zero point 0), as float32 (integer-valued)
    scale: np.ndarray  # float32: one value (per tensor) or one per channel along `axis`
    axis: int


def hybrid_weights(ctx: Context, x: int, w: int) -> HybridWeights | None:
    """The weights of a hybrid kernel (constant int8 codes with scales, a float input), None when the operator is
    not one (float weights, or an int8 input: the quantized import's)."""
    t = ctx.tensor(w)
    if t.type != INT8 or t.quantization is None or ctx.tensor(x).type not in (0, 1, 10):
        return None
    value = ctx.const(w)
    if value is None:
        raise ImportProblem("E0864", f"{ctx.here}: int8 weights computed at run time with a float input")
    q = t.quantization
    if len(q.scale) != len(q.zero_point) or (len(q.scale) != 1 and not (
            0 <= q.axis < value.ndim and value.shape[q.axis] == len(q.scale))):
        raise ImportProblem("E0861", f"corrupt TFLite file: {len(q.scale)} scales along axis {q.axis} of tensor "
                            f"'{t.name}' of shape {list(value.shape)}")
    if q.zero_point.any():  # LiteRT's hybrid kernels take the codes as symmetric: a zero point is not theirs
        raise ImportProblem("E0864", f"{ctx.here}: int8 weights '{t.name}' with a non-zero zero point read by a "
                            "float operator (LiteRT's hybrid kernels assume zero)")
    return HybridWeights(value.astype(np.float32), q.scale.astype(np.float32), q.axis if len(q.scale) > 1 else -1)


def asymmetric(ctx: Context, reference: bool) -> bool:
    """Whether the input is quantized asymmetrically: LiteRT's default (optimized) kernels always do, measured on
    every hybrid operator; its reference kernels (`BUILTIN_REF`) as the operator says (`reference`)."""
    return reference or not ctx.reference_kernels


def quantize_input(ctx: Context, x: str, axes: list[int], asymmetric: bool) -> tuple[str, str]:
    """The float tensor `x` quantized per slice over `axes` (LiteRT's batch item or row) as its hybrid kernels
    do: (the integer-valued reals q - zero point, the scales, 1 along `axes`)."""
    if not asymmetric:
        top = tmp(ctx, "math.max_reduce", [tmp(ctx, "math.abs", [x])], {"axes": axes, "squeeze": False})
        zero = tmp(ctx, "math.eq", [top, real(ctx, 0.0)])
        top = tmp(ctx, "math.select", [zero, real(ctx, 1.0), top])  # an all-zero row: codes 0
        q = tmp(ctx, "math.round", [tmp(ctx, "math.mul", [x, tmp(ctx, "math.div", [real(ctx, 127.0), top])])])
        q = tmp(ctx, "math.clamp", [q, real(ctx, -127.0), real(ctx, 127.0)])
        return q, tmp(ctx, "math.div", [top, real(ctx, 127.0)])
    lo = tmp(ctx, "math.min", [tmp(ctx, "math.min_reduce", [x], {"axes": axes, "squeeze": False}), real(ctx, 0.0)])
    hi = tmp(ctx, "math.max", [tmp(ctx, "math.max_reduce", [x], {"axes": axes, "squeeze": False}), real(ctx, 0.0)])
    flat = tmp(ctx, "math.eq", [lo, hi])  # all zeros: LiteRT's scale 1, zero point 0
    scale = tmp(ctx, "math.select", [flat, real(ctx, 1.0), tmp(ctx, "math.div", [tmp(ctx, "math.sub", [hi, lo]),
                                                                                  real(ctx, 255.0)])])
    zp = tmp(ctx, "math.round", [tmp(ctx, "math.sub", [real(ctx, -128.0), tmp(ctx, "math.div", [lo, scale])])])
    zp = tmp(ctx, "math.clamp", [zp, real(ctx, -128.0), real(ctx, 127.0)])
    inv = tmp(ctx, "math.div", [real(ctx, 1.0), scale])
    q = tmp(ctx, "math.round", [tmp(ctx, "math.add", [zp, tmp(ctx, "math.mul", [x, inv])])])
    q = tmp(ctx, "math.clamp", [q, real(ctx, -128.0), real(ctx, 127.0)])
    return tmp(ctx, "math.sub", [q, zp]), scale


def rescale(ctx: Context, acc: str, input_scale: str, weights: HybridWeights, channel_shape: list[int]) -> str:
    """`acc * (input scale * weight scale)`: the weight scale reshaped to `channel_shape` (-1 at the channel axis
    of the operator's output) when per channel."""
    ws = weights.scale.reshape(channel_shape) if weights.axis >= 0 else weights.scale.reshape(())
    return tmp(ctx, "math.mul", [acc, tmp(ctx, "math.mul", [input_scale, ctx.literal_arg(ws, "wscale")])])


def finish(ctx: Context, scaled: str, bias: int, activation: int) -> None:
    """The operator's output: `scaled + bias` (where it has one), through its fused activation."""
    b = ctx.arg(bias)
    if b is None:
        ctx.activate("math.iden", [scaled], activation=activation)
    else:
        ctx.activate("math.add", [scaled, b], activation=activation)
