"""Running a conformance model's composed graph as ``sknd run`` does, for both readers (NNAPI, MLI).

It runs on the default backend (skriptnd.backends.via_numpy), so a vector passes exactly when ``sknd run``
passes it: a graph with @quantize entries runs as its integer TOSA graph
(:func:`skriptnd.tosa.integer.lower.lower_quantized`); when that lowering refuses the graph (an ``E0761``
diagnostic, e.g. quant8 weights given as graph inputs) with fake quantization (each quantized tensor through
its quantize operator), and the result says which. Float graphs run as TOSA programs on numpy.
"""

from __future__ import annotations

import numpy as np

from skriptnd.backends.base import Options
from skriptnd.backends.registry import prepare
from skriptnd.backends.via_numpy import FakeQuantRunner, IntegerRunner
from skriptnd.compose.ir import Graph


def run_graph(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """Run a composed graph as ``sknd run`` does (the default backend, see the module docstring);
    ``(outputs, path)``."""
    runner = prepare(graph, "numpy", Options())
    outputs = {k: np.asarray(v) for k, v in runner.run(inputs).items()}
    if isinstance(runner, IntegerRunner):
        inside = sorted({op.op for op, how in runner.integer.notes if how.startswith("fp32")})
        return outputs, "integer TOSA" + (f" (fp32 inside for {', '.join(inside)})" if inside else "")
    if isinstance(runner, FakeQuantRunner):
        return outputs, "fake quantization (" + runner.refusal.message.split(":")[0][:60] + ")"
    return outputs, "fp32 TOSA"
