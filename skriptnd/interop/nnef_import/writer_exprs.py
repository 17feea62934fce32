"""Small helpers for literal arguments in emitted calls."""

from __future__ import annotations

from skriptnd.interop.writer import Expr, literal


def real(value: float) -> Expr:
    return Expr(literal(float(value)))


def integer(value: int) -> Expr:
    return Expr(literal(int(value)))
