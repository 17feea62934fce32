"""Lark parse tree → skriptnd.syntax.ast.

The grammar is deliberately permissive where one syntax serves several meanings (list
items, pack indices and tensor indices share `[...]`; callees are postfix expressions);
this transformer decides what was meant and reports misuses as located diagnostics, which
gives better messages than a grammar-level rejection would.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Tree
from lark.tree import Meta

from skriptnd.source import Span
from skriptnd.syntax import ast
from skriptnd.syntax.transform_base import (
    ABSTRACT_TYPES,
    MAX_INT_DIGITS,
    RESERVED,
    Attrs,
    Bound,
    Clause,
    Distinct,
    RankCapture,
    TypeArgs,
    without_tokens,
)
from skriptnd.syntax.transform_exprs import ExpressionRules


class ToAst(ExpressionRules):
    """One instance per parsed file; collects diagnostics in `self.diagnostics`.

    Each grammar rule (or alias) has a method taking (meta, children) with the children already
    transformed: the documents, declarations and statements here, the expressions in ExpressionRules
    (transform_exprs.py), the state and helpers in TransformBase (transform_base.py).
    """


    def module(self, meta: Meta, children: list[Any]) -> ast.Module:
        version = None
        extensions: list[str] = []
        imports: list[ast.Import] = []
        defs: list[ast.Definition] = []
        for c in children:
            if isinstance(c, tuple) and len(c) == 2 and all(isinstance(x, int) for x in c):
                version = c
            elif isinstance(c, Clause) and c.kind == "extension":
                extensions.extend(c.items)
            elif isinstance(c, Clause) and c.kind == "import":
                imports.extend(c.items)
            elif isinstance(c, ast.Definition):
                defs.append(c)
        return ast.Module(definitions=tuple(defs), imports=tuple(imports), version=version,
                          extensions=tuple(extensions), path=self.path, span=self.span(meta))

    def version(self, meta: Meta, children: list[Any]) -> tuple[int, int]:
        return children[0]

    def version_real(self, meta: Meta, children: list[Any]) -> tuple[int, int]:
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

    def version_pair(self, meta: Meta, children: list[Any]) -> tuple[int, int]:
        if max(len(children[0]), len(children[1])) > MAX_INT_DIGITS:
            self.error("version number too long", self.span(meta), code="E0106")
            return (0, 0)
        return (int(children[0]), int(children[1]))

    def extension(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("extension", [c[0] for c in without_tokens(children)], self.span(meta))

    def import_stmt(self, meta: Meta, children: list[Any]) -> Clause:
        items = [ast.Import(module=name, span=span) for name, span in without_tokens(children)]
        return Clause("import", items, self.span(meta))

    def qualname(self, meta: Meta, children: list[Any]) -> tuple[str, Span]:
        return ".".join(str(t) for t in children), self.span(meta)

    def _definition(self, meta: Meta, kind: str, public: bool, name: Token, blocks: list[Any]) -> ast.Definition:
        return ast.Definition(kind=kind, name=str(name), public=public,
                              blocks=tuple(b for b in blocks if isinstance(b, ast.Block)),
                              span=self.span(meta), name_span=self.tspan(name))

    def operator_def(self, meta: Meta, children: list[Any]) -> ast.Definition:
        public = isinstance(children[0], Token) and children[0].type == "PUBLIC"
        rest = children[1:] if public else children
        return self._definition(meta, "operator", public, rest[1], rest[2:])

    def graph_def(self, meta: Meta, children: list[Any]) -> ast.Definition:
        return self._definition(meta, "graph", False, children[1], children[2:])

    def blocks(self, meta: Meta, children: list[Any]) -> tuple[ast.Block, ...]:
        return tuple(children)

    # ------------------------------------------------------------ blocks

    def dtype_block(self, meta: Meta, children: list[Any]) -> ast.DtypeBlock:
        return ast.DtypeBlock(items=tuple(without_tokens(children[1:])), span=self.span(meta))

    def param_block(self, meta: Meta, children: list[Any]) -> ast.ParamBlock:
        kind = str(children[0])[1:]
        return ast.ParamBlock(kind=kind, items=tuple(without_tokens(children[1:])), span=self.span(meta))

    def using_block(self, meta: Meta, children: list[Any]) -> ast.UsingBlock:
        return ast.UsingBlock(items=tuple(without_tokens(children[1:])), span=self.span(meta))

    def assert_block(self, meta: Meta, children: list[Any]) -> ast.AssertBlock:
        return ast.AssertBlock(items=tuple(without_tokens(children[1:])), span=self.span(meta))

    def lower_block(self, meta: Meta, children: list[Any]) -> ast.LowerBlock:
        return ast.LowerBlock(items=tuple(without_tokens(children[1:])), span=self.span(meta))

    def compose_block(self, meta: Meta, children: list[Any]) -> ast.ComposeBlock:
        kind = str(children[0])[1:]
        return ast.ComposeBlock(kind=kind, items=self._stmts(without_tokens(children[1:])), span=self.span(meta))

    def quantize_block(self, meta: Meta, children: list[Any]) -> ast.QuantizeBlock:
        return ast.QuantizeBlock(items=tuple(without_tokens(children[1:])), span=self.span(meta))

    # ------------------------------------------------------------ types

    def dtype_decl(self, meta: Meta, children: list[Any]) -> ast.DtypeDecl:
        name, base, *default = [c for c in children if isinstance(c, Token) and c.type != "EQ"]
        base_name = str(base)
        if base_name not in ABSTRACT_TYPES:
            self.error(f"generic type '{name}' must be restricted to 'type', 'arith' or 'num', not '{base_name}'",
                       self.tspan(base))
        return ast.DtypeDecl(name=str(name), base=base_name,
                             default=str(default[0]) if default and default[0] is not None else None,
                             span=self.span(meta))

    def type_name(self, meta: Meta, children: list[Any]) -> Token:
        return children[0]

    def type_ref(self, meta: Meta, children: list[Any]) -> Token:
        return children[0]

    def rank_capture(self, meta: Meta, children: list[Any]) -> RankCapture:
        return RankCapture(str(children[0]))

    def type_spec(self, meta: Meta, children: list[Any]) -> ast.TypeSpec:
        optional = False
        name = ""
        rank = None
        shape = None
        pack = None
        for c in children:
            if isinstance(c, RankCapture):
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

    def shape_spec(self, meta: Meta, children: list[Any]) -> tuple[ast.ShapeItem, ...]:
        return tuple(c for c in children if c is not None)

    def distinct(self, meta: Meta, children: list[Any]) -> Distinct:
        return Distinct()

    def shape_item(self, meta: Meta, children: list[Any]) -> ast.ShapeItem:
        distinct = any(isinstance(c, Distinct) for c in children)
        value: ast.Expr | None = None
        bound = None
        pack = None
        for c in children:
            if isinstance(c, Bound):
                bound = c.value
            elif isinstance(c, ast.PackSpec):
                pack = c
            elif isinstance(c, ast.Expr):
                value = c
        return ast.ShapeItem(value=value, distinct=distinct, bound=bound, pack=pack, span=self.span(meta))

    def extent(self, meta: Meta, children: list[Any]) -> ast.Expr | None:
        c = children[0]
        return None if isinstance(c, Token) else c

    def bound(self, meta: Meta, children: list[Any]) -> Bound:
        return Bound(children[1], self.span(meta))

    def pack_spec(self, meta: Meta, children: list[Any]) -> ast.PackSpec:
        nodes = without_tokens(children)
        bound = next((c.value for c in children if isinstance(c, Bound)), None)
        return ast.PackSpec(length=nodes[0] if nodes else None, bound=bound, span=self.span(meta))

    # ------------------------------------------------------------ declarations

    def param_decl(self, meta: Meta, children: list[Any]) -> ast.ParamDecl:
        name = children[0]
        nodes = without_tokens(children[1:])
        type_spec = nodes[0]
        default = nodes[1] if len(nodes) > 1 and isinstance(nodes[1], ast.Expr) else None
        bounds = tuple(n for n in nodes if isinstance(n, ast.LoopBound))
        return ast.ParamDecl(name=str(name), type=type_spec, default=default, bounds=bounds, span=self.span(meta))

    def loop_bound(self, meta: Meta, children: list[Any]) -> ast.LoopBound:
        return ast.LoopBound(index=str(children[0]), bound=without_tokens(children[1:])[0], span=self.span(meta))

    def using_decl(self, meta: Meta, children: list[Any]) -> ast.UsingDecl:
        target, value = without_tokens(children)
        if isinstance(target, ast.LName) and target.type is not None:
            self.error("a @using symbol cannot have a type annotation; its type is that of its value",
                       target.type.span)
        return ast.UsingDecl(target=target, value=value, span=self.span(meta))

    def assertion(self, meta: Meta, children: list[Any]) -> ast.Assertion:
        nodes = without_tokens(children)
        cond = nodes[0]
        message = nodes[1] if len(nodes) > 1 and isinstance(nodes[1], ast.StrLit) else None
        args = tuple(n for n in nodes[1:] if isinstance(n, ast.AssertArg))
        return ast.Assertion(condition=cond, message=message, args=args, span=self.span(meta))

    def assert_arg(self, meta: Meta, children: list[Any]) -> ast.AssertArg:
        if len(children) == 2:
            label, value = children
            if isinstance(label, ast.StrLit):
                if not label.is_plain:
                    self.error("an assert label must be a plain string without format fields", label.span,
                               code="E0105")
                return ast.AssertArg(value=value, label=label.text, label_quoted=True, span=self.span(meta))
            return ast.AssertArg(value=value, label=str(label), span=self.span(meta))
        return ast.AssertArg(value=children[0], span=self.span(meta))

    def quantization(self, meta: Meta, children: list[Any]) -> ast.Quantization:
        (tensor, _), (op, _), *rest = children
        type_args: tuple[str, ...] = ()
        attrs: tuple[ast.AttrAssign, ...] = ()
        for r in rest:
            if isinstance(r, TypeArgs):
                type_args = tuple(r)
            elif isinstance(r, Attrs):
                attrs = tuple(r)
        return ast.Quantization(tensor=tensor, op=op, type_args=type_args, attrs=attrs, span=self.span(meta))

    # ------------------------------------------------------------ @lower

    def lowering(self, meta: Meta, children: list[Any]) -> ast.Lowering:
        unroll = None
        locals_: tuple[ast.LocalAssign, ...] = ()
        i = 0
        while isinstance(children[i], Clause):
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

    def unroll_prefix(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("unroll", children[1], self.span(meta))

    def local_prefix(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("with", without_tokens(children), self.span(meta))

    def local_assign(self, meta: Meta, children: list[Any]) -> ast.LocalAssign:
        return ast.LocalAssign(name=str(children[0]), value=without_tokens(children[1:])[0], span=self.span(meta))

    def iter_count(self, meta: Meta, children: list[Any]) -> ast.IterCount:
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

    def assign_stmt(self, meta: Meta, children: list[Any]) -> ast.Assign:
        targets, value = without_tokens(children)
        has_semi = any(isinstance(c, Token) and c.type == "SEMI" for c in children)
        if not has_semi and self._char_before(value.span) != "}":
            end = value.span
            self.error("expected ';' after statement",
                       Span(self.path, end.end_line, end.end_col, end.end_line, end.end_col + 1),
                       code="E0102", hint="insert ';'")
        return ast.Assign(targets=tuple(targets), value=value, span=self.span(meta))

    def yield_stmt(self, meta: Meta, children: list[Any]) -> ast.Yield:
        return ast.Yield(values=tuple(without_tokens(children)), span=self.span(meta))

    def lvalue_list(self, meta: Meta, children: list[Any]) -> list[ast.LValue]:
        return without_tokens(children)

    def lv_name(self, meta: Meta, children: list[Any]) -> ast.LName:
        nodes = without_tokens(children[1:])
        return ast.LName(name=str(children[0]), type=nodes[0] if nodes else None, span=self.span(meta))

    def lv_packed(self, meta: Meta, children: list[Any]) -> ast.LName:
        return ast.LName(name=str(children[0]), pack=children[1], span=self.span(meta))

    def lv_list(self, meta: Meta, children: list[Any]) -> ast.LList:
        return ast.LList(items=tuple(without_tokens(children)), span=self.span(meta))

    def lv_zip(self, meta: Meta, children: list[Any]) -> ast.LZip:
        nodes = without_tokens(children)
        return ast.LZip(items=tuple(nodes[:-1]), pack=nodes[-1], span=self.span(meta))

    def zip_name(self, meta: Meta, children: list[Any]) -> ast.LName:
        nodes = without_tokens(children[1:])
        return ast.LName(name=str(children[0]), type=nodes[0] if nodes else None, span=self.span(meta))

    def lv_skip(self, meta: Meta, children: list[Any]) -> ast.LSkip:
        return ast.LSkip(span=self.span(meta))

    def labelled(self, meta: Meta, children: list[Any]) -> ast.Expr:
        label = str(children[0])
        target = without_tokens(children[1:])[0]
        if isinstance(target, ast.Call):
            return ast.Call(callee=target.callee, args=target.args, type_args=target.type_args,
                            attrs=target.attrs, label=label, span=self.span(meta))
        if isinstance(target, ast.BlockExpr):
            return ast.BlockExpr(stmts=target.stmts, label=label, span=self.span(meta))
        self.error(f"label '{label}:' must be followed by an operator invocation or a block", target.span)
        return target

    def block_stmt(self, meta: Meta, children: list[Any]) -> ast.BlockExpr:
        stmts = without_tokens(children)
        for s in stmts[:-1]:
            if isinstance(s, ast.Yield):
                self.error("'yield' must be the last statement of a block", s.span)
        if not stmts or not isinstance(stmts[-1], ast.Yield):
            self.error("a block must end with 'yield' naming its results, e.g. 'yield y;'", self.span(meta))
        return ast.BlockExpr(stmts=tuple(stmts), span=self.span(meta))

    def compose_body(self, meta: Meta, children: list[Any]) -> tuple[ast.Stmt, ...]:
        return tuple(without_tokens(children))

    def if_expr(self, meta: Meta, children: list[Any]) -> ast.IfExpr:
        nodes = without_tokens(children)
        branches = [(nodes[0], nodes[1])]
        for c in nodes[2:-1]:
            branches.append(c)
        return ast.IfExpr(branches=tuple(branches), orelse=nodes[-1], span=self.span(meta))

    def elif_clause(self, meta: Meta, children: list[Any]) -> tuple[ast.Expr, ast.Expr]:
        cond, then = without_tokens(children)
        return (cond, then)

    def loop_expr(self, meta: Meta, children: list[Any]) -> ast.LoopExpr:
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
            elif isinstance(c, Clause):
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

    def with_clause(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("with", without_tokens(children), self.span(meta))

    def carried(self, meta: Meta, children: list[Any]) -> ast.Carried:
        nodes = without_tokens(children[1:])
        type_spec = nodes[0] if len(nodes) == 2 else None
        return ast.Carried(name=str(children[0]), value=nodes[-1], type=type_spec, span=self.span(meta))

    def for_clause(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("for", without_tokens(children), self.span(meta))

    def scan(self, meta: Meta, children: list[Any]) -> ast.Scan:
        return ast.Scan(name=str(children[0]), pack=without_tokens(children[1:])[0], span=self.span(meta))

    def while_clause(self, meta: Meta, children: list[Any]) -> Clause:
        return Clause("while", children[0], self.span(meta))

    # ------------------------------------------------------------ expressions

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
