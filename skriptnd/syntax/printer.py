"""The formatter behind `sknd fmt`: AST → canonical SkriptND source text.

The printed text parses back to an equal AST (`parse(fmt(tree)) == tree`, spans aside) and
printing is idempotent. Layout: 4-space indentation, one declaration or statement per line,
definitions separated by a blank line, lines kept within WIDTH columns where the layout
allows (expressions themselves are never broken).

Parentheses are minimal, decided by the precedence table of docs/grammar.md, plus the few
places where the grammar needs them: a select without `:` before a `:` (dangling else), a
`<` whose right operand would be lexed as the start of type arguments, a select or
substitution as a range bound or an assertion with a message (for readability).

Comments are kept (see `_CommentMap`): a comment that followed code on its line stays at the
end of that item's (last) line; an own-line comment goes before the item that follows it, or
at the end of its block; comments inside a multi-line expression move before the statement.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from skriptnd.syntax import ast
from skriptnd.syntax.scan import mask
from skriptnd.syntax.strings import quote

WIDTH = 100
INDENT = "    "

# ---------------------------------------------------------------- precedence

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


def _dangles(e: ast.Expr) -> bool:
    """True when the printed e ends with a select that has no `:` branch (`c ? a`).

    A `:` printed right after such an expression would be taken as its missing branch.
    """
    last = _right_spine(e)[-1]
    return isinstance(last, ast.Select) and last.orelse is None


def _confusing_before_colon(e: ast.Expr) -> bool:
    """A select or substitution, which reads badly before a `:` (`c ? a : b: "msg"`)."""
    return isinstance(e, ast.Substitute) or any(isinstance(s, ast.Select) for s in _right_spine(e))


# `<` opens type arguments when followed by `T, U>` and `(`, `{` or `;` (grammar LT_TARGS).
# The printer writes type arguments as `op<T>` and the less-than operator as ` < `.
_FALSE_TARGS = re.compile(r"(?<= )<(?=\s*([A-Za-z_]\w*)\s*(?:,\s*[A-Za-z_]\w*\s*)*>\s*[({;])")
_TRAILING_WORD = re.compile(r"[A-Za-z0-9_.]+$")


def _fix_type_args(text: str) -> str:
    """Parenthesise the name after a less-than that would be lexed as type arguments.

    `a < b > (c)` and `[a < b, c > (d)]` would read as invocations `a<b>(c)`, `a<b, c>(d)`.
    """
    while True:
        m = _FALSE_TARGS.search(mask(text))
        if m is None:
            return text
        start, end = m.span(1)
        text = f"{text[:start]}({text[start:end]}){text[end:]}"


def _dots_after(text: str) -> str:
    """`..` to write after text: spaced after a number (`1 ..`) or another `..` (`x + .. ..`)."""
    if text.endswith("."):
        return " .."
    m = _TRAILING_WORD.search(text)
    if m is not None and m.group()[0].isdigit():
        return " .."
    return ".."


def _bar_join(*parts: str) -> str:
    """Concatenate, separating two `|` that would otherwise lex as `||`."""
    out = ""
    for p in parts:
        if out and p and out[-1] == "|" and p[0] == "|":
            out += " "
        out += p
    return out


def _real_text(e: ast.RealLit) -> str:
    if e.text:
        return e.text
    text = repr(float(e.value))
    if "." not in text and "e" not in text and "E" not in text:
        text += ".0"
    return text


# ---------------------------------------------------------------- comments


def _pos(span: Any) -> tuple[int, int]:
    return (span.line, span.col)


def _end(span: Any) -> tuple[int, int]:
    return (span.end_line, span.end_col)


def _sub_blocks(e: Any) -> list[ast.BlockExpr]:
    """The block expressions printed on lines of their own within a statement."""
    if isinstance(e, ast.Assign):
        return _sub_blocks(e.value)
    if isinstance(e, ast.BlockExpr):
        return [e]
    if isinstance(e, ast.IfExpr):
        out: list[ast.BlockExpr] = []
        for cond, then in e.branches:
            out += _sub_blocks(cond) + _sub_blocks(then)
        return out + _sub_blocks(e.orelse)
    if isinstance(e, ast.LoopExpr):
        return [b for part in (e.pre_cond, e.body, e.post_cond) if part is not None for b in _sub_blocks(part)]
    return []


def _layout_children(node: Any) -> list[Any]:
    if isinstance(node, ast.Module):
        return [*node.imports, *node.definitions]
    if isinstance(node, ast.Definition):
        return list(node.blocks)
    if isinstance(node, ast.Block):
        return list(node.items)
    if isinstance(node, ast.BlockExpr):
        return list(node.stmts)
    if isinstance(node, tuple | list):
        return list(node)
    return []


class _CommentMap:
    """Where each comment goes, keyed by the id of the node it is printed with.

    leading: own-line comments before the node, as (comment, blank line after it);
    trailing: the comment at the end of the node's last line;
    header: the comment after the `{` that opens a container;
    end: comments at the end of a container, before its `}`.
    """

    def __init__(self) -> None:
        self.leading: dict[int, list[tuple[ast.Comment, bool]]] = defaultdict(list)
        self.trailing: dict[int, ast.Comment] = {}
        self.header: dict[int, ast.Comment] = {}
        self.end: dict[int, list[tuple[ast.Comment, bool]]] = defaultdict(list)
        self.top: list[tuple[ast.Comment, bool]] = []

    def place(self, container: Any, comments: Sequence[ast.Comment], header_line: int | None) -> None:
        """Assign comments lying within container (a node or a tuple of nodes) to its items."""
        children = _layout_children(container)
        leading: dict[int, list[ast.Comment]] = defaultdict(list)
        inner: dict[int, list[ast.Comment]] = defaultdict(list)
        end: list[ast.Comment] = []
        for c in sorted(comments, key=lambda c: _pos(c.span)):
            p = _pos(c.span)
            inside = next((ch for ch in children if _pos(ch.span) <= p < _end(ch.span)), None)
            if inside is not None:
                inner[id(inside)].append(c)
                continue
            before = [ch for ch in children if ch.span.end_line == c.span.line and _end(ch.span) <= p]
            if before and id(before[-1]) not in self.trailing:
                self.trailing[id(before[-1])] = c
                continue
            following = [ch for ch in children if _pos(ch.span) > p]
            if (header_line is not None and c.span.line == header_line and id(container) not in self.header
                    and (not following or following[0].span.line > c.span.line)
                    and not any(_end(ch.span) <= p for ch in children)):
                self.header[id(container)] = c
                continue
            if following:
                leading[id(following[0])].append(c)
            else:
                end.append(c)
        for ch in children:
            if id(ch) in inner:
                self._place_inside(ch, inner[id(ch)])
            if id(ch) in leading:
                self.leading[id(ch)] = _with_gaps(leading[id(ch)], ch.span.line) + self.leading[id(ch)]
        if end:
            self.end[id(container)] += _with_gaps(end, None)

    def _place_inside(self, item: Any, comments: list[ast.Comment]) -> None:
        if isinstance(item, ast.Definition | ast.Block | ast.BlockExpr):
            self.place(item, comments, item.span.line)
            return
        blocks = _sub_blocks(item)
        moved = []
        within: dict[int, list[ast.Comment]] = defaultdict(list)
        for c in comments:
            p = _pos(c.span)
            block = next((b for b in blocks if _pos(b.span) <= p < _end(b.span)), None)
            if block is not None:
                within[id(block)].append(c)
            else:
                moved.append(c)
        for b in blocks:
            if id(b) in within:
                self.place(b, within[id(b)], b.span.line)
        self.leading[id(item)] += [(c, False) for c in moved]


def _with_gaps(comments: list[ast.Comment], next_line: int | None) -> list[tuple[ast.Comment, bool]]:
    """Pair each comment with whether a blank line separated it from what followed it."""
    out = []
    for k, c in enumerate(comments):
        following = comments[k + 1].span.line if k + 1 < len(comments) else next_line
        if next_line is not None and following is not None and following > next_line:
            following = next_line
        out.append((c, following is not None and following - c.span.line > 1))
    return out


# ---------------------------------------------------------------- the printer


class _Printer:
    def __init__(self, comments: _CommentMap | None = None) -> None:
        self.cm = comments or _CommentMap()
        self.string_depth = 0

    # ------------------------------------------------------------ expressions

    def top(self, e: ast.Expr) -> str:
        """A whole expression (as at the start rule `expr`)."""
        return _fix_type_args(self.x(e))

    def x(self, e: ast.Expr, min_level: int = EXPR) -> str:
        """e printed where an expression binding at least as tightly as min_level is expected."""
        text = self.raw(e)
        return f"({text})" if level(e) < min_level else text

    def raw(self, e: ast.Expr) -> str:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            raise TypeError(f"cannot print {type(e).__name__} as an expression")
        return method(e)

    def _IntLit(self, e: ast.IntLit) -> str:
        return str(e.value)

    def _RealLit(self, e: ast.RealLit) -> str:
        return _real_text(e)

    def _BoolLit(self, e: ast.BoolLit) -> str:
        return "true" if e.value else "false"

    def _NamedConst(self, e: ast.NamedConst) -> str:
        return e.name

    def _Name(self, e: ast.Name) -> str:
        return e.id

    def _StrLit(self, e: ast.StrLit) -> str:
        # A string inside a format field is part of the outer literal's text: it cannot use
        # the outer `"`, so it is written with single quotes.
        q = '"' if self.string_depth == 0 else "'"
        out = []
        for part in e.parts:
            if isinstance(part, str):
                text = quote([part])
                out.append(text if q == '"' else text.replace("'", "\\'"))
            else:
                self.string_depth += 1
                try:
                    out.append("{" + self.top(part.value) + "}")
                finally:
                    self.string_depth -= 1
        return q + "".join(out) + q

    def _Property(self, e: ast.Property) -> str:
        return f"{self.x(e.value, POSTFIX)}.{e.name}"

    def _Unary(self, e: ast.Unary) -> str:
        operand = self.x(e.operand, UNARY)
        sep = " " if operand.startswith(e.op) else ""  # `? ?x` is not `??x`; `- -1` reads better
        return f"{e.op}{sep}{operand}"

    def _Binary(self, e: ast.Binary) -> str:
        lv = BINARY_LEVEL[e.op]
        if e.op == "**":
            return f"{self.x(e.left, POSTFIX)} ** {self.x(e.right, UNARY)}"
        if e.op in RIGHT_ASSOC:
            return f"{self.x(e.left, lv + 1)} {e.op} {self.x(e.right, lv)}"
        # Left-associative: walk the left spine of the chain iteratively, as the parser
        # builds it (a sum of thousands of terms must not exhaust the recursion limit).
        right_level = SELECT if e.op == "??" else lv + 1
        rights: list[ast.Binary] = []
        cur: ast.Expr = e
        while isinstance(cur, ast.Binary) and BINARY_LEVEL[cur.op] == lv:
            rights.append(cur)
            cur = cur.left
        parts = [self.x(cur, lv)]
        parts += [f" {b.op} {self.x(b.right, right_level)}" for b in reversed(rights)]
        return "".join(parts)

    def _Fold(self, e: ast.Fold) -> str:
        return f"{self.x(e.operand, BINARY_LEVEL[e.op])} {e.op} {'...' if e.cumulative else '..'}"

    def _Select(self, e: ast.Select) -> str:
        parts = []
        cur: ast.Expr | None = e
        while isinstance(cur, ast.Select):  # iteratively along `c ? a : d ? b : ...`
            cond = self.x(cur.cond, CHAIN)
            if cur.orelse is None:
                parts.append(f"{cond} ? {self.x(cur.then, SELECT)}")
                return " : ".join(parts)
            parts.append(f"{cond} ? {self.before_colon(cur.then, SELECT)}")
            cur = cur.orelse
        parts.append(self.x(cur, SELECT))
        return " : ".join(parts)

    def before_colon(self, e: ast.Expr, min_level: int = EXPR, readable: bool = False) -> str:
        """e followed by `:`: parenthesised if it ends with `c ? a` (or, when readable, any select)."""
        text = self.x(e, min_level)
        if level(e) >= min_level and (_dangles(e) or (readable and _confusing_before_colon(e))):
            return f"({text})"
        return text

    def _Substitute(self, e: ast.Substitute) -> str:
        return f"{self.x(e.value, POSTFIX)}[{self.index(e.index)}] <- {self.x(e.replacement)}"

    def _Cast(self, e: ast.Cast) -> str:
        return f"{e.type}({'' if e.arg is None else self.x(e.arg)})"

    def _Skip(self, e: ast.Skip) -> str:
        return "~"

    def _Call(self, e: ast.Call) -> str:
        out = e.callee
        if e.type_args:
            out += "<" + ", ".join(e.type_args) + ">"
        if e.attrs:
            out += self.attrs(e.attrs)
        out += "(" + ", ".join(self.item(a) for a in e.args) + ")"
        return f"{e.label}: {out}" if e.label is not None else out

    def attrs(self, attrs: Iterable[ast.AttrAssign]) -> str:
        return "{" + ", ".join(f"{a.name}={self.x(a.value)}" for a in attrs) + "}"

    def _Expand(self, e: ast.Expand) -> str:
        value = self.x(e.value)
        out = value + _dots_after(value)
        return out if e.count is None else f"{out}({self.x(e.count)})"

    def _Range(self, e: ast.Range) -> str:
        start = "" if e.start is None else self.before_colon(e.start, readable=True)
        stop = "" if e.stop is None else (self.x(e.stop) if e.step is None
                                          else self.before_colon(e.stop, readable=True))
        out = f"{start}:{stop}"
        return out if e.step is None else f"{out}:{self.x(e.step)}"

    def _Zip(self, e: ast.Zip) -> str:
        return "(" + ", ".join(self.x(i) for i in e.items) + ").."

    def _ListExpr(self, e: ast.ListExpr) -> str:
        return "[" + ", ".join(self.item(i) for i in e.items) + "]"

    def _Bounded(self, e: ast.Bounded) -> str:
        if e.low is None or e.high is None:
            return _bar_join("|", self.x(e.value), "|")
        low = self.before_colon(e.low, readable=True)
        return _bar_join("|", f"{self.x(e.value)} <> {low} : {self.x(e.high)}", "|")

    def _Subscript(self, e: ast.Subscript) -> str:
        return f"{self.x(e.value, POSTFIX)}[{self.index(e.index)}]"

    def _TensorAccess(self, e: ast.TensorAccess, target: bool = False) -> str:
        items = ", ".join(self.item(i) for i in e.indices)
        if len(e.indices) == 1 and not target and not isinstance(e.indices[0], ast.Expand | ast.Bounded):
            items += ","  # `x[i]` would be a pack subscript
        return f"{self.x(e.tensor, POSTFIX)}[{items}]"

    def _BlockExpr(self, e: ast.BlockExpr) -> str:
        return self.block_expr(e, "")

    def _IfExpr(self, e: ast.IfExpr) -> str:
        return self.if_expr(e, "", 0)

    def _LoopExpr(self, e: ast.LoopExpr) -> str:
        return self.loop_expr(e, "", 0)

    def item(self, e: ast.Expr) -> str:
        """A list item, tensor index or invocation argument (Expand, Range, Zip, Skip allowed)."""
        return self.raw(e) if isinstance(e, ast.Expand | ast.Range | ast.Zip | ast.Skip) else self.x(e)

    def index(self, e: ast.Expr) -> str:
        return self.raw(e) if isinstance(e, ast.Range) else self.x(e)

    # ------------------------------------------------------------ types

    def pack(self, p: ast.PackSpec | None, after: str) -> str:
        if p is None:
            return ""
        dots = _dots_after(after)
        if p.length is None:
            return dots
        length = self.x(p.length)
        return f"{dots}({_bar_join(length, '|', self.x(p.bound)) if p.bound is not None else length})"

    def type_spec(self, t: ast.TypeSpec) -> str:
        out = ("optional " if t.optional else "") + t.name
        if t.rank is not None:
            out += f"^({t.rank})"
        if t.shape is not None:
            out += "[" + ", ".join(self.shape_item(s) for s in t.shape) + "]"
        return out + self.pack(t.pack, out)

    def shape_item(self, s: ast.ShapeItem) -> str:
        out = ".." if s.distinct else ""
        out += "~" if s.value is None else self.x(s.value)
        if s.bound is not None:
            out = _bar_join(out, "|", self.x(s.bound))
        return out + self.pack(s.pack, out)

    def lvalue(self, lv: ast.LValue) -> str:
        if isinstance(lv, ast.LName):
            out = lv.name
            if lv.type is not None:
                out += ": " + self.type_spec(lv.type)
            return out + self.pack(lv.pack, out)
        if isinstance(lv, ast.LList):
            return "[" + ", ".join(self.lvalue(i) for i in lv.items) + "]"
        if isinstance(lv, ast.LZip):
            out = "(" + ", ".join(self.lvalue(i) for i in lv.items) + ")"
            return out + self.pack(lv.pack, out)
        if isinstance(lv, ast.LSkip):
            return "~"
        raise TypeError(f"cannot print {type(lv).__name__} as a left-hand side")

    # ------------------------------------------------------------ layout helpers

    def comment_lines(self, node: Any, ind: str, key: str = "leading") -> list[str]:
        entries = (self.cm.leading if key == "leading" else self.cm.end).get(id(node), ())
        lines: list[str] = []
        for k, (c, blank) in enumerate(entries):
            lines.append(ind + c.text)
            if blank and (key == "leading" or k + 1 < len(entries)):
                lines.append("")
        return lines

    def trailing(self, node: Any) -> str:
        c = self.cm.trailing.get(id(node))
        return "" if c is None else "  " + c.text

    def header(self, node: Any) -> str:
        c = self.cm.header.get(id(node))
        return "" if c is None else "  " + c.text

    def item_lines(self, node: Any, ind: str, text: str) -> list[str]:
        """Leading comments, then ind + text (possibly multi-line), then the trailing comment."""
        return [*self.comment_lines(node, ind), ind + text + self.trailing(node)]

    def braces(self, node: Any, head: str, lines: list[str], ind: str) -> str:
        """`head {` + lines + `}` (the lines already indented), with header and end comments."""
        lines = lines + self.comment_lines(node, ind + INDENT, "end")
        hdr = self.header(node)
        if not lines and not hdr:
            return head + "{}"
        return head + "{" + hdr + "\n" + "\n".join(lines) + "\n" + ind + "}"

    # ------------------------------------------------------------ statements

    def stmt(self, s: ast.Stmt, ind: str) -> str:
        if isinstance(s, ast.Yield):
            return _fix_type_args("yield " + ", ".join(self.x(v) for v in s.values) + ";")
        if isinstance(s, ast.Assign):
            head = ", ".join(self.lvalue(t) for t in s.targets) + " = "
            return _fix_type_args(head + self.rhs(s.value, ind, len(ind) + len(head)) + ";")
        raise TypeError(f"cannot print {type(s).__name__} as a statement")

    def stmt_lines(self, stmts: Iterable[ast.Stmt], ind: str) -> list[str]:
        lines: list[str] = []
        for s in stmts:
            lines += self.item_lines(s, ind, self.stmt(s, ind))
        return lines

    def rhs(self, e: ast.Expr, ind: str, col: int) -> str:
        """A right-hand side or control-flow branch: may be a block, if or loop expression."""
        if isinstance(e, ast.BlockExpr):
            return self.block_expr(e, ind)
        if isinstance(e, ast.IfExpr):
            return self.if_expr(e, ind, col)
        if isinstance(e, ast.LoopExpr):
            return self.loop_expr(e, ind, col)
        return self.value(e, col, 1)

    def branch(self, e: ast.Expr, ind: str) -> str:
        """A control-flow condition or branch inside a line: a block or a one-line expression."""
        return self.block_expr(e, ind) if isinstance(e, ast.BlockExpr) else self.x(e)

    def value(self, e: ast.Expr, col: int, tail: int) -> str:
        """e starting at column col, followed by tail characters on its line.

        When that line would be too long, a chain of selects is written one `c ? a :` per
        line, aligned at col; other expressions are never broken.
        """
        flat = self.x(e)
        if col + len(flat) + tail <= WIDTH or not (isinstance(e, ast.Select) and e.orelse is not None):
            return flat
        lines = []
        while isinstance(e, ast.Select) and e.orelse is not None:
            lines.append(f"{self.x(e.cond, CHAIN)} ? {self.before_colon(e.then, SELECT)} :")
            e = e.orelse
        lines.append(self.x(e, SELECT))
        return ("\n" + " " * col).join(lines)

    def block_expr(self, e: ast.BlockExpr, ind: str) -> str:
        head = f"{e.label}: " if e.label is not None else ""
        return self.braces(e, head, self.stmt_lines(e.stmts, ind + INDENT), ind)

    def if_expr(self, e: ast.IfExpr, ind: str, col: int) -> str:
        pairs = [("if", c, t) for c, t in e.branches]
        pairs = [(kw if k == 0 else "elif", c, t) for k, (kw, c, t) in enumerate(pairs)]
        has_block = any(isinstance(b, ast.BlockExpr) for _, c, t in pairs for b in (c, t)) or isinstance(
            e.orelse, ast.BlockExpr)
        if not has_block:
            flat = " ".join(f"{kw} {self.x(c)} then {self.x(t)}" for kw, c, t in pairs)
            flat += f" else {self.x(e.orelse)}"
            if col + len(flat) + 1 <= WIDTH:
                return flat
        out = ""
        prev_block = False
        inner = ind + INDENT
        for k, (kw, c, t) in enumerate(pairs):
            if k:
                out += " " if prev_block else "\n" + ind
            out += f"{kw} {self.branch(c, ind)} then"
            out, prev_block = self._branch_after(out, t, ind, inner)
        out += " " if prev_block else "\n" + ind
        out += "else"
        out, _ = self._branch_after(out, e.orelse, ind, inner)
        return out

    def _branch_after(self, out: str, branch: ast.Expr, ind: str, inner: str) -> tuple[str, bool]:
        if isinstance(branch, ast.BlockExpr):
            return out + " " + self.block_expr(branch, ind), True
        return out + "\n" + inner + self.rhs(branch, inner, len(inner)), False

    def loop_expr(self, e: ast.LoopExpr, ind: str, col: int) -> str:
        head = []
        if e.carried:
            head.append("with " + ", ".join(self.carried(c) for c in e.carried))
        if e.scans:
            head.append("for " + ", ".join(f"{s.name} : {self.x(s.pack)}" for s in e.scans))
        if e.pre_cond is not None:
            head.append("while " + self.branch(e.pre_cond, ind))
        kw = "unroll" if e.unroll else "do"
        if e.count is not None:
            kw += self.iter_count(e.count)
        head.append(kw)
        body = self.branch(e.body, ind)
        tail = "" if e.post_cond is None else " while " + self.branch(e.post_cond, ind)
        flat = " ".join(head) + " " + body + tail
        if "\n" in flat or col + len(flat) + 1 <= WIDTH:
            return flat
        inner = ind + INDENT
        return " ".join(head) + "\n" + inner + self.rhs(e.body, inner, len(inner)) + tail

    def carried(self, c: ast.Carried) -> str:
        out = c.name
        if c.type is not None:
            out += ": " + self.type_spec(c.type)
        return f"{out} = {self.x(c.value)}"

    def iter_count(self, c: ast.IterCount) -> str:
        inside = ""
        if c.index is not None:
            inside = f"{c.index} ->" + ("" if c.count is None else " ")
        if c.count is not None:
            inside += self.x(c.count)
        return f"..({inside})"

    # ------------------------------------------------------------ declarations

    def decl(self, d: Any, ind: str) -> str:
        if isinstance(d, ast.Stmt):
            return self.stmt(d, ind)
        method = getattr(self, "_decl_" + type(d).__name__)
        return _fix_type_args(method(d, ind))

    def _decl_DtypeDecl(self, d: ast.DtypeDecl, ind: str) -> str:
        return f"{d.name}: {d.base}" + ("" if d.default is None else f" = {d.default}") + ";"

    def _decl_ParamDecl(self, d: ast.ParamDecl, ind: str) -> str:
        out = f"{d.name}: {self.type_spec(d.type)}"
        if d.default is not None:
            out += " = "
            bounds = "".join(f", {self.loop_bound(b)}" for b in d.bounds)
            out += self.value(d.default, len(ind) + len(out), len(bounds) + 1) + bounds
        return out + ";"

    def loop_bound(self, b: ast.LoopBound) -> str:
        return f"{b.index} < {self.x(b.bound)}"

    def _decl_UsingDecl(self, d: ast.UsingDecl, ind: str) -> str:
        head = f"{self.lvalue(d.target)} = "
        return head + self.value(d.value, len(ind) + len(head), 1) + ";"

    def _decl_Quantization(self, d: ast.Quantization, ind: str) -> str:
        out = f"{d.tensor}: {d.op}"
        if d.type_args:
            out += "<" + ", ".join(d.type_args) + ">"
        if d.attrs:
            out += self.attrs(d.attrs)
        return out + ";"

    def _decl_Assertion(self, d: ast.Assertion, ind: str) -> str:
        if d.message is None:
            return self.x(d.condition) + ";"
        cond = self.before_colon(d.condition, readable=True) + ":"
        message = self.x(d.message)
        args = ", ".join(self.assert_arg(a) for a in d.args)
        tail = message + (", " + args if args else "") + ";"
        if len(ind) + len(cond) + 1 + len(tail) <= WIDTH:
            return cond + " " + tail
        inner = "\n" + ind + INDENT
        if not args or len(inner) - 1 + len(tail) <= WIDTH:
            return cond + inner + tail
        return cond + inner + message + "," + inner + args + ";"

    def assert_arg(self, a: ast.AssertArg) -> str:
        if a.label is None:
            return self.x(a.value)
        label = f'"{quote([a.label])}"' if a.label_quoted else a.label
        return f"{label}: {self.x(a.value)}"

    def _decl_Lowering(self, d: ast.Lowering, ind: str) -> str:
        prefix = "" if d.unroll is None else "unroll" + self.iter_count(d.unroll)
        locals_ = [f"{a.name} = {self.x(a.value)}" for a in d.locals[:-1]]
        locals_ += [f"{a.name} = {self.before_colon(a.value)}" for a in d.locals[-1:]]
        with_ = "with " + ", ".join(locals_) + ":" if locals_ else ""
        target = self._TensorAccess(d.target, target=True) if isinstance(d.target, ast.TensorAccess) \
            else self.x(d.target, POSTFIX)
        main = f"{target} {d.op} {self.x(d.value)}"
        bounds = ", ".join(self.loop_bound(b) for b in d.bounds)
        cond = "" if d.condition is None else _bar_join("| ", self.x(d.condition))
        tail = (", " + bounds if bounds else "") + (" " + cond if cond else "") + ";"
        flat = " ".join(p for p in (prefix, with_, main) if p) + tail
        if len(ind) + len(flat) <= WIDTH:
            return flat
        inner = ind + INDENT
        lines = []  # each with its indentation, the first one's added by the caller
        head = " ".join(p for p in (prefix, with_) if p)
        if with_ and len(ind) + len(head) > WIDTH:
            lines.append((prefix + " " if prefix else "") + "with")
            for k, a in enumerate(d.locals):
                last = k + 1 == len(d.locals)
                text = self.value(a.value, len(inner) + len(a.name) + 3, 1)
                if last and _dangles(a.value):
                    text = f"({text})"
                lines.append(f"{inner}{a.name} = {text}" + (":" if last else ","))
        elif head:
            lines.append(head)
        main = f"{target} {d.op} " + self.value(d.value, len(ind) + len(target) + len(d.op) + 2, 1)
        lines.append((ind if lines else "") + main + ("," if bounds else ""))
        if bounds or cond:
            lines.append(inner + " ".join(p for p in (bounds, cond) if p))
        lines[-1] += ";"
        return "\n".join(lines)

    # ------------------------------------------------------------ blocks and documents

    def block(self, b: ast.Block, ind: str) -> str:
        lines: list[str] = []
        inner = ind + INDENT
        for d in b.items:
            lines += self.item_lines(d, inner, self.decl(d, inner))
        return self.braces(b, f"@{ast.block_name(b)} ", lines, ind)

    def block_lines(self, blocks: Iterable[ast.Block], ind: str) -> list[str]:
        lines: list[str] = []
        for b in blocks:
            lines += self.item_lines(b, ind, self.block(b, ind))
        return lines

    def definition(self, d: ast.Definition) -> str:
        head = ("public " if d.public else "") + f"{d.kind} {d.name} "
        return self.braces(d, head, self.block_lines(d.blocks, INDENT), "")

    def module(self, m: ast.Module) -> str:
        out: list[str] = [c.text if c else "" for c in _flatten_gaps(self.cm.top)]
        head: list[str] = []
        if m.version is not None:
            head.append(f"version {m.version[0]}.{m.version[1]};")
        head += [f"extension {e};" for e in m.extensions]
        sections: list[list[str]] = []
        if head:
            sections.append(head)
        if m.imports:
            lines: list[str] = []
            for imp in m.imports:
                lines += self.item_lines(imp, "", f"import {imp.module};")
            sections.append(lines)
        for d in m.definitions:
            sections.append(self.item_lines(d, "", self.definition(d)))
        end = self.comment_lines(m, "", "end")
        if end:
            sections.append(end)
        body = "\n\n".join("\n".join(s) for s in sections)
        text = "\n".join(out) + ("\n" if out and body else "") + body
        return text + "\n" if text else ""


def _flatten_gaps(entries: list[tuple[ast.Comment, bool]]) -> list[ast.Comment | None]:
    out: list[ast.Comment | None] = []
    for c, blank in entries:
        out.append(c)
        if blank:
            out.append(None)
    return out


# ---------------------------------------------------------------- entry points


def _module_comments(m: ast.Module) -> _CommentMap:
    cm = _CommentMap()
    if not m.comments:
        return cm
    items = [*m.imports, *m.definitions]
    comments = sorted(m.comments, key=lambda c: _pos(c.span))
    first = min((_pos(i.span) for i in items), default=None)
    top: list[ast.Comment] = []
    rest: list[ast.Comment] = []
    for c in comments:
        before_first = first is None or _pos(c.span) < first
        if before_first and (m.version is not None or m.extensions) and c.span.line < m.span.line:
            top.append(c)
        else:
            rest.append(c)
    cm.top = _with_gaps(top, m.span.line)
    cm.place(m, rest, None)
    return cm


def format_module(module: ast.Module) -> str:
    """The canonical text of a module, comments included."""
    return _Printer(_module_comments(module)).module(module)


def format_expr(expr: ast.Expr) -> str:
    """An expression on one line, as parsed by the start rule `expr`."""
    return _Printer().top(expr)


def format_fragment(node: Any, start: str, comments: Sequence[ast.Comment] = ()) -> str:
    """Text for a fragment parsed with one of the parser's start rules.

    start: module (an ast.Module), blocks (a tuple of ast.Block), compose_body (a tuple of
    statements, printed in braces), block_stmt (an ast.BlockExpr), stmt, expr. comments are
    those of the fragment's source (fragments parse without them), with their spans.
    """
    if start == "module":
        return format_module(node)
    cm = _CommentMap()
    p = _Printer(cm)
    if start == "expr":
        lines = [c.text for c in comments] + [p.top(node)]
        return "\n".join(lines) + "\n"
    wrapper = tuple(node) if start in ("blocks", "compose_body") else (node,)
    cm.place(wrapper, comments, None)
    if start == "blocks":
        lines = p.block_lines(wrapper, "")
    elif start == "compose_body":
        lines = [p.braces(wrapper, "", p.stmt_lines(wrapper, INDENT), "")]
    elif start == "block_stmt":
        lines = p.item_lines(node, "", p.block_expr(node, ""))
    elif start == "stmt":
        lines = p.item_lines(node, "", p.stmt(node, ""))
    else:
        raise ValueError(f"unknown start rule '{start}'")
    if start != "compose_body":
        lines += p.comment_lines(wrapper, "", "end")
    return "\n".join(lines) + "\n"


def format_type(spec: ast.TypeSpec) -> str:
    """A type specification as written in a declaration: `optional real[s..(d), n]..(k)`."""
    return _fix_type_args(_Printer().type_spec(spec))
