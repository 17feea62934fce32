"""What every part of the parse-tree transform shares (skriptnd.syntax.transform assembles the rules).

The tables of the grammar's operators and reserved words, the intermediate values some rules return
before the rule above them knows what they mean (`Items` of `[...]`, `Slice`, `Clause`...), and
`TransformBase`: one file's path, text, diagnostics and the span and error helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Token
from lark.tree import Meta

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast

FOLDABLE = {"+", "*", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "<?", ">?", ":="}
CUMULATIVE = {"+", "*", "&&", "||", "<?", ">?"}
PROPERTIES = {"shape", "rank", "size"}
#: Digits an integer literal may have: Python's limit for int(text) (sys.get_int_max_str_digits()).
MAX_INT_DIGITS = 4300
ABSTRACT_TYPES = {"type", "arith", "num"}

#: Binding strength of the binary operators of a chain (docs/grammar.md, levels 4 to 11).
PRECEDENCE = {
    "IMPLIES": 4, "OR": 5, "XOR": 6, "AND": 7,
    "CMP_OP": 8, "LT": 8, "IS": 8, "IN": 8, "UNIFORM": 8,
    "MINMAX": 9, "ADD_OP": 10, "STAR": 11, "MUL_OP": 11,
}
RIGHT_ASSOC = {"IMPLIES"}

#: Keywords that can never be names. `is` and `in` are operators only between operands, and
#: stay usable as names elsewhere: the spec's own conv example (§2.1) names an extent `is`.
RESERVED = frozenset(
    "if then elif else with for while do unroll yield optional graph operator public version extension import "
    "true false inf pi type arith num int real bool str".split())



class TypeArgs(tuple):
    pass


class Attrs(tuple):
    pass


class Items:
    """Contents of `[...]`, before we know whether it is a list, a subscript or an access."""

    __slots__ = ("items", "trailing_comma", "span")

    def __init__(self, items: list[ast.Expr | Slice | ZipItem], trailing_comma: bool, span: Span) -> None:
        self.items = items
        self.trailing_comma = trailing_comma
        self.span = span


class Slice:
    __slots__ = ("start", "stop", "step", "span")

    def __init__(self, start: ast.Expr | None, stop: ast.Expr | None, step: ast.Expr | None, span: Span) -> None:
        self.start, self.stop, self.step, self.span = start, stop, step, span


class ZipItem:
    __slots__ = ("items", "span")

    def __init__(self, items: list[ast.Expr], span: Span) -> None:
        self.items, self.span = items, span


class Bound:
    __slots__ = ("value", "span")

    def __init__(self, value: ast.Expr, span: Span) -> None:
        self.value, self.span = value, span


class Distinct:
    pass


class RankCapture(str):
    pass


class Clause:
    """A prefix or clause of a larger rule (`with`, `for`, `while`, `unroll`, an import...): its kind, and its
    transformed children, whose shape depends on the kind (the rule that consumes it knows which)."""

    __slots__ = ("kind", "items", "span")

    def __init__(self, kind: str, items: object, span: Span) -> None:
        self.kind, self.items, self.span = kind, items, span


def without_tokens(children: list[Any]) -> list[Any]:
    """Children without punctuation tokens."""
    return [c for c in children if not isinstance(c, Token)]


class TransformBase:
    """The state of one file's transform (its path, text and diagnostics) and the helpers every rule uses."""

    def __init__(self, path: str, text: str, parse_field: Callable[[str, int, int], ast.Expr | None]) -> None:
        self.path = path
        self.text = text
        self.lines = text.split("\n")
        self.parse_field = parse_field
        self.diagnostics: list[Diagnostic] = []

    # ------------------------------------------------------------ helpers

    def span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return NO_SPAN
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def tspan(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def error(self, message: str, span: Span, code: str = "E0109", hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code=code, message=message, span=span, hint=hint))

    def _char_before(self, span: Span) -> str:
        """The last character of the source text covered by span."""
        line = self.lines[span.end_line - 1] if 0 < span.end_line <= len(self.lines) else ""
        return line[span.end_col - 2] if span.end_col >= 2 and span.end_col - 2 < len(line) else ""

    # ------------------------------------------------------------ documents
