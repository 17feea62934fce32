"""The declaration table of one operator or graph definition (spec §2.2-§2.12).

`Scope` maps names to `Symbol`s; nested scopes (a @lower formula's index symbols, a loop's
carried variables, a block's intermediate tensors) chain to their parent. Every symbol ever
declared in the definition is also recorded, in declaration order, in the shared `table`.
`Lin` is the symbolic length of a pack, which the checker compares across expressions.

The table is filled by `semantics.declarations.ScopeBuilder` (the declaration rules of §2.6),
whose expressions are typed through the `ExprTyper` protocol declared here, so that neither this
module nor the builder imports typecheck (the checker imports them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from skriptnd.diagnostics import Note
from skriptnd.semantics.show import show
from skriptnd.semantics.types import Type
from skriptnd.source import Span
from skriptnd.syntax import ast


class Kind(StrEnum):
    DTYPE = "dtype"
    ATTRIBUTE = "attribute"
    INPUT = "input"
    OUTPUT = "output"
    CONSTANT = "constant"
    VARIABLE = "variable"
    USING = "using"
    SHAPE = "shape symbol"
    RANK = "rank symbol"
    PACK_LENGTH = "pack-length symbol"
    TENSOR = "intermediate tensor"
    LABEL = "label"
    LOOP_INDEX = "loop index"
    CARRIED = "loop-carried variable"
    SCAN = "scan item"
    INDEX = "index symbol"
    LOCAL = "loop-local value"


_ARTICLE = {Kind.ATTRIBUTE: "an", Kind.INPUT: "an", Kind.OUTPUT: "an", Kind.INDEX: "an",
            Kind.TENSOR: "an"}


def describe(kind: Kind) -> str:
    """'an attribute', 'a shape symbol', ... for messages."""
    if kind is Kind.USING:
        return "a @using symbol"
    return f"{_ARTICLE.get(kind, 'a')} {kind.value}"


#: Processing order of blocks (§2.2); later stages see the names of earlier ones.
STAGE = {"dtype": 0, "attrib": 1, "input": 2, "using": 3, "constant": 4, "variable": 5, "output": 6,
         "assert": 7, "lower": 7, "compose": 8, "update": 9, "quantize": 10}

PARAM_KIND = {"attrib": Kind.ATTRIBUTE, "input": Kind.INPUT, "output": Kind.OUTPUT,
              "constant": Kind.CONSTANT, "variable": Kind.VARIABLE}


# ---------------------------------------------------------------- symbolic lengths


@dataclass(frozen=True, slots=True)
class Lin:
    """A symbolic integer `const + sum(coef * key)`; keys name symbols (`d`), implicit pack
    lengths (`|s|`) or opaque sub-expressions (their canonical text). Two lengths with the same
    terms but different constants certainly differ; anything else may be equal."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def key(name: str, coef: int = 1) -> Lin:
        return Lin(0, ((name, coef),))

    def __add__(self, other: Lin) -> Lin:
        merged = dict(self.terms)
        for k, c in other.terms:
            merged[k] = merged.get(k, 0) + c
        return Lin(self.const + other.const, tuple(sorted((k, c) for k, c in merged.items() if c)))

    def scale(self, factor: int) -> Lin:
        if factor == 0:
            return Lin()
        return Lin(self.const * factor, tuple((k, c * factor) for k, c in self.terms))

    def __neg__(self) -> Lin:
        return self.scale(-1)

    def __sub__(self, other: Lin) -> Lin:
        return self + (-other)

    def __str__(self) -> str:
        parts: list[str] = []
        for k, c in self.terms:
            text = k if c == 1 else f"-{k}" if c == -1 else f"{c} * {k}"
            parts.append(text)
        if self.const or not parts:
            parts.append(str(self.const))
        out = parts[0]
        for p in parts[1:]:
            out += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        return out


def lin_value(expr: ast.Expr) -> Lin:
    """An int-valued expression as a Lin (sub-expressions that are not linear become keys)."""
    if isinstance(expr, ast.IntLit):
        return Lin(expr.value)
    if isinstance(expr, ast.Name):
        return Lin.key(expr.id)
    if isinstance(expr, ast.Unary) and expr.op in ("-", "+"):
        inner = lin_value(expr.operand)
        return -inner if expr.op == "-" else inner
    if isinstance(expr, ast.Binary) and expr.op in ("+", "-"):
        left, right = lin_value(expr.left), lin_value(expr.right)
        return left + right if expr.op == "+" else left - right
    if isinstance(expr, ast.Binary) and expr.op == "*":
        if isinstance(expr.left, ast.IntLit):
            return lin_value(expr.right).scale(expr.left.value)
        if isinstance(expr.right, ast.IntLit):
            return lin_value(expr.left).scale(expr.right.value)
    return Lin.key(show(expr))


# ---------------------------------------------------------------- symbols and scopes


@dataclass(eq=False, slots=True)
class Symbol:
    """One declared name."""

    name: str
    kind: Kind
    type: Type
    span: Span
    block: str  # the block keyword it was declared in: 'attrib', 'input', 'lower', ...
    length: Lin | None = None  # pack length, when known at declaration
    value: ast.Expr | None = None  # defining expression (@using symbols, loop-local values)
    env: Scope | None = None  # the scope `value` is read in
    rank: Lin | None = None  # tensors: statically countable rank of the declared shape
    base: str | None = None  # @dtype names: their abstract base type
    dynamic: bool = False  # an output shape symbol with an upper bound (§2.6.1, §2.12)
    decl: ast.Node | None = None
    cache: dict[str, object] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Symbol({self.name!r}, {self.kind.value}, {self.type}, @{self.block})"


@dataclass(frozen=True, slots=True)
class Forward:
    """A definition-level name, known before its block is processed (for E0208)."""

    block: str
    span: Span


class Scope:
    """Names visible at some point of a definition; child scopes shadow their parents."""

    __slots__ = ("parent", "names", "table", "forward", "generics")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Symbol] = {}
        self.table: list[Symbol] = parent.table if parent is not None else []
        self.forward: dict[str, Forward] = parent.forward if parent is not None else {}
        self.generics: dict[str, str] = parent.generics if parent is not None else {}

    def child(self) -> Scope:
        return Scope(self)

    def lookup(self, name: str) -> Symbol | None:
        scope: Scope | None = self
        while scope is not None:
            sym = scope.names.get(name)
            if sym is not None:
                return sym
            scope = scope.parent
        return None

    def local(self, name: str) -> Symbol | None:
        return self.names.get(name)

    def declare(self, sym: Symbol) -> Symbol | None:
        """Add sym; if the name is already declared in this scope, keep the first and return it."""
        previous = self.names.get(sym.name)
        self.table.append(sym)
        if previous is not None:
            return previous
        self.names[sym.name] = sym
        return None

    def visible(self) -> set[str]:
        names: set[str] = set()
        scope: Scope | None = self
        while scope is not None:
            names.update(scope.names)
            scope = scope.parent
        return names

    def symbols(self, *kinds: Kind) -> list[Symbol]:
        """Declared symbols (the whole definition's table), optionally of the given kinds."""
        return [s for s in self.table if not kinds or s.kind in kinds]

    def __contains__(self, name: str) -> bool:
        return self.lookup(name) is not None

    def __iter__(self) -> Iterator[Symbol]:
        return iter(self.table)

    def __repr__(self) -> str:
        return f"Scope({sorted(self.names)})"


@dataclass(frozen=True, slots=True)
class Ctx:
    """Where an expression is checked: its block, and names promoted to non-optional by a null
    test (`?x ? x : 0`, `if ?x then ...`)."""

    stage: str
    promoted: frozenset[str] = frozenset()
    bound: bool = False  # in the bound of a @lower index: an unknown name is not an index

    def promote(self, names: frozenset[str]) -> Ctx:
        return Ctx(self.stage, self.promoted | names, self.bound) if names else self


class ExprTyper(Protocol):
    """What the builder needs from the expression checker (typecheck.Checker)."""

    def type_of(self, expr: ast.Expr, env: Scope, ctx: Ctx) -> Type: ...

    def length_of(self, expr: ast.Expr, env: Scope) -> Lin | None: ...

    def report(self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (),
               hint: str | None = None) -> None: ...
