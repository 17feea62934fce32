"""Which tensors of a float graph get a @quantize entry, and from which observed range.

The plan follows what the integer TOSA lowering (:mod:`skriptnd.tosa.integer.lower`) computes in integers:

- ``nn.conv`` and ``nn.linear`` (*MAC* operations): int8 input, weights and output, an int32 bias. Their
  filter (a variable or constant) and bias get entries (the bias's depends on the input's scale), and the
  output gets one;
- operations whose TOSA form only moves or selects values (relu, max pooling, reshape, transpose, pad,
  slice, ...: *transparent*) run on the integers and keep their input's quantization: their outputs get
  no entry of their own. A tensor read only by a chain of them is quantized over the range at the end of
  the chain instead of its own: a convolution followed by a relu is quantized over [0, max], as a fused
  conv + relu would be (the negative values become 0 either way, and the grid is twice as fine);
- softmax and sigmoid outputs have the fixed scale 1/256 (the targets fix it; it is [0, 1) anyway);
- every other operation with a real output (add, mean, ...) runs in fp32 on dequantized values inside the
  integer graph; its output gets an entry, so the next operation reads int8 again;
- real graph inputs get an entry (the host quantizes them).

``--exclude LABEL`` keeps an operation in float: no entries for its output and parameters. A MAC operation
whose input ends up without a quantization (an excluded producer) keeps float parameters too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skriptnd.compose.ir import Graph, Operation, Tensor, flat_tensors
from skriptnd.tosa.integer.lower import TRANSPARENT
from skriptnd.tosa.legalize import legalize

MAC_OPS = ("nn.conv", "nn.linear")
UNIT_OPS = ("nn.softmax", "nn.sigmoid")


@dataclass
class Mac:
    """A MAC operation to quantize: its input (whose scale the bias takes), filter and bias."""

    op: Operation
    input: Tensor
    filter: Tensor
    bias: Tensor | None
    per_channel: bool


@dataclass
class Plan:
    """The activations to quantize (tensor -> the tensor whose observed range it takes), the fixed-scale
    outputs, the MAC operations, and what was left in float (label -> why)."""

    activations: dict[str, Tensor] = field(default_factory=dict)
    range_of: dict[str, Tensor] = field(default_factory=dict)
    fixed: list[Tensor] = field(default_factory=list)
    macs: list[Mac] = field(default_factory=list)
    floats: dict[str, str] = field(default_factory=dict)
    #: the tensor whose quantization a tensor carries (itself, or the input of its transparent producer)
    carrier: dict[str, str] = field(default_factory=dict)

    def observed(self) -> list[Tensor]:
        """The tensors whose ranges calibration must observe."""
        seen: dict[str, Tensor] = {}
        for name in self.activations:
            t = self.range_of[name]
            seen[t.name] = t
        return list(seen.values())


def _transparent(op: Operation) -> bool:
    if len(flat_tensors(op.outputs)) != 1 or op.subgraphs:
        return False
    sg, _ = legalize(op)
    return sg is not None and bool(sg.ops) and all(o.name in TRANSPARENT for o in sg.ops)


def _real(t: Tensor | None) -> bool:
    return t is not None and t.dtype == "real"


def _named(t: Tensor) -> bool:
    """Whether a @quantize entry can name the tensor: an identifier, or a scoped variable or constant
    (`conv1.filter`, of an operator the composer expanded); not a composer temporary."""
    parts = t.name.split(".")
    if len(parts) > 1 and t.kind not in ("variable", "constant"):
        return False  # the intermediates of a non-public operator cannot be named from the graph
    return all(part.replace("_", "a").isalnum() and not part[0].isdigit() for part in parts)


def make_plan(graph: Graph, exclude: set[str] = frozenset(), per_channel: bool = True) -> Plan:  # type: ignore[assignment]
    """The quantization plan of ``graph`` (see the module docstring)."""
    plan = Plan()
    outputs = {id(t) for t in graph.outputs}
    consumers: dict[int, list[Operation]] = {}
    for op in graph.operations:
        for t in flat_tensors(op.inputs):
            consumers.setdefault(id(t), []).append(op)
    transparent = {id(op): _transparent(op) for op in graph.operations}

    def range_source(t: Tensor) -> Tensor:
        """The end of the chain of single transparent readers of ``t`` (``t`` itself when there is none)."""
        while id(t) not in outputs:
            readers = consumers.get(id(t), [])
            if len(readers) != 1 or not transparent[id(readers[0])] or readers[0].label in exclude:
                break
            nxt = flat_tensors(readers[0].outputs)[0]
            if not _real(nxt):
                break
            t = nxt
        return t

    def quantize_activation(t: Tensor) -> None:
        if _real(t) and _named(t):
            plan.activations[t.name] = t
            plan.range_of[t.name] = range_source(t)
            plan.carrier[t.name] = t.name

    for t in graph.inputs:
        quantize_activation(t)
    for op in graph.operations:
        outs = flat_tensors(op.outputs)
        label = op.label or op.op
        if op.label in exclude:
            plan.floats[label] = "excluded (--exclude)"
            continue
        if op.subgraphs:
            plan.floats[label] = f"control flow ('{op.op}') stays in float"
            continue
        if transparent[id(op)]:
            src = next((t for t in flat_tensors(op.inputs) if t.name in plan.carrier), None)
            if src is not None:
                for t in outs:
                    plan.carrier[t.name] = plan.carrier[src.name]
            continue
        if op.op in MAC_OPS:
            x, w = op.inputs[0], op.inputs[1]
            b = op.inputs[2] if len(op.inputs) > 2 else None
            if not isinstance(x, Tensor) or x.name not in plan.carrier:
                plan.floats[label] = "its input is not quantized (an excluded or float producer)"
                continue
            if not isinstance(w, Tensor) or w.kind not in ("variable", "constant") or not _named(w):
                plan.floats[label] = "its filter is computed in the graph, not a variable or constant"
                continue
            ncx = op.attribs.get("filter_format", "NCX") in ("NCX", None)
            bias = b if isinstance(b, Tensor) and b.kind in ("variable", "constant") and _named(b) else None
            channels = int(w.shape[0]) if w.shape and w.shape[0] is not None else 0
            if bias is not None and (len(bias.shape) != 1 or int(bias.shape[0] or 0) != channels):
                bias = None  # a bias of another shape: the integer graph rounds it to the accumulator itself
            plan.macs.append(Mac(op, x, w, bias, per_channel and ncx))
        for t in outs:
            if op.op in UNIT_OPS and _real(t) and _named(t):
                plan.fixed.append(t)
                plan.carrier[t.name] = t.name
            else:
                quantize_activation(t)
    return plan
