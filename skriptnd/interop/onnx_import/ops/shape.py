"""Layout: reshapes, transposes, concatenation, slicing, padding, casts. Shape operands (a Reshape's
shape, a Slice's starts, ...) must be known at import time: they become attributes."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter
from skriptnd.interop.writer import Expr, literal


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


def _dims(ctx: Context, name: str) -> list:
    return [ctx.extent(d) for d in ctx.shape(name)]


@converter("Reshape", target="`layout.reshape{shape}`", caveats="0 copies the input extent, -1 is kept; a shape "
           "given as a graph input becomes a graph attribute (given at run time)", params=(1,))
def _reshape(ctx: Context, node: Node) -> None:
    param = ctx.param(node.input(1))
    if param is not None and param.length:
        _reshape_param(ctx, node, param.name, param.length)
        return
    shape: list = ctx.shape_value(node.input(1), "target shape")
    dims = ctx.shape(node.input(0))
    if not node.attr("allowzero", 0):
        shape = [dims[i] if isinstance(v, int) and v == 0 else v for i, v in enumerate(shape)]
    out = sym.dims_of(ctx, node.outputs[0])
    if out is not None:  # -1 resolved (an expression of graph attributes where the input's extents are)
        shape = list(out)
    if not dims and not shape:  # a scalar kept a scalar (layout.reshape needs a rank of at least 1)
        ctx.emit("math.iden", [ctx.arg(node.input(0))])
        return
    ctx.emit("layout.reshape", [ctx.arg(node.input(0))], {"shape": [ctx.extent(d) for d in shape]})


def _reshape_param(ctx: Context, node: Node, name: str, length: int) -> None:
    """A target shape fed at run time: `0` copies the input's extent (unless allowzero), `-1` is left to
    layout.reshape; the output's extents are those expressions, `-1` the input's size over the others'."""
    extents = ctx.extent_texts(node.input(0))
    items = [f"{name}[{i}] == 0 ? {extents[i]} : {name}[{i}]" if i < len(extents) and not node.attr("allowzero", 0)
             else f"{name}[{i}]" for i in range(length)]
    target = f"[{', '.join(f'({t})' for t in items)}]"
    size = " * ".join(f"({e})" for e in extents) or "1"
    known = f"(({target} == -1) ? 1 : {target}) * .."
    ctx.symbolic_shapes[node.outputs[0]] = [Expr(f"{target}[{i}] == -1 ? ({size}) / ({known}) : {target}[{i}]")
                                            for i in range(length)]
    ctx.emit("layout.reshape", [ctx.arg(node.input(0))], {"shape": Expr(target)})


@converter("Flatten", target="`layout.reshape{shape=[outer, -1]}`")
def _flatten(ctx: Context, node: Node) -> None:
    shape = ctx.dims(node.input(0))
    k = norm_axis(int(node.attr("axis", 1)), len(shape))
    outer, inner = sym.product(shape[:k]), sym.product(shape[k:])
    ctx.emit("layout.reshape", [ctx.arg(node.input(0))], {"shape": ctx.extents([outer, inner])})


@converter("Squeeze", target="`layout.squeeze{axes}`",
           caveats="axes given as a graph input become a graph attribute (given at run time)", params=(1,))
def _squeeze(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    param = ctx.param(node.input(1))
    if param is not None and param.length:  # the extents left: those of the axes not listed
        a, dims = param.name, ", ".join(ctx.extent_texts(node.input(0)))
        ctx.symbolic_shapes[node.outputs[0]] = [
            Expr(f"[{dims}][[0:{rank}][!([0:{rank}] in (({a} < 0) ? {a} + {rank} : {a}))]]..")]
        ctx.emit("layout.squeeze", [ctx.arg(node.input(0))], {"axes": Expr(a)})
        return
    if node.input(1):
        axes = [int(a) for a in ctx.need_const(node.input(1), "axes input").reshape(-1)]
    elif "axes" in node.attrs:
        axes = list(node.attr("axes"))
    else:
        axes = [i for i, d in enumerate(ctx.dims(node.input(0))) if isinstance(d, int) and d == 1]
    ctx.emit("layout.squeeze", [ctx.arg(node.input(0))], {"axes": sorted(norm_axis(a, rank) for a in axes)})


@converter("Unsqueeze", target="`layout.unsqueeze{axes}`",
           caveats="axes given as a graph input become a graph attribute (given at run time)", params=(1,))
def _unsqueeze(ctx: Context, node: Node) -> None:
    param = ctx.param(node.input(1))
    if param is not None and param.length:  # ones at the axes, the input's extents in order elsewhere
        a, dims, r = param.name, ", ".join(ctx.extent_texts(node.input(0))), ctx.rank(node.input(0)) + param.length
        ctx.symbolic_shapes[node.outputs[0]] = [
            Expr(f"([1 ..({r})][[0:{r}][!([0:{r}] in (({a} < 0) ? {a} + {r} : {a}))]] <- [{dims}])..")]
        ctx.emit("layout.unsqueeze", [ctx.arg(node.input(0))], {"axes": Expr(a)})
        return
    if node.input(1):
        axes = [int(a) for a in ctx.need_const(node.input(1), "axes input").reshape(-1)]
    else:
        axes = list(node.attr("axes"))
    rank = ctx.rank(node.input(0)) + len(axes)
    ctx.emit("layout.unsqueeze", [ctx.arg(node.input(0))], {"axes": sorted(norm_axis(a, rank) for a in axes)})


@converter("Transpose", target="`layout.transpose{perm}`")
def _transpose(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    perm = list(node.attr("perm", list(range(rank))[::-1]))
    ctx.emit("layout.transpose", [ctx.arg(node.input(0))], {"perm": perm})


@converter("Concat", target="`layout.concat{axis}`")
def _concat(ctx: Context, node: Node) -> None:
    names = [i for i in node.inputs if i]
    rank = ctx.rank(names[0])
    # ONNX allows empty operands; SkriptND's pack does too, but they add nothing: drop them
    kept = [n for n in names if 0 not in ctx.shape(n)] or names[:1]
    ctx.emit("layout.concat", [[ctx.arg(n) for n in kept]], {"axis": norm_axis(int(node.attr("axis")), rank)})


@converter("Split", target="`layout.split{axis, sizes}`",
           caveats="split sizes given as a graph input become a graph attribute (given at run time)", params=(1,))
def _split(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.input(0))
    k = norm_axis(int(node.attr("axis", 0)), len(shape))
    param = ctx.param(node.input(1))
    sizes: list[int] | Expr
    if param is not None and param.length == len(node.outputs):
        sizes = Expr(param.name)
        extents = ctx.extent_texts(node.input(0))
        for j, out in enumerate(node.outputs):
            ctx.symbolic_shapes[out] = [Expr(e) for e in extents[:k]] + [Expr(f"{param.name}[{j}]")] + \
                [Expr(e) for e in extents[k + 1:]]
    elif node.input(1):
        sizes = [int(s) for s in ctx.need_const(node.input(1), "split sizes").reshape(-1)]
    elif "split" in node.attrs:
        sizes = list(node.attr("split"))
    else:
        total = ctx.static_shape(node.input(0), axes=[k])[k]  # only the split axis must be a number
        n = int(node.attr("num_outputs", len(node.outputs)))
        chunk = -(-total // n)
        sizes = [chunk] * (total // chunk) + ([total % chunk] if total % chunk else [])
    outputs = [ctx.out(i) for i in range(len(node.outputs))]
    ctx.emit("layout.split", [ctx.arg(node.input(0))], {"axis": k, "sizes": sizes}, outputs=[outputs])


@converter("Slice", target="`layout.slice{axes, begin, end, stride}`",
           caveats="starts/ends/axes/steps are clamped at import time; given as graph inputs they become graph "
           "attributes, clamped by expressions when composed (an empty slice then fails layout.slice's assertion)",
           params=(1, 2, 3, 4))
def _slice(ctx: Context, node: Node) -> None:
    if any(ctx.param(node.input(i)) is not None for i in range(1, 5)):
        _slice_param(ctx, node)
        return
    shape = ctx.dims(node.input(0))
    starts = ctx.shape_value(node.input(1), "starts")
    ends = ctx.shape_value(node.input(2), "ends")
    axes = ctx.need_const(node.input(3), "axes").reshape(-1).tolist() if node.input(3) else list(range(len(starts)))
    steps = ctx.need_const(node.input(4), "steps").reshape(-1).tolist() if node.input(4) else [1] * len(starts)
    out_axes, begin, end, stride = [], [], [], []
    for start, stop, a, step in zip(starts, ends, axes, steps, strict=True):
        a = norm_axis(int(a), len(shape))
        dim = shape[a]
        if not all(isinstance(v, int) for v in (dim, start, stop)):  # an extent or a bound of graph attributes
            bounds = sym.slice_bounds(dim, start, stop, int(step))
            if bounds is None:
                raise ImportProblem("E0808", f"{node.where}: the slice [{start}:{stop}:{step}] of an extent {dim} "
                                    "cannot be clamped at import time", hint=ctx.import_time_hint())
            out_axes.append(a)
            begin.append(ctx.extent(bounds[0]))
            end.append(ctx.extent(bounds[1]))
            stride.append(int(step))
            continue
        b, e, _ = slice(int(start), int(stop), int(step)).indices(dim)
        count = len(range(b, e, int(step)))
        if count == 0:
            raise ImportProblem("E0807", f"{node.where}: the slice along axis {a} is empty")
        if step < 0 and e < 0:
            e = -1
        out_axes.append(a)
        begin.append(b)
        end.append(e)
        stride.append(int(step))
    attribs: dict = {"axes": out_axes, "begin": begin, "end": end}
    if any(s != 1 for s in stride):
        attribs["stride"] = stride
    ctx.emit("layout.slice", [ctx.arg(node.input(0))], attribs)


def _slice_param(ctx: Context, node: Node) -> None:
    """Slice with operands fed at run time: ONNX's clamping (Python's slice.indices) written element-wise over
    the packs: a negative start or end counts from the end, then clamps to [0, D] (step > 0) or [-1, D - 1]
    (step < 0); the output's extents are layout.slice's own, (end - begin) \\ stride at the axes."""
    rank = ctx.rank(node.input(0))
    dims = ", ".join(ctx.extent_texts(node.input(0)))

    def pack(i: int, what: str, default: str) -> tuple[str, int | None]:
        param = ctx.param(node.input(i))
        if param is not None:
            return (param.name if param.length is not None else f"[{param.name}]"), param.length or 1
        if not node.input(i):
            return default, None
        value = ctx.need_const(node.input(i), what).reshape(-1)
        return f"[{', '.join(str(int(v)) for v in value)}]", len(value)

    starts, n = pack(1, "starts", "")
    ends, _ = pack(2, "ends", "")
    n = n or 1
    axes, _ = pack(3, "axes", f"[0:{n}]")
    steps, _ = pack(4, "steps", f"[1 ..({n})]")
    a = f"(({axes} + {rank}) % {rank})"
    d = f"[{dims}][{a}]"

    def clamp(v: str) -> str:
        shifted = f"(({v} < 0) ? {v} + {d} : {v})"
        return f"(({steps} > 0) ? (({shifted} >? 0) <? {d}) : (({shifted} >? -1) <? ({d} - 1)))"

    begin, end = clamp(starts), clamp(ends)
    ctx.symbolic_shapes[node.outputs[0]] = [Expr(f"([{dims}][{a}] <- (({end} >? -1) - {begin}) \\ {steps})..")]
    ctx.emit("layout.slice", [ctx.arg(node.input(0))],
             {"axes": Expr(a), "begin": Expr(begin), "end": Expr(end), "stride": Expr(steps)})


@converter("Tile", target="`layout.tile{repeats}`",
           caveats="repeats given as a graph input become a graph attribute (given at run time)", params=(1,))
def _tile(ctx: Context, node: Node) -> None:
    param = ctx.param(node.input(1))
    if param is not None and param.length == ctx.rank(node.input(0)):
        ctx.symbolic_shapes[node.outputs[0]] = [Expr(f"{e} * {param.name}[{k}]")
                                                for k, e in enumerate(ctx.extent_texts(node.input(0)))]
        ctx.emit("layout.tile", [ctx.arg(node.input(0))], {"repeats": Expr(param.name)})
        return
    repeats = ctx.extents(ctx.shape_value(node.input(1), "repeats"))
    ctx.emit("layout.tile", [ctx.arg(node.input(0))], {"repeats": repeats})


@converter("Expand", target="`layout.broadcast{shape}` (after `layout.unsqueeze` to the output rank)")
def _expand(ctx: Context, node: Node) -> None:
    out = ctx.dims(node.outputs[0])
    x = ctx.arg(node.input(0))
    rank = ctx.rank(node.input(0))
    if rank < len(out):
        x = _tmp(ctx, "layout.unsqueeze", [x], axes=list(range(len(out) - rank)))
    if tuple(ctx.dims(node.input(0))) == tuple(out):
        ctx.emit("math.iden", [x])
        return
    ctx.emit("layout.broadcast", [x], {"shape": ctx.extents(out)})


_PAD_MODES = {"constant": "CONSTANT", "reflect": "REFLECT", "edge": "REPLICATE"}


@converter("Pad", target="`layout.pad{axes, padding, method}`", caveats="mode wrap and negative pads are refused; "
           "pads given as a graph input become a graph attribute (given at run time; negative ones fail layout.pad's "
           "assertion when composed)", params=(1,))
def _pad(ctx: Context, node: Node) -> None:
    rank = ctx.rank(node.input(0))
    axes = [norm_axis(int(a), rank) for a in ctx.need_const(node.input(3), "axes").reshape(-1)] \
        if node.input(3) else list(range(rank))
    param = ctx.param(node.input(1))
    if param is not None and param.length == 2 * len(axes):
        pads: list[int] | Expr = Expr(param.name)
        extents = ctx.extent_texts(node.input(0))
        for j, a in enumerate(axes):
            extents[a] = f"{extents[a]} + {param.name}[{j}] + {param.name}[{j + len(axes)}]"
        ctx.symbolic_shapes[node.outputs[0]] = [Expr(e) for e in extents]
    else:
        pads = [int(p) for p in (ctx.need_const(node.input(1), "pads").reshape(-1) if node.input(1)
                                 else node.attr("pads"))]
    mode = node.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise ImportProblem("E0807", f"{node.where}: pad mode '{mode}' is not supported")
    if isinstance(pads, list) and any(p < 0 for p in pads):
        raise ImportProblem("E0807", f"{node.where}: negative pads (cropping) are not supported")
    attribs: dict = {"axes": axes, "padding": pads}
    if mode != "constant":
        attribs["method"] = _PAD_MODES[mode]
    args = [ctx.arg(node.input(0))]
    if mode == "constant" and node.input(2):
        value = ctx.const(node.input(2))
        if value is None:
            v = ctx.arg(node.input(2))
            if ctx.rank(node.input(2)):  # ONNX allows a one-element tensor
                v = _tmp(ctx, "layout.reshape", [v], shape=[])
            args.append(v)
        else:
            args.append(ctx.literal_arg(np.asarray(value).reshape(()).astype(value.dtype), "value"))
    ctx.emit("layout.pad", args, attribs)


@converter("Cast", "CastLike", target="`layout.cast<R>` (`math.iden` between types SkriptND does not "
           "distinguish, e.g. float and double)", caveats="narrowing between integer widths is not modelled")
def _cast(ctx: Context, node: Node) -> None:
    target = ctx.dtype(node.outputs[0])
    x = ctx.arg(node.input(0))
    if ctx.dtype(node.input(0)) == target:
        ctx.emit("math.iden", [x])
    else:
        ctx.emit("layout.cast", [x], types=[target])


@converter("DepthToSpace", target="`layout.depth_to_space{block_size}` (DCR); CRD as reshape, transpose, reshape")
def _depth_to_space(ctx: Context, node: Node) -> None:
    b = int(node.attr("blocksize"))
    d = ctx.rank(node.input(0)) - 2
    if node.attr("mode", "DCR") == "DCR" or d != 2:
        ctx.emit("layout.depth_to_space", [ctx.arg(node.input(0))], {"block_size": [b] * d})
        return
    # CRD: channels are [c, b, b]; spelled out as reshape / transpose / reshape
    n, c, h, w = ctx.static_shape(node.input(0), axes=[1, 2, 3])  # n may be symbolic
    x = _tmp(ctx, "layout.reshape", [ctx.arg(node.input(0))], shape=ctx.extents([n, c // (b * b), b, b, h, w]))
    x = _tmp(ctx, "layout.transpose", [x], perm=[0, 1, 4, 2, 5, 3])
    ctx.emit("layout.reshape", [x], {"shape": ctx.extents([n, c // (b * b), h * b, w * b])})


@converter("SpaceToDepth", target="`layout.space_to_depth{block_size}` (DCR); CRD as reshape, transpose, reshape")
def _space_to_depth(ctx: Context, node: Node) -> None:
    b = int(node.attr("blocksize"))
    d = ctx.rank(node.input(0)) - 2
    if node.attr("mode", "DCR") == "DCR" or d != 2:
        ctx.emit("layout.space_to_depth", [ctx.arg(node.input(0))], {"block_size": [b] * d})
        return
    n, c, h, w = ctx.static_shape(node.input(0), axes=[1, 2, 3])  # CRD: output channels [c, b, b]; n symbolic
    x = _tmp(ctx, "layout.reshape", [ctx.arg(node.input(0))], shape=ctx.extents([n, c, h // b, b, w // b, b]))
    x = _tmp(ctx, "layout.transpose", [x], perm=[0, 1, 3, 5, 2, 4])
    ctx.emit("layout.reshape", [x], {"shape": ctx.extents([n, c * b * b, h // b, w // b])})


def _import_time_only(ctx: Context, node: Node) -> None:
    if node.op_type in ("Shape", "Size") and node.input(0) and sym.dims_of(ctx, node.input(0)) is None:
        shape = ctx.values[node.input(0)].shape if node.input(0) in ctx.values else None
        dims = ", ".join(ctx.symbols.get(d, "?") if isinstance(d, str) or d is None else str(d) for d in shape or ())
        raise ImportProblem("E0808", f"{ctx.here}: the shape of '{node.input(0)}' [{dims}] has extents ('?') that "
                            "are neither numbers nor expressions of the graph's dimensions (data-dependent, or "
                            "computed in a way the import cannot follow)", hint=ctx.import_time_hint())
    raise ImportProblem("E0808", f"{ctx.here}: its result depends on a shape or value known only at run time",
                        hint=ctx.import_time_hint())


for _op in ("Shape", "Size", "Constant"):
    converter(_op, target="folded at import time (a compile-time value)",
              caveats="needs a static shape / constant operands")(_import_time_only)


@converter("Range", target="folded at import time (a compile-time value); with operands fed at run time "
           "`layout.range{first, last, stride}`", caveats="start, limit and delta given as graph inputs become graph "
           "attributes (given at run time; an empty range fails layout.range's assertion)", params=(0, 1, 2))
def _range(ctx: Context, node: Node) -> None:
    real = ctx.dtype(node.outputs[0]) == "real"
    parts = []
    for i in range(3):
        param = ctx.param_scalar(node.input(i))
        value = ctx.const(node.input(i))
        if param is not None:
            parts.append(param.text)
        elif node.input(i) in ctx.symvals and not real:  # a bound computed from a symbolic extent
            parts.append(ctx.extent(sym.norm(ctx.symvals[node.input(i)].reshape(-1)[0])).text)
        elif value is not None:
            parts.append(literal(float(value.reshape(-1)[0]) if real else int(value.reshape(-1)[0])))
        else:
            _import_time_only(ctx, node)
    first, last, stride = parts
    ctx.symbolic_shapes[node.outputs[0]] = [Expr(f"int(({last} - {first}) \\ {stride})")]
    ctx.emit("layout.range", [], {"first": Expr(first), "last": Expr(last), "stride": Expr(stride)})


@converter("ConstantOfShape", target="folded at import time (a compile-time value); with a shape computed from "
           "a symbolic extent `layout.uniform{shape}`", caveats="needs a shape known at import time (numbers or "
           "expressions of graph attributes)")
def _constant_of_shape(ctx: Context, node: Node) -> None:
    if node.input(0) not in ctx.symvals:
        _import_time_only(ctx, node)
    value = node.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    shape = ctx.extents(ctx.shape_value(node.input(0), "shape"))
    ctx.emit("layout.uniform", [ctx.literal_arg(value.reshape(()), "value")], {"shape": shape})
