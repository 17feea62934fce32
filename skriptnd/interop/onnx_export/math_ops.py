"""Converters for the ``math`` module: element-wise operators (with SkriptND's operand alignment made
explicit by a Reshape), n-ary operators, reductions, arg-reductions, moments and cumulative sums.
(Named ``math_ops`` so as not to read as Python's ``math``.)"""

from __future__ import annotations

import math

import numpy as np

from skriptnd.compose.ir import Operation, Tensor
from skriptnd.interop.onnx_export.core import (
    Context,
    Results,
    Unsupported,
    aligned,
    converter,
    norm_axes,
    product,
    shape,
)

_UNARY = {"math.iden": "Identity", "math.neg": "Neg", "math.rcp": "Reciprocal", "math.sqrt": "Sqrt",
          "math.exp": "Exp", "math.log": "Log", "math.sin": "Sin", "math.cos": "Cos", "math.tan": "Tan",
          "math.sinh": "Sinh", "math.cosh": "Cosh", "math.tanh": "Tanh", "math.asin": "Asin", "math.acos": "Acos",
          "math.atan": "Atan", "math.asinh": "Asinh", "math.acosh": "Acosh", "math.atanh": "Atanh",
          "math.abs": "Abs", "math.sign": "Sign", "math.not": "Not", "math.floor": "Floor", "math.ceil": "Ceil"}


def _unary(ctx: Context, op: Operation) -> Results:
    return [ctx.node(_UNARY[op.op], [ctx.value(op.inputs[0])])]


for _name in _UNARY:
    converter(_name, onnx=_UNARY[_name])(_unary)


@converter("math.sqr", onnx="Mul")
def sqr(ctx: Context, op: Operation) -> Results:
    x = ctx.value(op.inputs[0])
    return [ctx.node("Mul", [x, x])]


@converter("math.rsqr", onnx="Mul, Reciprocal")
def rsqr(ctx: Context, op: Operation) -> Results:
    x = ctx.value(op.inputs[0])
    return [ctx.node("Reciprocal", [ctx.node("Mul", [x, x])])]


@converter("math.rsqrt", onnx="Sqrt, Reciprocal")
def rsqrt(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Reciprocal", [ctx.node("Sqrt", [ctx.value(op.inputs[0])])])]


@converter("math.log2", onnx="Log, Div")
def log2(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Div", [ctx.node("Log", [ctx.value(op.inputs[0])]), ctx.scalar(math.log(2.0))])]


@converter("math.round", onnx="half away from zero: Abs, Floor, Where, Sign")
def round_(ctx: Context, op: Operation) -> Results:
    """Half away from zero (ONNX Round is half to even): sign(x) * (f + (|x| - f >= 0.5)), f = floor(|x|)."""
    x = ctx.value(op.inputs[0])
    ax = ctx.node("Abs", [x])
    f = ctx.node("Floor", [ax])
    up = ctx.node("GreaterOrEqual", [ctx.node("Sub", [ax, f]), ctx.scalar(0.5)])
    r = ctx.node("Where", [up, ctx.node("Add", [f, ctx.scalar(1.0)]), f])
    return [ctx.node("Mul", [r, ctx.node("Sign", [x])])]


# -- binary --------------------------------------------------------------------------------------

_BINARY = {"math.add": "Add", "math.sub": "Sub", "math.mul": "Mul", "math.pow": "Pow", "math.min": "Min",
           "math.max": "Max", "math.lt": "Less", "math.gt": "Greater", "math.le": "LessOrEqual",
           "math.ge": "GreaterOrEqual", "math.eq": "Equal", "math.and": "And", "math.or": "Or", "math.xor": "Xor"}


_COMPARISONS = {"math.lt", "math.gt", "math.le", "math.ge", "math.eq", "math.ne"}


def _operands(ctx: Context, op: Operation) -> tuple[str, str]:
    x, y = aligned(ctx, op, 0, "ex"), aligned(ctx, op, 1, "ey")
    if op.op in _COMPARISONS and op.inputs[0].dtype != op.inputs[1].dtype:
        # an int compared with a real (erratum L2): as numbers, exactly as @lower's numpy does (int64 and
        # float32 meet in float64); ONNX compares operands of one type
        x, y = ctx.cast(x, "float64"), ctx.cast(y, "float64")
    return x, y


def _binary(ctx: Context, op: Operation) -> Results:
    return [ctx.node(_BINARY[op.op], list(_operands(ctx, op)))]


for _name in _BINARY:
    converter(_name, onnx=_BINARY[_name])(_binary)


@converter("math.ne", onnx="Equal, Not")
def ne(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Not", [ctx.node("Equal", list(_operands(ctx, op)))])]


@converter("math.div", onnx="Div (int: floor division through Mod)")
def div(ctx: Context, op: Operation) -> Results:
    x, y = _operands(ctx, op)
    if op.inputs[0].dtype != "int":
        return [ctx.node("Div", [x, y])]
    # SkriptND int division floors; ONNX Div truncates: (x - x mod y) / y is exact
    return [ctx.node("Div", [ctx.node("Sub", [x, ctx.node("Mod", [x, y])]), y])]


@converter("math.mod", onnx="Mod (real: fmod corrected to the divisor's sign)")
def mod(ctx: Context, op: Operation) -> Results:
    """Python's modulo (the sign of the divisor): ONNX Mod for ints; fmod corrected for reals."""
    x, y = _operands(ctx, op)
    if op.inputs[0].dtype == "int":
        return [ctx.node("Mod", [x, y])]
    r = ctx.node("Mod", [x, y], fmod=1)
    zero = ctx.scalar(0.0)
    differ = ctx.node("Xor", [ctx.node("Less", [r, zero]), ctx.node("Less", [y, zero])])
    fix = ctx.node("And", [ctx.node("Not", [ctx.node("Equal", [r, zero])]), differ])
    return [ctx.node("Where", [fix, ctx.node("Add", [r, y]), r])]


@converter("math.select", onnx="Where")
def select(ctx: Context, op: Operation) -> Results:
    return [ctx.node("Where", [aligned(ctx, op, 0, "ec"), aligned(ctx, op, 1, "ex"), aligned(ctx, op, 2, "ey")])]


@converter("math.clamp", onnx="Clip (constant bounds a <= b), else Where, Less, Greater")
def clamp(ctx: Context, op: Operation) -> Results:
    """x < a ? a : x > b ? b : x, exactly: one Clip where both bounds are one constant value each with a <= b
    (the same values: max(x, a) then min(., b); an imported HardSwish or HardSigmoid is such a clamp, and
    onnxruntime runs a Clip, and fuses it, where the Where form cost MobileNetV3-L 2x: issue 28), else Where
    nodes (Clip differs when a > b)."""
    bounds = [_scalar_constant(t) for t in op.inputs[1:3]]
    if (bounds[0] is not None and bounds[1] is not None and bounds[0] <= bounds[1] and op.inputs[0].dtype == "real"
            and shape(op.outputs[0]) == shape(op.inputs[0])):
        return [ctx.node("Clip", [ctx.value(op.inputs[0]), ctx.scalar(bounds[0]), ctx.scalar(bounds[1])])]
    x, a, b = aligned(ctx, op, 0, "ex"), aligned(ctx, op, 1, "ea"), aligned(ctx, op, 2, "eb")
    upper = ctx.node("Where", [ctx.node("Greater", [x, b]), b, x])
    return [ctx.node("Where", [ctx.node("Less", [x, a]), a, upper])]


def _scalar_constant(t: Tensor | None) -> float | None:
    """The one value of a constant real tensor of one element (any rank), else None (NaN: None)."""
    if t is None or t.kind != "constant" or t.dtype != "real" or t.value is None:
        return None
    a = np.asarray(t.value).reshape(-1)
    return float(a[0]) if a.size == 1 and not np.isnan(a[0]) else None


@converter("math.axpb", onnx="Mul, Add")
def axpb(ctx: Context, op: Operation) -> Results:
    a, x, b = aligned(ctx, op, 0, "ea"), aligned(ctx, op, 1, "ex"), aligned(ctx, op, 2, "eb")
    return [ctx.node("Add", [ctx.node("Mul", [a, x]), b])]


@converter("math.axpby", onnx="Mul, Add")
def axpby(ctx: Context, op: Operation) -> Results:
    a, x = aligned(ctx, op, 0, "ea"), aligned(ctx, op, 1, "ex")
    b, y = aligned(ctx, op, 2, "eb"), aligned(ctx, op, 3, "ey")
    return [ctx.node("Add", [ctx.node("Mul", [a, x]), ctx.node("Mul", [b, y])])]


# -- n-ary ---------------------------------------------------------------------------------------


def _pack(ctx: Context, op: Operation) -> list[str]:
    return [ctx.value(t) for t in op.inputs[0]]


def _chain(ctx: Context, op_type: str, xs: list[str]) -> str:
    y = xs[0]
    for x in xs[1:]:
        y = ctx.node(op_type, [y, x])
    return y if len(xs) > 1 else ctx.node("Identity", [y])


@converter("math.sum_n", onnx="Add chain")
def sum_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "Add", _pack(ctx, op))]


@converter("math.prod_n", onnx="Mul chain")
def prod_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "Mul", _pack(ctx, op))]


@converter("math.min_n", onnx="Min chain")
def min_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "Min", _pack(ctx, op))]


@converter("math.max_n", onnx="Max chain")
def max_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "Max", _pack(ctx, op))]


@converter("math.any_n", onnx="Or chain")
def any_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "Or", _pack(ctx, op))]


@converter("math.all_n", onnx="And chain")
def all_n(ctx: Context, op: Operation) -> Results:
    return [_chain(ctx, "And", _pack(ctx, op))]


@converter("math.argmin_n", "math.argmax_n", onnx="Unsqueeze, Concat, ArgMin/ArgMax")
def arg_n(ctx: Context, op: Operation) -> Results:
    stacked = ctx.node("Concat", [ctx.unsqueeze(x, [0]) for x in _pack(ctx, op)], axis=0)
    return [ctx.node("ArgMax" if op.op == "math.argmax_n" else "ArgMin", [stacked], axis=0, keepdims=0)]


# -- reductions ----------------------------------------------------------------------------------

_REDUCE = {"math.min_reduce": "ReduceMin", "math.max_reduce": "ReduceMax", "math.sum_reduce": "ReduceSum",
           "math.prod_reduce": "ReduceProd", "math.mean_reduce": "ReduceMean"}


def _axes(op: Operation) -> tuple[list[int], bool]:
    rank = len(shape(op.inputs[0]))
    axes = op.attribs.get("axes")
    return (norm_axes(axes, rank) if axes is not None else list(range(rank))), bool(op.attribs.get("squeeze", False))


def _reduce_to(ctx: Context, op_type: str, x: str, axes: list[int], squeeze: bool) -> str:
    if not axes:
        return ctx.node("Identity", [x])
    return ctx.reduce(op_type, x, axes, keepdims=not squeeze)


@converter(*_REDUCE, onnx="ReduceMin/Max/Sum/Prod/Mean (axes as input from opset 18)")
def reduce(ctx: Context, op: Operation) -> Results:
    axes, squeeze = _axes(op)
    if op.inputs[0].dtype == "bool":
        raise Unsupported("a bool reduction")
    return [_reduce_to(ctx, _REDUCE[op.op], ctx.value(op.inputs[0]), axes, squeeze)]


@converter("math.any_reduce", "math.all_reduce", onnx="Cast, ReduceMax/ReduceMin, Cast")
def bool_reduce(ctx: Context, op: Operation) -> Results:
    axes, squeeze = _axes(op)
    x = ctx.node("Cast", [ctx.value(op.inputs[0])], to=6)  # int32: ONNX reductions take no bool
    y = _reduce_to(ctx, "ReduceMax" if op.op == "math.any_reduce" else "ReduceMin", x, axes, squeeze)
    return [ctx.cast(y, "bool")]


@converter("math.lp_reduce", onnx="ReduceL1, ReduceL2 (p 1 and 2; others through @compose)")
def lp_reduce(ctx: Context, op: Operation) -> Results:
    p = float(op.attribs["p"])
    if p not in (1.0, 2.0):
        raise Unsupported(f"p = {p} (ONNX has ReduceL1 and ReduceL2)")
    axes, squeeze = _axes(op)
    return [_reduce_to(ctx, "ReduceL1" if p == 1.0 else "ReduceL2", ctx.value(op.inputs[0]), axes, squeeze)]


@converter("math.moments", onnx="ReduceMean, Sub, Mul, ReduceMean")
def moments(ctx: Context, op: Operation) -> Results:
    axes, squeeze = _axes(op)
    x = ctx.value(op.inputs[0])
    mean = _reduce_to(ctx, "ReduceMean", x, axes, False)
    diff = ctx.node("Sub", [x, mean])
    var = _reduce_to(ctx, "ReduceMean", ctx.node("Mul", [diff, diff]), axes, squeeze)
    if squeeze and axes:
        mean = ctx.squeeze(mean, axes)
    return [mean, var]


@converter("math.argmin", "math.argmax", onnx="ArgMin, ArgMax")
def arg(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.inputs[0]))
    axis = norm_axes(op.attribs["axis"], rank)[0]
    return [ctx.node("ArgMax" if op.op == "math.argmax" else "ArgMin", [ctx.value(op.inputs[0])], axis=axis,
                     keepdims=int(not op.attribs.get("squeeze", False)))]


@converter("math.argmin_nd", "math.argmax_nd", onnx="Transpose, Reshape, ArgMin/ArgMax, Div/Mod, Concat")
def arg_nd(ctx: Context, op: Operation) -> Results:
    """The reduced axes moved last and flattened, one ArgMax, then the flat index unravelled into the
    index along each reduced axis (the output's last axis)."""
    s = shape(op.inputs[0])
    axes, squeeze = _axes(op)
    kept = [a for a in range(len(s)) if a not in axes]
    x = ctx.transpose(ctx.value(op.inputs[0]), kept + axes)
    sizes = [s[a] for a in axes]
    x = ctx.reshape(x, [s[a] for a in kept] + [product(sizes)])
    flat = ctx.node("ArgMax" if op.op == "math.argmax_nd" else "ArgMin", [x], axis=len(kept), keepdims=1)
    parts = []
    for j in range(len(axes)):
        stride = product(sizes[j + 1:])
        q = ctx.node("Div", [flat, ctx.i64(stride)]) if stride != 1 else flat
        parts.append(ctx.node("Mod", [q, ctx.i64(sizes[j])]) if j > 0 else q)
    y = ctx.node("Concat", parts, axis=-1) if len(parts) > 1 else parts[0]
    return [ctx.reshape(y, shape(op.outputs[0]))]


@converter("math.cumsum", onnx="CumSum")
def cumsum(ctx: Context, op: Operation) -> Results:
    rank = len(shape(op.inputs[0]))
    axis = norm_axes(op.attribs["axis"], rank)[0]
    return [ctx.node("CumSum", [ctx.value(op.inputs[0]), ctx.i64(axis, "axis")],
                     exclusive=int(bool(op.attribs.get("exclusive", False))),
                     reverse=int(bool(op.attribs.get("reverse", False))))]
