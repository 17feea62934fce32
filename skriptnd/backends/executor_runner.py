"""The runner of the numpy backends (numpy, kernels, lower): the graph on skriptnd's Executor with a
kernel mapping (skriptnd.execute), or, for a graph with @quantize entries, whatever the backend makes of it.
A graph with dynamic extents gets one Executor per distinct input shapes, of the graph bound to them
(skriptnd.backends.per_shape): planned as a static graph (TOSA programs), never composed again."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from skriptnd import parallel
from skriptnd.backends.base import Progress, Runner
from skriptnd.backends.per_shape import LIMIT, PerShape
from skriptnd.compose.ir import Graph
from skriptnd.execute import Executor
from skriptnd.execute.executor import Kernel


class ExecutorRunner(Runner):
    """``threads``: the numpy kernels' worker threads (skriptnd.parallel) and OpenBLAS's limit while a run
    lasts (None: the CPUs the process may use, OpenBLAS as it is); ``per_shape``: a graph with dynamic extents
    is bound to each run's input shapes (False: a backend that does so itself, as iree does)."""

    def __init__(self, graph: Graph, kernels: Mapping[str, Kernel], optimize: bool, plan: list[str],
                 threads: int | None = None, per_shape: bool = True) -> None:
        variables = ({t.name: graph.variable_source(t) for t in graph.variables}
                     if graph.variable_source else {})
        self.executor = Executor(graph, variables, kernels=kernels, optimize=optimize)
        self.shaped: PerShape[Executor] | None = None
        if per_shape and any(t.dynamic for t in graph.inputs):
            self.shaped = PerShape(graph, self.executor, lambda bound: Executor(bound, variables, kernels=kernels,
                                                                                 optimize=optimize))
            plan = [*plan, f"{graph.name}: dynamic extents: bound to each distinct input shapes on their first run "
                    f"and planned for them (at most {LIMIT} kept); as composed where it cannot be bound"]
        self.operations = len(graph.operations)
        self.plan = plan
        self.threads = threads

    def run(self, inputs: Mapping[str, np.ndarray], progress: Progress | None = None) -> dict[str, np.ndarray]:
        executor = (self.shaped.get(inputs) if self.shaped is not None else None) or self.executor
        executor.on_operation = progress
        try:
            with parallel.using(self.threads), parallel.blas_limit(self.threads):
                return executor.run(dict(inputs))
        finally:
            executor.on_operation = None
