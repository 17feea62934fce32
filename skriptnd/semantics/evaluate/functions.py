"""The built-in functions of one value (§2.4): `sqrt`, `round`, `abs`, ... over int and real."""

from __future__ import annotations

import math
from collections.abc import Callable

from skriptnd.semantics.builtins import BUILTIN_FUNCTIONS
from skriptnd.semantics.evaluate.errors import _OpError
from skriptnd.semantics.evaluate.formatting import format_value
from skriptnd.semantics.evaluate.kinds import _intlike, _type_name
from skriptnd.semantics.values import TensorValue, Value


def _real_fn(name: str, f: Callable[[float], float]) -> Callable[[Value], float]:
    """A §2.4 built-in of a real argument: domain errors (log(0), sqrt(-1)) are evaluation errors."""

    def apply(x: Value) -> float:
        if type(x) is not float:
            raise _fn_type_error(name, x, "real")
        try:
            return f(x)
        except ValueError:
            raise _OpError("E0502", f"{name}({format_value(x)}) is undefined") from None
        except OverflowError:
            raise _OpError("E0502", f"{name}({format_value(x)}) overflows") from None

    return apply


def _fn_type_error(name: str, x: Value, wanted: str) -> _OpError:
    if isinstance(x, TensorValue):
        return _OpError("E0503", f"{name}() of a tensor is not a compile-time expression")
    return _OpError("E0302", f"{name}() needs a {wanted} argument, got {_type_name(x)}")


def _round(x: float) -> float:
    """Round half away from zero (exact: x - floor(x) is exact in binary floating point)."""
    if not math.isfinite(x):
        return x
    if x < 0:
        return -_round(-x)
    f = math.floor(x)
    return float(f + 1 if x - f >= 0.5 else f)


def _floor(x: float) -> float:
    return float(math.floor(x)) if math.isfinite(x) else x


def _ceil(x: float) -> float:
    return float(math.ceil(x)) if math.isfinite(x) else x


def _frac(x: float) -> float:
    """The fractional part x - floor(x), in [0, 1) (as GLSL fract)."""
    return x - math.floor(x) if math.isfinite(x) else math.nan


def _abs(x: Value) -> Value:
    t = type(x)
    if t is int or t is float or _intlike(x):
        return abs(x)
    raise _fn_type_error("abs", x, "int or real")


def _sign(x: Value) -> Value:
    t = type(x)
    if t is int or _intlike(x):
        return (x > 0) - (x < 0)
    if t is float:
        if x != x:
            return x
        return float((x > 0) - (x < 0))
    raise _fn_type_error("sign", x, "int or real")


_BUILTINS: dict[str, Callable[[Value], Value]] = {
    **{
        name: _real_fn(name, getattr(math, name))
        for name in ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
                     "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf")
    },
    "round": _real_fn("round", _round),
    "floor": _real_fn("floor", _floor),
    "ceil": _real_fn("ceil", _ceil),
    "frac": _real_fn("frac", _frac),
    "abs": _abs,
    "sign": _sign,
}
assert set(_BUILTINS) == BUILTIN_FUNCTIONS
