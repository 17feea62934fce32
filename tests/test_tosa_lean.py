"""Lean TOSA (issue 30): a weight shared over a batch is never copied once per batch element.

TOSA MATMUL has no batch broadcast; the legalization folds the batch into the rows of the other
operand (``[B, M, K] -> [1, B*M, K]``) instead of tiling the shared operand. These tests check the
consequences a user sees: the exported MLIR is the size of the weights whatever the leading
dimension, and the numpy backend's peak memory does not grow by a weight-sized copy per batch element.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import skriptnd
import skriptnd.model
from skriptnd.tosa.mlir.export import to_mlir


def _shared_weight_graph(tmp: Path, s: int, transposed_left: bool = False):
    """``z = x @ w`` with ``x: real[s, 2, 64]`` and a shared ``w: real[64, 192]`` (or, with
    ``transposed_left``, ``z = w2 @ x`` with the shared operand on the left)."""
    body = ("@input { x: real[S, 64, 2]; } @output { z: real[S, 192, 2]; } @variable { w: real[192, 64]; }"
            " @compose { z = linalg.matmul(w, x); }") if transposed_left else (
           "@input { x: real[S, 2, 64]; } @output { z: real[S, 2, 192]; } @variable { w: real[64, 192]; }"
           " @compose { z = linalg.matmul(x, w); }")
    folder = tmp / f"{'left' if transposed_left else 'right'}{s}"
    folder.mkdir()
    (folder / "main.sknd").write_text(f"import linalg;\ngraph G {{\n {body.replace('S', str(s))}\n}}\n")
    return skriptnd.model.load(folder / "main.sknd").compose(random_weights=True)


@pytest.mark.parametrize("left", [False, True])
def test_mlir_size_does_not_grow_with_the_batch(tmp_path, left):
    small = len(to_mlir(_shared_weight_graph(tmp_path, 16, left)))
    large = len(to_mlir(_shared_weight_graph(tmp_path, 128, left)))
    weight_hex = 64 * 192 * 4 * 2  # the weight blob's hex text
    assert abs(large - small) <= 0.2 * small, (small, large)
    assert small < 2 * weight_hex, small  # about the weight, not 16 copies of it


@pytest.mark.parametrize("left", [False, True])
def test_numpy_peak_memory_does_not_hold_a_tiled_weight(tmp_path, left):
    s = 128
    graph = _shared_weight_graph(tmp_path, s, left)
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    w = graph.variable_source(graph.variables[0])
    tracemalloc.start()  # planning included: constant operators (a TILE of the weight) are folded then
    try:
        got = skriptnd.run(graph, {"x": x})["z"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    tiled = s * 64 * 192 * 4  # 6.3 MB: the weight copied once per batch element
    assert peak < tiled / 2, peak
    expected = np.matmul(w, x) if left else np.matmul(x, w)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
