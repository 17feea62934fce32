"""Compile-time values (spec §2.3-§2.4).

int, real, bool and str are Python int, float, bool and str; null is None. A pack is a
`Pack`, a tuple that also remembers its *uniform value* when one is known by construction
(`[x ..(n)]` is uniform even when n is 0, which a plain tuple could not tell). A tensor seen
at compile time is a `TensorValue`: its dtype and concrete shape (extents may be None when
dynamic).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from sympy.logic.boolalg import Boolean

#: Guards recorded by symbolic extents (semantics.symbolic): a stack of lists, one per active
#: recording; a None entry suspends recording (for evaluations whose outcome is ignored).
GUARD_STACK: list[list[Boolean] | None] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Boolean]]:
    """Collect the guards of the symbolic decisions taken inside the block (semantics.symbolic;
    kept here, beside GUARD_STACK, so that checking a program without symbolic extents never
    imports sympy)."""
    guards: list[Boolean] = []
    GUARD_STACK.append(guards)
    try:
        yield guards
    finally:
        GUARD_STACK.pop()


@contextlib.contextmanager
def guards_suspended() -> Iterator[None]:
    GUARD_STACK.append(None)
    try:
        yield
    finally:
        GUARD_STACK.pop()


class _NoUniform:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_UNIFORM"

    def __reduce__(self) -> str:
        return "NO_UNIFORM"


NO_UNIFORM: _NoUniform = _NoUniform()


class Pack(tuple):
    """A pack of compile-time values; `uniform` is its uniform value or NO_UNIFORM.

    Equality is that of tuples; the uniform value only matters to the `:=` fold.
    """

    uniform: Value | _NoUniform

    def __new__(cls, items: Iterable[Value] = (), uniform: Value | _NoUniform = NO_UNIFORM) -> Pack:
        pack = super().__new__(cls, items)
        if uniform is NO_UNIFORM and len(pack) > 0:
            first = pack[0]
            if all(same_value(first, item) for item in pack[1:]):
                uniform = first
        pack.uniform = uniform
        return pack

    def __repr__(self) -> str:
        inner = ", ".join(repr(x) for x in self)
        if len(self) == 0 and self.uniform is not NO_UNIFORM:
            return f"Pack([], uniform={self.uniform!r})"
        return f"Pack([{inner}])"


def same_value(a: Value | _NoUniform, b: Value | _NoUniform) -> bool:
    """Equal and of the same type (1 is not 1.0 nor true); symbolic extents compare expressions."""
    if type(a) is not type(b):
        return False
    expr = getattr(a, "expr", None)
    if expr is not None:  # symbolic extents: compare expressions without recording a guard
        return bool(expr == b.expr)
    return a == b


@dataclass(frozen=True, slots=True)
class TensorValue:
    """A tensor as compile-time expressions see it: `.shape` and `.rank` are known."""

    dtype: str
    shape: tuple[int | None, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


#: A compile-time value (§2.3): int (a symbolic extent, semantics.symbolic.SymInt, is an int),
#: real, bool, str, null, a pack of values, or a tensor as compile-time expressions see it. The
#: evaluator computes these, binding stores them by name; the checker's static types
#: (semantics.types) describe them.
Value: TypeAlias = int | float | bool | str | Pack | TensorValue | None


def is_pack(value: Value) -> bool:
    return isinstance(value, Pack)
