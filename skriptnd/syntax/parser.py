"""Parsing entry points: source text → AST plus diagnostics, never an exception.

The Lark LALR parser is built once per process (and cached on disk by Lark, so a cold
start does not rebuild the tables; Lark's cache is a pickle, so it lives in the user's own cache
folder, never in the shared temporary folder, see syntax.cache). Several syntax errors are reported per file by
blanking the offending statement and parsing again (see errors.resync_region).
"""

from __future__ import annotations

import bisect
import re
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark, Tree
from lark.exceptions import UnexpectedInput

from skriptnd.diagnostics import Diagnostic
from skriptnd.resources import grammar_path
from skriptnd.source import Span
from skriptnd.syntax import ast, errors
from skriptnd.syntax.cache import cache_dir
from skriptnd.syntax.scan import comments, mask
from skriptnd.syntax.transform import ToAst
from skriptnd.untrusted import trusted_file

START_RULES = ("module", "blocks", "compose_body", "block_stmt", "stmt", "expr")
MAX_ERRORS = 20
MAX_NESTING = 256
#: Operator characters allowed in one statement. A chain of n binary or unary operators is an AST
#: n levels deep that every pass walks recursively; the CLI runs on a deep stack
#: (skriptnd.deepstack) sized for this many, so longer chains are refused at the crossing token.
MAX_OPERATORS = 50_000
_OPERATOR_CHARS = frozenset("+-*/%^<>=!&|?~")


@cache
def lark_parser() -> Lark:
    grammar = grammar_path().read_text(encoding="utf-8")
    options: dict[str, Any] = dict(
        parser="lalr",
        lexer="contextual",
        start=list(START_RULES),
        propagate_positions=True,
        maybe_placeholders=True,
    )
    cache_file = _lark_cache_file(grammar)
    if cache_file is not None:
        try:
            return Lark(grammar, cache=str(cache_file), **options)
        except OSError:  # unwritable cache folder: build without the cache
            pass
    return Lark(grammar, **options)


def _lark_cache_file(grammar: str) -> Path | None:
    """Where Lark may keep its (pickled) tables: in the user's private cache folder, and only when the
    file there is missing or is the user's own (Lark unpickles it before checking anything)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"lark-{_grammar_key(grammar)}.cache"
    if path.exists() or path.is_symlink():
        fh = trusted_file(path)
        if fh is None:
            return None
        fh.close()
    return path


def _grammar_key(grammar: str) -> str:
    import hashlib

    import lark

    return hashlib.sha256((lark.__version__ + grammar).encode()).hexdigest()[:16]


def _nesting_error(code: str, path: str) -> Diagnostic | None:
    """Brackets nested more than MAX_NESTING deep, or a statement with more than MAX_OPERATORS
    operators: located at the character where the limit is crossed (one linear scan)."""
    depth = 0
    operators = 0
    line, col = 1, 0
    for ch in code:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
        elif ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                return Diagnostic(code="E0108", message=f"brackets nested more than {MAX_NESTING} deep",
                                  span=Span(path, line, col, line, col + 1),
                                  hint="split the expression using @using symbols or intermediate tensors")
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == ";":
            operators = 0
        elif ch in _OPERATOR_CHARS:
            operators += 1
            if operators > MAX_OPERATORS:
                return Diagnostic(code="E0108", message=f"expression nested too deeply: more than {MAX_OPERATORS} "
                                  "operators in one statement", span=Span(path, line, col, line, col + 1),
                                  hint="split the expression using @using symbols or intermediate tensors")
    return None


def parse(text: str, path: str = "<string>", start: str = "module") -> tuple[Any, list[Diagnostic]]:
    """Parse text with the given start rule; returns (AST or None, diagnostics).

    With syntax errors, the AST (when not None) is that of the file with the offending
    statements left out: good enough for an editor outline, not for checking.
    """
    parser = lark_parser()
    code = mask(text)
    nesting = _nesting_error(code, path)
    if nesting is not None:
        return None, [nesting]
    diagnostics: list[Diagnostic] = []
    current = text
    inserted: list[tuple[int, int]] = []  # (line, col) of each ';' inserted to recover
    last_offset = -1
    for _ in range(MAX_ERRORS):
        try:
            tree = parser.parse(current, start=start)
        except UnexpectedInput as err:
            masked = mask(current)
            reported = errors.to_diagnostic(err, current, masked, path, parser)
            diagnostics.append(_unshift(reported.diagnostic, inserted))
            if start != "module":  # fragments are small: one error says it all
                return None, diagnostics
            offset = errors.error_offset(err, current)
            if offset <= last_offset or reported.diagnostic.code == "E0104":
                return None, _unique(diagnostics)
            last_offset = offset
            if reported.insert_at is not None:
                at = reported.insert_at
                line = current.count("\n", 0, at) + 1
                col = at - (current.rfind("\n", 0, at) + 1) + 1
                inserted.extend([(line, col)] * len(reported.insert_text))
                current = current[:at] + reported.insert_text + current[at:]
                last_offset = offset  # the inserted ';' moves later text by one
                continue
            region = errors.resync_region(masked, offset)
            if region is None:
                return None, _unique(diagnostics)
            current = errors.blank(current, region)
            continue
        node, more = _to_ast(tree, path, current)
        return node, _unique(diagnostics + [_unshift(d, inserted) for d in more])
    return None, _unique(diagnostics)


def _unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    return list(dict.fromkeys(diags))


def _unshift(d: Diagnostic, inserted: list[tuple[int, int]]) -> Diagnostic:
    """Map a position in the text with recovery ';' inserted back to the original text."""
    if not inserted:
        return d
    span = d.span

    def col(line: int, c: int) -> int:
        return c - sum(1 for il, ic in inserted if il == line and ic < c)

    fixed = Span(span.file, span.line, col(span.line, span.col), span.end_line, col(span.end_line, span.end_col))
    return Diagnostic(code=d.code, message=d.message, span=fixed, severity=d.severity, notes=d.notes, hint=d.hint)


def _to_ast(tree: Tree, path: str, text: str) -> tuple[Any, list[Diagnostic]]:
    transformer = ToAst(path, text, lambda src, line, col: _parse_field(src, line, col, path, transformer))
    try:
        node = transformer.transform(tree)
    except RecursionError:  # spans and equality of very deep ASTs recurse
        return None, [Diagnostic(code="E0108", message="expression nested too deeply to process",
                                 span=Span(path, 1, 1, 1, 2),
                                 hint="split long expressions using @using symbols or intermediate tensors")]
    if isinstance(node, ast.Module):
        node = _with_comments(node, text, path)
    return node, transformer.diagnostics


def _parse_field(src: str, line: int, col: int, path: str, owner: ToAst) -> ast.Expr | None:
    """Parse a `{expr}` format field in place: padding keeps line/column numbers true."""
    padded = "\n" * (line - 1) + " " * (col - 1) + src
    node, diags = parse(padded, path, start="expr")
    for d in diags[:1]:
        owner.diagnostics.append(Diagnostic(code="E0105", message=f"in format field: {d.message}", span=d.span,
                                            hint=d.hint))
    return node


def line_starts(text: str) -> list[int]:
    """The offset of the first character of each line: with `bisect`, an offset's line in O(log n)."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


def _with_comments(module: ast.Module, text: str, path: str) -> ast.Module:
    """The module with its comments located; linear in the text (counting newlines from the start for each
    comment made 200,000 comment lines take 36 s)."""
    found = []
    starts = line_starts(text)
    for start, end in comments(text):
        line = bisect.bisect_right(starts, start)
        col = start - starts[line - 1] + 1
        body = text[start:end].rstrip()
        found.append(ast.Comment(text=body, span=Span(path, line, col, line, col + len(body))))
    return ast.Module(definitions=module.definitions, imports=module.imports, version=module.version,
                      extensions=module.extensions, comments=tuple(found), path=module.path, span=module.span)


def parse_module(text: str, path: str = "<string>") -> tuple[ast.Module | None, list[Diagnostic]]:
    return parse(text, path, "module")


def parse_expr(text: str, path: str = "<string>") -> tuple[ast.Expr | None, list[Diagnostic]]:
    return parse(text, path, "expr")
