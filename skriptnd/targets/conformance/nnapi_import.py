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
max((out - 1) * stride + filter - in, 0)``, the smaller half first). LSH_PROJECTION
is not expressible in the standard library (a seeded farmhash of the raw bytes): E0902 at the operation.
HASHTABLE_LOOKUP compares every lookup with every key instead of NNAPI's binary search (the same result
for the unique keys NNAPI requires).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.writer import (
    Expr,
    GraphText,
    ModelFolder,
    TensorDecl,
    write_model,
)
from skriptnd.targets.conformance.nnapi_builder import Builder, arity, geometry
from skriptnd.targets.conformance.vectors import Locator, field

ROLES = ("input", "output", "parameter", "internal")
TYPES = ("TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM", "TENSOR_INT32", "INT32", "FLOAT32")

#: NNAPI operations the stdlib cannot express, with the reason (the target table shows it too).
UNSUPPORTED = {
    "LSH_PROJECTION": "hashes inputs with a seeded farmhash Fingerprint64 (bit-exact on the serialized bytes); "
                      "the standard library has no hash function",
}


def _depthwise_filter(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(v, (3, 1, 2, 0)))


def _conv(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    depthwise = op["op"] == "DEPTHWISE_CONV_2D"
    arity(b, op, where, (11, 8) if depthwise else (10, 7))
    ins = op["inputs"]
    x, f = b.operand(ins[0], [*where, "inputs", 0]), b.operand(ins[1], [*where, "inputs", 1])
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    if len(f["dims"]) != 4 or len(x["dims"]) != 4:
        raise b.loc.error([*where, "inputs", 1], f"{op['op']} needs a 4-D input and filter")
    kh, kw = f["dims"][1], f["dims"][2]
    pads, stride, nxt = geometry(b, op, where, 11 if depthwise else 10, (kh, kw), x, y)
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


def _pool(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (10, 7))
    ins = op["inputs"]
    x = b.operand(ins[0], [*where, "inputs", 0])
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    base = 7 if len(ins) == 10 else 4  # filter width, height, then the activation
    fw, fh = b.scalar(ins[base], [*where, "inputs", base]), b.scalar(ins[base + 1], [*where, "inputs", base + 1])
    pads, stride, _ = geometry(b, op, where, 10, (fh, fw), x, y)
    act = b.scalar(ins[base + 2], [*where, "inputs", base + 2])
    name = {"AVERAGE_POOL_2D": "nn.avg_pool", "MAX_POOL_2D": "nn.max_pool", "L2_POOL_2D": "nn.rms_pool"}[op["op"]]
    attribs: dict[str, Any] = {"axes": [1, 2], "size": [fh, fw], "stride": stride, "padding": pads}
    xs = b.tensor(ins[0], [*where, "inputs", 0])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, name, [xs], attribs, comment=op["op"] + (" (padding not counted)" if name != "nn.max_pool" else ""))
    finish(pre)


def _eltwise(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (3,))
    ins = op["inputs"]
    a, c = b.tensor(ins[0], [*where, "inputs", 0]), b.tensor(ins[1], [*where, "inputs", 1])
    act = b.scalar(ins[2], [*where, "inputs", 2])
    pre, finish = b.activated(act, op["outputs"][0], [*where, "outputs", 0])
    b.emit(pre, "math.add" if op["op"] == "ADD" else "math.mul", [a, c], comment=op["op"])
    finish(pre)


def _unary(stdlib: str, attribs: dict[str, Any] | None = None) -> Callable[[Builder, dict[str, Any], list[Any]], None]:
    def translate(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
        arity(b, op, where, (1,))
        x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
        out = b.define(op["outputs"][0], [*where, "outputs", 0])
        if stdlib == "math.clamp":
            b.emit(out, stdlib, [x, Expr("-1.0"), Expr("1.0")], comment=op["op"])
        else:
            b.emit(out, stdlib, [x], attribs, comment=op["op"])
    return translate


def _concat(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    ins = op["inputs"]
    if len(ins) < 2:
        raise b.loc.error([*where, "inputs"], "CONCATENATION takes at least one tensor and the axis")
    axis = b.scalar(ins[-1], [*where, "inputs", len(ins) - 1])
    parts = [b.tensor(n, [*where, "inputs", i]) for i, n in enumerate(ins[:-1])]
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "layout.concat", [parts], {"axis": axis}, comment="CONCATENATION")


def _block(name: str) -> Callable[[Builder, dict[str, Any], list[Any]], None]:
    def translate(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
        arity(b, op, where, (2,))
        block = b.scalar(op["inputs"][1], [*where, "inputs", 1])
        x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
        out = b.define(op["outputs"][0], [*where, "outputs", 0])
        b.emit(out, name, [x], {"block_size": [block, block], "data_format": "NXC"}, comment=op["op"])
    return translate


def _fully_connected(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (4,))
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


def _reshape(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (2,))
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


def _softmax(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (2,))
    x = b.operand(op["inputs"][0], [*where, "inputs", 0])
    beta = b.scalar(op["inputs"][1], [*where, "inputs", 1], "FLOAT32")
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    if beta != 1.0:
        scaled = b.tmp("scaled")
        b.emit(scaled, "math.mul", [xs, Expr(repr(beta))], comment="SOFTMAX beta")
        xs = scaled
    b.emit(out, "nn.softmax", [xs], {"axes": [len(x["dims"]) - 1]}, comment="SOFTMAX")


def _l2_norm(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (1,))
    x = b.operand(op["inputs"][0], [*where, "inputs", 0])
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "nn.l2_norm", [xs], {"axes": [len(x["dims"]) - 1]}, comment="L2_NORMALIZATION")


def _lrn(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (5,))
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


def _resize(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (3,))
    y = b.operand(op["outputs"][0], [*where, "outputs", 0])
    for i in (1, 2):
        b.scalar(op["inputs"][i], [*where, "inputs", i])
    xs = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "image.linear_resize", [xs], {"axes": [1, 2], "size": y["dims"][1:3], "antialias": False,
                                              "coordinate_transform": "ASYMMETRIC"}, comment="RESIZE_BILINEAR")


def _embedding(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (2,))
    lookups, values = b.tensor(op["inputs"][0], [*where, "inputs", 0]), b.tensor(op["inputs"][1],
                                                                                  [*where, "inputs", 1])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "layout.gather", [values, lookups], {"axis": 0}, comment="EMBEDDING_LOOKUP")


def _rnn(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (6,), outs=2)
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


_LSTM_ACT = {0: None, 1: "nn.relu", 3: "relu6", 4: "math.tanh", 6: "nn.sigmoid"}


def _apply(b: Builder, code: int, x: str, hint: str, where: list[Any]) -> str:
    """An LSTM/SVDF activation (TfLite codes: 0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid) of ``x``."""
    if code not in _LSTM_ACT:
        raise b.loc.error(where, f"activation code {code} is not 0, 1, 3, 4 or 6")
    kind = _LSTM_ACT[code]
    if kind is None:
        return x
    y = b.tmp(hint)
    if kind == "relu6":
        b.emit(y, "nn.relu", [x], {"max": 6.0})
    else:
        b.emit(y, kind, [x])
    return y


def _lstm(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    """NNAPI 1.0 LSTM (LSTM.cpp): optional CIFG (no input gate: i = 1 - f), peepholes, cell clipping,
    projection with clipping; outputs scratch (the gate values, concatenated), state out, cell out, output."""
    arity(b, op, where, (23,), outs=4)
    ins = op["inputs"]
    at = lambda i: [*where, "inputs", i]  # noqa: E731
    present = [b.present(n) for n in ins]
    x, h, c = b.tensor(ins[0], at(0)), b.tensor(ins[18], at(18)), b.tensor(ins[19], at(19))
    act = b.scalar(ins[20], at(20))
    cell_clip, proj_clip = b.scalar(ins[21], at(21), "FLOAT32"), b.scalar(ins[22], at(22), "FLOAT32")
    cifg = not present[1]
    peephole = present[10]
    gates: dict[str, str] = {}
    for g, (wi, ri, bi) in {"i": (1, 5, 12), "f": (2, 6, 13), "g": (3, 7, 14),
                          "o": (4, 8, 15)}.items():
        if g == "i" and cifg:
            continue
        xw, hr, s = b.tmp(f"x_{g}"), b.tmp(f"h_{g}"), b.tmp(f"pre_{g}")
        b.emit(xw, "nn.linear", [x, b.tensor(ins[wi], at(wi)), b.tensor(ins[bi], at(bi))],
               comment=f"LSTM gate {g}: input weights and bias")
        b.emit(hr, "nn.linear", [h, b.tensor(ins[ri], at(ri))], comment=f"LSTM gate {g}: recurrent weights")
        b.emit(s, "math.add", [xw, hr])
        gates[g] = s
    def peep(g: str, cell: str, idx: int) -> None:
        if peephole and not (g == "i" and cifg):
            t = b.tmp(f"peep_{g}")
            b.emit(t, "math.mul", [cell, b.tensor(ins[idx], at(idx))], comment=f"LSTM peephole {g}")
            s2 = b.tmp(f"pre_{g}")
            b.emit(s2, "math.add", [gates[g], t])
            gates[g] = s2
    peep("i", c, 9)
    peep("f", c, 10)
    f = b.tmp("forget_gate")
    b.emit(f, "nn.sigmoid", [gates["f"]])
    i = b.tmp("input_gate")
    if cifg:
        b.emit(i, "math.sub", [Expr("1.0"), f], comment="CIFG: input gate = 1 - forget gate")
    else:
        b.emit(i, "nn.sigmoid", [gates["i"]])
    g = _apply(b, act, gates["g"], "cell_gate", at(20))
    fc, ig, cell = b.tmp("kept"), b.tmp("added"), b.tmp("cell")
    b.emit(fc, "math.mul", [f, c])
    b.emit(ig, "math.mul", [i, g])
    b.emit(cell, "math.add", [fc, ig])
    if cell_clip > 0:
        clipped = b.tmp("cell_clipped")
        b.emit(clipped, "math.clamp", [cell, Expr(repr(-cell_clip)), Expr(repr(cell_clip))], comment="cell clip")
        cell = clipped
    peep("o", cell, 11)
    o = b.tmp("output_gate")
    b.emit(o, "nn.sigmoid", [gates["o"]])
    out = b.tmp("gated")
    b.emit(out, "math.mul", [o, _apply(b, act, cell, "cell_act", at(20))])
    if present[16]:
        proj = b.tmp("projected")
        bias = b.tensor(ins[17], at(17)) if present[17] else None
        b.emit(proj, "nn.linear", [out, b.tensor(ins[16], at(16)), bias], comment="LSTM projection")
        out = proj
        if proj_clip > 0:
            clipped = b.tmp("projection_clipped")
            b.emit(clipped, "math.clamp", [out, Expr(repr(-proj_clip)), Expr(repr(proj_clip))],
                   comment="projection clip")
            out = clipped
    scratch, state_out, cell_out, output = op["outputs"]
    names = [b.define(n, [*where, "outputs", k]) for k, n in enumerate(op["outputs"])]
    b.emit(names[0], "layout.concat", [[v for v in ([] if cifg else [i]) + [f, g, o]]], {"axis": 1},
           comment="scratch buffer: the gate values (the CTS ignores it)")
    b.emit(names[1], "math.iden", [out], comment="output state")
    b.emit(names[2], "math.iden", [cell], comment="cell state")
    b.emit(names[3], "math.iden", [out])


def _svdf(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    """NNAPI 1.0 SVDF (SVDF.cpp): the state [batch, filters * memory] gets the newest feature activation
    in each filter's last column, is weighted by weights_time and summed over memory, the rank groups
    are summed per unit, bias and activation added; state out is the updated state shifted left by one
    (a zero enters at the end)."""
    arity(b, op, where, (7,), outs=2)
    ins = op["inputs"]
    at = lambda i: [*where, "inputs", i]  # noqa: E731
    x = b.operand(ins[0], at(0))
    wf, wt = b.operand(ins[1], at(1)), b.operand(ins[2], at(2))
    batch = x["dims"][0]
    filters, memory = wt["dims"]
    rank = b.scalar(ins[5], at(5))
    act = b.scalar(ins[6], at(6))
    if filters % rank or wf["dims"][0] != filters:
        raise b.loc.error(at(5), f"rank {rank} does not divide the {filters} filters (or weights_feature has "
                          f"{wf['dims'][0]} rows)")
    units = filters // rank
    feat, s3, old, a3, sp, prod, scratch, grouped, summed = (b.tmp(n) for n in (
        "activation", "state", "kept", "newest", "memory", "weighted", "scratch", "ranks", "summed"))
    b.emit(feat, "nn.linear", [b.tensor(ins[0], at(0)), b.tensor(ins[1], at(1))], comment="SVDF: feature weights")
    b.emit(s3, "layout.reshape", [b.tensor(ins[4], at(4))], {"shape": [batch, filters, memory]})
    b.emit(old, "layout.slice", [s3], {"axes": [2], "begin": [0], "end": [memory - 1]})
    b.emit(a3, "layout.unsqueeze", [feat], {"axes": [2]})
    b.emit(sp, "layout.concat", [[old, a3]], {"axis": 2}, comment="the newest activation in the last column")
    b.emit(prod, "math.mul", [sp, b.tensor(ins[2], at(2))], comment="time weights")
    b.emit(scratch, "math.sum_reduce", [prod], {"axes": [2], "squeeze": True})
    b.emit(grouped, "layout.reshape", [scratch], {"shape": [batch, units, rank]})
    b.emit(summed, "math.sum_reduce", [grouped], {"axes": [2], "squeeze": True}, comment="sum of the rank groups")
    if b.present(ins[3]):
        biased = b.tmp("biased")
        b.emit(biased, "math.add", [summed, b.tensor(ins[3], at(3))])
        summed = biased
    state_name, out_name = op["outputs"]
    result = _apply(b, act, summed, "activated", at(6)) if act not in (1, 2, 3) else None
    out = b.define(out_name, [*where, "outputs", 1])
    if result is None:  # a fused RELU / RELU1 / RELU6 code
        pre, finish = b.activated(act, out_name, [*where, "outputs", 1], defined=out)
        b.emit(pre, "math.iden", [summed])
        finish(pre)
    else:
        b.emit(out, "math.iden", [result])
    shifted, zeros, st = b.tmp("shifted"), b.tmp("zeros"), b.tmp("state_shifted")
    b.emit(shifted, "layout.slice", [sp], {"axes": [2], "begin": [1], "end": [memory]})
    b.emit(zeros, "math.mul", [a3, Expr("0.0")])
    b.emit(st, "layout.concat", [[shifted, zeros]], {"axis": 2}, comment="shift the memory left by one")
    state = b.define(state_name, [*where, "outputs", 0])
    b.emit(state, "layout.reshape", [st], {"shape": [batch, filters * memory]})


def _hashtable(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    """HASHTABLE_LOOKUP by comparison instead of binary search: ``match[n, k] = lookups[n] == keys[k]``,
    ``hits = any(match)``, the row of the (only) matching key by argmax, zeros where nothing matches."""
    arity(b, op, where, (3,), outs=2)
    ins = op["inputs"]
    values = b.operand(ins[2], [*where, "inputs", 2])
    lookups, keys, table = (b.tensor(ins[i], [*where, "inputs", i]) for i in range(3))
    col, match, found, weight, index, rows, mask = (b.tmp(n) for n in (
        "lookup_column", "match", "found", "match_real", "index", "rows", "hit_mask"))
    b.emit(col, "layout.unsqueeze", [lookups], {"axes": [1]})
    b.emit(match, "math.eq", [col, keys], comment="HASHTABLE_LOOKUP: compare every lookup with every key")
    b.emit(found, "math.any_reduce", [match], {"axes": [1], "squeeze": True})
    b.emit(weight, "math.select", [match, Expr("1.0"), Expr("0.0")])
    b.emit(index, "math.argmax", [weight], {"axis": 1, "squeeze": True}, comment="the matching key's row")
    b.emit(rows, "layout.gather", [table, index], {"axis": 0})
    out_name, hits_name = op["outputs"]
    hits = b.define(hits_name, [*where, "outputs", 1])
    b.emit(hits, "math.select", [found, Expr("1.0"), Expr("0.0")], comment="hits: 1 where a key matched")
    extra = len(values["dims"]) - 1
    if extra:
        b.emit(mask, "layout.unsqueeze", [hits], {"axes": list(range(1, 1 + extra))})
    out = b.define(out_name, [*where, "outputs", 0])
    b.emit(out, "math.mul", [rows, mask if extra else hits], comment="zeros where no key matched")


def _dequantize(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    arity(b, op, where, (1,))
    x = b.tensor(op["inputs"][0], [*where, "inputs", 0])
    out = b.define(op["outputs"][0], [*where, "outputs", 0])
    b.emit(out, "math.iden", [x], comment="DEQUANTIZE: the real value s * (q - z) of a quantized tensor")


def _unsupported(b: Builder, op: dict[str, Any], where: list[Any]) -> None:
    raise b.loc.error([*where, "op"], f"{op['op']} is not expressible in the standard library: "
                      f"{UNSUPPORTED[op['op']]}", code="E0902")


TRANSLATE: dict[str, Callable[[Builder, dict[str, Any], list[Any]], None]] = {
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
    "RNN": _rnn, "LSTM": _lstm, "SVDF": _svdf,
    "SOFTMAX": _softmax,
    "LSH_PROJECTION": _unsupported, "HASHTABLE_LOOKUP": _hashtable,
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
    b = Builder(model, loc)
    for i, o in enumerate(model["operands"]):
        b.operands[o["name"]] = o
        b.index[o["name"]] = i
    for j, name in enumerate(model["model_inputs"]):
        o = b.operands[name]
        if not b.present(name):  # omitted optional operand: not a graph input (see the module docstring)
            continue
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
        if o["role"] == "output":  # (internal operands got their entry when defined)
            b.quantize_as(sk, o)
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
