"""Exact compile-time evaluation of expressions over concrete values (spec §2.3-§2.5).

Graph composition evaluates attribute defaults, @using symbols, @assert conditions and
output shapes for every operator invocation, so this module is a plain tree walk over
Python values (see values.py): a dict dispatches on the node type, and no symbolic
machinery is involved. Values: int, float (real), bool, str, None (null), `Pack` and
`TensorValue`.

Errors are raised as `EvalError` carrying the span of the offending sub-expression; an
identifier without a value raises `Unbound`, which callers use to tell "not evaluable yet"
(§2.9) from a genuine error.

Evaluation order and laziness: operands are evaluated left to right and evaluation stops
at the first null operand (null propagation, §2.4.1). `??`, the select operator with a
non-pack condition, and `&&`/`||`/`=>` whose non-pack left operand decides the result
do not let errors of the unneeded operand escape (so `b != 0 => a % b == 0` is safe).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any, NoReturn

from .. import ast
from ..diagnostics import Diagnostic
from ..source import Span
from .builtins import BUILTIN_FUNCTIONS
from .values import NO_UNIFORM, Pack, TensorValue, guards_suspended, same_value

__all__ = ["MAX_PACK_LENGTH", "EvalError", "Unbound", "evaluate", "format_value", "free_names"]

#: Longest pack a repetition or a range may build: a typo like `[0 ..(10 ** 12)]` must end in
#: an error, not in exhausting memory.
MAX_PACK_LENGTH = 1 << 24
#: Largest int power computed exactly (in result bits); beyond that the model is surely wrong.
_MAX_POW_BITS = 1 << 20


class EvalError(Exception):
    """A located evaluation error; `to_diagnostic()` turns it into a `Diagnostic`."""

    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__(code, message, span, hint)
        self.code = code
        self.message = message
        self.span = span
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.span}: [{self.code}] {self.message}"

    def to_diagnostic(self) -> Diagnostic:
        return Diagnostic(self.code, self.message, self.span, hint=self.hint)


class Unbound(EvalError):
    """An identifier has no value in the environment (yet): the expression is not evaluable."""

    def __init__(self, name: str, span: Span) -> None:
        super().__init__("E0201", f"unknown identifier '{name}'", span)
        self.args = (name, span)
        self.name = name


class _OpError(Exception):
    """An error inside a value-level operation; the caller attaches the span (side picks the operand)."""

    __slots__ = ("code", "message", "side")

    def __init__(self, code: str, message: str, side: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.side = code, message, side


# ============================================================================================
# Types of values
# ============================================================================================

_KINDS: dict[type, str] = {bool: "bool", int: "int", float: "real", str: "str", TensorValue: "tensor", Pack: "pack"}
_NUM = ("int", "real")
_ORDERED = ("int", "real", "bool", "str")


def _kind(v: Any) -> str:
    """'int', 'real', 'bool', 'str', 'tensor' or 'pack' (bool before int: Python's bool is an int)."""
    k = _KINDS.get(type(v))
    if k is not None:
        return k
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "real"
    if isinstance(v, str):
        return "str"
    if isinstance(v, Pack):
        return "pack"
    if isinstance(v, TensorValue):
        return "tensor"
    return type(v).__name__


def type_name_of(v: Any) -> str:
    """The SkriptND type of a non-pack value: int, real, bool, str, or a tensor's dtype."""
    k = _kind(v)
    return v.dtype if k == "tensor" else k


def _item_type(v: Any) -> str | None:
    """The type name of a non-pack value, with the dtype of a tensor (lists check with this)."""
    k = _kind(v)
    if k == "tensor":
        return f"tensor<{v.dtype}>"
    return k


def _pack_item_type(p: Pack) -> str | None:
    """The item type of a pack: from its first item, else its uniform value, else unknown."""
    if len(p):
        return _item_type(p[0])
    if p.uniform is not NO_UNIFORM:
        return _item_type(p.uniform)
    return None


def _type_name(v: Any) -> str:
    """A type as the spec writes it, for messages: `int`, `real..`, `tensor<real>`."""
    if v is None:
        return "null"
    if isinstance(v, Pack):
        item = _pack_item_type(v)
        return f"{item}.." if item is not None else "pack"
    return _item_type(v) or type(v).__name__


# ============================================================================================
# Value-level operations (spec §2.4, "Unary and binary operators")
# ============================================================================================


def _bad_operands(op: str, a: Any, b: Any, allowed: tuple[str, ...]) -> _OpError:
    """The error for operands that are not both of one allowed type."""
    ka, kb = _kind(a), _kind(b)
    if ka == "tensor" or kb == "tensor":
        # A tensor in arithmetic is a tensor expression (@lower, @compose), never compile-time.
        return _OpError("E0503", f"operator '{op}' on a tensor ({_type_name(a)} {op} {_type_name(b)}) "
                                 "is not a compile-time expression", "left" if ka == "tensor" else "right")
    wanted = " or ".join(allowed)
    if ka not in allowed:
        return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} and {_type_name(b)} "
                                 f"(operands must be {wanted})", "left")
    if kb not in allowed:
        return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} and {_type_name(b)} "
                                 f"(operands must be {wanted})", "right")
    return _OpError("E0301", f"operator '{op}' needs operands of the same type, got {_type_name(a)} and "
                             f"{_type_name(b)} (no implicit conversion; cast with int() or real())")


def _numeric(op: str, f_int: Callable[[int, int], Any], f_real: Callable[[float, float], Any]) -> Callable:
    """An arithmetic operator on int/int or real/real (§2.4: same type for both arguments)."""

    def apply(a: Any, b: Any) -> Any:
        t = type(a)
        if t is type(b):
            if t is int:
                return f_int(a, b)
            if t is float:
                return f_real(a, b)
        if _intlike(a) and _intlike(b):  # symbolic extents (SymInt) are ints too
            return f_int(a, b)
        raise _bad_operands(op, a, b, _NUM)

    return apply


def _intlike(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "division by zero", "right")
    return a // b  # §2.4: `/` rounds downwards for int


def _real_div(a: float, b: float) -> float:
    if b == 0.0:
        raise _OpError("E0502", "division by zero", "right")
    return a / b


def _int_ceil_div(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "division by zero", "right")
    return -(-a // b)  # §2.4: `\` rounds upwards


def _real_ceil_div(a: float, b: float) -> float:
    # Not in §2.4 (int only), but the `range` operator (§4.1.1) applies `\` to a generic num T.
    q = _real_div(a, b)
    return float(math.ceil(q)) if math.isfinite(q) else q


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise _OpError("E0502", "modulo by zero", "right")
    return a % b  # floor modulo: a == (a / b) * b + a % b with the flooring `/`


def _real_mod(a: float, b: float) -> float:
    # Reals too (docs/spec-errata.md S9): math.mod is generic over `T: num`; floor modulo as for ints.
    if b == 0:
        raise _OpError("E0502", "modulo by zero", "right")
    return a % b


def _int_pow(a: int, b: int) -> int:
    if b < 0:
        raise _OpError("E0502", f"negative exponent in int power {a} ** {b} (use real operands)", "right")
    if abs(a) > 1 and b * a.bit_length() > _MAX_POW_BITS:
        raise _OpError("E0502", f"int power {a} ** {b} is too large")
    return a**b


def _real_pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except ValueError:
        raise _OpError("E0502", f"real power {format_value(a)} ** {format_value(b)} is undefined") from None
    except OverflowError:
        raise _OpError("E0502", f"real power {format_value(a)} ** {format_value(b)} overflows") from None


def _minmax(op: str) -> Callable:
    # §2.4: `a <? b` is shorthand for `a < b ? a : b` (and `>?` for `a > b ? a : b`).
    if op == "<?":
        def pick(a: Any, b: Any) -> Any:
            return a if a < b else b
    else:
        def pick(a: Any, b: Any) -> Any:
            return a if a > b else b
    return _numeric(op, pick, pick)


def _comparison(op: str, f: Callable[[Any, Any], bool]) -> Callable:
    """`< <= > >= == !=`: any non-tensor type, the same on both sides (§2.4)."""

    def apply(a: Any, b: Any) -> bool:
        t = type(a)
        if t is type(b) and t in _COMPARABLE:
            return f(a, b)
        if _intlike(a) and _intlike(b):
            return f(a, b)
        raise _bad_operands(op, a, b, _ORDERED)

    return apply


_COMPARABLE = frozenset({int, float, bool, str})


def _logical(op: str, f: Callable[[bool, bool], bool]) -> Callable:
    def apply(a: Any, b: Any) -> bool:
        if type(a) is bool and type(b) is bool:
            return f(a, b)
        raise _bad_operands(op, a, b, ("bool",))

    return apply


def _identity(a: Any, b: Any) -> bool:
    """`is` on concrete values (§2.4, identity testing): equality; a tensor only is itself."""
    ta = type(a)
    if hasattr(a, "expr") or hasattr(b, "expr"):  # symbolic extents: the same expression (§2.4)
        if _intlike(a) and _intlike(b):
            return (a if hasattr(a, "expr") else b).identical(b if hasattr(a, "expr") else a)
    if ta is type(b) and ta in _COMPARABLE:
        return a == b
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a is b
    raise _bad_operands("is", a, b, (*_ORDERED, "tensor"))


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": _numeric("+", lambda a, b: a + b, lambda a, b: a + b),
    "-": _numeric("-", lambda a, b: a - b, lambda a, b: a - b),
    "*": _numeric("*", lambda a, b: a * b, lambda a, b: a * b),
    "/": _numeric("/", _int_div, _real_div),
    "\\": _numeric("\\", _int_ceil_div, _real_ceil_div),
    "%": _numeric("%", _int_mod, _real_mod),
    "**": _numeric("**", _int_pow, _real_pow),
    "<?": _minmax("<?"),
    ">?": _minmax(">?"),
    "<": _comparison("<", lambda a, b: a < b),
    "<=": _comparison("<=", lambda a, b: a <= b),
    ">": _comparison(">", lambda a, b: a > b),
    ">=": _comparison(">=", lambda a, b: a >= b),
    "==": _comparison("==", lambda a, b: a == b),
    "!=": _comparison("!=", lambda a, b: a != b),
    "&&": _logical("&&", lambda a, b: a and b),
    "||": _logical("||", lambda a, b: a or b),
    "^": _logical("^", lambda a, b: a != b),
    "=>": _logical("=>", lambda a, b: (not a) or b),
    "is": _identity,
}


def _negate(a: Any) -> Any:
    t = type(a)
    if t is int or t is float or _intlike(a):
        return -a
    raise _unary_error("-", a, "int or real")


def _plus(a: Any) -> Any:
    t = type(a)
    if t is int or t is float or _intlike(a):
        return a
    raise _unary_error("+", a, "int or real")


def _not(a: Any) -> bool:
    if type(a) is bool:
        return not a
    raise _unary_error("!", a, "bool")


def _unary_error(op: str, a: Any, wanted: str) -> _OpError:
    if isinstance(a, TensorValue):
        return _OpError("E0503", f"operator '{op}' on a tensor is not a compile-time expression")
    return _OpError("E0302", f"operator '{op}' cannot be applied to {_type_name(a)} (operand must be {wanted})")


_UNARY: dict[str, Callable[[Any], Any]] = {"-": _negate, "+": _plus, "!": _not}


# ---------------------------------------------------------------- element-wise application


def _derive(fn: Callable[..., Any], *uniforms: Any) -> Any:
    """The uniform value of an empty result: fn on the operands' uniform values (§2.4, `:=`).

    A type error is still an error (the uniform value has the item type); a value error
    (say a division by zero) only means there is no uniform value, since no item exists.
    """
    try:
        return fn(*uniforms)
    except _OpError as e:
        if e.code == "E0502":
            return NO_UNIFORM
        raise


def _map1(fn: Callable[[Any], Any], a: Any) -> Any:
    """fn element-wise over a pack (§2.4: operators on packs act element-wise)."""
    if not isinstance(a, Pack):
        return fn(a)
    items = [fn(x) for x in a]
    u = a.uniform
    if u is NO_UNIFORM:
        return Pack(items)
    return Pack(items, items[0] if items else _derive(fn, u))


def _map2(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """fn element-wise with broadcasting of a non-pack; packs must have equal lengths (§2.4).

    The result is uniform when both operands are (a broadcast non-pack counts as uniform),
    so `[x ..(0)] + 1` keeps the uniform value x + 1 although it has no items.
    """
    pa, pb = isinstance(a, Pack), isinstance(b, Pack)
    if pa:
        if pb:
            if len(a) != len(b):
                raise _OpError("E0502", f"pack lengths differ: {len(a)} vs {len(b)}")
            items = [fn(x, y) for x, y in zip(a, b, strict=True)]
            ua, ub = a.uniform, b.uniform
        else:
            items = [fn(x, b) for x in a]
            ua, ub = a.uniform, b
    elif pb:
        items = [fn(a, y) for y in b]
        ua, ub = a, b.uniform
    else:
        return fn(a, b)
    if ua is NO_UNIFORM or ub is NO_UNIFORM:
        return Pack(items)
    return Pack(items, items[0] if items else _derive(fn, ua, ub))


def _contains(a: Any, b: Any) -> Any:
    """`x in a` (§2.4, containment): a is a pack; a pack x gives a pack of bools."""
    if not isinstance(b, Pack):
        raise _OpError("E0304", f"the right operand of 'in' must be a pack, got {_type_name(b)}", "right")
    item = _pack_item_type(b)

    def test(x: Any) -> bool:
        if item is not None and _item_type(x) != item:
            raise _OpError("E0301", f"'in' needs an item of the pack's type: {_type_name(x)} in {_type_name(b)}")
        if type(x) is float and x != x:
            return False  # nan equals nothing
        if isinstance(x, TensorValue):
            return any(x is y for y in b)  # a tensor is only itself, as with `is`
        return x in b

    return _map1(test, a)


# ============================================================================================
# The evaluator
# ============================================================================================


class _Ctx:
    __slots__ = ("env", "dtypes")

    def __init__(self, env: Mapping[str, Any], dtypes: Mapping[str, str]) -> None:
        self.env = env
        self.dtypes = dtypes


def evaluate(expr: ast.Expr, env: Mapping[str, Any], dtypes: Mapping[str, str] | None = None) -> Any:
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


def _eval(node: ast.Expr, ctx: _Ctx) -> Any:
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


def _name(node: ast.Name, ctx: _Ctx) -> Any:
    try:
        value = ctx.env[node.id]
    except KeyError:
        raise Unbound(node.id, node.span) from None
    if type(value) is tuple or type(value) is list:
        return Pack(value)  # be lenient with callers that bind plain sequences
    return value


def _property(node: ast.Property, ctx: _Ctx) -> Any:
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


def _unary(node: ast.Unary, ctx: _Ctx) -> Any:
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


def _binary(node: ast.Binary, ctx: _Ctx) -> Any:
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


def _decided(node: ast.Binary, ctx: _Ctx, left: bool) -> Any:
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


def _select(node: ast.Select, ctx: _Ctx) -> Any:
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


def _fold(node: ast.Fold, ctx: _Ctx) -> Any:
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


def _check_items(op: str, items: Pack) -> None:
    """A fold of one item never applies its operator: apply it to the item itself to type-check it."""
    if items:
        _BINARY[op](items[0], items[0])


def _fold_arith(op: str, items: Pack) -> Any:
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
    _check_items(op, items)
    fn = _BINARY[op]
    result = items[0]
    for x in items[1:]:
        result = fn(result, x)
    return result


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


def _fold_minmax(op: str, items: Pack) -> Any:
    """`x <? ..` / `x >? ..`: no neutral element, so an empty pack is an error."""
    if not items:
        raise _OpError("E0502", f"'{op} ..' of an empty pack (minimum and maximum need at least one item)")
    _check_items(op, items)
    fn = _BINARY[op]
    result = items[0]
    for x in items[1:]:
        result = fn(result, x)
    return result


_FOLDS: dict[str, Callable[[str, Pack], Any]] = {
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


# ---------------------------------------------------------------- lists (§2.4, lists, ranges, zip)


def _list(node: ast.ListExpr, ctx: _Ctx) -> Pack | None:
    """Build a list; its uniform value follows the parts it is made of (§2.4, `:=`).

    Every item, repetition, splice, range or zip is a part; the list is uniform when all
    parts have the same uniform value (an explicit item is its own, `[x ..(n)]` has x even
    for n == 0, a spliced pack keeps its own). Otherwise a non-empty list whose items are
    all equal is still uniform (Pack does that), and `[]` has no uniform value.
    """
    items: list[Any] = []
    uniforms: list[Any] = []
    item_type: str | None = None
    for sub in node.items:
        t = type(sub)
        if t is ast.Expand:
            part = _expand(sub, ctx)
        elif t is ast.Range:
            part = _range(sub, ctx)
        elif t is ast.Zip:
            part = _zip(sub, ctx)
        else:
            value = _eval(sub, ctx)
            if value is None:
                return None  # §2.4.1: a null item makes the list null
            if isinstance(value, Pack):
                raise EvalError("E0304", "packs must be expanded with '..' inside a list, as in '[a, b.., c]' "
                                         "(lists do not nest)", sub.span)
            sub_type = _item_type(value)
            if item_type is None:
                item_type = sub_type
            elif sub_type != item_type:
                raise _mixed(item_type, sub_type, sub)
            items.append(value)
            uniforms.append(value)
            continue
        if part is None:
            return None
        if part is _OMITTED:
            continue
        sub_type = _pack_item_type(part)
        if sub_type is not None:
            if item_type is None:
                item_type = sub_type
            elif sub_type != item_type:
                raise _mixed(item_type, sub_type, sub)
        items.extend(part)
        uniforms.append(part.uniform)
    uniform = NO_UNIFORM
    if uniforms:
        first = uniforms[0]
        if first is not NO_UNIFORM and all(u is not NO_UNIFORM and same_value(u, first) for u in uniforms[1:]):
            uniform = first
    return Pack(items, uniform)


_OMITTED: Any = object()  # a conditional repetition whose null item is left out


def _mixed(expected: str, got: str | None, node: ast.Node) -> EvalError:
    return EvalError("E0301", f"list items must all have the same type: {got} here, but {expected} before",
                     node.span)


def _check_length(n: int, node: ast.Node) -> None:
    if n > MAX_PACK_LENGTH:
        raise EvalError("E0502", f"pack of {n} items is too long (limit {MAX_PACK_LENGTH})", node.span)


def _expand(node: ast.Expand, ctx: _Ctx) -> Any:
    """`b..` splices a pack; `x..(n)` repeats a non-pack n times (a bool n includes it or not)."""
    if node.count is None:
        value = _eval(node.value, ctx)
        if value is None:
            return None
        if not isinstance(value, Pack):
            raise EvalError("E0304", f"only a pack can be expanded with '..' ({_type_name(value)} is not); "
                                     "repeat a single item with '..(n)'", node.span)
        return value
    count = _eval(node.count, ctx)
    if count is None:
        return None
    if type(count) is bool:
        n = int(count)
    elif _intlike(count):
        count = _concrete(count)
        if count < 0:
            raise EvalError("E0502", f"negative repeat count {count}", node.count.span)
        n = count
    else:
        raise EvalError("E0302", f"a repeat count must be int or bool, got {_type_name(count)}", node.count.span)
    _check_length(n, node.count)
    value = _eval(node.value, ctx)
    if value is None:
        # A null item repeated zero times is no item at all: `[x ..(?x)]` is [] for a null x.
        return None if n else _OMITTED
    if isinstance(value, Pack):
        # `p..(n)` after a pack states its length; a bool n splices it or not.
        if type(count) is bool:
            return value if count else Pack((), value.uniform)
        if len(value) != n:
            raise EvalError("E0502", f"pack length {len(value)} differs from the length {n} given after '..'",
                            node.span)
        return value
    return Pack([value] * n, value)


def _int_bound(node: ast.Expr | None, ctx: _Ctx, what: str) -> Any:
    """An int range bound or slice index; None when omitted, _NULL when it is null."""
    if node is None:
        return None
    value = _eval(node, ctx)
    if value is None:
        return _NULL
    if not _intlike(value):
        raise EvalError("E0302", f"a {what} must be int, got {_type_name(value)}", node.span)
    return _concrete(value)


def _concrete(v: Any) -> Any:
    """A symbolic extent used as a length or position: the result holds for its value only."""
    return v.__index__() if hasattr(v, "expr") else v


_NULL: Any = object()


def _range(node: ast.Range, ctx: _Ctx) -> Pack | None:
    """`[b:e:s]`: b inclusive to e exclusive by stride s (default 1, may be negative)."""
    start = _int_bound(node.start, ctx, "range begin")
    stop = _int_bound(node.stop, ctx, "range end")
    step = _int_bound(node.step, ctx, "range stride")
    if start is _NULL or stop is _NULL or step is _NULL:
        return None
    if start is None or stop is None:
        raise EvalError("E0502", "a range in a list needs a begin and an end, as in '[b:e]'", node.span)
    if step is None:
        step = 1
    elif step == 0:
        raise EvalError("E0502", "range stride must not be zero", node.step.span)
    r = range(start, stop, step)
    _check_length(len(r), node)
    return Pack(r)


def _zip(node: ast.Zip, ctx: _Ctx) -> Pack | None:
    """`[(a, b)..]` interleaves equal-length packs."""
    packs = []
    for sub in node.items:
        value = _eval(sub, ctx)
        if value is None:
            return None
        if not isinstance(value, Pack):
            raise EvalError("E0304", f"a zip interleaves packs, got {_type_name(value)}", sub.span)
        if packs and len(value) != len(packs[0]):
            raise EvalError("E0502", f"zipped packs differ in length: {len(packs[0])} vs {len(value)}", sub.span)
        packs.append(value)
    items = [x for group in zip(*packs, strict=True) for x in group]
    uniforms = [p.uniform for p in packs]
    first = uniforms[0]
    if first is not NO_UNIFORM and all(u is not NO_UNIFORM and same_value(u, first) for u in uniforms):
        return Pack(items, first)
    return Pack(items)


def _misplaced(node: ast.Expr, ctx: _Ctx) -> NoReturn:
    what = {ast.Expand: "an expansion '..'", ast.Range: "a range 'b:e'", ast.Zip: "a zip '(a, b)..'"}[type(node)]
    raise EvalError("E0502", f"{what} can only appear inside a list", node.span)


# ---------------------------------------------------------------- indexing (§2.4, indexing)


def _subscript(node: ast.Subscript, ctx: _Ctx) -> Any:
    value = _eval(node.value, ctx)
    if value is None:
        return None
    is_str = type(value) is str
    if not is_str and not isinstance(value, Pack):
        code = "E0503" if isinstance(value, TensorValue) else "E0302"
        raise EvalError(code, f"only packs and strings can be indexed, not {_type_name(value)}", node.value.span)
    index_node = node.index
    if type(index_node) is ast.Range:
        start = _int_bound(index_node.start, ctx, "slice start")
        stop = _int_bound(index_node.stop, ctx, "slice end")
        step = _int_bound(index_node.step, ctx, "slice step")
        if start is _NULL or stop is _NULL or step is _NULL:
            return None
        if step == 0:
            raise EvalError("E0502", "slice step must not be zero", index_node.step.span)
        # Python's slice semantics are the spec's: omitted bounds run to the ends for either sign of the
        # step, negative bounds count from the end, and bounds beyond the ends are clipped.
        part = value[start:stop:step]
        return part if is_str else Pack(part, value.uniform)
    index = _eval(index_node, ctx)
    if index is None:
        return None
    n = len(value)
    if _intlike(index):
        return value[_position(index, n, index_node)]
    if not isinstance(index, Pack):
        raise EvalError("E0302", f"an index must be int, int.. or bool.., got {_type_name(index)}", index_node.span)
    kinds = {type(i) for i in index}
    if kinds == {bool}:
        if len(index) != n:
            raise EvalError("E0502", f"mask length {len(index)} differs from the indexed length {n}",
                            index_node.span)
        picked = [x for x, keep in zip(value, index, strict=True) if keep]
        return "".join(picked) if is_str else Pack(picked, value.uniform)
    if kinds and kinds != {int}:
        raise EvalError("E0302", f"an index must be int, int.. or bool.., got {_type_name(index)}", index_node.span)
    picked = [value[_position(i, n, index_node)] for i in index]
    if is_str:
        return "".join(picked)
    uniform = value.uniform
    if uniform is NO_UNIFORM and type(index.uniform) is int and -n <= index.uniform < n:
        uniform = value[index.uniform]  # the same position repeated (possibly zero times)
    return Pack(picked, uniform)


def _position(i: int, n: int, node: ast.Node) -> int:
    i = _concrete(i)
    if -n <= i < n:
        return i + n if i < 0 else i
    raise EvalError("E0502", f"index {i} is out of range for length {n}", node.span)


def _substitute(node: ast.Substitute, ctx: _Ctx) -> Pack | None:
    """`a[i] <- b`: a copy of a with items at i replaced (§2.4, substitution)."""
    base = _eval(node.value, ctx)
    if base is None:
        return None
    if not isinstance(base, Pack):
        raise EvalError("E0302", f"only a pack can be substituted into, not {_type_name(base)}", node.value.span)
    index = _eval(node.index, ctx)
    if index is None:
        return None
    repl = _eval(node.replacement, ctx)
    if repl is None:
        return None
    n = len(base)
    base_type = _pack_item_type(base)
    repl_type = _pack_item_type(repl) if isinstance(repl, Pack) else _item_type(repl)
    if base_type is not None and repl_type is not None and base_type != repl_type:
        raise EvalError("E0301", f"substituting {_type_name(repl)} into {_type_name(base)}", node.replacement.span)
    items = list(base)
    if _intlike(index):
        if isinstance(repl, Pack):
            raise EvalError("E0304", "a single index is substituted by a single value, not a pack",
                            node.replacement.span)
        items[_position(index, n, node.index)] = repl
        positions = [index]
    elif isinstance(index, Pack):
        if any(not _intlike(i) for i in index):
            raise EvalError("E0302", f"substitution indices must be int or int.., got {_type_name(index)}",
                            node.index.span)
        if isinstance(repl, Pack):
            if len(repl) != len(index):
                raise EvalError("E0502", f"pack lengths differ: {len(index)} indices vs {len(repl)} values",
                                node.span)
            for i, x in zip(index, repl, strict=True):
                items[_position(i, n, node.index)] = x
        else:
            for i in index:
                items[_position(i, n, node.index)] = repl
        positions = list(index)
    else:
        raise EvalError("E0302", f"substitution indices must be int or int.., got {_type_name(index)}",
                        node.index.span)
    uniform = NO_UNIFORM
    if base.uniform is not NO_UNIFORM:
        ru = repl.uniform if isinstance(repl, Pack) else repl
        if not positions or (ru is not NO_UNIFORM and same_value(ru, base.uniform)):
            uniform = base.uniform
    return Pack(items, uniform)


# ---------------------------------------------------------------- casts and built-in functions


_DEFAULTS: dict[str, Any] = {"int": 0, "real": 0.0, "bool": False, "str": ""}


def _cast_to(type_name: str, span: Span) -> Callable[[Any], Any]:
    """The element cast to int, real or bool (§2.4, casting); str is not castable."""
    if type_name == "int":
        return _to_int
    if type_name == "real":
        return _to_real
    if type_name == "bool":
        return _to_bool
    if type_name == "str":
        raise EvalError("E0305", "values cannot be cast to str; use string formatting, as in \"{x}\"", span)
    raise EvalError("E0305", f"cannot cast to '{type_name}'; casts are to int, real or bool", span)


def _cast_source(value: Any, target: str) -> None:
    k = _kind(value)
    if k == "str":
        raise _OpError("E0305", f"a str cannot be cast to {target}")
    if k == "tensor":
        raise _OpError("E0503", f"casting a tensor to {target} is not a compile-time expression")
    if k not in ("int", "real", "bool"):
        raise _OpError("E0305", f"cannot cast {_type_name(value)} to {target}")


def _to_int(v: Any) -> int:
    t = type(v)
    if t is int or _intlike(v):
        return v
    if t is bool:
        return int(v)
    if t is float:
        if not math.isfinite(v):
            raise _OpError("E0502", f"cannot cast {format_value(v)} to int")
        return int(v)  # truncates toward zero
    _cast_source(v, "int")
    raise AssertionError  # pragma: no cover


def _to_real(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int or t is bool or _intlike(v):
        try:
            return float(v)
        except OverflowError:
            raise _OpError("E0502", f"int {v} is too large for a real") from None
    _cast_source(v, "real")
    raise AssertionError  # pragma: no cover


def _to_bool(v: Any) -> bool:
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float or _intlike(v):
        return v != 0
    _cast_source(v, "bool")
    raise AssertionError  # pragma: no cover


def _cast(node: ast.Cast, ctx: _Ctx) -> Any:
    return _do_cast(node.type, node.arg, node, ctx)


def _do_cast(type_name: str, arg: ast.Expr | None, node: ast.Expr, ctx: _Ctx) -> Any:
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


def _real_fn(name: str, f: Callable[[float], float]) -> Callable[[Any], float]:
    """A §2.4 built-in of a real argument: domain errors (log(0), sqrt(-1)) are evaluation errors."""

    def apply(x: Any) -> float:
        if type(x) is not float:
            raise _fn_type_error(name, x, "real")
        try:
            return f(x)
        except ValueError:
            raise _OpError("E0502", f"{name}({format_value(x)}) is undefined") from None
        except OverflowError:
            raise _OpError("E0502", f"{name}({format_value(x)}) overflows") from None

    return apply


def _fn_type_error(name: str, x: Any, wanted: str) -> _OpError:
    if isinstance(x, TensorValue):
        return _OpError("E0503", f"{name}() of a tensor is not a compile-time expression")
    return _OpError("E0302", f"{name}() needs a {wanted} argument, got {_type_name(x)}")


def _round(x: float) -> float:
    """Round half away from zero (exact: x - floor(x) is exact in binary floating point)."""
    if not math.isfinite(x):
        return x
    if x < 0:
        return -_round(-x)
    f = math.floor(x)
    return float(f + 1 if x - f >= 0.5 else f)


def _floor(x: float) -> float:
    return float(math.floor(x)) if math.isfinite(x) else x


def _ceil(x: float) -> float:
    return float(math.ceil(x)) if math.isfinite(x) else x


def _frac(x: float) -> float:
    """The fractional part x - floor(x), in [0, 1) (as GLSL fract)."""
    return x - math.floor(x) if math.isfinite(x) else math.nan


def _abs(x: Any) -> Any:
    t = type(x)
    if t is int or t is float or _intlike(x):
        return abs(x)
    raise _fn_type_error("abs", x, "int or real")


def _sign(x: Any) -> Any:
    t = type(x)
    if t is int or _intlike(x):
        return (x > 0) - (x < 0)
    if t is float:
        if x != x:
            return x
        return float((x > 0) - (x < 0))
    raise _fn_type_error("sign", x, "int or real")


_BUILTINS: dict[str, Callable[[Any], Any]] = {
    **{
        name: _real_fn(name, getattr(math, name))
        for name in ("sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan",
                     "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf")
    },
    "round": _real_fn("round", _round),
    "floor": _real_fn("floor", _floor),
    "ceil": _real_fn("ceil", _ceil),
    "frac": _real_fn("frac", _frac),
    "abs": _abs,
    "sign": _sign,
}
assert set(_BUILTINS) == BUILTIN_FUNCTIONS


def _call(node: ast.Call, ctx: _Ctx) -> Any:
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


def _not_compile_time(node: ast.Expr, ctx: _Ctx) -> NoReturn:
    raise EvalError("E0503", f"{_describe(node)} is not a compile-time expression", node.span)


_DISPATCH: dict[type, Callable[[Any, _Ctx], Any]] = {
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
}


# ============================================================================================
# Free names
# ============================================================================================

_FREE_CACHE: dict[int, tuple[ast.Node, frozenset[str]]] = {}
_FREE_CACHE_LIMIT = 1 << 16


def free_names(expr: ast.Node) -> set[str]:
    """The identifiers expr reads: an expression is evaluable once all have values (§2.9).

    Includes the base name of `x.shape` and names inside string format fields; excludes
    callee names (`sqrt`, `T`, operators). Cached per node, since callers ask again and
    again while interleaving @using and @assert evaluation.
    """
    key = id(expr)
    hit = _FREE_CACHE.get(key)
    if hit is not None and hit[0] is expr:
        return set(hit[1])
    names: set[str] = set()
    stack: list[ast.Node] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is ast.Name:
            names.add(node.id)
        else:
            stack.extend(node.children())
    if len(_FREE_CACHE) >= _FREE_CACHE_LIMIT:
        _FREE_CACHE.clear()
    _FREE_CACHE[key] = (expr, frozenset(names))  # holding expr keeps its id from being reused
    return names


# ============================================================================================
# Formatting
# ============================================================================================


def format_value(v: Any) -> str:
    """A value as string formatting and assertion messages print it (§2.4, string formatting).

    int as is; real in the shortest form that reads back exactly (`1.0`, `0.5`, `1e-5`, `inf`,
    `-inf`, `nan`); bool as `true`/`false`; null as `null`; a str raw at the top level but
    quoted in single quotes inside a pack; a pack as `[1, 2, 3]`; a tensor as its type and
    shape, `tensor<real>[2, 3]` (a dynamic extent prints as `?`).
    """
    return _format(v, top=True)


def _format(v: Any, top: bool) -> str:
    t = type(v)
    if t is bool:
        return "true" if v else "false"
    if t is int or (t is not bool and isinstance(v, int)):
        return str(v)
    if t is float:
        return _format_real(v)
    if t is str:
        if top:
            return v
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if v is None:
        return "null"
    if isinstance(v, Pack) or t is tuple or t is list:
        return "[" + ", ".join(_format(x, False) for x in v) + "]"
    if isinstance(v, TensorValue):
        return f"tensor<{v.dtype}>[" + ", ".join("?" if e is None else str(e) for e in v.shape) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _format_real(float(v))
    return str(v)


def _format_real(x: float) -> str:
    if x != x:
        return "nan"
    if x == math.inf:
        return "inf"
    if x == -math.inf:
        return "-inf"
    text = repr(x)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"  # 1e-05 -> 1e-5, 1e+16 -> 1e16: as SkriptND writes them
    return text
