"""Static checking of one operator or graph definition (spec §2.2-§2.14).

`check_definition` gives every expression a `Type` by the rules of §2.4 (the same rules a
concrete evaluator applies) and checks names, blocks and the rules of @lower, @compose and
@update. It never raises on bad input: problems are located `Diagnostic`s.

Rules in brief (spec sections in brackets):

- arithmetic `+ - * ** <? >?` on int or real, both sides of the same type; `/` and `\\` on
  int or real, `%` on int; comparisons on any type (same on both sides); `&& || ^ =>` on
  bool; `??` needs an optional left side and a non-optional right side and is never null;
  `?x` is a bool [2.4];
- packs combine element-wise, with broadcasting of single values; lists need items of the
  same type, with packs expanded by `..` [2.4];
- an optional operand makes the result optional (null propagation), except for `??` and
  `?x` [2.4.1]; `?x` in a condition promotes x to non-optional in the branch it guards;
- tensor values are allowed only where the spec allows them: tensor accesses in @lower,
  tensors as invocation arguments, results and compile-time branches in @compose/@update,
  and `.shape`/`.rank`/`.size` anywhere [2.4, 2.10, 2.12].

An expression whose type cannot be known (because of an earlier error, or because it
depends on an operator that lookup does not find) has the unknown type `?`, which is
compatible with everything: one mistake is reported once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .. import ast
from ..diagnostics import Diagnostic, Note, register_codes
from ..source import Span
from .builtins import BUILTIN_FUNCTIONS, NUM_FUNCTIONS, REAL_FUNCTIONS
from .scope import (
    STAGE,
    Ctx,
    Kind,
    Lin,
    Scope,
    ScopeBuilder,
    Symbol,
    blocks_of,
    describe,
    did_you_mean,
    lin_value,
    show,
)
from .types import (
    BOOL,
    CONCRETE,
    INT,
    INTS,
    REAL,
    STR,
    UNKNOWN,
    Type,
    is_arith,
    is_numeric,
    same_name,
)

register_codes({
    "E0606": "conflicting @lower formulas for one output",
    "E0607": "update formula without initialization",
})

Lookup = Callable[[str], "ast.Definition | None"]

BUILTINS = BUILTIN_FUNCTIONS

ARITHMETIC = frozenset({"+", "-", "*", "**", "<?", ">?", "/", "\\"})
LOGICAL = frozenset({"&&", "||", "^", "=>"})
COMPARISON = frozenset({"<", "<=", ">", ">=", "==", "!="})
ACCUMULATE = {"+=": "numeric", "*=": "numeric", "<?=": "numeric", ">?=": "numeric", "&=": "bool", "|=": "bool"}
TENSOR_KINDS = frozenset({Kind.INPUT, Kind.OUTPUT, Kind.CONSTANT, Kind.VARIABLE, Kind.TENSOR, Kind.CARRIED,
                          Kind.SCAN, Kind.LOOP_INDEX})


def check_definition(defn: ast.Definition, lookup: Lookup, module_name: str) -> list[Diagnostic]:
    """All diagnostics of one definition, in source order. `lookup` resolves an invoked operator
    name as written (`nn.conv`, `add`) to its definition, or None when unknown (unknown
    operators are reported elsewhere; their results just have unknown types here)."""
    checker = Checker(defn, lookup, module_name)
    checker.run()
    return checker.diagnostics()


def _null_tests(cond: ast.Expr) -> frozenset[str]:
    """Names x tested by `?x` in a condition or in a conjunction of conditions (§2.4, §2.10.1)."""
    if isinstance(cond, ast.Unary) and cond.op == "?" and isinstance(cond.operand, ast.Name):
        return frozenset({cond.operand.id})
    if isinstance(cond, ast.Binary) and cond.op == "&&":
        return _null_tests(cond.left) | _null_tests(cond.right)
    return frozenset()


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _what(expr: ast.Expr) -> str:
    text = show(expr)
    return f"'{text}'" if len(text) <= 40 else "the expression"


@dataclass
class _Results:
    """What the right-hand side of a @compose statement produces."""

    count: int | None  # None: unknown
    types: list[Type] = field(default_factory=list)
    source: str = "the right-hand side"  # e.g. "'nn.conv'", "the block"
    noun: str = "result"  # what the source produces: 'output', 'value', 'result'

    def describe(self) -> str:
        assert self.count is not None
        verb = {"output": "has", "value": "yields"}.get(self.noun, "produces")
        if self.noun == "result" and self.count == 1:
            verb = "produces"
        return f"{self.source} {verb} {_plural(self.count, self.noun)}"


class Checker:
    """Checks one definition. `run()` builds the declaration table (see scope.ScopeBuilder) and
    then checks @assert, @lower, @compose, @update and @quantize."""

    def __init__(self, defn: ast.Definition, lookup: Lookup, module_name: str = "") -> None:
        self.defn = defn
        self.lookup = lookup
        self.module_name = module_name
        self._diags: list[Diagnostic] = []
        self._types: dict[int, Type] = {}
        self._quiet = 0
        self.builder = ScopeBuilder(defn, self)
        self.root: Scope = self.builder.root
        self.labels: dict[str, Span] = {}
        self.assigned: dict[str, Span] = {}
        self._unbounded: set[str] = set()  # names reported as unbounded in the current formula

    # ------------------------------------------------------------ reporting

    def report(self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (),
               hint: str | None = None) -> None:
        if not self._quiet:
            self._diags.append(Diagnostic(code=code, message=message, span=span, notes=tuple(notes), hint=hint))

    def diagnostics(self) -> list[Diagnostic]:
        unique = list(dict.fromkeys(self._diags))
        return sorted(unique, key=lambda d: (d.span.file, d.span.line, d.span.col))

    # ------------------------------------------------------------ driver

    def run(self) -> Scope:
        self.builder.build()
        for block in blocks_of(self.defn, "assert"):
            assert isinstance(block, ast.AssertBlock)
            for assertion in block.items:
                self._assertion(assertion)
        self._lower(blocks_of(self.defn, "lower"))
        compose = blocks_of(self.defn, "compose")
        for block in compose:
            assert isinstance(block, ast.ComposeBlock)
            self._stmts(block.items, self.root, Ctx("compose"), top=True)
        if compose:
            for sym in self.root.symbols(Kind.OUTPUT):
                if sym.name not in self.assigned and sym.block == "output" and self.root.local(sym.name) is sym:
                    self.report("E0601", f"output '{sym.name}' is not assigned in @compose; when a definition has a "
                                "@compose block, it must assign every output (§2.10)", sym.span,
                                hint=f"add an assignment such as '{sym.name} = ...;' to @compose")
        for block in blocks_of(self.defn, "update"):
            assert isinstance(block, ast.ComposeBlock)
            self._stmts(block.items, self.root, Ctx("update"), top=True)
        for block in blocks_of(self.defn, "quantize"):
            assert isinstance(block, ast.QuantizeBlock)
            for q in block.items:
                self._quantization(q)
        return self.root

    # ------------------------------------------------------------ expression typing

    def type_of(self, expr: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        method = _DISPATCH.get(type(expr))
        t = method(self, expr, env, ctx) if method is not None else UNKNOWN
        self._types[id(expr)] = t
        return t

    def _cached(self, expr: ast.Expr, env: Scope) -> Type:
        t = self._types.get(id(expr))
        if t is None:
            self._quiet += 1
            try:
                t = self.type_of(expr, env, Ctx("lower"))
            finally:
                self._quiet -= 1
        return t

    # -- leaves

    def _int(self, e: ast.IntLit, env: Scope, ctx: Ctx) -> Type:
        return INT

    def _real(self, e: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        return REAL

    def _bool(self, e: ast.BoolLit, env: Scope, ctx: Ctx) -> Type:
        return BOOL

    def _str(self, e: ast.StrLit, env: Scope, ctx: Ctx) -> Type:
        for part in e.parts:
            if isinstance(part, ast.FormatField):
                self.type_of(part.value, env, ctx)
        return STR

    def _skip(self, e: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        return UNKNOWN

    def _name(self, e: ast.Name, env: Scope, ctx: Ctx) -> Type:
        sym = self._resolve(e, env, ctx)
        if sym is None:
            return UNKNOWN
        if sym.kind is Kind.DTYPE:
            self.report("E0302", f"'{e.id}' is a type, not a value; write '{e.id}(x)' to cast or '{e.id}()' "
                        "for its default value", e.span)
            return UNKNOWN
        t = sym.type
        if e.id in ctx.promoted:
            t = t.as_optional(False)
        return t

    def _resolve(self, e: ast.Name, env: Scope, ctx: Ctx, *, tensor: bool = False) -> Symbol | None:
        if "." in e.id:
            self.report("E0210", f"the scoped name '{e.id}' cannot be used in an expression; scoped names only "
                        "reference tensors in @quantize and variable files (§2.10)", e.span)
            return None
        sym = env.lookup(e.id)
        if sym is None:
            self._unresolved(e.id, e.span, env, ctx, tensor=tensor)
        return sym

    def _unresolved(self, name: str, span: Span, env: Scope, ctx: Ctx, *, tensor: bool = False) -> None:
        ahead = env.forward.get(name)
        if ahead is not None and (STAGE[ahead.block] > STAGE[ctx.stage] or
                                  (ahead.block == ctx.stage and (ahead.span.line, ahead.span.col) >
                                   (span.line, span.col))):
            if ahead.block == ctx.stage:
                self.report("E0208", f"'{name}' is used before its declaration at line {ahead.span.line}; "
                            f"@{ctx.stage} declarations are processed in order", span,
                            notes=[Note(f"'{name}' is declared here", ahead.span)])
            elif ahead.block == "using" and ctx.stage in ("attrib", "input"):
                self.report("E0208", f"'{name}' is a @using symbol, which is not visible in @{ctx.stage}; "
                            "@using symbols are evaluated after all attributes and input shapes (§2.9)", span,
                            notes=[Note(f"'{name}' is declared here", ahead.span)],
                            hint="compute the value from attributes and input shape symbols directly")
            else:
                self.report("E0208", f"'{name}' is declared in @{ahead.block} (line {ahead.span.line}), which is "
                            f"not visible in @{ctx.stage}; blocks see only the names of the blocks processed "
                            "before them (§2.2)", span, notes=[Note(f"'{name}' is declared here", ahead.span)])
            return
        suggestion = did_you_mean(name, env.visible())
        if ctx.stage == "lower" and not tensor and not ctx.bound:
            if name in self._unbounded:
                return
            self._unbounded.add(name)
            self.report("E0408", f"index '{name}' is not bounded in this formula; add a bound such as "
                        f"'{name} < size' after the formula (§2.12)", span,
                        hint=f"or did you mean '{suggestion}'?" if suggestion else None)
            return
        what = "tensor" if tensor else "identifier"
        self.report("E0201", f"unknown {what} '{name}'" + (f"; did you mean '{suggestion}'?" if suggestion else ""),
                    span)

    # -- properties

    def _property(self, e: ast.Property, env: Scope, ctx: Ctx) -> Type:
        if isinstance(e.value, ast.Name):
            sym = self._resolve(e.value, env, ctx)
            t = sym.type if sym is not None and sym.kind is not Kind.DTYPE else UNKNOWN
            if sym is not None and e.value.id in ctx.promoted:
                t = t.as_optional(False)
            self._types[id(e.value)] = t
        else:
            t = self.type_of(e.value, env, ctx)
        what = _what(e.value)
        if e.name == "size":
            if not t.packed and not t.unknown:
                self.report("E0304", f"'.size' is the number of items of a pack; {what} is not a pack ({t})", e.span,
                            hint="use '.rank' for the number of dimensions of a tensor")
            return INT.as_optional(t.optional)
        if t.unknown and not t.tensor:
            return (INTS if e.name == "shape" else INT).as_optional(t.optional)
        if not t.tensor:
            self.report("E0302", f"'.{e.name}' is defined for tensors; {what} is not a tensor ({t})", e.span,
                        hint="'.size' gives the length of a pack" if t.packed else None)
        elif t.packed:
            self.report("E0304", f"'.{e.name}' is not defined for the tensor pack {what}, whose items may differ in "
                        "shape (§2.4); use '.size' for the number of items, or name the shared extents in the "
                        "declaration, as in 'real[s..]..(n)'", e.span)
        return (INTS if e.name == "shape" else INT).as_optional(t.optional)

    # -- operators

    def _no_tensor(self, t: Type, operand: ast.Expr, ctx: Ctx, op: str) -> Type:
        """Scalar operators reject tensor operands; reported once, then the operand is unknown."""
        if not t.tensor:
            return t
        what = _what(operand)
        if ctx.stage == "lower":
            self.report("E0302", f"tensor {what} must be accessed with indices in @lower, as in '{show(operand)}[i..]'",
                        operand.span)
        elif ctx.stage in ("compose", "update"):
            self.report("E0302", f"'{op}' cannot be applied to the tensor {what} in @{ctx.stage}; invoke an operator "
                        "instead (e.g. math.add for '+')", operand.span)
        else:
            self.report("E0302", f"tensor {what} is not a compile-time value, so '{op}' cannot use it here; "
                        f"use '{show(operand)}.shape' or '{show(operand)}.rank'", operand.span)
        return UNKNOWN

    def _describe(self, t: Type, env: Scope) -> str:
        base = env.generics.get(t.name)
        text = str(t.element())
        return f"{text} (a generic '{base}' type)" if base is not None else text

    def _unary(self, e: ast.Unary, env: Scope, ctx: Ctx) -> Type:
        t = self.type_of(e.operand, env, ctx)
        if e.op == "?":
            return BOOL
        t = self._no_tensor(t, e.operand, ctx, e.op)
        if t.unknown:
            return t
        if e.op in ("-", "+") and not is_numeric(t.name, env.generics):
            self.report("E0302", f"unary '{e.op}' needs an int or real operand; got {self._describe(t, env)}",
                        e.operand.span)
            return UNKNOWN.as_packed(t.packed).as_optional(t.optional)
        if e.op == "!" and t.name != "bool":
            self.report("E0302", f"'!' needs a bool operand; got {self._describe(t, env)}", e.operand.span,
                        hint="compare it instead, e.g. 'x == 0'")
            return BOOL.as_packed(t.packed).as_optional(t.optional)
        return t

    def _binary(self, e: ast.Binary, env: Scope, ctx: Ctx) -> Type:
        if e.op == "??":
            return self._coalesce(e, env, ctx)
        lt = self.type_of(e.left, env, ctx)
        rt = self.type_of(e.right, env, ctx)
        op = e.op
        if op == "is":
            if not lt.tensor and not rt.tensor:
                self._same(lt, rt, e, env, "'is' compares values of the same type; got {} and {}")
            return BOOL.as_packed(lt.packed or rt.packed)
        lt = self._no_tensor(lt, e.left, ctx, op)
        rt = self._no_tensor(rt, e.right, ctx, op)
        packed = lt.packed or rt.packed
        optional = lt.optional or rt.optional
        if op == "in":
            if not rt.packed and not rt.unknown:
                self.report("E0304", f"the right side of 'in' must be a pack; {_what(e.right)} is {rt}", e.right.span)
            else:
                self._same(lt, rt, e, env, "'in' looks for a value among items of the same type; got {} and {}")
            return BOOL.with_(packed=lt.packed, optional=optional)
        if op in LOGICAL:
            for t, side in ((lt, e.left), (rt, e.right)):
                if not t.unknown and t.name != "bool":
                    self.report("E0302", f"'{op}' needs bool operands; got {self._describe(t, env)}", side.span,
                                hint="compare it to get a bool, e.g. 'x != 0'")
            return BOOL.with_(packed=packed, optional=optional)
        if op in COMPARISON:
            self._same(lt, rt, e, env, f"'{op}' compares values of the same type; got {{}} and {{}}")
            return BOOL.with_(packed=packed, optional=optional)
        # arithmetic
        # `%` takes reals too (docs/spec-errata.md S9: math.mod is generic over num)
        for t, side in ((lt, e.left), (rt, e.right)):
            if not t.unknown and not is_numeric(t.name, env.generics):
                self.report("E0302", f"'{op}' needs int or real operands; got {self._describe(t, env)}", side.span)
                return UNKNOWN.with_(packed=packed, optional=optional)
        if not self._same(lt, rt, e, env, f"'{op}' needs operands of the same type; got {{}} and {{}}"):
            return UNKNOWN.with_(packed=packed, optional=optional)
        name = "?" if lt.unknown or rt.unknown else lt.name  # unknown stays unknown: no cascades
        return Type(name, optional, packed)

    def _same(self, lt: Type, rt: Type, e: ast.Binary | ast.Node, env: Scope, message: str) -> bool:
        if same_name(lt.name, rt.name):
            return True
        hint = None
        if {lt.name, rt.name} == {"int", "real"}:
            hint = "convert one side, e.g. 'real(n)' or 'int(x)' (there are no implicit conversions)"
        self.report("E0301", message.format(self._describe(lt, env), self._describe(rt, env)), e.span, hint=hint)
        return False

    def _coalesce(self, e: ast.Binary, env: Scope, ctx: Ctx) -> Type:
        lt = self.type_of(e.left, env, ctx)
        rt = self.type_of(e.right, env, ctx)
        if ctx.stage not in ("compose", "update"):
            lt = self._no_tensor(lt, e.left, ctx, "??")
            rt = self._no_tensor(rt, e.right, ctx, "??")
        if not lt.optional and not lt.unknown:
            self.report("E0303", f"the left side of '??' is never null (its type is {lt}); '??' only applies to "
                        "optional values", e.left.span, hint=f"remove '?? {show(e.right)}'")
        if rt.optional:
            self.report("E0303", f"the fallback after '??' must not be optional (its type is {rt})", e.right.span,
                        hint="give a value that is never null, or coalesce it too")
        if not same_name(lt.name, rt.name):
            self._same(lt, rt, e, env, "both sides of '??' must have the same type; got {} and {}")
            return UNKNOWN.as_packed(lt.packed or rt.packed)
        if lt.packed != rt.packed and not lt.unknown and not rt.unknown:
            self.report("E0304", f"both sides of '??' must be packs or both single values; got {lt.as_optional(False)} "
                        f"and {rt}", e.span)
        name = "?" if lt.unknown or rt.unknown else lt.name
        return Type(name, False, lt.packed or rt.packed, lt.tensor or rt.tensor)

    def _select(self, e: ast.Select, env: Scope, ctx: Ctx) -> Type:
        ct = self.type_of(e.cond, env, ctx)
        if ct.tensor and ctx.stage in ("compose", "update"):
            self.report("E0302", "the condition of '? :' must be a compile-time value; for a run-time choice use "
                        "'if ... then ... else' or an operator such as math.select", e.cond.span)
            ct = UNKNOWN
        ct = self._no_tensor(ct, e.cond, ctx, "?")
        if not ct.unknown and ct.name != "bool":
            self.report("E0301", f"the condition of '? :' must be a bool; got {self._describe(ct, env)}",
                        e.cond.span)
        inner = ctx.promote(_null_tests(e.cond))
        at = self.type_of(e.then, env, inner)
        bt = self.type_of(e.orelse, env, ctx) if e.orelse is not None else None
        optional = ct.optional or at.optional or bt is None or bt.optional
        packed = ct.packed or at.packed or (bt is not None and bt.packed)
        tensor = at.tensor or (bt is not None and bt.tensor)
        name = at.name
        if bt is not None:
            if not same_name(at.name, bt.name):
                self.report("E0301", f"both branches of '? :' must have the same type; got {self._describe(at, env)} "
                            f"and {self._describe(bt, env)}", e.span)
                name = "?"
            elif bt.unknown:
                name = "?"
        return Type(name, optional, packed, tensor)

    def _fold(self, e: ast.Fold, env: Scope, ctx: Ctx) -> Type:
        t = self._no_tensor(self.type_of(e.operand, env, ctx), e.operand, ctx, e.op + " ..")
        spelled = f"{e.op} {'...' if e.cumulative else '..'}"
        if t.unknown and not t.packed:
            return UNKNOWN
        if not t.packed:
            self.report("E0304", f"'{spelled}' folds a pack, but {_what(e.operand)} is a single value ({t})",
                        e.operand.span, hint=f"remove '{spelled}'")
            return UNKNOWN
        if e.op in ("+", "*", "<?", ">?", "<", "<=", ">", ">="):
            if not t.unknown and not is_numeric(t.name, env.generics):
                self.report("E0302", f"'{spelled}' needs a pack of int or real; got {self._describe(t, env)}..",
                            e.operand.span)
                return UNKNOWN
        elif e.op in ("&&", "||"):
            if not t.unknown and t.name != "bool":
                self.report("E0302", f"'{spelled}' needs a pack of bool; got {self._describe(t, env)}..",
                            e.operand.span)
                return UNKNOWN
        if e.op in COMPARISON:
            return BOOL.as_optional(t.optional)
        if e.op == ":=":
            return t.item().as_optional()
        return t if e.cumulative else t.item()

    # -- casts and calls

    def _cast_arg(self, target: str, arg: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        t = self._no_tensor(self.type_of(arg, env, ctx), arg, ctx, target + "(...)")
        if t.unknown:
            return Type(target, t.optional, t.packed)
        if t.name == "str":
            self.report("E0305", f"cannot cast str to {target}; strings cannot be cast (§2.4)", arg.span,
                        hint="string formatting such as \"{x}\" turns values into strings, not back")
        elif not is_arith(t.name, env.generics):
            self.report("E0305", f"cannot cast {self._describe(t, env)} to {target}: it may be a str; declare the "
                        f"generic type as 'arith' or 'num' to allow casts (§2.13)", arg.span)
        return Type(target, t.optional, t.packed)

    def _cast(self, e: ast.Cast, env: Scope, ctx: Ctx) -> Type:
        if e.type not in CONCRETE:  # abstract: reported by the parser
            if e.arg is not None:
                self.type_of(e.arg, env, ctx)
            return UNKNOWN
        if e.arg is None:
            return Type(e.type)
        if e.type == "str":  # reported by the parser
            self.type_of(e.arg, env, ctx)
            return STR
        return self._cast_arg(e.type, e.arg, env, ctx)

    def _call(self, e: ast.Call, env: Scope, ctx: Ctx) -> Type:
        sym = env.lookup(e.callee)
        if sym is not None and sym.kind is Kind.DTYPE:
            if not e.args:
                return Type(e.callee)
            if len(e.args) != 1:
                self.report("E0212", f"the cast '{e.callee}(...)' takes one argument; got {len(e.args)}", e.span)
                return Type(e.callee)
            if sym.base == "type":
                self.report("E0305", f"cannot cast to '{e.callee}', a generic 'type' type that may be str; declare "
                            f"'{e.callee}: arith' or '{e.callee}: num' to allow casts (§2.13)", e.span)
            return self._cast_arg(e.callee, e.args[0], env, ctx)
        if e.callee in BUILTINS:  # a top-level invocation in @compose never gets here (see _rhs)
            return self._builtin(e, env, ctx)
        if ctx.stage in ("compose", "update"):
            self._invocation(e, env, ctx)
            return UNKNOWN.as_tensor()
        for arg in e.args:
            self.type_of(arg, env, ctx)
        suggestion = did_you_mean(e.callee, BUILTINS)
        self.report("E0201", f"unknown function '{e.callee}'" + (f"; did you mean '{suggestion}'?" if suggestion else "")
                    + f"; operators can only be invoked in @compose, and the built-in functions are "
                    f"{', '.join(sorted(BUILTINS))}", e.span)
        return UNKNOWN

    def _builtin(self, e: ast.Call, env: Scope, ctx: Ctx) -> Type:
        if len(e.args) != 1 or e.attrs or e.type_args:
            self.report("E0212", f"the built-in function '{e.callee}' takes exactly one argument", e.span)
            for arg in e.args:
                self.type_of(arg, env, ctx)
            return REAL if e.callee in REAL_FUNCTIONS else UNKNOWN
        arg = e.args[0]
        t = self._no_tensor(self.type_of(arg, env, ctx), arg, ctx, e.callee + "(...)")
        if t.unknown:
            return (REAL if e.callee in REAL_FUNCTIONS else UNKNOWN).with_(optional=t.optional, packed=t.packed)
        if e.callee in REAL_FUNCTIONS and t.name != "real":
            self.report("E0302", f"'{e.callee}' needs a real argument; got {self._describe(t, env)}", arg.span,
                        hint=f"convert it: {e.callee}(real(...))")
            return REAL.with_(optional=t.optional, packed=t.packed)
        if e.callee in NUM_FUNCTIONS and not is_numeric(t.name, env.generics):
            self.report("E0302", f"'{e.callee}' needs an int or real argument; got {self._describe(t, env)}", arg.span)
            return UNKNOWN.with_(optional=t.optional, packed=t.packed)
        return Type(REAL.name if e.callee in REAL_FUNCTIONS else t.name, t.optional, t.packed)

    # -- lists, indexing

    def _list(self, e: ast.ListExpr, env: Scope, ctx: Ctx) -> Type:
        name = "?"
        first: Type | None = None
        optional = tensor = unknown = False
        for pos, item in enumerate(e.items, 1):
            t = self._list_item(item, env, ctx)
            optional = optional or t.optional
            tensor = tensor or t.tensor
            if t.unknown:
                unknown = True
                continue
            if first is None:
                first, name = t, t.name
            elif not same_name(first.name, t.name):
                self.report("E0301", f"list items must have the same type; item {pos} is {self._describe(t, env)} "
                            f"but the first item is {self._describe(first, env)}", item.span)
        return Type("?" if unknown else name, optional, True, tensor)

    def _list_item(self, item: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(item, ast.Expand):
            t = self.type_of(item.value, env, ctx)
            if item.count is not None:
                ct = self._count(item.count, env, ctx)
                if t.packed and not t.unknown:
                    self.report("E0304", f"{_what(item.value)} is already a pack; '..({show(item.count)})' repeats a "
                                f"single value — write '{show(item.value)}..' to expand the pack", item.count.span)
                return t.item().as_optional(t.optional or ct.optional)
            if not t.packed and not t.unknown:
                self.report("E0304", f"{_what(item.value)} is not a pack ({t}), so it cannot be expanded with '..'; "
                            f"to repeat it, give a count as in '{show(item.value)}..(n)'", item.span)
            return t.item()
        if isinstance(item, ast.Range):
            return self._range(item, env, ctx).item()
        if isinstance(item, ast.Zip):
            first: Type | None = None
            optional = False
            for part in item.items:
                t = self._no_tensor(self.type_of(part, env, ctx), part, ctx, "(..)..")
                optional = optional or t.optional
                if t.unknown:
                    continue
                if not t.packed:
                    self.report("E0304", f"a zip '(a, b)..' interleaves packs; {_what(part)} is not a pack ({t})",
                                part.span)
                elif first is None:
                    first = t
                elif not same_name(first.name, t.name):
                    self.report("E0301", f"zipped packs must have the same item type; got {first.name} and {t.name}",
                                part.span)
            return (first.item() if first is not None else UNKNOWN).as_optional(optional)
        t = self.type_of(item, env, ctx)
        if t.packed and not t.unknown:
            self.report("E0304", f"{_what(item)} is a pack ({t}); expand it into the list with '{show(item)}..'",
                        item.span)
            return t.item()
        return t

    def _count(self, count: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        ct = self._no_tensor(self.type_of(count, env, ctx), count, ctx, "..()")
        if not ct.unknown and (ct.name not in ("int", "bool") or ct.packed):
            self.report("E0302", f"a repeat count must be an int (or a bool, for a conditional item); "
                        f"{_what(count)} is {ct}", count.span)
        return ct

    def _range(self, e: ast.Range, env: Scope, ctx: Ctx) -> Type:
        optional = False
        for part in (e.start, e.stop, e.step):
            if part is None:
                continue
            t = self._no_tensor(self.type_of(part, env, ctx), part, ctx, ":")
            optional = optional or t.optional
            if not t.unknown and (t.name != "int" or t.packed):
                self.report("E0302", f"range bounds and steps must be int; {_what(part)} is {t}", part.span)
        return INTS.as_optional(optional)

    def _index_type(self, index: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(index, ast.Range):
            return self._range(index, env, ctx)
        t = self._no_tensor(self.type_of(index, env, ctx), index, ctx, "[]")
        if t.unknown:
            return t
        if t.name == "bool" and t.packed:
            return t
        if t.name != "int":
            self.report("E0302", f"an index must be int, int.. or a bool.. mask; {_what(index)} is {t}", index.span)
            return UNKNOWN
        return t

    def _subscript(self, e: ast.Subscript, env: Scope, ctx: Ctx) -> Type:
        vt = self.type_of(e.value, env, ctx)
        it = self._index_type(e.index, env, ctx)
        optional = vt.optional or it.optional
        if vt.tensor and not vt.packed:
            if ctx.stage == "lower":
                self.report("E0302", f"{_what(e.value)} is a tensor: access its elements with a tensor access; a "
                            f"one-dimensional access needs a trailing comma, as in '{show(e.value)}[{show(e.index)},]' "
                            "(§2.4)", e.span)
            else:
                self.report("E0302", f"{_what(e.value)} is a tensor, which cannot be indexed here; only packs and "
                            "strings can be indexed (tensor elements are accessed in @lower)", e.span)
            return UNKNOWN
        if vt.unknown and not vt.packed:
            return UNKNOWN.as_optional(optional)
        if not vt.packed:
            if vt.name == "str":
                return STR.as_optional(optional)
            self.report("E0304", f"{_what(e.value)} is not a pack ({vt}); only packs and strings can be indexed",
                        e.span)
            return UNKNOWN
        return vt.with_(packed=isinstance(e.index, ast.Range) or it.packed, optional=optional)

    def _substitute(self, e: ast.Substitute, env: Scope, ctx: Ctx) -> Type:
        vt = self.type_of(e.value, env, ctx)
        it = self._index_type(e.index, env, ctx)
        rt = self.type_of(e.replacement, env, ctx)
        optional = vt.optional or it.optional or rt.optional
        if not vt.packed and not vt.unknown:
            self.report("E0304", f"'<-' replaces items of a pack; {_what(e.value)} is not a pack ({vt})", e.value.span)
            return UNKNOWN
        several = isinstance(e.index, ast.Range) or it.packed
        if not it.unknown and not rt.unknown:
            if several and not rt.packed:
                self.report("E0304", f"the index {_what(e.index)} selects several items, so the new value must be a "
                            f"pack of the same length; {_what(e.replacement)} is {rt}", e.replacement.span)
            elif not several and rt.packed:
                self.report("E0304", f"the single index {_what(e.index)} replaces one item, so the new value must not "
                            f"be a pack; {_what(e.replacement)} is {rt}", e.replacement.span)
        if not same_name(vt.name, rt.name):
            self.report("E0301", f"'<-' replaces {self._describe(vt, env)} items with {self._describe(rt, env)} "
                        "values; use values of the pack's item type", e.replacement.span)
        return vt.with_(packed=True, optional=optional)

    def _expand(self, e: ast.Expand, env: Scope, ctx: Ctx) -> Type:
        t = self.type_of(e.value, env, ctx)
        if e.count is not None:
            self._count(e.count, env, ctx)
        return t

    def _zip(self, e: ast.Zip, env: Scope, ctx: Ctx) -> Type:
        for part in e.items:
            self.type_of(part, env, ctx)
        return UNKNOWN

    def _bounded(self, e: ast.Bounded, env: Scope, ctx: Ctx) -> Type:
        t = self.type_of(e.value, env, ctx)
        for part in (e.low, e.high):
            if part is not None:
                pt = self.type_of(part, env, ctx)
                if not pt.unknown and pt.name != "int":
                    self.report("E0302", f"a remapped index must be int; {_what(part)} is {pt}", part.span)
        if not t.unknown and t.name != "int":
            self.report("E0302", f"a guarded index must be int; {_what(e.value)} is {t}", e.value.span)
        return t

    # -- tensor access

    def _access_symbol(self, e: ast.TensorAccess, env: Scope, ctx: Ctx) -> tuple[Symbol | None, Type, bool]:
        """The accessed tensor's symbol, its type and whether a pack item was selected."""
        target = e.tensor
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            sym = self._resolve(target.value, env, ctx, tensor=True)
            it = self._index_type(target.index, env, ctx)
            if sym is None:
                return None, UNKNOWN, True
            t = sym.type
            self._types[id(target.value)] = t
            if not t.packed and not t.unknown:
                self.report("E0304", f"'{sym.name}' is not a tensor pack, so '{show(target)}' cannot select an item "
                            "of it", target.span)
            elif it.packed:
                return sym, t.with_(optional=t.optional or it.optional), False
            return sym, t.with_(packed=False, optional=t.optional or it.optional), True
        if isinstance(target, ast.Name):
            sym = self._resolve(target, env, ctx, tensor=True)
            t = sym.type if sym is not None else UNKNOWN
            self._types[id(target)] = t
            return sym, t, False
        return None, self.type_of(target, env, ctx), False

    def _access(self, e: ast.TensorAccess, env: Scope, ctx: Ctx) -> Type:
        sym, tt, _item = self._access_symbol(e, env, ctx)
        if ctx.stage != "lower":
            self.report("E0302", f"the tensor access '{show(e)}' is only allowed in @lower formulas (§2.4)", e.span)
            for idx in e.indices:
                self.type_of(idx, env, ctx)
            return UNKNOWN
        if sym is not None and sym.kind is Kind.DTYPE:
            return UNKNOWN
        if not tt.tensor and not tt.unknown:
            hint = f"index the pack with a single index: '{show(e.tensor)}[i]'" if tt.packed else None
            self.report("E0302", f"{_what(e.tensor)} is not a tensor ({tt}), so it cannot be accessed with tensor "
                        "indices", e.span, hint=hint)
            for idx in e.indices:
                self.type_of(idx, env, ctx)
            return UNKNOWN
        packed = tt.packed
        optional = tt.optional
        for idx in e.indices:
            t = self._tensor_index(idx, env, ctx)
            optional = optional or t.optional
            if isinstance(idx, ast.Range) or (t.packed and not isinstance(idx, ast.Expand)):
                packed = True
        if sym is not None:
            self._check_rank(e, sym, env)
        return Type(tt.name, optional, packed)

    def _tensor_index(self, idx: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(idx, ast.Range):
            return self._range(idx, env, ctx)
        if isinstance(idx, ast.Expand):
            t = self._no_tensor(self.type_of(idx.value, env, ctx), idx.value, ctx, "[]")
            if idx.count is not None:
                self._count(idx.count, env, ctx)
            elif not t.packed and not t.unknown:
                self.report("E0304", f"{_what(idx.value)} is not a pack ({t}), so it cannot be expanded with '..'",
                            idx.span)
            if not t.unknown and t.name != "int":
                self.report("E0302", f"tensor indices must be int; {_what(idx.value)} is {t}", idx.value.span)
            return t.item()
        t = self._no_tensor(self.type_of(idx, env, ctx), idx, ctx, "[]")
        if not t.unknown and t.name != "int":
            self.report("E0302", f"tensor indices must be int; {_what(idx)} is {t}", idx.span)
        return t

    # ------------------------------------------------------------ lengths and ranks

    def length_of(self, expr: ast.Expr, env: Scope) -> Lin | None:
        """The symbolic length of a packed expression (None when not a pack or unknowable)."""
        t = self._cached(expr, env)
        if not t.packed:
            return None
        return self._length(expr, env)

    def _opaque(self, expr: ast.Expr) -> Lin:
        return Lin.key(show(expr))

    def _length(self, e: ast.Expr, env: Scope) -> Lin | None:
        if isinstance(e, ast.Name):
            sym = env.lookup(e.id)
            if sym is None:
                return None
            if sym.length is not None:
                return sym.length
            if sym.value is not None and sym.env is not None:
                if "length" not in sym.cache:
                    sym.cache["length"] = None  # guards against cycles
                    sym.cache["length"] = self.length_of(sym.value, sym.env) or Lin.key(f"|{e.id}|")
                return sym.cache["length"]  # type: ignore[return-value]
            return Lin.key(f"|{e.id}|")
        if isinstance(e, ast.ListExpr):
            total = Lin()
            for item in e.items:
                part = self._item_length(item, env)
                if part is None:
                    return None
                total = total + part
            return total
        if isinstance(e, ast.Subscript):
            if isinstance(e.index, ast.Range):
                return self._opaque(e)
            it = self._cached(e.index, env)
            if it.name == "bool":
                return self._opaque(e)
            return self.length_of(e.index, env)
        if isinstance(e, ast.Substitute):
            return self.length_of(e.value, env)
        if isinstance(e, ast.Unary | ast.Fold | ast.Bounded | ast.Expand):
            inner = e.operand if isinstance(e, ast.Unary | ast.Fold) else e.value
            return self.length_of(inner, env)
        if isinstance(e, ast.Cast):
            return self.length_of(e.arg, env) if e.arg is not None else None
        if isinstance(e, ast.Call):
            return self.length_of(e.args[0], env) if len(e.args) == 1 else None
        if isinstance(e, ast.Binary):
            if e.op == "??":
                left, right = self.length_of(e.left, env), self.length_of(e.right, env)
                return left if left is not None and left == right else self._opaque(e)
            if e.op == "in" or self._cached(e.left, env).packed:
                return self.length_of(e.left, env)
            return self.length_of(e.right, env)
        if isinstance(e, ast.Select):
            if self._cached(e.cond, env).packed:
                return self.length_of(e.cond, env)
            left = self.length_of(e.then, env)
            right = self.length_of(e.orelse, env) if e.orelse is not None else None
            return left if left is not None and left == right else self._opaque(e)
        if isinstance(e, ast.Property) and e.name == "shape" and isinstance(e.value, ast.Name):
            sym = env.lookup(e.value.id)
            if sym is not None and sym.rank is not None:
                return sym.rank
            return self._opaque(e)
        if isinstance(e, ast.Range):
            return self._range_length(e)
        return self._opaque(e)

    def _range_length(self, e: ast.Range) -> Lin:
        if e.start is None or e.stop is None:
            return self._opaque(e)
        step = 1 if e.step is None else lin_value(e.step)
        if step == 1 or step == Lin(1):
            return lin_value(e.stop) - lin_value(e.start)
        if step == Lin(-1):
            return lin_value(e.start) - lin_value(e.stop)
        return self._opaque(e)

    def _item_length(self, item: ast.Expr, env: Scope) -> Lin | None:
        if isinstance(item, ast.Expand):
            if item.count is not None:
                return self._count_length(item.count, env)
            return self.length_of(item.value, env)
        if isinstance(item, ast.Range):
            return self._range_length(item)
        if isinstance(item, ast.Zip):
            first = self.length_of(item.items[0], env) if item.items else None
            return first.scale(len(item.items)) if first is not None else None
        return Lin(1)

    def _count_length(self, count: ast.Expr, env: Scope) -> Lin:
        if self._cached(count, env).name == "bool":
            return Lin.key(f"[{show(count)}]")
        return lin_value(count)

    def _check_rank(self, e: ast.TensorAccess, sym: Symbol, env: Scope) -> None:
        declared = sym.rank
        if declared is None:
            return
        used = Lin()
        for idx in e.indices:
            if isinstance(idx, ast.Expand):
                part = self._count_length(idx.count, env) if idx.count is not None else self.length_of(idx.value, env)
                if part is None:
                    return
                used = used + part
            else:
                used = used + Lin(1)
        if used.terms != declared.terms or used.const == declared.const:
            return
        count = str(used)
        indices = "index" if used == Lin(1) else "indices"
        self.report("E0407", f"tensor '{sym.name}' has rank {declared} but is accessed with {count} {indices}", e.span,
                    notes=[Note(f"'{sym.name}' is declared here", sym.span)],
                    hint="write one index per dimension; a packed index such as 'i..' covers several dimensions")

    # ------------------------------------------------------------ @assert

    def _assertion(self, a: ast.Assertion) -> None:
        ctx = Ctx("assert")
        t = self.type_of(a.condition, self.root, ctx)
        if t.tensor:
            self._no_tensor(t, a.condition, ctx, "@assert")
        elif not t.unknown and t.name != "bool":
            self.report("E0301", f"an assert condition must be a bool (or a bool.. pack); {_what(a.condition)} "
                        f"is {t}", a.condition.span, hint="compare it, e.g. 'x > 0'")
        if a.message is not None:
            self.type_of(a.message, self.root, ctx)
        for arg in a.args:
            at = self.type_of(arg.value, self.root, ctx)
            if at.tensor:
                self._no_tensor(at, arg.value, ctx, "@assert")

    # ------------------------------------------------------------ @lower

    def _lower(self, blocks: list[ast.Block]) -> None:
        inits: dict[str, ast.Lowering] = {}
        updates: dict[str, ast.Lowering] = {}
        for block in blocks:
            assert isinstance(block, ast.LowerBlock)
            for formula in block.items:
                output = self._formula(formula)
                if output is None:
                    continue
                if formula.op == "=":
                    if output in inits:
                        self.report("E0606", f"output '{output}' already has an '=' formula "
                                    f"(line {inits[output].span.line}); each output has at most one '=' "
                                    "initialization (§2.12)", formula.span,
                                    notes=[Note("the first '=' formula", inits[output].span)])
                    elif output in updates:
                        self.report("E0606", f"the '=' formula of output '{output}' must come before its "
                                    f"'{updates[output].op}' formula (line {updates[output].span.line}) (§2.12)",
                                    formula.span)
                    else:
                        inits[output] = formula
                    continue
                if output in updates:
                    first = updates[output]
                    self.report("E0606", f"output '{output}' already has a '{first.op}' formula "
                                f"(line {first.span.line}); besides its '=' initialization, an output has at most "
                                f"one update or accumulation formula (§2.12)", formula.span,
                                notes=[Note(f"the first '{first.op}' formula", first.span)])
                    continue
                updates[output] = formula
                if formula.op == ":=" and output not in inits:
                    self.report("E0607", f"':=' updates the initial value of output '{output}', but no '=' formula "
                                "precedes it; add one such as "
                                f"'{output}[...] = ...' before it (§2.12)", formula.span)

    def _formula(self, f: ast.Lowering) -> str | None:
        """Checks one formula; returns the name of the assigned output (None if not an output)."""
        ctx = Ctx("lower")
        env = self.root.child()
        self._unbounded = set()
        if f.unroll is not None:
            if f.unroll.count is not None:
                self._expect_int(f.unroll.count, self.root, Ctx("lower", bound=True), "an unroll count")
            if f.unroll.index is not None:
                self.builder.declare(Symbol(f.unroll.index, Kind.INDEX, INT, f.unroll.span, "lower"), env)
        for b in f.bounds:
            bt = self._no_tensor(self.type_of(b.bound, env, Ctx("lower", bound=True)), b.bound, ctx, "<")
            if not bt.unknown and bt.name != "int":
                self.report("E0302", f"the bound of index '{b.index}' must be int or int..; {_what(b.bound)} is {bt}",
                            b.bound.span)
            if bt.optional:
                self.report("E0303", f"the bound of index '{b.index}' may be null ({bt}); resolve it with '??'",
                            b.bound.span)
            length = self.length_of(b.bound, env) if bt.packed else None
            self.builder.declare(Symbol(b.index, Kind.INDEX, INT.as_packed(bt.packed), b.span, "lower",
                                        length=length), env)
        for local in f.locals:
            lt = self.type_of(local.value, env, ctx)
            self.builder.declare(Symbol(local.name, Kind.LOCAL, lt.as_tensor(False), local.span, "lower",
                                        value=local.value, env=env), env)
        output = self._lower_target(f, env, ctx)
        target = f.target
        tt = self.type_of(target, env, ctx) if isinstance(target, ast.TensorAccess) else UNKNOWN
        vt = self.type_of(f.value, env, ctx)
        if vt.tensor:
            self._no_tensor(vt, f.value, ctx, f.op)
            vt = UNKNOWN
        if output is not None:
            self._check_formula_value(f, output, tt, vt, env)
        if f.condition is not None:
            ct = self.type_of(f.condition, env, ctx)
            if ct.tensor:
                self._no_tensor(ct, f.condition, ctx, "|")
            elif not ct.unknown and (ct.name != "bool" or ct.packed):
                self.report("E0301", f"the condition of a formula must be a single bool; {_what(f.condition)} is "
                            f"{ct}", f.condition.span)
        return output

    def _lower_target(self, f: ast.Lowering, env: Scope, ctx: Ctx) -> str | None:
        target = f.target
        if not isinstance(target, ast.TensorAccess):
            return None  # reported by the parser
        base = target.tensor
        if isinstance(base, ast.Subscript):
            base = base.value
        if not isinstance(base, ast.Name):
            return None
        sym = env.lookup(base.id)
        if sym is None:
            return None  # reported when the access is typed
        if sym.kind is Kind.OUTPUT:
            return sym.name
        if sym.kind is Kind.INPUT:
            self.report("E0602", f"cannot assign to input '{sym.name}'; the left side of a @lower formula must be "
                        "an output (§2.12)", base.span, notes=[Note(f"'{sym.name}' is declared here", sym.span)])
        else:
            self.report("E0603", f"'{sym.name}' is {describe(sym.kind)}, not an output; the left side of a @lower "
                        "formula must be an output (§2.12)", base.span)
        return None

    def _check_formula_value(self, f: ast.Lowering, output: str, tt: Type, vt: Type, env: Scope) -> None:
        if tt.unknown and not tt.packed:
            return
        need = ACCUMULATE.get(f.op)
        dtype = self._describe(tt, env)
        if need == "numeric" and not tt.unknown and not is_numeric(tt.name, env.generics):
            self.report("E0302", f"'{f.op}' accumulates numbers, but output '{output}' holds {dtype}",
                        f.span, hint="use '&=' or '|=' for bool outputs")
            return
        if need == "bool" and not tt.unknown and tt.name != "bool":
            self.report("E0302", f"'{f.op}' accumulates bools, but output '{output}' holds {dtype}", f.span)
            return
        if vt.unknown:
            if vt.packed and not tt.packed:
                self._packed_value(f, output, vt)
            return
        if not same_name(vt.name, tt.name):
            hint = None
            if {vt.name, tt.name} == {"int", "real"}:
                hint = f"convert the value with {tt.name}(...)"
            self.report("E0301", f"cannot assign {self._describe(vt, env)} to output '{output}', which holds {dtype}",
                        f.value.span, hint=hint)
        elif vt.optional:
            self.report("E0303", f"the right side may be null ({vt}); optional values must be resolved in a formula, "
                        "e.g. with '... ?? 0.0' (§2.12)", f.value.span)
        elif vt.packed and not tt.packed:
            self._packed_value(f, output, vt)

    def _packed_value(self, f: ast.Lowering, output: str, vt: Type) -> None:
        self.report("E0304", f"the right side is a pack ({vt}) but '{show(f.target)}' is a single element of "
                    f"'{output}'; index the output with a pack or range, as in '{output}[i, :]'", f.value.span)

    def _expect_int(self, expr: ast.Expr, env: Scope, ctx: Ctx, what: str, *, tensor_ok: bool = False) -> Type:
        t = self.type_of(expr, env, ctx)
        if t.tensor and not tensor_ok:
            return self._no_tensor(t, expr, ctx, "..()")
        if not t.unknown and (t.name != "int" or t.packed):
            self.report("E0301", f"{what} must be an int; {_what(expr)} is {t}", expr.span)
        return t

    # ------------------------------------------------------------ @compose and @update

    def _stmts(self, stmts: Iterable[ast.Stmt], env: Scope, ctx: Ctx, *, top: bool) -> list[Type] | None:
        yielded: list[Type] | None = None
        for stmt in stmts:
            if isinstance(stmt, ast.Assign):
                self._assign(stmt, env, ctx, top=top)
            elif isinstance(stmt, ast.Yield):
                yielded = []
                for value in stmt.values:
                    t = self.type_of(value, env, ctx)
                    if t.optional:
                        self.report("E0303", f"a yielded value must not be optional; {_what(value)} may be null "
                                    f"({t}) (§2.10.1)", value.span, hint="resolve it with '??' or an 'if ?x' branch")
                    yielded.append(t)
        return yielded

    def _assign(self, stmt: ast.Assign, env: Scope, ctx: Ctx, *, top: bool) -> None:
        results = self._rhs(stmt.value, env, ctx)
        n = len(stmt.targets)
        if results.count is not None and n > results.count:
            self.report("E0309", f"{_plural(n, 'result')} {'is' if n == 1 else 'are'} assigned, but "
                        f"{results.describe()}", stmt.span,
                        hint="remove the extra names on the left; use '~' to skip a result in the middle")
        for i, target in enumerate(stmt.targets):
            t = results.types[i] if i < len(results.types) else UNKNOWN.as_tensor()
            self._bind(target, t, env, ctx, top=top)

    def _bind(self, target: ast.LValue, t: Type, env: Scope, ctx: Ctx, *, top: bool) -> None:
        if isinstance(target, ast.LSkip):
            return
        if isinstance(target, ast.LList | ast.LZip):
            if not t.packed and not t.unknown:
                self.report("E0304", f"only a pack of tensors can be decomposed on the left side; this result is {t}",
                            target.span)
            items = target.items
            for item in items:
                if isinstance(target, ast.LZip):
                    self._bind(ast.LName(name=item.name, type=item.type, pack=target.pack, span=item.span),
                               t.as_packed(), env, ctx, top=top)
                elif isinstance(item, ast.LName) and item.pack is None:
                    self._bind(item, t.item(), env, ctx, top=top)
                else:
                    self._bind(item, t, env, ctx, top=top)
            return
        assert isinstance(target, ast.LName)
        tt = t.as_tensor()
        if target.type is not None:
            tt = self._declared_type(target.type, env, ctx, target.name)
        if target.pack is not None:
            tt = tt.as_packed()
            if target.pack.length is not None:
                self._expect_int(target.pack.length, env, ctx, "a pack length")
        if not top:
            self.builder.declare(Symbol(target.name, Kind.TENSOR, tt, target.span, ctx.stage, decl=target), env)
            return
        sym = env.lookup(target.name)
        if sym is None:
            self.builder.declare(Symbol(target.name, Kind.TENSOR, tt, target.span, ctx.stage, decl=target), env)
            return
        name = target.name
        if sym.kind is Kind.OUTPUT and ctx.stage == "compose" or sym.kind is Kind.VARIABLE and ctx.stage == "update":
            if name in self.assigned:
                self.report("E0202", f"'{name}' is assigned twice; each {sym.kind.value} is assigned once",
                            target.span, notes=[Note("first assigned here", self.assigned[name])])
            else:
                self.assigned[name] = target.span
        elif sym.kind is Kind.OUTPUT:
            self.report("E0603", f"output '{name}' can only be assigned in @compose; @update assigns variables (§2.11)",
                        target.span)
        elif sym.kind is Kind.VARIABLE:
            self.report("E0603", f"variable '{name}' can only be assigned in @update, not in @compose (§2.11)",
                        target.span)
        elif sym.kind is Kind.INPUT:
            self.report("E0602", f"cannot assign to input '{name}'; the left side of @{ctx.stage} assignments must be "
                        "new names" + (" or outputs" if ctx.stage == "compose" else " or variables"), target.span,
                        notes=[Note(f"'{name}' is declared here", sym.span)])
        else:
            self.report("E0202", f"'{name}' is already declared as {describe(sym.kind)} (line {sym.span.line}); "
                        "intermediate tensors need unique names (§2.10)", target.span,
                        notes=[Note(f"'{name}' first declared here", sym.span)])

    def _declared_type(self, spec: ast.TypeSpec, env: Scope, ctx: Ctx, name: str) -> Type:
        elem = self.builder.check_type_name(spec, f"'{name}'")
        for item in spec.shape or ():
            for part in (item.value, item.bound, item.pack.length if item.pack else None):
                if part is not None:
                    self.type_of(part, env, Ctx(ctx.stage))
        if spec.pack is not None and spec.pack.length is not None:
            self.type_of(spec.pack.length, env, ctx)
        return Type(elem.name if elem else "?", spec.optional, spec.pack is not None, True)

    def _rhs(self, value: ast.Expr, env: Scope, ctx: Ctx) -> _Results:
        if isinstance(value, ast.Call):
            return self._invocation(value, env, ctx)
        if isinstance(value, ast.BlockExpr):
            self._label(value.label, value.span)
            yielded = self._stmts(value.stmts, env.child(), ctx, top=False)
            if yielded is None:
                return _Results(None)
            return _Results(len(yielded), [t.as_tensor() for t in yielded], "the block", "value")
        if isinstance(value, ast.IfExpr):
            return self._if(value, env, ctx)
        if isinstance(value, ast.LoopExpr):
            return self._loop(value, env, ctx)
        t = self.type_of(value, env, ctx)
        return _Results(1, [t.as_tensor()], "the expression")

    def _label(self, label: str | None, span: Span) -> None:
        if label is None:
            return
        if label in self.labels:
            first = self.labels[label]
            self.report("E0202", f"label '{label}' is already used at line {first.line}; labels name operator "
                        "instances and must be unique (§2.10)", span, notes=[Note("first used here", first)])
            return
        self.labels[label] = span
        self.root.table.append(Symbol(label, Kind.LABEL, UNKNOWN, span, "compose"))

    def _invocation(self, call: ast.Call, env: Scope, ctx: Ctx) -> _Results:
        self._label(call.label, call.span)
        for targ in call.type_args:
            if targ not in CONCRETE and env.lookup(targ) is None:
                suggestion = did_you_mean(targ, [*CONCRETE, *env.generics])
                self.report("E0308", f"unknown type '{targ}' in the type arguments of '{call.callee}'"
                            + (f"; did you mean '{suggestion}'?" if suggestion else ""), call.span)
        for attr in call.attrs:
            at = self.type_of(attr.value, env, ctx)
            if at.tensor:
                self.report("E0302", f"the value of attribute '{attr.name}' must be a compile-time value; "
                            f"{_what(attr.value)} is a tensor ({at})", attr.value.span,
                            hint="pass tensors as arguments in '(...)'; attributes take compile-time values")
        for arg in call.args:
            self.type_of(arg, env, ctx)
        callee = self.lookup(call.callee)
        if callee is None:
            return _Results(None)
        outputs = [d for b in callee.blocks if isinstance(b, ast.ParamBlock) and b.kind == "output" for d in b.items]
        generic = {d.name for b in callee.blocks if isinstance(b, ast.DtypeBlock) for d in b.items}
        types = []
        for d in outputs:
            t = Type.from_spec(d.type, tensor=True)
            types.append(t.with_(name="?") if t.name in generic or t.name not in CONCRETE else t)
        return _Results(len(outputs), types, f"'{call.callee}'", "output")

    def _if(self, e: ast.IfExpr, env: Scope, ctx: Ctx) -> _Results:
        results: _Results | None = None
        for cond, then in e.branches:
            self._condition(cond, env, ctx, "an 'if' condition")
            r = self._rhs(then, env, ctx.promote(_null_tests(cond)))
            if results is None or results.count is None:
                results = r
        r = self._rhs(e.orelse, env, ctx)
        if results is None or results.count is None:
            results = r
        return _Results(results.count, results.types, "the 'if'")

    def _condition(self, cond: ast.Expr, env: Scope, ctx: Ctx, what: str) -> None:
        if isinstance(cond, ast.Call | ast.BlockExpr | ast.IfExpr | ast.LoopExpr):
            r = self._rhs(cond, env, ctx)
            types = r.types if r.count == 1 else []
        else:
            types = [self.type_of(cond, env, ctx)]
        for t in types:
            if not t.unknown and (t.name != "bool" or t.packed):
                self.report("E0301", f"{what} must be a bool; {_what(cond)} is {t}", cond.span)

    def _loop(self, e: ast.LoopExpr, env: Scope, ctx: Ctx) -> _Results:
        loop_env = env.child()
        carried: list[Type] = []
        for c in e.carried:
            vt = self.type_of(c.value, env, ctx)
            t = vt.as_tensor()
            if c.type is not None:
                t = self._declared_type(c.type, env, ctx, c.name)
                if not same_name(t.name, vt.name):
                    self.report("E0301", f"the initial value of '{c.name}' has type {self._describe(vt, env)}, but "
                                f"'{c.name}' is declared {t}", c.value.span)
            carried.append(t)
            self.builder.declare(Symbol(c.name, Kind.CARRIED, t, c.span, ctx.stage), loop_env)
        for s in e.scans:
            pt = self.type_of(s.pack, env, ctx)
            if not pt.packed and not pt.unknown:
                self.report("E0304", f"the scan input of '{s.name}' must be a pack of tensors; {_what(s.pack)} is {pt}",
                            s.pack.span)
            self.builder.declare(Symbol(s.name, Kind.SCAN, pt.item().as_tensor(), s.span, ctx.stage), loop_env)
        if e.count is not None:
            if e.count.count is not None:
                self._expect_int(e.count.count, env, ctx, "an iteration count", tensor_ok=True)
            if e.count.index is not None:
                self.builder.declare(Symbol(e.count.index, Kind.LOOP_INDEX, INT.as_tensor(), e.count.span, ctx.stage),
                                     loop_env)
        for cond in (e.pre_cond, e.post_cond):
            if cond is not None:
                self._condition(cond, loop_env, ctx, "a loop condition")
        if e.body is None:
            return _Results(None)
        body = self._rhs(e.body, loop_env, ctx)
        if body.count is None:
            return _Results(None)
        if body.count < len(carried):
            self.report("E0309", f"the loop body produces {_plural(body.count, 'result')}, but the loop has "
                        f"{_plural(len(carried), 'loop-carried variable')}; the first results of the body update "
                        "them (§2.10.1)", e.body.span)
            return _Results(None)
        scans = [t.as_packed() for t in body.types[len(carried):]]
        return _Results(body.count, carried + scans, "the loop")

    # ------------------------------------------------------------ @quantize

    def _quantization(self, q: ast.Quantization) -> None:
        if "." in q.tensor:
            return  # a scoped name: labels of nested invocations (checked at composition)
        sym = self.root.lookup(q.tensor)
        if sym is None:
            suggestion = did_you_mean(q.tensor, [s.name for s in self.root.table if s.kind in TENSOR_KINDS])
            self.report("E0201", f"unknown tensor '{q.tensor}' in @quantize" +
                        (f"; did you mean '{suggestion}'?" if suggestion else ""), q.span)
        elif sym.kind not in TENSOR_KINDS:
            self.report("E0302", f"'{q.tensor}' is {describe(sym.kind)}; @quantize attaches quantization to tensors "
                        "(§2.14)", q.span)
        ctx = Ctx("quantize")
        for attr in q.attrs:
            self.type_of(attr.value, self.root, ctx)


_DISPATCH: dict[type, Callable[[Checker, ast.Expr, Scope, Ctx], Type]] = {  # type: ignore[dict-item]
    ast.IntLit: Checker._int,
    ast.RealLit: Checker._real,
    ast.NamedConst: Checker._real,
    ast.BoolLit: Checker._bool,
    ast.StrLit: Checker._str,
    ast.Name: Checker._name,
    ast.Property: Checker._property,
    ast.Unary: Checker._unary,
    ast.Binary: Checker._binary,
    ast.Fold: Checker._fold,
    ast.Select: Checker._select,
    ast.Cast: Checker._cast,
    ast.Call: Checker._call,
    ast.Skip: Checker._skip,
    ast.Expand: Checker._expand,
    ast.Range: Checker._range,
    ast.Zip: Checker._zip,
    ast.ListExpr: Checker._list,
    ast.Subscript: Checker._subscript,
    ast.Bounded: Checker._bounded,
    ast.TensorAccess: Checker._access,
    ast.Substitute: Checker._substitute,
}
