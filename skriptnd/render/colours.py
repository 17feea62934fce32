"""What colour an operation gets in a picture: where it runs, or whether a target supports it.

By default the colour says what the numpy backend does with the operation, as ``sknd compose --tosa``
reports it: legalized to TOSA (run inside a compiled TOSA program), a native kernel, or its ``@lower`` plan
(a composite runs its own ``@compose``, which the picture shows as its body); control flow runs its
subgraphs. With ``--target NAME`` it says whether the target's operator set has an operation for it
(skriptnd.targets). The categories, their colours and legend words live here once, for the SVG and the HTML.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from skriptnd.compose.ir import Graph, Operation
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import KERNELS
from skriptnd.targets import get
from skriptnd.targets.common import walk
from skriptnd.tosa.legalize import coverage


@dataclass(frozen=True)
class Style:
    fill: str
    stroke: str
    legend: str


#: every category a node can have: fill and stroke colours (the fills are distinct, a test counts their pixels)
STYLES: dict[str, Style] = {
    "tosa": Style("#cdeccb", "#2e7d32", "TOSA (legalized, compiled into a TOSA program)"),
    "kernel": Style("#cfe0f7", "#1f5fa8", "native kernel"),
    "lower": Style("#fde0c2", "#b85c12", "@lower (scalar plan) or its @compose"),
    "control": Style("#e5d7f2", "#6a3d9a", "control flow (runs its subgraphs)"),
    "supported": Style("#cdeccb", "#2e7d32", "supported by the target"),
    "unsupported": Style("#f7cdcd", "#b3261e", "not supported by the target"),
    "io": Style("#eeeeee", "#666666", "graph input / output"),
}


def fallback(op: Operation) -> str:
    """Where the numpy backend runs an operation that does not legalize to TOSA: 'kernel' or 'lower'."""
    return "kernel" if op.op in KERNELS else "lower"


@dataclass
class Colouring:
    """Each operation's category (by identity) and why, for one graph and its subgraphs."""

    title: str
    #: the same colouring for another graph (an operator's expansion, whose operations are new objects)
    again: Callable[[Graph], Colouring]
    category: dict[int, str] = field(default_factory=dict)
    reason: dict[int, str] = field(default_factory=dict)

    def recolour(self, graph: Graph) -> Colouring:
        try:
            return self.again(graph)
        except DiagnosticError:  # a body the legalization or a target cannot read: drawn uncoloured (@lower)
            return Colouring(self.title, self.again)

    def of(self, op: Operation) -> str:
        return self.category.get(id(op), "lower")

    def legend(self) -> list[str]:
        """The categories in use, in STYLES' order."""
        used = set(self.category.values())
        return [k for k in STYLES if k in used]


def by_backend(graph: Graph) -> Colouring:
    """TOSA / native kernel / @lower / control flow, from the legalization (as ``sknd compose --tosa``)."""
    colouring = Colouring("what runs where (sknd run --via numpy)", by_backend)
    for op, ok, reason in coverage(graph):
        kind = "control" if op.subgraphs else "tosa" if ok else fallback(op)
        colouring.category[id(op)] = kind
        colouring.reason[id(op)] = reason
    return colouring


def by_target(graph: Graph, target: str) -> Colouring:
    """Supported / not supported by a target's operator set, with the target operation or why none."""
    t = get(target)
    colouring = Colouring(f"{t.title} support", lambda g: by_target(g, target))
    mapped = {id(m.op): m for m in t.map_graph(graph)}
    for op in walk(graph):
        m = mapped.get(id(op))
        colouring.category[id(op)] = "supported" if m is not None and m.supported else "unsupported"
        colouring.reason[id(op)] = (f"{m.target_op}: {m.how}" if m.supported else m.how) if m is not None else \
            "not mapped"
    return colouring
