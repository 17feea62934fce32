"""Fast kernels for the recurrent standard-library operators: `nn.lstm`, `nn.lstm_loop` and
`nn.lstm_step` (spec §4.4.5; stdlib/nn.sknd). The standard library has no GRU or plain RNN
operator.

The reference semantics are the operators' `@compose` bodies: `lstm_step` computes
`s = (x Wᵀ + B) + h Rᵀ`, splits it along axis 1 into the gates [i, f, g, o], and
`c' = sigmoid(f) * c + sigmoid(i) * tanh(g)`, `h' = sigmoid(o) * tanh(c')`; `lstm_loop` scans the
sequence X [s, b, c] from (h0, c0), running `min(s, steps)` steps when the scalar `steps` is given,
and stacks every step's h' into Y [steps, b, n]; `lstm` defaults h0 and c0 to zeros and, with the
per-item counts `steps [b]`, runs `_jagged_lstm_loops` (one `lstm_loop` per batch item, their Ys
stacked along axis 1, which needs equal counts: see docs/spec-errata.md).

The kernel computes the same values with few, large numpy calls:

* the weights are regrouped gate-major (`regroup`) in the order [i, f, o, g], the three sigmoid
  gates' blocks and bias scaled by 0.5 (exact in binary floating point), so that
  `sigmoid(v) = 0.5 + 0.5 tanh(v / 2)` needs one tanh over all four gates and a multiply-add on
  the first three: `Wc [c, 4n]`, `R3 [4, n, n]` (each gate's block of R transposed), `Bc [4n]`.
  Inside an execution plan (the `prepare` hook) the regrouped weights are kept while the weights
  are the same variable / constant arrays;
* the input projection of every step, `G = X Wc + Bc`, is one GEMM before the loop;
* each step is one batched product `h R3` (four [b, n] x [n, n] GEMMs, which OpenBLAS runs about
  twice as fast as a single [b, n] x [n, 4n] one for small b) into a preallocated [4, b, n]
  buffer, plus nine in-place elementwise calls; h' is written straight into its row of Y.

The sum is formed in the definition's order, (x Wᵀ + B) + h Rᵀ; only the summation order inside
the matrix products and the sigmoid formula differ, so results agree with the `@compose` path to
float32 rounding (about 1e-6 relative), not bit for bit.

Cases the kernel does not handle return `NotImplemented` and the executor runs the `@compose`
graph: another dtype than float32, inconsistent shapes, a step count of zero or less, and per-item
`steps` that differ after clamping to s (there the definition's stack of the items' Ys fails, and
the composite reports that error).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.execute.executor import RunValue, kernel

__all__ = ["RECURRENT_KERNELS", "lstm_sequence", "regroup"]

#: The operators that have a kernel here (qualified names).
RECURRENT_KERNELS = ("nn.lstm", "nn.lstm_loop", "nn.lstm_step")

_F32 = np.dtype(np.float32)

#: The stdlib's gate blocks [i, f, g, o], regrouped with the sigmoid gates first: [i, f, o, g]
_ORDER = (0, 1, 3, 2)
#: Per regrouped gate: 0.5 for the sigmoid gates (sigmoid(v) = 0.5 + 0.5 tanh(v / 2)), 1 for g
_SCALE = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)


def _real(a: object, ndim: int) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == _F32 and a.ndim == ndim


def _state(a: np.ndarray | None, b: int, n: int) -> np.ndarray | None | bool:
    """An initial state: None (omitted: the default 0.0), the array, or False (not handled)."""
    if a is None:
        return None
    if _real(a, 2) and a.shape == (b, n):
        return a
    return False


def _count(steps: np.ndarray | None, s: int, per_item: bool, b: int) -> int | None:
    """The number of steps run: s without `steps`, else min(s, count) for the (equal) count(s);
    None when the kernel declines (not an integer array of the right shape, counts that differ
    after clamping, or no step at all)."""
    if steps is None:
        k = s
    else:
        if not isinstance(steps, np.ndarray) or steps.dtype.kind not in "iu":
            return None
        if per_item:
            if steps.shape != (b,):
                return None
            counts = np.minimum(steps, s)
            k = int(counts[0]) if b else 0
            if b == 0 or np.any(counts != k):
                return None
        else:
            if steps.size != 1:
                return None
            k = min(int(steps.reshape(-1)[0]), s)
    return k if k > 0 else None


Regrouped = tuple[np.ndarray, np.ndarray, np.ndarray]


def regroup(W: np.ndarray, R: np.ndarray, B: np.ndarray) -> Regrouped:
    """The weights gate-major in the order [i, f, o, g], the sigmoid gates scaled by 0.5:
    Wc [c, 4n] (the input projection of all gates in one product), R3 [4, n, n] (R3[j] = the
    scaled block j of R, transposed), Bc [4n]; all contiguous."""
    n4, c = W.shape
    n = n4 // 4
    order = list(_ORDER)
    Wc = np.multiply(W.reshape(4, n, c)[order].transpose(2, 0, 1), _SCALE[:, None], order="C").reshape(c, n4)
    R3 = np.multiply(R.reshape(4, n, n)[order].transpose(0, 2, 1), _SCALE[:, None, None], order="C")
    Bc = np.multiply(B.reshape(4, n)[order], _SCALE[:, None]).reshape(n4)
    return Wc, R3, Bc


def lstm_sequence(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray, h0: np.ndarray | None,
                  c0: np.ndarray | None, k: int, regrouped: Regrouped | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y [k, b, n], hN, cN [b, n] after the first k (>= 1) steps of X [s, b, c] (float32 arrays,
    shapes checked by the caller); h0 / c0 None stand for zeros. `regrouped`: regroup(W, R, B)
    when the caller has it."""
    _, b, c = X.shape
    n = R.shape[1]
    Wc, R3, Bc = regroup(W, R, B) if regrouped is None else regrouped
    # the input projection of all k steps, (x Wᵀ + B) as the definition adds it; step t's gates
    # are G4[t] [4, b, n] (a view)
    G = np.matmul(X[:k].reshape(k * b, c), Wc)
    G += Bc
    G4 = G.reshape(k, b, 4, n).transpose(0, 2, 1, 3)
    Y = np.empty((k, b, n), dtype=_F32)
    cell = np.zeros((b, n), dtype=_F32) if c0 is None else np.array(c0, dtype=_F32)
    buf = np.empty((4, b, n), dtype=_F32)
    tmp = np.empty((b, n), dtype=_F32)
    sig, i, f, o, g = buf[:3], buf[0], buf[1], buf[2], buf[3]
    matmul, add, multiply, tanh = np.matmul, np.add, np.multiply, np.tanh
    h = h0
    for t in range(k):
        if h is None:  # h0 = 0: the recurrent term is zero
            buf[...] = G4[0]
        else:
            matmul(h, R3, out=buf)
            add(G4[t], buf, out=buf)
        tanh(buf, out=buf)
        multiply(sig, 0.5, out=sig)
        add(sig, 0.5, out=sig)
        multiply(f, cell, out=cell)
        multiply(i, g, out=g)
        add(cell, g, out=cell)
        tanh(cell, out=tmp)
        h = Y[t]
        multiply(o, tmp, out=h)
    return Y, Y[k - 1].copy(), cell


def _weights(X: RunValue, W: RunValue, R: RunValue, B: RunValue) -> tuple[int, int, int, int] | None:
    """(s, b, c, n) when X [s, b, c], W [4n, c], R [4n, n], B [4n] are float32 arrays, else None."""
    if not (_real(X, 3) and _real(W, 2) and _real(R, 2) and _real(B, 1)):
        return None
    s, b, c = X.shape
    n4, n = R.shape
    if n4 != 4 * n or W.shape != (n4, c) or B.shape != (n4,) or 0 in (b, c, n):
        return None
    return s, b, c, n


class _Weights:
    """The regrouped weights of one prepared operation, kept while its W, R and B are the same
    arrays. Only for weights that are graph variables or constants: as with the plan-time folding
    of skriptnd.execute.optimize, their values are taken not to change between runs of a plan (an
    @update, or another executor, gives new arrays); graph inputs are regrouped on every call."""

    def __init__(self) -> None:
        self.key: tuple[np.ndarray, ...] | None = None
        self.value: Regrouped | None = None

    def get(self, W: np.ndarray, R: np.ndarray, B: np.ndarray) -> Regrouped:
        key = self.key
        if key is None or key[0] is not W or key[1] is not R or key[2] is not B or self.value is None:
            self.key, self.value = (W, R, B), regroup(W, R, B)
        return self.value


def _sequence(args: list[Any], per_item: bool, cache: _Weights | None = None) -> list[Any] | Any:
    X, W, R, B, h0, c0, steps = (list(args) + [None] * 7)[:7]
    dims = _weights(X, W, R, B)
    if dims is None or len(args) > 7:
        return NotImplemented
    s, b, _, n = dims
    h0, c0 = _state(h0, b, n), _state(c0, b, n)
    if h0 is False or c0 is False:
        return NotImplemented
    k = _count(steps, s, per_item, b)
    if k is None:
        return NotImplemented
    return list(lstm_sequence(X, W, R, B, h0, c0, k, None if cache is None else cache.get(W, R, B)))


def _prepare(per_item: bool, first: int) -> Any:
    """The `prepare(op, scratch)` hook (skriptnd.execute.executor.Executor.prepare): the kernel with
    a cache of the regrouped weights when W, R and B (inputs first .. first + 2) are variables or
    constants, else None (the plain kernel)."""

    def prepare(op: Operation, scratch: dict[str, Any]) -> Any:
        weights = op.inputs[first:first + 3]
        if len(weights) != 3 or any(t is None or isinstance(t, list) or t.kind not in ("variable", "constant")
                                    for t in weights):
            return None
        cache = _Weights()
        if first == 1:
            return lambda args: _sequence(args, per_item, cache) if per_item or _loop_states(args) else NotImplemented
        return lambda args: _step(args, cache)

    return prepare


def _loop_states(args: list[Any]) -> bool:
    return len(args) >= 6 and args[4] is not None and args[5] is not None


@kernel("nn.lstm")
def lstm(op: Operation, args: list[Any]) -> list[Any] | Any:
    """`nn.lstm(X, W, R, B, h0 = 0, c0 = 0, steps)`: Y, hN, cN."""
    return _sequence(args, per_item=True)


@kernel("nn.lstm_loop")
def lstm_loop(op: Operation, args: list[Any]) -> list[Any] | Any:
    """`nn.lstm_loop(X, W, R, B, h0, c0, steps)` (scalar, optional `steps`): Y, hN, cN."""
    if not _loop_states(args):
        return NotImplemented
    return _sequence(args, per_item=False)


@kernel("nn.lstm_step")
def lstm_step(op: Operation, args: list[Any]) -> list[Any] | Any:
    """`nn.lstm_step(h0, c0, x, W, R, B)`: h1, c1."""
    return _step(args)


def _step(args: list[Any], cache: _Weights | None = None) -> list[Any] | Any:
    if len(args) != 6:
        return NotImplemented
    h0, c0, x, W, R, B = args
    if not _real(x, 2):
        return NotImplemented
    dims = _weights(x[None], W, R, B)
    if dims is None:
        return NotImplemented
    _, b, _, n = dims
    if not (_real(h0, 2) and h0.shape == (b, n) and _real(c0, 2) and c0.shape == (b, n)):
        return NotImplemented
    _, h1, c1 = lstm_sequence(x[None], W, R, B, h0, c0, 1, None if cache is None else cache.get(W, R, B))
    return [h1, c1]


lstm.prepare = _prepare(per_item=True, first=1)  # type: ignore[attr-defined]
lstm_loop.prepare = _prepare(per_item=False, first=1)  # type: ignore[attr-defined]
lstm_step.prepare = _prepare(per_item=False, first=3)  # type: ignore[attr-defined]
