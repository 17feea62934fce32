"""Node handlers for literals, names, properties, operators, selects, folds, casts and calls.

They evaluate operands through `_eval` (walk.py), stop at a null operand (§2.4.1) and
leave the value-level work to operators.py, folds.py, casts.py and functions.py.
"""

from __future__ import annotations

import math
from typing import Any

from skriptnd.semantics.evaluate.casts import _DEFAULTS, _cast_to
from skriptnd.semantics.evaluate.errors import EvalError, Unbound, _OpError
from skriptnd.semantics.evaluate.folds import _FOLDS, _cumulative
from skriptnd.semantics.evaluate.formatting import format_value
from skriptnd.semantics.evaluate.functions import _BUILTINS
from skriptnd.semantics.evaluate.kinds import _item_type, _pack_item_type, _type_name
from skriptnd.semantics.evaluate.operators import _BINARY, _UNARY, _contains, _map1, _map2
from skriptnd.semantics.evaluate.walk import _Ctx, _eval, _raise_op
from skriptnd.semantics.values import NO_UNIFORM, Pack, TensorValue, Value, guards_suspended
from skriptnd.syntax import ast

# ---------------------------------------------------------------- literals and names


def _int_lit(node: ast.IntLit, ctx: _Ctx) -> int:
    return node.value


def _real_lit(node: ast.RealLit, ctx: _Ctx) -> float:
    return node.value


def _bool_lit(node: ast.BoolLit, ctx: _Ctx) -> bool:
    return node.value


def _named_const(node: ast.NamedConst, ctx: _Ctx) -> float:
    return math.inf if node.name == "inf" else math.pi  # §2.4: `inf` and `pi` are reals


def _str_lit(node: ast.StrLit, ctx: _Ctx) -> str | None:
    """A string, with its `{expr}` fields formatted (§2.4, string formatting)."""
    parts = node.parts
    if len(parts) == 1 and type(parts[0]) is str:
        return parts[0]
    out = []
    for part in parts:
        if type(part) is str:
            out.append(part)
            continue
        value = _eval(part.value, ctx)
        if value is None:
            return None  # §2.4.1: a null field makes the whole string null
        out.append(format_value(value))
    return "".join(out)


def _name(node: ast.Name, ctx: _Ctx) -> Value:
    try:
        value = ctx.env[node.id]
    except KeyError:
        raise Unbound(node.id, node.span) from None
    if type(value) is tuple or type(value) is list:
        return Pack(value)  # be lenient with callers that bind plain sequences
    return value


def _property(node: ast.Property, ctx: _Ctx) -> Value:
    """`x.shape`, `x.rank` (non-packed tensors) and `x.size` (packs), §2.4 implicit identifiers."""
    value = _eval(node.value, ctx)
    if value is None:
        return None
    name = node.name
    if name == "size":
        if isinstance(value, Pack):
            return len(value)
        raise EvalError("E0304", f"'.size' is defined for packs only, not for {_type_name(value)}", node.span)
    if isinstance(value, Pack):
        raise EvalError("E0304", f"'.{name}' is not defined for a tensor pack (items may differ in shape); "
                                 "index the pack first, as in 'x[0].shape'", node.span)
    if not isinstance(value, TensorValue):
        raise EvalError("E0302", f"'.{name}' is defined for tensors only, not for {_type_name(value)}", node.span)
    if name == "rank":
        return len(value.shape)
    if None in value.shape:
        raise EvalError("E0503", f"the shape of this tensor is dynamic ({format_value(value)}), "
                                 "not a compile-time value", node.span)
    return Pack(value.shape)


# ---------------------------------------------------------------- operators


def _unary(node: ast.Unary, ctx: _Ctx) -> Value:
    value = _eval(node.operand, ctx)
    op = node.op
    if op == "?":
        return value is not None  # §2.4 null testing: never null, one bool even for a pack
    if value is None:
        return None  # §2.4.1
    try:
        return _map1(_UNARY[op], value)
    except _OpError as e:
        _raise_op(e, node)


_SHORT_CIRCUIT = {"&&": False, "||": True, "=>": False}  # left value that decides the result


def _binary(node: ast.Binary, ctx: _Ctx) -> Value:
    op = node.op
    if op == "??":
        # §2.4 null coalescing: the right side only matters (and is only evaluated) for a null left.
        left = _eval(node.left, ctx)
        return left if left is not None else _eval(node.right, ctx)
    left = _eval(node.left, ctx)
    if left is None:
        return None  # §2.4.1
    decider = _SHORT_CIRCUIT.get(op)
    if decider is not None and left is decider:
        return _decided(node, ctx, left)
    right = _eval(node.right, ctx)
    if right is None:
        return None
    try:
        if op == "in":
            return _contains(left, right)
        fn = _BINARY.get(op)
        if fn is None:
            raise _OpError("E0502", f"unknown binary operator '{op}'")
        return _map2(fn, left, right)
    except _OpError as e:
        _raise_op(e, node, node.left, node.right)


def _decided(node: ast.Binary, ctx: _Ctx, left: bool) -> Value:
    """`false && x`, `true || x`, `false => x`: the result does not depend on x.

    x is still evaluated so that a pack x gives a pack result of its length, but its errors
    and nullness are ignored: a guarded condition like `n != 0 => m % n == 0` must not fail.
    """
    result = node.op != "&&"
    with guards_suspended():  # decisions about x do not condition the result
        try:
            right = _eval(node.right, ctx)
        except Unbound:
            raise
        except EvalError:
            return result
        if right is None:
            return result
        try:
            return _map2(_BINARY[node.op], left, right)
        except _OpError as e:
            _raise_op(e, node, node.left, node.right)


def _select(node: ast.Select, ctx: _Ctx) -> Value:
    """`c ? a : b` and `c ? a` (§2.4, select operator)."""
    cond = _eval(node.cond, ctx)
    if cond is None:
        return None
    if not isinstance(cond, Pack):
        if type(cond) is not bool:
            raise EvalError("E0302", f"the condition of '?' must be bool, got {_type_name(cond)}", node.cond.span)
        # Only the chosen branch is evaluated: the other one may well be meaningless here.
        if cond:
            return _eval(node.then, ctx)
        return _eval(node.orelse, ctx) if node.orelse is not None else None
    for c in cond:
        if type(c) is not bool:
            raise EvalError("E0302", f"the condition of '?' must be bool, got {_type_name(cond)}", node.cond.span)
    # A branch no item selects is not evaluated either (as with a non-pack condition): reshape's
    # `shape is -1 ? input_volume / shape_volume : shape` must not divide by a zero volume when
    # shape has no -1. For an empty condition, only the branch its uniform value picks is needed.
    cu = cond.uniform
    need_then = any(cond) or cu is True
    need_else = not all(cond) or cu is False
    n = len(cond)
    if node.orelse is None:
        # Element-wise `c ? a` with some false item would hold null items; a pack is null or not as a whole.
        if need_else:
            return None
        then = _eval(node.then, ctx) if need_then else Pack()
        if then is None:
            return None
        if isinstance(then, Pack):
            if len(then) != n:
                raise EvalError("E0502", f"pack lengths differ: {n} (condition) vs {len(then)}", node.then.span)
            return then
        return Pack([then] * n, then)
    then = _eval(node.then, ctx) if need_then else _UNUSED
    if then is None:
        return None
    orelse = _eval(node.orelse, ctx) if need_else else _UNUSED
    if orelse is None:
        return None
    for branch, sub in ((then, node.then), (orelse, node.orelse)):
        if isinstance(branch, Pack) and len(branch) != n:
            raise EvalError("E0502", f"pack lengths differ: {n} (condition) vs {len(branch)}", sub.span)
    if need_then and need_else:
        t_type = _pack_item_type(then) if isinstance(then, Pack) else _item_type(then)
        e_type = _pack_item_type(orelse) if isinstance(orelse, Pack) else _item_type(orelse)
        if t_type is not None and e_type is not None and t_type != e_type:
            raise EvalError("E0301", f"the branches of '?' differ in type: {_type_name(then)} and "
                                     f"{_type_name(orelse)}", node.span)
    tp, ep = isinstance(then, Pack), isinstance(orelse, Pack)
    items = [(then[i] if tp else then) if c else (orelse[i] if ep else orelse) for i, c in enumerate(cond)]
    uniform = NO_UNIFORM
    if cu is not NO_UNIFORM:
        chosen = then if cu else orelse
        uniform = chosen.uniform if isinstance(chosen, Pack) else chosen
    return Pack(items, uniform)


_UNUSED: Any = object()  # a select branch that no item picks


# ---------------------------------------------------------------- folds (§2.4, folding)


def _fold(node: ast.Fold, ctx: _Ctx) -> Value:
    value = _eval(node.operand, ctx)
    if value is None:
        return None
    op = node.op
    if op == ":=":
        # The uniform value, or null; a non-pack is its own uniform value.
        if isinstance(value, Pack):
            return None if value.uniform is NO_UNIFORM else value.uniform
        return value
    if not isinstance(value, Pack):
        raise EvalError("E0304", f"'{op} {'...' if node.cumulative else '..'}' folds a pack, "
                                 f"got {_type_name(value)}", node.operand.span)
    try:
        if node.cumulative:
            return _cumulative(op, value)
        fold = _FOLDS.get(op)
        if fold is None:
            raise _OpError("E0302", f"'{op}' cannot fold a pack")
        return fold(op, value)
    except _OpError as e:
        _raise_op(e, node, node.operand)


# ---------------------------------------------------------------- casts and built-in functions


def _cast(node: ast.Cast, ctx: _Ctx) -> Value:
    return _do_cast(node.type, node.arg, node, ctx)


def _do_cast(type_name: str, arg: ast.Expr | None, node: ast.Expr, ctx: _Ctx) -> Value:
    if arg is None:
        try:
            return _DEFAULTS[type_name]  # §2.4: `int()` is 0, `real()` 0.0, `bool()` false, `str()` ""
        except KeyError:
            raise EvalError("E0305", f"'{type_name}' has no default value", node.span) from None
    fn = _cast_to(type_name, node.span)
    value = _eval(arg, ctx)
    if value is None:
        return None
    try:
        return _map1(fn, value)
    except _OpError as e:
        _raise_op(e, node)


def _call(node: ast.Call, ctx: _Ctx) -> Value:
    """A built-in function, a generic cast `T(x)` / default `T()`; anything else is an invocation."""
    callee = node.callee
    plain = not node.type_args and not node.attrs and node.label is None
    if plain and callee in ctx.dtypes:
        concrete = ctx.dtypes[callee]
        if concrete not in _DEFAULTS:
            raise EvalError("E0306", f"generic type '{callee}' is bound to '{concrete}', not to a concrete type",
                            node.span)
        if len(node.args) > 1:
            raise EvalError("E0502", f"a cast '{callee}(x)' takes one argument, got {len(node.args)}", node.span)
        return _do_cast(concrete, node.args[0] if node.args else None, node, ctx)
    fn = _BUILTINS.get(callee) if plain else None
    if fn is None:
        raise EvalError("E0503", f"operator invocations are not compile-time expressions ('{callee}' "
                                 "is not a built-in function or a generic type here)", node.span)
    if len(node.args) != 1:
        raise EvalError("E0502", f"built-in function '{callee}' takes exactly one argument, got {len(node.args)}",
                        node.span)
    value = _eval(node.args[0], ctx)
    if value is None:
        return None
    try:
        return _map1(fn, value)
    except _OpError as e:
        _raise_op(e, node)
