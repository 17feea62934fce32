"""What a composed graph costs: its parameters, the multiply-accumulates of every operation, and the peak
memory of its activations (``sknd stats``, issue 26).

MACs are counted from the operators' own ``@lower`` formulas, not from a table of known operators, so a
custom operator counts as the standard ones do: every instance of an accumulating formula (``+=``) whose
right-hand side multiplies (``x[..] * w[..]``) contributes one multiply-accumulate per point of its index
space (the extents of its loop bounds for the operation's binding, skriptnd.lower.plan.index_spaces). That is
the count the Khronos tools' ``gmac.py`` and most papers use: a convolution's padded taps count too. A
composite operation is counted through its ``@compose`` (its components, recursively); an intrinsic (no
``@lower``, no ``@compose``) counts nothing and is listed as such. The bodies of ``if`` and ``loop`` are
counted once: how often a loop runs is known only at run time.

Peak activation memory follows the executor: operations run in order, an output is allocated when its
operation runs and freed after its last use (graph outputs and inputs live throughout); parameters
(variables) are not activations.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field

from skriptnd.compose.ir import Graph, Operation, Tensor, flat_tensors
from skriptnd.compose.stdlib import expand
from skriptnd.lower.plan import index_spaces
from skriptnd.lower.values import LoweringError
from skriptnd.syntax import ast

#: bytes per element of each SkriptND type as skriptnd stores it (real: float32, int: int64)
ITEM_BYTES = {"real": 4, "int": 8, "bool": 1}


@dataclass
class OpCost:
    """One top-level operation's count."""

    label: str
    op: str
    macs: int
    line: int | None = None
    note: str = ""


@dataclass
class GraphStats:
    """Parameters by dtype (count, bytes), MACs per operation and per operator, and peak activation bytes."""

    graph: str
    parameters: dict[str, tuple[int, int]] = field(default_factory=dict)
    operations: list[OpCost] = field(default_factory=list)
    peak_activation_bytes: int = 0
    not_counted: list[str] = field(default_factory=list)

    @property
    def macs(self) -> int:
        return sum(c.macs for c in self.operations)

    @property
    def parameter_count(self) -> int:
        return sum(n for n, _ in self.parameters.values())

    @property
    def parameter_bytes(self) -> int:
        return sum(b for _, b in self.parameters.values())

    def by_operator(self) -> dict[str, tuple[int, int]]:
        """operator -> (operations, MACs), most MACs first."""
        table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for c in self.operations:
            table[c.op][0] += 1
            table[c.op][1] += c.macs
        return dict(sorted(((k, (v[0], v[1])) for k, v in table.items()), key=lambda kv: -kv[1][1]))

    def as_json(self) -> dict[str, object]:
        return {
            "graph": self.graph,
            "parameters": {"count": self.parameter_count, "bytes": self.parameter_bytes,
                           "by_dtype": {k: {"count": n, "bytes": b} for k, (n, b) in self.parameters.items()}},
            "macs": {"total": self.macs,
                     "by_operator": {k: {"operations": n, "macs": m} for k, (n, m) in self.by_operator().items()},
                     "per_operation": [dataclasses.asdict(c) for c in self.operations]},
            "peak_activation_bytes": self.peak_activation_bytes,
            "not_counted": self.not_counted,
        }


def tensor_elements(t: Tensor) -> int:
    """Elements of ``t`` as run: a dynamic extent at its upper bound (1 without one)."""
    bounds = t.bounds or (None,) * len(t.shape)
    return math.prod(int(d if d is not None else (b or 1)) for d, b in zip(t.shape, bounds, strict=False))


def tensor_bytes(t: Tensor) -> int | None:
    """Bytes of ``t`` as run (see :func:`tensor_elements`); None for strings."""
    return tensor_elements(t) * ITEM_BYTES[t.dtype] if t.dtype in ITEM_BYTES else None


def _multiplies(e: object) -> bool:
    """Whether an expression contains a product ``a * b``."""
    if isinstance(e, ast.Binary) and e.op == "*":
        return True
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            items = v if isinstance(v, tuple | list) else (v,)
            if any(_multiplies(x) for x in items if isinstance(x, ast.Node)):
                return True
    return False


def _has(definition: ast.Definition, block: type) -> bool:
    return any(isinstance(b, block) for b in definition.blocks)


def operation_macs(op: Operation, graph: Graph, not_counted: list[str], depth: int = 0) -> int:
    """The multiply-accumulates of one operation (see the module docstring)."""
    total = 0
    for sub in op.subgraphs.values():  # if / loop: their bodies, once
        total += sum(operation_macs(o, sub, not_counted, depth + 1) for o in sub.operations)
    definition, binding = op.definition, op.binding
    if definition is None or binding is None:
        return total
    if _has(definition, ast.LowerBlock):
        formulas = [f for b in definition.blocks if isinstance(b, ast.LowerBlock) for f in b.items]
        if not any(f.op == "+=" and _multiplies(f.value) for f in formulas):
            return total  # data movement, element-wise or plain reductions: no multiply-accumulate
        try:
            spaces = index_spaces(definition, binding)
        except LoweringError as err:
            not_counted.append(f"{op.label or op.op}: its @lower bounds ({err})")
            return total
        for formula, lengths in spaces:
            if formula.op == "+=" and _multiplies(formula.value):
                total += math.prod(lengths)
        return total
    if _has(definition, ast.ComposeBlock) and depth < 32:
        inner = expand(op, graph.program)
        return total + sum(operation_macs(o, inner, not_counted, depth + 1) for o in inner.operations)
    if op.op not in ("if", "loop"):
        not_counted.append(f"{op.label or op.op}: {op.op} has neither @lower nor @compose (an intrinsic)")
    return total


def peak_activation_bytes(graph: Graph) -> int:
    """The most activation bytes alive at once when the operations run in order (see the module docstring)."""
    last_use: dict[int, int] = {}
    for k, op in enumerate(graph.operations):
        for t in flat_tensors(op.inputs):
            last_use[id(t)] = k
    keep = {id(t) for t in graph.inputs} | {id(t) for t in graph.outputs}
    live = {id(t): tensor_bytes(t) or 0 for t in graph.inputs}
    peak = sum(live.values())
    for k, op in enumerate(graph.operations):
        for t in flat_tensors(op.outputs):
            if t.kind != "variable":
                live[id(t)] = tensor_bytes(t) or 0
        peak = max(peak, sum(live.values()))
        for t in flat_tensors(op.inputs) + flat_tensors(op.outputs):
            if id(t) not in keep and last_use.get(id(t), -1) <= k:
                live.pop(id(t), None)
    return peak


def graph_stats(graph: Graph) -> GraphStats:
    """Parameters, MACs per operation and peak activation memory of a composed graph."""
    stats = GraphStats(graph.name)
    params: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in graph.variables:
        params[t.dtype][0] += tensor_elements(t)
        params[t.dtype][1] += tensor_bytes(t) or 0
    stats.parameters = {k: (v[0], v[1]) for k, v in params.items()}
    for op in graph.operations:
        before = len(stats.not_counted)
        macs = operation_macs(op, graph, stats.not_counted)
        line = getattr(op.span, "line", None)
        note = "; ".join(stats.not_counted[before:])
        stats.operations.append(OpCost(op.label, op.op, macs, line, note))
    stats.peak_activation_bytes = peak_activation_bytes(graph)
    return stats
