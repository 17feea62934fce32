"""Fast forms of the TOSA operators small transformers spend their time in, beyond :mod:`fast`'s fp32 kernels.

`sknd run --profile` of GPT-2 / BERT / LLaMA (2 layers, hidden 128, seq 16; issue 28) showed the generic
kernels (:data:`skriptnd.tosa.ops.OPS`: type checks, broadcasting by hand, a float64 or int64 round trip,
every REQUIRE evaluated) as a large share of a run of ~250 tiny operators: the GELU's POW (~0.25-0.5 ms
each on [1, 16, 512]), the embedding GATHERs, int32 ADDs of index arithmetic, the attention mask's
LOGICAL_AND / LOGICAL_NOT and CASTs between bool and int8. (BERT's and ViT's exact GELU, ERF, is
:mod:`special`'s, through :mod:`fast`.)

Each form here computes **what the generic kernel computes** (the same bits; POW within the float32
``powf`` rounding, below TOSA's allowance) and returns ``NotImplemented`` for any operand it was not made
for and for any operand on which a REQUIRE of the generic kernel could fail (a GATHER index out of range, an
int32 overflow, a POW base outside its domain): then the program runs the generic kernel, which computes
the value or raises the TOSA error at the operation (the program's fallback, skriptnd.tosa.program.build).
:func:`extra_form` returns ``None`` when an operator has no form here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

F32 = np.float32
I32 = np.int32
Fn = Callable[..., Any]
_INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
#: the element types a GATHER moves (TOSA's GATHER rows of the fp32 program; any values are copied as they are)
_GATHER_TYPES = (np.dtype(F32), np.dtype(np.int8), np.dtype(np.int16), np.dtype(I32), np.dtype(np.bool_))


def extra_form(name: str, consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Fn | None:
    """The fast form of TOSA operator ``name`` (``consts``: its operands' plan-time values, None where only
    known at run time; ``attrs``: its attributes), or None."""
    if attrs.get("version", "1.0") != "1.0":
        return None
    if name == "POW":
        return _pow(consts)
    if name == "GATHER":
        return _gather
    if name in ("ADD", "SUB"):
        return _int32_arith(np.add if name == "ADD" else np.subtract)
    if name in _LOGICAL:
        return _logical(_LOGICAL[name])
    if name == "LOGICAL_NOT":
        return _logical_not
    if name == "CONCAT":
        return _concat(int(attrs["axis"]))
    if name == "TILE" and len(consts) == 2 and consts[1] is not None:
        return _tile(tuple(int(m) for m in np.asarray(consts[1]).reshape(-1)))
    if name == "CAST":
        return _cast(np.dtype(attrs["output_dtype"]) if attrs.get("output_dtype") in _CASTS else None)
    return None


# -- POW ----------------------------------------------------------------------------------------------------


def _pow(consts: Sequence[np.ndarray | None]) -> Fn | None:
    """POW with a constant exponent of one value (GELU's x^3, RMS norm's x^2, a square root's 0.5): float32
    ``np.power``, one correctly rounded-or-nearly ``powf`` per element instead of the generic kernel's float64
    round trip and its domain check on every element. The REQUIRE (finite operands, ``x > 0`` or ``x == 0``
    with ``y > 0``) is checked from the base's minimum and maximum (NaN fails both comparisons); where it
    may fail the generic kernel runs and reports it. Integral exponents 2 and 3 are products (exact
    to the float32 rounding of each product, as TOSA's MUL)."""
    if len(consts) != 2 or consts[1] is None:
        return None
    y = np.asarray(consts[1])
    if y.dtype != F32 or y.size == 0 or not np.all(y == y.reshape(-1)[0]):
        return None
    e = float(y.reshape(-1)[0])
    if not np.isfinite(e):
        return None
    lowest = 0.0 if e > 0 else np.nextafter(0.0, 1.0)  # 0 ** y is defined only for y > 0
    shape = y.shape

    def run(x: np.ndarray, exponent: np.ndarray) -> Any:
        if not (isinstance(x, np.ndarray) and x.dtype == F32 and x.ndim == len(shape)) or x.size == 0:
            return NotImplemented
        lo, hi = x.min(), x.max()
        if not (lo >= lowest and hi < np.inf):
            return NotImplemented
        out = np.broadcast_shapes(x.shape, shape)
        if e == 2.0:
            r = np.multiply(x, x)
        elif e == 3.0:
            r = np.multiply(x, x)
            r *= x
        elif e == 1.0:
            r = x.copy()
        else:
            with np.errstate(all="ignore"):
                r = np.power(x, F32(e))
        return r if r.shape == out else np.broadcast_to(r, out).copy()

    return run


# -- GATHER -------------------------------------------------------------------------------------------------


def _gather(values: np.ndarray, indices: np.ndarray) -> Any:
    """values[N, K, C], indices int32[N, W] -> values[n, indices[n, w], c]: a fancy index instead of the
    generic kernel's int64 copy of the indices and ``take_along_axis``; indices out of [0, K) decline (the
    generic kernel's REQUIRE reports them)."""
    if not (isinstance(values, np.ndarray) and isinstance(indices, np.ndarray) and indices.dtype == I32
            and values.dtype in _GATHER_TYPES and values.ndim == 3 and indices.ndim == 2
            and values.shape[0] == indices.shape[0]):
        return NotImplemented
    if indices.size and (indices.min() < 0 or indices.max() >= values.shape[1]):
        return NotImplemented
    if values.shape[0] == 1:
        return np.take(values[0], indices[0], axis=0)[None]
    return values[np.arange(values.shape[0])[:, None], indices]


# -- CONCAT / TILE (LLaMA's rotary embeddings) --------------------------------------------------------------

#: the types these data-movement operators copy as they are
_MOVED = (np.dtype(F32), np.dtype(np.int8), np.dtype(np.int16), np.dtype(I32), np.dtype(np.bool_))


def _concat(axis: int) -> Fn:
    """CONCAT: ``np.concatenate`` where the generic kernel's ERROR_IFs hold (same type and rank, equal
    dimensions off the axis), without its per-operand type checks."""

    def run(*xs: np.ndarray) -> Any:
        if not xs or not all(isinstance(x, np.ndarray) for x in xs):
            return NotImplemented
        first = xs[0]
        rank = first.ndim
        if first.dtype not in _MOVED or not 0 <= axis < rank:
            return NotImplemented
        for x in xs[1:]:
            if x.dtype != first.dtype or x.ndim != rank or any(
                    x.shape[i] != first.shape[i] for i in range(rank) if i != axis):
                return NotImplemented
        return np.concatenate(xs, axis=axis)

    return run


def _tile(multiples: tuple[int, ...]) -> Fn:
    def run(x: np.ndarray, m: np.ndarray) -> Any:
        if not (isinstance(x, np.ndarray) and x.dtype in _MOVED and x.ndim == len(multiples)
                and all(k >= 1 for k in multiples)):
            return NotImplemented
        return np.tile(x, multiples)

    return run


# -- int32 ADD / SUB ----------------------------------------------------------------------------------------


def _int32_arith(fn: np.ufunc) -> Fn:
    """int32 ADD / SUB (index arithmetic): in int64, as the generic kernel, declining when a result leaves
    int32 (its REQUIRE). fp32 operands are :mod:`fast`'s (this form declines them)."""

    def run(a: np.ndarray, b: np.ndarray) -> Any:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == I32 and b.dtype == I32
                and _broadcastable(a, b)):
            return NotImplemented
        r = fn(a, b, dtype=np.int64)
        if r.size and (r.min() < _INT32_RANGE[0] or r.max() > _INT32_RANGE[1]):
            return NotImplemented
        return r.astype(I32)

    return run


def _broadcastable(a: np.ndarray, b: np.ndarray) -> bool:
    """TOSA's broadcast rule (equal ranks, a dimension broadcasts only from 1), on which numpy's agrees."""
    return a.ndim == b.ndim and all(x == y or x == 1 or y == 1 for x, y in zip(a.shape, b.shape, strict=True))


# -- logical operators --------------------------------------------------------------------------------------

_LOGICAL: dict[str, np.ufunc] = {"LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or,
                                 "LOGICAL_XOR": np.logical_xor}


def _logical(fn: np.ufunc) -> Fn:
    def run(a: np.ndarray, b: np.ndarray) -> Any:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == np.bool_
                and b.dtype == np.bool_ and _broadcastable(a, b)):
            return NotImplemented
        return fn(a, b)

    return run


def _logical_not(a: np.ndarray) -> Any:
    if not (isinstance(a, np.ndarray) and a.dtype == np.bool_):
        return NotImplemented
    return np.logical_not(a)


# -- CAST ---------------------------------------------------------------------------------------------------

#: the casts here, all exact (TOSA's CAST rows): int to bool (``x != 0``), bool to int (0 / 1), int8 / int16
#: to a wider int and int8 / int16 / int32 to fp32 (round to nearest even for int32, as the generic kernel's
#: float64 value rounded once); float to int (rounding, saturating) and narrowing casts stay generic
_INTS = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(I32))
_CASTS = ("bool", "int8", "int16", "int32", "float32")
_EXACT_FROM: dict[np.dtype, tuple[np.dtype, ...]] = {
    np.dtype(np.bool_): _INTS,
    np.dtype(np.int8): (np.dtype(np.int16), np.dtype(I32), np.dtype(F32)),
    np.dtype(np.int16): (np.dtype(I32), np.dtype(F32)),
    np.dtype(I32): (np.dtype(F32),),
}


def _cast(to: np.dtype | None) -> Fn | None:
    if to is None:
        return None

    def run(x: np.ndarray) -> Any:
        if not isinstance(x, np.ndarray):
            return NotImplemented
        if to == np.bool_:
            return x != 0 if x.dtype in _INTS else NotImplemented
        return x.astype(to) if to in _EXACT_FROM.get(x.dtype, ()) else NotImplemented

    return run
