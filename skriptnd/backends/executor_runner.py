"""The runner of the numpy backends (numpy, kernels, lower): the graph on skriptnd's Executor with a
kernel mapping (skriptnd.execute), or, for a graph with @quantize entries, whatever the backend makes of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skriptnd.backends.base import Progress, Runner


class ExecutorRunner(Runner):
    """``threads``: the numpy kernels' worker threads (skriptnd.parallel) and OpenBLAS's limit while a run
    lasts (None: the CPUs the process may use, OpenBLAS as it is)."""

    def __init__(self, graph: Any, kernels: Mapping[str, Any], optimize: bool, plan: list[str],
                 threads: int | None = None) -> None:
        from skriptnd.execute import Executor

        variables = ({t.name: graph.variable_source(t) for t in graph.variables}
                     if graph.variable_source else {})
        self.executor = Executor(graph, variables, kernels=kernels, optimize=optimize)
        self.operations = len(graph.operations)
        self.plan = plan
        self.threads = threads

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        from skriptnd import parallel

        self.executor.on_operation = progress
        try:
            with parallel.using(self.threads), parallel.blas_limit(self.threads):
                return self.executor.run(dict(inputs))
        finally:
            self.executor.on_operation = None


def fake_quantized(graph: Any) -> Any:
    """The float graph with every quantized tensor through its quantize operator (spec §2.14)."""
    from skriptnd.compose.quantization import fake_quantize

    return fake_quantize(graph)


def has_quantization(graph: Any) -> bool:
    from skriptnd.compose.quantization import has_quantization as has

    return has(graph)
