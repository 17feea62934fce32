"""Layout operations: reshape, squeeze/unsqueeze, transpose, split/concat, stack/unstack, slice, pad, tile,
gather, cast. Where NNEF attributes are relative (reshape's 0/-1, slice's end = 0, short transpose axes),
the converter writes the resolved values, taken from the inferred shapes."""

from __future__ import annotations

from typing import Any

from skriptnd.interop.nnef_import.context import Context, Operation
from skriptnd.interop.nnef_import.ops.window import PAD_METHODS
from skriptnd.interop.nnef_import.registry import converter
from skriptnd.interop.nnef_import.writer_exprs import real

_TYPES = {"scalar": "real", "integer": "int", "logical": "bool"}


@converter("reshape", target="layout.reshape", note="0 / -1 / axis_start / axis_count resolved to the full shape")
def reshape(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.reshape", [ctx.arg(op.inputs["input"])],
             {"shape": ctx.shape(op.outputs["output"])})


@converter("squeeze", target="layout.squeeze")
def squeeze(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.squeeze", [ctx.arg(op.inputs["input"])], {"axes": list(op.attribs["axes"])})


@converter("unsqueeze", target="layout.unsqueeze")
def unsqueeze(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.unsqueeze", [ctx.arg(op.inputs["input"])], {"axes": list(op.attribs["axes"])})


@converter("transpose", target="layout.transpose{perm}", note="axes shorter than the rank are completed")
def transpose(ctx: Context, op: Operation) -> None:
    axes = [int(a) for a in op.attribs["axes"]]
    rank = ctx.rank(op.inputs["input"])
    perm = axes + list(range(len(axes), rank))
    ctx.emit(ctx.output(), "layout.transpose", [ctx.arg(op.inputs["input"])], {"perm": perm})


@converter("concat", target="layout.concat")
def concat(ctx: Context, op: Operation) -> None:
    values = op.inputs["values"]
    ctx.emit(ctx.output(), "layout.concat", [[ctx.arg(v) for v in values]], {"axis": int(op.attribs["axis"])})


@converter("split", target="layout.split{sizes}", note="ratios resolved to sizes")
def split(ctx: Context, op: Operation) -> None:
    outs = op.outputs["values"]
    axis = int(op.attribs["axis"])
    sizes = [ctx.shape(o)[axis] for o in outs]
    ctx.emit([[ctx.name(o) for o in outs]], "layout.split", [ctx.arg(op.inputs["value"])],
             {"axis": axis, "sizes": sizes})


@converter("stack", target="layout.stack")
def stack(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.stack", [[ctx.arg(v) for v in op.inputs["values"]]],
             {"axis": int(op.attribs["axis"])})


@converter("unstack", target="layout.unstack")
def unstack(ctx: Context, op: Operation) -> None:
    outs = op.outputs["values"]
    ctx.emit([[ctx.name(o) for o in outs]], "layout.unstack", [ctx.arg(op.inputs["value"])],
             {"axis": int(op.attribs["axis"])})


@converter("slice", target="layout.slice", note="negative bounds and end = 0 (to the end, when all strides are 1) resolved")
def slice_(ctx: Context, op: Operation) -> None:
    x = op.inputs["input"]
    xs, ys = ctx.shape(x), ctx.shape(op.outputs["output"])
    axes = [int(a) for a in op.attribs["axes"]]
    strides = [int(s) for s in op.attribs["stride"]] or [1] * len(axes)
    begins, ends = [], []
    unit = all(s == 1 for s in strides)  # NNEF: end = 0 means "to the end" only when every stride is 1
    for axis, b, e, s in zip(axes, op.attribs["begin"], op.attribs["end"], strides, strict=True):
        dim = xs[axis]
        if s < 0:
            raise ctx.problem("a negative stride is not supported by the importer", "stride")
        b = min(max(b + dim if b < 0 else b, 0), dim)
        e = dim if e == 0 and unit else min(max(e + dim if e < 0 else e, 0), dim)
        begins.append(b)
        ends.append(max(e, b))
        expected = max(0, -(-(max(e, b) - b) // s))
        if expected != ys[axis]:
            raise ctx.problem(f"bounds on axis {axis} give {expected} items, the NNEF shape inference "
                              f"says {ys[axis]}", "end")
    ctx.emit(ctx.output(), "layout.slice", [ctx.arg(x)],
             {"axes": axes, "begin": begins, "end": ends, "stride": strides})


@converter("pad", target="layout.pad", note="border constant/reflect/replicate/reflect-even -> method")
def pad(ctx: Context, op: Operation) -> None:
    pads = [(int(p), int(q)) for p, q in op.attribs["padding"]]
    border = op.attribs["border"]
    attribs: dict[str, Any] = {"padding": [p for p, _ in pads] + [q for _, q in pads]}
    args = [ctx.arg(op.inputs["input"])]
    if border in PAD_METHODS:
        attribs["method"] = PAD_METHODS[border]
    elif border == "constant":
        value = float(op.attribs["value"])
        if value:
            args.append(real(value))
    else:
        raise ctx.problem(f"border '{border}' is not a padding method (constant, reflect, replicate, reflect-even)",
                          "border")
    ctx.emit(ctx.output(), "layout.pad", args, attribs)


@converter("tile", target="layout.tile")
def tile(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.tile", [ctx.arg(op.inputs["input"])], {"repeats": list(op.attribs["repeats"])})


@converter("gather", target="layout.gather")
def gather(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "layout.gather", [ctx.arg(op.inputs["input"]), ctx.arg(op.inputs["indices"])],
             {"axis": int(op.attribs["axis"])})


@converter("cast", target="layout.cast<T>")
def cast(ctx: Context, op: Operation) -> None:
    target = _TYPES[ctx.graph.tensors[op.outputs["output"]].dtype]
    ctx.emit(ctx.output(), "layout.cast", [ctx.arg(op.inputs["input"])], type_args=[target])
