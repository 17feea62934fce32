"""The formatter behind `sknd fmt`: AST → canonical SkriptND source text.

The printed text parses back to an equal AST (`parse(fmt(tree)) == tree`, spans aside) and
printing is idempotent. Layout: 4-space indentation, one declaration or statement per line,
definitions separated by a blank line, lines kept within WIDTH columns where the layout
allows (expressions themselves are never broken).

Parentheses are minimal, decided by the precedence table of docs/grammar.md, plus the few
places where the grammar needs them: a select without `:` before a `:` (dangling else), a
`<` whose right operand would be lexed as the start of type arguments, a select or
substitution as a range bound or an assertion with a message (for readability).

Comments are kept where comment_layout.py places them; the precedence levels and the grammar's
special cases come from precedence.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from skriptnd.syntax import ast
from skriptnd.syntax.comment_layout import CommentMap, Container, flatten_gaps, module_comments
from skriptnd.syntax.precedence import (
    BINARY_LEVEL,
    CHAIN,
    EXPR,
    POSTFIX,
    RIGHT_ASSOC,
    SELECT,
    UNARY,
    bar_join,
    confusing_before_colon,
    dangles,
    dots_after,
    fix_type_args,
    level,
    real_text,
)
from skriptnd.syntax.strings import quote

WIDTH = 100
INDENT = "    "


# ---------------------------------------------------------------- the printer


class _Printer:
    def __init__(self, comments: CommentMap | None = None) -> None:
        self.cm = comments or CommentMap()
        self.string_depth = 0

    # ------------------------------------------------------------ expressions

    def top(self, e: ast.Expr) -> str:
        """A whole expression (as at the start rule `expr`)."""
        return fix_type_args(self.x(e))

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
        return real_text(e)

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
        if level(e) >= min_level and (dangles(e) or (readable and confusing_before_colon(e))):
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
        out = value + dots_after(value)
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
            return bar_join("|", self.x(e.value), "|")
        low = self.before_colon(e.low, readable=True)
        return bar_join("|", f"{self.x(e.value)} <> {low} : {self.x(e.high)}", "|")

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
        dots = dots_after(after)
        if p.length is None:
            return dots
        length = self.x(p.length)
        return f"{dots}({bar_join(length, '|', self.x(p.bound)) if p.bound is not None else length})"

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
            out = bar_join(out, "|", self.x(s.bound))
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

    def comment_lines(self, node: Container, ind: str, key: str = "leading") -> list[str]:
        entries = (self.cm.leading if key == "leading" else self.cm.end).get(id(node), ())
        lines: list[str] = []
        for k, (c, blank) in enumerate(entries):
            lines.append(ind + c.text)
            if blank and (key == "leading" or k + 1 < len(entries)):
                lines.append("")
        return lines

    def trailing(self, node: Container) -> str:
        c = self.cm.trailing.get(id(node))
        return "" if c is None else "  " + c.text

    def header(self, node: Container) -> str:
        c = self.cm.header.get(id(node))
        return "" if c is None else "  " + c.text

    def item_lines(self, node: Container, ind: str, text: str) -> list[str]:
        """Leading comments, then ind + text (possibly multi-line), then the trailing comment."""
        return [*self.comment_lines(node, ind), ind + text + self.trailing(node)]

    def braces(self, node: Container, head: str, lines: list[str], ind: str) -> str:
        """`head {` + lines + `}` (the lines already indented), with header and end comments."""
        lines = lines + self.comment_lines(node, ind + INDENT, "end")
        hdr = self.header(node)
        if not lines and not hdr:
            return head + "{}"
        return head + "{" + hdr + "\n" + "\n".join(lines) + "\n" + ind + "}"

    # ------------------------------------------------------------ statements

    def stmt(self, s: ast.Stmt, ind: str) -> str:
        if isinstance(s, ast.Yield):
            return fix_type_args("yield " + ", ".join(self.x(v) for v in s.values) + ";")
        if isinstance(s, ast.Assign):
            head = ", ".join(self.lvalue(t) for t in s.targets) + " = "
            return fix_type_args(head + self.rhs(s.value, ind, len(ind) + len(head)) + ";")
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

    def decl(self, d: ast.Node, ind: str) -> str:
        if isinstance(d, ast.Stmt):
            return self.stmt(d, ind)
        method = getattr(self, "_decl_" + type(d).__name__)
        return fix_type_args(method(d, ind))

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
        cond = "" if d.condition is None else bar_join("| ", self.x(d.condition))
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
                if last and dangles(a.value):
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
        out: list[str] = [c.text if c else "" for c in flatten_gaps(self.cm.top)]
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



# ---------------------------------------------------------------- entry points


def format_module(module: ast.Module) -> str:
    """The canonical text of a module, comments included."""
    return _Printer(module_comments(module)).module(module)


def format_expr(expr: ast.Expr) -> str:
    """An expression on one line, as parsed by the start rule `expr`."""
    return _Printer().top(expr)


def format_fragment(node: Container, start: str, comments: Sequence[ast.Comment] = ()) -> str:
    """Text for a fragment parsed with one of the parser's start rules.

    start: module (an ast.Module), blocks (a tuple of ast.Block), compose_body (a tuple of
    statements, printed in braces), block_stmt (an ast.BlockExpr), stmt, expr. comments are
    those of the fragment's source (fragments parse without them), with their spans.
    """
    if start == "module":
        return format_module(node)
    cm = CommentMap()
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
    return fix_type_args(_Printer().type_spec(spec))
