"""Folds of packs, `x + ..` and cumulative `x + ...` (§2.4, folding), over values."""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

from skriptnd.semantics.evaluate.errors import _OpError
from skriptnd.semantics.evaluate.kinds import _NUM
from skriptnd.semantics.evaluate.operators import _BINARY, _bad_operands
from skriptnd.semantics.values import NO_UNIFORM, Pack, Value


def _check_items(op: str, items: Pack) -> None:
    """A fold of one item never applies its operator: apply it to the item itself to type-check it."""
    if items:
        _BINARY[op](items[0], items[0])


def _fold_arith(op: str, items: Pack) -> Value:
    """`x + ..` / `x * ..`: the empty sum is 0, the empty product 1, typed by the uniform value."""
    if not items:
        unit = 0 if op == "+" else 1
        u = items.uniform
        if u is NO_UNIFORM:
            return unit
        if type(u) is float:
            return float(unit)
        if type(u) is int:
            return unit
        raise _bad_operands(op, u, u, _NUM)
    return _left_fold(op, items)


def _fold_logic(op: str, items: Pack) -> bool:
    """`x && ..` (empty: true) and `x || ..` (empty: false)."""
    for x in items:
        if type(x) is not bool:
            raise _bad_operands(op, x, x, ("bool",))
    return all(items) if op == "&&" else any(items)


def _fold_chain(op: str, items: Pack) -> bool:
    """`< <= > >= ==` hold between consecutive items (sorted / uniform); empty packs pass."""
    fn = _BINARY[op]
    if len(items) == 1:
        _check_items(op, items)
    ok = True
    for a, b in zip(items, items[1:], strict=False):
        if not fn(a, b):
            ok = False  # keep going: a later item of the wrong type is still an error
    return ok


def _fold_distinct(op: str, items: Pack) -> bool:
    """`x != ..`: all items differ from each other (all-to-all); an empty pack is unique."""
    if not items:
        return True
    fn = _BINARY["!="]
    first = items[0]
    for x in items:
        fn(first, x)  # type check only
    plain = [x for x in items if not (type(x) is float and x != x)]  # nan differs from everything
    return len(set(plain)) == len(plain)


def _fold_minmax(op: str, items: Pack) -> Value:
    """`x <? ..` / `x >? ..`: no neutral element, so an empty pack is an error."""
    if not items:
        raise _OpError("E0502", f"'{op} ..' of an empty pack (minimum and maximum need at least one item)")
    return _left_fold(op, items)


def _left_fold(op: str, items: Pack) -> Value:
    """``((items[0] op items[1]) op items[2]) ...`` over a non-empty pack whose items suit ``op``."""
    _check_items(op, items)
    fn = _BINARY[op]
    result = items[0]
    for x in items[1:]:
        result = fn(result, x)
    return result


_FOLDS: dict[str, Callable[[str, Pack], Value]] = {
    "+": _fold_arith,
    "*": _fold_arith,
    "&&": _fold_logic,
    "||": _fold_logic,
    "<": _fold_chain,
    "<=": _fold_chain,
    ">": _fold_chain,
    ">=": _fold_chain,
    "==": _fold_chain,
    "!=": _fold_distinct,
    "<?": _fold_minmax,
    ">?": _fold_minmax,
}
_CUMULATIVE = frozenset({"+", "*", "&&", "||", "<?", ">?"})
_IDEMPOTENT = {"&&", "||", "<?", ">?"}


def _cumulative(op: str, items: Pack) -> Pack:
    """`x @ ...`: the inclusive prefix results (§2.4, cumulative folding); empty maps to empty."""
    if op not in _CUMULATIVE:
        raise _OpError("E0302", f"'{op} ...' is not a cumulative fold; cumulative folds are + * && || <? >?")
    if items:
        _check_items(op, items)
    result = list(accumulate(items, _BINARY[op]))
    # The prefixes of a uniform pack under an idempotent operator are that same value.
    if op in _IDEMPOTENT and items.uniform is not NO_UNIFORM:
        return Pack(result, items.uniform)
    return Pack(result)
