"""Located diagnostics: every stage reports problems as `Diagnostic`s so the CLI, tests and an
editor integration (LSP-shaped JSON) all see the same code, message and source span.

`rich` is imported lazily, only when coloured output is actually produced, so that importing this
module (which every stage does) stays cheap.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TextIO

from skriptnd.source import SourceFile, Span

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rich.text import Text

__all__ = [
    "CODES",
    "TAB_WIDTH",
    "Diagnostic",
    "DiagnosticError",
    "DiagnosticSink",
    "Note",
    "Severity",
    "SourceLookup",
    "print_diagnostics",
    "register_codes",
    "render_json",
    "render_summary",
    "render_text",
    "to_json",
]


# --------------------------------------------------------------------------------------------
# Code registry
# --------------------------------------------------------------------------------------------

#: Every diagnostic code with a one-line title. A code must be registered here before it can be
#: used, so codes stay unique and documentable (`sknd explain`-style tooling can list them).
#: Ranges: E00xx I/O, E01xx syntax, E02xx names/modules, E03xx types, E04xx shapes,
#: E05xx asserts, E06xx composition, E07xx execution/IO.
CODES: dict[str, str] = {
    # E00xx: reading input
    "E0001": "file not found",
    "E0002": "cannot read file",
    "E0003": "not a model folder (no main.sknd)",
    "E0004": "binary file",
    # E01xx: syntax
    "E0100": "syntax error",
    "E0101": "unexpected character",
    "E0102": "unexpected token",
    "E0103": "unexpected end of input",
    "E0104": "unterminated string",
    "E0105": "invalid escape or format field in string",
    "E0106": "invalid number literal",
    "E0107": "input is not UTF-8 text",
    "E0108": "nesting too deep",
    "E0109": "invalid construct in this position",
    # E02xx: names and modules
    "E0201": "unknown identifier",
    "E0202": "duplicate name",
    "E0203": "unknown module",
    "E0204": "unknown operator",
    "E0205": "graph outside the main module",
    "E0206": "main module without a graph",
    "E0207": "import cycle",
    "E0208": "name used before the block that declares it",
    "E0209": "unknown attribute",
    "E0210": "scoped name in an expression",
    "E0211": "duplicate definition",
    "E0212": "wrong number of arguments",
    "E0213": "not callable",
    # E03xx: types
    "E0301": "type mismatch",
    "E0302": "operand type not allowed",
    "E0303": "optional value where a value is required",
    "E0304": "pack / non-pack mismatch",
    "E0305": "invalid cast",
    "E0306": "generic type cannot be deduced",
    "E0307": "invalid default value",
    "E0308": "invalid type specification",
    "E0309": "wrong number of results",
    # E04xx: shapes and binding
    "E0401": "no binding order for input shapes",
    "E0402": "input rank mismatch",
    "E0403": "input extent mismatch",
    "E0404": "conflicting deduction",
    "E0405": "undeclared symbol in shape",
    "E0406": "pack length mismatch",
    "E0407": "tensor access rank mismatch",
    "E0408": "index symbol not bounded",
    "E0409": "deferred attribute cannot be evaluated",
    "E0410": "missing attribute value",
    "E0411": "dynamic shape without upper bound",
    "E0412": "wrong input dtype",
    # E05xx: asserts and compile-time evaluation
    "E0501": "assertion failed",
    "E0502": "evaluation error",
    "E0503": "not a compile-time expression",
    "E0504": "null value where a value is required",
    # E06xx: composition
    "E0601": "output not assigned",
    "E0602": "assignment to an input",
    "E0603": "assignment in the wrong block",
    "E0604": "invalid block result",
    "E0605": "result count mismatch",
    # E07xx: execution and tensor files (reserved)
}


def register_codes(codes: Mapping[str, str]) -> None:
    """Add codes (a later stage's own range); re-registering a code with another title is a bug."""
    for code, title in codes.items():
        if CODES.get(code, title) != title:
            raise ValueError(f"diagnostic code {code} already means {CODES[code]!r}")
        CODES[code] = title


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


class Severity(StrEnum):
    """How bad a diagnostic is; only errors make a stage fail. A `str` enum, so it compares equal to
    and serialises as its value ("error", "warning", "note")."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


#: LSP DiagnosticSeverity numbers (Error=1, Warning=2, Information=3).
_LSP_SEVERITY = {Severity.ERROR: 1, Severity.WARNING: 2, Severity.NOTE: 3}


@dataclass(frozen=True, slots=True)
class Note:
    """Secondary information attached to a diagnostic, optionally pointing elsewhere (e.g. a
    previous definition)."""

    message: str
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One located problem. Frozen and hashable so sinks can de-duplicate identical reports."""

    code: str
    message: str
    span: Span
    severity: Severity = Severity.ERROR
    notes: tuple[Note, ...] = ()
    hint: str | None = None

    def __post_init__(self) -> None:
        # An unregistered code is a bug in the reporting stage, not in the user's model.
        if self.code not in CODES:
            raise ValueError(f"unknown diagnostic code {self.code!r}; register it in CODES")
        if not isinstance(self.severity, Severity):
            object.__setattr__(self, "severity", Severity(self.severity))
        if not isinstance(self.notes, tuple):
            object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def title(self) -> str:
        """The registered one-line title of this diagnostic's code."""
        return CODES[self.code]

    def __str__(self) -> str:
        return f"{self.span}: {self.severity.value}[{self.code}]: {self.message}"


class DiagnosticError(Exception):
    """Raised by a stage to abort with located diagnostics; the CLI catches it and renders them."""

    diagnostics: list[Diagnostic]

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]) -> None:
        diags = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        # args=(diags,) keeps the exception picklable (e.g. across process pools).
        super().__init__(diags)
        self.diagnostics = diags

    def __str__(self) -> str:
        if not self.diagnostics:
            return "no diagnostics"
        first = str(self.diagnostics[0])
        more = len(self.diagnostics) - 1
        return first if more == 0 else f"{first} (and {more} more)"


class DiagnosticSink:
    """Collects diagnostics from a stage so it can report everything it found, not just the first
    problem. Exact duplicates (e.g. from re-checking a shared definition) are dropped."""

    def __init__(self, diagnostics: Iterable[Diagnostic] = ()) -> None:
        self._items: list[Diagnostic] = []
        self._seen: set[Diagnostic] = set()
        self.extend(diagnostics)

    def add(self, diagnostic: Diagnostic) -> bool:
        """Record `diagnostic`; returns False if an identical one was already recorded."""
        if diagnostic in self._seen:
            return False
        self._seen.add(diagnostic)
        self._items.append(diagnostic)
        return True

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        """Record several diagnostics (e.g. those of a caught `DiagnosticError`)."""
        for d in diagnostics:
            self.add(d)

    def _report(
        self,
        severity: Severity,
        code: str,
        message: str,
        span: Span,
        notes: Iterable[Note],
        hint: str | None,
    ) -> Diagnostic:
        d = Diagnostic(code, message, span, severity, tuple(notes), hint)
        self.add(d)
        return d

    def error(
        self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (), hint: str | None = None
    ) -> Diagnostic:
        """Record an error and return it."""
        return self._report(Severity.ERROR, code, message, span, notes, hint)

    def warning(
        self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (), hint: str | None = None
    ) -> Diagnostic:
        """Record a warning and return it."""
        return self._report(Severity.WARNING, code, message, span, notes, hint)

    def note(
        self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (), hint: str | None = None
    ) -> Diagnostic:
        """Record a stand-alone note and return it."""
        return self._report(Severity.NOTE, code, message, span, notes, hint)

    @property
    def has_errors(self) -> bool:
        """True if any recorded diagnostic is an error (warnings alone don't fail a stage)."""
        return any(d.severity is Severity.ERROR for d in self._items)

    def sorted(self) -> list[Diagnostic]:
        """Diagnostics in source order (file, line, column); ties keep report order."""
        return sorted(self._items, key=lambda d: (d.span.file, d.span.line, d.span.col))

    def raise_if_errors(self) -> None:
        """Abort the stage with all collected diagnostics (sorted) if any of them is an error."""
        if self.has_errors:
            raise DiagnosticError(self.sorted())

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"DiagnosticSink({len(self._items)} diagnostics)"


# --------------------------------------------------------------------------------------------
# Human-readable rendering
# --------------------------------------------------------------------------------------------

#: Tab stops used when quoting source lines (carets are computed with the same expansion).
TAB_WIDTH = 4

#: Where to find the text of a file named by a span: a mapping or a lookup function.
SourceLookup = Mapping[str, SourceFile] | Callable[[str], SourceFile | None]

_SEVERITY_STYLE = {
    Severity.ERROR: "bold red",
    Severity.WARNING: "bold yellow",
    Severity.NOTE: "bold cyan",
}
_GUTTER = "bold blue"
_LABEL = "bold cyan"

# A rendered line is a list of (text, rich style or None) segments, so plain output never needs rich.
_Segment = tuple[str, str | None]
_Line = list[_Segment]


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _expand(line: str) -> tuple[str, list[int]]:
    """Make a source line safe and aligned for a terminal: tabs become spaces up to the next tab
    stop, control characters (which could inject escape sequences) become U+FFFD. Also returns the
    display column of every character index (plus one past the end) so carets line up."""
    out: list[str] = []
    cols: list[int] = []
    col = 0
    for ch in line:
        cols.append(col)
        if ch == "\t":
            n = TAB_WIDTH - col % TAB_WIDTH
            out.append(" " * n)
            col += n
            continue
        if unicodedata.category(ch) == "Cc":
            ch = "\ufffd"
        out.append(ch)
        col += _char_width(ch)
    cols.append(col)
    return "".join(out), cols


def _display_col(cols: list[int], index: int) -> int:
    """Display column of 0-based character `index`; positions past the end continue with width 1."""
    last = len(cols) - 1
    if index <= last:
        return cols[max(index, 0)]
    return cols[last] + (index - last)


def _source_line(source: SourceFile, number: int) -> str | None:
    """Line `number` of `source`, or None if the file has no such line. The (empty) line after a
    final newline counts, since end-of-input errors point there."""
    lines = source.lines
    if 1 <= number <= len(lines):
        return lines[number - 1]
    if number == len(lines) + 1 and (not source.text or source.text[-1] in "\n\r"):
        return ""
    return None


def _make_lookup(sources: SourceLookup | None) -> Callable[[str], SourceFile | None]:
    if sources is None:
        return lambda _path: None
    if isinstance(sources, Mapping):
        return sources.get
    fn = sources
    cache: dict[str, SourceFile | None] = {}

    def lookup(path: str) -> SourceFile | None:
        if path not in cache:
            try:
                cache[path] = fn(path)
            except (OSError, UnicodeError, ValueError):
                # An unreadable file must not hide the diagnostic itself; we just lose the quote.
                cache[path] = None
        return cache[path]

    return lookup


#: Quoted source lines longer than this are cut to a window around the caret.
MAX_QUOTE = 120


def _window(shown: str, start: int, carets: str) -> tuple[str, int, str]:
    """Cut a long quoted line (display columns) to MAX_QUOTE around the caret, marking cuts with '...'."""
    if len(shown) <= MAX_QUOTE:
        return shown, start, carets
    carets = carets[:MAX_QUOTE // 2]
    left = max(0, min(start - MAX_QUOTE // 3, len(shown) - MAX_QUOTE))
    right = left + MAX_QUOTE
    head = "..." if left > 0 else ""
    tail = "..." if right < len(shown) else ""
    return head + shown[left:right] + tail, start - left + len(head), carets


def _render_one(d: Diagnostic, lookup: Callable[[str], SourceFile | None]) -> list[_Line]:
    style = _SEVERITY_STYLE[d.severity]
    span = d.span
    lines: list[_Line] = [
        [
            (f"{span}: ", "bold"),
            (f"{d.severity.value}[{d.code}]", style),
            (": ", "bold"),
            (d.message, "bold"),
        ]
    ]

    source = lookup(span.file)
    text = _source_line(source, span.line) if source is not None else None
    width = len(str(span.line))
    pad = " " * (width + 2)
    if text is not None:
        shown, cols = _expand(text)
        start = _display_col(cols, span.col - 1)
        if span.end_line == span.line:
            end = _display_col(cols, span.end_col - 1)
        elif span.end_line > span.line:
            end = cols[-1]  # multi-line span: underline to the end of the first line
        else:
            end = start
        carets = "^" * max(1, end - start)
        shown, start, carets = _window(shown.rstrip(), start, carets)
        lines.append([(pad + "|", _GUTTER)])
        quoted: _Line = [(f" {span.line} |", _GUTTER)]
        if shown.rstrip():
            quoted.append((" " + shown.rstrip(), None))
        lines.append(quoted)
        lines.append([(pad + "| ", _GUTTER), (" " * start, None), (carets, style)])

    if d.hint is not None:
        lines.append([(pad + "= ", _GUTTER), ("hint", _LABEL), (": " + d.hint, None)])
    for note in d.notes:
        where = f" (at {note.span})" if note.span is not None else ""
        lines.append([(pad + "= ", _GUTTER), ("note", _LABEL), (f": {note.message}{where}", None)])
    return lines


def _render_lines(diags: Iterable[Diagnostic], sources: SourceLookup | None) -> list[_Line]:
    lookup = _make_lookup(sources)
    out: list[_Line] = []
    for i, d in enumerate(diags):
        if i:
            out.append([])  # blank line between diagnostics
        out.extend(_render_one(d, lookup))
    return out


def _plain(lines: list[_Line]) -> str:
    return "".join("".join(text for text, _ in line) + "\n" for line in lines)


def _rich_text(lines: list[_Line]) -> Text:
    from rich.text import Text

    text = Text(end="")
    for line in lines:
        for segment, style in line:
            text.append(segment, style=style or "")
        text.append("\n")
    return text


def render_text(diags: Iterable[Diagnostic], sources: SourceLookup | None, *, color: bool) -> str:
    """Render diagnostics rustc-style (header, quoted line, carets, hint, notes), in the given
    order, separated by blank lines. With color=False the result is plain text (no escapes)."""
    lines = _render_lines(diags, sources)
    if not color or not lines:
        return _plain(lines)

    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=True,
        color_system="standard",
        no_color=False,
        width=1 << 16,
        legacy_windows=False,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.print(_rich_text(lines), soft_wrap=True, end="")
    return buf.getvalue()


def print_diagnostics(
    diags: Iterable[Diagnostic],
    sources: SourceLookup | None,
    *,
    file: TextIO | None = None,
    color: bool | None = None,
) -> None:
    """Write rendered diagnostics to `file` (default: the current sys.stderr). color=None lets
    rich decide (terminal detection, NO_COLOR / FORCE_COLOR); True/False force it."""
    out = sys.stderr if file is None else file
    lines = _render_lines(diags, sources)
    if not lines:
        return
    if color is False:
        out.write(_plain(lines))
        out.flush()
        return

    from rich.console import Console

    if color:
        console = Console(
            file=out, force_terminal=True, no_color=False, highlight=False, markup=False, emoji=False
        )
    else:
        console = Console(file=out, highlight=False, markup=False, emoji=False)
    console.print(_rich_text(lines), soft_wrap=True, end="")
    out.flush()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render_summary(diags: Iterable[Diagnostic]) -> str:
    """One-line tally for the end of a run, e.g. '2 errors, 1 warning' or 'no problems found'."""
    counts = {s: 0 for s in Severity}
    for d in diags:
        counts[d.severity] += 1
    parts = [_plural(counts[s], s.value) for s in Severity if counts[s]]
    return ", ".join(parts) if parts else "no problems found"


# --------------------------------------------------------------------------------------------
# Machine-readable output
# --------------------------------------------------------------------------------------------


def _range(span: Span) -> dict[str, dict[str, int]]:
    # LSP positions are 0-based; columns are counted in code points (as spans are).
    return {
        "start": {"line": span.line - 1, "character": span.col - 1},
        "end": {"line": span.end_line - 1, "character": span.end_col - 1},
    }


def to_json(diags: Iterable[Diagnostic]) -> list[dict[str, Any]]:
    """LSP-shaped dictionaries, so editors and scripts can consume diagnostics without parsing text."""
    result: list[dict[str, Any]] = []
    for d in diags:
        result.append(
            {
                "code": d.code,
                "severity": d.severity.value,
                "severityLevel": _LSP_SEVERITY[d.severity],
                "message": d.message,
                "source": "sknd",
                "file": d.span.file,
                "range": _range(d.span),
                "hint": d.hint,
                "notes": [
                    {
                        "message": n.message,
                        "file": n.span.file if n.span is not None else None,
                        "range": _range(n.span) if n.span is not None else None,
                    }
                    for n in d.notes
                ],
            }
        )
    return result


def render_json(diags: Iterable[Diagnostic]) -> str:
    """`to_json` serialised with indent=2 (for `--format json`)."""
    import json

    return json.dumps(to_json(diags), indent=2)
