"""What the target mappings share: a composed operation's geometry, layouts and quantization, read once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.compose.quantization import QParams, qparams
from skriptnd.diagnostics import DiagnosticError
from skriptnd.targets.registry import Mapping, Param


def walk(graph: Graph) -> list[Operation]:
    """The operations of ``graph`` and of its subgraphs, in order."""
    ops = []
    for op in graph.operations:
        ops.append(op)
        for sub in op.subgraphs.values():
            ops.extend(walk(sub))
    return ops


def shape(t: Tensor | None) -> list[int | None]:
    return [None if d is None else int(d) for d in t.shape] if t is not None else []


def tensor_inputs(op: Operation) -> list[Tensor]:
    return [t for v in op.inputs if v is not None for t in (v if isinstance(v, list) else [v])]


def quant(t: Tensor | None) -> QParams | None:
    """The tensor's :class:`QParams`, or None (no @quantize entry, or one that is not affine)."""
    if t is None or getattr(t, "quant", None) is None:
        return None
    try:
        return qparams(t)
    except DiagnosticError:
        return None


#: Operations whose output keeps the input's quantization when it has no @quantize entry of its own (they
#: only move, select or clamp values; as in skriptnd.tosa.integer.lower).
PASS_THROUGH = {"nn.relu", "nn.max_pool", "math.clamp", "math.iden", "layout.reshape", "layout.flatten",
                "layout.squeeze", "layout.unsqueeze", "layout.transpose", "layout.slice", "layout.pad",
                "layout.concat", "layout.depth_to_space", "layout.space_to_depth", "layout.tile"}


class QuantView:
    """Each tensor's quantization: its @quantize entry, else its input's through pass-through operations."""

    def __init__(self, graph: Graph) -> None:
        self._q: dict[int, QParams] = {}
        for t in graph.tensors:
            qp = quant(t)
            if qp is not None:
                self._q[id(t)] = qp
        for op in walk(graph):
            ins = tensor_inputs(op)
            if op.op in PASS_THROUGH and ins and id(ins[0]) in self._q:
                for t in op.outputs:
                    if t is not None and id(t) not in self._q:
                        self._q[id(t)] = self._q[id(ins[0])]

    def __call__(self, t: Tensor | None) -> QParams | None:
        return None if t is None else self._q.get(id(t))


def describe_quant(t: Tensor | None, view: QuantView | None = None) -> str:
    qp = view(t) if view is not None else quant(t)
    if qp is None:
        return "float32"
    bits = f"{'u' if qp.offset else ''}int{qp.bits}"
    zp = [int(z) - qp.offset for z in qp.zero_point]
    if qp.axis is None:
        return f"{bits} scale {float(qp.scale[0]):.6g} zero point {zp[0]}"
    return f"{bits} per-axis (axis {qp.axis}, {qp.scale.size} scales)"


@dataclass
class Window:
    """A convolution's or pool's spatial geometry over two axes, NNAPI-style numbers."""

    axes: list[int]  # the spatial axes of the input
    channel_axis: int | None
    size: list[int]  # kernel extent (h, w)
    stride: list[int]
    dilation: list[int]
    pads: list[int]  # [top, left, bottom, right]
    explicit: bool  # the padding attribute was given


def window(op: Operation, kernel: list[int], axes: list[int], channel_axis: int | None) -> Window | None:
    """The geometry of a 2-D window operation (None when it is not 2-D or a size is dynamic)."""
    x, y = op.inputs[0], op.outputs[0]
    xs, ys = shape(x), shape(y)
    d = len(axes)
    if d != 2 or None in xs or None in ys:
        return None
    stride = _per_dim(op.attribs.get("stride"), d)
    dilation = _per_dim(op.attribs.get("dilation"), d)
    padding = op.attribs.get("padding")
    if padding is not None:
        pads = [int(p) for p in padding]
        before, after = pads[:d], pads[d:]
    else:
        before, after = [], []
        for i, a in enumerate(axes):
            total = (ys[a] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - xs[a]
            total = max(total, 0)
            lo = total // 2 if op.attribs.get("padding_align", "UPPER") == "UPPER" else -(-total // 2)
            before.append(lo)
            after.append(total - lo)
    return Window(list(axes), channel_axis, list(kernel), stride, dilation,
                  [before[0], before[1], after[0], after[1]], padding is not None)


def _per_dim(value: Param, d: int) -> list[int]:
    if value is None:
        return [1] * d
    if isinstance(value, int | float):
        return [int(value)] * d
    values = [int(v) for v in value]
    return values if len(values) == d else values * d if len(values) == 1 else values


def consumers(graph: Graph) -> dict[int, list[Operation | None]]:
    """For each tensor (by id), the operations that read it (None: the graph's output)."""
    users: dict[int, list[Operation | None]] = {}
    for op in walk(graph):
        for t in tensor_inputs(op):
            users.setdefault(id(t), []).append(op)
    for t in graph.outputs:
        users.setdefault(id(t), []).append(None)
    return users


class RuleContext:
    """What a target's mapping rules share while one graph is mapped: each tensor's readers, the graph's
    quantization, and the activations a rule fused into an earlier operation (by id)."""

    def __init__(self, graph: Graph) -> None:
        self.users = consumers(graph)
        self.fused: set[int] = set()
        self.q = QuantView(graph)


#: a target's mapping rule for one kind of operation
Rule = Callable[[Operation, "RuleContext"], Mapping]


def map_with_rules(graph: Graph, rules: dict[str, Rule], ctx: RuleContext, *, control_flow: str, missing: str,
                   fused: str) -> list[Mapping]:
    """One Mapping per operation of ``graph`` (subgraphs included): its rule's, else why none (``control_flow``
    for an operation with subgraphs, ``missing`` with ``{op}`` for one without a rule); an activation a rule
    fused into an earlier operation (decided when that one is mapped) is reported as ``fused``."""
    rows = []
    for op in walk(graph):
        rule = rules.get(op.op)
        if op.subgraphs:
            rows.append(Mapping(op, None, f"control flow ({op.op}): {control_flow}"))
        elif rule is None:
            rows.append(Mapping(op, None, missing.format(op=op.op)))
        else:
            rows.append(rule(op, ctx))
    return [r if id(r.op) not in ctx.fused else Mapping(r.op, "(fused)", fused) for r in rows]


def activation_of(op: Operation | None) -> tuple[str, float | None, float | None] | None:
    """``(name, min, max)`` when ``op`` is a clamp-like activation with constant bounds: nn.relu (with
    ``max``), math.clamp with scalar constant bounds; None otherwise (also for a leaky relu)."""
    if op is None:
        return None
    if op.op == "nn.relu" and op.attribs.get("alpha") is None:
        top = op.attribs.get("max")
        return ("relu", 0.0, None if top is None else float(top))
    if op.op == "math.clamp" and len(op.inputs) == 3:
        lo, hi = (_constant_scalar(op.inputs[i]) for i in (1, 2))
        if lo is not None and hi is not None:
            return ("clamp", lo, hi)
    return None


def _constant_scalar(t: Tensor | None) -> float | None:
    if t is None or t.kind != "constant" or t.value is None:
        return None
    a = np.asarray(t.value)
    return float(a.reshape(-1)[0]) if a.size == 1 else None
