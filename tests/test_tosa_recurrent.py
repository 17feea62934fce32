"""Static-length nn.lstm legalized to a TOSA WHILE_LOOP (skriptnd.tosa.legalize.recurrent), in the exports
and the iree backend.

Oracles: nn.lstm's own @lower formulas (the ``lower`` backend), IREE (iree-compile of the exported MLIR,
run by iree.runtime), the TOSA reference model (tosa-tools: the flatbuffer tosa-opt serializes from the
exported MLIR, ``tosa.while_loop`` regions included) and the numpy TOSA interpreter running the exported
program. The loop form needs at least two iterations of k steps, so the models here use k = 4 with
sequences of 9 to 13 steps (a remainder runs unrolled after the loop).
IREE and tosa-tools are optional oracles: the tests skip without them locally and fail in CI (CI=1).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.tosa.legalize.core import run_subgraph
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
sys.path.insert(0, str(ROOT / "tests"))

from test_backends_compiled import require  # noqa: E402
from tosa_oracle import require_oracle, run_flatbuffer  # noqa: E402


@functools.cache
def _bare_model() -> Path:
    """models/lstm's source without its weight files (random weights of any shape)."""
    folder = Path(tempfile.mkdtemp(prefix="sknd_lstm_")) / "lstm"
    folder.mkdir()
    shutil.copy(MODELS / "lstm" / "main.sknd", folder / "main.sknd")
    return folder


def _compose(**attribs: int) -> skriptnd.compose.ir.Graph:
    return skriptnd.load(_bare_model()).compose(attribs=attribs, random_weights=True, seed=3)


def _x(graph: skriptnd.compose.ir.Graph, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal([int(d) for d in graph.inputs[0].shape]).astype(np.float32)


@pytest.fixture
def k4(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loops of 4 steps, so that short sequences loop (the default k unrolls fewer than 2k steps)."""
    monkeypatch.setattr(RecurrentLegalizer, "STEPS", 4)


def _mlir(graph: skriptnd.compose.ir.Graph) -> str:
    from skriptnd.tosa.mlir.export import to_mlir

    mlir = to_mlir(graph, inline_constants=False)
    assert mlir.count('"tosa.while_loop"') == 2 and mlir.count('"tosa.gather"') == 2  # one loop per layer
    return mlir


def test_loop_subgraphs_equal_lower_for_two_stacked_layers(k4: None) -> None:
    """Layer 1's loop subgraph (run on the numpy TOSA operators, WHILE_LOOP through skriptnd.tosa.ops.control_flow)
    feeds layer 2's; their Y, h, c equal the lower reference's. 11 steps: two iterations of 4, 3 unrolled."""
    graph = _compose(seq=11, batch=3, input=5, hidden=6)
    layer1, layer2 = (op for op in graph.operations if op.op == "nn.lstm")
    legalizer = RecurrentLegalizer()
    sg1, sg2 = legalizer(layer1), legalizer(layer2)
    assert sg1 is not None and sg2 is not None
    assert [o.name for o in sg1.ops].count("WHILE_LOOP") == 1
    assert [o.name for o in sg1.ops].count("MATMUL") == 1 + 3  # the input projection, then the 3 tail steps
    body = next(o for o in sg1.ops if o.name == "WHILE_LOOP").attrs["body_graph"]
    assert [n.op for n in body.body].count("MATMUL") == 4 and {"GATHER", "SCATTER"} <= {n.op for n in body.body}
    assert legalizer.shape(layer1.outputs[0]) == (11, 3, 6)
    # X·Wᵀ+B and Y one iteration per row: [1, rounds, k·b·4n] and [1, rounds, k·b·n]
    assert body.inputs[3].shape == (1, 2, 4 * 3 * 4 * 6) and body.inputs[5].shape == (1, 2, 4 * 3 * 6)
    x = _x(graph)
    w = {t.name: graph.variable_source(t) for t in graph.variables}
    y1, h1, c1 = run_subgraph(sg1, [x, w["layer1_W"], w["layer1_R"], w["layer1_B"]])
    y2, h2, c2 = run_subgraph(sg2, [y1, w["layer2_W"], w["layer2_R"], w["layer2_B"]])
    expected = skriptnd.run(graph, {"X": x}, backend="lower")
    for got, want in ((y2, expected["Y"]), (np.stack([h1, h2]), expected["hN"]), (np.stack([c1, c2]), expected["cN"])):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.integers(1, 12), batch=st.integers(1, 3), width=st.integers(1, 5), hidden=st.integers(1, 5),
       k=st.integers(1, 5))
def test_loop_legalization_equals_lower(seq: int, batch: int, width: int, hidden: int, k: int) -> None:
    """Any small shape and loop length k (a loop when seq >= 2k, else unrolled; a remainder after the loop):
    the two legalized layers compute what nn.lstm's @lower formulas do."""
    graph = _compose(seq=seq, batch=batch, input=width, hidden=hidden)
    legalizer = RecurrentLegalizer(k)
    layer1, layer2 = (op for op in graph.operations if op.op == "nn.lstm")
    sg1, sg2 = legalizer(layer1), legalizer(layer2)
    assert sg1 is not None and sg2 is not None
    assert any(o.name == "WHILE_LOOP" for o in sg1.ops) == (seq >= 2 * k)
    x = _x(graph, seq)
    w = {t.name: graph.variable_source(t) for t in graph.variables}
    y1, h1, c1 = run_subgraph(sg1, [x, w["layer1_W"], w["layer1_R"], w["layer1_B"]])
    y2, _, _ = run_subgraph(sg2, [y1, w["layer2_W"], w["layer2_R"], w["layer2_B"]])
    expected = skriptnd.run(graph, {"X": x}, backend="lower")
    np.testing.assert_allclose(y2, expected["Y"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(h1, expected["hN"][0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(c1, expected["cN"][0], rtol=1e-4, atol=1e-6)


def test_exported_program_runs_on_the_numpy_tosa_interpreter(k4: None) -> None:
    """The program `sknd export` writes (graph_program: constants folded, Rᵀ moved into the loop body as a
    constant), run by our TOSA interpreter, equals lower."""
    from skriptnd.tosa.program.build import graph_program

    graph = _compose(seq=13, batch=2)
    program = graph_program(graph, {t.name: graph.variable_source(t) for t in graph.variables})
    assert program is not None
    loops = [o for o in program.ops if o.name == "WHILE_LOOP"]
    assert len(loops) == 2 and all(len(o.inputs) == 5 for o in loops)  # (t, h, c, X·Wᵀ+B, Y): Rᵀ is in the body
    assert all(any(a.shape[-2:] == (32, 128) for a in o.attrs["body_graph"].constants.values()) for o in loops)
    x = _x(graph)
    expected = skriptnd.run(graph, {"X": x}, backend="lower")
    for got, name in zip(program([x]), ("Y", "hN", "cN"), strict=True):
        np.testing.assert_allclose(got, expected[name], rtol=1e-4, atol=1e-6)


def test_exported_mlir_compiles_and_runs_in_iree(k4: None, tmp_path: Path) -> None:
    require("iree.compiler", "iree.runtime")
    import iree.runtime as rt
    from iree.compiler.tools.binaries import find_tool

    from skriptnd.backends.via_iree import BASE_FLAGS

    graph = _compose(seq=10, batch=2)
    (tmp_path / "lstm.mlir").write_text(_mlir(graph), encoding="utf-8")
    done = subprocess.run([str(find_tool("iree-compile")), *BASE_FLAGS, "--iree-llvmcpu-target-cpu=generic",
                           str(tmp_path / "lstm.mlir"), "-o", str(tmp_path / "lstm.vmfb")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    module = rt.load_vm_flatbuffer_file(str(tmp_path / "lstm.vmfb"), driver="local-sync")
    x = _x(graph)
    got = [np.asarray(r) for r in module.main(x)]
    expected = skriptnd.run(graph, {"X": x}, backend="lower")
    for value, name in zip(got, ("Y", "hN", "cN"), strict=True):
        np.testing.assert_allclose(value, expected[name], rtol=1e-4, atol=1e-6)


def test_flatbuffer_runs_in_the_tosa_reference_model(k4: None, tmp_path: Path) -> None:
    """tosa-opt validates and serializes the WHILE_LOOP (its regions as flatbuffer regions) and the reference
    model runs it: Y equals lower."""
    require_oracle()
    from skriptnd.tosa.mlir.export import to_flatbuffer

    graph = _compose(seq=9, batch=2)
    x = _x(graph)
    y = run_flatbuffer(to_flatbuffer(_mlir(graph)), [x], tmp_path, timeout=300)
    np.testing.assert_allclose(y, skriptnd.run(graph, {"X": x}, backend="lower")["Y"], rtol=1e-4, atol=1e-6)


def test_operation_by_operation_mlir_writes_the_loop_too(k4: None, tmp_path: Path) -> None:
    """The exporters' fallback for graphs graph_program does not take writes each legalized subgraph as it
    is, WHILE_LOOP included: tosa-opt validates it and the reference model's Y equals lower."""
    require_oracle()
    from skriptnd.tosa.mlir.export import _to_mlir_by_operation, to_flatbuffer

    graph = _compose(seq=9, batch=2)
    mlir = _to_mlir_by_operation(graph, {t.name: graph.variable_source(t) for t in graph.variables}, False)
    assert mlir.count('"tosa.while_loop"') == 2
    x = _x(graph)
    y = run_flatbuffer(to_flatbuffer(mlir), [x], tmp_path, timeout=300)
    np.testing.assert_allclose(y, skriptnd.run(graph, {"X": x}, backend="lower")["Y"], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("budget", [0, 20])
def test_iree_backend_compiles_the_graph_as_one_module(k4: None, budget: int, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop in each layer (no unroll budget), or unrolled (a budget of 20 steps for the two layers of 10):
    the whole graph is one IREE module, compiled with data tiling, and matches lower."""
    require("iree.compiler", "iree.runtime")
    from skriptnd import backends
    from skriptnd.backends import Options, via_iree

    monkeypatch.setattr(via_iree, "UNROLL_BUDGET", budget)

    graph = _compose(seq=10, batch=2)
    runner = backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path), threads=1))
    assert not runner.split and len(runner.modules) == 1  # type: ignore[attr-defined]
    assert runner.modules[0].entry.compiled  # type: ignore[attr-defined]
    from skriptnd.backends.iree_defaults import default_flags

    assert set(default_flags("host")[0]) <= set(runner.modules[0].flags)  # type: ignore[attr-defined]
    program = runner.modules[0].source.program  # type: ignore[attr-defined]
    assert sum(o.name == "WHILE_LOOP" for o in program.ops) == (2 if budget == 0 else 0)
    x = _x(graph)
    got, expected = runner.run({"X": x}), skriptnd.run(graph, {"X": x}, backend="lower")
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-6)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}, timeout=300)


def test_sknd_export_writes_the_loop(tmp_path: Path) -> None:
    out = tmp_path / "lstm.mlir"
    done = _cli("export", "models/lstm", "--random-weights", "-a", "seq=70", "--tosa-mlir", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert text.count('"tosa.while_loop"') == 2 and '"tosa.yield"' in text and "tensor<70x1x32xf32>" in text


def test_dynamic_length_lstm_is_a_located_export_diagnostic() -> None:
    graph = skriptnd.load(MODELS / "lstm").compose("LSTMSteps", random_weights=True)
    from skriptnd.tosa.mlir.export import to_mlir

    with pytest.raises(DiagnosticError) as err:
        to_mlir(graph)
    lstm = [d for d in err.value.diagnostics if "nn.lstm" in d.message]
    assert len(lstm) == 2 and all(d.code == "E0750" and "'steps'" in d.message and "without 'steps'" in d.message
                                  for d in lstm)
    source = (MODELS / "lstm" / "main.sknd").read_text(encoding="utf-8").splitlines()
    assert all("nn.lstm(" in source[d.span.line - 1] and "steps)" in source[d.span.line - 1] for d in lstm)


def test_spirv_unrolls_and_refuses_a_loop_with_a_located_diagnostic(k4: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """SPIR-V graphs have no regions: a sequence up to MAX_UNROLLED steps is unrolled (the module runs), a longer
    one is E0772 at the nn.lstm call (MAX_UNROLLED lowered to 8 here: 9 steps loop)."""
    from skriptnd.tosa.spirv import export

    graph = _compose(seq=9, batch=2)
    assert export(graph).to_bytes()[:4] == b"\x03\x02\x23\x07"  # the SPIR-V magic number, little-endian
    monkeypatch.setattr(RecurrentLegalizer, "MAX_UNROLLED", 8)
    with pytest.raises(DiagnosticError) as err:
        export(graph)
    (d,) = err.value.diagnostics
    assert d.code == "E0772" and "--tosa-mlir" in d.message and d.span.line == 35
