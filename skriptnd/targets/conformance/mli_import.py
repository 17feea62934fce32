"""One embARC MLI 2.0 user-test case (a conformance vector's JSON) → a SkriptND model folder.

:func:`to_sknd` writes ``main.sknd`` (graph ``Main``) through :mod:`skriptnd.interop.writer`. The case's
activation tensors (roles ``input``, ``input1``/``input2``, …) are graph inputs and ``output`` the graph
output, with the MLI shapes (no batch: convolutions and pools unsqueeze a batch of one and squeeze it
again); parameters (``weights``, ``bias``, ``slope_coeff``) are ``@variable`` s with NNEF tensor files,
stored in the layout the standard operator takes (HWCN convolution weights as ``[out, h, w, in/groups]``,
``filter_format='NXC'``; fully-connected NM weights as ``[M, N]``), per-axis quantization following
the moved axis.

**Quantization** (each tensor's ``quant``): ``fx8``/``fx16`` with ``frac_bits`` n →
``quant.zero_point_linear_quantize{zero_point=0, scale=2^-n, bits=8|16}``; ``sa8``/``sa32`` →
``{zero_point=zero_point_int, scale=scale_int·2^-scale_frac_bits, bits=8|32}`` (exact in binary), per
axis with ``channel_axis`` and lists. The quantize operator rounds ``x / scale`` half away from zero and
saturates: the codes MLI's test framework computes (``trunc(v·2^frac/scale_int ± 0.5) + zp``). Graph
inputs take the case's **real** values (``data``), which their quantize operator turns into the codes;
the output comes out real, on its grid. fp32 tensors (``mli_hlp_convert_tensor``) have no entry.

Every kernel group of the MLI 2.0 conformance set is translated; the MLI 1.x kernels without 2.0 cases
(:data:`NOT_TRANSLATED`) are an E0903 diagnostic naming the group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.compose.ir import Tensor
from skriptnd.compose.quantization import QParams, dequantize, qparams, quantize
from skriptnd.diagnostics import register_codes
from skriptnd.interop.writer import (
    Call,
    Expr,
    GraphText,
    ModelFolder,
    Names,
    Quantize,
    TensorDecl,
    write_model,
)
from skriptnd.targets.conformance.vectors import Locator, field

register_codes({"E0903": "MLI kernel group not translated to the standard library"})

#: Kernel groups without a translation (yet), with the reason.
NOT_TRANSLATED: dict[str, str] = {
    "mli_krn_basic_rnn_cell": "an MLI 1.x kernel without MLI 2.0 test cases (2.0 has rnn_dense); not translated",
    "mli_krn_concat": "an MLI 1.x kernel without MLI 2.0 test cases (2.0 moves tensors with mli_mov); not translated",
    "mli_krn_padding2d": "an MLI 1.x kernel without MLI 2.0 test cases (2.0 pads with mli_mov); not translated",
}

_BITS = {"fx8": 8, "fx16": 16, "sa8": 8, "sa32": 32}


def quant_spec(q: dict[str, Any], axis_map: Callable[[int], int] | None = None) -> dict[str, Any] | None:
    """The @quantize attributes of an MLI tensor's ``quant`` (None for fp32)."""
    kind = q.get("type")
    if kind == "fp32":
        return None
    if kind in ("fx8", "fx16"):
        return {"zero_point": 0, "scale": math.ldexp(1.0, -int(q["frac_bits"])), "bits": _BITS[kind],
                "channel_axis": 0}
    scales = [math.ldexp(float(s), -int(f)) for s, f in zip(q["scale_int"], q["scale_frac_bits"], strict=True)]
    zps = [int(z) for z in q["zero_point_int"]]
    dim = int(q.get("dim", -1))
    if dim < 0:
        return {"zero_point": zps[0], "scale": scales[0], "bits": _BITS[kind], "channel_axis": 0}
    return {"zero_point": zps, "scale": scales, "bits": _BITS[kind],
            "channel_axis": axis_map(dim) if axis_map else dim}


def output_quant(case: dict[str, Any]) -> dict[str, Any]:
    """The output's quantization: the file's, except where the kernel fixes it (``output_quant.policy ==
    'fixed_by_kernel'``: sigmoid, tanh, softmax, L2 normalization, argmax set their own parameters, which
    the case's ``output_quant`` records)."""
    q = dict(case["tensors"]["output"]["quant"])
    policy = case.get("output_quant", {})
    source = next((case["tensors"][r] for r in ("input", "input1") if r in case["tensors"]), None)
    if policy.get("policy") == "same_as_input" and source is not None and int(source["quant"].get("dim", -1)) < 0:
        return dict(source["quant"])  # (per-axis parameters follow a permuted axis: the file has them)
    if policy.get("policy") != "fixed_by_kernel":
        return q
    kind = q.get("type")
    if kind in ("fx8", "fx16") and f"{kind}_frac_bits" in policy:
        return {"type": kind, "frac_bits": int(policy[f"{kind}_frac_bits"])}
    if kind in ("sa8", "sa32") and kind in policy:
        fixed = policy[kind]
        return {"type": kind, "dim": -1, "scale_int": [int(fixed["scale_int"])],
                "scale_frac_bits": [int(fixed["scale_frac_bits"])], "zero_point_int": [int(fixed["zero_point_int"])]}
    return q


def qparams_of(quant: dict[str, Any], shape: list[int] | None = None) -> QParams | None:
    """The :class:`QParams` of an MLI ``quant`` object (None for fp32), through the quant operator's own
    reading (:func:`skriptnd.compose.quantization.qparams`)."""
    spec = quant_spec(quant)
    if spec is None:
        return None
    dims = list(shape) if shape else [max(len(spec["scale"]) if isinstance(spec["scale"], list) else 1, 1)]
    if isinstance(spec["scale"], list) and spec["channel_axis"] >= len(dims):
        dims = [1] * spec["channel_axis"] + [len(spec["scale"])]
    t = Tensor("t", "real", tuple(dims), quant={"op": "quant.zero_point_linear_quantize", "attribs": spec})
    return qparams(t)


class _Builder:
    def __init__(self, case: dict[str, Any], loc: Locator) -> None:
        self.case, self.loc = case, loc
        self.names = Names(taken=["Main"])
        self.inputs: list[TensorDecl] = []
        self.variables: list[TensorDecl] = []
        self.constants: list[TensorDecl] = []
        self.weights: dict[str, np.ndarray] = {}
        self.body: list[Call] = []
        self.quantize: list[Quantize] = []
        self._n = 0
        self.tensors = case["tensors"]

    def t(self, role: str) -> dict[str, Any]:
        if role not in self.tensors:
            raise self.loc.error(["tensors"], f"the case has no '{role}' tensor")
        return self.tensors[role]

    def data(self, role: str) -> np.ndarray:
        t = self.t(role)
        return np.asarray(t["data"], np.float32).reshape(t["shape"])

    def quantize_as(self, name: str, spec: dict[str, Any] | None) -> None:
        if spec is not None:
            self.quantize.append(Quantize(name, "quant.zero_point_linear_quantize", spec))

    def input(self, role: str) -> str:
        t = self.t(role)
        name = self.names(role)
        self.inputs.append(TensorDecl(name, "real", list(t["shape"]) or [1]))
        self.quantize_as(name, quant_spec(t["quant"]))
        return name

    def variable(self, role: str, values: np.ndarray, axis_map: Callable[[int], int] | None = None) -> str:
        name = self.names(role)
        self.variables.append(TensorDecl(name, "real", list(values.shape)))
        self.weights[name] = np.ascontiguousarray(values, np.float32)
        self.quantize_as(name, quant_spec(self.t(role)["quant"], axis_map))
        return name

    def tmp(self, hint: str, quant_of: str | None = None) -> str:
        self._n += 1
        name = self.names(f"{hint}_{self._n}")
        if quant_of is not None:
            self.quantize_as(name, quant_spec(self.t(quant_of)["quant"]))
        return name

    def emit(self, out: str, op: str, args: list[Any], attribs: dict[str, Any] | None = None,
             comment: str | None = None) -> str:
        self.body.append(Call([out], op, args, attribs or {}, comment=comment))
        return out

    def output(self) -> str:
        name = self.names("output")
        self.quantize_as(name, quant_spec(output_quant(self.case)))
        return name

    def cfg(self, key: str) -> Any:
        config = self.case.get("config", {})
        if key not in config:
            raise self.loc.error(["config"], f"missing field '{key}' (the kernel configuration)")
        return config[key]

    def relu(self, x: str, out: str) -> None:
        mode = self.case.get("config", {}).get("relu", "MLI_RELU_NONE")
        if mode == "MLI_RELU_NONE":
            self.emit(out, "math.iden", [x])
        elif mode == "MLI_RELU_GEN":
            self.emit(out, "nn.relu", [x], comment="MLI_RELU_GEN")
        elif mode == "MLI_RELU_6":
            self.emit(out, "nn.relu", [x], {"max": 6.0}, comment="MLI_RELU_6")
        elif mode == "MLI_RELU_1":
            self.emit(out, "math.clamp", [x, Expr("-1.0"), Expr("1.0")], comment="MLI_RELU_1")
        else:
            raise self.loc.error(["config", "relu"], f"'{mode}' is not MLI_RELU_NONE, _GEN, _1 or _6")


def _batch(b: _Builder, x: str) -> str:
    y = b.tmp("batched", quant_of="input")
    return b.emit(y, "layout.unsqueeze", [x], {"axes": [0]}, comment="MLI feature maps have no batch")


def _unbatch(b: _Builder, y: str, out: str) -> None:
    b.emit(out, "layout.squeeze", [y], {"axes": [0]})


def _conv(b: _Builder) -> str:
    w = b.data("weights")  # HWCN: [h, w, in per group, out]
    cin = b.t("input")["shape"][2]
    groups = cin // w.shape[2]
    filt = b.variable("weights", np.transpose(w, (3, 0, 1, 2)), axis_map=_filter_axis)
    bias = b.variable("bias", b.data("bias"))
    x = _batch(b, b.input("input"))
    conv = b.tmp("conv", quant_of="output")
    b.emit(conv, "nn.conv", [x, filt, bias], {
        "stride": [b.cfg("stride_height"), b.cfg("stride_width")],
        "dilation": [b.case["config"].get("dilation_height", 1), b.case["config"].get("dilation_width", 1)],
        "padding": [b.cfg("padding_top"), b.cfg("padding_left"), b.cfg("padding_bottom"), b.cfg("padding_right")],
        "groups": groups, "data_format": "NXC", "filter_format": "NXC"}, comment=b.case["kernel"])
    act = b.tmp("activated", quant_of="output")
    b.relu(conv, act)
    out = b.output()
    _unbatch(b, act, out)
    return out


def _filter_axis(d: int) -> int:
    """HWCN per-axis dim → the stored [out, h, w, in] layout."""
    return {3: 0, 0: 1, 1: 2, 2: 3}[d]


def _fully_connected(b: _Builder) -> str:
    w = b.data("weights")  # NM: [in, out]
    n, m = w.shape
    filt = b.variable("weights", w.T, axis_map=lambda d: 1 - d)
    bias_values = b.data("bias")
    if b.case["config"].get("bias_includes_input_zero_point_term"):
        # the _ext_bias kernels take bias - zp_in * sum(w_q) (the input zero point's term folded in): the
        # linear operation's own bias is that plus zp_in * s_in * sum over the inputs of the weights

        wq = qparams_of(b.t("weights")["quant"], list(w.shape))
        xq = b.t("input")["quant"]
        zp_real = int(xq["zero_point_int"][0]) * math.ldexp(float(xq["scale_int"][0]), -int(xq["scale_frac_bits"][0]))
        w_real = np.asarray(dequantize(quantize(w, wq), wq), np.float64)
        bias_values = (bias_values + zp_real * w_real.sum(axis=0)).astype(np.float32)
    bias = b.variable("bias", bias_values)
    x = b.input("input")
    flat = b.emit(b.tmp("rows", quant_of="input"), "layout.reshape", [x], {"shape": [1, n], "axis": 0,
                                                                           "rank": len(b.t("input")["shape"])})
    y = b.emit(b.tmp("linear", quant_of="output"), "nn.linear", [flat, filt, bias], comment=b.case["kernel"])
    act = b.tmp("activated", quant_of="output")
    b.relu(y, act)
    out = b.output()
    b.emit(out, "layout.reshape", [act], {"shape": list(b.t("output")["shape"]), "axis": 0, "rank": 2})
    return out


def _pool(op: str) -> Callable[[_Builder], str]:
    def translate(b: _Builder) -> str:
        x = _batch(b, b.input("input"))
        y = b.tmp("pooled", quant_of="output")
        b.emit(y, op, [x], {"axes": [1, 2], "size": [b.cfg("kernel_height"), b.cfg("kernel_width")],
                            "stride": [b.cfg("stride_height"), b.cfg("stride_width")],
                            "padding": [b.cfg("padding_top"), b.cfg("padding_left"), b.cfg("padding_bottom"),
                                        b.cfg("padding_right")]}, comment=b.case["kernel"])
        out = b.output()
        _unbatch(b, y, out)
        return out
    return translate


def _relu(b: _Builder) -> str:
    x = b.input("input")
    out = b.output()
    b.relu(x, out)
    return out


def _unary(op: str, attribs: Callable[[_Builder], dict[str, Any]] | None = None) -> Callable[[_Builder], str]:
    def translate(b: _Builder) -> str:
        x = b.input("input")
        out = b.output()
        b.emit(out, op, [x], attribs(b) if attribs else {}, comment=b.case["kernel"])
        return out
    return translate


def _axes(b: _Builder) -> dict[str, Any]:
    rank = len(b.t("input")["shape"])
    axis = int(b.cfg("axis"))
    return {"axes": list(range(rank)) if axis < 0 else [axis]}


def _slope(b: _Builder) -> float:
    """The slope as MLI's kernel sees it: its quantized value."""

    t = b.t("slope_coeff")
    qp = qparams_of(t["quant"])
    value = np.asarray(t["data"], np.float32).reshape(-1)[:1]
    return float(dequantize(quantize(value, qp), qp)[0]) if qp is not None else float(value[0])


def _leaky(b: _Builder) -> str:
    x = b.input("input")
    alpha = _slope(b)
    out = b.output()
    if 0.0 <= alpha <= 1.0:
        b.emit(out, "nn.relu", [x], {"alpha": alpha}, comment=f"leaky ReLU, slope {alpha!r} (quantized)")
        return out
    neg, pos, scaled = b.tmp("negative"), b.tmp("positive"), b.tmp("scaled")
    b.emit(neg, "math.min", [x, Expr("0.0")])
    b.emit(pos, "math.max", [x, Expr("0.0")])
    b.emit(scaled, "math.mul", [neg, Expr(repr(alpha))])
    b.emit(out, "math.add", [pos, scaled], comment=f"leaky ReLU, slope {alpha!r} (quantized)")
    return out


def _prelu(b: _Builder) -> str:
    axis = int(b.cfg("axis"))
    slope = b.data("slope_coeff").reshape(-1)
    x = b.input("input")
    s = b.variable("slope_coeff", slope)
    out = b.output()
    b.emit(out, "nn.prelu", [x, s], {"axis": axis}, comment=b.case["kernel"])
    return out


def _eltwise(b: _Builder) -> str:
    op = {"add": "math.add", "sub": "math.sub", "mul": "math.mul", "max": "math.max", "min": "math.min"}[
        b.cfg("op")]
    x, y = b.input("input1"), b.input("input2")
    out = b.output()
    b.emit(out, op, [x, y], comment=b.case["kernel"])
    return out


def _permute(b: _Builder) -> str:
    rank = len(b.t("input")["shape"])
    perm = [int(p) for p in b.cfg("perm_dim")][:rank]
    x = b.input("input")
    out = b.output()
    b.emit(out, "layout.transpose", [x], {"perm": perm}, comment=b.case["kernel"])
    return out


def _convert(b: _Builder) -> str:
    x = b.input("input")
    out = b.output()
    b.emit(out, "math.iden", [x], comment="mli_hlp_convert_tensor: the same real value, re-quantized")
    return out


def _move(b: _Builder) -> str:
    """mli_mov_tensor: pad (padding_pre/post, in source coordinates), slice (offset, size,
    sub_sample_step), permute (perm_dim) — the order that gives the cases' output shapes."""
    shape = list(b.t("input")["shape"])
    rank = len(shape)
    cfg = b.case["config"]
    offset, size, step = ([int(v) for v in cfg[k][:rank]] for k in ("offset", "size", "sub_sample_step"))
    perm = [int(p) for p in cfg["perm_dim"][:rank]]
    pre, post = ([int(v) for v in cfg[k][:rank]] for k in ("padding_pre", "padding_post"))
    x = b.input("input")
    if any(pre) or any(post):  # in source coordinates: pad, then slice, then permute (MLI's mov order)
        q = b.t("input")["quant"]
        value = Expr("0.0")
        if q["type"] in ("sa8", "sa32"):  # MLI pads with the code 0, i.e. the real value -zp * scale
            value = Expr(repr(-int(q["zero_point_int"][0]) * math.ldexp(float(q["scale_int"][0]),
                                                                         -int(q["scale_frac_bits"][0]))))
        x = b.emit(b.tmp("padded", quant_of="input"), "layout.pad", [x, value], {"axes": list(range(rank)),
                                                                                  "padding": pre + post})
        shape = [d + p + q for d, p, q in zip(shape, pre, post, strict=True)]
    end = [o + (s if s else d - o) for o, s, d in zip(offset, size, shape, strict=True)]
    if offset != [0] * rank or end != shape or step != [1] * rank:
        x = b.emit(b.tmp("sliced", quant_of="input"), "layout.slice", [x], {"axes": list(range(rank)),
                                                                             "begin": offset, "end": end,
                                                                             "stride": step})
    out = b.output()
    if perm != list(range(rank)):
        b.emit(out, "layout.transpose", [x], {"perm": perm})
    else:
        b.emit(out, "math.iden", [x])
    return out


def _argmax(b: _Builder) -> str:
    """mli_krn_argmax: the top-k over the whole slice at each index of ``axis`` (all elements for axis -1),
    as memory offsets into the input (its ``mem_stride``): algo.top_k over the flattened slices, then the
    flat indices unravelled and weighted by the strides in integer arithmetic."""
    t = b.t("input")
    shape = list(t["shape"]) or [1]
    rank = len(shape)
    strides = list(t.get("mem_stride") or [math.prod(shape[i + 1:]) for i in range(rank)])
    axis, k = int(b.cfg("axis")), int(b.cfg("topk"))
    x = b.input("input")
    others = list(range(rank)) if axis < 0 else [d for d in range(rank) if d != axis]
    rows = 1 if axis < 0 else shape[axis]
    width = math.prod(shape[d] for d in others)
    if axis >= 0 and axis != 0:
        x = b.emit(b.tmp("axis_first", quant_of="input"), "layout.transpose", [x], {"perm": [axis, *others]})
    flat = b.emit(b.tmp("slices", quant_of="input"), "layout.reshape", [x], {"shape": [rows, width], "axis": 0,
                                                                              "rank": rank})
    values, index = b.tmp("top_values"), b.tmp("top_index")
    b.body.append(Call([values, index], "algo.top_k", [flat], {"k": k, "axis": 1}, comment=b.case["kernel"]))
    offset: str | None = None
    inner = width
    for d in others:
        inner //= shape[d]
        coord = index if inner == 1 else b.emit(b.tmp("div"), "math.div", [index, Expr(str(inner))])
        if shape[d] != width // inner or d != others[0]:
            coord = b.emit(b.tmp("coord"), "math.mod", [coord, Expr(str(shape[d]))])
        term = coord if strides[d] == 1 else b.emit(b.tmp("term"), "math.mul", [coord, Expr(str(strides[d]))])
        offset = term if offset is None else b.emit(b.tmp("offset"), "math.add", [offset, term])
    if axis >= 0:
        base = b.names("row_offset")
        b.constants.append(TensorDecl(base, "int", [rows, 1], value=[i * strides[axis] for i in range(rows)]))
        offset = b.emit(b.tmp("offset"), "math.add", [offset, base]) if offset else base
    out = b.output()
    b.body.append(Call([out], "layout.cast", [offset], type_args=["real"], comment="memory offsets (sa32)"))
    return out


def _transpose_conv(b: _Builder) -> str:
    """mli_krn_transpose_conv2d: nn.deconv, whose NXC filter is [in, h, w, out] (the deconvolution's first
    filter dimension is its input's channels): HWCN weights are stored transposed to that on the host."""
    w = b.data("weights")  # [h, w, in, out]
    filt = b.variable("weights", np.transpose(w, (2, 0, 1, 3)), axis_map=lambda d: {2: 0, 0: 1, 1: 2, 3: 3}[d])
    bias = b.variable("bias", b.data("bias"))
    x = _batch(b, b.input("input"))
    y = b.tmp("deconv", quant_of="output")
    b.emit(y, "nn.deconv", [x, filt, bias], {
        "stride": [b.cfg("stride_height"), b.cfg("stride_width")],
        "padding": [b.cfg("padding_top"), b.cfg("padding_left"), b.cfg("padding_bottom"), b.cfg("padding_right")],
        "output_size": list(b.t("output")["shape"][:2]), "data_format": "NXC", "filter_format": "NXC"},
        comment=b.case["kernel"])
    act = b.tmp("activated", quant_of="output")
    b.relu(y, act)
    out = b.output()
    _unbatch(b, act, out)
    return out


def _rnn_dense(b: _Builder) -> str:
    """mli_krn_rnn_dense: the sum over the inputs of ``flat(input_i) · weights_i`` (NM weights, stored
    transposed as [M, N]) plus the bias. The per-input products are not quantized (MLI accumulates them
    in one accumulator); the graph's integer lowering needs a quantized result per nn.linear, so this runs
    with fake quantization (inputs and weights on their grids, the sum in fp32, the output on its grid)."""
    count = int(b.cfg("inputs_num"))
    total: str | None = None
    bias = b.variable("bias", b.data("bias"))
    for i in range(count):
        w = b.data(f"weights_{i}")
        n, m = w.shape
        filt = b.variable(f"weights_{i}", w.T, axis_map=lambda d: 1 - d)
        x = b.input(f"input_{i}")
        rows = b.emit(b.tmp(f"rows_{i}", quant_of=f"input_{i}"), "layout.reshape", [x], {
            "shape": [1, n], "axis": 0, "rank": len(b.t(f"input_{i}")["shape"])})
        y = b.emit(b.tmp(f"product_{i}"), "nn.linear", [rows, filt, bias] if i == 0 else [rows, filt])
        total = y if total is None else b.emit(b.tmp("sum"), "math.add", [total, y])
    out = b.output()
    b.emit(out, "layout.reshape", [total], {"shape": list(b.t("output")["shape"]), "axis": 0, "rank": 2},
           comment=b.case["kernel"])
    return out


def _gate_weights(b: _Builder, role: str) -> str:
    """Gate-stacked RNN weights (G, K, M) → a variable [G·M, K] (per gate transposed: nn.linear's filter),
    per-first-dimension quantization repeated over each gate's M rows."""
    w = b.data(role)
    g, k, m = w.shape
    values = np.ascontiguousarray(np.transpose(w, (0, 2, 1)).reshape(g * m, k))
    name = b.names(role)
    b.variables.append(TensorDecl(name, "real", [g * m, k]))
    b.weights[name] = values.astype(np.float32)
    spec = quant_spec(b.t(role)["quant"])
    if spec is not None and isinstance(spec["scale"], list):
        spec = {**spec, "scale": [sc for sc in spec["scale"] for _ in range(m)],
                "zero_point": [z for z in spec["zero_point"] for _ in range(m)], "channel_axis": 0}
    b.quantize_as(name, spec)
    return name


def _gate_bias(b: _Builder) -> str:
    bias = b.data("bias")
    name = b.names("bias")
    b.variables.append(TensorDecl(name, "real", [bias.size]))
    b.weights[name] = bias.reshape(-1).astype(np.float32)
    spec = quant_spec(b.t("bias")["quant"])
    if spec is not None and isinstance(spec["scale"], list):
        m = bias.shape[-1]
        spec = {**spec, "scale": [sc for sc in spec["scale"] for _ in range(m)],
                "zero_point": [z for z in spec["zero_point"] for _ in range(m)], "channel_axis": 0}
    b.quantize_as(name, spec)
    return name


def _recurrent(gates: int) -> Callable[[_Builder], str]:
    """mli_krn_lstm_cell (gates i, g, f, o) and mli_krn_gru_cell (z, r, u), unrolled over the sequence
    (direction FORWARD/BACKWARD, results LAST/ALL). The gate products are not quantized (MLI keeps them in
    its accumulator and LUT-based activations): fake quantization, inputs and the output on their grids."""
    def translate(b: _Builder) -> str:
        steps, n = b.t("input")["shape"]
        m = b.t("prev_out")["shape"][0]
        w_in, w_out, bias = _gate_weights(b, "weights_in"), _gate_weights(b, "weights_out"), _gate_bias(b)
        x_all = b.input("input")
        h = b.emit(b.tmp("h", quant_of="prev_out"), "layout.reshape", [b.input("prev_out")], {"shape": [1, m]})
        c = b.emit(b.tmp("c", quant_of="cell"), "layout.reshape", [b.input("cell")], {"shape": [1, m]}) \
            if gates == 4 else None
        order = range(steps) if b.cfg("direction") == "RNN_DIR_FORWARD" else range(steps - 1, -1, -1)
        act = b.cfg("act")
        outs = []

        def part(v: str, k: int, hint: str) -> str:
            return b.emit(b.tmp(hint), "layout.slice", [v], {"axes": [1], "begin": [k * m], "end": [(k + 1) * m]})

        for t in order:
            x = b.emit(b.tmp(f"x{t}"), "layout.slice", [x_all], {"axes": [0], "begin": [t], "end": [t + 1]})
            xw = b.emit(b.tmp("xw"), "nn.linear", [x, w_in, bias], comment=f"step {t}: input weights and bias")
            hw = b.emit(b.tmp("hw"), "nn.linear", [h, w_out], comment=f"step {t}: recurrent weights")
            if gates == 4:
                pre = b.emit(b.tmp("gates"), "math.add", [xw, hw])
                i_, g_, f_, o_ = (part(pre, k, nm) for k, nm in enumerate(("i", "g", "f", "o")))
                i_ = b.emit(b.tmp("input_gate"), "nn.sigmoid", [i_])
                g_ = b.emit(b.tmp("candidate"), "math.tanh", [g_])
                f_ = b.emit(b.tmp("forget_gate"), "nn.sigmoid", [f_])
                o_ = b.emit(b.tmp("output_gate"), "nn.sigmoid", [o_])
                kept = b.emit(b.tmp("kept"), "math.mul", [f_, c])
                new = b.emit(b.tmp("new"), "math.mul", [i_, g_])
                c = b.emit(b.tmp("cell"), "math.add", [kept, new])
                ca = c if act == "RNN_ACT_NONE" else b.emit(b.tmp("cell_act"), "math.tanh" if act == "RNN_ACT_TANH"
                                                            else "nn.sigmoid", [c])
                h = b.emit(b.tmp("h"), "math.mul", [o_, ca])
            else:
                xz, xr, xu = (part(xw, k, nm) for k, nm in enumerate(("xz", "xr", "xu")))
                hz, hr = part(hw, 0, "hz"), part(hw, 1, "hr")
                z = b.emit(b.tmp("update_gate"), "nn.sigmoid", [b.emit(b.tmp("z"), "math.add", [xz, hz])])
                r = b.emit(b.tmp("reset_gate"), "nn.sigmoid", [b.emit(b.tmp("r"), "math.add", [xr, hr])])
                rh = b.emit(b.tmp("reset_h"), "math.mul", [r, h])
                hu = part(b.emit(b.tmp("rw"), "nn.linear", [rh, w_out]), 2, "hu")
                u = b.emit(b.tmp("candidate"), "math.tanh", [b.emit(b.tmp("u"), "math.add", [xu, hu])])
                keep = b.emit(b.tmp("keep"), "math.mul", [z, h])
                rest = b.emit(b.tmp("one_minus_z"), "math.sub", [Expr("1.0"), z])
                h = b.emit(b.tmp("h"), "math.add", [keep, b.emit(b.tmp("take"), "math.mul", [rest, u])])
            outs.append(h)
        out = b.output()
        if b.cfg("results") == "RNN_OUT_LAST" or len(outs) == 1:
            b.emit(out, "math.iden", [outs[-1]], comment=b.case["kernel"])
        else:
            b.emit(out, "layout.concat", [outs], {"axis": 0}, comment=b.case["kernel"] + ", in processing order")
        return out
    return translate


TRANSLATE: dict[str, Callable[[_Builder], str]] = {
    "mli_krn_conv2d": _conv, "mli_krn_depthwise_conv": _conv, "mli_krn_group_conv2d": _conv,
    "mli_krn_fully_connected": _fully_connected,
    "mli_krn_maxpool": _pool("nn.max_pool"), "mli_krn_avepool": _pool("nn.avg_pool"),
    "mli_krn_relu": _relu, "mli_krn_leaky_relu": _leaky, "mli_krn_prelu": _prelu,
    "mli_krn_sigm": _unary("nn.sigmoid"), "mli_krn_tanh": _unary("math.tanh"),
    "mli_krn_softmax": _unary("nn.softmax", _axes), "mli_krn_l2_normalize": _unary("nn.l2_norm", _axes),
    "mli_krn_eltwise": _eltwise, "mli_krn_permute": _permute,
    "mli_hlp_convert_tensor": _convert, "mli_krn_data_movement": _move, "mli_krn_argmax": _argmax,
    "mli_krn_transpose_conv2d": _transpose_conv, "mli_krn_rnn_dense": _rnn_dense,
    "mli_krn_lstm_cell": _recurrent(4), "mli_krn_gru_cell": _recurrent(3),
}


def _validate(case: dict[str, Any], loc: Locator) -> None:
    group = field(case, ["kernel_group"], loc, str, "the MLI kernel group")
    field(case, ["kernel"], loc, str, "the MLI function name")
    field(case, ["config"], loc, dict, "the kernel configuration (an object)")
    tensors = field(case, ["tensors"], loc, dict, "the tensors by role (an object)")
    if "output" not in tensors:
        raise loc.error(["tensors"], "missing the 'output' tensor")
    for role, t in tensors.items():
        where = ["tensors", role]
        if not isinstance(t, dict):
            raise loc.error(where, "a tensor must be an object")
        shape = field(t, [*where, "shape"], loc, list, "the tensor's shape (a list)")
        if any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape):
            raise loc.error([*where, "shape"], "extents must be positive integers")
        data = field(t, [*where, "data"], loc, list, "the float values (a flat list)")
        if len(data) != math.prod(shape):
            raise loc.error([*where, "data"], f"holds {len(data)} values; shape {shape} needs {math.prod(shape)}")
        q = field(t, [*where, "quant"], loc, dict, "the quantization (an object)")
        kind = field(q, [*where, "quant", "type"], loc, str, "the element type")
        if kind not in ("fp32", *_BITS):
            raise loc.error([*where, "quant", "type"], f"'{kind}' is not fp32, fx8, fx16, sa8 or sa32")
        if kind in ("fx8", "fx16"):
            field(q, [*where, "quant", "frac_bits"], loc, int, "the number of fractional bits")
        elif kind in ("sa8", "sa32"):
            for key in ("scale_int", "scale_frac_bits", "zero_point_int"):
                values = field(q, [*where, "quant", key], loc, list, f"'{key}' (a list of integers)")
                if not values or any(not isinstance(v, int) or isinstance(v, bool) for v in values):
                    raise loc.error([*where, "quant", key], "must be a non-empty list of integers")
    if group in NOT_TRANSLATED:
        raise loc.error(["kernel_group"], f"{group}: {NOT_TRANSLATED[group]}", code="E0903")
    if group not in TRANSLATE:
        raise loc.error(["kernel_group"], f"'{group}' is not an MLI 2.0 kernel group of the conformance set")


def build(case: dict[str, Any], loc: Locator | None = None) -> ModelFolder:
    loc = loc or Locator("<mli case>")
    if not isinstance(case, dict):
        raise loc.error([], "a case must be a JSON object", code="E0900")
    _validate(case, loc)
    b = _Builder(case, loc)
    out = TRANSLATE[case["kernel_group"]](b)
    output = TensorDecl(out, "real", list(b.t("output")["shape"]))
    graph = GraphText("Main", b.inputs, [output], b.body, variables=b.variables, constants=b.constants,
                      quantize=b.quantize,
                      comment=f"embARC MLI 2.0 case '{case.get('case', '?')}' ({case['kernel']}), written by "
                      "skriptnd.targets.mli.to_sknd")
    return ModelFolder(graph, b.weights)


def to_sknd(case: dict[str, Any], out_dir: Path | str, *, locator: Locator | None = None,
            overwrite: bool = False) -> Path:
    """Write the SkriptND model folder of one MLI case's JSON to ``out_dir`` (atomically) and return it.
    Raises :class:`DiagnosticError` (E0900/E0901, E0903 for a kernel group without a translation)."""
    return write_model(build(case, locator), out_dir, overwrite=overwrite)
