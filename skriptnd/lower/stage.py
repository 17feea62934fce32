"""Staged evaluation of @lower expressions over a formula's index space (spec §2.12, §2.4).

`Stager.ev(node)` returns a staged value (see values.py): whatever does not depend on tensor
data is computed right away (compile-time sub-expressions through the exact compile-time
evaluator, index arithmetic as `Aff`, masks as arrays); the rest becomes `Dyn` closures that
the plan runs. This module evaluates each kind of expression node; the stager's state and helpers
live in :mod:`.staging`, tensor accesses (numpy views, or gathers) in :mod:`.access`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skriptnd.lower import ops
from skriptnd.lower.access import AccessStager, pack_gather
from skriptnd.lower.staging import PackedDim, Shared
from skriptnd.lower.values import (
    BOOL,
    INT,
    REAL,
    Aff,
    BIdx,
    Dyn,
    Staged,
    kind_of,
)
from skriptnd.syntax import ast

__all__ = ["PackedDim", "Shared", "Stager"]


class Stager(AccessStager):
    """Stages the expressions of one formula instance over `space` (state and helpers: :class:`StagerCore`;
    tensor accesses: :class:`AccessStager`)."""

    # ------------------------------------------------------------ evaluation

    def ev(self, node: ast.Expr) -> Staged:
        if self.is_static(node):
            return self.static_value(node)
        method = _DISPATCH.get(type(node))
        if method is None:
            raise self.error(f"{type(node).__name__} cannot be evaluated in @lower")
        return method(self, node)

    def _name(self, node: ast.Name) -> Staged:
        try:
            return self.scope[node.id]
        except KeyError:
            return self.static_value(node)

    def _unary(self, node: ast.Unary) -> Staged:
        if node.op == "?":
            return self.ev(node.operand) is not None
        v = self.ev(node.operand)
        return self.map1(lambda x: self.unary_item(node.op, x), v)

    def unary_item(self, op: str, x: Staged) -> Staged:
        if x is None:
            return None
        if isinstance(x, Aff) and op in "+-":
            return x if op == "+" else Aff.make({a: -c for a, c in x.terms}, -x.const, x.space)
        if isinstance(x, Dyn) and x.factors is not None and op == "-":
            return self._factor_product(x, None, -1)
        return self.lift(lambda a: ops.unary(op, a), x)

    def _binary(self, node: ast.Binary) -> Staged:
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

    def binary(self, op: str, a: Staged, b: Staged) -> Staged:
        if isinstance(a, tuple) or isinstance(b, tuple):
            if isinstance(a, tuple) and isinstance(b, tuple):
                if len(a) != len(b):
                    raise self.error(f"pack lengths differ: {len(a)} vs {len(b)}")
                return tuple(self.binary(op, x, y) for x, y in zip(a, b, strict=True))
            if isinstance(a, tuple):
                return tuple(self.binary(op, x, b) for x in a)
            return tuple(self.binary(op, a, y) for y in b)
        return self.binary_item(op, a, b)

    def binary_item(self, op: str, a: Staged, b: Staged) -> Staged:
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

    def _factor_product(self, a: Dyn, b: Dyn | None, scale: Staged) -> Dyn:
        plain = self.lift(lambda x, y: ops.binary("*", x, y), a, b if b is not None else scale)
        plain.factors = a.factors + (b.factors if b is not None else ())
        plain.scale = a.scale * (b.scale if b is not None else 1) * scale
        return plain

    def _fold(self, node: ast.Fold) -> Staged:
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

    def _select(self, node: ast.Select) -> Staged:
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

    def select(self, c: Staged, a: Staged, b: Staged) -> Staged:
        if isinstance(c, tuple) or isinstance(a, tuple) or isinstance(b, tuple):
            n = next(len(x) for x in (c, a, b) if isinstance(x, tuple))
            for x in (c, a, b):
                if isinstance(x, tuple) and len(x) != n:
                    raise self.error(f"pack lengths differ in a select: {n} vs {len(x)}")

            def item(x: Staged, i: int) -> Staged:
                return x[i] if isinstance(x, tuple) else x

            return tuple(self.select(item(c, i), item(a, i), item(b, i)) for i in range(n))
        if type(c) is bool:
            return a if c else b
        return self.lift(ops.select, c, a, b)

    def map1(self, fn: Callable[[Any], Any], v: Staged) -> Staged:
        if v is None:
            return None
        if isinstance(v, tuple):
            return tuple(fn(x) for x in v)
        return fn(v)

    def _cast(self, node: ast.Cast) -> Staged:
        return self.cast(node.type, self.ev(node.arg))

    def cast(self, kind: str, v: Staged) -> Staged:
        if kind not in ("int", "real", "bool"):
            raise self.error(f"cannot cast to '{kind}' in @lower")

        def item(x: Staged) -> Staged:
            if x is None:
                return None
            if isinstance(x, Aff) and kind == "int":
                return x
            return self.lift(lambda a: ops.cast(kind, a), x)

        return self.map1(item, v)

    def _call(self, node: ast.Call) -> Staged:
        callee = node.callee
        if callee in self.shared.dtypes and not node.type_args and not node.attrs:
            if len(node.args) != 1:
                raise self.error(f"a cast '{callee}(x)' takes one argument")
            return self.cast(self.shared.dtypes[callee], self.ev(node.args[0]))
        if callee in ops.BUILTINS and len(node.args) == 1 and not node.type_args and not node.attrs:
            v = self.ev(node.args[0])
            return self.map1(lambda x: None if x is None else self.lift(lambda a: ops.builtin(callee, a), x), v)
        raise self.error(f"'{callee}' is not a built-in function or a cast; operators cannot be invoked in @lower")

    def _list(self, node: ast.ListExpr) -> Staged:
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

    def expand(self, node: ast.Expand) -> tuple[Staged, ...] | None:
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

    def _subscript(self, node: ast.Subscript) -> Staged:
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

    def subscript(self, base: Staged, index: Staged) -> Staged:
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
        return self.lift(lambda i: pack_gather(arr, i), index)

    def _pack_array(self, base: tuple[Staged, ...]) -> np.ndarray:
        hit = self.shared.pack_arrays.get(id(base))
        if hit is not None and hit[0] is base:
            return hit[1]
        kind = kind_of(base[0]) if base else "int"
        arr = np.asarray(base, dtype={"int": INT, "real": REAL, "bool": BOOL}[kind])
        self.shared.pack_arrays[id(base)] = (base, arr)
        return arr

    def _substitute(self, node: ast.Substitute) -> Staged:
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

    def _bounded(self, node: ast.Bounded) -> Staged:
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

            def item(x: Staged, i: int) -> Staged:
                return x[i] if isinstance(x, tuple) else x

            return tuple(BIdx(item(v, i), item(lo, i), item(hi, i)) for i in range(n))
        return BIdx(v, lo, hi)

    def _property(self, node: ast.Property) -> Staged:
        raise self.error(f"'.{node.name}' of a runtime value is not defined")

    def _misplaced(self, node: ast.Expr) -> Staged:
        raise self.error(f"{type(node).__name__} can only appear inside a list or an index")

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
