"""What every layer of the checker shares: its state and reporting, name resolution, the
handling of tensor operands and type mismatches, and small helpers for messages.

The checker is one class, `Checker` (checker.py), assembled from layers that each add one
concern: lengths.py, packs.py, expressions.py, then lower.py and compose.py. Expression
typing and @compose recurse into each other (an invocation inside an expression, an
expression inside a statement), so `CheckerBase` declares the two entry points later
layers implement, `type_of` and `_invocation`, and any layer may call them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from skriptnd.diagnostics import Diagnostic, Note
from skriptnd.semantics.declarations import ScopeBuilder
from skriptnd.semantics.scope import STAGE, Ctx, Scope, Symbol
from skriptnd.semantics.show import did_you_mean, show
from skriptnd.semantics.signature import same_type_operator
from skriptnd.semantics.types import UNKNOWN, Type, same_name
from skriptnd.source import Span
from skriptnd.syntax import ast

Lookup = Callable[[str], "ast.Definition | None"]


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


class CheckerBase(ABC):
    """The checker's state and reporting, and the helpers every layer uses."""

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

    # ------------------------------------------------------------ implemented by later layers

    @abstractmethod
    def type_of(self, expr: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        """The type of expr (expressions.py), recorded for `_cached`."""

    @abstractmethod
    def _invocation(self, call: ast.Call, env: Scope, ctx: Ctx) -> _Results:
        """Checks an operator invocation in @compose or @update (compose.py)."""

    # ------------------------------------------------------------ shared helpers

    def _cached(self, expr: ast.Expr, env: Scope) -> Type:
        t = self._types.get(id(expr))
        if t is None:
            self._quiet += 1
            try:
                t = self.type_of(expr, env, Ctx("lower"))
            finally:
                self._quiet -= 1
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

    def _same(self, lt: Type, rt: Type, e: ast.Binary | ast.Node, env: Scope, message: str) -> bool:
        if same_name(lt.name, rt.name):
            return True
        if {lt.name, rt.name} == {"X", "Y"} and same_type_operator(self.defn):
            return True  # binding makes X and Y equal or int and real, compared as numbers (erratum L2)
        hint = None
        if {lt.name, rt.name} == {"int", "real"}:
            hint = "convert one side, e.g. 'real(n)' or 'int(x)' (there are no implicit conversions)"
        self.report("E0301", message.format(self._describe(lt, env), self._describe(rt, env)), e.span, hint=hint)
        return False
