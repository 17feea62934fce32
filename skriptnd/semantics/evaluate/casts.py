"""Casts of values to int, real and bool, and the default values of types (§2.4, casting)."""

from __future__ import annotations

import math
from collections.abc import Callable

from skriptnd.semantics.evaluate.errors import EvalError, _OpError
from skriptnd.semantics.evaluate.formatting import format_value
from skriptnd.semantics.evaluate.kinds import _intlike, _kind, _type_name
from skriptnd.semantics.values import Value
from skriptnd.source import Span

_DEFAULTS: dict[str, Value] = {"int": 0, "real": 0.0, "bool": False, "str": ""}


def _cast_to(type_name: str, span: Span) -> Callable[[Value], Value]:
    """The element cast to int, real or bool (§2.4, casting); str is not castable."""
    if type_name == "int":
        return _to_int
    if type_name == "real":
        return _to_real
    if type_name == "bool":
        return _to_bool
    if type_name == "str":
        raise EvalError("E0305", "values cannot be cast to str; use string formatting, as in \"{x}\"", span)
    raise EvalError("E0305", f"cannot cast to '{type_name}'; casts are to int, real or bool", span)


def _cast_source(value: Value, target: str) -> None:
    k = _kind(value)
    if k == "str":
        raise _OpError("E0305", f"a str cannot be cast to {target}")
    if k == "tensor":
        raise _OpError("E0503", f"casting a tensor to {target} is not a compile-time expression")
    if k not in ("int", "real", "bool"):
        raise _OpError("E0305", f"cannot cast {_type_name(value)} to {target}")


def _to_int(v: Value) -> int:
    t = type(v)
    if t is int or _intlike(v):
        return v
    if t is bool:
        return int(v)
    if t is float:
        if not math.isfinite(v):
            raise _OpError("E0502", f"cannot cast {format_value(v)} to int")
        return int(v)  # truncates toward zero
    _cast_source(v, "int")
    raise AssertionError  # pragma: no cover


def _to_real(v: Value) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int or t is bool or _intlike(v):
        try:
            return float(v)
        except OverflowError:
            raise _OpError("E0502", f"int {v} is too large for a real") from None
    _cast_source(v, "real")
    raise AssertionError  # pragma: no cover


def _to_bool(v: Value) -> bool:
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float or _intlike(v):
        return v != 0
    _cast_source(v, "bool")
    raise AssertionError  # pragma: no cover
