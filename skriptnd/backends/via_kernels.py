"""``kernels``: the native numpy kernels (skriptnd.execute.kernels), @lower where there is none; no TOSA.
A graph with @quantize entries runs with fake quantization."""

from __future__ import annotations

from skriptnd.backends.base import Backend, Options, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.backends.registry import register
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import fake_quantize, has_quantization


@register
class KernelsBackend(Backend):
    def __init__(self) -> None:
        super().__init__("kernels", "native numpy kernels, @lower where there is none (no TOSA)")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        quantized = has_quantization(graph)
        kernels, optimize = kernels_for("kernels")
        return ExecutorRunner(fake_quantize(graph) if quantized else graph, kernels, optimize,
                              [f"{graph.name}: native numpy kernels" + (", fake quantization" if quantized else "")],
                              threads=options.threads)
