"""Unary and binary operators on values (spec §2.4), applied element-wise to packs.

Each operator is a plain function of Python values: it raises `_OpError` (never an
`EvalError`), since it does not know where its operands come from.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from skriptnd.semantics.evaluate.errors import _OpError
from skriptnd.semantics.evaluate.formatting import format_value
from skriptnd.semantics.evaluate.kinds import (
    _NUM,
    _ORDERED,
    _intlike,
    _item_type,
    _kind,
    _pack_item_type,
    _type_name,
)
from skriptnd.semantics.values import NO_UNIFORM, Pack, TensorValue, Value

#: Largest int power computed exactly (in result bits); beyond that the model is surely wrong.
_MAX_POW_BITS = 1 << 20


def _bad_operands(op: str, a: Value, b: Value, allowed: tuple[str, ...]) -> _OpError:
    """The error for operands that are not both of one allowed type."""
    ka, kb = _kind(a), _kind(b)
    if ka == "tensor" or kb == "tensor":
        # A tensor in arithmetic is a tensor expression (@lower, @compose), never compile-time.
        return _OpError("E0503", f"operator '{op}' on a tensor ({_type_name(a)} {op} {_type_name(b)}) "
                                 "is not a compile-time expression", "left" if ka == "tensor" else "right")
    wanted = " or ".join(allowed)
    if ka not in allowed:
        return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} and {_type_name(b)} "
                                 f"(operands must be {wanted})", "left")
    if kb not in allowed:
        return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} and {_type_name(b)} "
                                 f"(operands must be {wanted})", "right")
    return _OpError("E0301", f"operator '{op}' needs operands of the same type, got {_type_name(a)} and "
                             f"{_type_name(b)} (no implicit conversion; cast with int() or real())")


def _numeric(op: str, f_int: Callable[[int, int], Value], f_real: Callable[[float, float], Value]) -> Callable[[Value, Value], Value]:
    """An arithmetic operator on int/int or real/real (§2.4: same type for both arguments)."""

    def apply(a: Value, b: Value) -> Value:
        t = type(a)
        if t is type(b):
            if t is int:
                return f_int(a, b)
            if t is float:
                return f_real(a, b)
        if _intlike(a) and _intlike(b):  # symbolic extents (SymInt) are ints too
            return f_int(a, b)
        raise _bad_operands(op, a, b, _NUM)

    return apply


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "division by zero", "right")
    return a // b  # §2.4: `/` rounds downwards for int


def _real_div(a: float, b: float) -> float:
    if b == 0.0:
        raise _OpError("E0502", "division by zero", "right")
    return a / b


def _int_ceil_div(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "division by zero", "right")
    return -(-a // b)  # §2.4: `\` rounds upwards


def _real_ceil_div(a: float, b: float) -> float:
    # Not in §2.4 (int only), but the `range` operator (§4.1.1) applies `\` to a generic num T.
    q = _real_div(a, b)
    return float(math.ceil(q)) if math.isfinite(q) else q


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "modulo by zero", "right")
    return a % b  # floor modulo: a == (a / b) * b + a % b with the flooring `/`


def _real_mod(a: float, b: float) -> float:
    # Reals too (docs/spec-errata.md S9): math.mod is generic over `T: num`; floor modulo as for ints.
    if b == 0:
        raise _OpError("E0502", "modulo by zero", "right")
    return a % b


def _int_pow(a: int, b: int) -> int:
    if b < 0:
        raise _OpError("E0502", f"negative exponent in int power {a} ** {b} (use real operands)", "right")
    if abs(a) > 1 and b * a.bit_length() > _MAX_POW_BITS:
        raise _OpError("E0502", f"int power {a} ** {b} is too large")
    return a**b


def _real_pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except ValueError:
        raise _OpError("E0502", f"real power {format_value(a)} ** {format_value(b)} is undefined") from None
    except OverflowError:
        raise _OpError("E0502", f"real power {format_value(a)} ** {format_value(b)} overflows") from None


def _minmax(op: str) -> Callable[[Value, Value], Value]:
    # §2.4: `a <? b` is shorthand for `a < b ? a : b` (and `>?` for `a > b ? a : b`).
    if op == "<?":
        def pick(a: Value, b: Value) -> Value:
            return a if a < b else b
    else:
        def pick(a: Value, b: Value) -> Value:
            return a if a > b else b
    return _numeric(op, pick, pick)


def _comparison(op: str, f: Callable[[Value, Value], bool]) -> Callable[[Value, Value], Value]:
    """`< <= > >= == !=`: any non-tensor type, the same on both sides (§2.4)."""

    def apply(a: Value, b: Value) -> bool:
        t = type(a)
        if t is type(b) and t in _COMPARABLE:
            return f(a, b)
        if _intlike(a) and _intlike(b):
            return f(a, b)
        raise _bad_operands(op, a, b, _ORDERED)

    return apply


_COMPARABLE = frozenset({int, float, bool, str})


def _logical(op: str, f: Callable[[bool, bool], bool]) -> Callable[[Value, Value], Value]:
    def apply(a: Value, b: Value) -> bool:
        if type(a) is bool and type(b) is bool:
            return f(a, b)
        raise _bad_operands(op, a, b, ("bool",))

    return apply


def _identity(a: Value, b: Value) -> bool:
    """`is` on concrete values (§2.4, identity testing): equality; a tensor only is itself."""
    ta = type(a)
    if hasattr(a, "expr") or hasattr(b, "expr"):  # symbolic extents: the same expression (§2.4)
        if _intlike(a) and _intlike(b):
            return (a if hasattr(a, "expr") else b).identical(b if hasattr(a, "expr") else a)
    if ta is type(b) and ta in _COMPARABLE:
        return a == b
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a is b
    raise _bad_operands("is", a, b, (*_ORDERED, "tensor"))


_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "+": _numeric("+", lambda a, b: a + b, lambda a, b: a + b),
    "-": _numeric("-", lambda a, b: a - b, lambda a, b: a - b),
    "*": _numeric("*", lambda a, b: a * b, lambda a, b: a * b),
    "/": _numeric("/", _int_div, _real_div),
    "\\": _numeric("\\", _int_ceil_div, _real_ceil_div),
    "%": _numeric("%", _int_mod, _real_mod),
    "**": _numeric("**", _int_pow, _real_pow),
    "<?": _minmax("<?"),
    ">?": _minmax(">?"),
    "<": _comparison("<", lambda a, b: a < b),
    "<=": _comparison("<=", lambda a, b: a <= b),
    ">": _comparison(">", lambda a, b: a > b),
    ">=": _comparison(">=", lambda a, b: a >= b),
    "==": _comparison("==", lambda a, b: a == b),
    "!=": _comparison("!=", lambda a, b: a != b),
    "&&": _logical("&&", lambda a, b: a and b),
    "||": _logical("||", lambda a, b: a or b),
    "^": _logical("^", lambda a, b: a != b),
    "=>": _logical("=>", lambda a, b: (not a) or b),
    "is": _identity,
}


def _negate(a: Value) -> Value:
    t = type(a)
    if t is int or t is float or _intlike(a):
        return -a
    raise _unary_error("-", a, "int or real")


def _plus(a: Value) -> Value:
    t = type(a)
    if t is int or t is float or _intlike(a):
        return a
    raise _unary_error("+", a, "int or real")


def _not(a: Value) -> bool:
    if type(a) is bool:
        return not a
    raise _unary_error("!", a, "bool")


def _unary_error(op: str, a: Value, wanted: str) -> _OpError:
    if isinstance(a, TensorValue):
        return _OpError("E0503", f"operator '{op}' on a tensor is not a compile-time expression")
    return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} (operand must be {wanted})")


_UNARY: dict[str, Callable[[Value], Value]] = {"-": _negate, "+": _plus, "!": _not}


# ---------------------------------------------------------------- element-wise application


def _derive(fn: Callable[..., Value], *uniforms: Value) -> Value:
    """The uniform value of an empty result: fn on the operands' uniform values (§2.4, `:=`).

    A type error is still an error (the uniform value has the item type); a value error
    (say a division by zero) only means there is no uniform value, since no item exists.
    """
    try:
        return fn(*uniforms)
    except _OpError as e:
        if e.code == "E0502":
            return NO_UNIFORM
        raise


def _map1(fn: Callable[[Value], Value], a: Value) -> Value:
    """fn element-wise over a pack (§2.4: operators on packs act element-wise)."""
    if not isinstance(a, Pack):
        return fn(a)
    items = [fn(x) for x in a]
    u = a.uniform
    if u is NO_UNIFORM:
        return Pack(items)
    return Pack(items, items[0] if items else _derive(fn, u))


def _map2(fn: Callable[[Value, Value], Value], a: Value, b: Value) -> Value:
    """fn element-wise with broadcasting of a non-pack; packs must have equal lengths (§2.4).

    The result is uniform when both operands are (a broadcast non-pack counts as uniform),
    so `[x ..(0)] + 1` keeps the uniform value x + 1 although it has no items.
    """
    pa, pb = isinstance(a, Pack), isinstance(b, Pack)
    if pa:
        if pb:
            if len(a) != len(b):
                raise _OpError("E0502", f"pack lengths differ: {len(a)} vs {len(b)}")
            items = [fn(x, y) for x, y in zip(a, b, strict=True)]
            ua, ub = a.uniform, b.uniform
        else:
            items = [fn(x, b) for x in a]
            ua, ub = a.uniform, b
    elif pb:
        items = [fn(a, y) for y in b]
        ua, ub = a, b.uniform
    else:
        return fn(a, b)
    if ua is NO_UNIFORM or ub is NO_UNIFORM:
        return Pack(items)
    return Pack(items, items[0] if items else _derive(fn, ua, ub))


def _contains(a: Value, b: Value) -> Value:
    """`x in a` (§2.4, containment): a is a pack; a pack x gives a pack of bools."""
    if not isinstance(b, Pack):
        raise _OpError("E0304", f"the right operand of 'in' must be a pack, got {_type_name(b)}", "right")
    item = _pack_item_type(b)

    def test(x: Value) -> bool:
        if item is not None and _item_type(x) != item:
            raise _OpError("E0301", f"'in' needs an item of the pack's type: {_type_name(x)} in {_type_name(b)}")
        if type(x) is float and x != x:
            return False  # nan equals nothing
        if isinstance(x, TensorValue):
            return any(x is y for y in b)  # a tensor is only itself, as with `is`
        return x in b

    return _map1(test, a)
