"""Data layout (TOSA 0.30 §2.10, 1.0 "Data layout"), GATHER/SCATTER (§2.11) and data nodes (§2.14).

No data conversion happens here. In TOSA 1.0 the PAD padding, RESHAPE shape, SLICE start/size and
TILE multiples are ``shape_t`` inputs and PAD's ``pad_const`` a [1] tensor; in 0.30 they are
attributes (PAD ``padding`` int32[rank, 2], ``pad_const`` a scalar). Both forms are accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import ALL_TYPES, FLOATS, check_types, const_scalar, shape_operand, tensor
from skriptnd.tosa.ops.dtypes import INT_RANGES, BF16Array, round_float
from skriptnd.tosa.ops.errors import TosaError, check_version, error_if, require

__all__ = ["concat", "pad", "reshape", "reverse", "slice", "tile", "transpose", "gather", "scatter",
           "identity", "const"]

_ROWS = [(t,) for t in ALL_TYPES]
_GATHER_ROWS = [(t,) for t in ("int8", "int16", "int32", *FLOATS)]


def _out(values: np.ndarray, t: str) -> np.ndarray:
    return values.view(BF16Array) if t == "bf16" else values


def _rank_limit(op: str, rank: int, version: str) -> None:
    """Argument ranks: 1 to MAX_RANK in 1.0 (no level limit applied here), 1 to 4 in 0.30."""
    error_if(rank < 1, "rank(shape1) < 1", op)
    if version == "0.30":
        error_if(rank > 4, "rank(shape1) > 4", op)


def concat(inputs: Sequence[Any], *, axis: int, version: str = "1.0") -> np.ndarray:
    """CONCAT (0.30 §2.10.1): the inputs laid end to end along ``axis``; same rank and type, equal
    dimensions off the axis (ERROR_IF otherwise)."""
    op = "CONCAT"
    check_version(version)
    error_if(len(inputs) == 0, "input1 == []", op)
    arrays = [tensor(x, op, f"input1[{i}]") for i, x in enumerate(inputs)]
    t = arrays[0][1]
    check_types(op, (t,), _ROWS, "in_out_t")
    for _, ti in arrays:
        error_if(ti != t, "input types differ", op)
    rank = arrays[0][0].ndim
    error_if(axis < 0 or axis >= max(1, rank) or rank == 0, "axis < 0 || axis >= max(1, rank(shapes1[0]))", op)
    for a, _ in arrays:
        error_if(a.ndim != rank, "rank(shapes1[shape_index]) != rank(shapes1[0])", op)
        for i in range(rank):
            if i != axis:
                error_if(a.shape[i] != arrays[0][0].shape[i],
                         "shapes1[shape_index][axis_index] != shapes1[0][axis_index]", op)
    return _out(np.concatenate([a for a, _ in arrays], axis=axis), t)


def pad(input1: ArrayLike, padding: ArrayLike, pad_const: ArrayLike = 0, *, version: str = "1.0") -> np.ndarray:
    """PAD (0.30 §2.10.2): pad with ``pad_const`` (which includes any zero point). ``padding`` is
    [before0, after0, before1, after1, ...] (1.0 shape_t) or int32[rank, 2] (0.30).
    ERROR_IF any padding is negative."""
    op = "PAD"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    p = shape_operand(padding, op, "padding")
    _rank_limit(op, a.ndim, version)
    if version == "0.30":
        error_if(np.asarray(padding).shape != (a.ndim, 2), "shape(padding) != [rank(shape1), 2]", op)
    error_if(len(p) != 2 * a.ndim, "length(padding) != 2 * rank(shape1)", op)
    for i in range(a.ndim):
        error_if(p[2 * i] < 0 or p[2 * i + 1] < 0, "padding[i * 2] < 0 || padding[(i * 2) + 1] < 0", op)
    value = const_scalar(pad_const, op, "pad_const", t, version)
    if t == "bf16":
        value = float(round_float(np.float64(value), t))
    elif t in INT_RANGES:
        lo, hi, _ = INT_RANGES[t]
        error_if(not lo <= value <= hi, f"pad_const is not a {t} value", op)
    widths = [(p[2 * i], p[2 * i + 1]) for i in range(a.ndim)]
    return _out(np.pad(a, widths, mode="constant", constant_values=np.asarray(value).astype(a.dtype)), t)


def reshape(input1: ArrayLike, shape: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """RESHAPE (0.30 §2.10.3): same elements in C order; ERROR_IF(tensor_size(shape1) != tensor_size(shape))
    and every new dimension must be >= 1."""
    op = "RESHAPE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    s = shape_operand(shape, op, "shape")
    error_if(any(d < 1 for d in s), "shape[i] < 1", op)
    error_if(int(np.prod(s, dtype=np.int64)) != a.size, "tensor_size(shape1) != tensor_size(shape)", op)
    return _out(a.reshape(s), t)


def reverse(input1: ArrayLike, *, axis: int, version: str = "1.0") -> np.ndarray:
    """REVERSE (0.30 §2.10.4): reverse the order along ``axis``; ERROR_IF(axis < 0 || axis >= rank)."""
    op = "REVERSE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    _rank_limit(op, a.ndim, version)
    error_if(axis < 0 or axis >= a.ndim, "axis < 0 || axis >= rank(shape)", op)
    return _out(np.flip(a, axis).copy(), t)


def slice(input1: ArrayLike, start: ArrayLike, size: ArrayLike, *, version: str = "1.0") -> np.ndarray:  # noqa: A001
    """SLICE (0.30 §2.10.5): ``output[index] = input1[index + start]``; ERROR_IF start < 0, size <= 0,
    start + size > shape1, or lengths differ from the rank."""
    op = "SLICE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    _rank_limit(op, a.ndim, version)
    st, sz = shape_operand(start, op, "start"), shape_operand(size, op, "size")
    error_if(a.ndim != len(st) or a.ndim != len(sz), "rank(shape1) != length(start) || rank(shape1) != length(size)", op)
    for i in range(a.ndim):
        error_if(st[i] < 0, "start[index] < 0", op)
        error_if(sz[i] <= 0, "size[index] <= 0", op)
        error_if(st[i] + sz[i] > a.shape[i], "start[index] + size[index] > shape1[index]", op)
    return _out(a[tuple(np.s_[s: s + n] for s, n in zip(st, sz, strict=True))].copy(), t)


def tile(input1: ArrayLike, multiples: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """TILE (0.30 §2.10.6): ``output[index] = input1[index % shape1]`` with shape = shape1 * multiples."""
    op = "TILE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    _rank_limit(op, a.ndim, version)
    m = shape_operand(multiples, op, "multiples")
    error_if(len(m) != a.ndim, "rank(shape1) != rank(shape)", op)
    error_if(any(v < 1 for v in m), "shape1[i] * multiples[i] != shape[i] (multiples must be >= 1)", op)
    return _out(np.tile(a, m), t)


def transpose(input1: ArrayLike, *, perms: Sequence[int], version: str = "1.0") -> np.ndarray:
    """TRANSPOSE (0.30 §2.10.7): ``output[index] = input1[tmp]`` with ``tmp[perms[i]] = index[i]``;
    ERROR_IF a perms value is out of range or repeated."""
    op = "TRANSPOSE"
    check_version(version)
    a, t = tensor(input1, op, "input1")
    check_types(op, (t,), _ROWS, "in_out_t")
    _rank_limit(op, a.ndim, version)
    p = [int(v) for v in perms]
    error_if(len(p) != a.ndim, "length(perms) != rank(shape1)", op)
    used = [False] * a.ndim
    for v in p:
        error_if(v >= a.ndim, "index >= rank(shape1)", op)
        error_if(v < 0, "index < 0", op)
        error_if(used[v], "indexes_used[index] == true", op)
        used[v] = True
    return _out(np.transpose(a, p).copy(), t)


def gather(values: ArrayLike, indices: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """GATHER (0.30 §2.11.1): values[N,K,C], indices i32[N,W] → output[n,w,c] = values[n,indices[n,w],c];
    REQUIRE(0 <= k < K). i8, i16, i32, fp16, bf16, fp32."""
    op = "GATHER"
    check_version(version)
    v, t = tensor(values, op, "values")
    idx, ti = tensor(indices, op, "indices")
    check_types(op, (t, ti), [(r[0], "int32") for r in _GATHER_ROWS], "value_t, index_t")
    error_if(v.ndim != 3 or idx.ndim != 2, "values must be rank 3 [N,K,C] and indices rank 2 [N,W]", op)
    error_if(v.shape[0] != idx.shape[0], "indices N != values N", op)
    k = idx.astype(np.int64)
    require((k >= 0) & (k < v.shape[1]), "0 <= k && k < K", op)
    out = np.take_along_axis(v, k[:, :, None], axis=1)
    return _out(out, t)


def scatter(values_in: ArrayLike, indices: ArrayLike, input: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """SCATTER (0.30 §2.11.2): values_out = values_in with values_out[n,indices[n,w],c] = input[n,w,c];
    REQUIRE(0 <= k < K) and each output position written at most once. i8, i16, i32, fp16, bf16, fp32."""
    op = "SCATTER"
    check_version(version)
    vin, t = tensor(values_in, op, "values_in")
    idx, ti = tensor(indices, op, "indices")
    x, tx = tensor(input, op, "input")
    error_if(tx != t, "input type != values_in type", op)
    check_types(op, (t, ti), [(r[0], "int32") for r in _GATHER_ROWS], "value_t, index_t")
    error_if(vin.ndim != 3 or idx.ndim != 2 or x.ndim != 3, "values_in [N,K,C], indices [N,W], input [N,W,C]", op)
    n, kk, c = vin.shape
    error_if(idx.shape[0] != n or x.shape != (n, idx.shape[1], c), "shapes of values_in, indices, input disagree", op)
    k = idx.astype(np.int64)
    require((k >= 0) & (k < kk), "0 <= k && k < K", op)
    for row in k:
        require(len(set(row.tolist())) == len(row), "output_modified[n,k,c] == false", op)
    out = vin.copy()
    np.put_along_axis(out, k[:, :, None], x, axis=1)
    return _out(out, t)


def identity(input1: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """IDENTITY (0.30 §2.14.2): the input unchanged. bool, i8, i16, i32, fp16, bf16, fp32."""
    check_version(version)
    a, t = tensor(input1, "IDENTITY", "input1")
    check_types("IDENTITY", (t,), _ROWS, "in_out_t")
    return _out(a.copy(), t)


def const(values: ArrayLike, *, version: str = "1.0") -> np.ndarray:
    """CONST (0.30 §2.14.1): the constant ``values``. bool, i8, i16, i32, fp16, bf16, fp32."""
    check_version(version)
    a, t = tensor(values, "CONST", "values")
    if t not in ALL_TYPES:
        raise TosaError(f"{t} is not a CONST type", "CONST")
    return _out(a.copy(), t)
