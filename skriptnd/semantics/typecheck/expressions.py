"""Expression typing (§2.4): `type_of` dispatches on the node type to the rules for
literals, names, properties, operators, selects, folds, casts and built-in calls; the
rules for packs and tensor accesses come from packs.py."""

from __future__ import annotations

from collections.abc import Callable

from skriptnd.semantics.builtins import BUILTIN_FUNCTIONS, NUM_FUNCTIONS, REAL_FUNCTIONS
from skriptnd.semantics.scope import Ctx, Kind, Scope
from skriptnd.semantics.show import did_you_mean, show
from skriptnd.semantics.typecheck.common import _null_tests, _what
from skriptnd.semantics.typecheck.packs import PackTyping
from skriptnd.semantics.types import (
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
from skriptnd.syntax import ast

BUILTINS = BUILTIN_FUNCTIONS

ARITHMETIC = frozenset({"+", "-", "*", "**", "<?", ">?", "/", "\\"})
LOGICAL = frozenset({"&&", "||", "^", "=>"})
COMPARISON = frozenset({"<", "<=", ">", ">=", "==", "!="})


class ExprTyping(PackTyping):
    """Types of expressions; reports what breaks the rules of §2.4 and §2.4.1."""

    def type_of(self, expr: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        method = _DISPATCH.get(type(expr))
        t = method(self, expr, env, ctx) if method is not None else UNKNOWN
        self._types[id(expr)] = t
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

    # -- shared by @lower and @compose

    def _expect_int(self, expr: ast.Expr, env: Scope, ctx: Ctx, what: str, *, tensor_ok: bool = False) -> Type:
        t = self.type_of(expr, env, ctx)
        if t.tensor and not tensor_ok:
            return self._no_tensor(t, expr, ctx, "..()")
        if not t.unknown and (t.name != "int" or t.packed):
            self.report("E0301", f"{what} must be an int; {_what(expr)} is {t}", expr.span)
        return t


_DISPATCH: dict[type, Callable[[ExprTyping, ast.Expr, Scope, Ctx], Type]] = {  # type: ignore[dict-item]
    ast.IntLit: ExprTyping._int,
    ast.RealLit: ExprTyping._real,
    ast.NamedConst: ExprTyping._real,
    ast.BoolLit: ExprTyping._bool,
    ast.StrLit: ExprTyping._str,
    ast.Name: ExprTyping._name,
    ast.Property: ExprTyping._property,
    ast.Unary: ExprTyping._unary,
    ast.Binary: ExprTyping._binary,
    ast.Fold: ExprTyping._fold,
    ast.Select: ExprTyping._select,
    ast.Cast: ExprTyping._cast,
    ast.Call: ExprTyping._call,
    ast.Skip: ExprTyping._skip,
    ast.Expand: ExprTyping._expand,
    ast.Range: ExprTyping._range,
    ast.Zip: ExprTyping._zip,
    ast.ListExpr: ExprTyping._list,
    ast.Subscript: ExprTyping._subscript,
    ast.Bounded: ExprTyping._bounded,
    ast.TensorAccess: ExprTyping._access,
    ast.Substitute: ExprTyping._substitute,
}
