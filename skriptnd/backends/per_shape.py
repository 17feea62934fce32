"""One prepared form of a graph with dynamic extents per distinct input shapes (issue 25, item 5).

A graph composed once with `x: real[n|8, 3, h|64, w|64]` runs at any shape within its bounds. A backend
plans a static graph as a whole (TOSA programs, folded batch norms, compiled modules), which a dynamic extent
prevents; so the first run at new input shapes binds the composed graph to them (skriptnd.execute.specialise,
no composition) and the backend prepares that, once: later runs at those shapes reuse it. At most
:data:`LIMIT` shapes are kept (the least recently used goes), since each holds its own plan and weights in
the plan's layout. A graph that cannot be bound statically (control flow, extents only the data gives) runs
as composed, each operation bound to its shapes as it runs (skriptnd.execute.Executor).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import numpy as np

from skriptnd.compose.ir import Graph
from skriptnd.execute import Executor
from skriptnd.execute.specialise import specialise

__all__ = ["LIMIT", "PerShape"]

#: Input shapes whose prepared graphs are kept at once
LIMIT = 8

R = TypeVar("R")
Key = tuple[tuple[int, ...] | None, ...]


class PerShape(Generic[R]):
    """``prepare(graph)`` for each distinct input shapes of ``graph`` bound to them; ``checker`` (an Executor
    of the composed graph) checks a run's inputs the first time their shapes come (E0711, the asserts on
    dynamic extents: they depend on the shapes alone) and gives the extents' values."""

    def __init__(self, graph: Graph, checker: Executor, prepare: Callable[[Graph], R]) -> None:
        self.graph, self.checker, self.prepare = graph, checker, prepare
        self._prepared: OrderedDict[Key, R | None] = OrderedDict()
        #: shapes prepared so far (a count, for tests and `sknd run --verbose`)
        self.prepared = 0

    def get(self, inputs: Mapping[str, object]) -> R | None:
        """The runner prepared for these inputs' shapes; None where the graph cannot be bound to them (the
        caller runs the composed graph, which reports any problem with the inputs)."""
        key: Key = tuple(np.shape(inputs[t.name]) if t.name in inputs else None for t in self.graph.inputs)
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        if None in key:
            return None
        self.checker.check_inputs(inputs)
        shapes = {t.name: s for t, s in zip(self.graph.inputs, key, strict=True) if s is not None}
        bound = specialise(self.graph, shapes, self.checker.extents)
        runner = None if bound is None else self.prepare(bound)
        self.prepared += runner is not None
        self._prepared[key] = runner
        if len(self._prepared) > LIMIT:
            self._prepared.popitem(last=False)
        return runner
