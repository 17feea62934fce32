"""Static int8 / uint8 / int16 TFLite models as SkriptND `@quantize` graphs.

A TFLite tensor of an integer type with scales and zero points holds codes ``q`` of the real value
``(q - zero_point) * scale``. SkriptND writes the real tensor and a `@quantize` entry
``quant.zero_point_linear_quantize{zero_point, scale, bits, signed, channel_axis}`` for it (the
representation `sknd quantize` and the ONNX importer's QDQ graphs use, spec §2.14), so that the graph runs
as an integer TOSA graph (skriptnd.tosa.integer) where it lowers, else with fake quantization:

- activations (computed tensors, graph inputs and outputs): the entry of their TFLite quantization, per
  tensor. The integer graph takes int8 graph inputs as the model's own codes and gives quantized outputs
  dequantized (their codes are ``round(real / scale) + zero_point``, exactly);
- constants (int8 weights per channel along TFLite's ``quantized_dimension``, int32 biases): the real
  values ``(q - zero_point) * scale`` in float32, with their entry, which gives back ``q`` exactly;
- a convolution's or linear layer's result that TFLite clamps by a fused activation, or reshapes, in the
  same operator is quantized as the operator's output (TFLite clamps in the output's integer domain).

A model is taken as static (`@quantize`) when one of its computed tensors is quantized; dynamic-range and
weight-only models (quantized constants, float activations) are not (their constants are folded to float).
"""

from __future__ import annotations

import numpy as np

from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.reader import Model, Subgraph, Tensor
from skriptnd.interop.writer import Call, Quantize

#: How the integer TOSA graph (skriptnd.tosa.integer) runs the operators of a static int8 model, and how that
#: compares with LiteRT's builtin integer kernels (tests/test_tflite_int8.py: one-operator models and models
#: quantized by ai-edge-quantizer, compared code by code); docs/import-tflite.md renders it.
INTEGER_FORMS = {
    "CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED": "int8 x int8 -> int32 CONV2D / DEPTHWISE_CONV2D / MATMUL with the "
    "int32 bias, then RESCALE per output channel to the output's grid; a fused RELU/RELU6 is a CLAMP on the "
    "output's integers, as LiteRT clamps. LiteRT requantizes with a rounded 31-bit high multiply and then a "
    "rounding shift (half up in its optimized kernels, half away from zero in its reference ones); the lowering's "
    "default single rounding differs from that on ties of the second rounding (0.2-0.4 % of the codes one step "
    "off); `lower_quantized(graph, rounding=\"HIGH_MUL_HALF_UP\")` (two RESCALEs) gives LiteRT's codes exactly "
    "(tested on 4096- and 16384-element convolutions), `\"DOUBLE_ROUND\"` its reference kernels'",
    "RESHAPE, TRANSPOSE, PAD, MIRROR_PAD, SLICE, STRIDED_SLICE, CONCATENATION (equal scales, as LiteRT requires), "
    "MAX_POOL_2D, RELU, RELU6, QUANTIZE to the same grid": "on the integers unchanged: exact",
    "QUANTIZE (int8 <-> int8 / uint8 to another scale or zero point)": "an integer RESCALE: exact in the tests",
    "QUANTIZE of a float tensor": "x / scale rounded half away from zero plus the zero point, clamped: exact",
    "DEQUANTIZE": "(q - zero point) * scale in float32 (LiteRT multiplies in double): within one float32 rounding",
    "ADD, SUB, MUL, MEAN, AVERAGE_POOL_2D, SOFTMAX, LOGISTIC, TANH, HARD_SWISH, RESIZE_*, BATCH_MATMUL, others":
    "in float32 on the dequantized inputs, the result quantized to the output's grid (round half away from zero). "
    "LiteRT computes these in fixed point (ADD/SUB with 20-bit left shifts, MUL and MEAN with a multiplier, "
    "HARD_SWISH in 16-bit fixed point, SOFTMAX / LOGISTIC / TANH through lookup tables): the codes are exact or "
    "one step off where its fixed-point rounding differs (measured on 288 random codes: ADD, SUB, AVERAGE_POOL_2D, "
    "SOFTMAX, LOGISTIC, TANH exact; MUL 97 %, HARD_SWISH 98.6 %, MEAN 87.5 % equal, never more than one step)",
}
#: TensorType code -> (bits, signed) of the integer types a quantized tensor may have
CODES = {9: (8, True), 3: (8, False), 7: (16, True), 2: (32, True), 4: (64, True)}  # INT8, UINT8, INT16, INT32, INT64
#: the widest codes a @quantize entry holds: int64 biases (of int16 x int8 models) are written as their real values
#: without an entry (the integer lowering rounds a bias to its accumulator's scale)
ENTRY_BITS = 32
#: SkriptND operations whose integer lowering needs a quantized output (an int32 accumulator rescaled to it)
ACCUMULATING = {"nn.conv", "nn.linear", "nn.deconv"}


def is_quantized(t: Tensor) -> bool:
    """A tensor holding codes of a real value: an integer type of `CODES` with at least one scale."""
    return t.quantization is not None and t.type in CODES and len(t.quantization.scale) > 0


def is_static(model: Model, subgraph: Subgraph) -> bool:
    """Whether a computed tensor (not a constant) of `subgraph` is quantized: a static int8/int16 model, whose
    activations run quantized, as opposed to weight-only or dynamic-range ones."""
    def constant(t: Tensor) -> bool:  # without reading the data: a non-empty buffer
        return 0 < t.buffer < len(model.buffers) and model.buffers[t.buffer][1] > 0

    return any(is_quantized(t) and not constant(t) for t in subgraph.tensors if t.type not in (2, 4))


def real_value(t: Tensor, value: np.ndarray) -> np.ndarray:
    """The real values ``(q - zero_point) * scale`` (in double, then float32) of a quantized constant."""
    q = t.quantization
    assert q is not None
    scale, zero = q.scale.astype(np.float64), q.zero_point
    if len(scale) > 1 or q.axis:
        if not 0 <= q.axis < value.ndim or value.shape[q.axis] != len(scale):
            raise ImportProblem("E0861", f"corrupt TFLite file: {len(scale)} scales along axis {q.axis} of tensor "
                                f"'{t.name}' of shape {list(value.shape)}")
        shape = [1] * value.ndim
        shape[q.axis] = len(scale)
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    else:  # per tensor: scalars, so that a scalar keeps its rank (PADV2's pad value)
        scale, zero = scale[0], zero[0]
    return ((value.astype(np.int64) - zero) * scale).astype(np.float32)


def entry(name: str, t: Tensor, axis: int | None = None) -> Quantize:
    """The `@quantize` entry of quantized tensor `t`, written as the SkriptND tensor `name` (per channel along
    `axis` instead of the file's `quantized_dimension` where the converter moved that axis)."""
    q = t.quantization
    assert q is not None
    bits, signed = CODES[t.type]
    per_channel = len(q.scale) > 1
    if per_channel and not 0 <= q.axis < len(t.shape):
        raise ImportProblem("E0861", f"corrupt TFLite file: tensor '{t.name}' is quantized along axis {q.axis}, "
                            f"outside its rank {len(t.shape)}")
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if min(q.zero_point) < low or max(q.zero_point) > high or not np.all(np.isfinite(q.scale)) or \
            not np.all(q.scale > 0):
        raise ImportProblem("E0864", f"tensor '{t.name}' has scales {q.scale[:4].tolist()} / zero points "
                            f"{q.zero_point[:4].tolist()} outside its type {t.type_name}: not supported")
    attribs: dict = {
        "zero_point": q.zero_point.tolist() if per_channel else int(q.zero_point[0]),
        "scale": [float(s) for s in q.scale] if per_channel else float(q.scale[0]),
        "bits": bits}
    if not signed:
        attribs["signed"] = False
    if per_channel:
        attribs["channel_axis"] = int(q.axis if axis is None else axis)
    return Quantize(name, "quant.zero_point_linear_quantize", attribs)


def entries(subgraph: Subgraph, bound: dict[int, str], body: list[Call | str], origin: dict[str, int],
            outputs: dict[int, str], extra: dict[str, Quantize]) -> list[Quantize]:
    """The `@quantize` block: an entry for every quantized TFLite tensor written (`bound`: tensor index ->
    SkriptND name; `outputs`: graph outputs copied under another name), and for each accumulating statement
    (`ACCUMULATING`) whose result an operator finishes in the same statement chain (its `origin`: the
    TFLite output it was written for). Two TFLite tensors written as one SkriptND tensor with different
    quantizations are refused (E0864, naming both). `extra`: entries converters wrote themselves."""
    found: dict[str, tuple[Quantize, str]] = {name: (e, name) for name, e in extra.items()}

    def add(name: str, index: int) -> None:
        t = subgraph.tensors[index]
        e = entry(name, t)
        if name in found and found[name][0] != e:
            raise ImportProblem("E0864", f"tensors '{found[name][1]}' and '{t.name}' are one SkriptND tensor "
                                f"('{name}') with different quantizations; not supported")
        found.setdefault(name, (e, t.name))

    for index, name in [*bound.items(), *outputs.items()]:
        if is_quantized(subgraph.tensors[index]) and CODES[subgraph.tensors[index].type][0] <= ENTRY_BITS:
            add(name, index)
    for call in body:
        if isinstance(call, Call) and call.op in ACCUMULATING and len(call.outputs) == 1 and \
                isinstance(call.outputs[0], str) and call.outputs[0] not in found:
            index = origin.get(call.outputs[0], -1)
            if index >= 0 and is_quantized(subgraph.tensors[index]):
                add(call.outputs[0], index)
    return [e for e, _ in found.values()]
