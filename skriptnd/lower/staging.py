"""The core of staged evaluation (spec §2.12): what every formula of a plan shares, and the stager's state.

:class:`StagerCore` holds one formula instance's index space, scope and reasons, evaluates compile-time
sub-expressions through the exact compile-time evaluator (:func:`skriptnd.semantics.evaluate.evaluate`) and
lifts functions of concrete items into `Dyn` closures when an argument depends on tensor data. The
evaluation of each kind of node (:mod:`.stage`) and the tensor accesses (:mod:`.access`) build on it, in
that order: ``Stager(AccessStager(StagerCore))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skriptnd.lower import ops
from skriptnd.lower.values import (
    Aff,
    Arr,
    BIdx,
    Concrete,
    Counter,
    Dyn,
    LoweringError,
    Runtime,
    Space,
    Staged,
    TRef,
    TStack,
)
from skriptnd.semantics.evaluate import EvalError, Unbound, evaluate, free_names
from skriptnd.source import Span
from skriptnd.syntax import ast

_SCALAR = (int, float, bool, str)


class PackedDim:
    """An index item that is a pack (not expanded): the access yields one value per item."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Staged, ...]) -> None:
        self.items = items


def is_item(v: Staged) -> bool:
    """A runtime-capable single value (not a pack, bounded index or tensor)."""
    return isinstance(v, (*_SCALAR, Aff, Arr, Dyn)) or v is None


class Shared:
    """What all formulas of one plan share: the binding, the tensors and the static cache."""

    def __init__(self, env: dict[str, Any], dtypes: dict[str, str], tensors: dict[str, Any],
                 counters: set[str]) -> None:
        self.env = env
        self.dtypes = dtypes
        self.tensors = tensors  # name -> TRef | tuple[TRef, ...] | None (an omitted input)
        self.counters = counters
        self.static_cache: dict[int, tuple[ast.Node, Any]] = {}
        self.pack_arrays: dict[int, tuple[Any, np.ndarray]] = {}


class StagerCore:
    """The state of one formula instance staged over `space`, and the helpers every evaluation uses."""

    def __init__(self, shared: Shared, space: Space, scope: dict[str, Any], span: Span, *,
                 varying_tensors: frozenset[str] = frozenset(), pad_node: ast.Node | None = None,
                 pad_op: str = "+=") -> None:
        self.shared = shared
        self.space = space
        self.scope = dict(scope)
        self.span = span
        self.varying_tensors = varying_tensors
        self.pad_node = pad_node
        self.pad_op = pad_op
        self.reasons: list[str] = []
        self._static: dict[int, bool] = {}
        self.lhs = False

    # ------------------------------------------------------------ errors and helpers

    def error(self, message: str) -> LoweringError:
        return LoweringError(message, self.span)

    def reason(self, text: str) -> None:
        if text not in self.reasons:
            self.reasons.append(text)

    def is_static(self, node: ast.Node) -> bool:
        key = id(node)
        hit = self._static.get(key)
        if hit is None:
            hit = not any(isinstance(n, ast.TensorAccess | ast.Bounded) for n in node.walk()) and not (
                free_names(node) & self.scope.keys())
            self._static[key] = hit
        return hit

    def static_value(self, node: ast.Expr) -> Staged:
        cache = self.shared.static_cache
        hit = cache.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        try:
            value = evaluate(node, self.shared.env, self.shared.dtypes)
        except Unbound as err:
            if self.lhs and err.name in self.shared.counters and isinstance(node, ast.Name):
                return Counter(err.name)
            raise self.error(f"unknown identifier '{err.name}' in @lower") from None
        except EvalError as err:
            raise LoweringError(err.message, self.span) from None
        cache[id(node)] = (node, value)
        return value

    def lift(self, fn: Callable[..., Concrete], *args: Staged) -> Staged:
        """fn on concrete items now, or a Dyn computing it on each run."""
        for a in args:
            if not is_item(a):
                raise self.error(self._misuse(a))
        if not any(isinstance(a, Dyn) for a in args):
            try:
                return fn(*args)
            except LoweringError as err:
                raise LoweringError(err.message, self.span) from None
        conc = [ops.conc(a) for a in args]
        varying = False
        for a in conc:
            if isinstance(a, Dyn):
                a.uses += 1
                varying = varying or a.varying
        if len(conc) == 1:
            (x,) = conc

            def run1(rt: Runtime) -> Concrete:
                return fn(x.get(rt))

            return Dyn(run1, varying)
        if len(conc) == 2:
            x, y = conc
            xd, yd = isinstance(x, Dyn), isinstance(y, Dyn)

            def run2(rt: Runtime) -> Concrete:
                return fn(x.get(rt) if xd else x, y.get(rt) if yd else y)

            return Dyn(run2, varying)

        def run(rt: Runtime) -> Concrete:
            return fn(*[a.get(rt) if isinstance(a, Dyn) else a for a in conc])

        return Dyn(run, varying)

    @staticmethod
    def _misuse(v: Staged) -> str:
        if isinstance(v, BIdx):
            return "a bounded index '|...|' can only be used directly as a tensor index"
        if isinstance(v, tuple):
            return "a pack cannot be used here (expand it with '..' or index it)"
        if isinstance(v, TRef | TStack):
            return "a tensor must be accessed with indices, as in 'x[i, j]'"
        if isinstance(v, Counter):
            return f"the output extent symbol '{v.name}' can only be used as an index of the output"
        return f"unexpected value {v!r}"

    # ------------------------------------------------------------ provided by the evaluation (stage.py)

    def ev(self, node: ast.Expr) -> Staged:
        """The staged value of ``node`` (:meth:`skriptnd.lower.stage.Stager.ev`)."""
        raise NotImplementedError

    def expand(self, node: ast.Expand) -> tuple[Staged, ...] | None:
        raise NotImplementedError

    def subscript(self, base: Staged, index: Staged) -> Staged:
        raise NotImplementedError
