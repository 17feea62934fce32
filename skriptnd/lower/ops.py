"""Element-wise operations of @lower formulas on concrete values (spec §2.4 semantics).

Operands are Python scalars or `Arr`s (arrays over the index space with masks); results are
the same. Masks propagate: validity is the conjunction of the operands' (a skipped bounded
access anywhere skips the whole contribution), errors the disjunction (they are only reported
if the erroneous entry is actually assigned, so an unselected select branch may fail).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from skriptnd.lower.values import (
    INT,
    REAL,
    Aff,
    Arr,
    Concrete,
    Data,
    LoweringError,
    Mask,
    Scalar,
    Staged,
    kind_of,
)


def conc(v: Staged) -> Staged:
    """A concrete operand: an `Aff` becomes its array."""
    return Arr(v.arr()) if isinstance(v, Aff) else v


def _parts(v: Concrete) -> tuple[Concrete, Mask, Mask]:
    if isinstance(v, Arr):
        return v.data, v.valid, v.err
    return v, None, None


def mask_and(a: Mask, b: Mask) -> Mask:
    if a is None:
        return b
    if b is None:
        return a
    return np.logical_and(a, b)


def mask_or(a: Mask, b: Mask) -> Mask:
    if a is None:
        return b
    if b is None:
        return a
    return np.logical_or(a, b)


def _result(data: Concrete, valid: Mask, err: Mask, arrays: bool) -> Concrete:
    if not arrays:
        if isinstance(data, np.ndarray | np.generic):
            return data.item()
        return data
    data = np.asarray(data)
    return Arr(data, valid, err)


def _py_zero_check(b: Data, what: str) -> None:
    if not isinstance(b, np.ndarray) and b == 0:
        raise LoweringError(what)


# ---------------------------------------------------------------- binary operators


def _div(a: Data, b: Data) -> tuple[Data, Mask]:
    if kind_of(a) == "int":
        zero = np.equal(b, 0)
        if np.any(zero):
            return np.floor_divide(a, np.where(zero, 1, b)), zero
        return np.floor_divide(a, b), None
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b), None


def _ceil_div(a: Data, b: Data) -> tuple[Data, Mask]:
    if kind_of(a) == "int":
        zero = np.equal(b, 0)
        if np.any(zero):
            return -np.floor_divide(-np.asarray(a), np.where(zero, 1, b)), zero
        return -np.floor_divide(np.negative(a), b), None
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.ceil(np.true_divide(a, b)), None


def _mod(a: Data, b: Data) -> tuple[Data, Mask]:
    zero = np.equal(b, 0)
    if kind_of(a) == "int" and np.any(zero):
        return np.mod(a, np.where(zero, 1, b)), zero
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b), (zero if np.any(zero) else None)


def _pow(a: Data, b: Data) -> tuple[Data, Mask]:
    if kind_of(a) == "int":
        neg = np.less(b, 0)
        if np.any(neg):
            return np.power(a, np.where(neg, 0, b)), neg
        return np.power(a, b), None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(a, b), None


def _plain(fn: Callable[[Data, Data], Data]) -> Callable[[Data, Data], tuple[Data, Mask]]:
    def apply(a: Data, b: Data) -> tuple[Data, Mask]:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(a, b), None

    return apply


_BINARY: dict[str, Callable[[Data, Data], tuple[Data, Mask]]] = {
    "+": _plain(np.add),
    "-": _plain(np.subtract),
    "*": _plain(np.multiply),
    "/": _div,
    "\\": _ceil_div,
    "%": _mod,
    "**": _pow,
    # §2.4: `a <? b` is `a < b ? a : b`, `a >? b` is `a > b ? a : b`
    "<?": _plain(lambda a, b: np.where(np.less(a, b), a, b)),
    ">?": _plain(lambda a, b: np.where(np.greater(a, b), a, b)),
    "<": _plain(np.less),
    "<=": _plain(np.less_equal),
    ">": _plain(np.greater),
    ">=": _plain(np.greater_equal),
    "==": _plain(np.equal),
    "!=": _plain(np.not_equal),
    "&&": _plain(np.logical_and),
    "||": _plain(np.logical_or),
    "^": _plain(np.logical_xor),
    "=>": _plain(lambda a, b: np.logical_or(np.logical_not(a), b)),
}

BINARY_OPS = frozenset(_BINARY)


def binary(op: str, a: Concrete, b: Concrete) -> Concrete:
    a, b = conc(a), conc(b)
    arrays = isinstance(a, Arr) or isinstance(b, Arr)
    da, va, ea = _parts(a)
    db, vb, eb = _parts(b)
    if not arrays and op in ("/", "\\", "%") and kind_of(da) == "int":
        _py_zero_check(db, "division by zero" if op != "%" else "modulo by zero")
    if not arrays and op == "**" and kind_of(da) == "int" and db < 0:
        raise LoweringError(f"negative exponent in int power {da} ** {db}")
    try:
        data, err = _BINARY[op](da, db)
    except KeyError:
        raise LoweringError(f"operator '{op}' cannot be evaluated in @lower") from None
    if not arrays:
        return np.asarray(data).item()
    return Arr(np.asarray(data), mask_and(va, vb), mask_or(mask_or(ea, eb), err))


# ---------------------------------------------------------------- unary operators and built-ins


def unary(op: str, a: Concrete) -> Concrete:
    a = conc(a)
    d, v, e = _parts(a)
    if op == "-":
        data = np.negative(d)
    elif op == "+":
        data = d
    elif op == "!":
        data = np.logical_not(d)
    else:
        raise LoweringError(f"operator '{op}' cannot be evaluated in @lower")
    return _result(data, v, e, isinstance(a, Arr))


def _round(x: Data) -> Data:
    """Round half away from zero, exactly (x - floor(x) is exact in binary floating point)."""
    ax = np.abs(x)
    f = np.floor(ax)
    return np.copysign(np.where(ax - f >= 0.5, f + 1, f), x)


_ERF_SERIES = [2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(12)]


def erf(x: Data) -> Data:
    """The error function, vectorised (no scipy): a Taylor series near zero, the Chebyshev
    fit of erfc (fractional error < 1.2e-7) elsewhere; computed in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    z = np.abs(x64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        erfc = t * np.exp(-z * z + poly)
    far = np.copysign(1.0 - erfc, x64)
    x2 = x64 * x64
    acc = np.zeros_like(x64)
    for c in reversed(_ERF_SERIES):
        acc = acc * x2 + c
    near = acc * x64
    out = np.where(z < 0.5, near, far)
    return out.astype(np.asarray(x).dtype) if isinstance(x, np.ndarray) else out


def _frac(x: Data) -> Data:
    return x - np.floor(x)


_REAL_FUNCTIONS: dict[str, Callable[[Data], Data]] = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": erf, "round": _round, "floor": np.floor, "ceil": np.ceil, "frac": _frac,
    "abs": np.abs, "sign": np.sign,
}

BUILTINS = frozenset(_REAL_FUNCTIONS)


def builtin(name: str, a: Concrete) -> Concrete:
    a = conc(a)
    d, v, e = _parts(a)
    fn = _REAL_FUNCTIONS[name]
    arrays = isinstance(a, Arr)
    if not arrays:
        k = kind_of(d)
        if k == "int" and name in ("abs", "sign"):
            return int(np.sign(d)) if name == "sign" else abs(d)
        with np.errstate(all="ignore"):
            return float(fn(np.float64(d)))
    with np.errstate(all="ignore"):
        data = fn(d)
    return Arr(np.asarray(data), v, e)


def cast(kind: str, a: Concrete) -> Concrete:
    """`int(x)`, `real(x)`, `bool(x)` (§2.4: int truncates toward zero; inf/nan cannot be cast)."""
    a = conc(a)
    d, v, e = _parts(a)
    src = kind_of(d)
    if not isinstance(a, Arr):
        if kind == "real":
            return float(d)
        if kind == "bool":
            return bool(d != 0)
        if kind == "int":
            if src == "real" and not math.isfinite(d):
                raise LoweringError(f"cannot cast {d} to int")
            return int(d)
        raise LoweringError(f"cannot cast to '{kind}'")
    err = None
    if kind == "real":
        data = d.astype(REAL, copy=False)
    elif kind == "bool":
        data = d if src == "bool" else np.not_equal(d, 0)
    elif kind == "int":
        if src == "real":
            finite = np.isfinite(d)
            if not finite.all():
                err = np.logical_not(finite)
                d = np.where(finite, d, 0)
            data = np.trunc(d).astype(INT)
        else:
            data = d.astype(INT, copy=False)
    else:
        raise LoweringError(f"cannot cast to '{kind}'")
    return Arr(data, v, mask_or(e, err))


def select(c: Concrete, a: Concrete, b: Concrete) -> Concrete:
    """Element-wise `c ? a : b` (both branches computed; masks follow the chosen branch)."""
    c, a, b = conc(c), conc(a), conc(b)
    dc, vc, ec = _parts(c)
    da, va, ea = _parts(a)
    db, vb, eb = _parts(b)
    data = np.where(dc, da, db)
    if not (isinstance(c, Arr) or isinstance(a, Arr) or isinstance(b, Arr)):
        return data.item()
    valid = vc
    if va is not None or vb is not None:
        valid = mask_and(valid, np.where(dc, True if va is None else va, True if vb is None else vb))
    err = ec
    if ea is not None or eb is not None:
        err = mask_or(err, np.where(dc, False if ea is None else ea, False if eb is None else eb))
    return Arr(np.asarray(data), valid, err)



# ---------------------------------------------------------------- accumulation (§2.12)

#: The ufunc of each accumulating assignment operator.
ACCUMULATORS: dict[str, np.ufunc] = {
    "+=": np.add,
    "*=": np.multiply,
    "&=": np.logical_and,
    "|=": np.logical_or,
    "<?=": np.minimum,
    ">?=": np.maximum,
}


def identity(op: str, kind: str) -> Scalar:
    """The null element of an accumulation (`<?=`/`>?=`: the dtype's extreme values, ±inf for reals)."""
    if op == "+=":
        return False if kind == "bool" else 0
    if op == "*=":
        return True if kind == "bool" else 1
    if op == "&=":
        return True
    if op == "|=":
        return False
    if op in ("<?=", ">?="):
        low = op == ">?="
        if kind == "real":
            return -np.inf if low else np.inf
        if kind == "int":
            info = np.iinfo(INT)
            return int(info.min if low else info.max)
        if kind == "bool":
            return not low
    raise LoweringError(f"no null element for '{op}' on {kind}")
