"""Peepholes over the exported ONNX nodes: operator chains that onnxruntime runs as several passes over memory
where ONNX has one operator for them.

An imported HardSwish or HardSigmoid (skriptnd.interop.onnx_import writes them as SkriptND's ``x * a + b``,
``clamp`` and ``*``) comes out of the converters as Mul, Add, Clip (and Mul): four element-wise passes over a
convolution's output where the original model had one operator, which onnxruntime also fuses into the
convolution before it. MobileNetV3-L's export ran 1.33x the original under onnxruntime with the Clips, 1.96x
with the Where nodes before them (issue 28). Here the chains become HardSigmoid (``alpha``, ``beta``) and
HardSwish (alpha 1/6, beta 1/2: ONNX fixes them), which compute the same operations: ``max(0, min(1,
alpha * x + beta))``, times ``x``.

A chain is rewritten only when its intermediate values have no other reader and are not graph outputs, its
constants are single float values, and ``x`` has the chain's output shape (a constant of higher rank would
otherwise have broadcast ``x`` up).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # onnx is an optional extra, imported when an export runs
    from onnx import NodeProto, TensorProto

#: ONNX HardSwish's fixed coefficients (float32, as the imported constants hold them)
_SWISH_ALPHA, _SWISH_BETA = float(np.float32(1.0 / 6.0)), 0.5


def _read(nodes: Sequence[NodeProto]) -> Iterator[str]:
    """Every name the nodes read, inside their subgraphs (If / Loop bodies read outer values by name) too."""
    for node in nodes:
        yield from node.input
        for attr in node.attribute:
            for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from _read(graph.node)
                yield from (o.name for o in graph.output)


def _scalars(initializers: Sequence[TensorProto]) -> dict[str, float]:
    """Initializers of one float32 value: name -> value."""
    from onnx import TensorProto, numpy_helper

    found: dict[str, float] = {}
    for init in initializers:
        if init.data_type == TensorProto.FLOAT and int(np.prod(init.dims, dtype=np.int64)) == 1:
            found[init.name] = float(numpy_helper.to_array(init).reshape(-1)[0])
    return found


def hard_activations(nodes: list[NodeProto], initializers: list[TensorProto],
                     shapes: Mapping[str, tuple[int, ...]], outputs: Collection[str]) -> list[NodeProto]:
    """``nodes`` with every ``Mul(x, alpha) -> Add(., beta) -> Clip(., 0, 1)`` chain as one HardSigmoid, and one
    followed by ``Mul(x, .)`` with HardSwish's coefficients as one HardSwish (see the module docstring).
    ``shapes``: the known shapes of values by name; ``outputs``: the graph's output names."""
    from onnx import helper

    scalars = _scalars(initializers)
    producer = {out: node for node in nodes for out in node.output}
    uses = Counter(_read(nodes))
    uses.update(outputs)
    replaced: dict[int, NodeProto | None] = {}  # id(node) -> its replacement (None: dropped)

    def single(name: str) -> NodeProto | None:
        node = producer.get(name)
        return node if node is not None and uses[name] == 1 and id(node) not in replaced else None

    def split(node: NodeProto) -> tuple[str, float] | None:
        """(the non-constant operand, the constant's value) of a two-input node with one scalar constant."""
        if len(node.input) != 2:
            return None
        a, b = node.input
        if b in scalars and a not in scalars:
            return a, scalars[b]
        if a in scalars and b not in scalars:
            return b, scalars[a]
        return None

    consumers: dict[str, list[NodeProto]] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for clip in nodes:
        if (clip.op_type != "Clip" or len(clip.input) != 3 or scalars.get(clip.input[1]) != 0.0
                or scalars.get(clip.input[2]) != 1.0):
            continue
        add = single(clip.input[0])
        if add is None or add.op_type != "Add" or (shifted := split(add)) is None:
            continue
        mul = single(shifted[0])
        if mul is None or mul.op_type != "Mul" or (scaled := split(mul)) is None:
            continue
        x, alpha, beta = scaled[0], scaled[1], shifted[1]
        if x not in shapes or shapes[x] != shapes.get(clip.output[0]):
            continue
        after = consumers.get(clip.output[0], [])
        swish = (len(after) == 1 and uses[clip.output[0]] == 1 and after[0].op_type == "Mul"
                 and sorted(after[0].input) == sorted([x, clip.output[0]]) and id(after[0]) not in replaced
                 and alpha == _SWISH_ALPHA and beta == _SWISH_BETA)
        replaced[id(mul)] = replaced[id(add)] = None
        if swish:
            replaced[id(clip)] = None
            replaced[id(after[0])] = helper.make_node("HardSwish", [x], list(after[0].output), name=after[0].name)
        else:
            replaced[id(clip)] = helper.make_node("HardSigmoid", [x], list(clip.output), name=clip.name,
                                                  alpha=alpha, beta=beta)
    return [replaced.get(id(n), n) for n in nodes if replaced.get(id(n), n) is not None]


def read_initializers(nodes: Sequence[NodeProto], initializers: list[TensorProto],
                      outputs: Collection[str]) -> list[TensorProto]:
    """The initializers some node (or subgraph) or graph output reads: a rewritten chain's constants are not."""
    read = set(_read(nodes)) | set(outputs)
    return [init for init in initializers if init.name in read]
