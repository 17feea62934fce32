"""Android NNAPI 1.0 as a target: its operation table and the mapping of standard operations onto it.

NNAPI 1.0 (``neuralnetworks/1.0/types.hal``, API level 27) has 29 operations on TENSOR_FLOAT32 and
TENSOR_QUANT8_ASYMM (uint8, one scale and zero point per tensor; int32 biases at scale ``s_in * s_w``).
Activations are NHWC, CONV_2D filters ``[out, h, w, in]``, DEPTHWISE_CONV_2D filters ``[1, h, w, out]``;
paddings are explicit ``[left, right, top, bottom]`` (or the SAME/VALID codes), strides ``(w, h)``, and
a fused activation code (0 NONE, 1 RELU, 2 RELU1, 3 RELU6) follows convolutions, pools, FULLY_CONNECTED,
ADD and MUL. There is no TRANSPOSE, SUB, DIV, PAD or dilation in 1.0 (they came in 1.1/1.2).

:func:`to_sknd` (the conformance reader, :mod:`.conformance.nnapi_import`) is the other direction: one CTS vector
model → a SkriptND model folder.
"""

from __future__ import annotations

from collections.abc import Callable

from skriptnd.compose.ir import Graph, Operation
from skriptnd.targets.common import (
    QuantView,
    RuleContext,
    activation_of,
    describe_quant,
    map_with_rules,
    shape,
    tensor_inputs,
    window,
)
from skriptnd.targets.conformance.nnapi_import import UNSUPPORTED, to_sknd
from skriptnd.targets.registry import Mapping, SpecOp, Target, register

_QUANT_REQUANT = ("quant8: NNAPI requantizes the int32 accumulator with QuantizeMultiplierSmallerThanOne "
                  "(saturating rounding doubling high-mul, rounding divide by 2^shift); SkriptND's integer graph "
                  "uses TOSA RESCALE single_round (round half up): identical except on exact ties, where the "
                  "results differ by 1 LSB (the CTS allows 1)")

#: The NNAPI 1.0 operation table (every OperationType of types.hal): status, how, caveat.
SPEC: list[SpecOp] = [
    SpecOp("ADD", "supported", "math.add (numpy-style broadcasting) + fused activation",
           "quant8: NNAPI rescales both inputs with a left shift of 20 and per-input multipliers; SkriptND adds "
           "the dequantized values in fp32 and quantizes the sum in the graph (round half away from zero): "
           "within 1 LSB"),
    SpecOp("AVERAGE_POOL_2D", "supported", "nn.avg_pool{axes=[1, 2], ignore_border=true} (padding not counted)",
           "quant8: NNAPI computes (acc + n/2) / n on integers; SkriptND averages the dequantized values in fp32 "
           "and quantizes in the graph: within 1 LSB"),
    SpecOp("CONCATENATION", "supported", "layout.concat{axis}",
           "quant8 exact on the integers when all inputs share the output's quantization (as NNAPI 1.0 requires)"),
    SpecOp("CONV_2D", "supported", "nn.conv{data_format='NXC', filter_format='NXC', padding=[top, left, bottom, "
           "right], stride=[h, w]} + fused activation", _QUANT_REQUANT),
    SpecOp("DEPTHWISE_CONV_2D", "supported", "nn.conv{groups=C, NXC}, filter [1, h, w, C*M] stored as "
           "[C*M, h, w, 1]", _QUANT_REQUANT),
    SpecOp("DEPTH_TO_SPACE", "supported", "layout.depth_to_space{data_format='NXC', blocks_first=true}", ""),
    SpecOp("DEQUANTIZE", "supported", "math.iden from a quantized to a float tensor (the real value "
           "s * (q - z))", ""),
    SpecOp("EMBEDDING_LOOKUP", "supported", "layout.gather{axis=0}(values, lookups)", ""),
    SpecOp("FLOOR", "supported", "math.floor", "no CTS vector in NNAPI 1.0 (tested by hand)"),
    SpecOp("FULLY_CONNECTED", "supported", "layout.reshape to [batch, input_size] + nn.linear (weights "
           "[num_units, input_size] as they are) + fused activation", _QUANT_REQUANT),
    SpecOp("HASHTABLE_LOOKUP", "supported", "math.eq of every lookup with every key, math.any_reduce for "
           "hits, math.argmax + layout.gather for the row, zeros where nothing matched",
           "a comparison against all keys instead of NNAPI's binary search: the same result for unique keys"),
    SpecOp("L2_NORMALIZATION", "supported", "nn.l2_norm{axes=[last]}", ""),
    SpecOp("L2_POOL_2D", "supported", "nn.rms_pool{axes=[1, 2], ignore_border=true}", ""),
    SpecOp("LOCAL_RESPONSE_NORMALIZATION", "supported", "nn.local_response_norm{axes=[last], "
           "size=[2 radius + 1], alpha=alpha * size, beta, bias}", "the stdlib averages the window's squares, "
           "NNAPI sums them: alpha is scaled by the window size"),
    SpecOp("LOGISTIC", "supported", "nn.sigmoid", "quant8: output scale 1/256, zero point 0 (NNAPI's "
           "requirement); computed in fp32 and quantized in the graph: within 1 LSB"),
    SpecOp("LSH_PROJECTION", "unsupported", UNSUPPORTED["LSH_PROJECTION"], "to_sknd reports E0902 at the "
           "operation"),
    SpecOp("LSTM", "supported", "linalg/nn formulas: gates from nn.linear, nn.sigmoid, math.tanh, optional CIFG, "
           "peepholes, cell and projection clipping (math.clamp), projection", "float32 only, as NNAPI 1.0"),
    SpecOp("MAX_POOL_2D", "supported", "nn.max_pool{axes=[1, 2]} (padding never selected)",
           "quant8 exact: max commutes with quantization"),
    SpecOp("MUL", "supported", "math.mul (numpy-style broadcasting) + fused activation",
           "quant8: product of the dequantized values in fp32, quantized in the graph: within 1 LSB"),
    SpecOp("RELU", "supported", "nn.relu", "quant8 exact (a clamp on the grid)"),
    SpecOp("RELU1", "supported", "math.clamp(x, -1.0, 1.0)", "quant8 exact"),
    SpecOp("RELU6", "supported", "nn.relu{max=6.0}", "quant8 exact"),
    SpecOp("RESHAPE", "supported", "layout.reshape{shape=output dims}", "a shape given as a model input must "
           "agree with the declared output dims (SkriptND shapes are static)"),
    SpecOp("RESIZE_BILINEAR", "supported", "image.linear_resize{axes=[1, 2], antialias=false, "
           "coordinate_transform='ASYMMETRIC'}", ""),
    SpecOp("RNN", "supported", "nn.linear(input, weights, bias) + nn.linear(state, recurrent) + fused "
           "activation; the new state is the output", ""),
    SpecOp("SOFTMAX", "supported", "math.mul by beta, nn.softmax{axes=[last]}", "quant8: output scale 1/256, "
           "zero point 0; fp32 softmax quantized in the graph: within 1 LSB"),
    SpecOp("SPACE_TO_DEPTH", "supported", "layout.space_to_depth{data_format='NXC', blocks_first=true}", ""),
    SpecOp("SVDF", "supported", "nn.linear (feature weights), the memory as a layout.concat/slice shift "
           "register, per-unit math.mul + math.sum_reduce over time, rank groups summed, bias, activation", ""),
    SpecOp("TANH", "supported", "math.tanh", ""),
    SpecOp("OEM_OPERATION", "unsupported", "vendor-defined: no semantics in the specification",
           "nothing to map"),
]


def spec_ops() -> list[SpecOp]:
    return list(SPEC)


# -- mapping a composed graph ---------------------------------------------------------------------------

_ACT_CODES = {("relu", 0.0, None): ("RELU", 1), ("relu", 0.0, 6.0): ("RELU6", 3), ("clamp", -1.0, 1.0): ("RELU1", 2),
              ("clamp", 0.0, 6.0): ("RELU6", 3)}


def _activation(op: Operation) -> tuple[str, int] | None:
    act = activation_of(op)
    return None if act is None else _ACT_CODES.get(act)


class _Context(RuleContext):
    def fuse(self, op: Operation, mark: bool = True) -> tuple[int, str]:
        """The fused activation code of ``op``: its output's only reader is a RELU/RELU1/RELU6 (``mark``:
        that reader is then reported as fused)."""
        readers = self.users.get(id(op.outputs[0]), [])
        if len(readers) == 1 and readers[0] is not None:
            act = _activation(readers[0])
            if act is not None:
                if mark:
                    self.fused.add(id(readers[0]))
                return act[1], f"fused activation {act[1]} ({act[0]}, the following '{readers[0].op}')"
        return 0, "fused activation 0 (NONE)"


def _quant_note(op: Operation, quant: QuantView) -> tuple[str | None, str]:
    """(a reason it cannot map, a note) from the quantization of the operation's tensors."""
    ins = tensor_inputs(op)
    qs = [quant(t) for t in [*ins, *op.outputs] if t is not None]
    if not any(q is not None for q in qs):
        return None, "TENSOR_FLOAT32"
    x = quant(ins[0]) if ins else None
    y = quant(op.outputs[0])
    for q, t in zip(qs, [*ins, *op.outputs], strict=False):
        if q is not None and q.axis is not None and not (op.op in ("nn.conv", "nn.linear") and t is not ins[0]
                                                         and q.bits == 32):
            return (f"'{t.name}' is quantized per channel (axis {q.axis}); NNAPI 1.0 TENSOR_QUANT8_ASYMM has one "
                    "scale per tensor (per-channel filters came in NNAPI 1.2)"), ""
        if q is not None and q.bits not in (8, 32):
            return f"'{t.name}' is {q.bits}-bit; NNAPI 1.0 quantized tensors are 8-bit (biases 32-bit)", ""
    parts = []
    if x is not None:
        parts.append(f"input TENSOR_QUANT8_ASYMM ({describe_quant(ins[0], quant)}"
                     + (", zero point + 128 as uint8)" if x.offset == 0 and x.bits == 8 else ")"))
    if y is not None:
        parts.append(f"output TENSOR_QUANT8_ASYMM ({describe_quant(op.outputs[0], quant)})")
    elif x is not None:
        parts.append("float output: DEQUANTIZE before it and a TENSOR_FLOAT32 operation")
    return None, "; ".join(parts)


def _layout_note(fmt: str) -> str:
    return ("NHWC as NNAPI" if fmt == "NXC" else
            "NCHW graph: NNAPI operands are NHWC (NNAPI 1.0 has no TRANSPOSE; the host transposes graph inputs "
            "and outputs, filters are re-laid out on the host)")


def _conv(op: Operation, ctx: _Context) -> Mapping:
    x, f = op.inputs[0], op.inputs[1]
    xs, fs = shape(x), shape(f)
    if len(xs) != 4:
        return Mapping(op, None, f"{len(xs) - 2}-D convolution: NNAPI 1.0 convolutions are 2-D")
    fmt, ffmt = op.attribs.get("data_format", "NCX"), op.attribs.get("filter_format", "NCX")
    if fmt not in ("NCX", "NXC"):
        return Mapping(op, None, f"data_format '{fmt}'")
    c_axis, axes = (3, [1, 2]) if fmt == "NXC" else (1, [2, 3])
    kernel = fs[1:3] if ffmt == "NXC" else fs[2:4] if ffmt == "NCX" else fs[0:2]
    w = window(op, [int(k) for k in kernel], axes, c_axis)
    if w is None:
        return Mapping(op, None, "dynamic shape")
    if w.dilation != [1, 1]:
        return Mapping(op, None, f"dilation {w.dilation}: NNAPI 1.0 has no dilated convolution (1.2 adds it)")
    if min(w.pads) < 0:
        return Mapping(op, None, f"negative padding {w.pads}")
    cin = int(xs[c_axis])
    groups = int(op.attribs.get("groups", 1)) or cin  # groups=0: one group per input channel (depthwise)
    cout = int(fs[0]) if ffmt in ("NCX", "NXC") else int(fs[-1])
    if groups == 1:
        name, extra = "CONV_2D", ""
    elif groups == cin:
        name, extra = "DEPTHWISE_CONV_2D", f", depth multiplier {cout // cin}"
    else:
        return Mapping(op, None, f"grouped convolution ({groups} groups of {cin // groups} channels): NNAPI 1.0 "
                       "has only CONV_2D and DEPTHWISE_CONV_2D")
    reason, qnote = _quant_note(op, ctx.q)
    code, act = ctx.fuse(op, mark=not reason)
    top, left, bottom, right = w.pads
    params = {"padding": [left, right, top, bottom], "stride": [w.stride[1], w.stride[0]], "activation": code}
    bias = "" if op.inputs[2] is not None else ", a zero bias operand (NNAPI requires one)"
    filt = ("filter [out, h, w, in] as it is" if ffmt == "NXC" and name == "CONV_2D" else
            f"filter {ffmt} → {'[out, h, w, in]' if name == 'CONV_2D' else '[1, h, w, out]'} on the host")
    how = (f"padding [left {left}, right {right}, top {top}, bottom {bottom}], stride (w {w.stride[1]}, h "
           f"{w.stride[0]}){extra}, {act}{bias}; {_layout_note(fmt)}, {filt}; {qnote}")
    if reason:
        return Mapping(op, None, f"{reason}; with a per-tensor filter it would be {name}: {how.rstrip('; ')}")
    return Mapping(op, name, how, params)


def _linear(op: Operation, ctx: _Context) -> Mapping:
    reason, qnote = _quant_note(op, ctx.q)
    code, act = ctx.fuse(op, mark=not reason)
    n, c = shape(op.inputs[1])
    bias = "" if op.inputs[2] is not None else ", a zero bias operand"
    how = f"weights [num_units {n}, input_size {c}] as they are{bias}, {act}; {qnote}"
    if reason:
        return Mapping(op, None, f"{reason}; with a per-tensor filter it would be FULLY_CONNECTED: {how.rstrip('; ')}")
    return Mapping(op, "FULLY_CONNECTED", how, {"activation": code})


def _pool(name: str) -> Callable[[Operation, _Context], Mapping]:
    def rule(op: Operation, ctx: _Context) -> Mapping:
        xs = shape(op.inputs[0])
        axes = [int(a) % len(xs) for a in (op.attribs.get("axes") or range(2, len(xs)))]
        if len(xs) != 4 or axes not in ([1, 2], [2, 3]):
            return Mapping(op, None, f"pooling over axes {axes} of a rank-{len(xs)} tensor: NNAPI pools the H, W "
                           "axes of 4-D NHWC tensors")
        if op.op == "nn.avg_pool" and not op.attribs.get("ignore_border", True):
            return Mapping(op, None, "ignore_border=false counts the padding in the average; NNAPI's "
                           "AVERAGE_POOL_2D does not")
        if op.attribs.get("ceil_mode"):
            return Mapping(op, None, "ceil_mode: NNAPI output sizes round down")
        size = [int(s) for s in op.attribs["size"]]
        w = window(op, size, axes, 3 if axes == [1, 2] else 1)
        if w is None or w.dilation != [1, 1] or min(w.pads) < 0:
            return Mapping(op, None, "dilated, negatively padded or dynamic pooling")
        reason, qnote = _quant_note(op, ctx.q)
        if reason:
            return Mapping(op, None, reason)
        code, act = ctx.fuse(op)
        top, left, bottom, right = w.pads
        return Mapping(op, name, f"padding [left {left}, right {right}, top {top}, bottom {bottom}], stride (w "
                       f"{w.stride[1]}, h {w.stride[0]}), filter (w {size[1]}, h {size[0]}), {act}; "
                       f"{_layout_note('NXC' if axes == [1, 2] else 'NCX')}; {qnote}",
                       {"padding": [left, right, top, bottom], "stride": [w.stride[1], w.stride[0]],
                        "filter": [size[1], size[0]], "activation": code})
    return rule


def _act(op: Operation, ctx: _Context) -> Mapping:
    if id(op) in ctx.fused:
        return Mapping(op, "(fused)", "fused into the preceding operation's activation operand")
    act = _activation(op)
    if act is None:
        what = "a leaky ReLU (alpha)" if op.attribs.get("alpha") is not None else "these bounds"
        return Mapping(op, None, f"{what}: NNAPI 1.0 clamps only to [0, inf), [-1, 1] and [0, 6]")
    reason, qnote = _quant_note(op, ctx.q)
    return Mapping(op, act[0], qnote) if reason is None else Mapping(op, None, reason)


def _simple(name: str, how: str = "", check: Callable[[Operation], str | None] | None = None
            ) -> Callable[[Operation, _Context], Mapping]:
    def rule(op: Operation, ctx: _Context) -> Mapping:
        problem = check(op) if check else None
        if problem:
            return Mapping(op, None, problem)
        reason, qnote = _quant_note(op, ctx.q)
        if reason:
            return Mapping(op, None, reason)
        text = "; ".join(p for p in (how, qnote) if p)
        return Mapping(op, name, text)
    return rule


def _eltwise(name: str) -> Callable[[Operation, _Context], Mapping]:
    def rule(op: Operation, ctx: _Context) -> Mapping:
        if any(a is not None for a in (op.attribs.get("lhs_align"), op.attribs.get("rhs_align"))):
            return Mapping(op, None, "explicit broadcast alignment: NNAPI broadcasts trailing dimensions only")
        if max(len(shape(t)) for t in tensor_inputs(op)) > 4:
            return Mapping(op, None, "rank above 4")
        reason, qnote = _quant_note(op, ctx.q)
        if reason:
            return Mapping(op, None, reason)
        code, act = ctx.fuse(op)
        return Mapping(op, name, f"numpy-style broadcasting, {act}; {qnote}", {"activation": code})
    return rule


def _last_axis(attr: str) -> Callable[[Operation], str | None]:
    def check(op: Operation) -> str | None:
        rank = len(shape(op.inputs[0]))
        axes = [int(a) % rank for a in (op.attribs.get(attr) or [1])]
        if axes != [rank - 1] and not (attr == "axes" and op.op == "nn.softmax" and rank == 2 and axes == [1]):
            return f"over axes {axes}: NNAPI 1.0 normalizes over the last (channel) axis only"
        return None
    return check


def _blocks(op: Operation) -> str | None:
    block = [int(b) for b in op.attribs.get("block_size", [])]
    if len(set(block)) != 1 or len(block) != 2:
        return f"block size {block}: NNAPI takes one square 2-D block"
    if not op.attribs.get("blocks_first", True):
        return "blocks_first=false (CRD order): NNAPI 1.0 uses DCR order"
    if op.attribs.get("data_format", "NCX") != "NXC":
        return "NCHW: NNAPI operates on NHWC (no TRANSPOSE in 1.0)"
    return None


def _gather(op: Operation) -> str | None:
    return None if int(op.attribs.get("axis", 0)) == 0 else "gather along an axis other than 0"


def _resize(op: Operation) -> str | None:
    if op.attribs.get("antialias", True) and any(
            int(o) < int(i) for o, i in zip(shape(op.outputs[0]), shape(op.inputs[0]), strict=False)):
        return "antialiased downsampling"
    if op.attribs.get("coordinate_transform", "SYMMETRIC") != "ASYMMETRIC":
        return (f"coordinate_transform '{op.attribs.get('coordinate_transform', 'SYMMETRIC')}': NNAPI 1.0 "
                "RESIZE_BILINEAR maps output x to input x * in/out (ASYMMETRIC)")
    return None


def _lrn(op: Operation) -> str | None:
    size = [int(s) for s in op.attribs.get("size", [])]
    if len(size) != 1 or size[0] % 2 == 0:
        return f"window {size}: NNAPI's radius gives odd windows over one axis"
    return _last_axis("axes")(op)


def _l2(op: Operation) -> str | None:
    if op.attribs.get("bias") is not None or op.attribs.get("epsilon") is not None:
        return "bias/epsilon: NNAPI 1.0 L2_NORMALIZATION has neither"
    return _last_axis("axes")(op)


def _reshape(op: Operation, ctx: _Context) -> Mapping:
    m = _simple("RESHAPE")(op, ctx)
    if m.supported and len(shape(op.inputs[0])) == 4:
        m.how = (f"shape {shape(op.outputs[0])}; a 4-D input is NHWC in NNAPI: if the graph is NCHW the flattened "
                 "order differs, so the next FULLY_CONNECTED's weight columns are permuted on the host; " + m.how)
    return m


RULES: dict[str, Callable[[Operation, _Context], Mapping]] = {
    "nn.conv": _conv, "nn.linear": _linear,
    "nn.max_pool": _pool("MAX_POOL_2D"), "nn.avg_pool": _pool("AVERAGE_POOL_2D"), "nn.rms_pool": _pool("L2_POOL_2D"),
    "nn.relu": _act, "math.clamp": _act,
    "math.add": _eltwise("ADD"), "math.mul": _eltwise("MUL"),
    "nn.sigmoid": _simple("LOGISTIC", "quant8 output must have scale 1/256, zero point 0"),
    "math.tanh": _simple("TANH", "float32 only in NNAPI 1.0"),
    "nn.softmax": _simple("SOFTMAX", "beta 1.0", _last_axis("axes")),
    "layout.concat": _simple("CONCATENATION", "quant8: all inputs and the output share one scale and zero point"),
    "layout.reshape": _reshape, "layout.flatten": _reshape,
    "layout.squeeze": _reshape, "layout.unsqueeze": _reshape,
    "layout.depth_to_space": _simple("DEPTH_TO_SPACE", "", _blocks),
    "layout.space_to_depth": _simple("SPACE_TO_DEPTH", "", _blocks),
    "math.floor": _simple("FLOOR"),
    "layout.gather": _simple("EMBEDDING_LOOKUP", "lookups as TENSOR_INT32", _gather),
    "nn.l2_norm": _simple("L2_NORMALIZATION", "", _l2),
    "nn.local_response_norm": _simple("LOCAL_RESPONSE_NORMALIZATION", "radius (size - 1) / 2, alpha / size", _lrn),
    "image.linear_resize": _simple("RESIZE_BILINEAR", "output width, height", _resize),
    "nn.lstm_step": _simple("LSTM", "no CIFG, no peepholes, no projection; gates i, f, g, o re-ordered to NNAPI's "
                            "input/forget/cell/output weight operands"),
    "math.iden": _simple("(identity)", "no operation: the operand is aliased (DEQUANTIZE when the input is "
                         "quantized and the output is not)"),
}


def map_graph(graph: Graph) -> list[Mapping]:
    return map_with_rules(graph, RULES, _Context(graph), control_flow="NNAPI 1.0 models are straight-line",
                          missing="no NNAPI 1.0 operation computes '{op}'",
                          fused="fused into the preceding operation's activation operand")


TARGET = register(Target("nnapi", "Android NNAPI 1.0", spec_ops, map_graph))

__all__ = ["SPEC", "TARGET", "map_graph", "spec_ops", "to_sknd"]
