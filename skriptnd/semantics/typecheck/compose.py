"""Checks of @compose and @update statements (§2.10, §2.11): assignments and their targets,
invocations, blocks, 'if' and loops, and how many results each right-hand side produces."""

from __future__ import annotations

from collections.abc import Iterable

from skriptnd.diagnostics import Note
from skriptnd.semantics.scope import Ctx, Kind, Scope, Symbol, describe
from skriptnd.semantics.show import did_you_mean
from skriptnd.semantics.typecheck.common import _null_tests, _plural, _Results, _what
from skriptnd.semantics.typecheck.expressions import ExprTyping
from skriptnd.semantics.types import CONCRETE, INT, UNKNOWN, Type, same_name
from skriptnd.source import Span
from skriptnd.syntax import ast


class ComposeChecks(ExprTyping):
    """The checks of @compose and @update blocks."""

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
