"""Tensor accesses of @lower formulas (spec §2.12): numpy views where the indices allow, gathers otherwise.

Accesses whose indices are affine in the index symbols become numpy views (basic slicing, reshapes for
mixed-radix indices, padding plus sliding windows for bounded ``stride * i + dilation * j - offset``
indices); any other access is a gather with broadcast index arrays (numpy advanced indexing), its indices
made safe first (clipped, with the validity mask of a skipping bounded index and the error mask of an
unguarded one out of range).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from skriptnd.lower import ops
from skriptnd.lower.staging import PackedDim, StagerCore, is_item
from skriptnd.lower.values import (
    Aff,
    Arr,
    BIdx,
    Concrete,
    Counter,
    Dyn,
    Factor,
    LoweringError,
    Mask,
    RangeIdx,
    Runtime,
    Space,
    Staged,
    TRef,
    TStack,
)
from skriptnd.syntax import ast


class AccessStager(StagerCore):
    """The tensor accesses of a :class:`skriptnd.lower.stage.Stager`."""

    def tensor_of(self, node: ast.Expr) -> Staged:
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

    def _access(self, node: ast.TensorAccess) -> Staged:
        tensor = self.tensor_of(node.tensor)
        if tensor is None:
            return None
        items = self.index_items(node.indices)
        if items is None:
            return None
        pad = node is self.pad_node
        return self.access(tensor, items, pad)

    def access(self, tensor: Staged, items: list[Any], pad: bool = False) -> Staged:
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
            if not (is_item(it) or isinstance(it, BIdx)) or it is None or isinstance(it, float | str):
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
        core, axes = view_builder(plan, space, pad_value)
        varying = tref.name in self.varying_tensors or any(p[0] == "param" for p in plan)
        expand = _expander(axes, space)

        def get(rt: Runtime) -> np.ndarray:
            return core(tref.array(rt), rt)

        valid_arr = valid

        def run(rt: Runtime) -> Arr:
            return Arr(expand(core(tref.array(rt), rt)), valid_arr)

        dyn = Dyn(run, varying, factors=(Factor(get, axes, padded),) if not varying else None)
        return dyn

    # -- gathers

    def gather(self, tref: TRef, items: list[Any], lead: Staged = None, refs: tuple[TRef, ...] = ()) -> Staged:
        """`x[i, j, ...]` by advanced indexing with broadcast index arrays; with `lead`, an item of
        the tensor pack `refs` chosen at runtime (the items are stacked)."""
        fixed = []
        dims = ([(lead, len(refs))] if lead is not None else []) + list(zip(items, tref.shape, strict=True))
        for d, (it, extent) in enumerate(dims):
            fixed.append(self.fix_index(it, extent, tref.name, d))
        varying = tref.name in self.varying_tensors
        nd = self.space.ndim
        stacked = lead is not None

        def take(rt: Runtime, *idx: Concrete) -> Arr:
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

        def run(rt: Runtime) -> Arr:
            return take(rt, *[a.get(rt) if isinstance(a, Dyn) else a for a in args])

        return Dyn(run, varying or any(a.varying for a in dyns))

    def stacked(self, ts: TStack, items: list[Any]) -> Staged:
        ref = ts.refs[0]
        if len(items) != len(ref.shape):
            raise self.error(f"tensor pack '{ts.name}' items have rank {len(ref.shape)} but are accessed with "
                             f"{len(items)} indices")
        return self.gather(ref, items, ts.index, ts.refs)

    def fix_index(self, it: Staged, extent: int, name: str, dim: int) -> Staged:
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


def _int_data(x: Staged) -> tuple[Concrete, Mask, Mask]:
    x = ops.conc(x)
    if isinstance(x, Arr):
        return x.data, x.valid, x.err
    return x, None, None


def _skip_index(x: Staged, extent: int) -> Arr:
    d, v, e = _int_data(x)
    d = np.asarray(d)
    ok = np.logical_and(d >= 0, d < extent)
    return Arr(np.clip(d, 0, max(extent - 1, 0)), ops.mask_and(v, ok), e)


def _remap_index(x: Staged, lo: Staged, hi: Staged, extent: int) -> Arr:
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


def _check_index(x: Staged, extent: int) -> Arr:
    d, v, e = _int_data(x)
    d = np.asarray(d)
    bad = np.logical_or(d < 0, d >= extent)
    return Arr(np.clip(d, 0, max(extent - 1, 0)), v, ops.mask_or(e, bad if bad.any() else None))


def pack_gather(arr: np.ndarray, i: Staged) -> Staged:
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


def view_builder(plan: list[tuple[Any, ...]], space: Space, pad_value: Staged) -> tuple[Callable, tuple[int, ...]]:
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

    def core(arr: np.ndarray, rt: Runtime) -> np.ndarray:
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
