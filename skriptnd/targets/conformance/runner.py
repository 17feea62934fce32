"""Running a conformance model's composed graph as ``sknd run`` does, for both readers (NNAPI, MLI).

A graph with @quantize entries runs as its integer TOSA graph (``--via tosa``,
:func:`skriptnd.tosa.integer.lower.lower_quantized`); when that lowering refuses the graph (an ``E0761``
diagnostic, e.g. quant8 weights given as graph inputs) it runs with fake quantization (``--via kernels``: each
quantized tensor through its quantize operator), and the result says which. Float graphs run on the default
TOSA backend.
"""

from __future__ import annotations

import numpy as np

from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import fake_quantize, has_quantization
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import Executor
from skriptnd.tosa.integer.lower import lower_quantized


def run_graph(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """Run a composed graph as ``sknd run`` does (see the module docstring); ``(outputs, path)``."""
    variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    if has_quantization(graph):
        try:
            integer = lower_quantized(graph, variables)
        except DiagnosticError as err:
            if err.diagnostics[0].code != "E0761":
                raise
            kernels, optimize = kernels_for("kernels")
            out = Executor(fake_quantize(graph), variables, kernels=kernels, optimize=optimize).run(inputs)
            return {k: np.asarray(v) for k, v in out.items()}, "fake quantization (" + \
                err.diagnostics[0].message.split(":")[0][:60] + ")"
        inside = sorted({op.op for op, how in integer.notes if how.startswith("fp32")})
        path = "integer TOSA" + (f" (fp32 inside for {', '.join(inside)})" if inside else "")
        return {k: np.asarray(v) for k, v in integer.run(inputs).items()}, path
    kernels, optimize = kernels_for("tosa")
    out = Executor(graph, variables, kernels=kernels, optimize=optimize).run(inputs)
    return {k: np.asarray(v) for k, v in out.items()}, "fp32 TOSA"
