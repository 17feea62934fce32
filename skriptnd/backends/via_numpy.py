"""``numpy`` (the default; ``tosa`` is its former name): TOSA programs on the numpy TOSA kernels for the
operations that legalize, native kernels or @lower for the rest; a graph with @quantize entries runs as
its integer TOSA graph (skriptnd.tosa.integer.lower)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skriptnd.backends.base import Backend, Options, Progress, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.integer_graph import lower_for_running
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.backends.registry import register
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization


class IntegerRunner(Runner):
    """A quantized graph as its integer TOSA graph on the numpy TOSA operators."""

    def __init__(self, graph: Graph) -> None:
        self.integer = lower_for_running(graph)
        self.plan = [f"running the integer TOSA graph of {graph.name} ({len(self.integer.ops)} TOSA operations)"]

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        return self.integer.run(dict(inputs))


@register
class NumpyBackend(Backend):
    def __init__(self) -> None:
        super().__init__("numpy", "TOSA programs on numpy (BLAS) for what legalizes, native kernels or @lower "
                         "for the rest; @quantize graphs in integer TOSA (the default, no dependencies)")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        if has_quantization(graph):
            return IntegerRunner(graph)
        kernels, optimize = kernels_for("numpy")
        return ExecutorRunner(graph, kernels, optimize, [f"{graph.name}: TOSA programs on numpy, native kernels "
                                                         "or @lower for the rest (sknd compose --tosa lists which)"],
                              threads=options.threads)
