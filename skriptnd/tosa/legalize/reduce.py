"""Reductions (math.*_reduce, argmax/argmin and their _nd forms), softmax and cumsum."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.tosa.legalize.core import Builder, Rule, Subgraph, env, norm_axes, shape_of


def _reduce(name: str, mean: bool = False) -> Callable[[Any], Subgraph]:
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        shape = shape_of(op.inputs[0])
        mask = list(env(op, "axes_mask"))
        x = b.arg(0)
        count = 1
        kept = list(shape)
        for axis, m in enumerate(mask):
            if m:
                x = b.emit(name, x, axis=axis)
                count *= shape[axis]
                kept[axis] = 1
        if mean:
            x = b.mul(x, b.scalar(1.0 / count, len(shape)))
        x = b.reshape(x, kept, shape_of(op.outputs[0]))
        return b.done(x)
    return build


def _softmax(op: Operation) -> Subgraph:
    b = Builder(op)
    x = b.arg(0)
    axes = sorted(set(norm_axes(op.attribs["axes"], len(shape_of(op.inputs[0])))))
    m = x
    for a in axes:
        m = b.emit("REDUCE_MAX", m, axis=a)
    e = b.emit("EXP", b.emit("SUB", x, m))
    s = e
    for a in axes:
        s = b.emit("REDUCE_SUM", s, axis=a)
    return b.done(b.mul(e, b.emit("RECIPROCAL", s)))


def _argmax(op: Operation, axes: list[int], nd: bool) -> Subgraph:
    """ARGMAX over the reduced axes flattened in their order (row-major, so the first extremum in
    @lower's iteration order wins); argmin is ARGMAX of NEGATE(x). The flat index is split into
    per-axis coordinates with INTDIV/MUL/SUB on int32 (exact: indices < 2^31)."""
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    rank = len(shape)
    x = b.arg(0)
    if op.op.startswith("math.argmin"):
        x = b.neg(x)
    red = sorted(axes)
    keep = [a for a in range(rank) if a not in red]
    x = b.transpose(x, keep + red)
    kept = [shape[a] for a in keep]
    n = int(np.prod([shape[a] for a in red], dtype=np.int64))
    x = b.reshape(x, [*kept, *[shape[a] for a in red]], [*kept, n])
    # @lower keeps index 0 unless an item compares strictly greater: NaNs are never picked (IGNORE),
    # and a NaN at index 0 keeps 0 (nothing compares greater than it)
    idx = b.emit("ARGMAX", x, axis=len(kept), nan_mode="IGNORE")  # shape kept
    first = b.reshape(b.slice(x, [*kept, n], [0] * (len(kept) + 1), [*kept, 1]), [*kept, 1], kept)
    idx = b.emit("SELECT", b.emit("EQUAL", first, first), idx, b.const(np.zeros([1] * len(kept)), np.int32))
    if not nd:
        return b.done(b.reshape(idx, kept, shape_of(op.outputs[0])), ints=[True])
    kr = len(kept)
    coords: dict[int, str] = {}
    rest = b.reshape(idx, kept, [*kept, 1])
    stride = n
    for a in red:
        stride //= shape[a]
        q = b.emit("INTDIV", rest, b.const(np.full([1] * (kr + 1), stride), np.int32))
        coords[a] = q
        rest = b.emit("SUB", rest, b.emit("MUL", q, b.const(np.full([1] * (kr + 1), stride), np.int32),
                                          b.const([0], np.int8)))
    out = b.concat([coords[a] for a in axes], kr)  # in the order of 'axes', as i[axes] in @lower
    return b.done(b.reshape(out, [*kept, len(axes)], shape_of(op.outputs[0])), ints=[True])


def _argmax1(op: Operation) -> Subgraph:
    return _argmax(op, norm_axes(op.attribs["axis"], len(shape_of(op.inputs[0]))), nd=False)


def _argmax_nd(op: Operation) -> Subgraph:
    rank = len(shape_of(op.inputs[0]))
    axes = norm_axes(op.attribs.get("axes"), rank) if op.attribs.get("axes") is not None else list(range(rank))
    return _argmax(op, axes, nd=True)


def _cumsum(op: Operation) -> Subgraph:
    """SLICE per position along the axis and a running ADD (the summation order of @lower's loop),
    CONCAT of the partial sums."""
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    rank = len(shape)
    axis = norm_axes(op.attribs["axis"], rank)[0]
    n = shape[axis]
    one = list(shape)
    one[axis] = 1
    items = []
    for k in range(n):
        start = [0] * rank
        start[axis] = k
        items.append(b.slice(b.arg(0), shape, start, one))
    order = list(range(n))[::-1] if op.attribs.get("reverse") else list(range(n))
    sums: dict[int, str] = {}
    acc = b.const(np.zeros(one))
    for k in order:
        nxt = b.emit("ADD", acc, items[k])
        sums[k] = acc if op.attribs.get("exclusive") else nxt
        acc = nxt
    return b.done(b.concat([sums[k] for k in range(n)], axis))


RULES: dict[str, list[Rule]] = {
    "math.sum_reduce": [Rule("REDUCE_SUM per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_SUM"))],
    "math.max_reduce": [Rule("REDUCE_MAX per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_MAX"))],
    "math.min_reduce": [Rule("REDUCE_MIN per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_MIN"))],
    "math.prod_reduce": [Rule("REDUCE_PRODUCT per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_PRODUCT"))],
    "math.any_reduce": [Rule("REDUCE_ANY per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_ANY"))],
    "math.all_reduce": [Rule("REDUCE_ALL per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_ALL"))],
    "math.mean_reduce": [Rule("REDUCE_SUM per axis, MUL by 1/count (+ RESHAPE if squeeze)",
                              _reduce("REDUCE_SUM", mean=True))],
    "math.argmax": [Rule("ARGMAX nan_mode=IGNORE, SELECT 0 where the first item is NaN (as @lower); int32 index "
                         "(widened to int) + RESHAPE", _argmax1)],
    "math.argmin": [Rule("as argmax on NEGATE(x)", _argmax1)],
    "math.argmax_nd": [Rule("TRANSPOSE/RESHAPE the axes into one, ARGMAX, INTDIV/SUB into coordinates, CONCAT",
                            _argmax_nd)],
    "math.argmin_nd": [Rule("as argmax_nd on NEGATE(x)", _argmax_nd)],
    "nn.softmax": [Rule("REDUCE_MAX, SUB, EXP, REDUCE_SUM per axis, MUL by RECIPROCAL", _softmax)],
    "math.cumsum": [Rule("SLICE per position, running ADD in @lower's order, CONCAT", _cumsum)],
}
