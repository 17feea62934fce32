"""Finding what is under the cursor: AST nodes, words and symbols at a source position.

Positions here are those of the AST (`skriptnd.source.Span`): 1-based lines and columns, the
end column exclusive. LSP positions are 0-based; `from_lsp` and `span_to_lsp` convert (columns
are counted in code points, as spans are, which equals LSP's UTF-16 units outside the astral
planes). Nothing here knows about the server or lsprotocol.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from skriptnd.semantics.scope import Kind, Scope, Symbol
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast

__all__ = [
    "Word",
    "contains",
    "definition_at",
    "from_lsp",
    "name_span",
    "nodes_at",
    "span_to_lsp",
    "symbol_at",
    "word_at",
    "words_in",
]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")
_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Symbols that live in a nested scope (a @lower formula, a loop, a block expression).
LOCAL_KINDS = frozenset({Kind.INDEX, Kind.LOCAL, Kind.LOOP_INDEX, Kind.CARRIED, Kind.SCAN})
_SCOPING = (ast.Lowering, ast.LoopExpr, ast.BlockExpr, ast.Assertion)


def from_lsp(line: int, character: int) -> tuple[int, int]:
    """A 0-based LSP position as the 1-based (line, col) of spans."""
    return line + 1, character + 1


def span_to_lsp(span: Span) -> tuple[tuple[int, int], tuple[int, int]]:
    """((line, character), (line, character)) of a span, 0-based as LSP wants them."""
    return (span.line - 1, span.col - 1), (span.end_line - 1, span.end_col - 1)


def contains(span: Span, line: int, col: int, *, inclusive_end: bool = True) -> bool:
    """Whether (line, col) lies in span; with inclusive_end a cursor just after the span counts."""
    if span is NO_SPAN or span.file == NO_SPAN.file:
        return False
    if (line, col) < (span.line, span.col):
        return False
    end = (span.end_line, span.end_col)
    return (line, col) <= end if inclusive_end else (line, col) < end


def within(inner: Span, outer: Span) -> bool:
    """Whether inner lies entirely inside outer."""
    return (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def definition_at(module: ast.Module | None, line: int, col: int) -> ast.Definition | None:
    """The operator or graph definition whose text holds (line, col)."""
    if module is None:
        return None
    for definition in module.definitions:
        if contains(definition.span, line, col):
            return definition
    return None


def nodes_at(node: ast.Node, line: int, col: int) -> list[ast.Node]:
    """The chain of nodes from `node` down to the innermost one holding (line, col)."""
    chain: list[ast.Node] = []
    current: ast.Node | None = node
    while current is not None:
        chain.append(current)
        best: ast.Node | None = None
        for child in current.children():
            if contains(child.span, line, col):
                best = child
                if contains(child.span, line, col, inclusive_end=False):
                    break
        current = best
    return chain


@dataclass(frozen=True)
class Word:
    """A (possibly dotted) identifier in the text: `x`, `nn.conv`, `x.shape`.

    `segment` is the index of the dotted part under the cursor; `line` and the columns are
    1-based, `end_col` exclusive."""

    text: str
    line: int
    col: int
    end_col: int
    segment: int = 0

    @property
    def parts(self) -> list[str]:
        return [p.strip() for p in self.text.split(".")]

    @property
    def head(self) -> str:
        return self.parts[0]

    def upto_cursor(self) -> str:
        """The dotted prefix ending with the part under the cursor (`nn` for the cursor on nn)."""
        return ".".join(self.parts[: self.segment + 1])

    def span(self, file: str) -> Span:
        return Span(file, self.line, self.col, self.line, self.end_col)


def word_at(line_text: str, line: int, col: int) -> Word | None:
    """The identifier (with its dotted neighbours) at 1-based col of line_text, or None."""
    index = col - 1
    for m in _WORD.finditer(line_text):
        if m.start() > index:
            break
        if index > m.end():
            continue
        if m.start() > 0 and line_text[m.start() - 1].isdigit():
            return None  # the exponent of 1e-5 and the like
        segment = 0
        for k, seg in enumerate(_SEGMENT.finditer(m.group())):
            if m.start() + seg.start() <= index <= m.start() + seg.end():
                segment = k
                break
        return Word(m.group(), line, m.start() + 1, m.end() + 1, segment)
    return None


def words_in(text: str, lines: range | None = None) -> Iterator[Word]:
    """Every identifier of `text` (already masked: strings and comments blanked), line by line."""
    all_lines = text.split("\n")
    numbers = lines if lines is not None else range(1, len(all_lines) + 1)
    for number in numbers:
        if not 1 <= number <= len(all_lines):
            continue
        line_text = all_lines[number - 1]
        for m in _WORD.finditer(line_text):
            if m.start() > 0 and (line_text[m.start() - 1].isdigit() or line_text[m.start() - 1] == "@"):
                continue
            yield Word(m.group(), number, m.start() + 1, m.end() + 1, 0)


def name_span(span: Span, name: str, line_text: str) -> Span:
    """The span of `name` itself when it is written at (or inside the first line of) span."""
    if span is NO_SPAN:
        return span
    start = span.col - 1
    stop = len(line_text) if span.end_line != span.line else span.end_col - 1
    m = re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"(?![A-Za-z0-9_])").search(line_text, start, stop)
    if m is None:
        return span
    return Span(span.file, span.line, m.start() + 1, span.line, m.end() + 1)


def symbol_at(scope: Scope, chain: list[ast.Node], name: str, line: int, col: int) -> Symbol | None:
    """The symbol `name` written at (line, col) refers to, given the node chain there.

    Names of nested scopes (index symbols of a @lower formula, loop variables, block tensors)
    are taken from the innermost scoping node around the cursor whose declarations include the
    name; otherwise the definition-level symbol of that name."""
    candidates = [s for s in scope.table if s.name == name]
    if not candidates:
        return None
    for node in reversed(chain):
        if not isinstance(node, _SCOPING):
            continue
        inside = [s for s in candidates if s.kind in LOCAL_KINDS or s.kind == Kind.TENSOR]
        inside = [s for s in inside if within(s.span, node.span)]
        if inside:
            before = [s for s in inside if (s.span.line, s.span.col) <= (line, col)]
            return before[-1] if before else inside[0]
    top = scope.lookup(name)
    if top is not None:
        return top
    outer = [s for s in candidates if s.kind not in LOCAL_KINDS]
    return outer[0] if outer else None
