"""Plan-time rewrites of a graph's operations for inference (used by Executor.prepare).

* Batch-norm folding: an `nn.conv` (NCX data and filter formats) whose output feeds only an
  `nn.batch_norm` on the channel axis, whose mean / variance / bias / scale (and the conv's filter
  and bias) are variables or constants, becomes one convolution with the folded filter and bias

      s = scale / sqrt(variance + epsilon),  filter' = filter * s,  bias' = (bias_conv - mean) * s + bias

  computed once in float64, then rounded to float32. The batch_norm no longer runs.
* Activation fusion: a plain `nn.relu` (no `alpha`; `max` allowed) that is the only consumer of a
  convolution's (or of its folded batch norm's) output is applied in place to the convolution's
  result (the `fused_relu` attribute of the rewritten operation: the relu's `max` or True).

The rewritten convolution is the original operation bound anew with its bias (so its `@lower`
plan still works when the kernel declines; the executor then applies the fused relu itself). The
original graph is left as it is; only the executor's plan uses the rewritten operations. Outputs
agree with the unoptimised graph to float32 rounding (the folded products round differently).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor, Value, flat_tensors
from skriptnd.semantics.binding import Site, bind
from skriptnd.semantics.values import TensorValue
from skriptnd.source import NO_SPAN, Span

__all__ = ["optimize_operations", "fold_batch_norm"]


def _count_uses(operations: list[Operation], counts: Counter[int]) -> None:
    for op in operations:
        for t in flat_tensors(op.inputs):
            counts[id(t)] += 1
        for sub in op.subgraphs.values():
            for t in sub.outputs:
                counts[id(t)] += 1
            _count_uses(sub.operations, counts)


def _value(t: Value, variables: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The array of a variable or constant tensor, else None."""
    if not isinstance(t, Tensor):
        return None
    if t.kind == "constant" and t.value is not None:
        return np.asarray(t.value)
    if t.kind == "variable" and t.name in variables:
        return np.asarray(variables[t.name])
    return None


def _sym(op: Operation, name: str, default: object = None) -> Any:
    env = op.binding.env if op.binding is not None else {}
    value = env.get(name)
    if value is None:
        value = op.attribs.get(name)
    return default if value is None else value


def _foldable_conv(op: Operation, variables: Mapping[str, np.ndarray]) -> bool:
    if op.op != "nn.conv" or op.binding is None or op.definition is None or len(op.inputs) < 2:
        return False
    if _sym(op, "data_format", "NCX") != "NCX" or _sym(op, "filter_format", "NCX") != "NCX":
        return False
    if not all(isinstance(t, Tensor) and t.dtype == "real" and None not in t.shape
               for t in op.inputs[:1] + op.outputs[:1]):
        return False
    w = _value(op.inputs[1], variables)
    bias = op.inputs[2] if len(op.inputs) > 2 else None
    return (w is not None and w.dtype == np.float32 and w.ndim >= 3
            and (bias is None or _value(bias, variables) is not None))


def _rebind(conv: Operation, filter_: Tensor, bias: Tensor) -> Operation | None:
    """The convolution bound anew with (filter_, bias) as its arguments."""
    x = conv.inputs[0]
    assert isinstance(x, Tensor)
    attribs = {k: v for k, v in conv.attribs.items() if v is not None}
    type_args = [conv.dtypes[d.name] for d in conv.binding.signature.dtypes if d.name in conv.dtypes]
    span = conv.span if isinstance(conv.span, Span) else NO_SPAN
    try:
        binding = bind(conv.definition, attribs, [TensorValue(t.dtype, t.shape) for t in (x, filter_, bias)],
                       type_args, Site(span=span))
    except Exception:  # noqa: BLE001 - a binding that fails: leave the operations as they are
        return None
    return replace(conv, inputs=[x, filter_, bias], binding=binding)


def fold_batch_norm(conv: Operation, bn: Operation, variables: Mapping[str, np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """The folded (filter, bias) of conv followed by bn, float32, or None when they do not fold."""
    if bn.op != "nn.batch_norm" or len(bn.inputs) < 3 or bn.inputs[0] is not conv.outputs[0]:
        return None
    if _sym(bn, "align", 1) != 1:
        return None
    w = _value(conv.inputs[1], variables)
    n = w.shape[0] if w is not None else 0
    conv_bias = _value(conv.inputs[2], variables) if len(conv.inputs) > 2 and conv.inputs[2] is not None \
        else np.zeros(n)
    params = list(bn.inputs[1:]) + [None] * (5 - len(bn.inputs))
    mean, variance = _value(params[0], variables), _value(params[1], variables)
    bias = _value(params[2], variables) if params[2] is not None else np.zeros(n)
    scale = _value(params[3], variables) if params[3] is not None else np.ones(n)
    if w is None or conv_bias is None or mean is None or variance is None or bias is None or scale is None:
        return None
    try:
        mean, variance, bias, scale, conv_bias = (np.broadcast_to(np.asarray(v, np.float64).reshape(-1), (n,))
                                                  for v in (mean, variance, bias, scale, conv_bias))
    except ValueError:
        return None
    s = scale / np.sqrt(variance + float(_sym(bn, "epsilon", 1e-5)))
    folded_w = np.empty(w.shape, np.float32)  # the products in float64, rounded once to float32
    np.multiply(w, s.reshape((n,) + (1,) * (w.ndim - 1)), out=folded_w, dtype=np.float64, casting="same_kind")
    folded_b = ((conv_bias - mean) * s + bias).astype(np.float32)
    return folded_w, folded_b


def _relu_fusion(relu: Operation) -> Any:
    """The `fused_relu` value for a plain relu (its max, or True), None for another activation."""
    if relu.op != "nn.relu" or len(relu.inputs) != 1 or _sym(relu, "alpha") is not None:
        return None
    top = _sym(relu, "max")
    return True if top is None else float(top)


def optimize_operations(operations: list[Operation], graph: Graph, variables: Mapping[str, np.ndarray]
                        ) -> tuple[list[Operation], list[Tensor]]:
    """The operations with batch norms folded into convolutions and relus fused, and the new
    constant tensors (folded filters and biases) the rewritten operations read."""
    counts: Counter[int] = Counter()
    _count_uses(operations, counts)
    for t in list(graph.outputs) + list(graph.updates.values()):
        counts[id(t)] += 2  # never folded away
    consumer: dict[int, int] = {}
    for i, op in enumerate(operations):
        for t in flat_tensors(op.inputs):
            consumer[id(t)] = i
    result: list[Operation] = []
    constants: list[Tensor] = []
    skip: set[int] = set()
    for i, op in enumerate(operations):
        if i in skip:
            continue
        if not _foldable_conv(op, variables) or len(op.outputs) != 1:
            result.append(op)
            continue
        out = op.outputs[0]
        new = op
        j = consumer.get(id(out)) if counts[id(out)] == 1 else None
        if j is not None and j > i and operations[j].op == "nn.batch_norm":
            folded = fold_batch_norm(op, operations[j], variables)
            bn_out = operations[j].outputs[0] if operations[j].outputs else None
            if folded is not None and isinstance(bn_out, Tensor):
                w = op.inputs[1]
                assert isinstance(w, Tensor)
                wt = Tensor(f"{w.name}.folded", "real", w.shape, kind="constant", value=folded[0])
                bt = Tensor(f"{w.name}.folded_bias", "real", (w.shape[0],), kind="constant", value=folded[1])
                rebound = _rebind(op, wt, bt)
                if rebound is not None:
                    new = replace(rebound, outputs=[bn_out], label=operations[j].label or op.label)
                    constants += [wt, bt]
                    skip.add(j)
                    out = bn_out
        j = consumer.get(id(out)) if counts[id(out)] == 1 else None
        if j is not None and j > i and j not in skip:
            fusion = _relu_fusion(operations[j])
            relu_out = operations[j].outputs[0] if operations[j].outputs else None
            if fusion is not None and isinstance(relu_out, Tensor):
                new = replace(new, outputs=[relu_out], attribs={**new.attribs, "fused_relu": fusion})
                skip.add(j)
        result.append(new)
    return result, constants
