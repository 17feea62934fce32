"""``numpy`` (the default; ``tosa`` is its former name): TOSA programs on the numpy TOSA kernels for the
operations that legalize, native kernels or @lower for the rest; a graph with @quantize entries runs as
its integer TOSA graph (skriptnd.tosa.integer.lower), and where that graph cannot be made (E0761: e.g. a
convolution's output without a @quantize entry, as onnxruntime's Conv -> Relu -> QDQ pattern leaves it;
quant8 weights given as graph inputs) with fake quantization, its plan saying why (issue 26). The
conformance runners run quantized vectors through this same choice (skriptnd.targets.conformance.runner)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skriptnd.backends.base import Backend, Options, Progress, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.integer_graph import lower_for_running
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.backends.registry import register
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import fake_quantize, has_quantization
from skriptnd.diagnostics import Diagnostic, DiagnosticError


class IntegerRunner(Runner):
    """A quantized graph as its integer TOSA graph on the numpy TOSA operators."""

    def __init__(self, graph: Graph) -> None:
        self.integer = lower_for_running(graph)
        self.plan = [f"running the integer TOSA graph of {graph.name} ({len(self.integer.ops)} TOSA operations)"]

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        return self.integer.run(dict(inputs))


class FakeQuantRunner(ExecutorRunner):
    """A quantized graph without an integer TOSA graph, run with fake quantization (float arithmetic, every
    quantized tensor rounded to its grid, as ``--via kernels``); ``refusal`` is why (E0761), its plan says it."""

    def __init__(self, graph: Graph, refusal: Diagnostic, options: Options) -> None:
        self.refusal = refusal
        where = (f"{refusal.span.file}:{refusal.span.line}:{refusal.span.col}" if refusal.span is not None
                 and refusal.span.line else graph.name)
        kernels, optimize = kernels_for("kernels")
        super().__init__(fake_quantize(graph), kernels, optimize,
                         [f"{graph.name}: fake quantization (float arithmetic, each quantized tensor rounded to its "
                          f"grid): no integer TOSA graph, {refusal.code} at {where}: {refusal.message}"],
                         threads=options.threads)


@register
class NumpyBackend(Backend):
    def __init__(self) -> None:
        super().__init__("numpy", "TOSA programs on numpy (BLAS) for what legalizes, native kernels or @lower "
                         "for the rest; @quantize graphs in integer TOSA (the default, no dependencies)")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        if has_quantization(graph):
            try:
                return IntegerRunner(graph)
            except DiagnosticError as err:
                if err.diagnostics[0].code != "E0761":
                    raise
                return FakeQuantRunner(graph, err.diagnostics[0], options)
        kernels, optimize = kernels_for("numpy")
        return ExecutorRunner(graph, kernels, optimize, [f"{graph.name}: TOSA programs on numpy, native kernels "
                                                         "or @lower for the rest (sknd compose --tosa lists which)"],
                              threads=options.threads)
