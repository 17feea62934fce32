"""Symbolic dimensions through import (issue 25): a dynamic ONNX dimension (`dim_param` such as `batch`,
or a name given with `--input-shape x=batch,3,224,224`) is a graph attribute of the imported graph, and
every extent and shape value computed from it is a sympy expression of that attribute's symbol.

Two things are tracked next to `Context.consts`:

* the *known values* of small integer tensors computed from shapes (`Shape -> Gather -> Unsqueeze ->
  Concat -> Reshape` chains, shape arithmetic): object arrays of ints and sympy expressions
  (`Context.symvals`), folded here node by node instead of at run time;
* the *shapes* of tensors whose extents depend on a symbol: `rule` and `onnx_rule`, which
  symbolic_shapes.py applies node by node before the converters run, fill in every dimension that onnx's
  shape inference left unnamed: own rules for the ops whose output shape is a shape *value* (Reshape,
  Expand, ConstantOfShape, Tile, Range, Slice), for Flatten, windows and broadcasting, and onnx's per-node
  inference, with each expression passed as a `dim_param` of its own, for the rest.

Extents are written into the SkriptND text by `text` (`floor(a/b)` as `a / b`, `ceiling` as `a \\ b`).
Symbols are positive integers, so that `Equal(batch, -1)` decides to false (Reshape's `-1` tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import sympy


class _Value(Protocol):
    shape: tuple | None
    elem: int | None


class Context(Protocol):
    """What the folding reads and writes of the importer's context (context.py imports this module, so it is
    described here rather than imported)."""

    consts: dict[str, np.ndarray]
    symvals: dict[str, np.ndarray]
    values: dict[str, _Value]
    symbols: dict[str, str]


class Node(Protocol):
    """An ONNX node as context.Node decodes it."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    domain: str
    proto: object

    def attr(self, name: str, default: object = None) -> object: ...

    def input(self, i: int) -> str: ...

#: An extent: a number or an expression of graph attributes.
SymDim = int | sympy.Expr
#: Slice ends at least this large mean "to the end" (exporters write INT64_MAX or INT32_MAX-like values).
_INT_MAX = 2 ** 31 - 1


def symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def norm(value: object) -> SymDim:
    """An int where the expression is a number, else the (simplified) expression."""
    e = sympy.sympify(value)
    if e.is_Integer:
        return int(e)
    return sympy.simplify(e) if not e.is_Symbol else e


def is_symbolic(value: object) -> bool:
    return isinstance(value, sympy.Basic) and not value.is_Number


def text(value: SymDim) -> str:
    """SkriptND expression text of an extent; an expression it cannot write (a fraction) is refused."""
    e = sympy.sympify(value)
    if e.is_Integer:
        return str(int(e))
    if e.is_Symbol:
        return e.name

    def wrap(x: sympy.Expr) -> str:
        t = text(x)
        return t if x.is_Symbol or (x.is_Integer and x >= 0) else f"({t})"

    if isinstance(e, sympy.Add):
        parts = [text(a) for a in sorted(e.args, key=lambda a: a.is_Number)]
        out = parts[0]
        for p in parts[1:]:
            out += f" - {p[1:]}" if p.startswith("-") and "(" not in p[1:2] else f" + {p}"
        return out
    if isinstance(e, sympy.Mul):
        if any(a.is_Rational and not a.is_Integer for a in e.args):
            raise ValueError(f"the extent {e} is not an integer expression")
        return " * ".join(wrap(a) for a in e.args)
    if isinstance(e, sympy.floor | sympy.ceiling):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        op = "/" if isinstance(e, sympy.floor) else "\\"
        return f"{wrap(num)} {op} {wrap(den)}"
    if isinstance(e, sympy.Mod):
        return f"{wrap(e.args[0])} % {wrap(e.args[1])}"
    if isinstance(e, sympy.Max | sympy.Min):
        op = " >? " if isinstance(e, sympy.Max) else " <? "
        return "(" + op.join(text(a) for a in e.args) + ")"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        return f"{wrap(e.base)} ** {int(e.exp)}"
    raise ValueError(f"the extent {e} has no SkriptND expression")


def floordiv(a: SymDim, b: SymDim) -> SymDim:
    """Integer division of extents (ONNX Div on int64 truncates; extents are not negative, so it floors)."""
    if isinstance(a, int) and isinstance(b, int):
        return int(np.trunc(a / b)) if b else 0
    q = sympy.cancel(sympy.sympify(a) / b)
    num, den = sympy.fraction(q)
    return norm(q) if den == 1 else norm(sympy.floor(q))


def product(dims: Sequence[SymDim]) -> SymDim:
    out: SymDim = 1
    for d in dims:
        out = out * d
    return norm(out)


# ----------------------------------------------------------------------------- known values


def value(ctx: Context, name: str) -> np.ndarray | None:
    """The known value of a tensor: a numpy array (an int64 array for a shape) or an object array holding
    sympy expressions; None when it is computed at run time."""
    if not name:
        return None
    if name in ctx.consts:
        return ctx.consts[name]
    return ctx.symvals.get(name)


def _store(ctx: Context, name: str, array: np.ndarray) -> None:
    array = np.asarray(array, dtype=object)
    if array.size and all(isinstance(v, bool | np.bool_) for v in array.reshape(-1)):  # a decided comparison
        ctx.consts[name] = array.astype(np.bool_)
        return
    flat = [norm(v) for v in array.reshape(-1)]
    if all(isinstance(v, int) for v in flat):
        ctx.consts[name] = np.array(flat, np.int64).reshape(array.shape)
    else:
        out = np.empty(len(flat), object)
        out[:] = flat
        ctx.symvals[name] = out.reshape(array.shape)


def dims_of(ctx: Context, name: str) -> tuple[SymDim, ...] | None:
    """A tensor's shape with symbols for its dynamic extents; None where a dimension is not known."""
    if name in ctx.consts:
        return tuple(int(d) for d in ctx.consts[name].shape)
    if name in ctx.symvals:
        return tuple(int(d) for d in ctx.symvals[name].shape)
    v = ctx.values.get(name)
    if v is None or v.shape is None:
        return None
    out: list[SymDim] = []
    for d in v.shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, sympy.Basic):
            out.append(d)
        elif isinstance(d, str) and d in ctx.symbols:
            out.append(symbol(ctx.symbols[d]))
        else:
            return None
    return tuple(out)


def _ints(array: np.ndarray | None) -> list[int] | None:
    if array is None or array.dtype == object:
        return None
    return [int(v) for v in np.asarray(array).reshape(-1)]


def _elementwise(op: str, a: object, b: object) -> object:
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b
    if op == "Mul":
        return a * b
    if op == "Div":  # ONNX truncates, floordiv floors: the same where the signs are known to be positive
        if (is_symbolic(a) or is_symbolic(b)) and not (sympy.sympify(a).is_nonnegative and sympy.sympify(b).is_positive):
            raise _Unknown
        return floordiv(a, b)
    if op == "Mod":
        return sympy.Mod(a, b) if is_symbolic(a) or is_symbolic(b) else a % b
    if op == "Max":
        return sympy.Max(a, b)
    if op == "Min":
        return sympy.Min(a, b)
    if op == "Equal":
        eq = sympy.Eq(sympy.sympify(a), sympy.sympify(b))
        if eq in (sympy.true, sympy.false):
            return bool(eq)
        raise _Unknown
    raise _Unknown


class _Unknown(Exception):
    """A value that depends on a symbol in a way that cannot be decided at import time."""


def fold(ctx: Context, node: Node) -> bool:
    """Fold a node whose inputs are known values, one of them symbolic (or the shape of a tensor with a
    symbolic extent); True when its outputs are now known (in ctx.symvals, or ctx.consts if numbers)."""
    op = node.op_type
    try:
        if op in ("Shape", "Size"):
            dims = dims_of(ctx, node.input(0))
            if dims is None or all(isinstance(d, int) for d in dims):
                return False
            if op == "Size":
                _store(ctx, node.outputs[0], np.array(product(dims), object))
            else:
                start, end = node.attr("start", 0), node.attr("end", len(dims))
                arr = np.empty(len(dims), object)
                arr[:] = list(dims)
                _store(ctx, node.outputs[0], arr[slice(start, end)])
            return True
        inputs = [value(ctx, i) for i in node.inputs]
        if not any(i in ctx.symvals for i in node.inputs if i):
            return False
        if any(v is None for i, v in zip(node.inputs, inputs, strict=True) if i):
            return False
        data = inputs[0]
        if data is not None and data.dtype != object and data.dtype.kind == "f":
            return False
        result = _fold_op(node, op, inputs)
    except (_Unknown, ValueError, TypeError, IndexError):
        return False
    if result is None:
        return False
    _store(ctx, node.outputs[0], result)
    return True


def _obj(array: np.ndarray) -> np.ndarray:
    """An object array of Python ints / sympy expressions (sympy does not mix with numpy integers)."""
    array = np.asarray(array)
    if array.dtype == object:
        return array
    out = np.empty(array.shape, object)
    for index in np.ndindex(array.shape):
        out[index] = int(array[index]) if array.dtype.kind in "iub" else float(array[index])
    return out


def _fold_op(node: Node, op: str, inputs: list[np.ndarray | None]) -> np.ndarray | None:
    data = _obj(inputs[0]) if inputs and inputs[0] is not None else None
    if op in ("Identity", "Cast"):
        if op == "Cast" and node.attr("to") not in (6, 7):  # int32, int64: extents stay integers
            return None
        return data
    if op == "Gather":
        indices = np.asarray(inputs[1]).astype(np.int64)
        return np.take(data, indices, axis=int(node.attr("axis", 0)))
    if op == "Unsqueeze":
        axes = _ints(inputs[1]) if len(inputs) > 1 else list(node.attr("axes"))
        out = data
        rank = data.ndim + len(axes)
        for a in sorted(a % rank for a in axes):
            out = np.expand_dims(out, a)
        return out
    if op == "Squeeze":
        axes = _ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else node.attr("axes")
        return np.squeeze(data, axis=tuple(axes) if axes is not None else None)
    if op == "Concat":
        return np.concatenate([_obj(np.atleast_1d(x)) for x in inputs], axis=int(node.attr("axis", 0)))
    if op == "Reshape":
        shape = _ints(inputs[1])
        return data.reshape([data.shape[i] if s == 0 else s for i, s in enumerate(shape)])
    if op == "Slice":
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
        steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
        index = [slice(None)] * data.ndim
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            index[a] = slice(s, e, st)
        return data[tuple(index)]
    if op in ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal"):
        a, b = np.broadcast_arrays(data, _obj(inputs[1]))
        return np.array([_elementwise(op, x, y) for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)],
                        object).reshape(a.shape)
    if op == "Neg":
        return -data
    if op == "Where":
        cond = inputs[0]
        if cond.dtype == object:
            return None
        x, y = _obj(inputs[1]), _obj(inputs[2])
        c, x, y = np.broadcast_arrays(cond.astype(bool), x, y)
        out = np.empty(c.shape, object)
        out[...] = np.where(c, x, y)
        return out
    if op == "Expand":
        shape = _ints(inputs[1])
        return np.broadcast_to(data, np.broadcast_shapes(data.shape, tuple(shape))).copy()
    return None


# ----------------------------------------------------------------------------- shapes


def _dim_list(ctx: Context, name: str) -> list[SymDim] | None:
    """A 1-D known value (a target shape) as a list of extents."""
    v = value(ctx, name)
    if v is None:
        return None
    return [norm(x) for x in np.asarray(v).reshape(-1).tolist()]


def _broadcast(a: Sequence[SymDim], b: Sequence[SymDim]) -> list[SymDim]:
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    out: list[SymDim] = []
    for x, y in zip(a, b, strict=True):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            raise ValueError("broadcast")
        else:  # a model that runs has equal extents here (seq and min(seq, 64)): the simpler expression
            out.append(min((x, y), key=lambda d: (sympy.count_ops(d), not isinstance(d, int))))
    return out


#: Elementwise ops with multidirectional broadcasting: the output shape is the inputs' broadcast.
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
              "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "PRelu"}


def rule(ctx: Context, node: Node) -> list[list[SymDim]] | None:
    """The output shapes of the ops whose shape is a shape value; None where onnx's inference applies."""
    op = node.op_type
    if op in _BROADCAST:
        shapes = [dims_of(ctx, i) for i in node.inputs if i]
        if any(d is None for d in shapes):
            return None
        out: list[SymDim] = []
        for d in shapes:
            out = _broadcast(out, d)  # type: ignore[arg-type]
        return [out]
    if op in ("Conv", "MaxPool", "AveragePool", "LpPool") and node.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        dims = dims_of(ctx, node.input(0))
        w = dims_of(ctx, node.input(1)) if op == "Conv" else None
        if dims is None or (op == "Conv" and w is None):
            return None
        kernel = list(node.attr("kernel_shape", w[2:] if w else []))
        d = len(kernel)
        pads = list(node.attr("pads", [0] * 2 * d))
        strides, dilations = list(node.attr("strides", [1] * d)), list(node.attr("dilations", [1] * d))
        if node.attr("ceil_mode", 0):  # ONNX drops a last window that starts in the end padding: left to onnx
            return None
        spatial = [norm(sympy.floor(sympy.sympify(dims[2 + i] + pads[i] + pads[d + i] - dilations[i] * (kernel[i] - 1)
                                                  - 1) / strides[i]) + 1) for i in range(d)]
        return [[dims[0], w[0] if w else dims[1], *spatial]]
    if op == "Flatten":
        dims = dims_of(ctx, node.input(0))
        if dims is None:
            return None
        k = int(node.attr("axis", 1)) % (len(dims) + 1) if dims else 0
        return [[product(dims[:k]), product(dims[k:])]]
    if op == "Reshape":
        target = _dim_list(ctx, node.input(1))
        dims = dims_of(ctx, node.input(0))
        if target is None or dims is None:
            return None
        if not node.attr("allowzero", 0):
            target = [dims[i] if t == 0 else t for i, t in enumerate(target)]
        if -1 in target:
            k = target.index(-1)
            target[k] = floordiv(product(dims), product([t for t in target if t != -1]))
        return [target]
    if op == "Expand":
        target = _dim_list(ctx, node.input(1))
        dims = dims_of(ctx, node.input(0))
        return None if target is None or dims is None else [_broadcast(dims, target)]
    if op == "ConstantOfShape":
        target = _dim_list(ctx, node.input(0))
        return None if target is None else [target]
    if op == "Tile":
        reps = _dim_list(ctx, node.input(1))
        dims = dims_of(ctx, node.input(0))
        return None if reps is None or dims is None else [[norm(d * r) for d, r in zip(dims, reps, strict=True)]]
    if op == "Range":
        parts = [_dim_list(ctx, node.input(i)) for i in range(3)]
        if any(p is None for p in parts):
            return None
        first, last, step = (p[0] for p in parts)
        return [[norm(sympy.Max(0, sympy.ceiling(sympy.sympify(last - first) / step)))]]
    if op == "Slice":
        dims = dims_of(ctx, node.input(0))
        starts, ends = _dim_list(ctx, node.input(1)), _dim_list(ctx, node.input(2))
        if dims is None or starts is None or ends is None:
            return None
        axes = _dim_list(ctx, node.input(3)) if node.input(3) else list(range(len(starts)))
        steps = _dim_list(ctx, node.input(4)) if node.input(4) else [1] * len(starts)
        out = list(dims)
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            a = int(a) % len(dims)
            extent = slice_extent(dims[a], s, e, st)
            if extent is None:
                return None
            out[a] = extent
        return [out]
    return None


def slice_extent(dim: SymDim, start: SymDim, end: SymDim, step: SymDim) -> SymDim | None:
    """The extent of dim[start:end:step] (ONNX clamping), where it can be decided for a symbolic dim."""
    if all(isinstance(v, int) for v in (dim, start, end, step)):
        return len(range(*slice(start, end, step).indices(dim)))
    bounds = slice_bounds(dim, start, end, step) if isinstance(step, int) else None
    if bounds is None:
        return None
    return norm(sympy.Max(0, sympy.ceiling(sympy.sympify(bounds[1] - bounds[0]) / step)))


def slice_bounds(dim: SymDim, start: SymDim, end: SymDim, step: int) -> tuple[SymDim, SymDim] | None:
    """begin and end of dim[start:end:step] after ONNX's clamping, where the signs can be decided (symbols
    are positive); None otherwise (a negative step on a symbolic extent, a bound of unknown sign)."""
    if step < 1:
        return None

    def clamp(v: SymDim) -> SymDim | None:
        if isinstance(v, int) and v >= _INT_MAX:
            return dim
        e = sympy.sympify(v)
        if e.is_negative:
            e = dim + e
            return norm(sympy.Max(0, e)) if not e.is_nonnegative else norm(e)
        if e.is_nonnegative:
            return norm(sympy.Min(e, dim)) if not (sympy.sympify(dim) - e).is_nonnegative else norm(e)
        return None

    b, e = clamp(start), clamp(end)
    return None if b is None or e is None else (b, e)


def _encode(dims: Sequence[SymDim], table: dict[str, SymDim]) -> list[int | str]:
    out: list[int | str] = []
    for d in dims:
        if isinstance(d, int):
            out.append(d)
        else:
            key = next((k for k, v in table.items() if v == d), None)
            if key is None:
                key = f"__sknd_{len(table)}"
                table[key] = d
            out.append(key)
    return out


def onnx_rule(ctx: Context, node: Node, opsets: dict[str, int]) -> list[list[SymDim] | None] | None:
    """onnx's inference of one node, each symbolic extent of its inputs given as a dim_param of its own."""
    import onnx
    from onnx import helper, numpy_helper

    table: dict[str, SymDim] = {}
    types, data = {}, {}
    for name in node.inputs:
        if not name:
            continue
        dims = dims_of(ctx, name)
        v = ctx.values.get(name)
        elem = v.elem if v is not None and v.elem else None
        if name in ctx.consts:
            elem = helper.np_dtype_to_tensor_dtype(ctx.consts[name].dtype)
            if ctx.consts[name].size <= 4096:
                data[name] = numpy_helper.from_array(ctx.consts[name], name)
        if dims is None or elem is None:
            return None
        types[name] = helper.make_tensor_type_proto(elem, _encode(dims, table))
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1), node.domain or "")
        result = onnx.shape_inference.infer_node_outputs(
            schema, node.proto, types, data, None, [helper.make_opsetid(d, v) for d, v in opsets.items()])
    except Exception:  # noqa: BLE001 - no inference for this node: its outputs stay unknown
        return None
    shapes: list[list[SymDim] | None] = []
    for name in node.outputs:
        t = result.get(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            shapes.append(None)
            continue
        dims: list[SymDim] | None = []
        for d in t.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.dim_param in table:
                dims.append(table[d.dim_param])
            elif d.dim_param in ctx.symbols:
                dims.append(symbol(ctx.symbols[d.dim_param]))
            else:
                dims = None
                break
        shapes.append(dims)
    return shapes
