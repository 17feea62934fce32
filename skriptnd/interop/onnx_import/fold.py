"""Import-time evaluation: what is known before the model runs is computed now, with the onnx package's
reference implementation (no hand-written kernels): Constant, Shape/Size of a static shape, shape
arithmetic on constants, and with --fold-constants any constant subgraph."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem

#: Ops never folded (their value is not a function of their inputs).
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli",
                     "QuantizeLinear", "DequantizeLinear"}  # these carry @quantize entries: never folded
#: A real-valued result larger than this stays a statement unless --fold-constants (weights stay weights).
_FOLD_LIMIT = 4096


def fold(ctx: Context, node: Node, fold_all: bool) -> bool:
    """Evaluate the node now if its result is known at import time; True when folded."""
    if node.op_type == "Constant":
        value = _constant_value(node)
        ctx.consts[node.outputs[0]] = value
        return True
    if node.op_type in ("Shape", "Size"):
        shape = ctx.values.get(node.inputs[0]).shape if node.inputs[0] in ctx.values else None
        if node.inputs[0] in ctx.consts:
            shape = ctx.consts[node.inputs[0]].shape
        if shape is not None and all(isinstance(d, int) for d in shape):
            if node.op_type == "Size":
                ctx.consts[node.outputs[0]] = np.array(int(np.prod(shape)), np.int64)
            else:
                rank = len(shape)
                start, end = node.attr("start", 0), node.attr("end", rank)
                ctx.consts[node.outputs[0]] = np.array(shape, np.int64)[slice(start, end)]
            return True
        return False
    if node.op_type in _NONDETERMINISTIC or node.attrs.get("body") is not None:
        return False
    present = [i for i in node.inputs if i]
    if not all(i in ctx.consts for i in present):
        return False
    if not present and node.op_type not in ("ConstantOfShape", "Range", "EyeLike"):
        return False
    if not fold_all:
        for o in node.outputs:
            v = ctx.values.get(o)
            known = v is not None and v.shape is not None and all(isinstance(d, int) for d in v.shape)
            if (v is None or v.dtype == "real") and known and int(np.prod(v.shape)) > _FOLD_LIMIT:
                return False
        if any(i in ctx.initializers and ctx.consts[i].dtype.kind == "f" and ctx.consts[i].size > 16 for i in present) \
                and node.op_type not in ("Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity"):
            return False  # arithmetic on weights stays in the model unless asked to fold it
    results = _evaluate(node, [ctx.consts.get(i) if i else None for i in node.inputs], ctx.opset)
    if results is None:
        return False
    for name, value in zip(node.outputs, results, strict=False):
        if name:
            ctx.consts[name] = np.asarray(value)
    return True


def _constant_value(node: Node) -> np.ndarray:
    for key, kind in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
        if key in node.attrs:
            return np.asarray(node.attrs[key], dtype=kind)
    raise ImportProblem("E0807", f"{node.where}: only tensor, float and int constants are supported")


def _evaluate(node: Node, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    try:
        ev = ReferenceEvaluator(node.proto, opsets={"": opset})
        feeds = {name: value for name, value in zip(node.inputs, inputs, strict=False) if name}
        return list(ev.run(None, feeds))
    except Exception:  # noqa: BLE001 - a node the reference cannot fold simply stays a statement
        return None
