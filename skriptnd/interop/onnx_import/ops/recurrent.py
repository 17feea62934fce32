"""Recurrent layers: LSTM -> nn.lstm (gates re-ordered at import time); GRU and RNN -> loops over time
written as SkriptND operators in the model folder (`ops/recurrent.sknd`: a step operator and a
`with ... for ... do` loop over the unstacked sequence, as the stdlib's nn.lstm_loop).

Directions: forward, reverse (the sequence is reversed with layout.slice, run, and reversed back) and
bidirectional (both, concatenated as ONNX's num_directions axis)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..context import Context, Node
from ..errors import ImportProblem
from ..registry import converter

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
    if node.attr("layout", 0):
        raise ImportProblem("E0807", f"{node.where}: layout=1 (batch first) is not supported")
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
    Y [s, dirs, b, n] and the final states [dirs, b, n]."""
    direction = node.attr("direction", "forward")
    dirs = {"forward": [0], "reverse": [1], "bidirectional": [0, 1]}[direction]
    seq = ctx.static_shape(node.input(0))[0]
    results = []
    x = ctx.arg(node.input(0))
    for k, d in enumerate(dirs):
        xin = _reverse(ctx, x, seq) if d else x
        finals, y = run(k, xin)
        results.append(([*finals], _reverse(ctx, y, seq) if d else y))
    n_final = len(results[0][0])
    ys = [_tmp(ctx, "layout.unsqueeze", [y], axes=[1]) for _, y in results]
    if node.outputs and node.outputs[0]:
        if len(ys) == 1:
            ctx.emit("math.iden", [ys[0]], outputs=ctx.out(0))
        else:
            ctx.emit("layout.concat", [ys], {"axis": 1}, outputs=ctx.out(0))
    for j in range(n_final):
        if len(node.outputs) > j + 1 and node.outputs[j + 1]:
            hs = [_tmp(ctx, "layout.unsqueeze", [f[j]], axes=[0]) for f, _ in results]
            if len(hs) == 1:
                ctx.emit("math.iden", [hs[0]], outputs=ctx.out(j + 1))
            else:
                ctx.emit("layout.concat", [hs], {"axis": 0}, outputs=ctx.out(j + 1))


def _weights(ctx: Context, node: Node, gates: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    W = ctx.need_const(node.input(1), "W (weights)")
    R = ctx.need_const(node.input(2), "R (recurrence weights)")
    n = R.shape[-1]
    B = ctx.const(node.input(3)) if node.input(3) else np.zeros((W.shape[0], 2 * gates * n), np.float32)
    if B is None:
        raise ImportProblem("E0808", f"{node.where}: its B (biases) is computed at run time")
    return W.astype(np.float32), R.astype(np.float32), B[:, :gates * n].astype(np.float32), \
        B[:, gates * n:].astype(np.float32)


def _initial(ctx: Context, node: Node, i: int, k: int, b: int, n: int, what: str) -> str:
    if node.input(i):
        init = ctx.arg(node.input(i))
        [part] = [_tmp(ctx, "layout.slice", [init], axes=[0], begin=[k], end=[k + 1])]
        return _tmp(ctx, "layout.squeeze", [part], axes=[0])
    return ctx.literal_arg(np.zeros((b, n), np.float32), what)


@converter("LSTM", target="`nn.lstm` (gates re-ordered from ONNX's [i, o, f, c] to [i, f, g, o], biases summed)",
           caveats="constant weights; default activations; no peepholes, clip, input_forget or layout=1")
def _lstm(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["sigmoid", "tanh", "tanh"])
    if node.input(7):
        raise ImportProblem("E0807", f"{node.where}: peephole weights (input P) are not supported")
    if node.attr("input_forget", 0):
        raise ImportProblem("E0807", f"{node.where}: input_forget=1 is not supported")
    W, R, Wb, Rb = _weights(ctx, node, 4)
    n = R.shape[-1]
    b = ctx.static_shape(node.input(0))[1]

    def order(a: np.ndarray) -> np.ndarray:
        i, o, f, c = np.split(a, 4, axis=0)
        return np.concatenate([i, f, c, o], axis=0)

    def run(k: int, x: str) -> tuple[list[str], str]:
        w = ctx.literal_arg(order(W[k]), "W")
        r = ctx.literal_arg(order(R[k]), "R")
        bias = ctx.literal_arg(order(Wb[k] + Rb[k]), "B")
        h0 = _initial(ctx, node, 5, k, b, n, "h0")
        c0 = _initial(ctx, node, 6, k, b, n, "c0")
        y, h, c = ctx.fresh("Y"), ctx.fresh("h"), ctx.fresh("c")
        ctx.emit("nn.lstm", [x, w, r, bias, h0, c0], outputs=[y, h, c])
        return [h, c], y

    _directions(ctx, node, run)


def _loop(ctx: Context, node: Node, name: str, gates: int) -> None:
    W, R, Wb, Rb = _weights(ctx, node, gates)
    n = R.shape[-1]
    b = ctx.static_shape(node.input(0))[1]
    ctx.define_module(MODULE, "ops.recurrent", _module())

    def run(k: int, x: str) -> tuple[list[str], str]:
        args = [x, ctx.literal_arg(W[k], "W"), ctx.literal_arg(R[k], "R"), ctx.literal_arg(Wb[k], "Wb"),
                ctx.literal_arg(Rb[k], "Rb"), _initial(ctx, node, 5, k, b, n, "h0")]
        y, h = ctx.fresh("Y"), ctx.fresh("h")
        ctx.emit(f"ops.recurrent.{name}_loop", args, outputs=[y, h])
        return [h], y

    _directions(ctx, node, run)


@converter("GRU", target="`ops.recurrent.gru_loop` / `gru_lbr_loop` (written in the folder)",
           caveats="constant weights; default activations; no clip or layout=1")
def _gru(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["sigmoid", "tanh"])
    _loop(ctx, node, "gru_lbr" if node.attr("linear_before_reset", 0) else "gru", 3)


@converter("RNN", target="`ops.recurrent.rnn_loop` (written in the folder)",
           caveats="constant weights; tanh activation; no clip or layout=1")
def _rnn(ctx: Context, node: Node) -> None:
    _common_checks(ctx, node, ["tanh"])
    _loop(ctx, node, "rnn", 1)
