"""Dynamic batch: a graph input whose `shape_signature` has -1 (LiteRT's converter writes it for a dimension
exported as dynamic, a batch) is imported with that extent as the graph attribute `batch` (its default: the
extent the file allocates), as the ONNX importer does for a `dim_param`, so one model folder runs at any batch
(`compose(attribs={"batch": 4})`), as LiteRT does after `resize_tensor_input`.

The file's other shapes are those of one batch (litert-torch even mixes the example input's batch with 1), and
the converters read them. So the batch is made dynamic only where every operator provably treats axis 0 as a
batch it never looks into: -1 only at axis 0 of the inputs, operators from `BATCH_SAFE` (element-wise,
convolutions, pools, matrix products of the batch's rows), transposes that keep axis 0 first, reductions,
concatenations, softmaxes and pads that leave axis 0 alone. Any other model is imported at the file's extents as
before (its inputs then refuse another batch: nothing runs silently wrong). The graph outputs are declared
without extents (`real[~, ~]`): the composer derives them.
"""

from __future__ import annotations

from skriptnd.interop.tflite_import.reader import Model, Operator, Subgraph

#: The graph attribute a dynamic batch becomes
BATCH = "batch"

#: operators whose output keeps the input's axis 0 as an independent batch, whatever it is (their other
#: parameters checked in `_keeps_batch`)
BATCH_SAFE = {
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MINIMUM", "MAXIMUM", "POW", "RSQRT", "SQRT", "EXP", "LOG",
    "ABS", "NEG", "LOGISTIC", "TANH", "GELU", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
    "LEAKY_RELU", "PRELU", "ELU", "CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D", "L2_POOL_2D",
    "FULLY_CONNECTED", "BATCH_MATMUL", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "DEQUANTIZE", "CAST",
    "TRANSPOSE", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "CONCATENATION", "SOFTMAX",
    "LOG_SOFTMAX", "PAD", "PADV2", "MIRROR_PAD",
}
_REDUCE = {"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"}


def dynamic_batch(model: Model, subgraph: Subgraph, inputs: list[int]) -> bool:
    """Whether the model's -1 dimensions can be imported as the graph attribute `batch` (see the module)."""
    signatures = [subgraph.tensors[i].signature for i in inputs]
    dynamic = [s for s in signatures if s is not None and any(d < 0 for d in s)]
    if not dynamic or any(d < 0 for s in dynamic for d in s[1:]):
        return False
    return all(op.name in BATCH_SAFE and _keeps_batch(model, subgraph, op) for op in subgraph.operators)


def _const(model: Model, subgraph: Subgraph, op: Operator, i: int) -> list[int] | None:
    index = op.inputs[i] if i < len(op.inputs) else -1
    if index < 0:
        return None
    value = model.data(subgraph.tensors[index])
    return None if value is None else [int(v) for v in value.reshape(-1)]


def _keeps_batch(model: Model, subgraph: Subgraph, op: Operator) -> bool:
    rank = len(subgraph.tensors[op.inputs[0]].shape) if op.inputs and op.inputs[0] >= 0 else 0
    if op.name == "TRANSPOSE":
        perm = _const(model, subgraph, op, 1)
        return perm is not None and bool(perm) and perm[0] % max(rank, 1) == 0
    if op.name in _REDUCE:
        axes = _const(model, subgraph, op, 1)
        return axes is not None and all(a % max(rank, 1) != 0 for a in axes)
    if op.name in ("PAD", "PADV2", "MIRROR_PAD"):
        pads = _const(model, subgraph, op, 1)
        return pads is not None and pads[:2] == [0, 0]
    if op.name == "CONCATENATION":
        return op.options is not None and op.options.int(0, 0) % max(rank, 1) != 0
    if op.name in ("SOFTMAX", "LOG_SOFTMAX"):
        return rank > 1
    if op.name == "BATCH_MATMUL":  # both sides carry the batch, or the right one is constant
        return all(len(subgraph.tensors[i].shape) == rank for i in op.inputs[:2] if i >= 0)
    return True
