"""Lark parse tree → skriptnd.syntax.ast.

The grammar is deliberately permissive where one syntax serves several meanings (list
items, pack indices and tensor indices share `[...]`; callees are postfix expressions);
this transformer decides what was meant and reports misuses as located diagnostics, which
gives better messages than a grammar-level rejection would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Token, Tree

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast
from skriptnd.syntax.strings import FieldSource, split_literal

FOLDABLE = {"+", "*", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "<?", ">?", ":="}
CUMULATIVE = {"+", "*", "&&", "||", "<?", ">?"}
PROPERTIES = {"shape", "rank", "size"}
#: Digits an integer literal may have: Python's limit for int(text) (sys.get_int_max_str_digits()).
MAX_INT_DIGITS = 4300
ABSTRACT_TYPES = {"type", "arith", "num"}

#: Binding strength of the binary operators of a chain (docs/grammar.md, levels 4 to 11).
PRECEDENCE = {
    "IMPLIES": 4, "OR": 5, "XOR": 6, "AND": 7,
    "CMP_OP": 8, "LT": 8, "IS": 8, "IN": 8, "UNIFORM": 8,
    "MINMAX": 9, "ADD_OP": 10, "STAR": 11, "MUL_OP": 11,
}
RIGHT_ASSOC = {"IMPLIES"}

#: Keywords that can never be names. `is` and `in` are operators only between operands, and
#: stay usable as names elsewhere: the spec's own conv example (§2.1) names an extent `is`.
RESERVED = frozenset(
    "if then elif else with for while do unroll yield optional graph operator public version extension import "
    "true false inf pi type arith num int real bool str".split())


class _TypeArgs(tuple):
    pass


class _Attrs(tuple):
    pass


class _Items:
    """Contents of `[...]`, before we know whether it is a list, a subscript or an access."""

    __slots__ = ("items", "trailing_comma", "span")

    def __init__(self, items: list[Any], trailing_comma: bool, span: Span) -> None:
        self.items = items
        self.trailing_comma = trailing_comma
        self.span = span


class _Slice:
    __slots__ = ("start", "stop", "step", "span")

    def __init__(self, start: Any, stop: Any, step: Any, span: Span) -> None:
        self.start, self.stop, self.step, self.span = start, stop, step, span


class _ZipItem:
    __slots__ = ("items", "span")

    def __init__(self, items: list[ast.Expr], span: Span) -> None:
        self.items, self.span = items, span


class _Bound:
    __slots__ = ("value", "span")

    def __init__(self, value: ast.Expr, span: Span) -> None:
        self.value, self.span = value, span


class _Distinct:
    pass


class _RankCapture(str):
    pass


class _Clause:
    __slots__ = ("kind", "items", "span")

    def __init__(self, kind: str, items: Any, span: Span) -> None:
        self.kind, self.items, self.span = kind, items, span


def _nodes(children: list[Any]) -> list[Any]:
    """Children without punctuation tokens."""
    return [c for c in children if not isinstance(c, Token)]


class ToAst:
    """One instance per parsed file; collects diagnostics in `self.diagnostics`.

    Each grammar rule (or alias) has a method taking (meta, children) with the
    children already transformed.
    """

    def __init__(self, path: str, text: str, parse_field: Callable[[str, int, int], ast.Expr | None]) -> None:
        self.path = path
        self.text = text
        self.lines = text.split("\n")
        self.parse_field = parse_field
        self.diagnostics: list[Diagnostic] = []

    # ------------------------------------------------------------ helpers

    def span(self, meta: Any) -> Span:
        if getattr(meta, "empty", True):
            return NO_SPAN
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def tspan(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def error(self, message: str, span: Span, code: str = "E0109", hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code=code, message=message, span=span, hint=hint))

    def _char_before(self, span: Span) -> str:
        """The last character of the source text covered by span."""
        line = self.lines[span.end_line - 1] if 0 < span.end_line <= len(self.lines) else ""
        return line[span.end_col - 2] if span.end_col >= 2 and span.end_col - 2 < len(line) else ""

    # ------------------------------------------------------------ documents

    def module(self, meta: Any, children: list[Any]) -> ast.Module:
        version = None
        extensions: list[str] = []
        imports: list[ast.Import] = []
        defs: list[ast.Definition] = []
        for c in children:
            if isinstance(c, tuple) and len(c) == 2 and all(isinstance(x, int) for x in c):
                version = c
            elif isinstance(c, _Clause) and c.kind == "extension":
                extensions.extend(c.items)
            elif isinstance(c, _Clause) and c.kind == "import":
                imports.extend(c.items)
            elif isinstance(c, ast.Definition):
                defs.append(c)
        return ast.Module(definitions=tuple(defs), imports=tuple(imports), version=version,
                          extensions=tuple(extensions), path=self.path, span=self.span(meta))

    def version(self, meta: Any, children: list[Any]) -> tuple[int, int]:
        return children[0]

    def version_real(self, meta: Any, children: list[Any]) -> tuple[int, int]:
        tok = children[0]
        if "e" in tok.lower():
            self.error(f"invalid version number '{tok}'; write it as MAJOR.MINOR, e.g. 'version 2.0;'",
                       self.tspan(tok), code="E0106")
            return (0, 0)
        major, minor = tok.split(".")
        if max(len(major), len(minor)) > MAX_INT_DIGITS:
            self.error(f"version number too long: '{tok[:20]}...'", self.tspan(tok), code="E0106")
            return (0, 0)
        return (int(major), int(minor))

    def version_pair(self, meta: Any, children: list[Any]) -> tuple[int, int]:
        if max(len(children[0]), len(children[1])) > MAX_INT_DIGITS:
            self.error("version number too long", self.span(meta), code="E0106")
            return (0, 0)
        return (int(children[0]), int(children[1]))

    def extension(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("extension", [c[0] for c in _nodes(children)], self.span(meta))

    def import_stmt(self, meta: Any, children: list[Any]) -> _Clause:
        items = [ast.Import(module=name, span=span) for name, span in _nodes(children)]
        return _Clause("import", items, self.span(meta))

    def qualname(self, meta: Any, children: list[Any]) -> tuple[str, Span]:
        return ".".join(str(t) for t in children), self.span(meta)

    def _definition(self, meta: Any, kind: str, public: bool, name: Token, blocks: list[Any]) -> ast.Definition:
        return ast.Definition(kind=kind, name=str(name), public=public,
                              blocks=tuple(b for b in blocks if isinstance(b, ast.Block)),
                              span=self.span(meta), name_span=self.tspan(name))

    def operator_def(self, meta: Any, children: list[Any]) -> ast.Definition:
        public = isinstance(children[0], Token) and children[0].type == "PUBLIC"
        rest = children[1:] if public else children
        return self._definition(meta, "operator", public, rest[1], rest[2:])

    def graph_def(self, meta: Any, children: list[Any]) -> ast.Definition:
        return self._definition(meta, "graph", False, children[1], children[2:])

    def blocks(self, meta: Any, children: list[Any]) -> tuple[ast.Block, ...]:
        return tuple(children)

    # ------------------------------------------------------------ blocks

    def dtype_block(self, meta: Any, children: list[Any]) -> ast.DtypeBlock:
        return ast.DtypeBlock(items=tuple(_nodes(children[1:])), span=self.span(meta))

    def param_block(self, meta: Any, children: list[Any]) -> ast.ParamBlock:
        kind = str(children[0])[1:]
        return ast.ParamBlock(kind=kind, items=tuple(_nodes(children[1:])), span=self.span(meta))

    def using_block(self, meta: Any, children: list[Any]) -> ast.UsingBlock:
        return ast.UsingBlock(items=tuple(_nodes(children[1:])), span=self.span(meta))

    def assert_block(self, meta: Any, children: list[Any]) -> ast.AssertBlock:
        return ast.AssertBlock(items=tuple(_nodes(children[1:])), span=self.span(meta))

    def lower_block(self, meta: Any, children: list[Any]) -> ast.LowerBlock:
        return ast.LowerBlock(items=tuple(_nodes(children[1:])), span=self.span(meta))

    def compose_block(self, meta: Any, children: list[Any]) -> ast.ComposeBlock:
        kind = str(children[0])[1:]
        return ast.ComposeBlock(kind=kind, items=self._stmts(_nodes(children[1:])), span=self.span(meta))

    def quantize_block(self, meta: Any, children: list[Any]) -> ast.QuantizeBlock:
        return ast.QuantizeBlock(items=tuple(_nodes(children[1:])), span=self.span(meta))

    # ------------------------------------------------------------ types

    def dtype_decl(self, meta: Any, children: list[Any]) -> ast.DtypeDecl:
        name, base, *default = [c for c in children if isinstance(c, Token) and c.type != "EQ"]
        base_name = str(base)
        if base_name not in ABSTRACT_TYPES:
            self.error(f"generic type '{name}' must be restricted to 'type', 'arith' or 'num', not '{base_name}'",
                       self.tspan(base))
        return ast.DtypeDecl(name=str(name), base=base_name,
                             default=str(default[0]) if default and default[0] is not None else None,
                             span=self.span(meta))

    def type_name(self, meta: Any, children: list[Any]) -> Token:
        return children[0]

    def type_ref(self, meta: Any, children: list[Any]) -> Token:
        return children[0]

    def rank_capture(self, meta: Any, children: list[Any]) -> _RankCapture:
        return _RankCapture(str(children[0]))

    def type_spec(self, meta: Any, children: list[Any]) -> ast.TypeSpec:
        optional = False
        name = ""
        rank = None
        shape = None
        pack = None
        for c in children:
            if isinstance(c, _RankCapture):
                rank = str(c)
            elif isinstance(c, Token) and c.type == "OPTIONAL":
                optional = True
            elif isinstance(c, Token):
                name = str(c)
            elif isinstance(c, ast.PackSpec):
                pack = c
            elif isinstance(c, tuple):
                shape = c
        return ast.TypeSpec(name=name, optional=optional, rank=rank, shape=shape, pack=pack, span=self.span(meta))

    def shape_spec(self, meta: Any, children: list[Any]) -> tuple[ast.ShapeItem, ...]:
        return tuple(c for c in children if c is not None)

    def distinct(self, meta: Any, children: list[Any]) -> _Distinct:
        return _Distinct()

    def shape_item(self, meta: Any, children: list[Any]) -> ast.ShapeItem:
        distinct = any(isinstance(c, _Distinct) for c in children)
        value: ast.Expr | None = None
        bound = None
        pack = None
        for c in children:
            if isinstance(c, _Bound):
                bound = c.value
            elif isinstance(c, ast.PackSpec):
                pack = c
            elif isinstance(c, ast.Expr):
                value = c
        return ast.ShapeItem(value=value, distinct=distinct, bound=bound, pack=pack, span=self.span(meta))

    def extent(self, meta: Any, children: list[Any]) -> ast.Expr | None:
        c = children[0]
        return None if isinstance(c, Token) else c

    def bound(self, meta: Any, children: list[Any]) -> _Bound:
        return _Bound(children[1], self.span(meta))

    def pack_spec(self, meta: Any, children: list[Any]) -> ast.PackSpec:
        nodes = _nodes(children)
        bound = next((c.value for c in children if isinstance(c, _Bound)), None)
        return ast.PackSpec(length=nodes[0] if nodes else None, bound=bound, span=self.span(meta))

    # ------------------------------------------------------------ declarations

    def param_decl(self, meta: Any, children: list[Any]) -> ast.ParamDecl:
        name = children[0]
        nodes = _nodes(children[1:])
        type_spec = nodes[0]
        default = nodes[1] if len(nodes) > 1 and isinstance(nodes[1], ast.Expr) else None
        bounds = tuple(n for n in nodes if isinstance(n, ast.LoopBound))
        return ast.ParamDecl(name=str(name), type=type_spec, default=default, bounds=bounds, span=self.span(meta))

    def loop_bound(self, meta: Any, children: list[Any]) -> ast.LoopBound:
        return ast.LoopBound(index=str(children[0]), bound=_nodes(children[1:])[0], span=self.span(meta))

    def using_decl(self, meta: Any, children: list[Any]) -> ast.UsingDecl:
        target, value = _nodes(children)
        if isinstance(target, ast.LName) and target.type is not None:
            self.error("a @using symbol cannot have a type annotation; its type is that of its value",
                       target.type.span)
        return ast.UsingDecl(target=target, value=value, span=self.span(meta))

    def assertion(self, meta: Any, children: list[Any]) -> ast.Assertion:
        nodes = _nodes(children)
        cond = nodes[0]
        message = nodes[1] if len(nodes) > 1 and isinstance(nodes[1], ast.StrLit) else None
        args = tuple(n for n in nodes[1:] if isinstance(n, ast.AssertArg))
        return ast.Assertion(condition=cond, message=message, args=args, span=self.span(meta))

    def assert_arg(self, meta: Any, children: list[Any]) -> ast.AssertArg:
        if len(children) == 2:
            label, value = children
            if isinstance(label, ast.StrLit):
                if not label.is_plain:
                    self.error("an assert label must be a plain string without format fields", label.span,
                               code="E0105")
                return ast.AssertArg(value=value, label=label.text, label_quoted=True, span=self.span(meta))
            return ast.AssertArg(value=value, label=str(label), span=self.span(meta))
        return ast.AssertArg(value=children[0], span=self.span(meta))

    def quantization(self, meta: Any, children: list[Any]) -> ast.Quantization:
        (tensor, _), (op, _), *rest = children
        type_args: tuple[str, ...] = ()
        attrs: tuple[ast.AttrAssign, ...] = ()
        for r in rest:
            if isinstance(r, _TypeArgs):
                type_args = tuple(r)
            elif isinstance(r, _Attrs):
                attrs = tuple(r)
        return ast.Quantization(tensor=tensor, op=op, type_args=type_args, attrs=attrs, span=self.span(meta))

    # ------------------------------------------------------------ @lower

    def lowering(self, meta: Any, children: list[Any]) -> ast.Lowering:
        unroll = None
        locals_: tuple[ast.LocalAssign, ...] = ()
        i = 0
        while isinstance(children[i], _Clause):
            if children[i].kind == "unroll":
                unroll = children[i].items
            else:
                locals_ = tuple(children[i].items)
            i += 1
        target = self._access_target(children[i])
        op = str(children[i + 1])
        value = children[i + 2]
        bounds = []
        condition = None
        rest = children[i + 3:]
        for j, c in enumerate(rest):
            if isinstance(c, ast.LoopBound):
                bounds.append(c)
            elif isinstance(c, Token) and c.type == "BAR":
                condition = rest[j + 1]
                break
        return ast.Lowering(target=target, op=op, value=value, bounds=tuple(bounds), condition=condition,
                            locals=locals_, unroll=unroll, span=self.span(meta))

    def _access_target(self, target: ast.Expr) -> ast.Expr:
        """The left-hand side of a formula is always a tensor access, so `y[i]` means `y[i,]`."""
        if isinstance(target, ast.Subscript):
            return ast.TensorAccess(tensor=target.value, indices=(target.index,), span=target.span)
        if not isinstance(target, ast.TensorAccess):
            self.error("the left-hand side of a @lower formula must be a tensor access such as 'y[i, j]'",
                       target.span)
        return target

    def unroll_prefix(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("unroll", children[1], self.span(meta))

    def local_prefix(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("with", _nodes(children), self.span(meta))

    def local_assign(self, meta: Any, children: list[Any]) -> ast.LocalAssign:
        return ast.LocalAssign(name=str(children[0]), value=_nodes(children[1:])[0], span=self.span(meta))

    def iter_count(self, meta: Any, children: list[Any]) -> ast.IterCount:
        index = None
        count = None
        toks = children[1:]
        if len(toks) >= 2 and isinstance(toks[0], Token) and isinstance(toks[1], Token) and toks[1].type == "ARROW":
            index = str(toks[0])
            toks = toks[2:]
        for c in toks:
            if isinstance(c, ast.Expr):
                count = c
        if index is None and count is None:
            self.error("an iteration count '..( )' needs a count or an index: '..(n)', '..(i -> n)' or '..(i ->)'",
                       self.span(meta))
        return ast.IterCount(index=index, count=count, span=self.span(meta))

    # ------------------------------------------------------------ @compose

    def _stmts(self, stmts: list[ast.Stmt]) -> tuple[ast.Stmt, ...]:
        return tuple(stmts)

    def assign_stmt(self, meta: Any, children: list[Any]) -> ast.Assign:
        targets, value = _nodes(children)
        has_semi = any(isinstance(c, Token) and c.type == "SEMI" for c in children)
        if not has_semi and self._char_before(value.span) != "}":
            end = value.span
            self.error("expected ';' after statement",
                       Span(self.path, end.end_line, end.end_col, end.end_line, end.end_col + 1),
                       code="E0102", hint="insert ';'")
        return ast.Assign(targets=tuple(targets), value=value, span=self.span(meta))

    def yield_stmt(self, meta: Any, children: list[Any]) -> ast.Yield:
        return ast.Yield(values=tuple(_nodes(children)), span=self.span(meta))

    def lvalue_list(self, meta: Any, children: list[Any]) -> list[ast.LValue]:
        return _nodes(children)

    def lv_name(self, meta: Any, children: list[Any]) -> ast.LName:
        nodes = _nodes(children[1:])
        return ast.LName(name=str(children[0]), type=nodes[0] if nodes else None, span=self.span(meta))

    def lv_packed(self, meta: Any, children: list[Any]) -> ast.LName:
        return ast.LName(name=str(children[0]), pack=children[1], span=self.span(meta))

    def lv_list(self, meta: Any, children: list[Any]) -> ast.LList:
        return ast.LList(items=tuple(_nodes(children)), span=self.span(meta))

    def lv_zip(self, meta: Any, children: list[Any]) -> ast.LZip:
        nodes = _nodes(children)
        return ast.LZip(items=tuple(nodes[:-1]), pack=nodes[-1], span=self.span(meta))

    def zip_name(self, meta: Any, children: list[Any]) -> ast.LName:
        nodes = _nodes(children[1:])
        return ast.LName(name=str(children[0]), type=nodes[0] if nodes else None, span=self.span(meta))

    def lv_skip(self, meta: Any, children: list[Any]) -> ast.LSkip:
        return ast.LSkip(span=self.span(meta))

    def labelled(self, meta: Any, children: list[Any]) -> ast.Expr:
        label = str(children[0])
        target = _nodes(children[1:])[0]
        if isinstance(target, ast.Call):
            return ast.Call(callee=target.callee, args=target.args, type_args=target.type_args,
                            attrs=target.attrs, label=label, span=self.span(meta))
        if isinstance(target, ast.BlockExpr):
            return ast.BlockExpr(stmts=target.stmts, label=label, span=self.span(meta))
        self.error(f"label '{label}:' must be followed by an operator invocation or a block", target.span)
        return target

    def block_stmt(self, meta: Any, children: list[Any]) -> ast.BlockExpr:
        stmts = _nodes(children)
        for s in stmts[:-1]:
            if isinstance(s, ast.Yield):
                self.error("'yield' must be the last statement of a block", s.span)
        if not stmts or not isinstance(stmts[-1], ast.Yield):
            self.error("a block must end with 'yield' naming its results, e.g. 'yield y;'", self.span(meta))
        return ast.BlockExpr(stmts=tuple(stmts), span=self.span(meta))

    def compose_body(self, meta: Any, children: list[Any]) -> tuple[ast.Stmt, ...]:
        return tuple(_nodes(children))

    def if_expr(self, meta: Any, children: list[Any]) -> ast.IfExpr:
        nodes = _nodes(children)
        branches = [(nodes[0], nodes[1])]
        for c in nodes[2:-1]:
            branches.append(c)
        return ast.IfExpr(branches=tuple(branches), orelse=nodes[-1], span=self.span(meta))

    def elif_clause(self, meta: Any, children: list[Any]) -> tuple[ast.Expr, ast.Expr]:
        cond, then = _nodes(children)
        return (cond, then)

    def loop_expr(self, meta: Any, children: list[Any]) -> ast.LoopExpr:
        carried: tuple[ast.Carried, ...] = ()
        scans: tuple[ast.Scan, ...] = ()
        pre = post = None
        count = None
        unroll = False
        body = None
        seen_kw = False
        for c in children:
            if isinstance(c, Token):
                seen_kw = True
                unroll = c.type == "UNROLL"
            elif isinstance(c, _Clause):
                if c.kind == "with":
                    carried = tuple(c.items)
                elif c.kind == "for":
                    scans = tuple(c.items)
                elif c.kind == "while":
                    if seen_kw:
                        post = c.items
                    else:
                        pre = c.items
            elif isinstance(c, ast.IterCount):
                count = c
            elif seen_kw and body is None:
                body = c
        span = self.span(meta)
        if pre is not None and post is not None:
            self.error("a loop can have a 'while' condition before or after its body, not both", span)
        if unroll and (pre is not None or post is not None):
            self.error("'unroll' needs a compile-time iteration count; it cannot be used with a 'while' condition",
                       span, hint="use 'do' for a condition-based loop")
        if not scans and pre is None and post is None and (count is None or count.count is None):
            self.error("a loop needs a 'for' clause, a 'while' condition or an iteration count '..(n)'", span)
        return ast.LoopExpr(body=body, carried=carried, scans=scans, pre_cond=pre, post_cond=post, count=count,
                            unroll=unroll, span=span)

    def with_clause(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("with", _nodes(children), self.span(meta))

    def carried(self, meta: Any, children: list[Any]) -> ast.Carried:
        nodes = _nodes(children[1:])
        type_spec = nodes[0] if len(nodes) == 2 else None
        return ast.Carried(name=str(children[0]), value=nodes[-1], type=type_spec, span=self.span(meta))

    def for_clause(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("for", _nodes(children), self.span(meta))

    def scan(self, meta: Any, children: list[Any]) -> ast.Scan:
        return ast.Scan(name=str(children[0]), pack=_nodes(children[1:])[0], span=self.span(meta))

    def while_clause(self, meta: Any, children: list[Any]) -> _Clause:
        return _Clause("while", children[0], self.span(meta))

    # ------------------------------------------------------------ expressions

    def substitute(self, meta: Any, children: list[Any]) -> ast.Expr:
        target, value = _nodes(children)
        if isinstance(target, ast.Subscript):
            return ast.Substitute(value=target.value, index=target.index, replacement=value, span=self.span(meta))
        self.error("the left side of '<-' must be a pack indexed at one position or range, as in 'a[i] <- b'",
                   target.span)
        return value

    def select(self, meta: Any, children: list[Any]) -> ast.Select:
        cond, then, orelse = _nodes(children)
        return ast.Select(cond=cond, then=then, orelse=orelse, span=self.span(meta))

    def select_opt(self, meta: Any, children: list[Any]) -> ast.Select:
        cond, then = _nodes(children)
        return ast.Select(cond=cond, then=then, orelse=None, span=self.span(meta))

    def binary(self, meta: Any, children: list[Any]) -> ast.Binary:
        left, op, right = children
        return ast.Binary(op=str(op), left=left, right=right, span=self.span(meta))

    def chain(self, meta: Any, children: list[Any]) -> ast.Expr:
        """Group a flat `a op b op .. op c` chain by precedence (shunting-yard)."""
        values: list[ast.Expr] = [children[0]]
        ops: list[Token] = []

        def reduce() -> None:
            op = ops.pop()
            right = values.pop()
            left = values.pop()
            values.append(ast.Binary(op=str(op), left=left, right=right, span=left.span.merge(right.span)))

        for i in range(1, len(children), 2):
            op, rhs = children[i], children[i + 1]
            level = PRECEDENCE[op.type]
            if isinstance(rhs, Token):  # a fold: a postfix operator at op's level
                while ops and PRECEDENCE[ops[-1].type] >= level:
                    reduce()
                values.append(self._fold(values.pop(), op, rhs))
                continue
            if op.type == "UNIFORM":
                self.error("':=' only folds a pack to its uniform value, as in 'x := ..'", self.tspan(op))
            right_assoc = op.type in RIGHT_ASSOC
            while ops and (PRECEDENCE[ops[-1].type] > level or (PRECEDENCE[ops[-1].type] == level and not right_assoc)):
                reduce()
            ops.append(op)
            values.append(rhs)
        while ops:
            reduce()
        return values[0]

    def _fold(self, operand: ast.Expr, op: Token, dots: Token) -> ast.Fold:
        cumulative = str(dots) == "..."
        span = operand.span.merge(self.tspan(dots))
        op_s = str(op)
        if op_s not in FOLDABLE:
            self.error(f"'{op_s}' cannot fold a pack; fold operators are + * && || < <= > >= == != <? >? :=",
                       self.tspan(op))
        elif cumulative and op_s not in CUMULATIVE:
            self.error(f"'{op_s} ...' is not a cumulative fold; cumulative folds are + * && || <? >?",
                       self.tspan(op))
        return ast.Fold(op=op_s, operand=operand, cumulative=cumulative, span=span)

    def unary(self, meta: Any, children: list[Any]) -> ast.Unary:
        op, operand = children
        return ast.Unary(op=str(op), operand=operand, span=self.span(meta))

    def subscript(self, meta: Any, children: list[Any]) -> ast.Expr:
        value, items = children[0], children[1]
        span = self.span(meta)
        if items is None:
            return ast.TensorAccess(tensor=value, indices=(), span=span)
        if len(items.items) == 1 and not items.trailing_comma:
            only = items.items[0]
            if isinstance(only, _Slice):
                return ast.Subscript(value=value, index=self._range(only, in_list=False), span=span)
            if isinstance(only, ast.Expr) and not isinstance(only, ast.Expand | ast.Bounded):
                return ast.Subscript(value=value, index=only, span=span)
        indices = []
        for item in items.items:
            if isinstance(item, _Slice):
                indices.append(self._range(item, in_list=False))
            elif isinstance(item, _ZipItem):
                self.error("a zip '(a, b)..' can only appear in a list", item.span)
            else:
                indices.append(item)
        return ast.TensorAccess(tensor=value, indices=tuple(indices), span=span)

    def member(self, meta: Any, children: list[Any]) -> ast.Expr:
        value, name = children
        span = self.span(meta)
        if str(name) in PROPERTIES:
            return ast.Property(value=value, name=str(name), span=span)
        if isinstance(value, ast.Name):
            return ast.Name(id=f"{value.id}.{name}", span=span)
        self.error(f"'.{name}' is not a property; a tensor has '.shape' and '.rank', a pack '.size'",
                   self.tspan(name))
        return value

    def call(self, meta: Any, children: list[Any]) -> ast.Expr:
        callee = children[0]
        type_args: tuple[str, ...] = ()
        attrs: tuple[ast.AttrAssign, ...] = ()
        args: tuple[ast.Expr, ...] = ()
        for c in children[1:]:
            if isinstance(c, _TypeArgs):
                type_args = tuple(c)
            elif isinstance(c, _Attrs):
                attrs = tuple(c)
            elif isinstance(c, tuple):
                args = c
        span = self.span(meta)
        if isinstance(callee, ast.Property) and isinstance(callee.value, ast.Name):
            # `layout.shape(x)`: a property cannot be called, so `module.shape` names the module's
            # operator (spec §4.1.2), whatever tensors are in scope
            callee = ast.Name(id=f"{callee.value.id}.{callee.name}", span=callee.span)
        if not isinstance(callee, ast.Name):
            self.error("only an operator, a built-in function or a type can be called", callee.span)
            return callee
        return ast.Call(callee=callee.id, args=args, type_args=type_args, attrs=attrs, span=span)

    def type_args(self, meta: Any, children: list[Any]) -> _TypeArgs:
        return _TypeArgs(str(c) for c in children if c.type not in ("LT_TARGS", "GT"))

    def attr_block(self, meta: Any, children: list[Any]) -> _Attrs:
        attrs = [a for a in _nodes(children) if a is not None]  # `op{}(x)`: no attribute given
        seen: set[str] = set()
        for a in attrs:
            if a.name in seen:
                self.error(f"attribute '{a.name}' is assigned twice", a.span)
            seen.add(a.name)
        return _Attrs(attrs)

    def attr_assign(self, meta: Any, children: list[Any]) -> ast.AttrAssign:
        return ast.AttrAssign(name=str(children[0]), value=_nodes(children[1:])[0], span=self.span(meta))

    def args(self, meta: Any, children: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(children)

    def skip_arg(self, meta: Any, children: list[Any]) -> ast.Skip:
        return ast.Skip(span=self.span(meta))

    def int_lit(self, meta: Any, children: list[Any]) -> ast.IntLit:
        digits = str(children[0])
        if len(digits) > MAX_INT_DIGITS:  # beyond Python's int-from-text limit; no model needs it
            self.error(f"integer literal too large ({len(digits)} digits; at most {MAX_INT_DIGITS})",
                       self.span(meta), code="E0106", hint="write a smaller number")
            return ast.IntLit(value=0, span=self.span(meta))
        return ast.IntLit(value=int(digits), span=self.span(meta))

    def real_lit(self, meta: Any, children: list[Any]) -> ast.RealLit:
        text = str(children[0])
        return ast.RealLit(value=float(text), text=text, span=self.span(meta))

    def true_lit(self, meta: Any, children: list[Any]) -> ast.BoolLit:
        return ast.BoolLit(value=True, span=self.span(meta))

    def false_lit(self, meta: Any, children: list[Any]) -> ast.BoolLit:
        return ast.BoolLit(value=False, span=self.span(meta))

    def inf_lit(self, meta: Any, children: list[Any]) -> ast.NamedConst:
        return ast.NamedConst(name="inf", span=self.span(meta))

    def pi_lit(self, meta: Any, children: list[Any]) -> ast.NamedConst:
        return ast.NamedConst(name="pi", span=self.span(meta))

    def name(self, meta: Any, children: list[Any]) -> ast.Name:
        ident = str(children[0])
        if ident in ("True", "False"):
            self.error(f"'{ident}' is not a boolean literal", self.span(meta), code="E0102",
                       hint=f"booleans are written '{ident.lower()}'")
        return ast.Name(id=ident, span=self.span(meta))

    def cast(self, meta: Any, children: list[Any]) -> ast.Cast:
        type_tok = children[0]
        arg = _nodes(children[1:])
        type_name = str(type_tok)
        if type_name in ABSTRACT_TYPES:
            self.error(f"cannot cast to the abstract type '{type_name}'; cast to int, real, bool or a generic type",
                       self.tspan(type_tok))
        elif type_name == "str" and arg and arg[0] is not None:
            self.error("values cannot be cast to 'str'; use string formatting, e.g. \"{x}\"", self.span(meta))
        return ast.Cast(type=type_name, arg=arg[0] if arg else None, span=self.span(meta))

    def paren(self, meta: Any, children: list[Any]) -> ast.Expr:
        return _nodes(children)[0]

    def list_expr(self, meta: Any, children: list[Any]) -> ast.ListExpr:
        items_node = children[0]
        items: list[ast.Expr] = []
        if items_node is not None:
            for item in items_node.items:
                if isinstance(item, _Slice):
                    items.append(self._range(item, in_list=True))
                elif isinstance(item, _ZipItem):
                    items.append(ast.Zip(items=tuple(item.items), span=item.span))
                else:
                    if isinstance(item, ast.Bounded):
                        self.error("a bounded index '|i|' can only be used to index a tensor in @lower", item.span)
                    items.append(item)
        return ast.ListExpr(items=tuple(items), span=self.span(meta))

    def _range(self, s: _Slice, in_list: bool) -> ast.Range:
        if in_list and (s.start is None or s.stop is None):
            self.error("a range in a list needs both a begin and an end, as in '[b:e]' or '[b:e:s]'", s.span)
        return ast.Range(start=s.start, stop=s.stop, step=s.step, span=s.span)

    def bounded(self, meta: Any, children: list[Any]) -> ast.Bounded:
        nodes = _nodes(children)
        low = high = None
        if len(nodes) == 3:
            low, high = nodes[1], nodes[2]
        return ast.Bounded(value=nodes[0], low=low, high=high, span=self.span(meta))

    def bracket_items(self, meta: Any, children: list[Any]) -> _Items:
        trailing = bool(children) and isinstance(children[-1], Token) and children[-1].type == "TRAILING_COMMA"
        return _Items(_nodes(children), trailing, self.span(meta))

    def item(self, meta: Any, children: list[Any]) -> ast.Expr:
        return children[0]

    def expand(self, meta: Any, children: list[Any]) -> ast.Expand:
        nodes = _nodes(children)
        return ast.Expand(value=nodes[0], count=nodes[1] if len(nodes) > 1 else None, span=self.span(meta))

    def slice(self, meta: Any, children: list[Any]) -> _Slice:
        start, stop, step = (list(children) + [None, None, None])[:3]
        return _Slice(start, stop, step, self.span(meta))

    def zip(self, meta: Any, children: list[Any]) -> _ZipItem:
        return _ZipItem(_nodes(children), self.span(meta))

    def string(self, meta: Any, children: list[Any]) -> ast.StrLit:
        parts: list[str | ast.FormatField] = []
        for tok in children:
            pieces, errors = split_literal(str(tok), tok.line, tok.column)
            for err in errors:
                self.error(err.message, Span(self.path, err.line, err.col, err.line, err.end_col), code="E0105")
            for piece in pieces:
                if isinstance(piece, FieldSource):
                    expr = self.parse_field(piece.text, piece.line, piece.col)
                    if expr is not None:
                        parts.append(ast.FormatField(value=expr, span=expr.span))
                elif parts and isinstance(parts[-1], str):
                    parts[-1] += piece
                else:
                    parts.append(piece)
        return ast.StrLit(parts=tuple(parts), span=self.span(meta))

    def transform(self, root: Tree) -> Any:
        """Bottom-up, with an explicit stack: deep expressions cannot exhaust Python's stack."""
        results: list[Any] = []
        todo: list[tuple[Any, bool]] = [(root, False)]
        while todo:
            node, expanded = todo.pop()
            if not isinstance(node, Tree):
                if type(node) is Token and node.type == "IDENT" and node.value in RESERVED:
                    self.error(f"'{node.value}' is a reserved word and cannot be used as a name",
                               self.tspan(node), code="E0102",
                               hint=f"booleans are written '{node.value.lower()}'" if node.value in ("True", "False")
                               else None)
                results.append(node)
            elif not expanded:
                todo.append((node, True))
                todo.extend((child, False) for child in reversed(node.children))
            else:
                count = len(node.children)
                args = results[len(results) - count:]
                del results[len(results) - count:]
                results.append(getattr(self, node.data)(node.meta, args))
        return results[0]
