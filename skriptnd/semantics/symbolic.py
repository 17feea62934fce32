"""Symbolic extents (spec §2.4 `is`, §2.6.1, §3.1): shape inference over named dimensions.

A `SymInt` is an int that also carries a sympy expression over dimension symbols. It behaves as
its *hint* (a concrete sample value) wherever a decision is needed — a comparison, a length, a
branch — and every such decision is recorded as a *guard*: the condition under which the
symbolic result holds (PyTorch's symbolic shapes work the same way). Arithmetic keeps the
expression exact, so `infer("nn.conv", ..., [["N", 3, "H", "W"], ...])` yields output extents
like `floor((H - 1)/2) + 1` together with the guards that the operator's asserts imposed.

`is` compares symbolically, as §2.4 prescribes: two extents are identical only when their
expressions are, whatever their hints. Concrete invocations never create SymInts, so the
composition hot path stays on plain ints and never imports sympy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
from sympy.logic.boolalg import Boolean

from skriptnd.semantics.values import GUARD_STACK, Value, recording  # noqa: F401 - recording lives beside GUARD_STACK; re-exported

#: Exact arithmetic on expressions, and the same on the hints (plain ints).
ExprOp = Callable[[sympy.Expr, sympy.Expr], sympy.Expr]
IntOp = Callable[[int, int], int]
#: A relation on expressions (sympy.Eq, sympy.Lt, ...), and the same on the hints.
ExprRel = Callable[[sympy.Expr, sympy.Expr], Boolean]
IntRel = Callable[[int, int], bool]


def _guard(condition: Boolean | bool) -> None:
    if condition is sympy.true or condition is True:
        return
    current = GUARD_STACK[-1] if GUARD_STACK else None
    if current is not None and condition not in current:
        current.append(condition)


def _expr(x: int) -> sympy.Expr:
    return x.expr if isinstance(x, SymInt) else sympy.Integer(int(x))


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a named extent (a non-negative integer)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


class SymInt(int):
    """An extent: its hint (the int value) and its exact expression (`.expr`)."""

    expr: sympy.Expr

    def __new__(cls, hint: int, expr: sympy.Expr | int | str) -> Any:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        obj = super().__new__(cls, hint)
        obj.expr = expr
        return obj

    @classmethod
    def named(cls, name: str, hint: int) -> SymInt:
        return cls(hint, symbol(name))

    def __repr__(self) -> str:
        return f"SymInt({int(self)}, {self.expr})"

    def __str__(self) -> str:
        return str(self.expr)

    __hash__ = int.__hash__

    # -- arithmetic keeps the expression exact (an operand of any other type than int is
    # NotImplemented, as the data model lets any object reach a binary operator: hence `object`)

    def _lift(self, other: object, op: ExprOp, fn: IntOp) -> Any:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return SymInt(fn(int(self), int(other)), op(self.expr, _expr(other)))

    def _rlift(self, other: object, op: ExprOp, fn: IntOp) -> Any:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return SymInt(fn(int(other), int(self)), op(_expr(other), self.expr))

    def __add__(self, o: object) -> Any:
        return self._lift(o, lambda a, b: a + b, lambda a, b: a + b)

    def __radd__(self, o: object) -> Any:
        return self._rlift(o, lambda a, b: a + b, lambda a, b: a + b)

    def __sub__(self, o: object) -> Any:
        return self._lift(o, lambda a, b: a - b, lambda a, b: a - b)

    def __rsub__(self, o: object) -> Any:
        return self._rlift(o, lambda a, b: a - b, lambda a, b: a - b)

    def __mul__(self, o: object) -> Any:
        return self._lift(o, lambda a, b: a * b, lambda a, b: a * b)

    def __rmul__(self, o: object) -> Any:
        return self._rlift(o, lambda a, b: a * b, lambda a, b: a * b)

    def __floordiv__(self, o: object) -> Any:
        _guard(sympy.Ne(_expr(o), 0))
        return self._lift(o, lambda a, b: sympy.floor(a / b), lambda a, b: a // b)

    def __rfloordiv__(self, o: object) -> Any:
        _guard(sympy.Ne(self.expr, 0))
        return self._rlift(o, lambda a, b: sympy.floor(a / b), lambda a, b: a // b)

    def __mod__(self, o: object) -> Any:
        return self._lift(o, sympy.Mod, lambda a, b: a % b)

    def __rmod__(self, o: object) -> Any:
        return self._rlift(o, sympy.Mod, lambda a, b: a % b)

    def __pow__(self, o: object) -> Any:
        return self._lift(o, lambda a, b: a ** b, lambda a, b: a ** b)

    def __rpow__(self, o: object) -> Any:
        return self._rlift(o, lambda a, b: a ** b, lambda a, b: a ** b)

    def __neg__(self) -> Any:
        return SymInt(-int(self), -self.expr)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return SymInt(abs(int(self)), sympy.Abs(self.expr))

    # -- decisions take the hint's side and record a guard

    def _decide(self, other: object, rel: ExprRel, fn: IntRel) -> Any:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        condition = rel(self.expr, _expr(other))
        outcome = fn(int(self), int(other))
        if condition not in (sympy.true, sympy.false):
            _guard(condition if outcome else sympy.Not(condition))
        return outcome

    def __eq__(self, o: object) -> Any:  # type: ignore[override]
        return self._decide(o, sympy.Eq, lambda a, b: a == b)

    def __ne__(self, o: object) -> Any:  # type: ignore[override]
        return self._decide(o, sympy.Ne, lambda a, b: a != b)

    def __lt__(self, o: object) -> Any:
        return self._decide(o, sympy.Lt, lambda a, b: a < b)

    def __le__(self, o: object) -> Any:
        return self._decide(o, sympy.Le, lambda a, b: a <= b)

    def __gt__(self, o: object) -> Any:
        return self._decide(o, sympy.Gt, lambda a, b: a > b)

    def __ge__(self, o: object) -> Any:
        return self._decide(o, sympy.Ge, lambda a, b: a >= b)

    def __bool__(self) -> bool:
        outcome = int(self) != 0
        _guard(sympy.Ne(self.expr, 0) if outcome else sympy.Eq(self.expr, 0))
        return outcome

    def identical(self, other: int) -> bool:
        return identical(self, other)

    def __index__(self) -> int:
        """Used as a length or index: the result holds for this exact value only."""
        _guard(sympy.Eq(self.expr, int(self)))
        return int(self)


def identical(a: int, b: int) -> bool:
    """`a is b` for extents (§2.4): the same expression, whatever the values happen to be.

    A polynomial difference (the usual case: `n - 1`, `4*n - 1`) is decided by expanding it, its
    canonical form; only one with floor/Mod/division terms needs `simplify`, which is ~100x
    slower and imports sympy.physics on its first call."""
    return vanishes(_expr(a) - _expr(b))


def vanishes(diff: sympy.Expr) -> bool:
    """Whether a sympy expression is identically zero (see identical)."""
    if diff.is_Number:
        return diff == 0
    if diff.is_polynomial():
        return sympy.expand(diff) == 0
    return sympy.simplify(diff) == 0


def is_symbolic(value: Value) -> bool:
    return isinstance(value, SymInt)


def expression(value: int) -> sympy.Expr:
    """The sympy expression of an int or SymInt (ints become sympy Integers)."""
    return _expr(value)
