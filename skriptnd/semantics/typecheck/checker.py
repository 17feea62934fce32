"""`check_definition` and the `Checker` it runs over the blocks of one definition."""

from __future__ import annotations

from skriptnd.diagnostics import Diagnostic
from skriptnd.semantics.declarations import blocks_of
from skriptnd.semantics.scope import Ctx, Kind, Scope, describe
from skriptnd.semantics.show import did_you_mean
from skriptnd.semantics.typecheck.common import Lookup, _what
from skriptnd.semantics.typecheck.compose import ComposeChecks
from skriptnd.semantics.typecheck.lower import LowerChecks
from skriptnd.syntax import ast

TENSOR_KINDS = frozenset({Kind.INPUT, Kind.OUTPUT, Kind.CONSTANT, Kind.VARIABLE, Kind.TENSOR, Kind.CARRIED,
                          Kind.SCAN, Kind.LOOP_INDEX})


def check_definition(defn: ast.Definition, lookup: Lookup, module_name: str) -> list[Diagnostic]:
    """All diagnostics of one definition, in source order. `lookup` resolves an invoked operator
    name as written (`nn.conv`, `add`) to its definition, or None when unknown (unknown
    operators are reported elsewhere; their results just have unknown types here)."""
    checker = Checker(defn, lookup, module_name)
    checker.run()
    return checker.diagnostics()


def build_scope(defn: ast.Definition, lookup: Lookup | None = None, module_name: str = "") -> Scope:
    """The complete declaration table of a definition (runs the checker; diagnostics dropped).
    It lives here, above scope.py, so that scope never imports the checker that builds on it."""
    checker = Checker(defn, lookup or (lambda _name: None), module_name)
    checker.run()
    return checker.root


class Checker(LowerChecks, ComposeChecks):
    """Checks one definition. `run()` builds the declaration table (see scope.ScopeBuilder) and
    then checks @assert, @lower, @compose, @update and @quantize."""

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
