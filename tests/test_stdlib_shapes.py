"""Output shapes and dtypes of every standard-library operator, from `skriptnd.infer`.

Every one of the 151 operators of `tests/data/stdlib_operator_names.json` has at least one concrete
invocation in CASES (`test_every_operator_has_a_case` enforces it). The expected shapes never come
from the operator text: they are numpy's shape rules (np.broadcast_shapes, np.transpose, np.pad,
np.take, reductions with keepdims ...), the output-size formulas documented by PyTorch / ONNX /
TensorFlow written out by hand, or, where only the spec defines the behaviour, values computed by
hand with the spec line cited ("l. N" = line N of shared/spec/nnef-2.0-skriptnd-rev8.md).

Shape-heavy operators are also checked with hypothesis (broadcasting with alignment, reductions,
transpose, slice, pad, tile, gather, squeeze/unsqueeze, pooling, deconvolution), and ERRORS is a
sample of invalid invocations that must end in a located E04xx/E05xx diagnostic, never a crash.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.api import find_operator
from skriptnd.semantics.binding import bind
from skriptnd.semantics.values import Pack, TensorValue

NAMES = json.loads((Path(__file__).parent / "data" / "stdlib_operator_names.json").read_text())
ALL_OPERATORS = {f"{m}.{op}" for m, ops in NAMES.items() for op in ops}
FAST = settings(max_examples=50, deadline=None)

R, I, B = "real", "int", "bool"  # noqa: E741 - short dtype names keep the tables readable


def z(*shapes: Any) -> Any:
    """numpy arrays of the given shapes (a list of shapes gives a list of arrays)."""
    return [np.zeros(s) for s in shapes] if len(shapes) != 1 else np.zeros(shapes[0])


# ============================================================================================
# Independent shape helpers
# ============================================================================================


def aligned(shape: list[int], align: int | None, rank: int) -> tuple[int, ...]:
    """Pad a shape to `rank` as §4.2.2 describes (l. 3446-3448): a non-negative alignment puts
    `align` singular dimensions before the argument and aligns it from the left; a negative one puts
    `-align` singular dimensions after it and aligns it from the right; no alignment right-aligns."""
    shape = list(shape)
    if align is None:
        return (1,) * (rank - len(shape)) + tuple(shape)
    if align >= 0:
        padded = [1] * align + shape
        return tuple(padded + [1] * (rank - len(padded)))
    padded = shape + [1] * -align
    return (1,) * (rank - len(padded)) + tuple(padded)


def broadcast(shapes: list[list[int]], aligns: list[int | None] | None = None) -> tuple[int, ...]:
    aligns = aligns or [None] * len(shapes)
    rank = max(len(s) + abs(a or 0) for s, a in zip(shapes, aligns, strict=True))
    return np.broadcast_shapes(*(aligned(s, a, rank) for s, a in zip(shapes, aligns, strict=True)))


def conv_size(i: int, k: int, s: int = 1, d: int = 1, pad: int = 0, ceil: bool = False) -> int:
    # torch.nn.Conv2d / MaxPool2d: floor((i + 2p - d (k - 1) - 1) / s) + 1, with 2p = before + after;
    # ceil_mode replaces floor by ceil.
    num = i + pad - d * (k - 1) - 1
    return (-(-num // s) if ceil else num // s) + 1


def deconv_size(i: int, k: int, s: int = 1, d: int = 1, pad: int = 0, output_padding: int = 0) -> int:
    # torch.nn.ConvTranspose2d: (i - 1) s - 2p + d (k - 1) + output_padding + 1, with 2p = before + after
    return (i - 1) * s - pad + d * (k - 1) + output_padding + 1


def np_slice(n: int, begin: int, end: int, stride: int) -> int:
    # layout.slice clamps `end` to [-1, n] (l. 2498: `_end = end >? -1 <? s[axes]`), -1 meaning
    # "before the first item" for negative strides; numpy spells that end as None.
    end = max(-1, min(end, n))
    return len(np.arange(n)[slice(begin, None if end < 0 else end, stride)])


def onnx_depth_to_space(x: np.ndarray, bs: int, dcr: bool = True) -> tuple[int, ...]:
    # The numpy reference of ONNX DepthToSpace (DCR and CRD modes)
    b, c, h, w = x.shape
    if dcr:
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(b, c // (bs * bs), h * bs, w * bs).shape


def onnx_space_to_depth(x: np.ndarray, bs: int) -> tuple[int, ...]:
    # The numpy reference of ONNX SpaceToDepth
    b, c, h, w = x.shape
    t = x.reshape(b, c, h // bs, bs, w // bs, bs).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(b, c * bs * bs, h // bs, w // bs).shape


def tf_space_to_batch(x: np.ndarray, block: list[int]) -> tuple[int, ...]:
    # tf.space_to_batch_nd (no paddings), NHWC: reshape, move the blocks to the front, merge into batch
    b, *spatial, c = x.shape
    split = [v for s, k in zip(spatial, block, strict=True) for v in (s // k, k)]
    t = x.reshape(b, *split, c)
    d = len(block)
    t = t.transpose(*[2 + 2 * i for i in range(d)], 0, *[1 + 2 * i for i in range(d)], 2 * d + 1)
    return t.reshape(b * math.prod(block), *[s // k for s, k in zip(spatial, block, strict=True)], c).shape


def tf_batch_to_space(x: np.ndarray, block: list[int]) -> tuple[int, ...]:
    # tf.batch_to_space_nd (no crops), NHWC: split the batch into blocks, interleave them with space
    b, *spatial, c = x.shape
    d = len(block)
    t = x.reshape(*block, b // math.prod(block), *spatial, c)
    t = t.transpose(d, *[v for i in range(d) for v in (d + 1 + i, i)], 2 * d + 1)
    return t.reshape(b // math.prod(block), *[s * k for s, k in zip(spatial, block, strict=True)], c).shape


def to_ncx(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[-1], *shape[1:-1])


def to_nxc(shape: list[int]) -> list[int]:
    return [shape[0], *shape[2:], shape[1]]


# ============================================================================================
# Concrete cases: one or more per operator
# ============================================================================================


@dataclass
class Case:
    op: str
    attribs: dict[str, Any]
    inputs: list[Any]
    expected: list[tuple[str, Any]]  # (dtype, shape) per output; a list of shapes for a tensor pack
    dtypes: Any = R
    type_args: tuple[str, ...] = ()
    bounds: dict[str, tuple[int | None, ...]] = field(default_factory=dict)  # dynamic extents' upper bounds

    def __str__(self) -> str:
        attrs = ",".join(f"{k}={v}" for k, v in self.attribs.items())
        return f"{self.op}{{{attrs}}}{self.inputs}"


CASES: list[Case] = []


def case(op: str, attribs: dict[str, Any], inputs: list[Any], *expected: tuple[str, Any], dtypes: Any = R,
         type_args: tuple[str, ...] = (), bounds: dict[str, tuple[int | None, ...]] | None = None) -> None:
    CASES.append(Case(op, attribs, inputs, list(expected), dtypes, type_args, bounds or {}))


# ---------------------------------------------------------------- layout: generators (§4.1.1)

case("layout.tensor", {"shape": [2, 3], "value": [float(i) for i in range(6)]}, [],
     (R, np.arange(6.0).reshape(2, 3).shape))
case("layout.tensor", {"shape": [2, 3, 4], "value": 7}, [], (I, np.full((2, 3, 4), 7).shape))
case("layout.tensor", {"value": [True]}, [], (B, np.array(True).shape))  # shape defaults to [] (l. 1959)
case("layout.tensor", {"shape": [0, 5], "value": []}, [], (R, np.zeros((0, 5)).shape), type_args=(R,))
case("layout.uniform", {"shape": [4, 2]}, [[]], (I, np.full((4, 2), 1).shape), dtypes=I)
case("layout.uniform", {"shape": [3]}, [[]], (B, np.full(3, True).shape), dtypes=B)
case("layout.range", {"first": 0, "last": 10, "stride": 3}, [], (I, np.arange(0, 10, 3).shape))
case("layout.range", {"first": 10, "last": 0, "stride": -3}, [], (I, np.arange(10, 0, -3).shape))
case("layout.range", {"first": 2, "last": 7}, [], (I, np.arange(2, 7).shape))
case("layout.range", {"first": 0.0, "last": 1.0, "stride": 0.25}, [], (R, np.arange(0.0, 1.0, 0.25).shape))
case("layout.range", {"first": 0.5, "last": 2.0, "stride": 0.4}, [], (R, np.arange(0.5, 2.0, 0.4).shape))
case("layout.shape", {}, [[2, 3, 4]], (I, np.array(z([2, 3, 4]).shape).shape))
case("layout.shape", {}, [[]], (I, np.array(z([]).shape).shape), dtypes=B)

# ---------------------------------------------------------------- layout: views (§4.1.2)

case("layout.cast", {}, [[2, 3]], (I, (2, 3)), type_args=(I,))
case("layout.cast", {}, [[4]], (R, (4,)), dtypes=B, type_args=(R,))
case("layout.cast", {}, [[2, 1, 5]], (B, (2, 1, 5)), dtypes=I, type_args=(B, I))
case("layout.reshape", {"shape": [6, 4]}, [[2, 3, 4]], (R, z([2, 3, 4]).reshape(6, 4).shape))
case("layout.reshape", {"shape": [-1]}, [[2, 3, 4]], (I, z([2, 3, 4]).reshape(-1).shape), dtypes=I)
case("layout.reshape", {"shape": [3, -1], "axis": 1, "rank": 2}, [[2, 3, 4, 5]],
     (R, z([2, 3, 4, 5]).reshape(2, 3, -1, 5).shape))
case("layout.reshape", {"shape": [2, 2], "axis": -2, "rank": 1}, [[3, 4, 5]],
     (R, z([3, 4, 5]).reshape(3, 2, 2, 5).shape))
case("layout.reshape", {"shape": [0, 6]}, [[2, 0, 3]], (R, z([2, 0, 3]).reshape(0, 6).shape))
case("layout.flatten", {}, [[2, 3, 4]], (R, z([2, 3, 4]).reshape(-1).shape))
case("layout.flatten", {"axis": 1}, [[2, 3, 4, 5]], (R, z([2, 3, 4, 5]).reshape(2, -1).shape))
case("layout.flatten", {"axis": -3, "rank": 2}, [[2, 3, 4, 5]], (B, z([2, 3, 4, 5]).reshape(2, 12, 5).shape),
     dtypes=B)
# flattening zero dimensions inserts one of extent 1 (the empty product, l. 2140 `shape * ..`)
case("layout.flatten", {"axis": 1, "rank": 0}, [[2, 3]], (R, np.expand_dims(z([2, 3]), 1).shape))
case("layout.unflatten", {"axis": 1, "shape": [2, 3]}, [[2, 6, 4]], (R, z([2, 6, 4]).reshape(2, 2, 3, 4).shape))
case("layout.unflatten", {"axis": -1, "shape": [2, 2, 2]}, [[3, 8]], (I, z([3, 8]).reshape(3, 2, 2, 2).shape),
     dtypes=I)
case("layout.squeeze", {"axes": [0, -1]}, [[1, 3, 1]], (R, np.squeeze(z([1, 3, 1]), axis=(0, -1)).shape))
case("layout.squeeze", {"axes": [1]}, [[2, 1, 1]], (I, np.squeeze(z([2, 1, 1]), axis=1).shape), dtypes=I)
case("layout.squeeze", {"axes": []}, [[2, 1]], (R, (2, 1)))
case("layout.unsqueeze", {"axes": [0, -1]}, [[2, 3]], (R, np.expand_dims(z([2, 3]), (0, -1)).shape))
case("layout.unsqueeze", {"axes": [1, 3]}, [[2, 3]], (B, np.expand_dims(z([2, 3]), (1, 3)).shape), dtypes=B)
case("layout.unsqueeze", {"axes": [0]}, [[]], (R, np.expand_dims(z([]), 0).shape))

# ---------------------------------------------------------------- layout: joining / splitting (§4.1.3)

case("layout.concat", {"axis": 1}, [[[2, 3], [2, 5], [2, 0]]],
     (R, np.concatenate(z([2, 3], [2, 5], [2, 0]), axis=1).shape))
case("layout.concat", {"axis": -3}, [[[1, 2, 3], [4, 2, 3]]],
     (I, np.concatenate(z([1, 2, 3], [4, 2, 3]), axis=-3).shape), dtypes=I)
case("layout.split", {"axis": 1, "count": 3}, [[2, 6]], (R, [a.shape for a in np.split(z([2, 6]), 3, axis=1)]))
case("layout.split", {"axis": -1, "sizes": [1, 4, 0, 2]}, [[3, 7]],
     (B, [a.shape for a in np.split(z([3, 7]), [1, 5, 5], axis=-1)]), dtypes=B)
case("layout.stack", {"axis": 1}, [[[2, 3], [2, 3], [2, 3]]], (R, np.stack(z([2, 3], [2, 3], [2, 3]), axis=1).shape))
# a negative axis counts from the *input* rank (l. 2360: `s..(axis < 0 ? axis + rank : axis)`, and l. 2366
# allows -rank..rank), so -1 inserts before the last input dimension; numpy's -1 would append
case("layout.stack", {"axis": -1}, [[[2, 3], [2, 3]]], (I, np.stack(z([2, 3], [2, 3]), axis=-1 + 2).shape), dtypes=I)
case("layout.stack", {"axis": 2}, [[[2, 3], [2, 3]]], (I, np.stack(z([2, 3], [2, 3]), axis=2).shape), dtypes=I)
case("layout.stack", {"axis": 2}, [[[2, 3]]], (R, np.stack(z([2, 3])[None], axis=2).shape))
# squeeze=true: the inputs carry a singular dimension at `axis` that the new one replaces
case("layout.stack", {"axis": 1, "squeeze": True}, [[[2, 1, 3], [2, 1, 3]]],
     (R, np.stack([np.squeeze(a, 1) for a in z([2, 1, 3], [2, 1, 3])], axis=1).shape))
case("layout.unstack", {"axis": 1}, [[2, 3, 4]], (R, [np.take(z([2, 3, 4]), i, axis=1).shape for i in range(3)]))
case("layout.unstack", {"axis": -1, "squeeze": False}, [[2, 3, 4]],
     (I, [a.shape for a in np.split(z([2, 3, 4]), 4, axis=-1)]), dtypes=I)

# ---------------------------------------------------------------- layout: expanding / shrinking (§4.1.4)

case("layout.tile", {"repeats": [2, 3]}, [[2, 3]], (R, np.tile(z([2, 3]), (2, 3)).shape))
case("layout.tile", {"axes": [-1], "repeats": [3]}, [[2, 3]], (I, np.tile(z([2, 3]), (1, 3)).shape), dtypes=I)
case("layout.tile", {"axes": [2, 0], "repeats": [4, 2]}, [[1, 2, 3]], (B, np.tile(z([1, 2, 3]), (2, 1, 4)).shape),
     dtypes=B)
case("layout.broadcast", {"shape": [4, 3]}, [[1, 3]], (R, np.broadcast_to(z([1, 3]), (4, 3)).shape))
case("layout.broadcast", {"axes": [0], "shape": [5]}, [[1, 3]], (I, np.broadcast_to(z([1, 3]), (5, 3)).shape),
     dtypes=I)
# a 1 in 'shape' keeps the input extent (l. 2457: `shape is 1 ? s[axes] : shape`)
case("layout.broadcast", {"axes": [-1, 1], "shape": [1, 6]}, [[2, 1, 4]],
     (R, np.broadcast_to(z([2, 1, 4]), (2, 6, 4)).shape))
case("layout.slice", {"axes": [1], "begin": [1], "end": [5], "stride": [2]}, [[3, 6]],
     (R, z([3, 6])[:, 1:5:2].shape))
case("layout.slice", {"axes": [-1], "begin": [4], "end": [-1], "stride": [-1]}, [[3, 6]],
     (R, z([3, 6])[:, 4::-1].shape))
case("layout.slice", {"begin": [1, 0], "end": [3, 100]}, [[3, 6]], (I, z([3, 6])[1:3, 0:100].shape), dtypes=I)
case("layout.slice", {"axes": [0], "begin": [2], "end": [2]}, [[3, 6]], (R, z([3, 6])[2:2].shape))
case("layout.pad", {"padding": [1, 2, 3, 4]}, [[3, 6], None], (R, np.pad(z([3, 6]), [(1, 3), (2, 4)]).shape))
case("layout.pad", {"axes": [-1], "padding": [1, 2], "method": "REFLECT"}, [[3, 6], None],
     (R, np.pad(z([3, 6]), [(0, 0), (1, 2)], mode="reflect").shape))
case("layout.pad", {"axes": [0], "padding": [0, 2]}, [[3, 6], []], (I, np.pad(z([3, 6]), [(0, 2), (0, 0)]).shape),
     dtypes=I)

# ---------------------------------------------------------------- layout: reordering (§4.1.5)

case("layout.transpose", {}, [[2, 3, 4]], (R, np.transpose(z([2, 3, 4])).shape))
case("layout.transpose", {"perm": [1, 0, 2]}, [[2, 3, 4]], (I, np.transpose(z([2, 3, 4]), (1, 0, 2)).shape),
     dtypes=I)
case("layout.transpose", {"axis": 1, "perm": [3, 1, 2]}, [[2, 3, 4, 5]],
     (R, np.transpose(z([2, 3, 4, 5]), (0, 3, 1, 2)).shape))
case("layout.transpose", {"perm": [-1, 0, -2]}, [[2, 3, 4]], (R, np.transpose(z([2, 3, 4]), (2, 0, 1)).shape))
# without 'perm', the dimensions from 'axis' on are reversed (erratum in build_stdlib.py)
case("layout.transpose", {"axis": 1}, [[2, 3, 4, 5]], (R, np.transpose(z([2, 3, 4, 5]), (0, 3, 2, 1)).shape))
case("layout.transpose", {"axis": -2}, [[2, 3, 4]], (R, np.transpose(z([2, 3, 4]), (0, 2, 1)).shape))
case("layout.space_to_batch", {"block_size": [2, 3]}, [[2, 5, 4, 6]],
     (R, to_ncx(tf_space_to_batch(z([2, 4, 6, 5]), [2, 3]))))
case("layout.space_to_batch", {"block_size": [2, 2], "data_format": "NXC", "blocks_first": False}, [[1, 4, 6, 3]],
     (R, tf_space_to_batch(z([1, 4, 6, 3]), [2, 2])))
case("layout.space_to_batch", {"block_size": [4]}, [[3, 2, 8]], (I, (12, 2, 2)), dtypes=I)  # 3*4, 8/4
case("layout.batch_to_space", {"block_size": [2, 3]}, [[12, 5, 4, 6]],
     (R, to_ncx(tf_batch_to_space(z([12, 4, 6, 5]), [2, 3]))))
case("layout.batch_to_space", {"block_size": [2, 2], "data_format": "NXC"}, [[8, 4, 6, 3]],
     (R, tf_batch_to_space(z([8, 4, 6, 3]), [2, 2])))
case("layout.batch_to_space", {"block_size": [3], "blocks_first": False}, [[6, 2, 5]], (I, (2, 2, 15)), dtypes=I)
case("layout.space_to_depth", {"block_size": [2, 2]}, [[1, 3, 4, 6]], (R, onnx_space_to_depth(z([1, 3, 4, 6]), 2)))
case("layout.space_to_depth", {"block_size": [2, 2], "blocks_first": False}, [[1, 3, 4, 6]],
     (B, onnx_space_to_depth(z([1, 3, 4, 6]), 2)), dtypes=B)
case("layout.space_to_depth", {"block_size": [3, 3], "data_format": "NXC"}, [[2, 6, 9, 5]],
     (R, tuple(to_nxc(list(onnx_space_to_depth(z([2, 5, 6, 9]), 3))))))
case("layout.depth_to_space", {"block_size": [2, 2]}, [[1, 12, 4, 6]], (R, onnx_depth_to_space(z([1, 12, 4, 6]), 2)))
case("layout.depth_to_space", {"block_size": [2, 2], "blocks_first": False}, [[1, 12, 4, 6]],
     (R, onnx_depth_to_space(z([1, 12, 4, 6]), 2, dcr=False)))
case("layout.depth_to_space", {"block_size": [2, 2], "data_format": "NXC"}, [[1, 4, 6, 12]],
     (B, tuple(to_nxc(list(onnx_depth_to_space(z([1, 12, 4, 6]), 2))))), dtypes=B)
# channel shuffle (ShuffleNet): reshape to [g, c/g], swap, flatten back: the shape is unchanged
case("layout.shuffle", {"axis": 1, "groups": 2}, [[1, 6, 4]],
     (R, z([1, 6, 4]).reshape(1, 2, 3, 4).transpose(0, 2, 1, 3).reshape(1, 6, 4).shape))
case("layout.shuffle", {"axis": -1, "groups": 3}, [[2, 9]], (I, (2, 9)), dtypes=I)

# ---------------------------------------------------------------- layout: indexing (§4.1.6)

# nonzero: one column of coordinates per non-zero item; their number is data-dependent, at most the
# input volume (l. 2844: `index: int[d,k|(s * ..)]`), like np.argwhere(x).T
case("layout.nonzero", {}, [[3, 4]], (I, (2, None)), bounds={"index": (None, 12)})
case("layout.nonzero", {}, [[2, 3, 5]], (I, (3, None)), dtypes=B, bounds={"index": (None, 30)})
case("layout.nonzero", {}, [[7]], (I, (1, None)), dtypes=I, bounds={"index": (None, 7)})
case("layout.gather", {"axis": 1}, [[3, 4, 5], [2, 6]], (R, np.take(z([3, 4, 5]), np.zeros((2, 6), int), 1).shape),
     dtypes=[R, I])
case("layout.gather", {"axis": -1}, [[3, 4], []], (B, np.take(z([3, 4]), 0, -1).shape), dtypes=[B, I])
case("layout.gather", {"axis": 0}, [[5], [3]], (I, np.take(z([5]), np.zeros(3, int), 0).shape), dtypes=[I, I])


def tf_gather_nd(data: list[int], indices: list[int], batch_dims: int = 0) -> tuple[int, ...]:
    # tf.gather_nd: indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]
    return (*indices[:-1], *data[batch_dims + indices[-1]:])


case("layout.gather_nd", {}, [[3, 4, 5], [7, 2]], (R, tf_gather_nd([3, 4, 5], [7, 2])), dtypes=[R, I])
case("layout.gather_nd", {}, [[3, 4, 5], [2, 6, 3]], (I, tf_gather_nd([3, 4, 5], [2, 6, 3])), dtypes=[I, I])
case("layout.gather_nd", {"batch_dims": 1}, [[3, 4, 5], [3, 7, 1]], (R, tf_gather_nd([3, 4, 5], [3, 7, 1], 1)),
     dtypes=[R, I])
# torch.Tensor.scatter / ONNX ScatterElements / ScatterND: the output has the shape of `data`
case("layout.scatter", {"axis": 1}, [[3, 4, 5], [3, 2, 5], [3, 2, 5]], (R, (3, 4, 5)), dtypes=[R, I, R])
case("layout.scatter", {"axis": -2}, [[3, 4], [1, 4], [1, 4]], (B, (3, 4)), dtypes=[B, I, B])
case("layout.scatter_nd", {}, [[3, 4, 5], [7, 2], [7, 5]], (R, (3, 4, 5)), dtypes=[R, I, R])
case("layout.scatter_nd", {"batch_dims": 1}, [[3, 4, 5], [3, 6, 1], [3, 6, 5]], (I, (3, 4, 5)), dtypes=[I, I, I])

# ---------------------------------------------------------------- math: unary (§4.2.1)

REAL_UNARY = ["rcp", "sqrt", "rsqr", "rsqrt", "exp", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh",
              "asin", "acos", "atan", "asinh", "acosh", "atanh", "floor", "ceil", "round"]
NUM_UNARY = ["neg", "sqr", "abs", "sign"]
for _op in REAL_UNARY:
    case(f"math.{_op}", {}, [[2, 3]], (R, np.sin(z([2, 3])).shape))
    case(f"math.{_op}", {}, [[]], (R, ()))
for _op in NUM_UNARY:
    case(f"math.{_op}", {}, [[4, 1, 2]], (R, (4, 1, 2)))
    case(f"math.{_op}", {}, [[5]], (I, (5,)), dtypes=I)
case("math.iden", {}, [[2, 3]], (R, (2, 3)))
case("math.iden", {}, [[3]], (B, (3,)), dtypes=B)
case("math.iden", {}, [[]], (I, ()), dtypes=I)
case("math.not", {}, [[2, 3]], (B, (2, 3)), dtypes=B)
case("math.not", {}, [[]], (B, ()), dtypes=B)

# ---------------------------------------------------------------- math: binary (§4.2.2)

ARITH_BINARY = ["add", "sub", "mul", "div", "mod", "pow", "min", "max"]
COMPARE_BINARY = ["lt", "gt", "le", "ge"]
EQUALITY_BINARY = ["eq", "ne"]
LOGIC_BINARY = ["and", "or", "xor"]
for _op in ARITH_BINARY:
    case(f"math.{_op}", {}, [[2, 1, 3], [4, 1]], (R, broadcast([[2, 1, 3], [4, 1]])))
    case(f"math.{_op}", {}, [[5], []], (I, (5,)), dtypes=I)
    case(f"math.{_op}", {"rhs_align": 1}, [[5, 2, 3], [2]], (R, broadcast([[5, 2, 3], [2]], [None, 1])))
for _op in COMPARE_BINARY:
    case(f"math.{_op}", {}, [[2, 3], [3]], (B, broadcast([[2, 3], [3]])), dtypes=I)
    case(f"math.{_op}", {"lhs_align": 0}, [[2], [2, 3]], (B, broadcast([[2], [2, 3]], [0, None])))
for _op in EQUALITY_BINARY:
    case(f"math.{_op}", {}, [[2, 3], [1]], (B, broadcast([[2, 3], [1]])), dtypes=[B, B])
    case(f"math.{_op}", {}, [[4, 1], [1, 5]], (B, broadcast([[4, 1], [1, 5]])), dtypes=[R, R])
for _op in LOGIC_BINARY:
    case(f"math.{_op}", {}, [[2, 3], [3]], (B, broadcast([[2, 3], [3]])), dtypes=B)
    case(f"math.{_op}", {"lhs_align": -1, "rhs_align": 0}, [[3], [3]], (B, broadcast([[3], [3]], [-1, 0])),
         dtypes=B)
# alignment (l. 3446-3448): left alignment, padding on the left, right alignment with padding
case("math.add", {"lhs_align": 0}, [[2, 3], [2, 3, 4]], (R, broadcast([[2, 3], [2, 3, 4]], [0, None])))
case("math.add", {"rhs_align": -1}, [[5, 2, 3], [2]], (R, broadcast([[5, 2, 3], [2]], [None, -1])))
case("math.mul", {"lhs_align": 2}, [[3], [4, 1, 1]], (R, broadcast([[3], [4, 1, 1]], [2, None])))
case("math.sub", {"lhs_align": 1, "rhs_align": -2}, [[4], [5]], (I, broadcast([[4], [5]], [1, -2])), dtypes=I)

# ---------------------------------------------------------------- math: select, n-ary, misc (§4.2.3-5)

case("math.select", {}, [[2, 1], [3], [2, 3]], (I, np.where(z([2, 1]) > 0, z([3]), z([2, 3])).shape),
     dtypes=[B, I, I])
case("math.select", {"cond_align": 0}, [[4], [4, 5], []], (R, broadcast([[4], [4, 5], []], [0, None, None])),
     dtypes=[B, R, R])
case("math.select", {}, [[], [2], [2]], (B, (2,)), dtypes=B)
for _op, _out in [("sum_n", None), ("prod_n", None), ("min_n", None), ("max_n", None), ("argmin_n", I),
                  ("argmax_n", I)]:
    case(f"math.{_op}", {}, [[[2, 3], [2, 3], [2, 3]]], (_out or R, np.sum(z([3, 2, 3]), axis=0).shape))
    case(f"math.{_op}", {}, [[[4]]], (_out or I, (4,)), dtypes=I)
for _op in ["any_n", "all_n"]:
    case(f"math.{_op}", {}, [[[2, 3], [2, 3]]], (B, (2, 3)), dtypes=B)
    case(f"math.{_op}", {}, [[[], [], []]], (B, ()), dtypes=B)
case("math.axpb", {}, [[3], [2, 3], [1]], (R, broadcast([[3], [2, 3], [1]])))
case("math.axpb", {"a_align": 0}, [[2], [2, 3], []], (R, broadcast([[2], [2, 3], []], [0, None, None])))
case("math.axpby", {}, [[3], [2, 3], [1], [4, 1, 1]], (R, broadcast([[3], [2, 3], [1], [4, 1, 1]])))
case("math.axpby", {"b_align": 1}, [[], [2, 5, 3], [5], [3]], (R, broadcast([[], [2, 5, 3], [5], [3]],
                                                                          [None, None, 1, None])))
case("math.clamp", {}, [[2, 3], [], [3]], (R, np.clip(z([2, 3]), z([]), z([3])).shape))
case("math.clamp", {"min_align": 0, "max_align": 0}, [[4, 5], [4], [4]], (I, broadcast([[4, 5], [4], [4]],
                                                                                      [None, 0, 0])), dtypes=I)

# ---------------------------------------------------------------- math: reductions (§4.2.6-7)

for _op, _in, _out in [("min_reduce", I, I), ("max_reduce", R, R), ("sum_reduce", I, I), ("prod_reduce", R, R),
                       ("mean_reduce", R, R), ("lp_reduce", R, R), ("any_reduce", B, B), ("all_reduce", B, B)]:
    _p = {"p": 2.0} if _op == "lp_reduce" else {}
    case(f"math.{_op}", {"axes": [1], **_p}, [[2, 3, 4]], (_out, np.sum(z([2, 3, 4]), axis=1, keepdims=True).shape),
         dtypes=_in)
    case(f"math.{_op}", {"axes": [-1, 0], "squeeze": True, **_p}, [[2, 3, 4]],
         (_out, np.sum(z([2, 3, 4]), axis=(-1, 0)).shape), dtypes=_in)
    case(f"math.{_op}", {**_p}, [[2, 3, 4]], (_out, np.sum(z([2, 3, 4]), keepdims=True).shape), dtypes=_in)
    case(f"math.{_op}", {"squeeze": True, **_p}, [[2, 3]], (_out, np.sum(z([2, 3])).shape), dtypes=_in)
for _op in ["argmin", "argmax"]:
    case(f"math.{_op}", {"axis": 1}, [[2, 3, 4]], (I, np.argmax(z([2, 3, 4]), axis=1, keepdims=True).shape))
    case(f"math.{_op}", {"axis": -1, "squeeze": True}, [[2, 3, 4]], (I, np.argmax(z([2, 3, 4]), axis=-1).shape))
    case(f"math.{_op}", {"axis": 0, "squeeze": True}, [[5]], (I, np.argmax(z([5]), axis=0).shape))
# argmin_nd / argmax_nd: the reduced shape (with keepdims unless squeezed) plus one dimension holding the
# k coordinates within the reduced axes (l. 4852: `output: int[... ,k]`)
for _op in ["argmin_nd", "argmax_nd"]:
    case(f"math.{_op}", {"axes": [0, 2]}, [[2, 3, 4]],
         (I, (*np.sum(z([2, 3, 4]), axis=(0, 2), keepdims=True).shape, 2)))
    case(f"math.{_op}", {"axes": [0, -1], "squeeze": True}, [[2, 3, 4]],
         (I, (*np.sum(z([2, 3, 4]), axis=(0, -1)).shape, 2)))
    case(f"math.{_op}", {}, [[2, 3]], (I, (1, 1, 2)))
case("math.moments", {"axes": [0, 2]}, [[2, 3, 4]], (R, np.mean(z([2, 3, 4]), axis=(0, 2), keepdims=True).shape),
     (R, np.var(z([2, 3, 4]), axis=(0, 2), keepdims=True).shape))
case("math.moments", {"axes": [0, 2], "squeeze": True}, [[2, 3, 4]], (R, np.mean(z([2, 3, 4]), axis=(0, 2)).shape),
     (R, np.var(z([2, 3, 4]), axis=(0, 2)).shape))
case("math.moments", {"squeeze": True}, [[2, 3]], (R, ()), (R, ()))
case("math.cumsum", {"axis": 1}, [[2, 3, 4]], (R, np.cumsum(z([2, 3, 4]), axis=1).shape))
case("math.cumsum", {"axis": -1, "exclusive": True, "reverse": True}, [[2, 5]],
     (R, np.cumsum(z([2, 5]), axis=-1).shape))

# ---------------------------------------------------------------- linalg (§4.3)

case("linalg.dot", {}, [[5], [5], None], (R, np.dot(z([5]), z([5])).shape))
case("linalg.dot", {}, [[5], [5], []], (R, np.dot(z([5]), z([5])).shape))
case("linalg.matvec", {}, [[3, 4], [4], None], (R, np.matmul(z([3, 4]), z([4])).shape))
case("linalg.matvec", {"transA": True}, [[3, 4], [3], [4]], (R, np.matmul(z([3, 4]).T, z([3])).shape))
case("linalg.matmul", {}, [[2, 3, 4], [4, 5], [3, 5]], (R, np.matmul(z([2, 3, 4]), z([4, 5])).shape))
case("linalg.matmul", {"transA": True, "transB": True}, [[4, 3], [2, 1, 5, 4], None],
     (R, np.matmul(z([4, 3]).T, np.swapaxes(z([2, 1, 5, 4]), -1, -2)).shape))
case("linalg.matmul", {"transB": True}, [[6, 1, 3, 4], [7, 5, 4], [7, 3, 5]],
     (R, np.matmul(z([6, 1, 3, 4]), np.swapaxes(z([7, 5, 4]), -1, -2)).shape))
case("linalg.outer", {}, [[2, 3], [4]], (R, np.multiply.outer(z([2, 3]), z([4])).shape))
case("linalg.outer", {}, [[], [4, 5]], (R, np.multiply.outer(z([]), z([4, 5])).shape))

# ---------------------------------------------------------------- nn: linear (§4.4.1)

# torch.nn.functional.linear: input (b, c), weight (n, c) -> (b, n)
case("nn.linear", {}, [[2, 3], [4, 3], None], (R, (2, 4)))
case("nn.linear", {}, [[7, 3], [1, 3], [1]], (R, (7, 1)))
case("nn.conv", {"padding": [0, 0]}, [[1, 3, 8], [4, 3, 3], [4]], (R, (1, 4, conv_size(8, 3))))
case("nn.conv", {"stride": [2, 1], "dilation": [1, 2], "padding": [1, 0, 2, 1]}, [[2, 3, 9, 10], [6, 3, 3, 4]],
     (R, (2, 6, conv_size(9, 3, 2, 1, 1 + 2), conv_size(10, 4, 1, 2, 0 + 1))))
case("nn.conv", {"groups": 2, "padding": [0, 0, 0, 0]}, [[1, 4, 8, 8], [6, 2, 3, 3], [6]],
     (R, (1, 6, conv_size(8, 3), conv_size(8, 3))))
# groups=0 means depthwise: one group per input channel (l. 5220: `g = groups == 0 ? ic : groups`)
case("nn.conv", {"padding": [0, 0], "groups": 0}, [[1, 4, 8], [8, 1, 3]], (R, (1, 8, conv_size(8, 3))))
case("nn.conv", {"data_format": "NXC", "padding": [1, 1, 1, 1]}, [[1, 8, 7, 3], [4, 3, 3, 3]],
     (R, (1, conv_size(8, 3, pad=2), conv_size(7, 3, pad=2), 4)))
case("nn.conv", {"data_format": "XCN", "filter_format": "XCN", "padding": [0, 0]}, [[9, 3, 2], [3, 3, 5]],
     (R, (conv_size(9, 3), 5, 2)))
case("nn.conv", {"filter_format": "NXC", "padding": [0, 0]}, [[1, 3, 8], [5, 3, 3]], (R, (1, 5, conv_size(8, 3))))
case("nn.conv", {"filter_format": "CXN", "padding": [0, 2], "stride": 3}, [[1, 2, 10], [2, 4, 5]],
     (R, (1, 5, conv_size(10, 4, 3, pad=2))))
case("nn.conv", {"ceil_mode": True, "stride": 2, "padding": [0, 0]}, [[1, 1, 8], [1, 1, 3]],
     (R, (1, 1, conv_size(8, 3, 2, ceil=True))))
# without 'padding', the input is padded so that the output has floor(i / stride) items (l. 5212-5215)
case("nn.conv", {"stride": 2}, [[1, 3, 9, 8], [4, 3, 3, 3]], (R, (1, 4, 9 // 2, 8 // 2)))
case("nn.conv", {"stride": 2, "ceil_mode": True}, [[1, 3, 9], [4, 3, 3]], (R, (1, 4, -(-9 // 2))))
case("nn.deconv", {"padding": [0, 0], "stride": 2}, [[1, 3, 8], [3, 4, 3], None], (R, (1, 4, deconv_size(8, 3, 2))))
case("nn.deconv", {"padding": [1, 1, 0, 1], "stride": [2, 1], "dilation": [1, 2]}, [[2, 4, 5, 6], [4, 3, 3, 2], [3]],
     (R, (2, 3, deconv_size(5, 3, 2, 1, 1 + 0), deconv_size(6, 2, 1, 2, 1 + 1))))
# torch's output_padding is what 'output_size' adds to the computed size (it must stay below the stride)
case("nn.deconv", {"padding": [1, 1], "stride": 2, "output_size": [16]}, [[1, 3, 8], [3, 4, 3], None],
     (R, (1, 4, deconv_size(8, 3, 2, pad=2, output_padding=1))))
# groups: output channels are filter-channels * groups (torch: weight (in, out / groups, k...))
case("nn.deconv", {"padding": [0, 0], "groups": 2}, [[1, 4, 8], [4, 3, 3], None], (R, (1, 6, deconv_size(8, 3))))
case("nn.deconv", {"padding": [0, 0], "data_format": "NXC"}, [[1, 8, 3], [3, 4, 3], None],
     (R, (1, deconv_size(8, 3), 4)))
case("nn.deconv", {"padding": [1, 0], "data_format": "XCN", "filter_format": "CXN", "stride": 3}, [[8, 3, 2], [4, 3, 3],
                                                                                               [4]],
     (R, (deconv_size(8, 3, 3, pad=1), 4, 2)))
# without 'padding', the output has i * stride items (l. 5312)
case("nn.deconv", {"stride": 2}, [[1, 3, 8], [3, 4, 3], None], (R, (1, 4, 16)))

# ---------------------------------------------------------------- nn: pooling (§4.4.2)

POOL_ATTRS = {"size": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1]}
for _op, _extra in [("max_pool", {}), ("sum_pool", {}), ("avg_pool", {}), ("rms_pool", {}), ("lp_pool", {"p": 2.0})]:
    case(f"nn.{_op}", {**POOL_ATTRS, **_extra}, [[1, 3, 8, 8]],
         (R, (1, 3, conv_size(8, 3, 2, pad=2), conv_size(8, 3, 2, pad=2))))
    case(f"nn.{_op}", {"size": [3], "stride": [2], "axes": [-1], "padding": [0, 0], **_extra}, [[1, 3, 8]],
         (R, (1, 3, conv_size(8, 3, 2))))
    case(f"nn.{_op}", {"size": [2, 2], "dilation": [2, 1], "padding": [0, 0, 1, 0], "ceil_mode": True, "stride": 2,
                       **_extra}, [[2, 1, 9, 6]],
         (R, (2, 1, conv_size(9, 2, 2, 2, 1, ceil=True), conv_size(6, 2, 2, 1, 0, ceil=True))))
    # pooling over all axes with size 1 in the batch / channel axes
    case(f"nn.{_op}", {"size": [1, 1, 3, 3], "stride": [1, 1, 2, 2], "padding": [0] * 8, "axes": [0, 1, 2, 3],
                       **_extra}, [[1, 3, 8, 8]], (R, (1, 3, conv_size(8, 3, 2), conv_size(8, 3, 2))))
    # automatic padding: floor(i / stride) outputs (l. 5390-5393)
    case(f"nn.{_op}", {"size": [3, 3], "stride": [2, 3], **_extra}, [[1, 2, 9, 10]], (R, (1, 2, 9 // 2, 10 // 3)))

# ---------------------------------------------------------------- nn: activations, normalization (§4.4.3-4)

for _op, _attrs in [("relu", {}), ("relu", {"alpha": 0.1, "max": 6.0}), ("thresholded_relu", {"theta": 1.0}),
                    ("elu", {}), ("selu", {}), ("gelu", {}), ("gelu", {"approximate": "TANH"}), ("silu", {}),
                    ("sigmoid", {}), ("softplus", {}), ("erf", {}), ("softmax", {}), ("softmax", {"axes": [-1, 0]})]:
    case(f"nn.{_op}", _attrs, [[2, 3, 4]], (R, (2, 3, 4)))
for _op in ["relu", "thresholded_relu", "elu", "selu", "gelu", "silu", "sigmoid", "softplus", "erf"]:
    case(f"nn.{_op}", {}, [[]], (R, ()))
    case(f"nn.{_op}", {}, [[0, 7]], (R, (0, 7)))
case("nn.prelu", {}, [[2, 3, 4], [3]], (R, (2, 3, 4)))
case("nn.prelu", {"axis": -1}, [[2, 3, 4], [4]], (R, (2, 3, 4)))
case("nn.batch_norm", {}, [[2, 3, 4], [3], [3], None, None], (R, (2, 3, 4)))
case("nn.batch_norm", {"channel_axis": -1, "epsilon": 0.1}, [[2, 3, 4], [4], [4], [4], [4]], (R, (2, 3, 4)))
case("nn.mean_variance_norm", {}, [[2, 3, 4, 5], None, None], (R, (2, 3, 4, 5)))
case("nn.mean_variance_norm", {"axes": [1]}, [[2, 3, 4], [3], [3]], (R, (2, 3, 4)))
case("nn.local_response_norm", {"size": [5]}, [[2, 3, 4, 5]], (R, (2, 3, 4, 5)))
case("nn.local_response_norm", {"axes": [1, 2], "size": [3, 3]}, [[2, 3, 4]], (R, (2, 3, 4)))
case("nn.l1_norm", {"axes": [1]}, [[2, 3, 4, 5]], (R, (2, 3, 4, 5)))
case("nn.l1_norm", {"axes": [-1, 0], "bias": 1.0, "epsilon": 1e-3}, [[2, 3]], (R, (2, 3)))
case("nn.l2_norm", {"axes": [1]}, [[2, 3, 4, 5]], (R, (2, 3, 4, 5)))
case("nn.l2_norm", {"axes": [0], "epsilon": 1e-6}, [[7]], (R, (7,)))

# ---------------------------------------------------------------- nn: LSTM (§4.4.5)

# torch.nn.LSTM (1 layer, seq-first): X (s, b, c), W (4n, c), R (4n, n) -> Y (s, b, n), h_n, c_n (b, n).
# Y's step count is dynamic (the loops may stop early), at most s (l. 6081: `Y: real[~|s,b,n]`).
LSTM_IN = [[7, 2, 3], [20, 3], [20, 5], [20], [2, 5], [2, 5]]
LSTM_OUT = ((R, (None, 2, 5)), (R, (2, 5)), (R, (2, 5)))
case("nn.lstm_step", {}, [[2, 5], [2, 5], [2, 3], [20, 3], [20, 5], [20]], (R, (2, 5)), (R, (2, 5)))
case("nn.lstm_step", {}, [[1, 1], [1, 1], [1, 6], [4, 6], [4, 1], [4]], (R, (1, 1)), (R, (1, 1)))
case("nn.lstm_loop", {}, [*LSTM_IN, None], *LSTM_OUT, bounds={"Y": (7, None, None)})
case("nn.lstm_loop", {}, [*LSTM_IN, []], *LSTM_OUT, dtypes=[R] * 6 + [I], bounds={"Y": (7, None, None)})
case("nn._jagged_lstm_loops", {}, [*LSTM_IN, [2]], *LSTM_OUT, dtypes=[R] * 6 + [I], bounds={"Y": (7, None, None)})
case("nn._jagged_lstm_loops", {}, [[3, 4, 1], [8, 1], [8, 2], [8], [4, 2], [4, 2], [4]], (R, (None, 4, 2)),
     (R, (4, 2)), (R, (4, 2)), dtypes=[R] * 6 + [I], bounds={"Y": (3, None, None)})
case("nn.lstm", {}, [*LSTM_IN, [2]], *LSTM_OUT, dtypes=[R] * 6 + [I], bounds={"Y": (7, None, None)})
# h0 and c0 default to zeros of shape [b, n] (l. 6137-6138: `h0: real[b,n] = 0.0;`)
case("nn.lstm", {}, [[4, 1, 6], [8, 6], [8, 2], [8]], (R, (None, 1, 2)), (R, (1, 2)), (R, (1, 2)),
     bounds={"Y": (4, None, None)})

# ---------------------------------------------------------------- image (§4.5)

# torch.nn.functional.interpolate with an integer scale_factor: floor(i * f) (exact here)
for _op in ["nearest_downsample", "area_downsample"]:
    case(f"image.{_op}", {"axes": [2, 3], "factor": [2, 3]}, [[1, 3, 8, 6]], (R, (1, 3, 8 // 2, 6 // 3)))
    case(f"image.{_op}", {"factor": [1, 2]}, [[5, 4]], (R, (5, 2)))
for _op in ["nearest_upsample", "linear_upsample"]:
    case(f"image.{_op}", {"axes": [2, 3], "factor": [2, 3]}, [[1, 3, 8, 6]], (R, (1, 3, 8 * 2, 6 * 3)))
    case(f"image.{_op}", {"axes": [-1], "factor": [4]}, [[2, 5]], (R, (2, 20)))
case("image.linear_upsample", {"axes": [1], "factor": [3], "symmetric": False, "replicate_border": False},
     [[2, 5]], (R, (2, 15)))
case("image.linear_upsample", {"axes": [1], "factor": [2], "symmetric": True, "replicate_border": False},
     [[2, 5]], (R, (2, 10)))
# resize to explicit sizes: torch interpolate(size=...) gives exactly `size` on the resized axes
for _op, _extra in [("nearest_resize", {}), ("nearest_resize", {"coordinate_transform": "ALIGNED"}),
                    ("linear_resize", {}), ("linear_resize", {"coordinate_transform": "ASYMMETRIC"}),
                    ("cubic_resize", {}), ("resize", {}), ("resize", {"mode": "LINEAR"}),
                    ("resize", {"mode": "CUBIC"})]:
    case(f"image.{_op}", {"axes": [2, 3], "size": [5, 7], **_extra}, [[1, 3, 8, 6]], (R, (1, 3, 5, 7)))
case("image.nearest_resize", {"size": [1, 9]}, [[4, 3]], (R, (1, 9)))
case("image.cubic_resize", {"axes": [-1], "size": [2], "coeff_a": -0.5, "coordinate_transform": "ALIGNED"},
     [[2, 3, 4]], (R, (2, 3, 2)))
case("image.resize", {"axes": [-1], "size": [11], "mode": "LINEAR"}, [[2, 3, 4]], (R, (2, 3, 11)))
case("image.rescale", {"axes": [2, 3], "factor": [0.5, 1.5]}, [[1, 3, 8, 6]], (R, (1, 3, 4, 9)))
# non-integral products are rounded (l. 6507: `size = int(round(real(s[axes]) * factor))`; rounding half
# away from zero): 7 * 0.5 = 3.5 -> 4, 5 * 1.3 = 6.5 -> 7, 3 * 0.4 = 1.2 -> 1
case("image.rescale", {"axes": [0, 1, 2], "factor": [0.5, 1.3, 0.4], "mode": "LINEAR"}, [[7, 5, 3]], (R, (4, 7, 1)))
# torchvision.ops.roi_pool / roi_align: (K, C, output_size...)
for _op in ["max_roi_pool", "avg_roi_pool"]:
    case(f"image.{_op}", {"output_size": [2, 3]}, [[1, 3, 8, 6], [5, 4], [5]], (R, (5, 3, 2, 3)), dtypes=[R, R, I])
    case(f"image.{_op}", {"output_size": [4]}, [[2, 7, 9], [1, 2], [1]], (R, (1, 7, 4)), dtypes=[R, R, I])
# torch.nn.functional.grid_sample: input (N, C, H, W), grid (N, Ho, Wo, 2) -> (N, C, Ho, Wo); 5D likewise
for _op in ["_nearest_grid_sample", "_linear_grid_sample", "_cubic_grid_sample", "grid_sample"]:
    case(f"image.{_op}", {}, [[2, 3, 8, 6], [2, 4, 5, 2]], (R, (2, 3, 4, 5)))
    case(f"image.{_op}", {"padding": "REFLECT", "aligned": True}, [[2, 3, 8, 6, 4], [2, 4, 5, 1, 3]],
         (R, (2, 3, 4, 5, 1)))
case("image.grid_sample", {"mode": "NEAREST", "padding": "REPLICATE"}, [[1, 2, 9], [1, 4, 1]], (R, (1, 2, 4)))
case("image.grid_sample", {"mode": "CUBIC"}, [[1, 2, 9, 9], [1, 3, 3, 2]], (R, (1, 2, 3, 3)))

# ---------------------------------------------------------------- quant (§4.6), algo (§4.7)

case("quant.zero_point_linear_quantize", {"zero_point": 0, "scale": 0.5, "bits": 8}, [[2, 3, 4]], (R, (2, 3, 4)))
case("quant.zero_point_linear_quantize", {"zero_point": [0, 1, 2], "scale": [0.5, 0.5, 1.0], "bits": 4,
                                          "signed": False}, [[2, 3, 4]], (R, (2, 3, 4)))
case("quant.zero_point_linear_quantize", {"zero_point": [0, 1, 2, 3], "scale": [0.5, 0.5, 1.0, 1.0], "bits": 8,
                                          "channel_axis": -1, "symmetric": True}, [[2, 3, 4]], (R, (2, 3, 4)))
case("quant.min_max_linear_quantize", {"min": 0.0, "max": 1.0, "bits": 8}, [[2, 3, 4]], (R, (2, 3, 4)))
case("quant.min_max_linear_quantize", {"min": [0.0] * 3, "max": [1.0, 2.0, 3.0], "bits": 8, "channel_axis": 0},
     [[3, 5]], (R, (3, 5)))
# torch.topk: the selected axis becomes k; the spec caps k at the extent (l. 6799: `k <? m`)
case("algo.top_k", {"k": 3}, [[5, 4]], (R, (3, 4)), (I, (3, 4)))
case("algo.top_k", {"k": 2, "axis": -1, "largest": False, "sorted": False}, [[2, 5, 4]], (R, (2, 5, 2)),
     (I, (2, 5, 2)))
case("algo.top_k", {"k": 7, "axis": 1}, [[5, 4]], (R, (5, 4)), (I, (5, 4)))
# ONNX NonMaxSuppression: selected_indices (num_selected, 3) of [batch, class, box]; at most
# b * c * max_outputs_per_class of them (l. 6828), max_outputs_per_class defaulting to n (l. 6819)
case("algo.nonmax_suppress", {}, [[2, 10, 4], [2, 3, 10]], (I, (None, 3)), bounds={"indices": (2 * 3 * 10, None)})
case("algo.nonmax_suppress", {"max_outputs_per_class": 4, "iou_threshold": 0.5, "score_threshold": 0.1,
                              "box_format": "CENTER"}, [[1, 6, 4], [1, 5, 6]], (I, (None, 3)),
     bounds={"indices": (1 * 5 * 4, None)})


# ============================================================================================
# Running the cases
# ============================================================================================


def infer(op: str, attribs: dict[str, Any], inputs: list[Any], dtypes: Any = R,
          type_args: tuple[str, ...] = ()) -> skriptnd.InferResult:
    return skriptnd.infer(op, attribs, inputs, dtypes, type_args=type_args)


def bounds_of(c: Case) -> dict[str, tuple[int | None, ...] | None]:
    """Upper bounds of dynamic extents: not part of InferResult, so bind directly."""
    defn, diags = find_operator(c.op)
    assert defn is not None, diags
    kinds = [c.dtypes] * len(c.inputs) if isinstance(c.dtypes, str) else c.dtypes

    def tensor(shape: Any, dtype: str) -> Any:
        if shape is None:
            return None
        if shape and isinstance(shape[0], list):
            return Pack([TensorValue(dtype, tuple(s)) for s in shape])
        return TensorValue(dtype, tuple(shape))

    def value(v: Any) -> Any:
        return Pack([value(x) for x in v]) if isinstance(v, list) else v

    b = bind(defn, {k: value(v) for k, v in c.attribs.items()},
             [tensor(s, k) for s, k in zip(c.inputs, kinds, strict=True)], c.type_args)
    return {o.name: o.bounds for o in b.outputs}


def test_every_operator_has_a_case() -> None:
    assert len(ALL_OPERATORS) == 151
    covered = {c.op for c in CASES}
    assert not covered - ALL_OPERATORS, sorted(covered - ALL_OPERATORS)
    missing = sorted(ALL_OPERATORS - covered)
    assert not missing, f"operators without a shape case: {missing}"


@pytest.mark.parametrize("c", CASES, ids=str)
def test_output_shapes_and_dtypes(c: Case) -> None:
    r = infer(c.op, c.attribs, c.inputs, c.dtypes, c.type_args)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    got = [(o.dtype, o.shapes if o.shapes is not None else o.shape) for o in r.outputs]
    expected = [(dtype, [tuple(s) for s in shape] if isinstance(shape, list) else tuple(shape))
                for dtype, shape in c.expected]
    assert got == expected
    if c.bounds:
        found = bounds_of(c)
        for name, bound in c.bounds.items():
            assert found[name] == bound, name
    elif any(None in (o.shape or ()) for o in r.outputs):
        pytest.fail("a dynamic output shape needs its upper bound asserted")


# ============================================================================================
# Property-based checks of the shape-heavy operators
# ============================================================================================

small_shape = st.lists(st.integers(1, 3), min_size=0, max_size=3)
align = st.sampled_from([None, None, None, 0, 1, 2, -1, -2])

BINARY = ([(op, dt, dt) for op in ARITH_BINARY for dt in (I, R)]
          + [(op, dt, B) for op in COMPARE_BINARY for dt in (I, R)]
          + [(op, dt, B) for op in EQUALITY_BINARY for dt in (I, R, B)]
          + [(op, B, B) for op in LOGIC_BINARY])


@FAST
@given(st.sampled_from(BINARY), small_shape, small_shape, align, align)
def test_binary_broadcasting_with_alignment(op: tuple, x: list[int], y: list[int], ax: int | None,
                                            ay: int | None) -> None:
    name, dtype, out = op
    attribs = {k: v for k, v in (("lhs_align", ax), ("rhs_align", ay)) if v is not None}
    r = infer(f"math.{name}", attribs, [x, y], dtype)
    try:
        expected = broadcast([x, y], [ax, ay])
    except ValueError:
        assert [d.code for d in r.diagnostics] == ["E0501"]
        assert "incompatible argument shapes for broadcasting" in r.diagnostics[0].message
        return
    assert r.ok, r.diagnostics
    assert [(o.dtype, o.shape) for o in r.outputs] == [(out, expected)]


@FAST
@given(st.sampled_from(["select", "axpb", "clamp"]), small_shape, small_shape, small_shape, align, align, align)
def test_ternary_broadcasting_with_alignment(op: str, a: list[int], b: list[int], c: list[int], aa: int | None,
                                             ab: int | None, ac: int | None) -> None:
    names = {"select": ("cond_align", "lhs_align", "rhs_align"), "axpb": ("a_align", "x_align", "b_align"),
             "clamp": ("val_align", "min_align", "max_align")}[op]
    attribs = {k: v for k, v in zip(names, (aa, ab, ac), strict=True) if v is not None}
    dtypes = [B, I, I] if op == "select" else R
    r = infer(f"math.{op}", attribs, [a, b, c], dtypes)
    try:
        expected = broadcast([a, b, c], [aa, ab, ac])
    except ValueError:
        assert [d.code for d in r.diagnostics] == ["E0501"], r.diagnostics
        assert "incompatible argument shapes for broadcasting" in r.diagnostics[0].message
        return
    assert r.ok, r.diagnostics
    assert [(o.dtype, o.shape) for o in r.outputs] == [(I if op == "select" else R, expected)]


REDUCTIONS = [("min_reduce", I, I), ("max_reduce", R, R), ("sum_reduce", R, R), ("prod_reduce", I, I),
              ("mean_reduce", R, R), ("lp_reduce", R, R), ("any_reduce", B, B), ("all_reduce", B, B),
              ("moments", R, R), ("argmin_nd", R, I), ("argmax_nd", R, I)]


@st.composite
def axes_of(draw: st.DrawFn, rank: int, min_size: int = 0) -> list[int]:
    """Distinct axes in random order, each written positive or negative."""
    chosen = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=min_size, max_size=rank)) if rank else []
    return [a - rank if draw(st.booleans()) else a for a in chosen]


@FAST
@given(st.sampled_from(REDUCTIONS), st.lists(st.integers(1, 4), max_size=4), st.booleans(), st.data())
def test_reductions_match_numpy_keepdims(op: tuple, shape: list[int], squeeze: bool, data: st.DataObject) -> None:
    name, dtype, out = op
    axes = data.draw(st.none() | axes_of(len(shape)))
    attribs: dict[str, Any] = {"squeeze": squeeze}
    if axes is not None:
        attribs["axes"] = axes
    if name == "lp_reduce":
        attribs["p"] = 1.0
    r = infer(f"math.{name}", attribs, [shape], dtype)
    assert r.ok, r.diagnostics
    reduced = tuple(range(len(shape))) if axes is None else tuple(axes)
    expected = np.sum(np.zeros(shape), axis=reduced, keepdims=not squeeze).shape
    if name.endswith("_nd"):  # one coordinate per reduced axis (l. 4852)
        expected = (*expected, len(reduced))
    assert [(o.dtype, o.shape) for o in r.outputs] == [(out, expected)] * (2 if name == "moments" else 1)


@FAST
@given(st.sampled_from(["argmin", "argmax"]), st.lists(st.integers(1, 4), min_size=1, max_size=4), st.booleans(),
       st.data())
def test_argmin_argmax_match_numpy(name: str, shape: list[int], squeeze: bool, data: st.DataObject) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    r = infer(f"math.{name}", {"axis": axis, "squeeze": squeeze}, [shape])
    assert r.ok, r.diagnostics
    assert r.outputs[0].dtype == I
    assert r.outputs[0].shape == np.argmax(np.zeros(shape), axis=axis, keepdims=not squeeze).shape


@FAST
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.data())
def test_transpose_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    start = axis % rank
    attribs: dict[str, Any] = {"axis": axis}
    if data.draw(st.booleans()):
        perm = data.draw(st.permutations(range(start, rank)))
        attribs["perm"] = [p - rank if data.draw(st.booleans()) else p for p in perm]
    else:
        perm = list(range(rank - 1, start - 1, -1))  # numpy's default reverses; here only from `axis` on
    r = infer("layout.transpose", attribs, [shape], I)
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == np.transpose(np.zeros(shape), [*range(start), *perm]).shape


@FAST
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.data())
def test_slice_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    rank = len(shape)
    axes = data.draw(axes_of(rank, min_size=1))
    begin, end, stride = [], [], []
    for a in axes:
        n = shape[a]
        b = data.draw(st.integers(0, n - 1))
        s = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
        e = data.draw(st.integers(b, n + 2) if s > 0 else st.integers(-3, b))
        begin.append(b)
        end.append(e)
        stride.append(s)
    r = infer("layout.slice", {"axes": axes, "begin": begin, "end": end, "stride": stride}, [shape])
    assert r.ok, r.diagnostics
    expected = list(shape)
    for a, b, e, s in zip(axes, begin, end, stride, strict=True):
        expected[a] = np_slice(shape[a], b, e, s)
    assert r.outputs[0].shape == tuple(expected)


@FAST
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_pad_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    rank = len(shape)
    axes = data.draw(st.none() | axes_of(rank))
    effected = list(range(rank)) if axes is None else axes
    before = data.draw(st.lists(st.integers(0, 3), min_size=len(effected), max_size=len(effected)))
    after = data.draw(st.lists(st.integers(0, 3), min_size=len(effected), max_size=len(effected)))
    method = data.draw(st.sampled_from(["CONSTANT", "REFLECT", "REPLICATE", "SYMMETRIC"]))
    # ONNX Pad's layout: all begins, then all ends
    attribs: dict[str, Any] = {"padding": before + after, "method": method}
    if axes is not None:
        attribs["axes"] = axes
    r = infer("layout.pad", attribs, [shape, None], I)
    assert r.ok, r.diagnostics
    width = [(0, 0)] * rank
    for a, b, e in zip(effected, before, after, strict=True):
        width[a] = (b, e)
    assert r.outputs[0].shape == np.pad(np.zeros(shape), width).shape


@FAST
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.data())
def test_tile_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    rank = len(shape)
    axes = data.draw(st.none() | axes_of(rank))
    effected = list(range(rank)) if axes is None else axes
    repeats = data.draw(st.lists(st.integers(1, 3), min_size=len(effected), max_size=len(effected)))
    attribs: dict[str, Any] = {"repeats": repeats}
    if axes is not None:
        attribs["axes"] = axes
    r = infer("layout.tile", attribs, [shape], B)
    assert r.ok, r.diagnostics
    reps = [1] * rank
    for a, n in zip(effected, repeats, strict=True):
        reps[a] = n
    assert (r.outputs[0].dtype, r.outputs[0].shape) == (B, np.tile(np.zeros(shape), reps).shape)


@FAST
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.lists(st.integers(0, 3), max_size=2), st.data())
def test_gather_matches_numpy_take(shape: list[int], index: list[int], data: st.DataObject) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    r = infer("layout.gather", {"axis": axis}, [shape, index], [R, I])
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == np.take(np.zeros(shape), np.zeros(index, dtype=int), axis=axis).shape


@FAST
@given(st.lists(st.integers(1, 3), max_size=3), st.data())
def test_squeeze_unsqueeze_match_numpy(shape: list[int], data: st.DataObject) -> None:
    out_rank = len(shape) + data.draw(st.integers(0, 2))
    axes = data.draw(axes_of(out_rank).filter(lambda a: len(a) == out_rank - len(shape)))
    r = infer("layout.unsqueeze", {"axes": axes}, [shape])
    assert r.ok, r.diagnostics
    expanded = np.expand_dims(np.zeros(shape), tuple(axes))
    assert r.outputs[0].shape == expanded.shape
    r = infer("layout.squeeze", {"axes": axes}, [list(expanded.shape)])
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == np.squeeze(expanded, axis=tuple(axes)).shape == tuple(shape)


@FAST
@given(st.sampled_from(["max_pool", "sum_pool", "avg_pool", "rms_pool", "lp_pool"]), st.integers(1, 3), st.data())
def test_pooling_matches_torch_formula(name: str, rank: int, data: st.DataObject) -> None:
    size = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    before = [data.draw(st.integers(0, 2)) for _ in range(rank)]
    after = [data.draw(st.integers(0, 2)) for _ in range(rank)]
    spatial = [data.draw(st.integers(d * (k - 1) + 1, 12)) for k, d in zip(size, dil, strict=True)]
    attribs: dict[str, Any] = {"size": size, "stride": stride, "dilation": dil, "padding": before + after}
    if name == "lp_pool":
        attribs["p"] = 3.0
    r = infer(f"nn.{name}", attribs, [[2, 3, *spatial]])
    assert r.ok, r.diagnostics
    expected = [conv_size(i, k, s, d, b + a) for i, k, s, d, b, a in zip(spatial, size, stride, dil, before, after,
                                                                       strict=True)]
    assert r.outputs[0].shape == (2, 3, *expected)


@FAST
@given(st.integers(1, 2), st.data())
def test_deconv_matches_torch_formula(rank: int, data: st.DataObject) -> None:
    groups = data.draw(st.integers(1, 2))
    cin, cout = groups * data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    ks = [data.draw(st.integers(1, 4)) for _ in range(rank)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    # torch needs a positive output: total padding at most d (k - 1) keeps it so
    before = [data.draw(st.integers(0, d * (k - 1))) for k, d in zip(ks, dil, strict=True)]
    after = [data.draw(st.integers(0, d * (k - 1) - b)) for k, d, b in zip(ks, dil, before, strict=True)]
    extra = [data.draw(st.integers(0, s - 1)) for s in stride]  # torch's output_padding < stride
    size = [data.draw(st.integers(1, 6)) for _ in range(rank)]
    expected = [deconv_size(i, k, s, d, b + a, op) for i, k, s, d, b, a, op in
                zip(size, ks, stride, dil, before, after, extra, strict=True)]
    attribs: dict[str, Any] = {"stride": stride, "dilation": dil, "padding": before + after, "groups": groups}
    if any(extra) or data.draw(st.booleans()):
        attribs["output_size"] = expected
    r = infer("nn.deconv", attribs, [[1, cin, *size], [cin, cout, *ks], None])
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == (1, cout * groups, *expected)


@FAST
@given(st.integers(-5, 5), st.integers(-5, 5), st.sampled_from([1, 2, 3, -1, -2, -3]))
def test_range_matches_numpy_arange(first: int, last: int, stride: int) -> None:
    r = infer("layout.range", {"first": first, "last": last, "stride": stride}, [])
    if (last - first) * stride < 0:  # the spec refuses ranges that go the wrong way (l. 2017-2018)
        assert [d.code for d in r.diagnostics] == ["E0501"]
        return
    assert r.ok, r.diagnostics
    assert (r.outputs[0].dtype, r.outputs[0].shape) == (I, np.arange(first, last, stride).shape)


# ============================================================================================
# Invalid invocations: located E04xx / E05xx diagnostics
# ============================================================================================

ERRORS = [
    # (operator, attributes, inputs, dtypes, code, message text)
    ("layout.reshape", {"shape": [5, -1]}, [[2, 3]], R, "E0501",
     "the product of input shape items (starting from 'axis', of length 'rank') must be divisible by"),
    ("layout.reshape", {"shape": [-1, -1]}, [[2, 3]], R, "E0501", "at most 1 item of 'shape' can be -1"),
    ("layout.squeeze", {"axes": [1]}, [[2, 3]], R, "E0501", "input.shape at 'axes' must be 1"),
    ("layout.unsqueeze", {"axes": [3]}, [[2]], R, "E0501", "'axes' must be between -output.rank (inclusive)"),
    ("layout.concat", {"axis": 0}, [[[2, 3], [2, 4]]], R, "E0403", "input 'inputs'"),
    ("layout.split", {"axis": 0, "sizes": [1, 1]}, [[3]], R, "E0501", "sum of 'sizes' must equal input extent"),
    ("layout.stack", {"axis": 0}, [[[2, 3], [3, 2]]], R, "E0403", "input 'inputs'"),
    ("layout.tile", {"repeats": [0]}, [[3]], R, "E0501", "'repeats' must be positive"),
    ("layout.broadcast", {"shape": [4]}, [[3]], R, "E0501", "input.shape or 'shape' must be 1 or the two"),
    ("layout.slice", {"begin": [3], "end": [4]}, [[3]], R, "E0501", "'begin' must be less than input.shape"),
    ("layout.pad", {"padding": [-1, 0]}, [[3], None], R, "E0501", "'padding' must be non-negative"),
    ("layout.pad", {"padding": [1, 1], "method": "WRAP"}, [[3], None], R, "E0501", "'method' must be one of"),
    ("layout.transpose", {"perm": [0, 0]}, [[2, 3]], R, "E0501", "'perm' must be distinct"),
    ("layout.space_to_depth", {"block_size": [2, 2]}, [[1, 3, 5, 4]], R, "E0501",
     "spatial size of input must be divisibe by 'block_size'"),
    ("layout.gather", {"axis": 2}, [[3, 4], [2]], [R, I], "E0402", "input 'data' of operator 'gather' has rank 2"),
    ("layout.gather", {"axis": -5}, [[3, 4], [2]], [R, I], "E0402", "input 'data' of operator 'gather' has rank 2"),
    ("layout.nonzero", {}, [[3]], "str", "E0412", "not allowed for generic type 'T: arith'"),
    ("layout.batch_to_space", {"block_size": [2, 2]}, [[6, 3, 4, 4]], R, "E0501",
     "batch size of input must be divisible by product of 'block_size'"),
    ("layout.gather", {"axis": 0}, [[3, 4], [2]], [R, R], "E0412", "input 'index'"),
    ("layout.range", {"first": 0, "last": 5, "stride": 0}, [], R, "E0501", "assertion failed"),
    ("math.add", {}, [[2, 3], [4, 3]], R, "E0501", "incompatible argument shapes for broadcasting"),
    ("math.neg", {}, [[2]], B, "E0412", "not allowed for generic type 'T: num'"),
    ("math.eq", {}, [[2], [2]], [B, R], "E0412", "operands of 'eq' are 'bool' and 'real': a comparison takes two numbers"),
    ("math.select", {}, [[2], [3], [3]], [B, R, R], "E0501", "incompatible argument shapes for broadcasting"),
    ("math.sum_n", {}, [[[2, 3], [2, 4]]], R, "E0403", "input 'xs'"),
    ("math.sum_reduce", {"axes": [0, 0]}, [[2, 3]], R, "E0501", "'axes' must be distinct"),
    ("math.argmax", {"axis": 0}, [[0, 3]], R, "E0501", "input shape along dimension 'axis' must be positive"),
    ("linalg.matmul", {}, [[2, 3], [4, 5]], R, "E0501", "last dimension of A must match first (non-batch) dimension"),
    ("linalg.matmul", {}, [[2, 2, 3], [3, 3, 5]], R, "E0501", "incompatible argument shapes of A and B"),
    ("linalg.matmul", {}, [[2, 2, 3], [3, 5], [3, 2, 5]], R, "E0501", "incompatible argument shape of C"),
    ("linalg.dot", {}, [[3], [4], None], R, "E0403", "input 'y'"),
    ("nn.conv", {}, [[1, 3, 8, 8], [4, 2, 3, 3]], R, "E0501", "input-channels must equal filter-channels * groups"),
    ("nn.conv", {"padding": [0, 0]}, [[1, 3, 2], [4, 3, 3]], R, "E0501",
     "padded input-size must be greater than (dilated) filter-size"),
    ("nn.conv", {"data_format": "NHWC"}, [[1, 3, 8], [4, 3, 3]], R, "E0501", "'data_format' must be one of"),
    ("nn.conv", {}, [[1, 3, 8], [4, 3, 3], [5]], R, "E0501", "bias-size must equal output-channels of filter"),
    ("nn.deconv", {"stride": 2, "padding": [1, 1], "output_size": [20]}, [[1, 3, 8], [3, 4, 3], None], R, "E0501",
     "'output_size' must be compatible with what would be calculated"),
    ("nn.deconv", {"padding": [3, 3]}, [[1, 3, 2], [3, 4, 3], None], R, "E0403", "negative extent"),
    ("nn.max_pool", {"size": [3, 3], "stride": [0, 1]}, [[1, 1, 4, 4]], R, "E0501", "'stride' must be positive"),
    ("nn.avg_pool", {"size": [3, 3], "padding_align": "MIDDLE"}, [[1, 1, 4, 4]], R, "E0501",
     "'padding_align' must be one of"),
    ("nn.relu", {"alpha": 2.0}, [[3]], R, "E0501", "'alpha' must be between 0 and 1 (inclusive)"),
    ("nn.gelu", {"approximate": "ERF"}, [[3]], R, "E0501", "'approximate' must be one of"),
    ("nn.prelu", {}, [[2, 3, 4], [4]], R, "E0403", "input 'alpha'"),
    ("nn.batch_norm", {}, [[2, 3, 4], [4], [4], None, None], R, "E0501",
     "input shape at channel axis must match size of mean and variance"),
    ("nn.softmax", {"axes": [3]}, [[2, 3]], R, "E0501", "axes must be between -input.rank (inclusive)"),
    ("nn.lstm_step", {}, [[2, 5], [2, 5], [2, 3], [21, 3], [20, 5], [20]], R, "E0403", "input 'W'"),
    ("image.nearest_downsample", {"factor": [2]}, [[5]], R, "E0501",
     "input.shape at 'axes' must be divisible by 'factor'"),
    ("image.resize", {"size": [4], "mode": "AREA"}, [[5]], R, "E0501", "'mode' must be one of"),
    ("image.rescale", {"factor": [0.1]}, [[3]], R, "E0501", "'size' must be positive"),
    ("image.grid_sample", {"padding": "BORDER"}, [[1, 2, 4, 4], [1, 3, 3, 2]], R, "E0501",
     "'padding' must be one of"),
    ("image.grid_sample", {}, [[1, 2, 4, 4], [1, 3, 3, 3]], R, "E0403", "input 'grid'"),
    ("quant.zero_point_linear_quantize", {"zero_point": [0, 0], "scale": [1.0, 1.0], "bits": 8}, [[2, 3]], R,
     "E0403", "length of attribute 'zero_point'"),
    ("quant.min_max_linear_quantize", {"min": 0.0, "max": 1.0, "bits": 0}, [[2, 3]], R, "E0501",
     "bits must be positive"),
    ("algo.top_k", {"k": 0}, [[5]], R, "E0501", "'k' must be positive"),
    ("algo.nonmax_suppress", {"box_format": "XYWH"}, [[1, 6, 4], [1, 5, 6]], R, "E0501",
     "'box_format' must be one of"),
    ("algo.nonmax_suppress", {}, [[1, 6, 4], [1, 5, 7]], R, "E0403", "input 'scores'"),
]


@pytest.mark.parametrize(("op", "attribs", "inputs", "dtypes", "code", "text"), ERRORS,
                         ids=[f"{e[0]}-{e[4]}" for e in ERRORS])
def test_invalid_invocations_are_located_diagnostics(op: str, attribs: dict, inputs: list, dtypes: Any, code: str,
                                                     text: str) -> None:
    r = infer(op, attribs, inputs, dtypes)
    assert not r.outputs
    (d,) = r.diagnostics
    assert (d.code, text in d.message) == (code, True), (d.code, d.message)
    module = op.split(".")[0]
    assert d.span.file.endswith(f"{module}.sknd") and d.span.line > 1, d.span


def test_error_sample_covers_many_operators() -> None:
    assert len({e[0] for e in ERRORS}) >= 20
