"""Layout and shape: TRANSPOSE (written lazily, pairs folded: see `..context`), RESHAPE / SQUEEZE / EXPAND_DIMS
-> layout.reshape to the output's (static) shape, CONCATENATION, SLICE / STRIDED_SLICE -> layout.slice, PAD /
PADV2 / MIRROR_PAD -> layout.pad, GATHER, SPLIT / SPLIT_V, PACK / UNPACK, TILE, BROADCAST_TO, CAST."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context, Pending, sknd_type
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import axis, tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("TRANSPOSE", target="`layout.transpose{perm}`",
           caveats="a transpose of a transpose is one transpose (none when they cancel); written only when read")
def _transpose(ctx: Context, op: Operator) -> None:
    x = ctx.input(0)
    rank = ctx.rank(x)
    perm = [axis(int(p), rank) for p in ctx.need_const(ctx.input(1), "permutation").reshape(-1)]
    if sorted(perm) != list(range(rank)):
        raise ImportProblem("E0863", f"{ctx.here}: {perm} is not a permutation of {rank} axes")
    out = op.outputs[0]
    if x in ctx.pending:  # transpose of a pending transpose: compose them
        first = ctx.pending[x]
        source, perm = first.source, [first.perm[p] for p in perm]
    else:
        source = ctx.arg(x)
    if perm == list(range(rank)):
        ctx.alias(out, source)
    else:
        ctx.pending[out] = Pending(source, perm)


def _reshape(ctx: Context, op: Operator) -> None:
    x, out = ctx.input(0), ctx.shape(op.outputs[0])
    if tuple(ctx.shape(x)) == tuple(out):
        ctx.alias(op.outputs[0], ctx.arg(x))
        return
    ctx.emit("layout.reshape", [ctx.arg(x)], {"shape": list(out)})


for _op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
    converter(_op, target="`layout.reshape{shape}` to the output tensor's shape (nothing when it is the input's)")(
        _reshape)


@converter("CONCATENATION", target="`layout.concat{axis}`, then the fused activation")
def _concat(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(op.outputs[0])
    args = [ctx.arg(i) for i in op.inputs]
    ctx.activate("layout.concat", [args], {"axis": axis(ctx.option(0, 0), rank)}, activation=ctx.option(1, 0, "b"))


def _slice(ctx: Context, x: int, begin: list[int], end: list[int], stride: list[int], out_shape: tuple[int, ...]) \
        -> None:
    shape = ctx.shape(x)
    axes = [a for a in range(len(shape)) if (begin[a], end[a], stride[a]) != (0, shape[a], 1)]
    arg = ctx.arg(x)
    if not axes:
        ctx.alias(ctx.op.outputs[0], arg) if tuple(shape) == tuple(out_shape) else \
            ctx.emit("layout.reshape", [arg], {"shape": list(out_shape)})
        return
    attribs: dict = {"axes": axes, "begin": [begin[a] for a in axes], "end": [end[a] for a in axes]}
    if any(stride[a] != 1 for a in axes):
        attribs["stride"] = [stride[a] for a in axes]
    sliced = [len(range(begin[a], end[a], stride[a])) if a in axes else shape[a] for a in range(len(shape))]
    if list(sliced) == list(out_shape):
        ctx.emit("layout.slice", [arg], attribs)
    else:  # shrunk axes
        ctx.emit("layout.reshape", [tmp(ctx, "layout.slice", [arg], attribs)], {"shape": list(out_shape)})


@converter("SLICE", target="`layout.slice{axes, begin, end}`", caveats="constant begin and size only")
def _slice_op(ctx: Context, op: Operator) -> None:
    x = ctx.input(0)
    shape = ctx.shape(x)
    begin = [int(b) for b in ctx.need_const(ctx.input(1), "begin").reshape(-1)]
    size = [int(s) for s in ctx.need_const(ctx.input(2), "size").reshape(-1)]
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ImportProblem("E0863", f"{ctx.here}: begin {begin} / size {size} for a tensor of rank {len(shape)}")
    end = [shape[a] if size[a] == -1 else begin[a] + size[a] for a in range(len(shape))]
    if any(not 0 <= begin[a] <= end[a] <= shape[a] for a in range(len(shape))):
        raise ImportProblem("E0863", f"{ctx.here}: begin {begin} / size {size} outside the shape {list(shape)}")
    _slice(ctx, x, begin, end, [1] * len(shape), ctx.shape(op.outputs[0]))


@converter("STRIDED_SLICE", target="`layout.slice{axes, begin, end, stride}` (then `layout.reshape` for shrunk axes)",
           caveats="constant begin/end/strides; ellipsis and new-axis masks and the offset form are refused")
def _strided_slice(ctx: Context, op: Operator) -> None:
    x = ctx.input(0)
    shape = ctx.shape(x)
    rank = len(shape)
    begin = [int(b) for b in ctx.need_const(ctx.input(1), "begin").reshape(-1)]
    end = [int(e) for e in ctx.need_const(ctx.input(2), "end").reshape(-1)]
    stride = [int(s) for s in ctx.need_const(ctx.input(3), "strides").reshape(-1)] if ctx.input(3) >= 0 \
        else [1] * len(begin)
    begin_mask, end_mask, shrink = ctx.option(0), ctx.option(1), ctx.option(4)
    if ctx.option(2) or ctx.option(3) or ctx.flag(5):
        raise ImportProblem("E0863", f"{ctx.here}: ellipsis / new-axis masks and offset are not supported")
    if not len(begin) == len(end) == len(stride) <= rank or any(s == 0 for s in stride):
        raise ImportProblem("E0863", f"{ctx.here}: begin {begin} / end {end} / strides {stride} for rank {rank}")
    b, e, s = [0] * rank, list(shape), [1] * rank
    for a in range(len(begin)):
        n = shape[a]
        s[a] = stride[a]
        if shrink >> a & 1:
            start = begin[a] + n if begin[a] < 0 else begin[a]
            b[a], e[a], s[a] = start, start + 1, 1
            continue
        lo, hi = (0, n) if s[a] > 0 else (-1, n - 1)
        b[a] = (lo if s[a] > 0 else hi) if begin_mask >> a & 1 else \
            max(lo, min(hi, begin[a] + n if begin[a] < 0 else begin[a]))
        e[a] = (hi if s[a] > 0 else lo) if end_mask >> a & 1 else \
            max(lo, min(hi, end[a] + n if end[a] < 0 else end[a]))
    if any(st < 0 for st in s):
        raise ImportProblem("E0863", f"{ctx.here}: negative strides are not supported")
    _slice(ctx, x, b, e, s, ctx.shape(op.outputs[0]))


def _pad_widths(ctx: Context, index: int, rank: int) -> list[int]:
    pads = ctx.need_const(index, "paddings").reshape(-1).tolist()
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        raise ImportProblem("E0863", f"{ctx.here}: paddings {pads} for rank {rank} (negative ones are not supported)")
    return [int(p) for p in pads[0::2]] + [int(p) for p in pads[1::2]]


@converter("PAD", "PADV2", target="`layout.pad{padding, method='CONSTANT'}` (PADV2's value as the second input)")
def _pad(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    value = ctx.arg(ctx.input(2)) if op.name == "PADV2" else None
    if value is not None and ctx.rank(ctx.input(2)) != 0:  # a [1] value: as a scalar
        value = tmp(ctx, "layout.reshape", [value], {"shape": []})
    ctx.emit("layout.pad", [ctx.arg(ctx.input(0)), value], {"padding": _pad_widths(ctx, ctx.input(1), rank),
                                                             "method": "CONSTANT"})


@converter("MIRROR_PAD", target="`layout.pad{padding, method='REFLECT'|'SYMMETRIC'}`")
def _mirror_pad(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    ctx.emit("layout.pad", [ctx.arg(ctx.input(0))], {"padding": _pad_widths(ctx, ctx.input(1), rank),
                                                     "method": "SYMMETRIC" if ctx.option(0, 0, "b") else "REFLECT"})


@converter("GATHER", target="`layout.gather{axis}`", caveats="batch_dims other than 0 is refused")
def _gather(ctx: Context, op: Operator) -> None:
    if ctx.option(1):
        raise ImportProblem("E0863", f"{ctx.here}: batch_dims is not supported")
    rank = ctx.rank(ctx.input(0))
    ctx.emit("layout.gather", [ctx.arg(ctx.input(0)), ctx.arg(ctx.input(1))], {"axis": axis(ctx.option(0), rank)})


@converter("SPLIT", "SPLIT_V", target="`layout.split{axis, sizes}`", caveats="constant axis and sizes")
def _split(ctx: Context, op: Operator) -> None:
    if op.name == "SPLIT":
        x, axis_index = ctx.input(1), ctx.input(0)
    else:
        x, axis_index = ctx.input(0), ctx.input(2)
    rank = ctx.rank(x)
    given = ctx.need_const(axis_index, "axis").reshape(-1)
    if given.size != 1:
        raise ImportProblem("E0863", f"{ctx.here}: the axis must be one value, not {given.size}")
    a = axis(int(given[0]), rank)
    if any(ctx.rank(o) != rank for o in op.outputs):
        raise ImportProblem("E0863", f"{ctx.here}: every output must have the input's rank {rank}")
    sizes = [ctx.shape(o)[a] for o in op.outputs]
    if sum(sizes) != ctx.shape(x)[a]:
        raise ImportProblem("E0863", f"{ctx.here}: the outputs' extents {sizes} do not add up to {ctx.shape(x)[a]}")
    outs = [ctx.out(i) for i in range(len(op.outputs))]
    ctx.emit("layout.split", [ctx.arg(x)], {"axis": a, "sizes": sizes}, outputs=[outs])


@converter("PACK", target="`layout.stack{axis}`")
def _pack(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(op.outputs[0])
    ctx.emit("layout.stack", [[ctx.arg(i) for i in op.inputs]], {"axis": axis(ctx.option(1), rank)})


@converter("UNPACK", target="`layout.unstack{axis}`")
def _unpack(ctx: Context, op: Operator) -> None:
    rank = ctx.rank(ctx.input(0))
    outs = [ctx.out(i) for i in range(len(op.outputs))]
    ctx.emit("layout.unstack", [ctx.arg(ctx.input(0))], {"axis": axis(ctx.option(1), rank)}, outputs=[outs])


@converter("TILE", target="`layout.tile{repeats}`", caveats="constant multiples")
def _tile(ctx: Context, op: Operator) -> None:
    reps = [int(r) for r in ctx.need_const(ctx.input(1), "multiples").reshape(-1)]
    ctx.emit("layout.tile", [ctx.arg(ctx.input(0))], {"repeats": reps})


@converter("BROADCAST_TO", target="`layout.broadcast{shape}` (after a `layout.reshape` adding leading unit axes)")
def _broadcast_to(ctx: Context, op: Operator) -> None:
    x, out = ctx.input(0), list(ctx.shape(op.outputs[0]))
    arg, shape = ctx.arg(x), list(ctx.shape(x))
    if len(shape) < len(out):
        shape = [1] * (len(out) - len(shape)) + shape
        arg = tmp(ctx, "layout.reshape", [arg], {"shape": shape})
    ctx.emit("layout.broadcast", [arg], {"shape": out})


@converter("CAST", target="`layout.cast<T>`")
def _cast(ctx: Context, op: Operator) -> None:
    target = sknd_type(ctx.tensor(op.outputs[0]))
    x = ctx.arg(ctx.input(0))
    if ctx.dtype(ctx.input(0)) == target:
        ctx.emit("math.iden", [x])
        return
    ctx.emit("layout.cast", [x], types=[target])


@converter("SPACE_TO_DEPTH", "DEPTH_TO_SPACE", target="`layout.space_to_depth` / `layout.depth_to_space"
           "{block_size, data_format='NXC'}`")
def _space_depth(ctx: Context, op: Operator) -> None:
    block = ctx.option(0, 0)
    if block < 1 or ctx.rank(ctx.input(0)) != 4:
        raise ImportProblem("E0863", f"{ctx.here}: block size {block} for a tensor of rank {ctx.rank(ctx.input(0))}")
    name = "layout.space_to_depth" if op.name == "SPACE_TO_DEPTH" else "layout.depth_to_space"
    ctx.emit(name, [ctx.arg(ctx.input(0))], {"block_size": [block, block], "data_format": "NXC"})


@converter("EMBEDDING_LOOKUP", target="`layout.gather{axis=0}`(table, ids)")
def _embedding_lookup(ctx: Context, op: Operator) -> None:
    ctx.emit("layout.gather", [ctx.arg(ctx.input(1)), ctx.arg(ctx.input(0))], {"axis": 0})
