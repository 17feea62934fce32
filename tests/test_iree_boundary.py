"""What crosses a compiled IREE module's boundary (skriptnd.tosa.mlir.program, skriptnd.backends.via_iree):
bool inputs/outputs as i8 (IREE's data tiling cannot load an i1 argument: every Hugging Face attention mask
failed to compile), SkriptND int (int64) inputs as int32 with a range check (token ids were left to numpy).

Each graph runs under --via iree and is compared with --via numpy (itself checked against the operators'
@lower formulas elsewhere) and with a numpy formula written here. Skips without IREE (fails in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd import backends
from skriptnd.backends import Options
from skriptnd.diagnostics import DiagnosticError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_backends_compiled import require  # noqa: E402

MASKED_ATTENTION = """import math;
import layout;
import linalg;
import nn;
graph G {
 @input { x: real[1, 2, 8, 16]; mask: bool[1, 8]; }
 @output { z: real[1, 2, 8, 16]; keep: bool[1, 1, 1, 8]; }
 @constant { zero: real[1] = [0.0]; ninf: real[1] = [-inf]; }
 @compose {
   s = linalg.matmul{transB=true}(x, x);
   keep = layout.reshape{shape=[1, 1, 1, 8]}(mask);
   bias = math.select(keep, zero, ninf);
   t = math.add(s, bias);
   p = nn.softmax{axes=[3]}(t);
   z = linalg.matmul(p, x);
 }
}
"""

EMBEDDING = """import layout;
graph G {
 @input { ids: int[1, 8]; }
 @output { e: real[1, 8, 16]; }
 @variable { table: real[10, 16]; }
 @compose { e = layout.gather{axis=0}(table, ids); }
}
"""

_CAUSAL = ", ".join("true" if j <= i else "false" for i in range(8) for j in range(8))
CAUSAL_ATTENTION = MASKED_ATTENTION.replace(
    "@constant { ", f"@constant {{ causal: bool[1, 1, 8, 8] = [{_CAUSAL}]; ").replace(
    "keep = layout.reshape{shape=[1, 1, 1, 8]}(mask);",
    "keep = layout.reshape{shape=[1, 1, 1, 8]}(mask); both = math.and(causal, keep);").replace(
    "bias = math.select(keep, zero, ninf);", "bias = math.select(both, zero, ninf);")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("iree-boundary-cache"))


def _graph(tmp_path: Path, source: str) -> skriptnd.compose.ir.Graph:
    (tmp_path / "main.sknd").write_text(source)
    return skriptnd.load(tmp_path / "main.sknd").compose(random_weights=True, seed=3)


def test_a_bool_attention_mask_compiles_and_matches(tmp_path: Path, cache: str) -> None:
    require("iree.compiler", "iree.runtime")
    graph = _graph(tmp_path, MASKED_ATTENTION)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 8, 16)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1, 0, 0, 1]], bool)
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    assert not runner.split, runner.plan  # type: ignore[attr-defined]  # one module, nothing left to numpy
    got = runner.run({"x": x, "mask": mask})
    expected = skriptnd.run(graph, {"x": x, "mask": mask})
    scores = x @ x.transpose(0, 1, 3, 2) + np.where(mask, 0.0, -np.inf)[:, None, None, :]
    p = np.exp(scores - scores.max(-1, keepdims=True))
    by_hand = (p / p.sum(-1, keepdims=True)) @ x
    np.testing.assert_allclose(got["z"], by_hand, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["z"], expected["z"], rtol=1e-4, atol=1e-5)
    assert got["keep"].dtype == np.bool_
    np.testing.assert_array_equal(got["keep"], mask.reshape(1, 1, 1, 8))


def test_a_bool_constant_causal_mask_compiles_and_matches(tmp_path: Path, cache: str) -> None:
    """GPT-2's causal mask: a bool constant (not a splat) inside the module is i8 cast to i1, as a bool
    argument is (an i1 constant failed under data tiling: 'iree_codegen.load_from_buffer')."""
    require("iree.compiler", "iree.runtime")
    graph = _graph(tmp_path, CAUSAL_ATTENTION)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 8, 16)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 1, 1, 0, 1]], bool)
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    assert not runner.split, runner.plan  # type: ignore[attr-defined]
    got = runner.run({"x": x, "mask": mask})
    keep = np.tril(np.ones((8, 8), bool)) & mask[:, None, None, :]
    scores = x @ x.transpose(0, 1, 3, 2) + np.where(keep, 0.0, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got["z"], (p / p.sum(-1, keepdims=True)) @ x, rtol=1e-4, atol=1e-5)


def test_int64_token_ids_are_a_compiled_input(tmp_path: Path, cache: str) -> None:
    require("iree.compiler", "iree.runtime")
    graph = _graph(tmp_path, EMBEDDING)
    ids = np.array([[0, 9, 3, 3, 1, 7, 2, 5]], np.int64)
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    assert not runner.split and runner.modules, runner.plan  # type: ignore[attr-defined]
    got = runner.run({"ids": ids})["e"]
    table = graph.variable_source(graph.variables[0])
    np.testing.assert_array_equal(got, table[ids])
    np.testing.assert_array_equal(got, skriptnd.run(graph, {"ids": ids})["e"])


def test_int64_values_outside_int32_are_a_diagnostic(tmp_path: Path, cache: str) -> None:
    require("iree.compiler", "iree.runtime")
    graph = _graph(tmp_path, EMBEDDING)
    ids = np.array([[0, 2 ** 40, 3, 3, 1, 7, 2, 5]], np.int64)
    with pytest.raises(DiagnosticError) as err:
        skriptnd.run(graph, {"ids": ids}, backend="iree", cache_dir=cache)
    assert err.value.diagnostics[0].code == "E0789"
    assert "int32" in err.value.diagnostics[0].message and "ids" in err.value.diagnostics[0].message
