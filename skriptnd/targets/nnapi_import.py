"""One NNAPI 1.0 model (a CTS conformance vector's JSON) → a SkriptND model folder.

:func:`to_sknd` writes ``main.sknd`` (graph ``Main``) through :mod:`skriptnd.interop.writer`: standard
operators only, in NNAPI's own layouts (NHWC activations, ``nn.conv{data_format='NXC',
filter_format='NXC'}`` for CONV_2D's ``[out, h, w, in]`` filters, pools over ``axes=[1, 2]``), so no
layout transposes are needed. Graph inputs and outputs keep the vector's operand names (sanitized only
where they are not identifiers); tensor parameters become ``@variable`` s with NNEF tensor files beside
``main.sknd``, scalar parameters become attribute values.

**Quantization.** A TENSOR_QUANT8_ASYMM operand ``t`` (scale ``s``, zero point ``z``) gets the @quantize
entry ``quant.zero_point_linear_quantize{zero_point=z, scale=s, bits=8, signed=false}``; a quantized
bias (TENSOR_INT32 with a scale) ``{zero_point=0, scale=s, bits=32}``. The graph's tensors are real
(``s * (q - z)``): **quantized graph inputs take the real-valued tensor**, which their quantize operator
maps back to exactly the vector's integers (``sknd run`` also takes an integer array as the quantized
codes in the signed storage encoding, ``q - 128``); quantized outputs come out real, on their grid
``s * (q - z)``. Quantized parameters are stored as their real values. An operation with a fused
activation writes an intermediate tensor with the output's quantization, then the activation (a clamp on
that grid, exact on the integers).

Padding codes (SAME/VALID) are turned into explicit paddings as NNAPI computes them (``total =
max((out - 1) * stride + filter - in, 0)``, the smaller half first). LSH_PROJECTION and
HASHTABLE_LOOKUP (hashing, key search) are not expressible in the standard library: E0902 at the
operation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..diagnostics import DiagnosticError
from ..interop.writer import Call, Expr, GraphText, ModelFolder, Names, Quantize, TensorDecl, write_model
from .vectors import Locator, field

ROLES = ("input", "output", "parameter", "internal")
TYPES = ("TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM", "TENSOR_INT32", "INT32", "FLOAT32")

#: NNAPI operations the stdlib cannot express, with the reason (the target table shows it too).
UNSUPPORTED = {
    "LSH_PROJECTION": "hashes inputs with a seeded farmhash Fingerprint64 (bit-exact on the serialized bytes); "
                      "the standard library has no hash function",
    "HASHTABLE_LOOKUP": "looks keys up in a sorted key table by binary search (a data-dependent search, with "
                        "a 'hits' output); the standard library has no search or key-matching operator",
}


class _Builder:
    """The graph under construction: names, declarations, statements and @quantize entries."""

    def __init__(self, model: dict[str, Any], loc: Locator) -> None:
        self.model, self.loc = model, loc
        self.names = Names(taken=["Main"])
        self.operands: dict[str, dict[str, Any]] = {}
        self.index: dict[str, int] = {}
        self.sk: dict[str, str] = {}  # NNAPI operand name -> SkriptND tensor name
        self.inputs: list[TensorDecl] = []
        self.outputs: list[TensorDecl] = []
        self.variables: list[TensorDecl] = []
        self.weights: dict[str, np.ndarray] = {}
        self.body: list[Call] = []
        self.quantize: list[Quantize] = []
        self._n = 0

    # -- operands -----------------------------------------------------------------------------------

    def operand(self, name: str, where: list[Any]) -> dict[str, Any]:
        if name not in self.operands:
            raise self.loc.error(where, f"names operand '{name}', which 'operands' does not declare")
        return self.operands[name]

    def qspec(self, o: dict[str, Any]) -> dict[str, Any] | None:
        """The @quantize attributes of an operand (None when it is not quantized)."""
        if o["type"] == "TENSOR_QUANT8_ASYMM":
            return {"zero_point": int(o["zero_point"]), "scale": float(np.float32(o["scale"])), "bits": 8,
                    "signed": False, "channel_axis": 0}
        if o["type"] == "TENSOR_INT32" and float(o.get("scale", 0.0)) > 0.0 and o["role"] in ("parameter", "input"):
            return {"zero_point": 0, "scale": float(np.float32(o["scale"])), "bits": 32, "channel_axis": 0}
        return None

    def quantize_as(self, name: str, o: dict[str, Any]) -> None:
        spec = self.qspec(o)
        if spec is not None:
            self.quantize.append(Quantize(name, "quant.zero_point_linear_quantize", spec))

    def real_values(self, o: dict[str, Any]) -> np.ndarray:
        values = np.asarray(o["value"], dtype=np.float64).reshape(o["dims"])
        if o["type"] == "TENSOR_QUANT8_ASYMM":
            return (np.float32(o["scale"]) * (values - int(o["zero_point"]))).astype(np.float32)
        if self.qspec(o) is not None:  # a quantized int32 bias
            return (np.float32(o["scale"]) * values).astype(np.float32)
        return values.astype(np.float32 if o["type"] == "TENSOR_FLOAT32" else np.int64)

    def tensor(self, name: str, where: list[Any], transform: Callable[[np.ndarray], np.ndarray] | None = None
               ) -> str:
        """The SkriptND tensor holding operand ``name``; a tensor parameter is declared as a variable on
        first use (``transform`` re-lays out its values, e.g. a depthwise filter)."""
        o = self.operand(name, where)
        if o["dims"] == [] and o["role"] == "parameter":
            raise self.loc.error(where, f"operand '{name}' is a scalar; a tensor is needed here")
        key = name if transform is None else f"{name}#t"
        if key in self.sk:
            return self.sk[key]
        if o["role"] != "parameter":
            raise self.loc.error(where, f"operand '{name}' is used before an operation computes it")
        values = self.real_values(o)
        if transform is not None:
            values = transform(values)
        sk = self.names(name)
        dtype = "int" if values.dtype.kind == "i" else "real"
        self.variables.append(TensorDecl(sk, dtype, list(values.shape)))
        self.weights[sk] = values
        self.quantize_as(sk, o)
        self.sk[key] = sk
        return sk

    def scalar(self, name: str, where: list[Any], kind: str = "INT32") -> Any:
        o = self.operand(name, where)
        if o["role"] != "parameter" or "value" not in o:
            raise self.loc.error(where, f"operand '{name}' must be a constant {kind} parameter (NNAPI 1.0 "
                                 "takes it as a compile-time value)")
        if o["type"] != kind:
            raise self.loc.error(where, f"operand '{name}' must be {kind}, not {o['type']}")
        value = o["value"][0]
        return int(value) if kind == "INT32" else float(np.float32(value))

    def ints(self, name: str, where: list[Any]) -> list[int]:
        o = self.operand(name, where)
        if o["role"] != "parameter" or o["type"] != "TENSOR_INT32":
            raise self.loc.error(where, f"operand '{name}' must be a constant TENSOR_INT32 parameter")
        return [int(v) for v in o["value"]]

    def tmp(self, hint: str, like: dict[str, Any] | None = None) -> str:
        self._n += 1
        name = self.names(f"{hint}_{self._n}")
        if like is not None:
            self.quantize_as(name, like)
        return name

    def define(self, operand: str, where: list[Any]) -> str:
        """The SkriptND name an operation's output operand gets."""
        o = self.operand(operand, where)
        if operand in self.sk:
            raise self.loc.error(where, f"operand '{operand}' is computed twice")
        if o["role"] in ("input", "parameter"):
            raise self.loc.error(where, f"operand '{operand}' is a model {o['role']}; an operation cannot compute it")
        sk = self.names(operand)
        self.sk[operand] = sk
        if o["role"] == "internal":
            self.quantize_as(sk, o)
        return sk

    def emit(self, out: str | list[str], op: str, args: list[Any], attribs: dict[str, Any] | None = None,
             comment: str | None = None) -> None:
        self.body.append(Call([out] if isinstance(out, str) else out, op, args, attribs or {}, comment=comment))

    def activated(self, code: int, out_operand: str, where: list[Any]) -> tuple[str, Callable[[str], None]]:
        """The name the operation itself should write, and a finisher that applies the fused activation
        ``code`` into the output operand."""
        o = self.operand(out_operand, where)
        out = self.define(out_operand, where)
        if code == 0:
            return out, lambda _: None
        if code not in (1, 2, 3):
            raise self.loc.error(where, f"fused activation code {code} is not NONE (0), RELU (1), RELU1 (2) or "
                                 "RELU6 (3)")
        pre = self.tmp(f"{out}_pre", like=o)

        def finish(src: str) -> None:
            if code == 1:
                self.emit(out, "nn.relu", [src], comment="fused RELU")
            elif code == 2:
                self.emit(out, "math.clamp", [src, Expr("-1.0"), Expr("1.0")], comment="fused RELU1")
            else:
                self.emit(out, "nn.relu", [src], {"max": 6.0}, comment="fused RELU6")
        return pre, finish


def _same_padding(size: int, out: int, stride: int, kernel: int) -> tuple[int, int]:
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _geometry(b: _Builder, op: dict[str, Any], where: list[Any], explicit: int, kernel: tuple[int, int],
              x: dict[str, Any], y: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """``(padding [top, left, bottom, right], stride [h, w], next input index)`` of a conv/pool
    operation whose explicit form has ``explicit`` inputs."""
    ins = op["inputs"]
    conv = op["op"] in ("CONV_2D", "DEPTHWISE_CONV_2D")
    if len(ins) == explicit:
        p0 = 3 if conv else 1  # [left, right, top, bottom], then stride w, h
        left, right, top, bottom = (b.scalar(ins[i], [*where, "inputs", i]) for i in range(p0, p0 + 4))
        first = p0 + 4
        sw, sh = b.scalar(ins[first], [*where, "inputs", first]), b.scalar(ins[first + 1], [*where, "inputs", first + 1])
        return [top, left, bottom, right], [sh, sw], first + 2
    first = 3 if conv else 1
    code = b.scalar(ins[first], [*where, "inputs", first])
    sw, sh = b.scalar(ins[first + 1], [*where, "inputs", first + 1]), b.scalar(ins[first + 2],
                                                                                 [*where, "inputs", first + 2])
    if code == 2:
        return [0, 0, 0, 0], [sh, sw], first + 3
    if code != 1:
        raise b.loc.error([*where, "inputs", first], f"padding code {code} is not SAME (1) or VALID (2)")
    kh, kw = kernel
    top, bottom = _same_padding(x["dims"][1], y["dims"][1], sh, kh)
    left, right = _same_padding(x["dims"][2], y["dims"][2], sw, kw)
    return [top, left, bottom, right], [sh, sw], first + 3


def _arity(b: _Builder, op: dict[str, Any], where: list[Any], counts: tuple[int, ...], outs: int = 1) -> None:
    if len(op["inputs"]) not in counts:
        raise b.loc.error([*where, "inputs"], f"{op['op']} takes {' or '.join(map(str, counts))} inputs, "
                          f"got {len(op['inputs'])}")
    if len(op["outputs"]) != outs:
        raise b.loc.error([*where, "outputs"], f"{op['op']} has {outs} output(s), got {len(op['outputs'])}")


def _depthwise_filter(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(v, (3, 1, 2, 0)))


def _conv(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    depthwise = op["op"] == "DEPTHWISE_CONV_2D"
    _arity(b, op, where, (11, 8) if depthwise else (10, 7))
    ins = op["inputs"]
    x, f = b.operand(ins[0], [*where, "inputs", 0]), b.operand(ins[1], [*where, "inputs", 1])
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    if len(f["dims"]) != 4 or len(x["dims"]) != 4:
        raise b.loc.error([*where, "inputs", 1], f"{op['op']} needs a 4-D input and filter")
    kh, kw = f["dims"][1], f["dims"][2]
    pads, stride, nxt = _geometry(b, op, where, 11 if depthwise else 10, (kh, kw), x, y)
    attribs: dict[str, Any] = {"stride": stride, "padding": pads, "data_format": "NXC", "filter_format": "NXC"}
    if depthwise:
        multiplier = b.scalar(ins[nxt], [*where, "inputs", nxt])
        nxt += 1
        channels = x["dims"][3]
        if f["dims"][3] != channels * multiplier:
            raise b.loc.error([*where, "inputs", 1], f"depthwise filter has {f['dims'][3]} output channels, not "
                              f"input channels × depth multiplier = {channels * multiplier}")
        attribs["groups"] = channels
        if f["role"] == "parameter":  # the variable is stored [C*M, h, w, 1] (NNAPI: [1, h, w, C*M])
            filt = b.tensor(ins[1], [*where, "inputs", 1], transform=_depthwise_filter)
        else:
            filt = b.tmp("filter_nxc")
            b.emit(filt, "layout.transpose", [b.tensor(ins[1], [*where, "inputs", 1])], {"perm": [3, 1, 2, 0]},
                   comment="[1, h, w, C*M] -> [C*M, h, w, 1]")
    else:
        filt = b.tensor(ins[1], [*where, "inputs", 1])
    act = b.scalar(ins[nxt], [*where, "inputs", nxt])
    xs, bias = b.tensor(ins[0], [*where, "inputs", 0]), b.tensor(ins[2], [*where, "inputs", 2])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, "nn.conv", [xs, filt, bias], attribs, comment=op["op"])
    finish(pre)


def _pool(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (10, 7))
    ins = op["inputs"]
    x = b.operand(ins[0], [*where, "inputs", 0])
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    base = 7 if len(ins) == 10 else 4  # filter width, height, then the activation
    fw, fh = b.scalar(ins[base], [*where, "inputs", base]), b.scalar(ins[base + 1], [*where, "inputs", base + 1])
    pads, stride, _ = _geometry(b, op, where, 10, (fh, fw), x, y)
    act = b.scalar(ins[base + 2], [*where, "inputs", base + 2])
    name = {"AVERAGE_POOL_2D": "nn.avg_pool", "MAX_POOL_2D": "nn.max_pool", "L2_POOL_2D": "nn.rms_pool"}[op["op"]]
    attribs: dict[str, Any] = {"axes": [1, 2], "size": [fh, fw], "stride": stride, "padding": pads}
    xs = b.tensor(ins[0], [*where, "inputs", 0])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, name, [xs], attribs, comment=op["op"] + (" (padding not counted)" if name != "nn.max_pool" else ""))
    finish(pre)


def _eltwise(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (3,))
    ins = op["inputs"]
    a, c = b.tensor(ins[0], [*where, "inputs", 0]), b.tensor(ins[1], [*where, "inputs", 1])
    act = b.scalar(ins[2], [*where, "inputs", 2])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, "math.add" if op["op"] == "ADD" else "math.mul", [a, c], comment=op["op"])
    finish(pre)


def _unary(stdlib: str, attribs: dict[str, Any] | None = None) -> Callable[[_Builder, dict[str, Any], list[Any]], None]:
    def translate(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
        _arity(b, op, where, (1,))
        x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
        out = b.define(op["outputs"][0], [*where, "outputs", 0])
        if stdlib == "math.clamp":
            b.emit(out, stdlib, [x, Expr("-1.0"), Expr("1.0")], comment=op["op"])
        else:
            b.emit(out, stdlib, [x], attribs, comment=op["op"])
    return translate


def _concat(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    ins = op["inputs"]
    if len(ins) < 2:
        raise b.loc.error([*where, "inputs"], "CONCATENATION takes at least one tensor and the axis")
    axis = b.scalar(ins[-1], [*where, "inputs", len(ins) - 1])
    parts = [b.tensor(n, [*where, "inputs", i]) for i, n in enumerate(ins[:-1])]
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "layout.concat", [parts], {"axis": axis}, comment="CONCATENATION")


def _block(name: str) -> Callable[[_Builder, dict[str, Any], list[Any]], None]:
    def translate(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
        _arity(b, op, where, (2,))
        block = b.scalar(op["inputs"][1], [*where, "inputs", 1])
        x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
        out = b.define(op["outputs"][0], [*where, "outputs", 0])
        b.emit(out, name, [x], {"block_size": [block, block], "data_format": "NXC"}, comment=op["op"])
    return translate


def _fully_connected(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (4,))
    ins = op["inputs"]
    x, w = b.operand(ins[0], [*where, "inputs", 0]), b.operand(ins[1], [*where, "inputs", 1])
    units, depth = w["dims"]
    size = math.prod(x["dims"])
    if size % depth:
        raise b.loc.error([*where, "inputs", 0], f"input of {size} values is not a whole number of rows of "
                          f"{depth} (the weights' input size)")
    xs = b.tensor(ins[0], [*where, "inputs", 0])
    if x["dims"] != [size // depth, depth]:
        flat = b.tmp("flat", like=x)
        b.emit(flat, "layout.reshape", [xs], {"shape": [size // depth, depth]}, comment="FULLY_CONNECTED input rows")
        xs = flat
    ws, bias = b.tensor(ins[1], [*where, "inputs", 1]), b.tensor(ins[2], [*where, "inputs", 2])
    act = b.scalar(ins[3], [*where, "inputs", 3])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, "nn.linear", [xs, ws, bias], comment="FULLY_CONNECTED")
    finish(pre)


def _reshape(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (2,))
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    s = b.operand(op["inputs"][1], [*where, "inputs", 1])
    if s["role"] == "parameter":
        shape = b.ints(op["inputs"][1], [*where, "inputs", 1])
        if len(shape) != len(y["dims"]) or any(d not in (-1, e) for d, e in zip(shape, y["dims"], strict=True)):
            raise b.loc.error([*where, "inputs", 1], f"shape {shape} does not give the output's dims {y['dims']}")
    elif s["dims"] != [len(y["dims"])]:
        raise b.loc.error([*where, "inputs", 1], f"the shape input must hold {len(y['dims'])} values (the "
                          "output's rank)")
    # a shape given as a graph input stays an input; the graph's shapes are static, so the reshape uses the
    # output's declared dims (the value fed must agree with them)
    x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "layout.reshape", [x], {"shape": list(y["dims"])}, comment="RESHAPE")


def _softmax(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (2,))
    x = b.operand(op["inputs"][0], [*where, "inputs", 0])
    beta = b.scalar(op["inputs"][1], [*where, "inputs", 1], "FLOAT32")
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    if beta != 1.0:
        scaled = b.tmp("scaled")
        b.emit(scaled, "math.mul", [xs, Expr(repr(beta))], comment="SOFTMAX beta")
        xs = scaled
    b.emit(out, "nn.softmax", [xs], {"axes": [len(x["dims"]) - 1]}, comment="SOFTMAX")


def _l2_norm(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (1,))
    x = b.operand(op["inputs"][0], [*where, "inputs", 0])
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "nn.l2_norm", [xs], {"axes": [len(x["dims"]) - 1]}, comment="L2_NORMALIZATION")


def _lrn(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (5,))
    ins = op["inputs"]
    radius = b.scalar(ins[1], [*where, "inputs", 1])
    bias, alpha, beta = (b.scalar(ins[i], [*where, "inputs", i], "FLOAT32") for i in (2, 3, 4))
    x = b.operand(ins[0], [*where, "inputs", 0])
    xs = b.tensor(ins[0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    size = 2 * radius + 1  # the stdlib divides the window's sum of squares by size: alpha scales up
    b.emit(out, "nn.local_response_norm", [xs], {"axes": [len(x["dims"]) - 1], "size": [size],
                                                 "alpha": float(alpha) * size, "beta": float(beta),
                                                 "bias": float(bias)}, comment="LOCAL_RESPONSE_NORMALIZATION")


def _resize(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (3,))
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    for i in (1, 2):
        b.scalar(op["inputs"][i], [*where, "inputs", i])
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "image.linear_resize", [xs], {"axes": [1, 2], "size": y["dims"][1:3], "antialias": False,
                                              "coordinate_transform": "ASYMMETRIC"}, comment="RESIZE_BILINEAR")


def _embedding(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (2,))
    lookups, values = b.tensor(op["inputs"][0], [*where, "inputs", 0]), b.tensor(op["inputs"][1],
                                                                                  [*where, "inputs", 1])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "layout.gather", [values, lookups], {"axis": 0}, comment="EMBEDDING_LOOKUP")


def _rnn(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (6,), outs=2)
    ins = op["inputs"]
    x, w, r, bias, h = (b.tensor(ins[i], [*where, "inputs", i]) for i in range(5))
    act = b.scalar(ins[5], [*where, "inputs", 5])
    state_out, output = op["outputs"]
    xw, hr, total = b.tmp("input_gate"), b.tmp("recurrent_gate"), b.tmp("gates")
    b.emit(xw, "nn.linear", [x, w, bias], comment="RNN: input weights and bias")
    b.emit(hr, "nn.linear", [h, r], comment="RNN: recurrent weights")
    b.emit(total, "math.add", [xw, hr])
    pre, finish = b.activated(act, output, [*where, "outputs", 1])
    b.emit(pre, "math.iden", [total])
    finish(pre)
    state = b.define(state_out, [*where, "outputs", 0])
    b.emit(state, "math.iden", [b.sk[output]], comment="RNN: the new hidden state is the output")


def _dequantize(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    _arity(b, op, where, (1,))
    x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "math.iden", [x], comment="DEQUANTIZE: the real value s * (q - z) of a quantized tensor")


def _unsupported(b: _Builder, op: dict[str, Any], where: list[Any]) -> None:
    raise b.loc.error([*where, "op"], f"{op['op']} is not expressible in the standard library: "
                      f"{UNSUPPORTED[op['op']]}", code="E0902")


TRANSLATE: dict[str, Callable[[_Builder, dict[str, Any], list[Any]], None]] = {
    "ADD": _eltwise, "MUL": _eltwise,
    "AVERAGE_POOL_2D": _pool, "MAX_POOL_2D": _pool, "L2_POOL_2D": _pool,
    "CONCATENATION": _concat,
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv,
    "DEPTH_TO_SPACE": _block("layout.depth_to_space"), "SPACE_TO_DEPTH": _block("layout.space_to_depth"),
    "DEQUANTIZE": _dequantize,
    "EMBEDDING_LOOKUP": _embedding,
    "FLOOR": _unary("math.floor"),
    "FULLY_CONNECTED": _fully_connected,
    "L2_NORMALIZATION": _l2_norm,
    "LOCAL_RESPONSE_NORMALIZATION": _lrn,
    "LOGISTIC": _unary("nn.sigmoid"),
    "TANH": _unary("math.tanh"),
    "RELU": _unary("nn.relu"), "RELU1": _unary("math.clamp"), "RELU6": _unary("nn.relu", {"max": 6.0}),
    "RESHAPE": _reshape,
    "RESIZE_BILINEAR": _resize,
    "RNN": _rnn,
    "SOFTMAX": _softmax,
    "LSH_PROJECTION": _unsupported, "HASHTABLE_LOOKUP": _unsupported,
}


def _validate(model: dict[str, Any], loc: Locator) -> None:
    """The schema of the README (fields and their kinds), each problem located at its field."""
    operands = field(model, ["operands"], loc, list, "a list of operands")
    seen: set[str] = set()
    for i, o in enumerate(operands):
        where: list[Any] = ["operands", i]
        if not isinstance(o, dict):
            raise loc.error(where, "an operand must be an object")
        name = field(o, [*where, "name"], loc, str, "the operand's name (a string)")
        if name in seen:
            raise loc.error([*where, "name"], f"operand '{name}' is declared twice")
        seen.add(name)
        role = field(o, [*where, "role"], loc, str, "a role")
        if role not in ROLES:
            raise loc.error([*where, "role"], f"role '{role}' is not one of {', '.join(ROLES)}")
        kind = field(o, [*where, "type"], loc, str, "an operand type")
        if kind not in TYPES:
            raise loc.error([*where, "type"], f"type '{kind}' is not one of {', '.join(TYPES)}")
        dims = field(o, [*where, "dims"], loc, list, "a list of dimensions")
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in dims):
            raise loc.error([*where, "dims"], "dimensions must be non-negative integers (0: an omitted optional "
                            "operand)")
        for key in ("scale", "zero_point"):
            if key in o and (not isinstance(o[key], int | float) or isinstance(o[key], bool)):
                raise loc.error([*where, key], f"must be a number, got {type(o[key]).__name__}")
        if kind == "TENSOR_QUANT8_ASYMM" and not float(o.get("scale", 0)) > 0:
            raise loc.error([*where, "scale"], "a TENSOR_QUANT8_ASYMM operand needs a positive scale")
        if kind == "TENSOR_QUANT8_ASYMM" and not 0 <= int(o.get("zero_point", 0)) <= 255:
            raise loc.error([*where, "zero_point"], "a TENSOR_QUANT8_ASYMM zero point must be in [0, 255]")
        if role == "parameter":
            value = field(o, [*where, "value"], loc, list, "the parameter's values (a flat list)")
            if len(value) != math.prod(dims):
                raise loc.error([*where, "value"], f"holds {len(value)} values; dims {dims} need {math.prod(dims)}")
            if any(not isinstance(v, int | float) or isinstance(v, bool) for v in value):
                raise loc.error([*where, "value"], "values must be numbers")
    operations = field(model, ["operations"], loc, list, "a list of operations")
    for i, op in enumerate(operations):
        where = ["operations", i]
        if not isinstance(op, dict):
            raise loc.error(where, "an operation must be an object")
        name = field(op, [*where, "op"], loc, str, "the NNAPI operation's name")
        if name not in TRANSLATE:
            raise loc.error([*where, "op"], f"'{name}' is not an NNAPI 1.0 operation")
        for key in ("inputs", "outputs"):
            names = field(op, [*where, key], loc, list, f"a list of operand names ({key})")
            for j, n in enumerate(names):
                if not isinstance(n, str) or n not in seen:
                    raise loc.error([*where, key, j], f"'{n}' is not a declared operand")
    for key in ("model_inputs", "model_outputs"):
        names = field(model, [key], loc, list, "a list of operand names")
        for j, n in enumerate(names):
            if not isinstance(n, str) or n not in seen:
                raise loc.error([key, j], f"'{n}' is not a declared operand")


def build(model: dict[str, Any], loc: Locator | None = None) -> ModelFolder:
    """The model folder (text and weights) of one NNAPI vector file's model; E0901/E0902 diagnostics."""
    loc = loc or Locator(f"<{model.get('name', 'nnapi model') if isinstance(model, dict) else 'nnapi model'}>")
    if not isinstance(model, dict):
        raise loc.error([], "a vector must be a JSON object", code="E0900")
    _validate(model, loc)
    b = _Builder(model, loc)
    for i, o in enumerate(model["operands"]):
        b.operands[o["name"]] = o
        b.index[o["name"]] = i
    for j, name in enumerate(model["model_inputs"]):
        o = b.operands[name]
        if o["dims"] == []:
            raise loc.error(["model_inputs", j], f"input '{name}' is a scalar; NNAPI 1.0 scalars are parameters")
        sk = b.names(name)
        b.sk[name] = sk
        dtype = "int" if o["type"] in ("TENSOR_INT32", "INT32") and b.qspec(o) is None else "real"
        b.inputs.append(TensorDecl(sk, dtype, list(o["dims"])))
        b.quantize_as(sk, o)
    for i, op in enumerate(model["operations"]):
        TRANSLATE[op["op"]](b, op, ["operations", i])
    for j, name in enumerate(model["model_outputs"]):
        if name not in b.sk:
            raise loc.error(["model_outputs", j], f"output '{name}' is not computed by any operation")
        o = b.operands[name]
        sk = b.sk[name]
        if o["role"] == "output" or name not in [d.name for d in b.outputs]:
            b.quantize_as(sk, o) if o["role"] == "output" else None
        dtype = "int" if o["type"] in ("TENSOR_INT32", "INT32") else "real"
        b.outputs.append(TensorDecl(sk, dtype, list(o["dims"])))
    name = model.get("name", "model")
    graph = GraphText("Main", b.inputs, b.outputs, b.body, variables=b.variables, quantize=b.quantize,
                      comment=f"NNAPI 1.0 model '{name}' ({model.get('source', 'CTS spec')}), written by "
                      "skriptnd.targets.nnapi.to_sknd")
    return ModelFolder(graph, b.weights)


def to_sknd(model: dict[str, Any], out_dir: Path | str, *, locator: Locator | None = None,
            overwrite: bool = False) -> Path:
    """Write the SkriptND model folder of one NNAPI vector file's JSON ``model`` to ``out_dir``
    (atomically, through :func:`skriptnd.interop.writer.write_model`) and return its path. Raises
    :class:`DiagnosticError` (E0900–E0902, located in the file when ``locator`` knows it)."""
    return write_model(build(model, locator), out_dir, overwrite=overwrite)


__all__ = ["TRANSLATE", "UNSUPPORTED", "build", "to_sknd", "DiagnosticError"]
