"""``lower``: every standard operator on its own @lower formulas (the reference semantics); kernels only
for intrinsics. A graph with @quantize entries runs with fake quantization."""

from __future__ import annotations

from skriptnd.backends.base import Backend, Options, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.backends.registry import register
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import fake_quantize, has_quantization


@register
class LowerBackend(Backend):
    def __init__(self) -> None:
        super().__init__("lower", "every standard operator on its @lower formulas (the reference semantics)")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        quantized = has_quantization(graph)
        kernels, optimize = kernels_for("lower")
        return ExecutorRunner(fake_quantize(graph) if quantized else graph, kernels, optimize,
                              [f"{graph.name}: @lower formulas" + (", fake quantization" if quantized else "")])
