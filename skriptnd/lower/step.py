"""Running one step of a @lower plan: a formula instance's staged right-hand side assigned over its index space.

A :class:`Step` is what :mod:`.plan` compiles a formula instance into; it holds the writes its left-hand
side makes (:class:`Write`) and, on each run, evaluates the staged value and assigns it: through a numpy
view of the output for a structured left-hand side (``ufunc.reduce`` over the reduced index symbols, or
``np.einsum`` for a product-sum of views), tap by tap for a sliding-window left-hand side (:class:`Window`),
by scattering (``ufunc.at``) otherwise, by enumerating the points for a data-dependent extent, and in a
Python loop over the dependency-carrying index symbols for an update that reads what it writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skriptnd.lower import ops
from skriptnd.lower.values import Aff as _Aff
from skriptnd.lower.values import Arr as _Arr
from skriptnd.lower.values import (
    Concrete,
    Dyn,
    LoweringError,
    Runtime,
    Space,
    Staged,
    TRef,
)
from skriptnd.source import NO_SPAN
from skriptnd.syntax import ast

_ASSIGN = ("=", ":=")

#: where a contribution is written: None everywhere, False nowhere, else a bool array over the space
Cover = np.ndarray | bool | None


@dataclass(eq=False)
class Write:
    """One tensor written by a formula (a packed assignment writes several)."""

    tref: TRef
    items: list[Any]
    value: Any
    struct: tuple[Any, tuple[int, ...], list] | None = None  # (view builder, axes, plan) of a structured lhs
    fixed: list[Any] | None = None  # clipped/masked indices for scattering
    counter_dim: int | None = None
    einsum_path: Any = None
    window: Window | None = None  # a left-hand side with bounded `|s * i + d * j - o|` indices


@dataclass(eq=False)
class Window:
    """A left-hand side whose bounded indices address sliding windows (deconv-like): the view of
    the output keeps those dimensions whole (`raw`), and the contribution is added tap by tap."""

    core: Any
    dims: list[tuple[Any, ...]]  # per view dimension: ("axis", a) or ("raw", ai, ci, aj | None, cj, base, extent)
    order: list[int]  # the axes of the contribution's dimensions, view dimension by view dimension


class Step:
    """One formula instance over one index space."""

    def __init__(self, formula: ast.Lowering, space: Space, writes: list[Write], cond: Staged,
                 reasons: list[str], seq_axes: tuple[int, ...] = ()) -> None:
        self.formula = formula
        self.op = formula.op
        self.space = space
        self.writes = writes
        self.cond = cond
        self.reasons = reasons
        self.seq_axes = seq_axes
        self.space_lengths: tuple[int, ...] = space.lengths  # the full extents (seq axes are 1 in space)
        self.einsum = [self._einsum_ok(w) for w in writes]

    def _einsum_ok(self, w: Write) -> bool:
        v = w.value
        return (self.op == "+=" and self.cond is True and (w.struct is not None or w.window is not None)
                and not self.seq_axes and isinstance(v, Dyn) and v.factors is not None and not v.varying
                and (w.struct is None or all(p[0] != "param" for p in w.struct[2])))

    @property
    def span(self) -> Any:
        return self.formula.span

    def error(self, message: str) -> LoweringError:
        return LoweringError(message, self.span)

    def run(self, rt: Runtime) -> None:
        try:
            self._run(rt)
        except LoweringError as err:
            if err.span is NO_SPAN:
                raise LoweringError(err.message, self.span) from None
            raise
        except (IndexError, ValueError, TypeError, FloatingPointError, MemoryError) as err:
            raise LoweringError(f"{type(err).__name__}: {err}", self.span) from err

    def _run(self, rt: Runtime) -> None:
        rt.cache.clear()
        if not self.seq_axes:
            self._once(rt)
            return
        rt.seq = True
        try:
            ranges = [range(self.space_lengths[a]) for a in self.seq_axes]
            for point in itertools.product(*ranges):
                rt.params.update(zip(self.seq_axes, point, strict=True))
                rt.iter_cache.clear()
                self._once(rt)
        finally:
            rt.seq = False
            rt.iter_cache.clear()
            rt.params.clear()

    def _once(self, rt: Runtime) -> None:
        self._offsets: dict[Any, int] = {}
        cond = _get(self.cond, rt)
        values = []
        for w, fast in zip(self.writes, self.einsum, strict=True):
            values.append(None if fast else _get(w.value, rt))
        for w, fast, value in zip(self.writes, self.einsum, values, strict=True):
            out = w.tref.array(rt)
            if fast and w.window is not None:
                self._write_windowed(out, w, self._einsum(w, list(w.window.order), rt))
                continue
            if fast:
                self._write_einsum(out, w, rt)
                continue
            data, mask = self._contribution(value, cond)
            if mask is False:
                continue
            if w.window is not None:
                self._write_windowed(out, w, self._reduced(data, mask, w.window.order, out))
            elif w.counter_dim is not None:
                self._write_counted(out, w, data, mask, rt)
            elif w.struct is not None and self._write_struct(out, w, data, mask, rt):
                pass
            else:
                self._write_scatter(out, w, data, mask, rt)
        for key, end in self._offsets.items():
            rt.offsets[key] = end
            rt.counts[key] = max(rt.counts.get(key, 0), end)

    # -- contributions

    def _contribution(self, value: Staged, cond: Staged) -> tuple[Concrete, Cover]:
        """(data, mask): mask None (everywhere), False (nowhere) or a bool array; raises on errors."""
        if value is None:
            raise self.error("the right-hand side is null (an optional value was not resolved with '??')")
        valid = err = None
        data = value
        if isinstance(value, _Arr):
            data, valid, err = value.data, value.valid, value.err
        if cond is None or cond is False:
            return data, False
        if isinstance(cond, _Arr):
            valid = ops.mask_and(valid, ops.mask_and(cond.data, cond.valid))
            if cond.err is not None and np.any(ops.mask_and(cond.err, cond.valid)):
                raise self.error(self._error_text())
        elif cond is not True:
            valid = ops.mask_and(valid, bool(cond))
        if err is not None and np.any(ops.mask_and(err, valid)):
            raise self.error(self._error_text())
        if valid is not None and not isinstance(valid, np.ndarray):
            valid = bool(valid) or False
            if valid is True:
                valid = None
        return data, valid

    def _error_text(self) -> str:
        if len(self.reasons) == 1:
            return self.reasons[0]
        if self.reasons:
            return "an entry is out of range or invalid; possible causes: " + "; ".join(self.reasons)
        return "invalid arithmetic (division by zero, a negative int exponent or a cast of inf/nan to int)"

    # -- structured writes

    def _write_struct(self, out: np.ndarray, w: Write, data: Concrete, mask: Cover, rt: Runtime) -> bool:
        core, laxes = w.struct[0], w.struct[1]
        view = core(out, rt)
        nd = self.space.ndim
        red = tuple(a for a in range(nd) if a not in laxes)
        perm = _argsort(laxes)
        kind = out.dtype
        if self.op in _ASSIGN:
            arr_data = isinstance(data, np.ndarray)
            for x in (data if arr_data else None, mask):
                if isinstance(x, np.ndarray) and any(x.shape[a] != 1 for a in red):
                    return False  # several points write one element: the last wins (scatter)
            if not arr_data and mask is None:
                view[...] = data
                return True
            d = _to_view(np.asarray(data), red, perm) if arr_data else data
            if mask is None:
                view[...] = d
            else:
                m = _to_view(np.asarray(mask), red, perm)
                np.copyto(view, np.broadcast_to(np.asarray(d, dtype=kind), view.shape) if arr_data else d,
                          where=np.broadcast_to(m, view.shape), casting="unsafe")
            return True
        ufunc = ops.ACCUMULATORS[self.op]
        ident = ops.identity(self.op, _kind(out))
        d = np.asarray(data)
        if d.ndim != nd:
            d = d.reshape((1,) * nd)
        if mask is not None:
            d = np.where(mask, d, ident)
        if red:
            idempotent = self.op in ("&=", "|=", "<?=", ">?=")
            axes = tuple(a for a in red if d.shape[a] != 1 or not idempotent)
            if axes:
                target = tuple(self.space.lengths[a] if a in axes else d.shape[a] for a in range(nd))
                d = np.broadcast_to(d, target)
                d = ufunc.reduce(d, axis=axes, keepdims=True)
            d = d.reshape([d.shape[a] for a in range(nd) if a not in red])
        if perm != list(range(len(perm))):
            d = np.transpose(d, perm)
        d = d.astype(kind, copy=False)
        ufunc(view, d, out=view)
        return True

    def _write_einsum(self, out: np.ndarray, w: Write, rt: Runtime) -> None:
        core, laxes = w.struct[0], w.struct[1]
        view = core(out, rt)
        view += self._einsum(w, list(laxes), rt).astype(out.dtype, copy=False)

    # -- windowed left-hand sides (deconv-like)

    def _einsum(self, w: Write, axes: list[int], rt: Runtime) -> np.ndarray:
        """The product-sum of w's factors over the space, with dimensions `axes` (extent 1 where
        no factor varies)."""
        v: Dyn = w.value
        operands: list[Any] = []
        present: set[int] = set()
        for f in v.factors:
            operands.append(f.get(rt))
            operands.append(list(f.axes))
            present.update(f.axes)
        out_axes = [a for a in axes if a in present]
        operands.append(out_axes)
        if w.einsum_path is None:
            w.einsum_path = np.einsum_path(*operands, optimize="greedy")[0]
        res = np.einsum(*operands, optimize=w.einsum_path)
        scale = v.scale
        for a in range(self.space.ndim):
            if a not in present and a not in axes:
                scale = scale * self.space.lengths[a]
        if scale != 1:
            res = res * scale
        return res.reshape([self.space.lengths[a] if a in present else 1 for a in axes])

    def _reduced(self, data: Concrete, mask: Cover, axes: list[int], out: np.ndarray) -> np.ndarray:
        """The contribution reduced with the accumulation over the axes not in `axes`, with
        dimensions `axes`."""
        nd = self.space.ndim
        ufunc = ops.ACCUMULATORS[self.op]
        ident = ops.identity(self.op, _kind(out))
        d = np.asarray(data)
        if d.ndim != nd:
            d = d.reshape((1,) * nd)
        if mask is not None:
            d = np.where(mask, d, ident)
        red = tuple(a for a in range(nd) if a not in axes)
        if red:
            target = tuple(self.space.lengths[a] if a in red else d.shape[a] for a in range(nd))
            d = ufunc.reduce(np.broadcast_to(d, target), axis=red, keepdims=True)
            d = d.reshape([d.shape[a] for a in range(nd) if a not in red])
        return np.transpose(d, _argsort(axes))

    def _write_windowed(self, out: np.ndarray, w: Write, res: np.ndarray) -> None:
        """Accumulate `res` (dimensions `w.window.order`) into the output, one window tap at a time."""
        win = w.window
        view = win.core(out, None)
        ufunc = ops.ACCUMULATORS[self.op]
        lengths = self.space.lengths
        taps = [range(lengths[d[3]]) if d[0] == "raw" and d[3] is not None else range(1) for d in win.dims]
        res = res.astype(out.dtype, copy=False)
        for tap in itertools.product(*taps):
            out_index: list[Any] = []
            res_index: list[Any] = []
            empty = False
            for d, t in zip(win.dims, tap, strict=True):
                if d[0] == "axis":
                    out_index.append(slice(None))
                    res_index.append(slice(None))
                    continue
                _, ai, ci, aj, cj, base, extent = d
                p0 = base + (cj * t if aj is not None else 0)
                ilo = max(0, -(p0 // ci))
                ihi = min(lengths[ai] - 1, (extent - 1 - p0) // ci)
                if ilo > ihi:
                    empty = True
                    break
                out_index.append(slice(p0 + ci * ilo, p0 + ci * ihi + 1, ci))
                res_index.append(slice(ilo, ihi + 1) if res.shape[len(res_index)] != 1 else slice(None))
                if aj is not None:
                    res_index.append(t if res.shape[len(res_index)] != 1 else 0)
            if empty:
                continue
            sub = view[tuple(out_index)]
            ufunc(sub, res[tuple(res_index)], out=sub)

    # -- scatters

    def _indices(self, w: Write, rt: Runtime, mask: Cover) -> tuple[list[Concrete], Cover]:
        idx, valid = [], mask
        err = None
        for it in w.fixed:
            x = _get(it, rt)
            if isinstance(x, _Arr):
                valid = ops.mask_and(valid, x.valid)
                err = ops.mask_or(err, x.err)
                idx.append(x.data)
            else:
                idx.append(x)
        if err is not None and np.any(ops.mask_and(err, valid)):
            raise self.error("an index of the left-hand side is out of range for '"
                             f"{w.tref.name}' (guard it with '|...|' to skip such points)")
        return idx, valid

    def _write_scatter(self, out: np.ndarray, w: Write, data: Concrete, mask: Cover, rt: Runtime) -> None:
        idx, mask = self._indices(w, rt, mask)
        shape = self.space.shape
        flat = [np.broadcast_to(x, shape).reshape(-1) if isinstance(x, np.ndarray) else x for x in idx]
        vals = np.broadcast_to(np.asarray(data), shape).reshape(-1)
        if mask is not None:
            sel = np.broadcast_to(mask, shape).reshape(-1)
            flat = [x[sel] if isinstance(x, np.ndarray) else x for x in flat]
            vals = vals[sel]
        n = vals.shape[0]
        flat = [x if isinstance(x, np.ndarray) else np.full(n, x, dtype=np.int64) for x in flat]
        vals = vals.astype(out.dtype, copy=False)
        if self.op in _ASSIGN:
            out[tuple(flat)] = vals
        elif self.op == "+=" and out.dtype.kind == "f" and out.flags.c_contiguous:
            linear = np.ravel_multi_index(tuple(flat), out.shape) if out.ndim else np.zeros(n, dtype=np.int64)
            out.reshape(-1)[...] += np.bincount(linear, weights=vals, minlength=out.size).astype(out.dtype)
        else:
            ops.ACCUMULATORS[self.op].at(out, tuple(flat), vals)

    def _write_counted(self, out: np.ndarray, w: Write, data: Concrete, mask: Cover, rt: Runtime) -> None:
        idx, mask = self._indices(w, rt, mask)
        shape = self.space.shape
        sel = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)
        sel = sel.reshape(-1)
        count = int(np.count_nonzero(sel))
        key = (w.tref.name, w.tref.item, w.counter_dim)
        offset = rt.offsets.get(key, 0)
        if offset + count > out.shape[w.counter_dim]:
            raise self.error(f"{offset + count} points satisfy the condition, more than the upper bound "
                             f"{out.shape[w.counter_dim]} of the output extent")
        flat = []
        for d, x in enumerate(idx):
            if d == w.counter_dim:
                flat.append(np.arange(offset, offset + count, dtype=np.int64))
            elif isinstance(x, np.ndarray):
                flat.append(np.broadcast_to(x, shape).reshape(-1)[sel])
            else:
                flat.append(np.full(count, x, dtype=np.int64))
        vals = np.broadcast_to(np.asarray(data), shape).reshape(-1)[sel].astype(out.dtype, copy=False)
        if self.op in _ASSIGN:
            out[tuple(flat)] = vals
        else:
            ops.ACCUMULATORS[self.op].at(out, tuple(flat), vals)
        self._offsets[key] = offset + count


def _argsort(seq: Sequence[int]) -> list[int]:
    """The permutation taking dimensions in ascending axis order to the order of seq."""
    ordered = sorted(seq)
    return [ordered.index(a) for a in seq]


def _to_view(x: np.ndarray, red: tuple[int, ...], perm: list[int]) -> np.ndarray:
    """An array over the space (extent 1 on `red`) as dimensions of the output view."""
    if x.ndim == 0:
        return x
    if red:
        x = x.reshape([x.shape[a] for a in range(x.ndim) if a not in red])
    return x.transpose(perm) if perm != list(range(len(perm))) else x


def _kind(arr: np.ndarray) -> str:
    k = arr.dtype.kind
    return "bool" if k == "b" else "int" if k in "iu" else "real"


def _get(v: Staged, rt: Runtime) -> Staged:
    if isinstance(v, Dyn):
        return v.get(rt)
    if isinstance(v, _Aff):
        return _Arr(v.arr())
    return v
