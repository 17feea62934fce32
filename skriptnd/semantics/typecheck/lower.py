"""Checks of @lower formulas (§2.12): index bounds, locals, the assigned output and the
type of the value, and at most one initialization and one update per output."""

from __future__ import annotations

from skriptnd.diagnostics import Note, register_codes
from skriptnd.semantics.scope import Ctx, Kind, Scope, Symbol, describe
from skriptnd.semantics.show import show
from skriptnd.semantics.typecheck.common import _what
from skriptnd.semantics.typecheck.expressions import ExprTyping
from skriptnd.semantics.types import INT, UNKNOWN, Type, is_numeric, same_name
from skriptnd.syntax import ast

register_codes({
    "E0606": "conflicting @lower formulas for one output",
    "E0607": "update formula without initialization",
})

ACCUMULATE = {"+=": "numeric", "*=": "numeric", "<?=": "numeric", ">?=": "numeric", "&=": "bool", "|=": "bool"}


class LowerChecks(ExprTyping):
    """The checks of @lower blocks."""

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
