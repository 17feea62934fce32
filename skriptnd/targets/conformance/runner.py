"""Running a conformance model's composed graph as ``sknd run`` does, for both readers (NNAPI, MLI).

It runs through the public API on the default backend (``skriptnd.run``, skriptnd.backends.via_numpy), so a
vector passes exactly when ``sknd run`` passes it, with no fallback of its own: a graph with @quantize
entries runs as its integer TOSA graph, or, where some operations do not lower (E0761, e.g. quant8 weights
given as graph inputs), those with fake quantization and the others as integer TOSA
(skriptnd.backends.quantized_split); the result says which. Float graphs run as TOSA programs on numpy.
"""

from __future__ import annotations

import numpy as np

from skriptnd.backends.quantized_split import describe
from skriptnd.backends.registry import prepare, run
from skriptnd.compose.ir import Graph


def run_graph(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """Run a composed graph as ``sknd run`` does (``skriptnd.run``, see the module docstring);
    ``(outputs, how it ran)``."""
    outputs = {k: np.asarray(v) for k, v in run(graph, inputs).items()}
    return outputs, describe(prepare(graph))  # the runner run kept on the graph: no second preparation
