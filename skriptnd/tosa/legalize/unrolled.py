"""Recurrent layers of static length unrolled into TOSA (for compilers: the iree backend).

``nn.lstm`` without ``steps`` runs exactly ``s`` steps (the first extent of X), so its loop unrolls into
a fixed TOSA graph: one MATMUL for the input projection of all steps (X·Wᵀ + B), then per step a MATMUL
with Rᵀ, the four gate SLICEs, SIGMOID / TANH, and c' = σ(f)·c + σ(i)·tanh(g), h' = σ(o)·tanh(c'); Y is the
CONCAT of the steps' h. This is not a rule of the TABLE: the numpy backend keeps its native LSTM kernel
(skriptnd.execute.recurrent: one GEMM per step, no per-operator overhead), which an unrolled program
on numpy would only slow down; a compiler turns the unrolled graph into one fused loop body per step.

nn.lstm's Y is declared with a dynamic first extent (``real[~|s,b,n]``: ``steps`` may end the loop early);
without ``steps`` its length is exactly ``s``. :class:`LstmUnroller` remembers those lengths, so that a
second layer reading the first layer's Y unrolls too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Builder, Subgraph
from .tensor import _matmul_op


class LstmUnroller:
    """``unroller(op)``: the unrolled subgraph of an ``nn.lstm`` operation of static length, else None."""

    #: above this many steps the unrolled graph is too large to be worth compiling
    MAX_STEPS = 1024

    def __init__(self) -> None:
        self._shapes: dict[int, tuple[int, ...]] = {}  # id(tensor) -> its actual shape (lstm outputs)

    def shape(self, t: Any) -> tuple[int, ...] | None:
        if id(t) in self._shapes:
            return self._shapes[id(t)]
        if t.shape is None or any(d is None for d in t.shape):
            return None
        return tuple(int(d) for d in t.shape)

    def __call__(self, op: Any) -> Subgraph | None:
        if op.op != "nn.lstm" or any(isinstance(v, list) for v in op.inputs):
            return None
        inputs = list(op.inputs) + [None] * (7 - len(op.inputs))
        x_t, w_t, r_t, b_t, h0_t, c0_t, steps = inputs[:7]
        if steps is not None or x_t is None or w_t is None or r_t is None or b_t is None:
            return None
        shapes = [self.shape(t) for t in (x_t, w_t, r_t, b_t)]
        if any(s is None for s in shapes) or any(t.dtype != "real" for t in (x_t, w_t, r_t, b_t)):
            return None
        (s, bsz, c), _, (n4, n), _ = shapes  # type: ignore[misc]
        if s > self.MAX_STEPS or s < 1:
            return None
        sg = _build(op, s, bsz, c, n, h0_t, c0_t)
        self._shapes[id(op.outputs[0])] = (s, bsz, n)
        return sg


def _state(b: Builder, i: int, t: Any, bsz: int, n: int) -> str:
    if t is None:
        return b.const(np.zeros((1, bsz, n), np.float32))
    return b.reshape(b.arg(i), (bsz, n), (1, bsz, n))


def _build(op: Any, s: int, bsz: int, c: int, n: int, h0_t: Any, c0_t: Any) -> Subgraph:
    b = Builder(op)
    wt = b.reshape(b.transpose(b.arg(1), [1, 0]), (c, 4 * n), (1, c, 4 * n))
    rt = b.reshape(b.transpose(b.arg(2), [1, 0]), (n, 4 * n), (1, n, 4 * n))
    x = b.reshape(b.arg(0), (s, bsz, c), (1, s * bsz, c))
    xw = b.emit("ADD", _matmul_op(b, x, wt), b.reshape(b.arg(3), (4 * n,), (1, 1, 4 * n)))
    xw = b.reshape(xw, (1, s * bsz, 4 * n), (s, bsz, 4 * n))
    h, cell = _state(b, 4, h0_t, bsz, n), _state(b, 5, c0_t, bsz, n)
    hs = []
    for t in range(s):
        gates = b.emit("ADD", b.slice(xw, (s, bsz, 4 * n), (t, 0, 0), (1, bsz, 4 * n)), _matmul_op(b, h, rt))
        i, f, g, o = (b.slice(gates, (1, bsz, 4 * n), (0, 0, k * n), (1, bsz, n)) for k in range(4))
        cell = b.emit("ADD", b.mul(b.emit("SIGMOID", f), cell), b.mul(b.emit("SIGMOID", i), b.emit("TANH", g)))
        h = b.mul(b.emit("SIGMOID", o), b.emit("TANH", cell))
        hs.append(h)
    y = b.concat(hs, 0)
    return b.done(y, b.reshape(h, (1, bsz, n), (bsz, n)), b.reshape(cell, (1, bsz, n), (bsz, n)))
