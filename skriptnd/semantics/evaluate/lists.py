"""Node handlers that build and index packs: lists, repetitions, ranges, zips (§2.4, lists),
indexing and slicing (§2.4, indexing) and substitution `a[i] <- b`."""

from __future__ import annotations

from typing import Any, NoReturn

from skriptnd.semantics.evaluate.errors import EvalError
from skriptnd.semantics.evaluate.kinds import _intlike, _item_type, _pack_item_type, _type_name
from skriptnd.semantics.evaluate.walk import _Ctx, _eval
from skriptnd.semantics.values import NO_UNIFORM, Pack, TensorValue, Value, same_value
from skriptnd.syntax import ast

#: Longest pack a repetition or a range may build: a typo like `[0 ..(10 ** 12)]` must end in
#: an error, not in exhausting memory.
MAX_PACK_LENGTH = 1 << 24


def _list(node: ast.ListExpr, ctx: _Ctx) -> Pack | None:
    """Build a list; its uniform value follows the parts it is made of (§2.4, `:=`).

    Every item, repetition, splice, range or zip is a part; the list is uniform when all
    parts have the same uniform value (an explicit item is its own, `[x ..(n)]` has x even
    for n == 0, a spliced pack keeps its own). Otherwise a non-empty list whose items are
    all equal is still uniform (Pack does that), and `[]` has no uniform value.
    """
    items: list[Value] = []
    uniforms: list[Value] = []
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


def _expand(node: ast.Expand, ctx: _Ctx) -> Value:
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


def _int_bound(node: ast.Expr | None, ctx: _Ctx, what: str) -> Value:
    """An int range bound or slice index; None when omitted, _NULL when it is null."""
    if node is None:
        return None
    value = _eval(node, ctx)
    if value is None:
        return _NULL
    if not _intlike(value):
        raise EvalError("E0302", f"a {what} must be int, got {_type_name(value)}", node.span)
    return _concrete(value)


def _concrete(v: Value) -> Value:
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


def _subscript(node: ast.Subscript, ctx: _Ctx) -> Value:
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
