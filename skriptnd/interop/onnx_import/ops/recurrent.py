"""Recurrent layers: LSTM -> nn.lstm (gates re-ordered at import time); GRU and RNN -> loops over time
written as SkriptND operators in the model folder (`ops/recurrent.sknd`: a step operator and a
`with ... for ... do` loop over the unstacked sequence, as the stdlib's nn.lstm_loop).

Directions: forward, reverse (the sequence is reversed with layout.slice, run, and reversed back) and
bidirectional (both, concatenated as ONNX's num_directions axis)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.registry import converter

MODULE = "ops/recurrent.sknd"

TEXT = """# Recurrent layers of ONNX that the standard library lacks, written by sknd import.
import nn;
import math;
import layout;

# ONNX RNN step: h1 = tanh(x W^T + Wb + h0 R^T + Rb)
operator rnn_step {
    @input {
        h0: real[b,n];
        x: real[b,c];
        W: real[n,c];
        R: real[n,n];
        Wb: real[n];
        Rb: real[n];
    }
    @output {
        h1: real[b,n];
    }
    @compose {
        xw = nn.linear(x, W, Wb);
        hr = nn.linear(h0, R, Rb);
        s = math.add(xw, hr);
        h1 = math.tanh(s);
    }
}

# ONNX GRU step, gates [z, r, h]; linear_before_reset = 0: h~ = tanh(x Wh^T + Wbh + (r * h0) Rh^T + Rbh)
operator gru_step {
    @input {
        h0: real[b,n];
        x: real[b,c];
        W: real[3*n,c];
        R: real[3*n,n];
        Wb: real[3*n];
        Rb: real[3*n];
    }
    @output {
        h1: real[b,n];
    }
    @compose {
        xw = nn.linear(x, W, Wb);
        [xz, xr, xh] = layout.split{axis=1, count=3}(xw);
        [Rz, Rr, Rh] = layout.split{axis=0, count=3}(R);
        [bz, br, bh] = layout.split{axis=0, count=3}(Rb);
        hz = nn.linear(h0, Rz, bz);
        hr = nn.linear(h0, Rr, br);
        sz = math.add(xz, hz);
        sr = math.add(xr, hr);
        z = nn.sigmoid(sz);
        r = nn.sigmoid(sr);
        rh = math.mul(r, h0);
        hh = nn.linear(rh, Rh, bh);
        sh = math.add(xh, hh);
        h = math.tanh(sh);
        zh = math.sub(h0, h);
        zd = math.mul(z, zh);
        h1 = math.add(h, zd);
    }
}

# ONNX GRU step with linear_before_reset = 1: h~ = tanh(x Wh^T + Wbh + r * (h0 Rh^T + Rbh))
operator gru_lbr_step {
    @input {
        h0: real[b,n];
        x: real[b,c];
        W: real[3*n,c];
        R: real[3*n,n];
        Wb: real[3*n];
        Rb: real[3*n];
    }
    @output {
        h1: real[b,n];
    }
    @compose {
        xw = nn.linear(x, W, Wb);
        hw = nn.linear(h0, R, Rb);
        [xz, xr, xh] = layout.split{axis=1, count=3}(xw);
        [hz, hr, hh] = layout.split{axis=1, count=3}(hw);
        sz = math.add(xz, hz);
        sr = math.add(xr, hr);
        z = nn.sigmoid(sz);
        r = nn.sigmoid(sr);
        rh = math.mul(r, hh);
        sh = math.add(xh, rh);
        h = math.tanh(sh);
        zh = math.sub(h0, h);
        zd = math.mul(z, zh);
        h1 = math.add(h, zd);
    }
}
"""

LOOP = """
# The {name} step over the sequence X [s,b,c]: outputs every hidden state Y [s,b,n] and the last hN.
operator {name}_loop {{
    @input {{
        X: real[s,b,c];
        W: real[{k}*n,c];
        R: real[{k}*n,n];
        Wb: real[{k}*n];
        Rb: real[{k}*n];
        h0: real[b,n];
    }}
    @output {{
        Y: real[s,b,n];
        hN: real[b,n];
    }}
    @compose {{
        Xs..(s) = layout.unstack{{axis=0}}(X);
        hN, hs = with hi = h0 for Xi : Xs do {{
            h1 = step: {name}_step(hi, Xi, W, R, Wb, Rb);
            yield h1, h1;
        }};
        Y = layout.stack{{axis=0}}(hs);
    }}
}}
"""


def _module() -> str:
    return TEXT + "".join(LOOP.format(name=n, k=k) for n, k in (("rnn", 1), ("gru", 3), ("gru_lbr", 3)))


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _common_checks(ctx: Context, node: Node, activations: list[str]) -> None:
    if node.attr("clip") is not None:
        raise ImportProblem("E0807", f"{node.where}: clip is not supported")
    given = [a.lower() for a in node.attr("activations", [])]
    if given and given != activations[: len(given)] and given != activations * 2:
        raise ImportProblem("E0807", f"{node.where}: activations {node.attr('activations')} are not supported "
                            f"(only the defaults {activations})")
    if node.input(4):
        lens = ctx.const(node.input(4))
        seq = ctx.static_shape(node.input(0))[0]
        if lens is None or not (lens == seq).all():
            raise ImportProblem("E0807", f"{node.where}: sequence_lens shorter than the sequence are not supported")


def _reverse(ctx: Context, x: str, n: int) -> str:
    return _tmp(ctx, "layout.slice", [x], axes=[0], begin=[n - 1], end=[-1], stride=[-1])


def _directions(ctx: Context, node: Node, run: Callable[[int, str], tuple[list[str], str]]) -> None:
    """Run each direction (d = 0 forward, 1 backward) and assemble ONNX's outputs
    Y [s, dirs, b, n] and the final states [dirs, b, n] (layout=1: batch first, transposed here)."""
    direction = node.attr("direction", "forward")
    dirs = {"forward": [0], "reverse": [1], "bidirectional": [0, 1]}[direction]
    batch_first = bool(node.attr("layout", 0))
    seq = ctx.static_shape(node.input(0))[1 if batch_first else 0]
    results = []
    x = ctx.arg(node.input(0))
    if batch_first:
        x = _tmp(ctx, "layout.transpose", [x], perm=[1, 0, 2])
    for k, d in enumerate(dirs):
        xin = _reverse(ctx, x, seq) if d else x
        finals, y = run(k, xin)
        results.append(([*finals], _reverse(ctx, y, seq) if d else y))

    def assemble(parts: list[str], axis: int, perm: list[int] | None, out: int) -> None:
        last = perm is None
        target = ctx.out(out) if last else ctx.fresh("y")
        if len(parts) == 1:
            y = ctx.emit("math.iden", parts, outputs=target, label=last)
        else:
            y = ctx.emit("layout.concat", [parts], {"axis": axis}, outputs=target, label=last)
        if perm is not None:
            ctx.emit("layout.transpose", [y], {"perm": perm}, outputs=ctx.out(out))

    if node.outputs and node.outputs[0]:
        ys = [_tmp(ctx, "layout.unsqueeze", [y], axes=[1]) for _, y in results]
        assemble(ys, 1, [2, 0, 1, 3] if batch_first else None, 0)
    for j in range(len(results[0][0])):
        if len(node.outputs) > j + 1 and node.outputs[j + 1]:
            hs = [_tmp(ctx, "layout.unsqueeze", [f[j]], axes=[0]) for f, _ in results]
            assemble(hs, 0, [1, 0, 2] if batch_first else None, j + 1)


def _part(ctx: Context, node: Node, i: int, k: int, what: str, order: list[int] | None = None,
          half: int | None = None) -> str:
    """Direction k of input i (W, R or B) as an argument: gates re-ordered (`order` of its chunks) and,
    for B, one half (0: Wb, 1: Rb). Constant inputs are prepared at import time, others by statements."""
    value = ctx.const(node.input(i))
    if value is not None:
        a = value[k].astype(np.float32)
        if half is not None:
            a = np.split(a, 2)[half]
        if order is not None:
            chunks = np.split(a, len(order), axis=0)
            a = np.concatenate([chunks[j] for j in order], axis=0)
        return ctx.literal_arg(a, what)
    x = ctx.arg(node.input(i))
    x = _tmp(ctx, "layout.slice", [x], axes=[0], begin=[k], end=[k + 1])
    x = _tmp(ctx, "layout.squeeze", [x], axes=[0])
    if half is not None:
        parts = [ctx.fresh("half"), ctx.fresh("half")]
        ctx.emit("layout.split", [x], {"axis": 0, "count": 2}, outputs=[parts], label=False)
        x = parts[half]
    if order is not None:
        chunks = [ctx.fresh("gate") for _ in order]
        ctx.emit("layout.split", [x], {"axis": 0, "count": len(order)}, outputs=[chunks], label=False)
        x = _tmp(ctx, "layout.concat", [[chunks[j] for j in order]], axis=0)
    return x


def _sizes(ctx: Context, node: Node) -> tuple[int, int]:
    """(batch, hidden)."""
    n = int(node.attr("hidden_size", ctx.static_shape(node.input(2))[-1]))
    return ctx.static_shape(node.input(0))[0 if node.attr("layout", 0) else 1], n


def _bias(ctx: Context, node: Node, k: int, gates: int, n: int, half: int, order: list[int] | None = None) -> str:
    if node.input(3):
        return _part(ctx, node, 3, k, "B", order, half)
    return ctx.literal_arg(np.zeros(gates * n, np.float32), "B")


def _initial(ctx: Context, node: Node, i: int, k: int, b: int, n: int, what: str) -> str:
    if node.input(i):
        init = ctx.arg(node.input(i))
        axis = 1 if node.attr("layout", 0) else 0
        part = _tmp(ctx, "layout.slice", [init], axes=[axis], begin=[k], end=[k + 1])
        return _tmp(ctx, "layout.squeeze", [part], axes=[axis])
    return ctx.literal_arg(np.zeros((b, n), np.float32), what)


@converter("LSTM", target="`nn.lstm` (gates re-ordered from ONNX's [i, o, f, c] to [i, f, g, o], biases summed)",
           caveats="default activations; no peepholes, clip or input_forget")
def _lstm(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["sigmoid", "tanh", "tanh"])
    if node.input(7):
        raise ImportProblem("E0807", f"{node.where}: peephole weights (input P) are not supported")
    if node.attr("input_forget", 0):
        raise ImportProblem("E0807", f"{node.where}: input_forget=1 is not supported")
    b, n = _sizes(ctx, node)
    order = [0, 2, 3, 1]  # ONNX [i, o, f, c] -> nn.lstm [i, f, g, o]

    def run(k: int, x: str) -> tuple[list[str], str]:
        w = _part(ctx, node, 1, k, "W", order)
        r = _part(ctx, node, 2, k, "R", order)
        bias = ctx.const(node.input(3)) if node.input(3) else None
        if bias is not None:
            wb, rb = np.split(bias[k].astype(np.float32), 2)
            chunks = np.split(wb + rb, 4)
            bias_arg = ctx.literal_arg(np.concatenate([chunks[j] for j in order]), "B")
        else:
            bias_arg = _tmp(ctx, "math.add", [_bias(ctx, node, k, 4, n, 0, order), _bias(ctx, node, k, 4, n, 1, order)])
        h0 = _initial(ctx, node, 5, k, b, n, "h0")
        c0 = _initial(ctx, node, 6, k, b, n, "c0")
        y, h, c = ctx.fresh("Y"), ctx.fresh("h"), ctx.fresh("c")
        ctx.emit("nn.lstm", [x, w, r, bias_arg, h0, c0], outputs=[y, h, c])
        return [h, c], y

    _directions(ctx, node, run)


def _loop(ctx: Context, node: Node, name: str, gates: int) -> None:
    b, n = _sizes(ctx, node)
    ctx.define_module(MODULE, "ops.recurrent", _module())

    def run(k: int, x: str) -> tuple[list[str], str]:
        args = [x, _part(ctx, node, 1, k, "W"), _part(ctx, node, 2, k, "R"), _bias(ctx, node, k, gates, n, 0),
                _bias(ctx, node, k, gates, n, 1), _initial(ctx, node, 5, k, b, n, "h0")]
        y, h = ctx.fresh("Y"), ctx.fresh("h")
        ctx.emit(f"ops.recurrent.{name}_loop", args, outputs=[y, h])
        return [h], y

    _directions(ctx, node, run)


@converter("GRU", target="`ops.recurrent.gru_loop` / `gru_lbr_loop` (written in the folder)",
           caveats="default activations; no clip")
def _gru(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["sigmoid", "tanh"])
    _loop(ctx, node, "gru_lbr" if node.attr("linear_before_reset", 0) else "gru", 3)


@converter("RNN", target="`ops.recurrent.rnn_loop` (written in the folder)",
           caveats="tanh activation; no clip")
def _rnn(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["tanh"])
    _loop(ctx, node, "rnn", 1)
