"""Staged evaluation of @lower expressions over a formula's index space (spec §2.12, §2.4).

`Stager.ev(node)` returns a staged value (see values.py): whatever does not depend on tensor
data is computed right away (compile-time sub-expressions through the exact compile-time
evaluator, index arithmetic as `Aff`, masks as arrays); the rest becomes `Dyn` closures that
the plan runs. Tensor accesses whose indices are affine in the index symbols become numpy views
(basic slicing, reshapes for mixed-radix indices, padding plus sliding windows for bounded
`stride * i + dilation * j - offset` indices); any other access is a gather with broadcast index
arrays (numpy advanced indexing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from skriptnd.lower import ops
from skriptnd.lower.values import (
    BOOL,
    INT,
    REAL,
    Aff,
    Arr,
    BIdx,
    Counter,
    Dyn,
    Factor,
    LoweringError,
    RangeIdx,
    Space,
    TRef,
    TStack,
    kind_of,
)
from skriptnd.semantics.evaluate import EvalError, Unbound, evaluate, free_names
from skriptnd.syntax import ast

_SCALAR = (int, float, bool, str)


class PackedDim:
    """An index item that is a pack (not expanded): the access yields one value per item."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items


def _is_item(v: Any) -> bool:
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


class Stager:
    """Stages the expressions of one formula instance over `space`."""

    def __init__(self, shared: Shared, space: Space, scope: dict[str, Any], span: Any, *,
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

    def static_value(self, node: ast.Expr) -> Any:
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

    def lift(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn on concrete items now, or a Dyn computing it on each run."""
        for a in args:
            if not _is_item(a):
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

            def run1(rt: Any) -> Any:
                return fn(x.get(rt))

            return Dyn(run1, varying)
        if len(conc) == 2:
            x, y = conc
            xd, yd = isinstance(x, Dyn), isinstance(y, Dyn)

            def run2(rt: Any) -> Any:
                return fn(x.get(rt) if xd else x, y.get(rt) if yd else y)

            return Dyn(run2, varying)

        def run(rt: Any) -> Any:
            return fn(*[a.get(rt) if isinstance(a, Dyn) else a for a in conc])

        return Dyn(run, varying)

    @staticmethod
    def _misuse(v: Any) -> str:
        if isinstance(v, BIdx):
            return "a bounded index '|...|' can only be used directly as a tensor index"
        if isinstance(v, tuple):
            return "a pack cannot be used here (expand it with '..' or index it)"
        if isinstance(v, TRef | TStack):
            return "a tensor must be accessed with indices, as in 'x[i, j]'"
        if isinstance(v, Counter):
            return f"the output extent symbol '{v.name}' can only be used as an index of the output"
        return f"unexpected value {v!r}"

    # ------------------------------------------------------------ evaluation

    def ev(self, node: ast.Expr) -> Any:
        if self.is_static(node):
            return self.static_value(node)
        method = _DISPATCH.get(type(node))
        if method is None:
            raise self.error(f"{type(node).__name__} cannot be evaluated in @lower")
        return method(self, node)

    def _name(self, node: ast.Name) -> Any:
        try:
            return self.scope[node.id]
        except KeyError:
            return self.static_value(node)

    def _unary(self, node: ast.Unary) -> Any:
        if node.op == "?":
            return self.ev(node.operand) is not None
        v = self.ev(node.operand)
        return self.map1(lambda x: self.unary_item(node.op, x), v)

    def unary_item(self, op: str, x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, Aff) and op in "+-":
            return x if op == "+" else Aff.make({a: -c for a, c in x.terms}, -x.const, x.space)
        if isinstance(x, Dyn) and x.factors is not None and op == "-":
            return self._factor_product(x, None, -1)
        return self.lift(lambda a: ops.unary(op, a), x)

    def _binary(self, node: ast.Binary) -> Any:
        op = node.op
        if op == "??":
            left = self.ev(node.left)
            return left if left is not None else self.ev(node.right)
        if op in ("is", "in"):
            raise self.error(f"operator '{op}' must be a compile-time expression in @lower")
        left = self.ev(node.left)
        if left is None:
            return None
        if type(left) is bool and ((op == "&&" and not left) or (op == "||" and left)):
            return left
        if type(left) is bool and op == "=>" and not left:
            return True
        right = self.ev(node.right)
        if right is None:
            return None
        return self.binary(op, left, right)

    def binary(self, op: str, a: Any, b: Any) -> Any:
        if isinstance(a, tuple) or isinstance(b, tuple):
            if isinstance(a, tuple) and isinstance(b, tuple):
                if len(a) != len(b):
                    raise self.error(f"pack lengths differ: {len(a)} vs {len(b)}")
                return tuple(self.binary(op, x, y) for x, y in zip(a, b, strict=True))
            if isinstance(a, tuple):
                return tuple(self.binary(op, x, b) for x in a)
            return tuple(self.binary(op, a, y) for y in b)
        return self.binary_item(op, a, b)

    def binary_item(self, op: str, a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        ta, tb = type(a), type(b)
        # Logic with a known operand (also what keeps an unneeded operand out of the way).
        if op == "&&" and (ta is bool or tb is bool):
            if a is False or b is False:
                return False
            return b if ta is bool else a
        if op == "||" and (ta is bool or tb is bool):
            if a is True or b is True:
                return True
            return b if ta is bool else a
        # Affine index arithmetic stays symbolic.
        a_aff, b_aff = isinstance(a, Aff), isinstance(b, Aff)
        if (a_aff or b_aff) and (a_aff or ta is int) and (b_aff or tb is int):
            space = a.space if a_aff else b.space
            if op in ("+", "-"):
                sign = 1 if op == "+" else -1
                terms: dict[int, int] = dict(a.terms) if a_aff else {}
                for axis, c in (b.terms if b_aff else ()):
                    terms[axis] = terms.get(axis, 0) + sign * c
                const = (a.const if a_aff else a) + sign * (b.const if b_aff else b)
                return Aff.make(terms, const, space)
            if op == "*" and not (a_aff and b_aff):
                aff, k = (a, b) if a_aff else (b, a)
                return Aff.make({axis: c * k for axis, c in aff.terms}, aff.const * k, space)
        # Products of tensor accesses keep their factors (einsum fast path).
        if op == "*":
            fa = isinstance(a, Dyn) and a.factors is not None
            fb = isinstance(b, Dyn) and b.factors is not None
            if fa and fb:
                return self._factor_product(a, b, 1)
            if fa and ta in (int, float) or fb and tb in (int, float):
                return self._factor_product(a if fa else b, None, b if fa else a)
        if op == "/" and isinstance(a, Dyn) and a.factors is not None and tb is float and b != 0.0:
            return self._factor_product(a, None, 1.0 / b)
        return self.lift(lambda x, y: ops.binary(op, x, y), a, b)

    def _factor_product(self, a: Dyn, b: Dyn | None, scale: Any) -> Dyn:
        plain = self.lift(lambda x, y: ops.binary("*", x, y), a, b if b is not None else scale)
        plain.factors = a.factors + (b.factors if b is not None else ())
        plain.scale = a.scale * (b.scale if b is not None else 1) * scale
        return plain

    def _fold(self, node: ast.Fold) -> Any:
        v = self.ev(node.operand)
        if v is None:
            return None
        if not isinstance(v, tuple):
            if node.op == ":=":
                return v
            raise self.error(f"'{node.op} ..' folds a pack")
        op = node.op
        if node.cumulative:
            if op not in ("+", "*", "&&", "||", "<?", ">?"):
                raise self.error(f"'{op} ...' is not a cumulative fold")
            out: list[Any] = []
            for x in v:
                out.append(x if not out else self.binary(op, out[-1], x))
            return tuple(out)
        if op in ("+", "*", "&&", "||", "<?", ">?"):
            if not v:
                if op in ("<?", ">?"):
                    raise self.error(f"'{op} ..' of an empty pack")
                return {"+": 0, "*": 1, "&&": True, "||": False}[op]
            acc = v[0]
            for x in v[1:]:
                acc = self.binary(op, acc, x)
            return acc
        if op in ("<", "<=", ">", ">=", "=="):
            acc: Any = True
            for x, y in zip(v, v[1:], strict=False):
                acc = self.binary("&&", acc, self.binary(op, x, y))
            return acc
        if op == ":=":
            first = v[0] if v else None
            return first if v and all(x is first for x in v) else None
        raise self.error(f"fold '{op} ..' of runtime values is not supported")

    def _select(self, node: ast.Select) -> Any:
        c = self.ev(node.cond)
        if c is None:
            return None
        if type(c) is bool:
            if c:
                return self.ev(node.then)
            return self.ev(node.orelse) if node.orelse is not None else None
        if node.orelse is None:
            raise self.error("a select without else branch ('c ? a') cannot be evaluated per element")
        if isinstance(c, tuple) and all(type(x) is bool for x in c):
            need_then, need_else = any(c), not all(c)
            then = self.ev(node.then) if need_then else None
            orelse = self.ev(node.orelse) if need_else else None
            if (need_then and then is None) or (need_else and orelse is None):
                return None
            out = []
            for i, x in enumerate(c):
                branch = then if x else orelse
                if isinstance(branch, tuple):
                    if len(branch) != len(c):
                        raise self.error(f"pack lengths differ: {len(c)} (condition) vs {len(branch)}")
                    out.append(branch[i])
                else:
                    out.append(branch)
            return tuple(out)
        then = self.ev(node.then)
        orelse = self.ev(node.orelse)
        if then is None or orelse is None:
            return None
        return self.select(c, then, orelse)

    def select(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, tuple) or isinstance(a, tuple) or isinstance(b, tuple):
            n = next(len(x) for x in (c, a, b) if isinstance(x, tuple))
            for x in (c, a, b):
                if isinstance(x, tuple) and len(x) != n:
                    raise self.error(f"pack lengths differ in a select: {n} vs {len(x)}")

            def item(x: Any, i: int) -> Any:
                return x[i] if isinstance(x, tuple) else x

            return tuple(self.select(item(c, i), item(a, i), item(b, i)) for i in range(n))
        if type(c) is bool:
            return a if c else b
        return self.lift(ops.select, c, a, b)

    def map1(self, fn: Callable[[Any], Any], v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, tuple):
            return tuple(fn(x) for x in v)
        return fn(v)

    def _cast(self, node: ast.Cast) -> Any:
        return self.cast(node.type, self.ev(node.arg))

    def cast(self, kind: str, v: Any) -> Any:
        if kind not in ("int", "real", "bool"):
            raise self.error(f"cannot cast to '{kind}' in @lower")

        def item(x: Any) -> Any:
            if x is None:
                return None
            if isinstance(x, Aff) and kind == "int":
                return x
            return self.lift(lambda a: ops.cast(kind, a), x)

        return self.map1(item, v)

    def _call(self, node: ast.Call) -> Any:
        callee = node.callee
        if callee in self.shared.dtypes and not node.type_args and not node.attrs:
            if len(node.args) != 1:
                raise self.error(f"a cast '{callee}(x)' takes one argument")
            return self.cast(self.shared.dtypes[callee], self.ev(node.args[0]))
        if callee in ops.BUILTINS and len(node.args) == 1 and not node.type_args and not node.attrs:
            v = self.ev(node.args[0])
            return self.map1(lambda x: None if x is None else self.lift(lambda a: ops.builtin(callee, a), x), v)
        raise self.error(f"'{callee}' is not a built-in function or a cast; operators cannot be invoked in @lower")

    def _list(self, node: ast.ListExpr) -> Any:
        out: list[Any] = []
        for item in node.items:
            if isinstance(item, ast.Expand):
                part = self.expand(item)
                if part is None:
                    return None
                out.extend(part)
            elif isinstance(item, ast.Range):
                out.extend(self.range_items(item))
            elif isinstance(item, ast.Zip):
                packs = [self.ev(x) for x in item.items]
                if any(p is None for p in packs):
                    return None
                if not all(isinstance(p, tuple) for p in packs) or len({len(p) for p in packs}) > 1:
                    raise self.error("a zip interleaves packs of equal length")
                out.extend(x for group in zip(*packs, strict=True) for x in group)
            else:
                v = self.ev(item)
                if v is None:
                    return None
                if isinstance(v, tuple):
                    raise self.error("packs must be expanded with '..' inside a list")
                out.append(v)
        return tuple(out)

    def expand(self, node: ast.Expand) -> tuple[Any, ...] | None:
        """`x..` (a pack spliced) or `x..(n)` (repeated n times; a bool n includes it or not)."""
        if node.count is None:
            v = self.ev(node.value)
            if v is None:
                return None
            if not isinstance(v, tuple):
                raise self.error("only a pack can be expanded with '..'")
            return v
        n = self.ev(node.count)
        if n is None:
            return None
        if type(n) is bool:
            if not n:
                return ()
            v = self.ev(node.value)
            return None if v is None else (v if isinstance(v, tuple) else (v,))
        if type(n) is not int:
            raise self.error("a repeat count must be a compile-time int or bool")
        v = self.ev(node.value)
        if v is None:
            return None if n else ()
        if isinstance(v, tuple):
            if len(v) != n:
                raise self.error(f"pack length {len(v)} differs from the length {n} given after '..'")
            return v
        return (v,) * max(n, 0)

    def range_items(self, node: ast.Range) -> tuple[int, ...]:
        start, stop, step = (self.ev(x) if x is not None else None for x in (node.start, node.stop, node.step))
        if not all(x is None or type(x) is int for x in (start, stop, step)):
            raise self.error("range bounds must be compile-time ints in @lower")
        if start is None or stop is None:
            raise self.error("a range in a list needs a begin and an end")
        return tuple(range(start, stop, step or 1))

    def _subscript(self, node: ast.Subscript) -> Any:
        base = self.ev(node.value)
        if base is None:
            return None
        if isinstance(node.index, ast.Range):
            r = node.index
            bounds = [self.ev(x) if x is not None else None for x in (r.start, r.stop, r.step)]
            if not all(x is None or type(x) is int for x in bounds):
                raise self.error("slice bounds must be compile-time ints in @lower")
            if not isinstance(base, tuple):
                raise self.error("only packs can be sliced")
            return tuple(base[slice(*bounds)])
        index = self.ev(node.index)
        if index is None:
            return None
        return self.subscript(base, index)

    def subscript(self, base: Any, index: Any) -> Any:
        if not isinstance(base, tuple):
            raise self.error("only packs can be indexed in @lower (access tensors as 'x[i, j]')")
        n = len(base)
        if type(index) is int:
            if not -n <= index < n:
                raise self.error(f"index {index} is out of range for a pack of length {n}")
            return base[index]
        if isinstance(index, tuple):
            if index and all(type(i) is bool for i in index):
                if len(index) != n:
                    raise self.error(f"mask length {len(index)} differs from the pack length {n}")
                return tuple(x for x, keep in zip(base, index, strict=True) if keep)
            return tuple(self.subscript(base, i) for i in index)
        # A runtime index into a pack of compile-time scalars: a gather from a small array.
        if not all(isinstance(x, int | float | bool) for x in base):
            raise self.error("a pack of runtime values cannot be indexed by a runtime index")
        arr = self._pack_array(base)
        self.reason(f"a pack index is out of range for length {n}")
        return self.lift(lambda i: _pack_gather(arr, i), index)

    def _pack_array(self, base: tuple[Any, ...]) -> np.ndarray:
        hit = self.shared.pack_arrays.get(id(base))
        if hit is not None and hit[0] is base:
            return hit[1]
        kind = kind_of(base[0]) if base else "int"
        arr = np.asarray(base, dtype={"int": INT, "real": REAL, "bool": BOOL}[kind])
        self.shared.pack_arrays[id(base)] = (base, arr)
        return arr

    def _substitute(self, node: ast.Substitute) -> Any:
        base = self.ev(node.value)
        index = self.ev(node.index)
        repl = self.ev(node.replacement)
        if base is None or index is None or repl is None:
            return None
        if not isinstance(base, tuple):
            raise self.error("only a pack can be substituted into")
        items = list(base)
        n = len(items)
        positions = index if isinstance(index, tuple) else (index,)
        if not all(type(p) is int for p in positions):
            raise self.error("substitution indices must be compile-time ints")
        values = repl if isinstance(repl, tuple) else (repl,) * len(positions)
        if isinstance(index, tuple) != isinstance(repl, tuple) and not isinstance(index, tuple):
            raise self.error("a single index is substituted by a single value")
        if len(values) != len(positions):
            raise self.error(f"pack lengths differ: {len(positions)} indices vs {len(values)} values")
        for p, v in zip(positions, values, strict=True):
            if not -n <= p < n:
                raise self.error(f"index {p} is out of range for a pack of length {n}")
            items[p] = v
        return tuple(items)

    def _bounded(self, node: ast.Bounded) -> Any:
        v = self.ev(node.value)
        lo = self.ev(node.low) if node.low is not None else None
        hi = self.ev(node.high) if node.high is not None else None
        if v is None or (node.low is not None and lo is None) or (node.high is not None and hi is None):
            return None
        if (lo is None) != (hi is None):
            raise self.error("a remapped index needs both bounds: '|i <> lo : hi|'")
        packs = [x for x in (v, lo, hi) if isinstance(x, tuple)]
        if packs:
            n = len(packs[0])
            if any(len(p) != n for p in packs):
                raise self.error("pack lengths differ in a bounded index")

            def item(x: Any, i: int) -> Any:
                return x[i] if isinstance(x, tuple) else x

            return tuple(BIdx(item(v, i), item(lo, i), item(hi, i)) for i in range(n))
        return BIdx(v, lo, hi)

    def _property(self, node: ast.Property) -> Any:
        raise self.error(f"'.{node.name}' of a runtime value is not defined")

    def _misplaced(self, node: ast.Expr) -> Any:
        raise self.error(f"{type(node).__name__} can only appear inside a list or an index")

    # ------------------------------------------------------------ tensor access

    def tensor_of(self, node: ast.Expr) -> Any:
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                raise self.error(f"'{node.id}' is not a tensor")
            if node.id not in self.shared.tensors:
                raise self.error(f"'{node.id}' is not a tensor of this operator")
            return self.shared.tensors[node.id]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            refs = self.tensor_of(node.value)
            if refs is None:
                return None
            if not isinstance(refs, tuple):
                raise self.error(f"'{node.value.id}' is not a tensor pack")
            if isinstance(node.index, ast.Range):
                r = node.index
                bounds = [self.ev(x) if x is not None else None for x in (r.start, r.stop, r.step)]
                if not all(x is None or type(x) is int for x in bounds):
                    raise self.error("slice bounds must be compile-time ints in @lower")
                return tuple(refs[slice(*bounds)])
            index = self.ev(node.index)
            if index is None:
                return None
            if type(index) is int or (isinstance(index, tuple) and all(type(i) is int for i in index)):
                return self.subscript(refs, index)
            if isinstance(index, tuple):
                raise self.error("a tensor pack must be indexed by an int or a pack of compile-time ints")
            shapes = {r.shape for r in refs}
            if len(shapes) > 1:
                raise self.error(f"tensor pack '{node.value.id}' is indexed by a runtime value but its "
                                 "items differ in shape")
            return TStack(node.value.id, refs, index)
        raise self.error("a tensor access must name a tensor or an item of a tensor pack")

    def index_items(self, indices: Sequence[ast.Expr]) -> list[Any] | None:
        items: list[Any] = []
        for node in indices:
            if isinstance(node, ast.Expand):
                part = self.expand(node)
                if part is None:
                    return None
                items.extend(part)
            elif isinstance(node, ast.Range):
                bounds = [self.ev(x) if x is not None else None for x in (node.start, node.stop, node.step)]
                if not all(x is None or type(x) is int for x in bounds):
                    raise self.error("range bounds of a tensor index must be compile-time ints")
                items.append(RangeIdx(*bounds))
            else:
                v = self.ev(node)
                if v is None:
                    return None
                items.append(PackedDim(v) if isinstance(v, tuple) else v)
        return items

    def _access(self, node: ast.TensorAccess) -> Any:
        tensor = self.tensor_of(node.tensor)
        if tensor is None:
            return None
        items = self.index_items(node.indices)
        if items is None:
            return None
        pad = node is self.pad_node
        return self.access(tensor, items, pad)

    def access(self, tensor: Any, items: list[Any], pad: bool = False) -> Any:
        if isinstance(tensor, tuple):
            return tuple(self.access(t, items, pad) for t in tensor)
        packed = [d for d, it in enumerate(items) if isinstance(it, RangeIdx | PackedDim)]
        if packed:
            d = packed[0]
            it = items[d]
            if isinstance(it, RangeIdx):
                shape = tensor.shape if isinstance(tensor, TRef) else tensor.refs[0].shape
                if d >= len(shape):
                    raise self.error("too many indices in a tensor access")
                values: tuple[Any, ...] = it.resolve(shape[d])
            else:
                values = it.items
            return tuple(self.access(tensor, items[:d] + [v] + items[d + 1:], pad) for v in values)
        if isinstance(tensor, TStack):
            return self.stacked(tensor, items)
        if len(items) != len(tensor.shape):
            raise self.error(f"tensor '{tensor.name}' has rank {len(tensor.shape)} but is accessed with "
                             f"{len(items)} indices")
        for it in items:
            if isinstance(it, Counter):
                raise self.error(self._misuse(it))
            if not (_is_item(it) or isinstance(it, BIdx)) or it is None or isinstance(it, float | str):
                raise self.error(f"invalid tensor index {it!r}")
        view = self.view_access(tensor, items, pad)
        if view is not None:
            return view
        return self.gather(tensor, items)

    # -- views

    def view_access(self, tref: TRef, items: list[Any], pad: bool) -> Dyn | None:
        """The access as a numpy view, when every index is affine with distinct axes."""
        shape = tref.shape
        space = self.space
        plan: list[tuple[Any, ...]] = []
        used: list[int] = []
        valid = None
        for d, it in enumerate(items):
            extent = shape[d]
            guarded = False
            if isinstance(it, BIdx):
                if isinstance(it.value, Aff | int) and type(it.value) is not bool and _in_range(it.value, extent):
                    it = it.value  # never out of range: the guard is a no-op
                elif it.skip and isinstance(it.value, Aff) and len(it.value.terms) <= 2 and all(
                        c > 0 for _, c in it.value.terms):
                    it, guarded = it.value, True
                else:
                    return None
            if type(it) is int:
                if not 0 <= it < extent:
                    return None
                plan.append(("int", it))
            elif isinstance(it, Dyn) and it.axis is not None:
                plan.append(("param", it))
            elif isinstance(it, Aff):
                base = it.const + sum(c * space.starts[a] for a, c in it.terms)
                axes = [a for a, _ in it.terms]
                used.extend(axes)
                if guarded:
                    terms = sorted(it.terms, key=lambda t: space.lengths[t[0]], reverse=True)
                    lo, hi = it.range()
                    pads = (max(0, -lo), max(0, hi - (extent - 1)))
                    ok = np.logical_and(it.arr() >= 0, it.arr() < extent)
                    valid = ok if valid is None else np.logical_and(valid, ok)
                    if len(terms) == 1:
                        (a, c), = terms
                        plan.append(("pslice", a, c, base, pads))
                    else:
                        (ai, ci), (aj, cj) = terms
                        plan.append(("window", ai, ci, aj, cj, base, pads))
                    continue
                if not _in_range(it, extent):
                    return None
                if len(it.terms) == 1:
                    (a, c), = it.terms
                    plan.append(("slice", a, c, base))
                else:
                    terms = sorted(it.terms, key=lambda t: -t[1])
                    for (_, c1), (a2, c2) in zip(terms, terms[1:], strict=False):
                        if c1 <= 0 or c1 != c2 * space.lengths[a2]:
                            return None
                    if terms[-1][1] <= 0:
                        return None
                    plan.append(("split", tuple(a for a, _ in terms), terms[-1][1], base))
            else:
                return None
        if len(set(used)) != len(used):
            return None
        padded = any(p[0] in ("pslice", "window") and any(p[-1]) for p in plan)
        pad_value = ops.identity(self.pad_op, tref.kind) if pad else 0
        if pad and valid is not None:
            valid = None  # skipped entries read the accumulation's null element instead
        core, axes = _view_builder(plan, space, pad_value)
        varying = tref.name in self.varying_tensors or any(p[0] == "param" for p in plan)
        expand = _expander(axes, space)

        def get(rt: Any) -> np.ndarray:
            return core(tref.array(rt), rt)

        valid_arr = valid

        def run(rt: Any) -> Arr:
            return Arr(expand(core(tref.array(rt), rt)), valid_arr)

        dyn = Dyn(run, varying, factors=(Factor(get, axes, padded),) if not varying else None)
        return dyn

    # -- gathers

    def gather(self, tref: TRef, items: list[Any], lead: Any = None, refs: tuple[TRef, ...] = ()) -> Any:
        """`x[i, j, ...]` by advanced indexing with broadcast index arrays; with `lead`, an item of
        the tensor pack `refs` chosen at runtime (the items are stacked)."""
        fixed = []
        dims = ([(lead, len(refs))] if lead is not None else []) + list(zip(items, tref.shape, strict=True))
        for d, (it, extent) in enumerate(dims):
            fixed.append(self.fix_index(it, extent, tref.name, d))
        varying = tref.name in self.varying_tensors
        nd = self.space.ndim
        stacked = lead is not None

        def take(rt: Any, *idx: Any) -> Arr:
            if stacked:
                arr = rt.stacks.get(tref.name) if not varying else None
                if arr is None:
                    arr = np.stack([r.array(rt) for r in refs])
                    if not varying:
                        rt.stacks[tref.name] = arr
            else:
                arr = tref.array(rt)
            datas, valid, err = [], None, None
            for x in idx:
                if isinstance(x, Arr):
                    datas.append(x.data)
                    valid = ops.mask_and(valid, x.valid)
                    err = ops.mask_or(err, x.err)
                else:
                    datas.append(x)
            out = arr[tuple(datas)]
            out = np.asarray(out)
            if out.ndim != nd:
                out = out.reshape((1,) * (nd - out.ndim) + out.shape)
            return Arr(out, valid, err)

        args = fixed
        dyns = [a for a in args if isinstance(a, Dyn)]
        for a in dyns:
            a.uses += 1

        def run(rt: Any) -> Arr:
            return take(rt, *[a.get(rt) if isinstance(a, Dyn) else a for a in args])

        return Dyn(run, varying or any(a.varying for a in dyns))

    def stacked(self, ts: TStack, items: list[Any]) -> Any:
        ref = ts.refs[0]
        if len(items) != len(ref.shape):
            raise self.error(f"tensor pack '{ts.name}' items have rank {len(ref.shape)} but are accessed with "
                             f"{len(items)} indices")
        return self.gather(ref, items, ts.index, ts.refs)

    def fix_index(self, it: Any, extent: int, name: str, dim: int) -> Any:
        """An index made safe to gather with: clipped into range, with the validity of a skipping
        bounded index and the error mask of an unguarded one that is out of range."""
        if isinstance(it, BIdx):
            v, lo, hi = it.value, it.low, it.high
            if it.skip:
                return self.lift(lambda x: _skip_index(x, extent), v)
            self.reason(f"a remapped index of '{name}' (dimension {dim}) is still out of range [0, {extent})")
            return self.lift(lambda x, a, b: _remap_index(x, a, b, extent), v, lo, hi)
        if type(it) is int and 0 <= it < extent:
            return it
        if isinstance(it, Aff) and _in_range(it, extent):
            return Arr(it.arr())
        self.reason(f"an index of '{name}' (dimension {dim}) is out of range [0, {extent})")
        return self.lift(lambda x: _check_index(x, extent), it)


def _in_range(v: Aff | int, extent: int) -> bool:
    if isinstance(v, int):
        return 0 <= v < extent
    if 0 in v.space.lengths:
        return True
    lo, hi = v.range()
    return lo >= 0 and hi < extent


def _int_data(x: Any) -> tuple[Any, Any, Any]:
    x = ops.conc(x)
    if isinstance(x, Arr):
        return x.data, x.valid, x.err
    return x, None, None


def _skip_index(x: Any, extent: int) -> Arr:
    d, v, e = _int_data(x)
    d = np.asarray(d)
    ok = np.logical_and(d >= 0, d < extent)
    return Arr(np.clip(d, 0, max(extent - 1, 0)), ops.mask_and(v, ok), e)


def _remap_index(x: Any, lo: Any, hi: Any, extent: int) -> Arr:
    d, v, e = _int_data(x)
    dl, vl, el = _int_data(lo)
    dh, vh, eh = _int_data(hi)
    d = np.asarray(d)
    r = np.where(d < 0, dl, np.where(d >= extent, dh, d))
    bad = np.logical_or(r < 0, r >= extent)
    err = ops.mask_or(e, bad if bad.any() else None)
    for m in (el, eh):
        err = ops.mask_or(err, m)
    return Arr(np.clip(r, 0, max(extent - 1, 0)), ops.mask_and(ops.mask_and(v, vl), vh), err)


def _check_index(x: Any, extent: int) -> Arr:
    d, v, e = _int_data(x)
    d = np.asarray(d)
    bad = np.logical_or(d < 0, d >= extent)
    return Arr(np.clip(d, 0, max(extent - 1, 0)), v, ops.mask_or(e, bad if bad.any() else None))


def _pack_gather(arr: np.ndarray, i: Any) -> Any:
    d, v, e = _int_data(i)
    n = len(arr)
    d = np.asarray(d)
    d = np.where(d < 0, d + n, d)
    bad = np.logical_or(d < 0, d >= n)
    out = arr[np.clip(d, 0, max(n - 1, 0))] if n else np.zeros(d.shape, arr.dtype)
    err = ops.mask_or(e, bad if bad.any() else None)
    if out.ndim == 0 and v is None and err is None and not isinstance(i, Arr):
        return out.item()
    return Arr(out, v, err)


def _view_builder(plan: list[tuple[Any, ...]], space: Space, pad_value: Any) -> tuple[Callable, tuple[int, ...]]:
    """A function making the view of an accessed tensor, and the space axes of its dimensions."""
    pads = []
    windows = []  # (dim, window length)
    index: list[Any] = []
    after_axes: list[int | tuple[int, ...]] = []
    window_tail: list[tuple[int, int, int]] = []  # (axis j, dilation, n_j)
    params: list[tuple[int, Dyn]] = []
    for d, p in enumerate(plan):
        kind = p[0]
        if kind == "int":
            pads.append((0, 0))
            index.append(p[1])
        elif kind == "param":
            pads.append((0, 0))
            params.append((len(index), p[1]))
            index.append(0)
        elif kind == "raw":  # a whole dimension, not tied to an axis (axis -1)
            pads.append((0, 0))
            index.append(slice(None))
            after_axes.append(("raw", p[1]))
        elif kind == "slice":
            _, a, c, base = p
            n = space.lengths[a]
            pads.append((0, 0))
            index.append(_slice(base, c, n))
            after_axes.append(a)
        elif kind == "split":
            _, axes, step, base = p
            total = 1
            for a in axes:
                total *= space.lengths[a]
            pads.append((0, 0))
            index.append(_slice(base, step, total))
            after_axes.append(tuple(axes))
        elif kind == "pslice":
            _, a, c, base, pad = p
            pads.append(pad)
            index.append(_slice(base + pad[0], c, space.lengths[a]))
            after_axes.append(a)
        else:  # window
            _, ai, ci, aj, cj, base, pad = p
            ni, nj = space.lengths[ai], space.lengths[aj]
            pads.append(pad)
            w = cj * (nj - 1) + 1
            windows.append((d, w))
            index.append(_slice(base + pad[0], ci, ni))
            after_axes.append(ai)
            window_tail.append((aj, cj, nj))
    for aj, cj, nj in window_tail:
        index.append(slice(0, cj * (nj - 1) + 1, cj))
        after_axes.append(aj)
    any_pad = any(lo or hi for lo, hi in pads)
    split_shape = []
    axes: list[int] = []
    for a in after_axes:
        if isinstance(a, tuple) and a and a[0] == "raw":
            split_shape.append(a[1])
            axes.append(-1)
        elif isinstance(a, tuple):
            split_shape.extend(space.lengths[x] for x in a)
            axes.extend(a)
        else:
            split_shape.append(space.lengths[a])
            axes.append(a)
    needs_reshape = any(isinstance(a, tuple) and not (a and a[0] == "raw") for a in after_axes)
    win_dims = tuple(d for d, _ in windows)
    win_shape = tuple(w for _, w in windows)

    def core(arr: np.ndarray, rt: Any) -> np.ndarray:
        if any_pad:
            arr = np.pad(arr, pads, constant_values=pad_value)
        if windows:
            arr = sliding_window_view(arr, win_shape, axis=win_dims)
        idx = index
        if params:
            idx = list(index)
            for pos, dyn in params:
                value = dyn.get(rt)
                if not 0 <= value < arr.shape[pos]:
                    raise LoweringError(f"index {value} is out of range [0, {arr.shape[pos]})")
                idx[pos] = value
        view = arr[(*idx, Ellipsis)]
        if needs_reshape:
            view = view.reshape(split_shape)
        return view

    return core, tuple(axes)


def _slice(base: int, step: int, n: int) -> slice:
    if n == 0:
        return slice(0, 0)
    last = base + step * (n - 1)
    if step > 0:
        return slice(base, last + 1, step)
    return slice(base, last - 1 if last > 0 else None, step)


def _expander(axes: tuple[int, ...], space: Space) -> Callable[[np.ndarray], np.ndarray]:
    """Transposes a view with dimensions `axes` into the space's layout (extent 1 elsewhere)."""
    order = sorted(range(len(axes)), key=lambda k: axes[k])
    identity = order == list(range(len(axes)))
    shape = list(space.ones())
    for a in axes:
        shape[a] = space.lengths[a]
    target = tuple(shape)

    def expand(view: np.ndarray) -> np.ndarray:
        if not identity:
            view = view.transpose(order)
        return view.reshape(target)

    return expand


_DISPATCH: dict[type, Callable[[Stager, Any], Any]] = {
    ast.Name: Stager._name,
    ast.Unary: Stager._unary,
    ast.Binary: Stager._binary,
    ast.Fold: Stager._fold,
    ast.Select: Stager._select,
    ast.Cast: Stager._cast,
    ast.Call: Stager._call,
    ast.ListExpr: Stager._list,
    ast.Subscript: Stager._subscript,
    ast.Substitute: Stager._substitute,
    ast.Bounded: Stager._bounded,
    ast.TensorAccess: Stager._access,
    ast.Property: Stager._property,
    ast.Expand: Stager._misplaced,
    ast.Range: Stager._misplaced,
    ast.Zip: Stager._misplaced,
}
