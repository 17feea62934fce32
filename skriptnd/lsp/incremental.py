"""Incremental parsing for the language server: a module is parsed one top-level piece at a time.

A module's text is cut before every line that starts (at column 1) with `operator`, `graph` or
`public operator`: the header (version, extensions, imports) and one piece per definition. Each
piece is parsed on its own, padded with newlines so that its spans carry the true line numbers,
and cached by its text; a piece met again at another line (lines were inserted above it) gets
its cached AST back with every span moved. The pieces are then joined into one `ast.Module`.

This gives the same tree as `parse_module` on the whole text whenever every piece parses
cleanly (a cut inside a multi-line string leaves an unterminated string in both halves, so it
cannot go unnoticed). As soon as one piece has a syntax error, the whole text is parsed again
the ordinary way, so that syntax diagnostics and recovery are exactly those of `sknd check`.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import fields
from typing import TypeVar

from skriptnd.diagnostics import Diagnostic, Note, Severity
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast, parse_module
from skriptnd.syntax.cache import cached_parse
from skriptnd.syntax.parser import MAX_ERRORS
from skriptnd.syntax.scan import mask

#: An AST node, a tuple of them, or any other field value of a node (returned unchanged).
T = TypeVar("T")

__all__ = ["IncrementalParser", "shift_diagnostic", "shift_node", "split_pieces"]

_DEFINITION_START = re.compile(r"^(?:public[ \t]+)?(?:operator|graph)\b", re.MULTILINE)
_FIELDS: dict[type, tuple[str, ...]] = {}
#: Syntax errors that a piece parsed alone may report differently from the whole text:
#: unexpected end of input, unterminated string, nesting too deep.
_NOT_LOCAL = frozenset({"E0103", "E0104", "E0108"})


def split_pieces(text: str) -> list[tuple[int, str]]:
    """(first line, text) of the header and of each definition, in order; the header may be ''."""
    starts = [m.start() for m in _DEFINITION_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(text))
    pieces: list[tuple[int, str]] = []
    line = 1
    for a, b in zip(starts, starts[1:], strict=False):
        piece = text[a:b]
        pieces.append((line, piece))
        line += piece.count("\n")
    return pieces


def _shift_span(span: Span, delta: int) -> Span:
    if span is NO_SPAN or span.file == NO_SPAN.file:
        return span
    return Span(span.file, span.line + delta, span.col, span.end_line + delta, span.end_col)


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def shift_node(value: T, delta: int) -> T:
    """A copy of an AST (or tuple of nodes) with every span moved down by `delta` lines; any other field
    value (a name, a number, None) is returned as it is."""
    if isinstance(value, ast.Node):
        cls = type(value)
        new = object.__new__(cls)
        for name in _field_names(cls):
            item = getattr(value, name)
            if isinstance(item, Span):
                item = _shift_span(item, delta)
            elif isinstance(item, ast.Node | tuple):
                item = shift_node(item, delta)
            object.__setattr__(new, name, item)
        return new
    if isinstance(value, tuple):
        return tuple(shift_node(item, delta) for item in value)
    return value


def shift_diagnostic(d: Diagnostic, delta: int, within: Span | None = None) -> Diagnostic:
    """d with its spans (and its notes' spans) moved by delta lines; with `within`, only the
    spans of that file that lie on its lines are moved."""

    def move(span: Span | None) -> Span | None:
        if span is None:
            return None
        if within is not None and (span.file != within.file or not within.line <= span.line <= within.end_line):
            return span
        return _shift_span(span, delta)

    notes = tuple(Note(n.message, move(n.span)) for n in d.notes)
    return Diagnostic(d.code, d.message, move(d.span) or d.span, d.severity, notes, d.hint)


class _Piece:
    __slots__ = ("line", "module", "diagnostics")

    def __init__(self, line: int, module: ast.Module, diagnostics: list[Diagnostic]) -> None:
        self.line = line
        self.module = module
        self.diagnostics = diagnostics


class IncrementalParser:
    """A `parse_module` replacement (same signature) that re-parses only the pieces that changed.

    `pieces_parsed` counts the pieces actually handed to the parser (for tests and benchmarks).
    `moved[path]` maps, for the last parse of path, each definition that is a moved copy of an
    earlier one (same text, other lines) by id to (the earlier definition, lines moved)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._cache: OrderedDict[tuple[str, str], _Piece] = OrderedDict()
        self._capacity = capacity
        self.pieces_parsed = 0
        self.moved: dict[str, dict[int, tuple[ast.Definition, int]]] = {}
        self._opened: set[str] = set()  # paths parsed before: their pieces skip the disk cache
        # pieces with syntax errors, as the parser recovers them (checks and features both ask)
        self._broken: OrderedDict[tuple[str, int, str], tuple[ast.Module | None, list[Diagnostic]]] = OrderedDict()

    def __call__(self, text: str, path: str = "<string>") -> tuple[ast.Module | None, list[Diagnostic]]:
        return self.parse(text, path)

    def parse(self, text: str, path: str = "<string>") -> tuple[ast.Module | None, list[Diagnostic]]:
        """The module and its syntax diagnostics, as `parse_module(text, path)` gives them."""
        pieces = split_pieces(text)
        self.moved[path] = {}
        if len(pieces) <= 2:  # nothing to gain
            return parse_module(text, path)
        parsed: list[_Piece] = []
        broken = False
        opening = path not in self._opened
        self._opened.add(path)
        for line, piece in pieces:
            got = self._piece(path, line, piece, opening)
            if got is None:
                got = self._broken_piece(path, line, piece)
                if got is None:
                    return parse_module(text, path)
                broken = True
            parsed.append(got)
        module, diags = self._join(parsed, path)
        if broken and sum(d.severity == Severity.ERROR for d in diags) >= MAX_ERRORS:
            return parse_module(text, path)
        return module, diags

    def _broken_piece(self, path: str, line: int, text: str) -> _Piece | None:
        """A definition with syntax errors, parsed (with the parser's recovery) on its own when
        that is certain to report what a parse of the whole text reports: its brackets balance,
        its errors lie inside it and none is about the end of the input or deep nesting (all of
        which a whole-text parse could see differently); else None."""
        if line == 1 or not _DEFINITION_START.match(text):
            return None
        code = mask(text)
        if any(code.count(a) != code.count(b) for a, b in ("{}", "()", "[]")):
            return None
        module, diags = self._parse_broken(path, line, text)
        if module is None or not diags or len(module.definitions) != 1 or module.imports:
            return None
        inside = module.definitions[0].span
        if inside.line != line or inside.col != 1:
            return None
        for d in diags:  # strictly inside the definition's braces
            if d.code in _NOT_LOCAL or not (inside.line, inside.col) < (d.span.line, d.span.col) \
                    or (d.span.end_line, d.span.end_col) >= (inside.end_line, inside.end_col):
                return None
        return _Piece(line, module, list(diags))

    def _piece(self, path: str, line: int, text: str, opening: bool = False) -> _Piece | None:
        """A clean definition (or the imports before the first one) parsed on its own, from the
        cache when this text was parsed at another line. On the first parse of a file (the
        editor opening it) the pieces go through the on-disk parse cache (syntax.cache): a file
        reopened unchanged is not parsed again. Later edits do not, or every keystroke would
        leave an entry on disk."""
        key = (path, text)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            if cached.line != line:
                delta = line - cached.line
                moved = _Piece(line, shift_node(cached.module, delta),
                               [shift_diagnostic(d, delta) for d in cached.diagnostics])
                moves = self.moved.setdefault(path, {})
                for old, new in zip(cached.module.definitions, moved.module.definitions, strict=True):
                    moves[id(new)] = (old, delta)
                self._cache[key] = cached = moved
            return cached
        self.pieces_parsed += 1
        source = "\n" * (line - 1) + text
        module, diags = cached_parse(source, path, parse_module) if opening else parse_module(source, path)
        if module is None or any(d.severity == Severity.ERROR for d in diags):
            return None
        is_header = line == 1 and not _DEFINITION_START.match(text)
        if (len(module.definitions) != (0 if is_header else 1)) or (module.imports and not is_header):
            return None
        piece = _Piece(line, module, list(diags))
        self._cache[key] = piece
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return piece

    def _parse_broken(self, path: str, line: int, text: str) -> tuple[ast.Module | None, list[Diagnostic]]:
        key = (path, line, text)
        found = self._broken.get(key)
        if found is None:
            self.pieces_parsed += 1
            found = parse_module("\n" * (line - 1) + text, path)
            self._broken[key] = found
            if len(self._broken) > 16:
                self._broken.popitem(last=False)
        return found

    def recover(self, text: str, path: str = "<string>") -> ast.Module:
        """A tree for a text with syntax errors, for editor features: the pieces that parse are
        kept as they are, the others as the parser recovers them (offending statements left
        out), or left out when it cannot."""
        parsed: list[_Piece] = []
        for line, piece in split_pieces(text):
            got = self._piece(path, line, piece)
            if got is None:
                module, _ = self._parse_broken(path, line, piece)
                if module is None:
                    continue
                got = _Piece(line, module, [])
            parsed.append(got)
        return self._join(parsed, path)[0]

    @staticmethod
    def _join(parsed: list[_Piece], path: str) -> tuple[ast.Module, list[Diagnostic]]:
        definitions: list[ast.Definition] = []
        imports: list[ast.Import] = []
        comments: list[ast.Comment] = []
        diags: list[Diagnostic] = []
        spans: list[Span] = []
        version: tuple[int, int] | None = None
        extensions: tuple[str, ...] = ()
        for piece in parsed:
            definitions.extend(piece.module.definitions)
            imports.extend(piece.module.imports)
            comments.extend(piece.module.comments)
            diags.extend(piece.diagnostics)
            version = version or piece.module.version
            extensions = extensions or piece.module.extensions
            if piece.module.span is not NO_SPAN:
                spans.append(piece.module.span)
        span = spans[0].merge(spans[-1]) if spans else NO_SPAN
        module = ast.Module(definitions=tuple(definitions), imports=tuple(imports), version=version,
                            extensions=extensions, comments=tuple(comments), path=path, span=span)
        return module, diags
