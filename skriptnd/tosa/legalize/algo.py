"""algo.top_k as comparisons: TOSA has no sort, but each item's rank is a count of the items that
come before it (O(m^2) comparisons along the axis), and the outputs are one-hot selections by rank.

The order is the intrinsic kernel's (skriptnd.execute.intrinsics.top_k): descending (``largest``) or
ascending values, ties by lower index, NaNs last; ``sorted=false`` keeps the selected items in index
order."""

from __future__ import annotations

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.tosa.legalize.core import Builder, Rule, Subgraph, norm_axes, shape_of

_MAX_EXTENT = 256


def _top_k_check(op: Operation) -> str | None:
    shape = shape_of(op.inputs[0])
    m = shape[norm_axes(op.attribs.get("axis", 0), len(shape))[0]]
    if m > _MAX_EXTENT:
        return f"top_k over {m} items (> {_MAX_EXTENT}: the m x m comparisons would be too large)"
    return None


def _top_k(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    rank = len(shape)
    axis = norm_axes(op.attribs.get("axis", 0), rank)[0]
    m = shape[axis]
    k = shape_of(op.outputs[0])[axis]
    others = [a for a in range(rank) if a != axis]
    rows = int(np.prod([shape[a] for a in others], dtype=np.int64))
    x = b.reshape(b.transpose(b.arg(0), [*others, axis]), [*[shape[a] for a in others], m], [rows, m])
    key = b.neg(x) if op.attribs.get("largest", True) else x
    kj = b.reshape(key, [rows, m], [rows, m, 1])  # j along axis 1
    ki = b.reshape(key, [rows, m], [rows, 1, m])  # i along axis 2
    j_lt_i = b.const((np.arange(m)[:, None] < np.arange(m)[None, :]).reshape(1, m, m), np.bool_)
    tie = b.emit("LOGICAL_AND", b.emit("EQUAL", kj, ki), j_lt_i)
    nan_i = b.emit("LOGICAL_NOT", b.emit("EQUAL", ki, ki))
    nan_last = b.emit("LOGICAL_AND", nan_i, b.emit("LOGICAL_OR", b.emit("EQUAL", kj, kj), j_lt_i))
    before = b.emit("LOGICAL_OR", b.emit("LOGICAL_OR", b.emit("GREATER", ki, kj), tie), nan_last)
    one, zero = b.const(np.ones([1, 1, 1])), b.const(np.zeros([1, 1, 1]))
    slot = b.emit("REDUCE_SUM", b.emit("SELECT", before, one, zero), axis=1)  # [rows, 1, m]: the rank (exact)
    if not op.attribs.get("sorted", True):  # selected items in index order
        selected = b.emit("GREATER", b.const(np.full([1, 1, 1], k)), slot)
        sel_j = b.reshape(selected, [rows, 1, m], [rows, m, 1])
        earlier = b.emit("REDUCE_SUM", b.emit("SELECT", b.emit("LOGICAL_AND", sel_j, j_lt_i), one, zero), axis=1)
        slot = b.emit("SELECT", selected, earlier, b.const(np.full([1, 1, 1], k)))
    slot = b.reshape(slot, [rows, 1, m], [rows, m, 1])
    onehot = b.emit("EQUAL", slot, b.const(np.arange(k).reshape(1, 1, k)))  # [rows, m, k]
    xv = b.reshape(x, [rows, m], [rows, m, 1])
    values = b.emit("REDUCE_MAX", b.emit("SELECT", onehot, xv, b.const(np.full([1, 1, 1], -np.inf))), axis=1)
    iota = b.const(np.arange(m).reshape(1, m, 1), np.int32)
    index = b.emit("REDUCE_MAX", b.emit("SELECT", onehot, iota, b.const(np.zeros([1, 1, 1]), np.int32)), axis=1)
    out = [*[shape[a] for a in others], k]
    back = [0] * rank
    for i, a in enumerate([*others, axis]):
        back[a] = i

    def restore(v: str) -> str:
        return b.transpose(b.reshape(v, [rows, 1, k], out), back)

    return b.done(restore(values), restore(index), ints=[False, True])


RULES: dict[str, list[Rule]] = {
    "algo.top_k": [Rule("rank = REDUCE_SUM of SELECT(comes-before, 1, 0) over m x m comparisons (ties by index, NaNs "
                        "last); values and int32 indices by one-hot SELECT + REDUCE_MAX", _top_k, _top_k_check)],
}
