"""Fast kernels for the small operators of attention blocks (models/transformer): element-wise
arithmetic (`math.add`, `sub`, `mul`, `div`, `sqrt`, `exp`), `math.moments`, `nn.softmax`,
`nn.gelu`, `layout.transpose` and `layout.reshape`.

Each is one or a few numpy calls instead of a compiled `@lower` plan (or a `@compose` graph of
several plans), which is what costs in a transformer block of small tensors: per operation tens of
microseconds of plan overhead for microseconds of arithmetic. The values are the definitions':

* binary arithmetic without `lhs_align` / `rhs_align`: the definitions align both shapes to the
  right and broadcast extents of 1, which is numpy's broadcasting; float32 only;
* `math.moments{axes, squeeze}`: its `@compose`, mean = sum / count over `axes`, variance = the
  mean of the squared differences from the (unsqueezed) mean, in float32;
* `nn.softmax{axes}`: its `@compose`, exp(x - max) / sum(exp(x - max)) over `axes`;
* `nn.gelu`: the `@lower` formula of each `approximate` choice; the exact one, 0.5 x (1 + erf(x / sqrt 2)),
  in float32 with the erfc fit of skriptnd.lower.ops.erf (see _gelu_erf);
* `layout.transpose{axis, perm}`: axes before `axis` stay, axis `axis + j` of the output is input
  axis `perm[j]` (negative values counted from the rank); `layout.reshape`: the row-major
  reinterpretation into the composed output shape (a copy, as a plan would return).

Summation order inside the reductions may differ from the plans' (numpy's pairwise sums), so
results agree to float32 rounding. A case not handled (another dtype, a dynamic output shape for
reshape, alignment attributes, a result whose shape is not the composed one) returns
NotImplemented and the executor runs the definition.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.execute.executor import kernel

__all__ = ["POINTWISE_KERNELS"]

#: The operators that have a kernel here (qualified names).
POINTWISE_KERNELS = ("math.add", "math.sub", "math.mul", "math.div", "math.sqrt", "math.exp", "math.moments",
                     "nn.softmax", "nn.gelu", "layout.transpose", "layout.reshape")

_F32 = np.dtype(np.float32)


def _sym(op: Operation, name: str) -> Any:
    """An attribute or `@using` symbol of the bound operation (None when absent)."""
    value = op.attribs.get(name)
    if value is None and op.binding is not None:
        value = op.binding.env.get(name)
    return value


def _ints(v: object) -> list[int] | None:
    try:
        return [int(x) for x in v]
    except (TypeError, ValueError):
        return None


def _fits(op: Operation, result: np.ndarray, index: int = 0) -> bool:
    """Whether `result` has the composed shape of output `index` (dynamic extents match anything)."""
    out = op.outputs[index] if len(op.outputs) > index else None
    if out is None or isinstance(out, list):
        return False
    shape = out.shape
    return len(shape) == result.ndim and all(d is None or d == r for d, r in zip(shape, result.shape, strict=True))


def _real(*args: Any) -> bool:
    return all(isinstance(a, np.ndarray) and a.dtype == _F32 for a in args)


def _axes(op: Operation, rank: int, default: list[int]) -> tuple[int, ...] | None:
    value = _sym(op, "axes")
    axes = default if value is None else _ints(value)
    if axes is None or any(not -rank <= a < rank for a in axes):
        return None
    axes = [a + rank if a < 0 else a for a in axes]
    return tuple(axes) if len(set(axes)) == len(axes) else None


# ============================================================================ element-wise


def _binary(ufunc: np.ufunc) -> Any:
    def run(op: Operation, args: list[Any]) -> list[Any] | Any:
        if len(args) != 2 or not _real(*args) or _sym(op, "lhs_align") is not None \
                or _sym(op, "rhs_align") is not None:
            return NotImplemented
        x, y = args
        try:
            z = np.asarray(ufunc(x, y))
        except ValueError:  # shapes that do not broadcast: the definition reports it
            return NotImplemented
        return [z] if _fits(op, z) else NotImplemented

    return run


def _unary(ufunc: np.ufunc) -> Any:
    def run(op: Operation, args: list[Any]) -> list[Any] | Any:
        if len(args) != 1 or not _real(*args):
            return NotImplemented
        with np.errstate(invalid="ignore", over="ignore"):
            z = np.asarray(ufunc(args[0]))
        return [z] if _fits(op, z) else NotImplemented

    return run


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply)):
    kernel(f"math.{_name}")(_binary(_ufunc))


@kernel("math.div")
def div(op: Operation, args: list[Any]) -> list[Any] | Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return _binary(np.divide)(op, args)


kernel("math.sqrt")(_unary(np.sqrt))
kernel("math.exp")(_unary(np.exp))


# ============================================================================ reductions


@kernel("math.moments")
def moments(op: Operation, args: list[Any]) -> list[Any] | Any:
    """mean = sum / count and variance = mean((x - mean)^2) over `axes` (default: all)."""
    if len(args) != 1 or not _real(args[0]):
        return NotImplemented
    x = args[0]
    axes = _axes(op, x.ndim, list(range(x.ndim)))
    squeeze = _sym(op, "squeeze")
    if axes is None or squeeze not in (None, True, False):
        return NotImplemented
    count = np.float32(math.prod(x.shape[a] for a in axes))
    mean = np.sum(x, axis=axes, keepdims=True) / count
    diff = x - mean
    variance = np.sum(np.square(diff, out=diff), axis=axes, keepdims=True) / count
    if squeeze:
        mean, variance = np.squeeze(mean, axis=axes), np.squeeze(variance, axis=axes)
    mean, variance = np.asarray(mean, dtype=_F32), np.asarray(variance, dtype=_F32)
    if not (_fits(op, mean, 0) and _fits(op, variance, 1)):
        return NotImplemented
    return [mean, variance]


@kernel("nn.softmax")
def softmax(op: Operation, args: list[Any]) -> list[Any] | Any:
    """exp(x - max) / sum(exp(x - max)) over `axes` (default [1])."""
    if len(args) != 1 or not _real(args[0]) or args[0].ndim == 0:
        return NotImplemented
    x = args[0]
    axes = _axes(op, x.ndim, [1])
    if axes is None:
        return NotImplemented
    e = np.subtract(x, np.max(x, axis=axes, keepdims=True))
    with np.errstate(over="ignore", invalid="ignore"):
        np.exp(e, out=e)
        e /= np.sum(e, axis=axes, keepdims=True)
    return [e] if _fits(op, e) else NotImplemented


_RSQRT2 = np.float32(1.0 / math.sqrt(2.0))
_TANH_SCALE = math.sqrt(2.0 / math.pi)
#: The Chebyshev fit of erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0 (fractional error
#: < 1.2e-7), the fit skriptnd.lower.ops.erf uses away from 0: P's coefficients, highest first
_ERFC = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
         1.00002368, -1.26551223)


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)) in float32, in place on a few temporaries: 1 + erf(u) is
    2 - erfc(|u|) for u >= 0 and erfc(|u|) for u < 0 (no cancellation for negative x, where the
    definition's 1 + erf rounds to 0 in float32 below about -5.5: absolute differences < 1e-7)."""
    u = np.multiply(x, _RSQRT2)
    z = np.abs(u)
    t = np.multiply(z, 0.5)
    t += 1.0
    np.reciprocal(t, out=t)
    p = np.multiply(t, _ERFC[0])
    for c in _ERFC[1:-1]:
        p += c
        p *= t
    p += _ERFC[-1]
    np.multiply(z, z, out=z)
    p -= z
    np.exp(p, out=p)
    p *= t  # erfc(|u|)
    y = np.subtract(2.0, p)
    np.copyto(y, p, where=u < 0)
    y *= x
    y *= 0.5
    return y


@kernel("nn.gelu")
def gelu(op: Operation, args: list[Any]) -> list[Any] | Any:
    if len(args) != 1 or not _real(args[0]):
        return NotImplemented
    x = args[0]
    approximate = _sym(op, "approximate")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if approximate is None or approximate == "":
            y = _gelu_erf(x)
        elif approximate == "TANH":
            y = 0.5 * x * (1.0 + np.tanh(_TANH_SCALE * (x + 0.044715 * x ** 3.0)))
        elif approximate == "SIGMOID":
            y = x / (1.0 + np.exp(-1.702 * x))
        else:
            return NotImplemented
    y = np.asarray(y, dtype=_F32)
    return [y] if _fits(op, y) else NotImplemented


# ============================================================================ layout


@kernel("layout.transpose")
def transpose(op: Operation, args: list[Any]) -> list[Any] | Any:
    if len(args) != 1 or not isinstance(args[0], np.ndarray):
        return NotImplemented
    x = args[0]
    rank = x.ndim
    axis = _sym(op, "axis")
    axis = 0 if axis is None else int(axis)
    axis = axis + rank if axis < 0 else axis
    perm = _sym(op, "perm")
    perm = list(range(rank - 1, axis - 1, -1)) if perm is None else _ints(perm)
    if perm is None or not 0 <= axis <= rank:
        return NotImplemented
    perm = [p + rank if p < 0 else p for p in perm]
    order = list(range(axis)) + perm
    if sorted(order) != list(range(rank)):
        return NotImplemented
    y = np.ascontiguousarray(np.transpose(x, order))
    if y is x:
        y = x.copy()
    return [y] if _fits(op, y) else NotImplemented


@kernel("layout.reshape")
def reshape(op: Operation, args: list[Any]) -> list[Any] | Any:
    """The row-major reinterpretation of the input in the composed (static) output shape."""
    if not args or not isinstance(args[0], np.ndarray):
        return NotImplemented
    out = op.outputs[0] if op.outputs else None
    if out is None or isinstance(out, list) or any(d is None for d in out.shape):
        return NotImplemented
    shape = tuple(int(d) for d in out.shape)
    if math.prod(shape) != args[0].size:
        return NotImplemented
    return [np.array(args[0].reshape(shape))]
