"""The expression rules of the parse-tree transform: operators, calls, subscripts, literals, strings.

`[...]` serves lists, pack indices and tensor indices, and callees are postfix expressions: these rules
decide what was meant and report misuses as located diagnostics.
"""

from __future__ import annotations

from typing import Any

from lark import Token
from lark.tree import Meta

from skriptnd.source import Span
from skriptnd.syntax import ast
from skriptnd.syntax.strings import FieldSource, split_literal
from skriptnd.syntax.transform_base import (
    ABSTRACT_TYPES,
    CUMULATIVE,
    FOLDABLE,
    MAX_INT_DIGITS,
    PRECEDENCE,
    PROPERTIES,
    RIGHT_ASSOC,
    Attrs,
    Items,
    Slice,
    TransformBase,
    TypeArgs,
    ZipItem,
    without_tokens,
)


class ExpressionRules(TransformBase):
    """One method per expression rule of the grammar, taking (meta, children) with the children transformed."""


    def substitute(self, meta: Meta, children: list[Any]) -> ast.Expr:
        target, value = without_tokens(children)
        if isinstance(target, ast.Subscript):
            return ast.Substitute(value=target.value, index=target.index, replacement=value, span=self.span(meta))
        self.error("the left side of '<-' must be a pack indexed at one position or range, as in 'a[i] <- b'",
                   target.span)
        return value

    def select(self, meta: Meta, children: list[Any]) -> ast.Select:
        cond, then, orelse = without_tokens(children)
        return ast.Select(cond=cond, then=then, orelse=orelse, span=self.span(meta))

    def select_opt(self, meta: Meta, children: list[Any]) -> ast.Select:
        cond, then = without_tokens(children)
        return ast.Select(cond=cond, then=then, orelse=None, span=self.span(meta))

    def binary(self, meta: Meta, children: list[Any]) -> ast.Binary:
        left, op, right = children
        return ast.Binary(op=str(op), left=left, right=right, span=self.span(meta))

    def chain(self, meta: Meta, children: list[Any]) -> ast.Expr:
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

    def unary(self, meta: Meta, children: list[Any]) -> ast.Unary:
        op, operand = children
        return ast.Unary(op=str(op), operand=operand, span=self.span(meta))

    def subscript(self, meta: Meta, children: list[Any]) -> ast.Expr:
        value, items = children[0], children[1]
        span = self.span(meta)
        if items is None:
            return ast.TensorAccess(tensor=value, indices=(), span=span)
        if len(items.items) == 1 and not items.trailing_comma:
            only = items.items[0]
            if isinstance(only, Slice):
                return ast.Subscript(value=value, index=self._range(only, in_list=False), span=span)
            if isinstance(only, ast.Expr) and not isinstance(only, ast.Expand | ast.Bounded):
                return ast.Subscript(value=value, index=only, span=span)
        indices = []
        for item in items.items:
            if isinstance(item, Slice):
                indices.append(self._range(item, in_list=False))
            elif isinstance(item, ZipItem):
                self.error("a zip '(a, b)..' can only appear in a list", item.span)
            else:
                indices.append(item)
        return ast.TensorAccess(tensor=value, indices=tuple(indices), span=span)

    def member(self, meta: Meta, children: list[Any]) -> ast.Expr:
        value, name = children
        span = self.span(meta)
        if str(name) in PROPERTIES:
            return ast.Property(value=value, name=str(name), span=span)
        if isinstance(value, ast.Name):
            return ast.Name(id=f"{value.id}.{name}", span=span)
        self.error(f"'.{name}' is not a property; a tensor has '.shape' and '.rank', a pack '.size'",
                   self.tspan(name))
        return value

    def call(self, meta: Meta, children: list[Any]) -> ast.Expr:
        callee = children[0]
        type_args: tuple[str, ...] = ()
        attrs: tuple[ast.AttrAssign, ...] = ()
        args: tuple[ast.Expr, ...] = ()
        for c in children[1:]:
            if isinstance(c, TypeArgs):
                type_args = tuple(c)
            elif isinstance(c, Attrs):
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

    def type_args(self, meta: Meta, children: list[Any]) -> TypeArgs:
        return TypeArgs(str(c) for c in children if c.type not in ("LT_TARGS", "GT"))

    def attr_block(self, meta: Meta, children: list[Any]) -> Attrs:
        attrs = [a for a in without_tokens(children) if a is not None]  # `op{}(x)`: no attribute given
        seen: set[str] = set()
        for a in attrs:
            if a.name in seen:
                self.error(f"attribute '{a.name}' is assigned twice", a.span)
            seen.add(a.name)
        return Attrs(attrs)

    def attr_assign(self, meta: Meta, children: list[Any]) -> ast.AttrAssign:
        return ast.AttrAssign(name=str(children[0]), value=without_tokens(children[1:])[0], span=self.span(meta))

    def args(self, meta: Meta, children: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(children)

    def skip_arg(self, meta: Meta, children: list[Any]) -> ast.Skip:
        return ast.Skip(span=self.span(meta))

    def int_lit(self, meta: Meta, children: list[Any]) -> ast.IntLit:
        digits = str(children[0])
        if len(digits) > MAX_INT_DIGITS:  # beyond Python's int-from-text limit; no model needs it
            self.error(f"integer literal too large ({len(digits)} digits; at most {MAX_INT_DIGITS})",
                       self.span(meta), code="E0106", hint="write a smaller number")
            return ast.IntLit(value=0, span=self.span(meta))
        return ast.IntLit(value=int(digits), span=self.span(meta))

    def real_lit(self, meta: Meta, children: list[Any]) -> ast.RealLit:
        text = str(children[0])
        return ast.RealLit(value=float(text), text=text, span=self.span(meta))

    def true_lit(self, meta: Meta, children: list[Any]) -> ast.BoolLit:
        return ast.BoolLit(value=True, span=self.span(meta))

    def false_lit(self, meta: Meta, children: list[Any]) -> ast.BoolLit:
        return ast.BoolLit(value=False, span=self.span(meta))

    def inf_lit(self, meta: Meta, children: list[Any]) -> ast.NamedConst:
        return ast.NamedConst(name="inf", span=self.span(meta))

    def pi_lit(self, meta: Meta, children: list[Any]) -> ast.NamedConst:
        return ast.NamedConst(name="pi", span=self.span(meta))

    def name(self, meta: Meta, children: list[Any]) -> ast.Name:
        ident = str(children[0])
        if ident in ("True", "False"):
            self.error(f"'{ident}' is not a boolean literal", self.span(meta), code="E0102",
                       hint=f"booleans are written '{ident.lower()}'")
        return ast.Name(id=ident, span=self.span(meta))

    def cast(self, meta: Meta, children: list[Any]) -> ast.Cast:
        type_tok = children[0]
        arg = without_tokens(children[1:])
        type_name = str(type_tok)
        if type_name in ABSTRACT_TYPES:
            self.error(f"cannot cast to the abstract type '{type_name}'; cast to int, real, bool or a generic type",
                       self.tspan(type_tok))
        elif type_name == "str" and arg and arg[0] is not None:
            self.error("values cannot be cast to 'str'; use string formatting, e.g. \"{x}\"", self.span(meta))
        return ast.Cast(type=type_name, arg=arg[0] if arg else None, span=self.span(meta))

    def paren(self, meta: Meta, children: list[Any]) -> ast.Expr:
        return without_tokens(children)[0]

    def list_expr(self, meta: Meta, children: list[Any]) -> ast.ListExpr:
        items_node = children[0]
        items: list[ast.Expr] = []
        if items_node is not None:
            for item in items_node.items:
                if isinstance(item, Slice):
                    items.append(self._range(item, in_list=True))
                elif isinstance(item, ZipItem):
                    items.append(ast.Zip(items=tuple(item.items), span=item.span))
                else:
                    if isinstance(item, ast.Bounded):
                        self.error("a bounded index '|i|' can only be used to index a tensor in @lower", item.span)
                    items.append(item)
        return ast.ListExpr(items=tuple(items), span=self.span(meta))

    def _range(self, s: Slice, in_list: bool) -> ast.Range:
        if in_list and (s.start is None or s.stop is None):
            self.error("a range in a list needs both a begin and an end, as in '[b:e]' or '[b:e:s]'", s.span)
        return ast.Range(start=s.start, stop=s.stop, step=s.step, span=s.span)

    def bounded(self, meta: Meta, children: list[Any]) -> ast.Bounded:
        nodes = without_tokens(children)
        low = high = None
        if len(nodes) == 3:
            low, high = nodes[1], nodes[2]
        return ast.Bounded(value=nodes[0], low=low, high=high, span=self.span(meta))

    def bracket_items(self, meta: Meta, children: list[Any]) -> Items:
        trailing = bool(children) and isinstance(children[-1], Token) and children[-1].type == "TRAILING_COMMA"
        return Items(without_tokens(children), trailing, self.span(meta))

    def item(self, meta: Meta, children: list[Any]) -> ast.Expr:
        return children[0]

    def expand(self, meta: Meta, children: list[Any]) -> ast.Expand:
        nodes = without_tokens(children)
        return ast.Expand(value=nodes[0], count=nodes[1] if len(nodes) > 1 else None, span=self.span(meta))

    def slice(self, meta: Meta, children: list[Any]) -> Slice:
        start, stop, step = (list(children) + [None, None, None])[:3]
        return Slice(start, stop, step, self.span(meta))

    def zip(self, meta: Meta, children: list[Any]) -> ZipItem:
        return ZipItem(without_tokens(children), self.span(meta))

    def string(self, meta: Meta, children: list[Any]) -> ast.StrLit:
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
