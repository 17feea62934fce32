"""Affine shape expressions (spec §2.6): `a * x + b` in one not-yet-declared identifier x,
with a and b built from integer literals only. Such an extent or pack length *declares* x,
and binding a concrete value v to it deduces x = (v - b) / a.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from skriptnd.syntax import ast


@dataclass(frozen=True, slots=True)
class Affine:
    """value = scale * symbol + offset."""

    symbol: str
    scale: int
    offset: int

    def solve(self, value: int) -> int | None:
        """The symbol's value for a bound value, or None if no integer solves it."""
        diff = value - self.offset
        if self.scale == 0 or diff % self.scale:
            return None
        return diff // self.scale

    def apply(self, x: int) -> int:
        return self.scale * x + self.offset


class _NotAffine(Exception):
    pass


def _linear(expr: ast.Expr, unknown: Callable[[str], bool]) -> tuple[str | None, int, int]:
    """(symbol or None, scale, offset) for an expression linear in at most one unknown name."""
    if isinstance(expr, ast.IntLit):
        return None, 0, expr.value
    if isinstance(expr, ast.Name):
        if unknown(expr.id):
            return expr.id, 1, 0
        raise _NotAffine
    if isinstance(expr, ast.Unary) and expr.op in "+-":
        sym, a, b = _linear(expr.operand, unknown)
        return (sym, -a, -b) if expr.op == "-" else (sym, a, b)
    if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
        ls, la, lb = _linear(expr.left, unknown)
        rs, ra, rb = _linear(expr.right, unknown)
        if expr.op == "*":
            if ls is not None and rs is not None:
                raise _NotAffine
            if ls is None and rs is None:
                return None, 0, lb * rb
            return (ls, la * rb, lb * rb) if ls is not None else (rs, ra * lb, rb * lb)
        if ls is not None and rs is not None and ls != rs:
            raise _NotAffine
        sign = 1 if expr.op == "+" else -1
        return ls or rs, la + sign * ra, lb + sign * rb
    raise _NotAffine


def affine(expr: ast.Expr, unknown: Callable[[str], bool]) -> Affine | None:
    """The affine form of expr if it is `a * x + b` with x unknown (a != 0), else None."""
    try:
        sym, scale, offset = _linear(expr, unknown)
    except _NotAffine:
        return None
    if sym is None or scale == 0:
        return None
    return Affine(sym, scale, offset)


def unknown_names(expr: ast.Expr, known: Callable[[str], bool]) -> set[str]:
    """Identifiers in expr that are not known yet (format fields excluded)."""
    return {n.id for n in expr.walk() if isinstance(n, ast.Name) and not known(n.id)}
