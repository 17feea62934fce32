"""Source text and locations: every AST node and diagnostic points back into a SourceFile."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open region of a source file; lines and columns are 1-based, end_col is exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def merge(self, other: Span) -> Span:
        """Smallest span covering both (same file assumed)."""
        start = min((self.line, self.col), (other.line, other.col))
        end = max((self.end_line, self.end_col), (other.end_line, other.end_col))
        return Span(self.file, start[0], start[1], end[0], end[1])

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def __reduce__(self) -> tuple | str:
        # pickled by its constructor (the parse cache holds one per AST node): 5x faster to load
        # than the dataclass default, which restores each slot through `fields()`. NO_SPAN is
        # pickled by name, so that it stays the very object `span is NO_SPAN` tests look for.
        if self is NO_SPAN:
            return "NO_SPAN"
        return Span, (self.file, self.line, self.col, self.end_line, self.end_col)


NO_SPAN = Span("<unknown>", 1, 1, 1, 1)


@dataclass
class SourceFile:
    """The text of one module; kept so diagnostics can quote the offending line."""

    path: str
    text: str
    _lines: list[str] | None = field(default=None, repr=False)

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def line(self, number: int) -> str:
        """The 1-based line `number`, or '' past the end of the file."""
        lines = self.lines
        return lines[number - 1] if 1 <= number <= len(lines) else ""

    def excerpt(self, span: Span) -> str:
        """The text `span` covers (lines joined by newlines), '' for a span outside this file, so a hint can
        quote what the user wrote rather than a reprint of it."""
        if span.file != self.path or not 1 <= span.line <= span.end_line <= len(self.lines):
            return ""
        rows = self.lines[span.line - 1:span.end_line]
        rows[-1] = rows[-1][:span.end_col - 1]
        rows[0] = rows[0][span.col - 1:]
        return "\n".join(rows)
