"""Synopsys embARC MLI 2.0 as a target: its kernel table and the mapping of standard operations onto it.

MLI kernels are fixed point: ``fx8``/``fx16`` (value = code · 2^-frac_bits: a power-of-two scale and zero
point 0), ``sa8``/``sa32`` (asymmetric, per tensor or per axis). There is no batch dimension: feature maps
are HWC, convolution weights HWCN (``filter_format='XCN'``), depthwise HW1N, fully-connected weights NM
(in, out). Configuration structures carry paddings ``padding_{top,bottom,left,right}``, strides
``stride_{height,width}``, dilations, and a fused ReLU (``MLI_RELU_NONE|GEN|1|6``).

Arithmetic (the MLI documentation, "Arithmetic Details"): MAC kernels accumulate exactly (bias shifted to
the accumulator's fraction), then shift to the output's fraction, rounding UP (half toward +inf, the
default DSP mode) or CONVERGENT (half to even), and saturate once. A power-of-two shift with round half
up is TOSA RESCALE ``single_round`` with multiplier ``2^30`` and shift ``30 + k``: exact. CONVERGENT has no
TOSA rounding mode (see docs/spec-errata.md). sa8 kernels requantize with MLI's own 16-bit
multiplier + shift and rounding; TOSA's RESCALE with a 32-bit multiplier agrees within one step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.targets.common import (
    QuantView,
    RuleContext,
    activation_of,
    map_with_rules,
    quant,
    shape,
    tensor_inputs,
    window,
)
from skriptnd.targets.conformance.mli_import import (
    to_sknd,  # the other direction: one MLI case → a model folder
)
from skriptnd.targets.registry import Mapping, SpecOp, Target, register

#: MLI kernels and helpers: the MLI 1.0 API document's (embarc-mli.txt) and those MLI 2.0 adds (the
#: conformance vectors' kernel groups): status, how, caveat.
SPEC: list[SpecOp] = [
    SpecOp("mli_krn_conv2d", "supported", "nn.conv{data_format='NXC', filter_format='XCN'} on [1, H, W, C] "
           "(unsqueezed batch), padding [top, left, bottom, right], stride, dilation, fused ReLU as nn.relu / "
           "math.clamp", "fx: power-of-two rescale, round UP exact with RESCALE single_round; CONVERGENT has "
           "no TOSA mode"),
    SpecOp("mli_krn_depthwise_conv2d", "supported", "nn.conv{groups=C, filter_format='XCN'} (weights HW1N)", ""),
    SpecOp("mli_krn_group_conv2d", "supported", "nn.conv{groups=G, filter_format='XCN'} (2.0)", ""),
    SpecOp("mli_krn_transpose_conv2d", "supported", "nn.deconv{data_format='NXC', filter_format='NXC'} with "
           "HWCN weights stored [in, h, w, out] (2.0)", "runs in fp32 on the dequantized values inside the "
           "integer graph (no integer TRANSPOSE_CONV2D lowering yet), output quantized in the graph"),
    SpecOp("mli_krn_maxpool", "supported", "nn.max_pool{axes=[1, 2]} (HWC)", "exact on the integers"),
    SpecOp("mli_krn_avepool", "supported", "nn.avg_pool{axes=[1, 2], ignore_border=true}",
           "MLI divides by a 16-bit reciprocal × shift: may differ by 1 LSB from an exact division"),
    SpecOp("mli_krn_fully_connected", "supported", "layout.reshape to [1, N] + nn.linear (2.0 weights NM "
           "transposed to [M, N] on the host) + fused ReLU", ""),
    SpecOp("mli_krn_rnn_dense", "supported", "a sum of nn.linear over the inputs (2.0)", "the per-input "
           "products have no quantization of their own (one accumulator in MLI): those nn.linear run with fake "
           "quantization, the rest as integer TOSA"),
    SpecOp("mli_krn_lstm_cell", "supported", "nn.lstm_step per time step, gates re-ordered (i, g, f, o) → "
           "(i, f, g, o); direction, LAST/ALL results", "LUT-based sigmoid/tanh: not bit-exact; the reader unrolls "
           "the sequence and runs it with fake quantization"),
    SpecOp("mli_krn_gru_cell", "supported", "composition: z, r = sigmoid(linear), h̃ = tanh(linear(x) + "
           "linear(r·h)), h1 = z·h + (1 - z)·h̃ (2.0)", "LUT-based activations: not bit-exact"),
    SpecOp("mli_krn_basic_rnn_cell", "partial", "act(nn.linear(x) + nn.linear(h) + b) (1.x)",
           "mapped by sknd compose --target mli; no 2.0 test case, so the reader does not translate it (E0903)"),
    SpecOp("mli_krn_relu", "supported", "nn.relu / nn.relu{max=6} / math.clamp(-1, 1)", "exact on the integers"),
    SpecOp("mli_krn_leaky_relu", "supported", "nn.relu{alpha}", "alpha as a fixed-point scalar: rounding of α·x"),
    SpecOp("mli_krn_prelu", "supported", "nn.prelu{axis} (2.0)", ""),
    SpecOp("mli_krn_sigm", "supported", "nn.sigmoid with the fixed output quantization (Q.15 / sa8 1/256, "
           "zero point -128)", "MLI uses a LUT with interpolation: not bit-exact"),
    SpecOp("mli_krn_tanh", "supported", "math.tanh with the fixed output quantization", "LUT: not bit-exact"),
    SpecOp("mli_krn_softmax", "supported", "nn.softmax{axes=[axis]} (all axes when axis < 0)", "LUT: not "
           "bit-exact"),
    SpecOp("mli_krn_l2_normalize", "supported", "nn.l2_norm{axes} (2.0)", ""),
    SpecOp("mli_krn_eltwise_add", "supported", "math.add", ""),
    SpecOp("mli_krn_eltwise_sub", "supported", "math.sub", ""),
    SpecOp("mli_krn_eltwise_mul", "supported", "math.mul", ""),
    SpecOp("mli_krn_eltwise_max", "supported", "math.max", "exact on the integers"),
    SpecOp("mli_krn_eltwise_min", "supported", "math.min", "exact on the integers"),
    SpecOp("mli_krn_argmax", "supported", "math.argmax over the flattened slice (topk 1); algo.top_k otherwise",
           "MLI returns memory offsets and breaks ties its own way"),
    SpecOp("mli_krn_concat", "supported", "layout.concat{axis} (1.x; 2.0: mli_mov)", ""),
    SpecOp("mli_krn_permute", "supported", "layout.transpose{perm}", "exact"),
    SpecOp("mli_krn_padding2d", "supported", "layout.pad{axes=[0, 1]} with zeros (1.x; 2.0: mli_mov)", "exact"),
    SpecOp("mli_mov_tensor", "supported", "layout.slice / layout.pad / layout.transpose (data movement, 2.0)",
           "exact"),
    SpecOp("mli_hlp_convert_tensor", "supported", "quant.zero_point_linear_quantize re-annotation: RESCALE "
           "between the two quantizations (CAST for fp32)", ""),
    SpecOp("mli_hlp_count_elem_num", "supported", "layout.shape / a static product of extents", "a helper, no "
           "computation"),
    SpecOp("mli_hlp_point_to_subtensor", "supported", "layout.slice (a view in MLI; a copy in value semantics)",
           ""),
]


def spec_ops() -> list[SpecOp]:
    return list(SPEC)


def mli_type(t: Tensor | None, view: QuantView | None = None) -> str | None:
    """fx8/fx16 (``frac_bits``), sa8/sa32, or None for float."""
    qp = view(t) if view is not None else quant(t)
    if qp is None:
        return None
    exps = [math.log2(float(s)) for s in qp.scale]
    fx = all(e == int(e) and e <= 0 for e in exps) and all(int(z) - qp.offset == 0 for z in qp.zero_point)
    if fx and qp.axis is None and qp.bits in (8, 16) and not qp.offset:
        return f"fx{qp.bits} (frac_bits {-int(exps[0])})"
    if qp.bits in (8, 32) and not qp.offset:
        return f"sa{qp.bits}" + ("" if qp.axis is None else f" per axis {qp.axis}")
    return f"int{qp.bits}{' unsigned' if qp.offset else ''}"


def _types(op: Operation, view: QuantView) -> tuple[str | None, str]:
    ts = [(t.name, mli_type(t, view)) for t in [*tensor_inputs(op), *op.outputs] if t is not None]
    floats = [n for n, k in ts if k is None]
    if floats:
        return (f"'{floats[0]}' is float: MLI kernels are fixed point (fx8/fx16/sa8); give the graph "
                "@quantize entries"), ""
    odd = [(n, k) for n, k in ts if k is not None and k.startswith("int")]
    if odd:
        return f"'{odd[0][0]}' is {odd[0][1]}: MLI types are fx8, fx16 (power-of-two scale, zero point 0), sa8 " \
               "and sa32 (signed)", ""
    return None, ", ".join(f"{n}: {k}" for n, k in ts)


_RELU = {("relu", 0.0, None): "MLI_RELU_GEN", ("relu", 0.0, 6.0): "MLI_RELU_6", ("clamp", -1.0, 1.0): "MLI_RELU_1",
         ("clamp", 0.0, 6.0): "MLI_RELU_6"}


class _Context(RuleContext):
    def relu(self, op: Operation) -> str:
        readers = self.users.get(id(op.outputs[0]), [])
        if len(readers) == 1 and readers[0] is not None:
            act = activation_of(readers[0])
            if act is not None and act in _RELU:
                self.fused.add(id(readers[0]))
                return _RELU[act]
        return "MLI_RELU_NONE"


def _batch_note(xs: list[int | None]) -> str | None:
    return None if xs and xs[0] == 1 else f"batch {xs[0] if xs else '?'}: MLI feature maps have no batch " \
        "dimension (run once per batch item)"


def _conv(op: Operation, ctx: _Context) -> Mapping:
    xs, fs = shape(op.inputs[0]), shape(op.inputs[1])
    if len(xs) != 4:
        return Mapping(op, None, "MLI convolutions are 2-D")
    batch = _batch_note(xs)
    if batch:
        return Mapping(op, None, batch)
    fmt, ffmt = op.attribs.get("data_format", "NCX"), op.attribs.get("filter_format", "NCX")
    axes, c_axis = ([1, 2], 3) if fmt == "NXC" else ([2, 3], 1)
    kernel = fs[1:3] if ffmt == "NXC" else fs[2:4] if ffmt == "NCX" else fs[0:2]
    w = window(op, [int(k) for k in kernel], axes, c_axis)
    if w is None or min(w.pads) < 0:
        return Mapping(op, None, "dynamic or negatively padded convolution")
    reason, types = _types(op, ctx.q)
    if reason:
        return Mapping(op, None, reason)
    cin = int(xs[c_axis])
    groups = int(op.attribs.get("groups", 1)) or cin  # groups=0: one group per input channel (depthwise)
    name = ("mli_krn_conv2d_hwcn" if groups == 1 else "mli_krn_depthwise_conv2d_hwcn" if groups == cin
            else "mli_krn_group_conv2d_hwcn")
    relu = ctx.relu(op)
    top, left, bottom, right = w.pads
    layout = "HWC input as it is" if fmt == "NXC" else "NCHW input: mli_krn_permute to HWC first"
    filt = "weights HWCN as they are" if ffmt == "XCN" else f"weights {ffmt} → HWCN on the host"
    return Mapping(op, name, f"padding top {top} bottom {bottom} left {left} right {right}, stride h "
                   f"{w.stride[0]} w {w.stride[1]}, dilation {w.dilation}, relu {relu}; {layout}, {filt}; {types}",
                   {"padding_top": top, "padding_bottom": bottom, "padding_left": left, "padding_right": right,
                    "stride_height": w.stride[0], "stride_width": w.stride[1], "dilation_height": w.dilation[0],
                    "dilation_width": w.dilation[1], "relu": relu})


def _pool(name: str) -> Callable[[Operation, _Context], Mapping]:
    def rule(op: Operation, ctx: _Context) -> Mapping:
        xs = shape(op.inputs[0])
        axes = [int(a) % len(xs) for a in (op.attribs.get("axes") or range(2, len(xs)))]
        if len(xs) not in (3, 4) or len(axes) != 2:
            return Mapping(op, None, "MLI pools two spatial axes of a HWC feature map")
        if op.op == "nn.avg_pool" and not op.attribs.get("ignore_border", True):
            return Mapping(op, None, "ignore_border=false: MLI's average excludes the padding")
        size = [int(s) for s in op.attribs["size"]]
        w = window(op, size, axes, None)
        if w is None or w.dilation != [1, 1] or min(w.pads) < 0:
            return Mapping(op, None, "dilated, negatively padded or dynamic pooling")
        reason, types = _types(op, ctx.q)
        if reason:
            return Mapping(op, None, reason)
        top, left, bottom, right = w.pads
        return Mapping(op, name, f"kernel {size[0]}x{size[1]}, padding top {top} bottom {bottom} left {left} right "
                       f"{right}, stride h {w.stride[0]} w {w.stride[1]}; output quantization = input's; {types}",
                       {"kernel_height": size[0], "kernel_width": size[1], "padding_top": top,
                        "padding_bottom": bottom, "padding_left": left, "padding_right": right,
                        "stride_height": w.stride[0], "stride_width": w.stride[1]})
    return rule


def _simple(name: str, how: str = "") -> Callable[[Operation, _Context], Mapping]:
    def rule(op: Operation, ctx: _Context) -> Mapping:
        reason, types = _types(op, ctx.q)
        if reason:
            return Mapping(op, None, reason)
        return Mapping(op, name, "; ".join(p for p in (how, types) if p))
    return rule


def _linear(op: Operation, ctx: _Context) -> Mapping:
    reason, types = _types(op, ctx.q)
    if reason:
        return Mapping(op, None, reason)
    n, c = shape(op.inputs[1])
    return Mapping(op, "mli_krn_fully_connected", f"weights [{n}, {c}] → NM ({c}, {n}) on the host, relu "
                   f"{ctx.relu(op)}; {types}")


def _act(op: Operation, ctx: _Context) -> Mapping:
    if id(op) in ctx.fused:
        return Mapping(op, "(fused)", "fused into the preceding kernel's relu configuration")
    act = activation_of(op)
    if op.op == "nn.relu" and op.attribs.get("alpha") is not None:
        return _simple("mli_krn_leaky_relu", f"alpha {op.attribs['alpha']}")(op, ctx)
    if act is None or act not in _RELU:
        return Mapping(op, None, "bounds other than [0, inf), [0, 6], [-1, 1]")
    return _simple("mli_krn_relu", _RELU[act])(op, ctx)


RULES: dict[str, Callable[[Operation, _Context], Mapping]] = {
    "nn.conv": _conv, "nn.linear": _linear,
    "nn.deconv": _simple("mli_krn_transpose_conv2d_hwcn", "weights (H, W, Co, Ci) → (H, W, Ci, Co)"),
    "nn.max_pool": _pool("mli_krn_maxpool_hwc"), "nn.avg_pool": _pool("mli_krn_avepool_hwc"),
    "nn.relu": _act, "math.clamp": _act,
    "nn.prelu": _simple("mli_krn_prelu"),
    "nn.sigmoid": _simple("mli_krn_sigm", "fixed output quantization"),
    "math.tanh": _simple("mli_krn_tanh", "fixed output quantization"),
    "nn.softmax": _simple("mli_krn_softmax", "fixed output quantization"),
    "nn.l2_norm": _simple("mli_krn_l2_normalize"),
    "math.add": _simple("mli_krn_eltwise_add"), "math.sub": _simple("mli_krn_eltwise_sub"),
    "math.mul": _simple("mli_krn_eltwise_mul"), "math.max": _simple("mli_krn_eltwise_max"),
    "math.min": _simple("mli_krn_eltwise_min"),
    "math.argmax": _simple("mli_krn_argmax", "topk 1"), "algo.top_k": _simple("mli_krn_argmax", "topk k"),
    "layout.transpose": _simple("mli_krn_permute"),
    "layout.concat": _simple("mli_mov_tensor (concatenation by moves)"),
    "layout.pad": _simple("mli_mov_tensor (padding_pre/post)"),
    "layout.slice": _simple("mli_mov_tensor (offset/size/sub_sample_step)"),
    "layout.reshape": _simple("(no kernel)", "a tensor shape change"),
    "layout.flatten": _simple("(no kernel)", "a tensor shape change"),
    "nn.lstm_step": _simple("mli_krn_lstm_cell", "gates (i, f, g, o) → MLI's (i, g, f, o)"),
    "math.iden": _simple("mli_hlp_convert_tensor", "when the quantizations differ; else nothing"),
}


def map_graph(graph: Graph) -> list[Mapping]:
    return map_with_rules(graph, RULES, _Context(graph), control_flow="MLI is a kernel library without a graph",
                          missing="no MLI kernel computes '{op}'",
                          fused="fused into the preceding kernel's relu configuration")


TARGET = register(Target("mli", "embARC MLI 2.0", spec_ops, map_graph))

__all__ = ["SPEC", "TARGET", "map_graph", "mli_type", "spec_ops", "to_sknd"]

