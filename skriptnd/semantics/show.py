"""SkriptND text of expressions as diagnostics quote them (canonical spacing, minimal parentheses),
and the "did you mean" spelling suggestion.

Apart from the symbol table (semantics.scope) because every checker message uses it and it
needs nothing but the AST; syntax.printer, by contrast, reproduces whole source files.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from skriptnd.syntax import ast

_BINARY_LEVEL = {"??": 3, "=>": 4, "||": 5, "^": 6, "&&": 7,
                 "<": 8, "<=": 8, ">": 8, ">=": 8, "==": 8, "!=": 8, "is": 8, "in": 8, ":=": 8,
                 "<?": 9, ">?": 9, "+": 10, "-": 10, "*": 11, "/": 11, "\\": 11, "%": 11, "**": 13}


def _level(expr: ast.Expr) -> int:
    if isinstance(expr, ast.Substitute):
        return 1
    if isinstance(expr, ast.Select):
        return 2
    if isinstance(expr, ast.Binary):
        return _BINARY_LEVEL.get(expr.op, 8)
    if isinstance(expr, ast.Fold):
        return _BINARY_LEVEL.get(expr.op, 8)
    if isinstance(expr, ast.Unary):
        return 12
    return 15


def _wrap(expr: ast.Expr, level: int) -> str:
    text = show(expr)
    return f"({text})" if _level(expr) < level else text


def _show_index(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Range):
        parts = [show(expr.start) if expr.start else "", show(expr.stop) if expr.stop else ""]
        if expr.step is not None:
            parts.append(show(expr.step))
        return ":".join(parts)
    return show(expr)


def show(expr: ast.Node | None) -> str:
    """SkriptND text for an expression (canonical spacing, minimal parentheses)."""
    if expr is None:
        return "~"
    if isinstance(expr, ast.IntLit):
        return str(expr.value)
    if isinstance(expr, ast.RealLit):
        return expr.text or repr(expr.value)
    if isinstance(expr, ast.BoolLit):
        return "true" if expr.value else "false"
    if isinstance(expr, ast.NamedConst):
        return expr.name
    if isinstance(expr, ast.StrLit):
        body = "".join(p if isinstance(p, str) else "{" + show(p.value) + "}" for p in expr.parts)
        return "'" + body.replace("'", "\\'") + "'"
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Property):
        return f"{_wrap(expr.value, 14)}.{expr.name}"
    if isinstance(expr, ast.Unary):
        return f"{expr.op}{_wrap(expr.operand, 12)}"
    if isinstance(expr, ast.Binary):
        level = _BINARY_LEVEL.get(expr.op, 8)
        right_assoc = expr.op in ("=>", "**")
        left = _wrap(expr.left, level + 1 if right_assoc else level)
        right = _wrap(expr.right, level if right_assoc else level + 1)
        return f"{left} {expr.op} {right}"
    if isinstance(expr, ast.Fold):
        return f"{_wrap(expr.operand, _BINARY_LEVEL.get(expr.op, 8))} {expr.op} {'...' if expr.cumulative else '..'}"
    if isinstance(expr, ast.Select):
        text = f"{_wrap(expr.cond, 3)} ? {_wrap(expr.then, 2)}"
        return text + (f" : {_wrap(expr.orelse, 2)}" if expr.orelse is not None else "")
    if isinstance(expr, ast.Cast):
        return f"{expr.type}({show(expr.arg) if expr.arg is not None else ''})"
    if isinstance(expr, ast.Call):
        attrs = "{" + ", ".join(f"{a.name}={show(a.value)}" for a in expr.attrs) + "}" if expr.attrs else ""
        targs = "<" + ", ".join(expr.type_args) + ">" if expr.type_args else ""
        label = f"{expr.label}: " if expr.label else ""
        return f"{label}{expr.callee}{targs}{attrs}({', '.join(show(a) for a in expr.args)})"
    if isinstance(expr, ast.Skip):
        return "~"
    if isinstance(expr, ast.Expand):
        count = f"({show(expr.count)})" if expr.count is not None else ""
        inner = _wrap(expr.value, 15) if isinstance(expr.value, ast.IntLit | ast.RealLit) else show(expr.value)
        sep = " .." if isinstance(expr.value, ast.IntLit) else ".."
        return f"{inner}{sep}{count}"
    if isinstance(expr, ast.Range):
        return _show_index(expr)
    if isinstance(expr, ast.Zip):
        return "(" + ", ".join(show(i) for i in expr.items) + ").."
    if isinstance(expr, ast.ListExpr):
        return "[" + ", ".join(show(i) for i in expr.items) + "]"
    if isinstance(expr, ast.Subscript):
        return f"{_wrap(expr.value, 14)}[{_show_index(expr.index)}]"
    if isinstance(expr, ast.Bounded):
        if expr.low is None:
            return f"|{show(expr.value)}|"
        return f"|{show(expr.value)} <> {show(expr.low)} : {show(expr.high)}|"
    if isinstance(expr, ast.TensorAccess):
        inner = ", ".join(_show_index(i) for i in expr.indices)
        if len(expr.indices) == 1:
            inner += ","
        return f"{_wrap(expr.tensor, 14)}[{inner}]"
    if isinstance(expr, ast.Substitute):
        return f"{_wrap(expr.value, 14)}[{_show_index(expr.index)}] <- {show(expr.replacement)}"
    if isinstance(expr, ast.BlockExpr):
        return "{...}"
    if isinstance(expr, ast.IfExpr):
        return "if ..."
    if isinstance(expr, ast.LoopExpr):
        return "loop"
    return type(expr).__name__


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate spelling, if any is close enough."""
    pool = sorted({c for c in candidates if c != name and not c.startswith("|")})
    found = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    return found[0] if found else None


def show_lvalue(target: ast.LValue) -> str:
    """A @using target as written (`x..`, `[a, b]`, `(a, b)..`)."""
    if isinstance(target, ast.LName):
        return target.name + (".." if target.pack is not None else "")
    if isinstance(target, ast.LList):
        return "[" + ", ".join(show_lvalue(i) for i in target.items) + "]"
    if isinstance(target, ast.LZip):
        return "(" + ", ".join(i.name for i in target.items) + ").."
    return "~"
