"""A composed graph as boxes and arrows to draw: what each box says, its colour, and its edges.

One node per graph input, per operation and per graph output; an edge per tensor from its producer to each
consumer (one per pair of nodes). Variables and constants do not get nodes of their own (ResNet-18 has 102):
each box lists the ones its operation reads, grouped by type (``mean, variance, bias, scale: real[64]``).
Text is monospace, so a box's size follows from its longest line without font metrics.

An operation with a body, its control-flow subgraphs or a composite's own ``@compose`` (expanded as the
executor expands it), gets a ``body`` key: the HTML page draws each distinct body once, collapsible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from skriptnd.compose.ir import Graph, Operation, Tensor, flat_tensors
from skriptnd.compose.render import tensor_type
from skriptnd.compose.stdlib import expand
from skriptnd.diagnostics import DiagnosticError
from skriptnd.semantics.evaluate import format_value
from skriptnd.semantics.intrinsics import operator_kind

FONT_SIZE = 11.0
CHAR_WIDTH = FONT_SIZE * 0.6  # monospace
LINE_HEIGHT = 14.0
PAD_X, PAD_Y = 8.0, 6.0
MAX_CHARS = 44  # longer lines are cut with '…' (the tooltip has them whole)


@dataclass
class Node:
    kind: str  # 'input', 'output' or 'op'
    lines: list[str]  # the first is drawn bold
    tooltip: str
    category: str
    body: str | None = None  # the key of its body in Scene.bodies

    @property
    def size(self) -> tuple[float, float]:
        chars = max(len(line) for line in self.lines)
        return PAD_X * 2 + chars * CHAR_WIDTH, PAD_Y * 2 + LINE_HEIGHT * len(self.lines)


@dataclass
class Body:
    """An operation's body: one graph per subgraph (``then0``, ``body``, ...) or its expansion."""

    title: str
    graphs: dict[str, Graph]
    #: the label path an expansion's labels start with (the first operation's that had it): not shown, as
    #: the drawing stands for every operation with this body
    prefix: str = ""


@dataclass
class Scene:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1] if not name.startswith("%") else "const"


def _weights(tensors: list[Tensor]) -> list[str]:
    """The variables and constants an operation reads, grouped by type: one line per type."""
    groups: dict[str, list[str]] = {}
    for t in tensors:
        groups.setdefault(tensor_type(t), []).append(_short(t.name))
    return [f"{', '.join(dict.fromkeys(names))}: {ty}" for ty, names in groups.items()]


def body_key(op: Operation) -> str:
    """Composites with equal bodies share one drawing: the operator, its attributes, types and input shapes.
    Control flow's subgraphs are its own (two loops alike in all that may run different bodies)."""
    if op.subgraphs:
        return f"{op.op} {op.label} #{id(op):x}"
    attribs = ",".join(f"{k}={format_value(v)}" for k, v in op.attribs.items() if v is not None)
    shapes = ";".join(tensor_type(t) for t in flat_tensors(op.inputs))
    return f"{op.op}{{{attribs}}}<{','.join(op.dtypes.values())}>({shapes})"


def body_of(op: Operation, graph: Graph) -> Body | None:
    """Control flow's subgraphs, or a composite's expansion; None for an operation with neither (or one
    whose expansion fails: the picture then shows the operation alone)."""
    if op.subgraphs:
        return Body(f"{op.op} {op.label}".strip(), dict(op.subgraphs))
    if op.definition is None or op.binding is None or op.module is None or operator_kind(op.definition) != "composite":
        return None
    try:
        body = expand(op, graph.program)
    except (DiagnosticError, AssertionError, KeyError, ValueError):
        return None
    # the expansion is a fresh graph of ours: its inputs ('%in1', ...) take the operator's parameter names
    params = [p.name for p in op.binding.signature.inputs]
    names = [f"{name}.{k}" if isinstance(v, list) else name for name, v in zip(params, op.inputs, strict=False)
             if v is not None for k in range(len(v) if isinstance(v, list) else 1)]
    if len(names) == len(body.inputs):
        for t, name in zip(body.inputs, names, strict=True):
            t.name = name
    return Body(f"{op.op} (its @compose)", {"compose": body}, op.label + "." if op.label else "")


def build(graph: Graph, category: Callable[[Operation], str], reason: Callable[[Operation], str],
          bodies: dict[str, Body] | None = None, prefix: str = "") -> Scene:
    """The scene of one graph; with ``bodies``, each operation's body is recorded there under its key;
    ``prefix`` is left out of the labels shown (an expansion's, see Body.prefix)."""
    scene = Scene()
    producer: dict[int, int] = {}

    def add(node: Node) -> int:
        scene.nodes.append(node)
        return len(scene.nodes) - 1

    for t in graph.inputs:  # an expansion's inputs are '%in1', ...: shown as 'in1'
        name = t.name.lstrip("%")
        producer[id(t)] = add(Node("input", [_cut(name), _cut(tensor_type(t))], f"input {name}: "
                                   f"{tensor_type(t)}", "io"))
    for op in graph.operations:
        ins = flat_tensors(op.inputs)
        outs = flat_tensors(op.outputs)
        sources = [producer[id(t)] for t in ins if id(t) in producer]
        weights = [t for t in ins if id(t) not in producer]
        dtypes = "<" + ", ".join(op.dtypes.values()) + ">" if op.dtypes else ""
        lines = [op.op + dtypes]
        label = op.label.removeprefix(prefix) if prefix else op.label
        if label:
            lines.append(label)
        types = list(dict.fromkeys(tensor_type(t) for t in outs))
        lines.append("-> " + ", ".join(types) if len(types) < 3 else f"-> {len(outs)} tensors")
        lines += _weights(weights)
        key = None
        if bodies is not None:
            key = body_key(op)
            if key not in bodies:
                found = body_of(op, graph)
                if found is not None:
                    bodies[key] = found
            key = key if key in bodies else None
        if key is not None:
            lines.append("▸ body")
        attribs = ", ".join(f"{k}={format_value(v)}" for k, v in op.attribs.items() if v is not None)
        tooltip = "\n".join([f"{op.op}{dtypes}" + (f"{{{attribs}}}" if attribs else ""),
                             *([f"label: {label}"] if label else []),
                             *(f"in {t.name}: {tensor_type(t)}" for t in ins),
                             *(f"out {t.name}: {tensor_type(t)}" for t in outs),
                             f"{category(op)}: {reason(op)}"])
        index = add(Node("op", [_cut(line) for line in lines], tooltip, category(op), key))
        for s in dict.fromkeys(sources):
            scene.edges.append((s, index))
        for t in outs:
            producer[id(t)] = index
    for i, t in enumerate(graph.outputs):
        name = graph.output_name(i).lstrip("%").removeprefix(prefix)
        index = add(Node("output", [_cut(name), _cut(tensor_type(t))], f"output {name}: {tensor_type(t)}", "io"))
        if id(t) in producer:
            scene.edges.append((producer[id(t)], index))
    return scene
