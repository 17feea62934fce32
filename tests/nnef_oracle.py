"""Helpers for the NNEF 1.x import tests: write an NNEF graph folder (graph.nnef + random .dat weights) and
run it with the Khronos `nnef` package's reference executor (`nnef.Session`, C++), the independent oracle."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

#: Operations the nnef runtime executes itself; every other standard compound operation is handed to it
#: expanded into its NNEF definition (`lowered`). softmax is expanded too: the runtime does one axis only.
RUNTIME_OPS = frozenset(
    "abs acos acosh add all_reduce and any_reduce argmax_reduce argmin_reduce asin asinh atan atanh avg_pool "
    "avg_unpool box cast ceil concat constant conv copy cos cosh debox deconv div elu eq exp external floor "
    "gather ge gelu gt le leaky_relu linear log log2 lt matmul max max_pool max_reduce mean_reduce min "
    "min_reduce mul multilinear_upsample ne neg not or pad pow rcp relu reshape round rsqr rsqrt select selu "
    "sigmoid sign silu sin sinh slice softplus split sqr sqrt squeeze stack sub sum_reduce tan tanh "
    "tile transpose unsqueeze unstack update variable".split())


def nnef_module():
    """The `nnef` package, or a skip (a failure under CI=1: the oracle must be there)."""
    try:
        import nnef
    except ImportError:  # pragma: no cover - dev extra installs it
        if os.environ.get("CI"):
            pytest.fail("the nnef package (the oracle) is not installed")
        pytest.skip("nnef not installed")
    return nnef


def write_graph(folder: Path, text: str, weights: Mapping[str, np.ndarray] = ()) -> Path:
    """graph.nnef with `text` (the version line is added) and one .dat per label."""
    nnef = nnef_module()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text("version 1.0;\n\n" + text, encoding="utf-8")
    for label, array in dict(weights).items():
        path = folder / f"{label}.dat"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            nnef.write_tensor(fh, np.asarray(array))
    return folder


def reference(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of the nnef reference executor, in graph output order."""
    nnef = nnef_module()
    lowered = sorted(nnef.StandardOperations - RUNTIME_OPS)
    parsed = nnef.load_graph(str(folder), load_variables=False)
    lowered += sorted({op.name for op in parsed.operations} - nnef.StandardOperations)  # custom fragments
    with nnef.Session(str(folder), lowered=lowered) as session:
        return [np.asarray(o) for o in session(*inputs)]
