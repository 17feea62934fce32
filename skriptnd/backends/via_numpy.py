"""``numpy`` (the default; ``tosa`` is its former name): TOSA programs on the numpy TOSA kernels for the
operations that legalize, native kernels or @lower for the rest; a graph with @quantize entries runs as
its integer TOSA graph (skriptnd.tosa.integer.lower), and where some operations do not lower (E0761: e.g. a
convolution's output without a @quantize entry, as onnxruntime's Conv -> Relu -> QDQ pattern leaves it;
quant8 weights given as graph inputs) those with fake quantization and the others still as integer TOSA,
its plan saying which and why (skriptnd.backends.quantized_split, issue 26). The conformance runners run
through this same backend (skriptnd.targets.conformance.runner)."""

from __future__ import annotations

from skriptnd.backends.base import Backend, Options, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.backends.quantized_split import prepare_quantized
from skriptnd.backends.registry import register
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization


@register
class NumpyBackend(Backend):
    def __init__(self) -> None:
        super().__init__("numpy", "TOSA programs on numpy (BLAS) for what legalizes, native kernels or @lower "
                         "for the rest; @quantize graphs in integer TOSA (the default, no dependencies)")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        if has_quantization(graph):
            return prepare_quantized(graph, options)
        kernels, optimize = kernels_for("numpy")
        return ExecutorRunner(graph, kernels, optimize, [f"{graph.name}: TOSA programs on numpy, native kernels "
                                                         "or @lower for the rest (sknd compose --tosa lists which)"],
                              threads=options.threads)
