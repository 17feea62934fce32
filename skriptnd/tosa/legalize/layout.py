"""Data movement (layout.*): reshapes, transpose, concat/split/stack/unstack, tile/broadcast,
slice (any stride), pad (all four methods), cast, gather/scatter, and the constant producers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.tosa.legalize.core import (
    I32_MAX,
    I32_MIN,
    Builder,
    Rule,
    Subgraph,
    env,
    ints,
    norm_axes,
    shape_of,
)


def _to_output_shape(op: Operation) -> Subgraph:
    b = Builder(op)
    return b.done(b.reshape(b.arg(0), shape_of(op.inputs[0]), shape_of(op.outputs[0])))


def _transpose(op: Operation) -> Subgraph:
    b = Builder(op)
    axis = int(env(op, "_axis"))
    perms = list(range(axis)) + ints(env(op, "_perm"))
    return b.done(b.transpose(b.arg(0), perms))


def _concat(op: Operation) -> Subgraph:
    b = Builder(op)
    rank = len(shape_of(op.outputs[0]))
    axis = int(op.attribs["axis"])
    return b.done(b.emit("CONCAT", *b.arg(0), axis=axis + rank if axis < 0 else axis))


def _split(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    axis = norm_axes(op.attribs["axis"], len(shape))[0]
    outs, offset = [], 0
    for t in op.outputs[0]:
        size = shape_of(t)
        start = [0] * len(shape)
        start[axis] = offset
        offset += size[axis]
        outs.append(b.slice(b.arg(0), shape, start, size))
    return b.done(outs)


def _stack(op: Operation) -> Subgraph:
    b = Builder(op)
    out = shape_of(op.outputs[0])
    rank = len(shape_of(op.inputs[0][0]))
    axis = int(op.attribs["axis"])
    axis = axis + rank if axis < 0 else axis
    one = list(out)
    one[axis] = 1
    parts = [b.reshape(x, shape_of(t), one) for x, t in zip(b.arg(0), op.inputs[0], strict=True)]
    return b.done(b.concat(parts, axis) if len(parts) > 1 else b.reshape(parts[0], one, out))


def _unstack(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = shape_of(op.inputs[0])
    axis = norm_axes(op.attribs["axis"], len(shape))[0]
    one = list(shape)
    one[axis] = 1
    outs = []
    for k, t in enumerate(op.outputs[0]):
        start = [0] * len(shape)
        start[axis] = k
        outs.append(b.reshape(b.slice(b.arg(0), shape, start, one), one, shape_of(t)))
    return b.done(outs)


def _tile(op: Operation) -> Subgraph:
    b = Builder(op)
    rank = len(shape_of(op.inputs[0]))
    multiples = [1] * rank
    for a, r in zip(norm_axes(op.attribs["axes"], rank), ints(op.attribs["repeats"]), strict=True):
        multiples[a] = r
    return b.done(b.emit("TILE", b.arg(0), b.shape(multiples)))


def _broadcast(op: Operation) -> Subgraph:
    b = Builder(op)
    s, o = shape_of(op.inputs[0]), shape_of(op.outputs[0])
    if s == o:
        return b.done(b.arg(0))
    return b.done(b.emit("TILE", b.arg(0), b.shape([od // sd for sd, od in zip(s, o, strict=True)])))


def _uniform(op: Operation) -> Subgraph:
    b = Builder(op)
    o = shape_of(op.outputs[0])
    x = b.reshape(b.arg(0), (), [1] * len(o))
    return b.done(b.emit("TILE", x, b.shape(o)) if any(d != 1 for d in o) else x)


# -- slice with strides --------------------------------------------------------------------------


def strided(b: Builder, x: str, shape: list[int], axis: int, begin: int, stride: int, count: int,
            pad_value: str) -> tuple[str, list[int]]:
    """Elements begin + stride*i (i < count, all in range) along ``axis``: REVERSE for a negative
    stride; SLICE from begin; for stride > 1, PAD the end to stride*count (the padding never lands
    on a selected element), RESHAPE [count, stride], SLICE column 0, RESHAPE back."""
    rank = len(shape)
    n = shape[axis]
    if stride < 0:
        x = b.emit("REVERSE", x, axis=axis)
        begin, stride = n - 1 - begin, -stride
    start = [0] * rank
    start[axis] = begin
    length = min(stride * count, n - begin) if stride > 1 else count
    size = list(shape)
    size[axis] = length
    x = b.slice(x, shape, start, size)
    if stride > 1:
        if length < stride * count:
            padding = [0] * (2 * rank)
            padding[2 * axis + 1] = stride * count - length
            x = b.emit("PAD", x, b.shape(padding), pad_value)
        split = [*size[:axis], count, stride, *size[axis + 1:]]
        size[axis] = stride * count
        x = b.reshape(x, size, split)
        one = list(split)
        one[axis + 1] = 1
        x = b.slice(x, split, [0] * (rank + 1), one)
        size[axis] = count
        x = b.reshape(x, one, size)
    return x, size


def pad_value(b: Builder, dtype: str, value: float = 0.0) -> str:
    return b.const([False], np.bool_) if dtype == "bool" else b.const([value])


def _slice(op: Operation) -> Subgraph:
    b = Builder(op)
    shape = list(shape_of(op.inputs[0]))
    out = shape_of(op.outputs[0])
    x = b.arg(0)
    axes = norm_axes(op.attribs["axes"], len(shape))
    strides = ints(op.attribs.get("stride")) or [1]
    if len(strides) == 1:
        strides = strides * len(axes)
    zero = pad_value(b, op.inputs[0].dtype)
    for a, begin, stride in zip(axes, ints(op.attribs["begin"]), strides, strict=True):
        x, shape = strided(b, x, shape, a, begin, stride, out[a], zero)
    return b.done(x)


# -- pad -----------------------------------------------------------------------------------------


def _pad_check(op: Operation) -> str | None:
    method = op.attribs.get("method", "CONSTANT")
    shape = shape_of(op.inputs[0])
    limit = {"REFLECT": 1, "SYMMETRIC": 0}.get(method)
    if limit is not None:
        for a, (lo, hi) in enumerate(zip(ints(env(op, "before")), ints(env(op, "after")), strict=True)):
            if max(lo, hi) > shape[a] - limit:
                return (f"pad method {method} with padding {max(lo, hi)} > {shape[a] - limit} on axis {a} "
                        "(@lower reflects only once: its index is then out of range, an error)")
    return None


def _pad(op: Operation) -> Subgraph:
    """CONSTANT: PAD. REPLICATE: SLICE the edge element, TILE, CONCAT. REFLECT/SYMMETRIC: SLICE the
    mirrored band, REVERSE, CONCAT (axis by axis: the index maps are separable)."""
    b = Builder(op)
    before, after = ints(env(op, "before")), ints(env(op, "after"))
    method = op.attribs.get("method", "CONSTANT")
    x = b.arg(0)
    if method == "CONSTANT":
        padding = [p for pair in zip(before, after, strict=True) for p in pair]
        y = b.emit("PAD", x, b.shape(padding), pad_value(b, op.inputs[0].dtype))
        if b.arg(1) is not None:  # TOSA's pad_const must be a constant: SELECT the value where padded
            shape = shape_of(op.inputs[0])
            inside = np.pad(np.ones(shape, np.bool_), list(zip(before, after, strict=True)))
            value = b.reshape(b.arg(1), (), [1] * len(shape))
            y = b.emit("SELECT", b.const(inside, np.bool_), y, value)
        return b.done(y)
    shape = list(shape_of(op.inputs[0]))
    rank = len(shape)
    for a, (lo, hi) in enumerate(zip(before, after, strict=True)):
        if not lo and not hi:
            continue
        n = shape[a]

        def band(first: int, count: int, reverse: bool, x: str = x, n: int = n, a: int = a) -> str:
            start = [0] * rank
            start[a] = first
            size = list(shape)
            size[a] = count
            y = b.slice(x, shape, start, size)
            return b.emit("REVERSE", y, axis=a) if reverse and count > 1 else y

        def edge(first: int, count: int, x: str = x, a: int = a) -> str:
            y = band(first, 1, False)
            if count == 1:
                return y
            multiples = [1] * rank
            multiples[a] = count
            return b.emit("TILE", y, b.shape(multiples))

        parts = []
        if lo:
            parts.append(edge(0, lo) if method == "REPLICATE" else
                         band(1, lo, True) if method == "REFLECT" else band(0, lo, True))
        parts.append(x)
        if hi:
            parts.append(edge(n - 1, hi) if method == "REPLICATE" else
                         band(n - 1 - hi, hi, True) if method == "REFLECT" else band(n - hi, hi, True))
        x = b.concat(parts, a)
        shape[a] = lo + n + hi
    return b.done(x)


# -- cast, gather, scatter -----------------------------------------------------------------------


def _cast(op: Operation) -> Subgraph:
    """real -> bool: x != 0 (NaN is true); bool -> real: SELECT(x, 1, 0); same type: IDENTITY."""
    b = Builder(op)
    src, dst = op.inputs[0].dtype, op.outputs[0].dtype
    x, r = b.arg(0), len(shape_of(op.inputs[0]))
    if src == dst:
        return b.done(x)
    if src == "int":  # int32 inside a program: to bool x != 0, to real CAST (as numpy rounds int64 -> float32)
        if dst == "bool":
            return b.done(b.emit("LOGICAL_NOT", b.emit("EQUAL", x, b.scalar(0, r, np.int32))))
        return b.done(b.emit("CAST", x, output_dtype="float32"))
    if dst == "int":  # from bool: 0 / 1
        return b.done(b.emit("SELECT", x, b.scalar(1, r, np.int32), b.scalar(0, r, np.int32)))
    if dst == "bool":
        return b.done(b.emit("LOGICAL_NOT", b.emit("EQUAL", x, b.scalar(0.0, r))))
    return b.done(b.emit("SELECT", x, b.scalar(1.0, r), b.scalar(0.0, r)))


def _gather(op: Operation) -> Subgraph:
    """data [s.., z, t..] -> TRANSPOSE/RESHAPE to [1, z, S*T]; index -> [1, N]; GATHER; back."""
    b = Builder(op)
    data = shape_of(op.inputs[0])
    rank = len(data)
    axis = norm_axes(op.attribs["axis"], rank)[0]
    s, z, t = data[:axis], data[axis], data[axis + 1:]
    ns, nt = int(np.prod(s, dtype=np.int64)), int(np.prod(t, dtype=np.int64))
    idx = shape_of(op.inputs[1])
    n = int(np.prod(idx, dtype=np.int64))
    perm = [axis, *range(axis), *range(axis + 1, rank)]
    boolean = op.inputs[0].dtype == "bool"  # TOSA GATHER has no bool: through i8
    v = b.reshape(b.transpose(b.arg(0), perm), [z, *s, *t], [1, z, ns * nt])
    if boolean:
        v = b.emit("CAST", v, output_dtype="int8")
    i = b.reshape(b.arg(1), idx, [1, n])
    y = b.emit("GATHER", v, i)  # [1, N, S*T]
    if boolean:
        y = b.emit("CAST", y, output_dtype="bool")
    y = b.reshape(y, [1, n, ns * nt], [n, ns, nt])
    y = b.transpose(y, [1, 0, 2])
    return b.done(b.reshape(y, [ns, n, nt], shape_of(op.outputs[0])))


def _flat_indices(b: Builder, i: str, nb: int, nz: int, ssh: Sequence[int]) -> str:
    """[nb, nz] int32 sum(i[..., j] * stride_j) of [nb, nz, d] int32 indices (exact: < 2^31 elements)."""
    d = len(ssh)
    flat = None
    stride = int(np.prod(ssh, dtype=np.int64))
    for j in range(d):
        stride //= ssh[j]
        col = b.reshape(b.slice(i, [nb, nz, d], [0, 0, j], [nb, nz, 1]), [nb, nz, 1], [nb, nz])
        term = col if stride == 1 else b.emit("MUL", col, b.const(np.full([1, 1], stride), np.int32),
                                               b.const([0], np.int8))
        flat = term if flat is None else b.emit("ADD", flat, term)
    return b.const(np.zeros([nb, nz]), np.int32) if flat is None else flat


def _nd_flat_indices(b: Builder, op: Operation) -> tuple[Sequence[int], int, int, int, int, str]:
    """For gather_nd/scatter_nd (data, indices, ...): the data's shape; nb, ns, nt, its batch, indexed
    and trailing dimensions' sizes; nz, the index tuples per batch; their [nb, nz] int32 flat indices."""
    bd = int(op.attribs.get("batch_dims", 0))
    data, ind = shape_of(op.inputs[0]), shape_of(op.inputs[1])
    d = ind[-1]
    bsh, ssh, tsh = data[:bd], data[bd:bd + d], data[bd + d:]
    nb = int(np.prod(bsh, dtype=np.int64))
    ns = int(np.prod(ssh, dtype=np.int64))
    nt = int(np.prod(tsh, dtype=np.int64))
    nz = int(np.prod(ind[bd:-1], dtype=np.int64))
    return data, nb, ns, nt, nz, _flat_indices(b, b.reshape(b.arg(1), ind, [nb, nz, d]), nb, nz, ssh)


def _gather_nd(op: Operation) -> Subgraph:
    """Flat int32 indices sum(indices[..., j] * stride_j) (exact: the data has < 2^31 elements),
    then GATHER per batch over the flattened indexed dimensions."""
    b = Builder(op)
    data, nb, ns, nt, nz, flat = _nd_flat_indices(b, op)
    v = b.reshape(b.arg(0), data, [nb, ns, nt])
    boolean = op.inputs[0].dtype == "bool"  # TOSA GATHER has no bool: through i8 (int values are int32)
    if boolean:
        v = b.emit("CAST", v, output_dtype="int8")
    y = b.emit("GATHER", v, flat)
    if boolean:
        y = b.emit("CAST", y, output_dtype="bool")
    return b.done(b.reshape(y, [nb, nz, nt], shape_of(op.outputs[0])))


def _const_indices(op: Operation) -> np.ndarray | None:
    t = op.inputs[1]
    return None if getattr(t, "value", None) is None else np.asarray(t.value, np.int64).reshape(shape_of(t))


def _scatter_check(op: Operation) -> str | None:
    idx = _const_indices(op)
    if idx is None:
        return "indices known only at run time (TOSA SCATTER needs distinct indices per row; not provable)"
    axis = norm_axes(op.attribs["axis"], idx.ndim)[0]
    rows = np.moveaxis(idx, axis, -1).reshape(-1, idx.shape[axis])
    if any(len(set(r.tolist())) != len(r) for r in rows):
        return "constant indices with duplicates in a row (TOSA SCATTER writes each position once)"
    return None


def _scatter(op: Operation) -> Subgraph:
    """Each (s, t) position is a TOSA batch: data -> [S*T, n, 1], indices -> [S*T, m],
    updates -> [S*T, m, 1]; SCATTER; back."""
    b = Builder(op)
    data = shape_of(op.inputs[0])
    rank = len(data)
    axis = norm_axes(op.attribs["axis"], rank)[0]
    m = shape_of(op.inputs[1])[axis]
    n = data[axis]
    s, t = data[:axis], data[axis + 1:]
    ns, nt = int(np.prod(s, dtype=np.int64)), int(np.prod(t, dtype=np.int64))
    perm = [*range(axis), *range(axis + 1, rank), axis]
    back = [*range(axis), rank - 1, *range(axis, rank - 1)]

    def rows(x: str, k: int, extra: list[int]) -> str:
        return b.reshape(b.transpose(x, perm), [*s, *t, k], [ns * nt, k, *extra])

    v = rows(b.arg(0), n, [1])
    i = rows(b.arg(1), m, [])
    u = rows(b.arg(2), m, [1])
    y = b.emit("SCATTER", v, i, u)
    y = b.reshape(y, [ns * nt, n, 1], [*s, *t, n])
    return b.done(b.transpose(y, back))


_MAX_UPDATES = 256


def _updates_check(op: Operation) -> str | None:
    if op.op == "layout.scatter":
        count = shape_of(op.inputs[1])[norm_axes(op.attribs["axis"], len(shape_of(op.inputs[1])))[0]]
    else:
        bd = int(op.attribs.get("batch_dims", 0))
        count = int(np.prod(shape_of(op.inputs[1])[bd:-1], dtype=np.int64))
    if count > _MAX_UPDATES:
        return f"{count} updates per row (> {_MAX_UPDATES} EQUAL/SELECT steps)"
    return None


def _scatter_select(op: Operation) -> Subgraph:
    """@lower's order exactly (the last of duplicate indices wins): for each update k along the axis,
    SELECT(EQUAL(indices[k], iota), updates[k], acc) (int32 compare, broadcast along the axis)."""
    b = Builder(op)
    data = list(shape_of(op.inputs[0]))
    rank = len(data)
    axis = norm_axes(op.attribs["axis"], rank)[0]
    ishape = list(shape_of(op.inputs[1]))
    m = ishape[axis]
    iota = np.arange(data[axis], dtype=np.int32).reshape([data[axis] if a == axis else 1 for a in range(rank)])
    iota_c = b.const(iota, np.int32)
    acc = b.arg(0)
    one = list(ishape)
    one[axis] = 1
    for k in range(m):
        start = [0] * rank
        start[axis] = k
        idx = b.slice(b.arg(1), ishape, start, one)
        upd = b.slice(b.arg(2), ishape, start, one)
        acc = b.emit("SELECT", b.emit("EQUAL", idx, iota_c), upd, acc)
    return b.done(acc)


def _scatter_nd(op: Operation) -> Subgraph:
    """Flat int32 indices (MUL/ADD); then @lower's order exactly: per update z,
    SELECT(EQUAL(flat[z], iota), updates[z], acc) over the flattened indexed dimensions."""
    b = Builder(op)
    data, nb, ns, nt, nz, flat = _nd_flat_indices(b, op)
    flat = b.reshape(flat, [nb, nz], [nb, nz, 1])
    acc = b.reshape(b.arg(0), data, [nb, ns, nt])
    upd = b.reshape(b.arg(2), shape_of(op.inputs[2]), [nb, nz, nt])
    iota = b.const(np.arange(ns, dtype=np.int32).reshape(1, ns, 1), np.int32)
    for z in range(nz):
        fz = b.slice(flat, [nb, nz, 1], [0, z, 0], [nb, 1, 1])
        uz = b.slice(upd, [nb, nz, nt], [0, z, 0], [nb, 1, nt])
        acc = b.emit("SELECT", b.emit("EQUAL", fz, iota), uz, acc)
    return b.done(b.reshape(acc, [nb, ns, nt], data))


# -- constants -----------------------------------------------------------------------------------


def _int_const_check(values: np.ndarray) -> str | None:
    if values.size and (values.min() < I32_MIN or values.max() > I32_MAX):
        return "int values outside the int32 range of TOSA"
    return None


def _constant_values(op: Operation) -> np.ndarray:
    shape = shape_of(op.outputs[0])
    dtype = op.outputs[0].dtype
    npt = {"real": np.float32, "int": np.int64, "bool": np.bool_}[dtype]
    if op.op == "layout.shape":
        return np.asarray(shape_of(op.inputs[0]), np.int64)
    if op.op == "layout.range":
        first, stride = op.attribs["first"], op.attribs.get("stride", 1)
        i = np.arange(shape[0])
        if dtype == "real":
            return (np.float32(first) + i.astype(np.float32) * np.float32(stride)).astype(np.float32)
        return (int(first) + i * int(stride)).astype(np.int64)
    value = np.asarray(op.attribs["value"], npt).reshape(-1)
    return (np.full(shape, value[0], npt) if value.size == 1 else value.reshape(shape)).astype(npt)


def _constant_check(op: Operation) -> str | None:
    if op.outputs[0].dtype == "int":
        return _int_const_check(_constant_values(op))
    return None


def _constant(op: Operation) -> Subgraph:
    b = Builder(op)
    values = _constant_values(op)
    is_int = values.dtype == np.int64
    c = b.const(values, np.int32 if is_int else values.dtype)
    return b.done(b.emit("IDENTITY", c), ints=[is_int])


RULES: dict[str, list[Rule]] = {
    **{f"layout.{k}": [Rule("RESHAPE to the output shape", _to_output_shape)]
       for k in ("reshape", "flatten", "unflatten", "squeeze", "unsqueeze")},
    "layout.transpose": [Rule("TRANSPOSE", _transpose)],
    "layout.concat": [Rule("CONCAT", _concat)],
    "layout.split": [Rule("SLICE per output", _split)],
    "layout.stack": [Rule("RESHAPE each input, CONCAT", _stack)],
    "layout.unstack": [Rule("SLICE + RESHAPE per output", _unstack)],
    "layout.slice": [Rule("SLICE; stride != 1: REVERSE (negative), PAD/RESHAPE/SLICE/RESHAPE", _slice)],
    "layout.pad": [Rule("CONSTANT: PAD (a value input: SELECT it where padded, TOSA's pad_const is constant); "
                        "REPLICATE: SLICE+TILE+CONCAT; REFLECT/SYMMETRIC: SLICE+REVERSE+CONCAT", _pad, _pad_check)],
    "layout.tile": [Rule("TILE", _tile)],
    "layout.broadcast": [Rule("TILE by output/input extents", _broadcast)],
    "layout.uniform": [Rule("RESHAPE the scalar, TILE", _uniform)],
    "layout.cast": [Rule("real->bool: LOGICAL_NOT(EQUAL(x, 0)); bool->real: SELECT(x, 1, 0); else IDENTITY", _cast)],
    "layout.gather": [Rule("TRANSPOSE/RESHAPE to (1, K, C), GATHER (int32 indices), RESHAPE/TRANSPOSE back",
                           _gather)],
    "layout.gather_nd": [Rule("int32 flat indices (MUL/ADD), RESHAPE to (batch, K, C), GATHER (bool values "
                              "through i8)", _gather_nd)],
    "layout.scatter": [Rule("constant indices, distinct per row: TRANSPOSE/RESHAPE to (S*T, n, 1), SCATTER, back",
                            _scatter, _scatter_check),
                       Rule("per update along the axis: SELECT(EQUAL(indices, iota), update, acc) (@lower's order: "
                            "the last duplicate wins)", _scatter_select, _updates_check)],
    "layout.scatter_nd": [Rule("int32 flat indices (MUL/ADD); per update SELECT(EQUAL(flat, iota), update, acc) "
                               "(@lower's order: the last duplicate wins)", _scatter_nd, _updates_check)],
    **{f"layout.{k}": [Rule("CONST (values known when composing)", _constant, _constant_check)]
       for k in ("tensor", "range", "shape")},
}
