"""Operator precedence as the printer needs it: the level of every expression, and the few places where
the grammar needs parentheses or spaces beyond precedence (a dangling `?`, a `<` that would open type
arguments, `..` after a number). Levels follow the grammar's ladder (docs/grammar.md); the parser's
table (transform.py, PRECEDENCE) uses the same numbers.
"""

from __future__ import annotations

import re

from skriptnd.syntax import ast
from skriptnd.syntax.scan import mask

# Levels of the grammar's ladder (the comment above `?expr`), loosest first. `??` and `?:`
# are rules of their own; the binary operators from `=>` to `*` form one flat chain grouped
# by precedence in transform.py (its PRECEDENCE table uses the same numbers).
EXPR = 0  # substitution `a[i] <- b` (right side: an expr)
COALESCE = 1  # `a ?? b`, left-associative, right operand a select
SELECT = 2  # `c ? a : b`, `c ? a`; condition a chain, branches selects
IMPLIES, OR, XOR, AND, CMP, MINMAX, ADD, MUL = 4, 5, 6, 7, 8, 9, 10, 11
UNARY, POWER, POSTFIX, ATOM = 12, 13, 14, 15
CHAIN = IMPLIES  # the loosest level of the chain

BINARY_LEVEL = {
    "??": COALESCE, "=>": IMPLIES, "||": OR, "^": XOR, "&&": AND,
    "<": CMP, "<=": CMP, ">": CMP, ">=": CMP, "==": CMP, "!=": CMP, "is": CMP, "in": CMP, ":=": CMP,
    "<?": MINMAX, ">?": MINMAX, "+": ADD, "-": ADD, "*": MUL, "/": MUL, "\\": MUL, "%": MUL,
    "**": POWER,
}
RIGHT_ASSOC = {"=>"}


def level(e: ast.Expr) -> int:
    """How tightly the printed form of e binds (higher binds tighter)."""
    if isinstance(e, ast.Substitute):
        return EXPR
    if isinstance(e, ast.Select):
        return SELECT
    if isinstance(e, ast.Binary | ast.Fold):
        return BINARY_LEVEL.get(e.op, EXPR)
    if isinstance(e, ast.Unary):
        return UNARY
    if isinstance(e, ast.Call | ast.Subscript | ast.TensorAccess | ast.Property):
        return POSTFIX
    return ATOM


def _right_spine(e: ast.Expr) -> list[ast.Expr]:
    """e and the unparenthesised expressions printed at its right end, outermost first."""
    out = [e]
    while True:
        if isinstance(e, ast.Select) and e.orelse is not None:
            nxt, at = e.orelse, SELECT
        elif isinstance(e, ast.Binary) and e.op == "??":
            nxt, at = e.right, SELECT
        elif isinstance(e, ast.Substitute):
            nxt, at = e.replacement, EXPR
        else:
            return out
        if level(nxt) < at:
            return out
        out.append(nxt)
        e = nxt


def dangles(e: ast.Expr) -> bool:
    """True when the printed e ends with a select that has no `:` branch (`c ? a`).

    A `:` printed right after such an expression would be taken as its missing branch.
    """
    last = _right_spine(e)[-1]
    return isinstance(last, ast.Select) and last.orelse is None


def confusing_before_colon(e: ast.Expr) -> bool:
    """A select or substitution, which reads badly before a `:` (`c ? a : b: "msg"`)."""
    return isinstance(e, ast.Substitute) or any(isinstance(s, ast.Select) for s in _right_spine(e))


# `<` opens type arguments when followed by `T, U>` and `(`, `{` or `;` (grammar LT_TARGS).
# The printer writes type arguments as `op<T>` and the less-than operator as ` < `.
_FALSE_TARGS = re.compile(r"(?<= )<(?=\s*([A-Za-z_]\w*)\s*(?:,\s*[A-Za-z_]\w*\s*)*>\s*[({;])")
_TRAILING_WORD = re.compile(r"[A-Za-z0-9_.]+$")


def fix_type_args(text: str) -> str:
    """Parenthesise the name after a less-than that would be lexed as type arguments.

    `a < b > (c)` and `[a < b, c > (d)]` would read as invocations `a<b>(c)`, `a<b, c>(d)`.
    """
    while True:
        m = _FALSE_TARGS.search(mask(text))
        if m is None:
            return text
        start, end = m.span(1)
        text = f"{text[:start]}({text[start:end]}){text[end:]}"


def dots_after(text: str) -> str:
    """`..` to write after text: spaced after a number (`1 ..`) or another `..` (`x + .. ..`)."""
    if text.endswith("."):
        return " .."
    m = _TRAILING_WORD.search(text)
    if m is not None and m.group()[0].isdigit():
        return " .."
    return ".."


def bar_join(*parts: str) -> str:
    """Concatenate, separating two `|` that would otherwise lex as `||`."""
    out = ""
    for p in parts:
        if out and p and out[-1] == "|" and p[0] == "|":
            out += " "
        out += p
    return out


def real_text(e: ast.RealLit) -> str:
    if e.text:
        return e.text
    text = repr(float(e.value))
    if "." not in text and "e" not in text and "E" not in text:
        text += ".0"
    return text
