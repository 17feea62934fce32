"""The evaluator's errors: located `EvalError`s, and `_OpError`s that value operations raise.

Value-level operations (operators.py, folds.py, casts.py, functions.py) know no syntax, so
they raise `_OpError` naming the operand to blame; the node handlers turn it into an
`EvalError` at that operand's span (walk.py, `_raise_op`).
"""

from __future__ import annotations

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import Span


class EvalError(Exception):
    """A located evaluation error; `to_diagnostic()` turns it into a `Diagnostic`."""

    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__(code, message, span, hint)
        self.code = code
        self.message = message
        self.span = span
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.span}: [{self.code}] {self.message}"

    def to_diagnostic(self) -> Diagnostic:
        return Diagnostic(self.code, self.message, self.span, hint=self.hint)


class Unbound(EvalError):
    """An identifier has no value in the environment (yet): the expression is not evaluable."""

    def __init__(self, name: str, span: Span) -> None:
        super().__init__("E0201", f"unknown identifier '{name}'", span)
        self.args = (name, span)
        self.name = name


class _OpError(Exception):
    """An error inside a value-level operation; the caller attaches the span (side picks the operand)."""

    __slots__ = ("code", "message", "side")

    def __init__(self, code: str, message: str, side: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.side = code, message, side
