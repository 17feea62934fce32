"""Extents of tensors that depend on a symbolic dimension (issue 25), found before the converters run: the
nodes are walked in graph order, known values folded on the way (symbolic.fold, and the importer's
own folding), and each output whose extents onnx's shape inference left unnamed gets them from
symbolic.rule (ops whose shape is a shape value, windows, broadcasting) or symbolic.onnx_rule (onnx's
per-node inference, each expression passed as a dim_param of its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.context import Context, Node, Value
from skriptnd.interop.onnx_import.errors import ImportProblem

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import ModelProto


def resolved(ctx: Context, name: str) -> bool:
    """Every extent of the tensor is a number, a dim_param of a graph attribute or an expression of them."""
    v = ctx.values.get(name)
    return v is not None and v.shape is not None and all(
        isinstance(d, int | sym.sympy.Basic) or (isinstance(d, str) and d in ctx.symbols) for d in v.shape)


def propagate(model: ModelProto, ctx: Context, scratch: Context, fold_node: Callable[[Context, Node], bool]
              ) -> None:
    """Fill in the extents onnx's inference leaves unnamed, node by node in graph order (`scratch` holds
    the known values found on the way, `fold_node(scratch, node)` folds constants as the importer does)."""
    opsets = {o.domain or "": o.version for o in model.opset_import}
    for proto in model.graph.node:
        node = Node.of(proto)
        scratch.node = node
        try:
            if not fold_node(scratch, node):
                sym.fold(scratch, node)
        except ImportProblem:
            pass
        todo = [o for o in node.outputs if o and not resolved(ctx, o)]
        if not todo:
            continue
        shapes: list[list[sym.SymDim] | None]
        known = [sym.dims_of(scratch, o) if o in scratch.consts or o in scratch.symvals else None
                 for o in node.outputs]
        try:
            rule = sym.rule(scratch, node)
        except (ValueError, TypeError, ZeroDivisionError):
            rule = None
        if any(k is not None for k in known):
            shapes = [list(k) if k is not None else None for k in known]
        elif rule is not None:
            shapes = rule + [None] * (len(node.outputs) - len(rule))
        else:
            shapes = sym.onnx_rule(scratch, node, opsets) or [None] * len(node.outputs)
        for o, dims in zip(node.outputs, shapes, strict=False):
            if o in todo and dims is not None:
                old = ctx.values.get(o) or ctx.values.get(node.input(0)) or Value(None, None)
                ctx.values[o] = Value(old.dtype, tuple(sym.norm(d) for d in dims), old.elem)
    scratch.node = None
