"""The tree walk every node handler recurses through: `_eval` dispatches on the node type.

The handlers live in expressions.py and lists.py and recurse through `_eval`; evaluator.py,
which imports them all, fills `_DISPATCH`. So handler modules depend on this one only,
and no module imports its own caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from skriptnd.semantics.evaluate.errors import EvalError, _OpError
from skriptnd.semantics.values import Value
from skriptnd.syntax import ast


class _Ctx:
    """What every handler reads: identifier values and the concrete types of generic names."""

    __slots__ = ("env", "dtypes")

    def __init__(self, env: Mapping[str, Value], dtypes: Mapping[str, str]) -> None:
        self.env = env
        self.dtypes = dtypes


#: Node type -> handler; filled by evaluator.py (the handlers import `_eval` from here). Each
#: handler takes its own node class, which a dict keyed by type cannot express: hence Any.
_DISPATCH: dict[type, Callable[[Any, _Ctx], Value]] = {}


def _eval(node: ast.Expr, ctx: _Ctx) -> Value:
    try:
        method = _DISPATCH[type(node)]
    except KeyError:
        raise EvalError("E0503", f"{_describe(node)} is not a compile-time expression", node.span) from None
    return method(node, ctx)


def _describe(node: ast.Node) -> str:
    return {
        ast.TensorAccess: "a tensor access",
        ast.Bounded: "a bounded index '|i|'",
        ast.Skip: "an omitted argument '~'",
        ast.BlockExpr: "a block",
        ast.IfExpr: "an 'if' expression",
        ast.LoopExpr: "a loop",
    }.get(type(node), f"a {type(node).__name__}")


def _raise_op(err: _OpError, node: ast.Node, left: ast.Node | None = None, right: ast.Node | None = None) -> NoReturn:
    """Turn an _OpError into an EvalError located at the operand it blames, else at node."""
    span = node.span
    if err.side == "left" and left is not None:
        span = left.span
    elif err.side == "right" and right is not None:
        span = right.span
    raise EvalError(err.code, err.message, span) from None


def _not_compile_time(node: ast.Expr, ctx: _Ctx) -> NoReturn:
    raise EvalError("E0503", f"{_describe(node)} is not a compile-time expression", node.span)
