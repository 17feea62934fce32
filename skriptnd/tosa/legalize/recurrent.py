"""Recurrent layers of static length legalized to TOSA as a WHILE_LOOP (the exports and the iree backend).

``nn.lstm`` without ``steps`` runs exactly ``s`` steps (the first extent of X), so it maps to a TOSA graph
of fixed shapes: one MATMUL for the input projection of all steps (X·Wᵀ + B), then a ``WHILE_LOOP`` whose
body runs :attr:`RecurrentLegalizer.STEPS` (k) steps of the recurrence per iteration: it reads the k steps'
projections with one GATHER at the iteration counter, runs per step a MATMUL with Rᵀ, the four gate
SLICEs, SIGMOID / TANH, c' = σ(f)·c + σ(i)·tanh(g), h' = σ(o)·tanh(c'), and writes the k hidden states
into the loop-carried Y with one SCATTER. TOSA 1.0's SLICE takes constant starts (shape operands), so
GATHER / SCATTER are the dynamic-offset read and write; X·Wᵀ+B and Y are laid out one iteration per row
(``[1, rounds, k·b·4n]``, ``[1, rounds, k·b·n]``) so that each moves one contiguous row (writing Y step
by step, or k rows of a ``[1, s, b·n]`` Y, made IREE's loop 1.6x slower). ``s mod k`` trailing steps run
unrolled after the loop (their offsets are constants); a sequence shorter than 2k steps is unrolled
whole, and so are the layers that fit in the legalizer's ``unroll_budget`` of steps (the SPIR-V export,
whose graphs have no regions; the iree backend, which runs an unrolled lstm-large faster at 2 threads).
The loop state is ``(i int32[1,1], h, c, X·Wᵀ+B, Rᵀ, Y)``: a region sees only its inputs (TOSA's graphs
are closed), and :class:`skriptnd.tosa.program.build.Builder` moves a constant the body passes through unchanged
(Rᵀ, from the graph's variable) into the body as a constant.

Why a loop: the exported program stays the size of one k-step body whatever the sequence length, and
compiles fast. Issue 7's lstm-large (seq 128, batch 8, two layers of 256) unrolled is ~2,000 TOSA
operators; iree-compile builds it in 25–55 s with its default flags (each step's matmul reads X·Wᵀ+B at
its own constant offset: ~130 distinct executables), in ~7 s with data tiling (4 executables); the loop
with k = 32 compiles in ~2.5 s. IREE runs the loop as fast on one thread but slower on two (a host round
trip per iteration), so the iree backend unrolls up to a budget of steps (skriptnd.backends.via_iree,
UNROLL_BUDGET). Measured figures for k = 1..64 and unrolled: docs/performance.md, Notes.

This is not a rule of the TABLE: the numpy backend keeps its native LSTM kernel
(skriptnd.execute.recurrent: one GEMM per step, no per-operator overhead), which a TOSA program on numpy
would only slow down. nn.lstm's Y is declared with a dynamic first extent (``real[~|s,b,n]``: ``steps``
may end the loop early); without ``steps`` its length is exactly ``s``. A :class:`RecurrentLegalizer`
remembers those lengths (:meth:`~RecurrentLegalizer.shape`), so that a second layer reading the first
layer's Y legalizes too, and the export can check a graph output's static shape. With ``steps`` (dynamic
length) it declines, and the export reports the operation (E0750).
"""

from __future__ import annotations

import numpy as np

from skriptnd.compose.ir import Operation, Tensor
from skriptnd.tosa.legalize.core import Builder, Subgraph
from skriptnd.tosa.legalize.tensor import _matmul_op
from skriptnd.tosa.ops.control_flow import Graph, Node
from skriptnd.tosa.ops.invoke import ITEM


class _Region(Builder):
    """A :class:`Builder` for a control-flow region: values named ``names`` in, no operation."""

    def __init__(self, names: list[str]) -> None:  # noqa: D107 - no operation binding: a region's own values
        self.op, self.env, self._n = None, {}, 0
        self.sg = Subgraph(inputs=list(names), outputs=[])

    def graph(self, types: list[tuple[tuple[int, ...], str]], outputs: list[str],
              output_types: list[tuple[tuple[int, ...], str]] | None = None) -> Graph:
        """The region as a ``tosa_graph_t``: inputs of ``types``, ``outputs`` of ``output_types`` (default:
        ``types``, a loop body's)."""
        nodes = [Node(o.name, [list(o.inputs)] if o.name == "CONCAT" else list(o.inputs), [o.output], dict(o.attrs))
                 for o in self.sg.ops]
        return Graph.of_nodes([(n, s, t) for n, (s, t) in zip(self.sg.inputs, types, strict=True)],
                              [(n, s, t) for n, (s, t) in zip(outputs, output_types or types, strict=True)],
                              nodes, self.sg.constants)


#: The operators :class:`RecurrentLegalizer` legalizes.
RECURRENT = frozenset({"nn.lstm"})


class RecurrentLegalizer:
    """``legalizer(op)``: the TOSA subgraph of an ``nn.lstm`` operation of static length, else None.
    Call it on a graph's operations in order (it remembers the static lengths of the Ys it legalized)."""

    #: recurrence steps per loop iteration (chosen by measurement on lstm-large: docs/performance.md, Notes)
    STEPS = 32
    #: above this many steps the sequence is not legalized (the program holds X·Wᵀ+B and Y whole)
    MAX_STEPS = 1 << 20
    #: the steps the SPIR-V export unrolls in a graph (its graphs have no loops)
    MAX_UNROLLED = 1024

    def __init__(self, steps: int | None = None, *, unroll_budget: int = 0) -> None:
        """``steps``: k (default :attr:`STEPS`); ``unroll_budget``: how many steps, over all the layers this
        legalizer is called on in graph order, may be unrolled whole rather than looped (a layer that fits
        in what is left is unrolled and uses it up); a layer shorter than 2k steps is always unrolled."""
        self.steps = int(steps or self.STEPS)
        self.unroll_budget = unroll_budget
        self._shapes: dict[int, tuple[int, ...]] = {}  # id(tensor) -> its actual shape (lstm outputs)

    def shape(self, t: Tensor) -> tuple[int, ...] | None:
        """``t``'s static shape: a legalized nn.lstm's Y has its sequence length; None if not static."""
        if id(t) in self._shapes:
            return self._shapes[id(t)]
        if t.shape is None or any(d is None for d in t.shape):
            return None
        return tuple(int(d) for d in t.shape)

    def __call__(self, op: Operation) -> Subgraph | None:
        if op.op not in RECURRENT or any(isinstance(v, list) for v in op.inputs):
            return None
        inputs = list(op.inputs) + [None] * (7 - len(op.inputs))
        x_t, w_t, r_t, b_t, h0_t, c0_t, steps = inputs[:7]
        if steps is not None or x_t is None or w_t is None or r_t is None or b_t is None:
            return None
        shapes = [self.shape(t) for t in (x_t, w_t, r_t, b_t)]
        if any(s is None for s in shapes) or any(t.dtype != "real" for t in (x_t, w_t, r_t, b_t)):
            return None
        (s, bsz, c), _, (_, n), _ = shapes  # type: ignore[misc]
        if s > self.MAX_STEPS or s < 1:
            return None
        unrolled = s <= self.unroll_budget
        self.unroll_budget -= s if unrolled else 0
        sg = _build(op, s, bsz, c, n, h0_t, c0_t, self.steps, unrolled)
        self._shapes[id(op.outputs[0])] = (s, bsz, n)
        return sg


def _state(b: Builder, i: int, t: Tensor | None, bsz: int, n: int) -> str:
    if t is None:
        return b.const(np.zeros((1, bsz, n), np.float32))
    return b.reshape(b.arg(i), (bsz, n), (1, bsz, n))


def _step(b: Builder, xw: str, h: str, cell: str, rt: str, bsz: int, n: int) -> tuple[str, str]:
    """One step: ``xw`` [1,b,4n] this step's X·Wᵀ+B; returns (h', c')."""
    gates = b.emit("ADD", xw, _matmul_op(b, h, rt))
    i, f, g, o = (b.slice(gates, (1, bsz, 4 * n), (0, 0, k * n), (1, bsz, n)) for k in range(4))
    cell = b.emit("ADD", b.mul(b.emit("SIGMOID", f), cell), b.mul(b.emit("SIGMOID", i), b.emit("TANH", g)))
    return b.mul(b.emit("SIGMOID", o), b.emit("TANH", cell)), cell


def _steps_of(b: Builder, xs: str, count: int, start: int, total: int, h: str, cell: str, rt: str, bsz: int,
              n: int) -> tuple[list[str], str, str]:
    """``count`` unrolled steps reading ``xs`` [1, total, b·4n] from ``start``: (their h [1,1,b·n], h, c)."""
    hs = []
    for t in range(start, start + count):
        x = b.reshape(b.slice(xs, (1, total, bsz * 4 * n), (0, t, 0), (1, 1, bsz * 4 * n)), (1, 1, bsz * 4 * n),
                      (1, bsz, 4 * n))
        h, cell = _step(b, x, h, cell, rt, bsz, n)
        hs.append(b.reshape(h, (1, bsz, n), (1, 1, bsz * n)))
    return hs, h, cell


def _loop(bsz: int, n: int, k: int, rounds: int) -> tuple[Graph, Graph]:
    """(cond, body) of the WHILE_LOOP over ``rounds`` iterations of ``k`` steps; state ``(i, h, c, xw, rt, y)``
    with ``i`` the iteration, and X·Wᵀ+B and Y laid out one iteration per row (``[1, rounds, k·b·4n]``,
    ``[1, rounds, k·b·n]``), so that the GATHER and the SCATTER move one contiguous row."""
    names = ["i", "h", "c", "xw", "rt", "y"]
    types = [((1, 1), "int32"), ((1, bsz, n), "fp32"), ((1, bsz, n), "fp32"), ((1, rounds, k * bsz * 4 * n), "fp32"),
             ((1, n, 4 * n), "fp32"), ((1, rounds, k * bsz * n), "fp32")]
    cond = _Region(names)
    more = cond.emit("GREATER", cond.const([[rounds]], np.int32), "i")
    cond_graph = cond.graph(types, [cond.emit("RESHAPE", more, cond.shape(()))], [((), "bool")])
    body = _Region(names)
    xs = body.reshape(body.emit("GATHER", "xw", "i"), (1, 1, k * bsz * 4 * n), (1, k, bsz * 4 * n))
    hs, h, cell = _steps_of(body, xs, k, 0, k, "h", "c", "rt", bsz, n)
    y = body.emit("SCATTER", "y", "i", body.reshape(body.concat(hs, 1), (1, k, bsz * n), (1, 1, k * bsz * n)))
    i = body.emit("ADD", "i", body.const([[1]], np.int32))
    return cond_graph, body.graph(types, [i, h, cell, "xw", "rt", y])


def _build(op: Operation, s: int, bsz: int, c: int, n: int, h0_t: Tensor | None, c0_t: Tensor | None, k: int, unrolled: bool) -> Subgraph:
    b = Builder(op)
    wt = b.reshape(b.transpose(b.arg(1), [1, 0]), (c, 4 * n), (1, c, 4 * n))
    rt = b.reshape(b.transpose(b.arg(2), [1, 0]), (n, 4 * n), (1, n, 4 * n))
    x = b.reshape(b.arg(0), (s, bsz, c), (1, s * bsz, c))
    xw = b.emit("ADD", _matmul_op(b, x, wt), b.reshape(b.arg(3), (4 * n,), (1, 1, 4 * n)))
    xw = b.reshape(xw, (1, s * bsz, 4 * n), (1, s, bsz * 4 * n))
    h, cell = _state(b, 4, h0_t, bsz, n), _state(b, 5, c0_t, bsz, n)
    rounds = s // k if s >= 2 * k and not unrolled else 0
    parts = []
    if rounds:
        cond, body = _loop(bsz, n, k, rounds)
        rows = b.reshape(b.slice(xw, (1, s, bsz * 4 * n), (0, 0, 0), (1, rounds * k, bsz * 4 * n)),
                         (1, rounds * k, bsz * 4 * n), (1, rounds, k * bsz * 4 * n))
        state = [b.const([[0]], np.int32), h, cell, rows, rt, b.const(np.zeros((1, rounds, k * bsz * n), np.float32))]
        loop = b.emit("WHILE_LOOP", *state, cond_graph=cond, body_graph=body)  # its value: the output list
        h, cell, y = (b.emit(ITEM, loop, index=i) for i in (1, 2, 5))
        parts.append(b.reshape(y, (1, rounds, k * bsz * n), (1, rounds * k, bsz * n)))
    hs, h, cell = _steps_of(b, xw, s - rounds * k, rounds * k, s, h, cell, rt, bsz, n)
    y = b.reshape(b.concat(parts + hs, 1), (1, s, bsz * n), (s, bsz, n))
    return b.done(y, b.reshape(h, (1, bsz, n), (bsz, n)), b.reshape(cell, (1, bsz, n), (bsz, n)))
