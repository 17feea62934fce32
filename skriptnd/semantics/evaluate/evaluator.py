"""`evaluate`, the evaluator's entry point, and the table of node handlers it dispatches to."""

from __future__ import annotations

from collections.abc import Mapping

from skriptnd.semantics.evaluate.errors import EvalError
from skriptnd.semantics.evaluate.expressions import (
    _binary,
    _bool_lit,
    _call,
    _cast,
    _fold,
    _int_lit,
    _name,
    _named_const,
    _property,
    _real_lit,
    _select,
    _str_lit,
    _unary,
)
from skriptnd.semantics.evaluate.lists import _list, _misplaced, _subscript, _substitute
from skriptnd.semantics.evaluate.walk import _DISPATCH, _Ctx, _eval, _not_compile_time
from skriptnd.semantics.values import Value
from skriptnd.syntax import ast


def evaluate(expr: ast.Expr, env: Mapping[str, Value], dtypes: Mapping[str, str] | None = None) -> Value:
    """The value of expr, with identifiers looked up in env and generic types in dtypes.

    env maps identifiers to values (a tensor to a TensorValue, a tensor pack to a Pack of
    them; None is null); dtypes maps generic type names (T) to `int`, `real`, `bool` or `str`
    for `T(x)` and `T()`. Raises Unbound for an identifier missing from env, EvalError for
    anything else that goes wrong.
    """
    try:
        return _eval(expr, _Ctx(env, dtypes if dtypes is not None else {}))
    except RecursionError:
        raise EvalError("E0502", "expression nested too deeply to evaluate", expr.span) from None


_DISPATCH.update({
    ast.IntLit: _int_lit,
    ast.RealLit: _real_lit,
    ast.BoolLit: _bool_lit,
    ast.NamedConst: _named_const,
    ast.StrLit: _str_lit,
    ast.Name: _name,
    ast.Property: _property,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Fold: _fold,
    ast.Select: _select,
    ast.Cast: _cast,
    ast.Call: _call,
    ast.ListExpr: _list,
    ast.Subscript: _subscript,
    ast.Substitute: _substitute,
    ast.Expand: _misplaced,
    ast.Range: _misplaced,
    ast.Zip: _misplaced,
    ast.TensorAccess: _not_compile_time,
    ast.Bounded: _not_compile_time,
    ast.Skip: _not_compile_time,
    ast.BlockExpr: _not_compile_time,
    ast.IfExpr: _not_compile_time,
    ast.LoopExpr: _not_compile_time,
})
