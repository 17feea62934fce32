"""The hint for an invocation nested in another's arguments (`y = nn.relu(nn.sigmoid(x));`).

SkriptND passes only tensor names and compile-time values to an operator, so the evaluator reports the inner
invocation as "not a compile-time expression" (E0503). That is true but does not say what to write; the fix
is always the same rewrite, which this module spells out with the user's own text:
`t = nn.sigmoid(x); y = nn.relu(t);`.
"""

from __future__ import annotations

from collections.abc import Container, Iterator

from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.source import SourceFile, Span
from skriptnd.syntax import ast
from skriptnd.syntax.printer import format_expr, format_fragment

__all__ = ["with_nesting_hint"]


def with_nesting_hint(err: DiagnosticError, stmt: ast.Assign, source: SourceFile | None,
                      taken: Container[str]) -> DiagnosticError:
    """`err` with a hint on each E0503 that is an invocation nested in `stmt`'s right-hand side; `taken`: the
    names in scope, so the suggested temporary does not shadow one."""
    calls = {node.span: node for node in _operands(stmt.value) if isinstance(node, ast.Call)}
    diagnostics = []
    for d in err.diagnostics:
        inner = calls.get(d.span) if d.code == "E0503" and d.hint is None else None
        diagnostics.append(d if inner is None else _hinted(d, stmt, inner, source, taken))
    return DiagnosticError(diagnostics)


def _operands(node: ast.Node) -> Iterator[ast.Node]:
    """The nodes under an invocation's inputs (not its attributes: `{alpha=t}` cannot take a tensor)."""
    for child in (node.args if isinstance(node, ast.Call) else node.children()):
        yield child
        yield from _operands(child)


def _hinted(d: Diagnostic, stmt: ast.Assign, inner: ast.Call, source: SourceFile | None,
            taken: Container[str]) -> Diagnostic:
    name = next(n for n in ("t", *(f"t{i}" for i in range(1, 1000)), "tmp") if n not in taken)
    text = source.excerpt(inner.span) if source is not None else ""
    whole = source.excerpt(stmt.span) if source is not None else ""
    if text and whole and "\n" not in whole:  # one line: the user's own text
        start, end = _offset(stmt.span, inner.span.line, inner.span.col, whole), \
            _offset(stmt.span, inner.span.end_line, inner.span.end_col, whole)
        outer = whole[:start] + name + whole[end:]
    else:  # over lines, or no source text (an AST built in memory): the statement printed back
        text = format_expr(inner)
        outer = format_fragment(stmt, "stmt").replace(text, name, 1)
    outer = outer.strip()
    if not outer.endswith(";"):
        outer += ";"
    return Diagnostic(code=d.code, message=d.message, span=d.span, severity=d.severity, notes=d.notes,
                      hint=f"assign {text} to a name first: {name} = {text}; {outer}")


def _offset(outer: Span, line: int, col: int, text: str) -> int:
    """The index in `text` (the excerpt of `outer`) of source position line:col."""
    rows = text.split("\n")
    before = sum(len(r) + 1 for r in rows[:line - outer.line])
    return before + (col - outer.col if line == outer.line else col - 1)
