"""NNAPI 1.0 conformance: every CTS vector file of shared/conformance/nnapi-1.0 goes through
``skriptnd.targets.nnapi.to_sknd`` (a model folder written by the interop writer), the product's loader and
composer, and the run ``sknd run`` does (integer TOSA for quantized graphs, fake quantization where that
lowering refuses, the TOSA backend for float graphs), and is compared as the CTS compares: float32
``|e - a| <= 1e-5 + 5 ulp·|e|``, quant8 within 1 LSB on the output's grid, int32 exactly. The expected
outputs are the CTS's own (Android's reference implementation), independent of this code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conformance_data import ROOT, nnapi_results, nnapi_vectors, require  # noqa: F401  (session fixtures)

from skriptnd.diagnostics import DiagnosticError
from skriptnd.targets.conformance.nnapi_run import VectorResult, run_vector
from skriptnd.targets.conformance.vectors import read_vector
from skriptnd.targets.nnapi import to_sknd

EXPECTED_FAILURES = {line.split()[0]: line.split(None, 1)[1] for line in
                     (ROOT / "tests" / "data" / "nnapi_expected_failures.txt").read_text().splitlines()
                     if line.strip() and not line.startswith("#")}


@pytest.fixture
def vectors(nnapi_vectors: dict[str, dict]) -> dict[str, dict]:  # noqa: F811
    return nnapi_vectors


@pytest.fixture
def results(nnapi_results: dict[str, VectorResult]) -> dict[str, VectorResult]:  # noqa: F811
    return nnapi_results


def test_every_vector_but_the_expected_failures_passes(results: dict[str, VectorResult]) -> None:
    by_op: dict[str, list[str]] = defaultdict(list)
    for r in results.values():
        for op in dict.fromkeys(r.ops):
            by_op[op].append(("PASS " if r.ok else "FAIL ") + r.name)
    print()
    for op in sorted(by_op):
        passed = sum(x.startswith("PASS") for x in by_op[op])
        print(f"{op:30s} {passed}/{len(by_op[op])}")
    for r in results.values():
        print(f"{'PASS' if r.ok else 'FAIL'} {r.name}: {r.path}; {r.detail}")
    passing = {n for n, r in results.items() if r.ok}
    assert len(results) >= 111
    assert passing == set(results) - set(EXPECTED_FAILURES)
    assert set(EXPECTED_FAILURES) <= set(results)


def test_quantized_vectors_run_on_integers_where_the_lowering_takes_them(results: dict[str, VectorResult]) -> None:
    """Quantized conv/depthwise/FC with constant weights, max pools, ReLU and layout operations run on
    integers throughout; ADD/MUL/average pool/softmax/logistic run as integer TOSA graphs with one fp32
    step whose result is quantized in the graph (not on the fake-quantization fallback)."""
    for name in ("conv_quant8", "conv_quant8_overflow", "depthwise_conv2d_quant8", "fully_connected_quant8",
                 "max_pool_quant8_1", "relu_quant8_2", "reshape_quant8", "space_to_depth_quant8_1",
                 "concat_quant8_2", "relu1_quant8_2"):  # relu1: math.clamp with constant bounds, one CLAMP
        assert results[name].path == "integer TOSA", (name, results[name].path)  # integers throughout
    for name in ("avg_pool_quant8_1", "add_quant8", "mul_broadcast_quant8", "softmax_quant8_2", "logistic_quant8_1",
                 "relu6_quant8_2"):  # integer graph with an fp32 step, quantized in the graph
        assert results[name].path.startswith("integer TOSA (fp32 inside for "), (name, results[name].path)


def test_lsh_projection_is_a_located_diagnostic(vectors: dict[str, dict]) -> None:
    folder = require("conformance/nnapi-1.0")
    model, loc = read_vector(folder / "lsh_projection_2.json")
    with pytest.raises(DiagnosticError) as err:
        to_sknd(model, Path("/nonexistent/never-written"), locator=loc)
    d = err.value.diagnostics[0]
    assert d.code == "E0902" and "LSH_PROJECTION" in d.message and "farmhash" in d.message
    assert d.message.startswith("operations[0].op:")
    line = (folder / "lsh_projection_2.json").read_text().splitlines()[d.span.line - 1]
    assert line[d.span.col - 1:].startswith('"op"')


def _floor_model() -> dict:
    return {"name": "floor_by_hand", "operands": [
        {"name": "x", "role": "input", "type": "TENSOR_FLOAT32", "dims": [1, 2, 2, 1]},
        {"name": "y", "role": "output", "type": "TENSOR_FLOAT32", "dims": [1, 2, 2, 1]}],
        "operations": [{"op": "FLOOR", "inputs": ["x"], "outputs": ["y"]}],
        "model_inputs": ["x"], "model_outputs": ["y"],
        "examples": [{"inputs": {"x": [-1.5, -0.0, 2.25, 7.999]}, "outputs": {"y": [-2.0, -0.0, 2.0, 7.0]}}]}


def test_floor_has_no_cts_vector_and_is_checked_by_hand() -> None:
    r = run_vector(_floor_model())
    assert r.ok, r.detail
    bad = _floor_model()
    bad["examples"][0]["outputs"]["y"] = [-1.0, 0.0, 2.0, 7.0]  # trunc, not floor: must fail
    assert not run_vector(bad).ok


def test_written_folder_runs_with_the_cli(vectors: dict[str, dict], tmp_path: Path) -> None:
    """`sknd check` accepts the folder and `sknd run` reproduces the CTS output (real-valued inputs)."""
    model = vectors["conv_quant8"]
    folder = to_sknd(model, tmp_path / "conv_quant8")
    text = (folder / "main.sknd").read_text()
    assert "@quantize" in text and "nn.conv" in text and "signed=false" in text
    env_run = [sys.executable, "-m", "skriptnd"]
    check = subprocess.run([*env_run, "check", str(folder)], capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 0, check.stderr
    op1 = next(o for o in model["operands"] if o["name"] == "op1")
    x = (np.float32(op1["scale"]) * (np.asarray(model["examples"][0]["inputs"]["op1"], np.float32)
                                     - op1["zero_point"])).reshape(op1["dims"])
    np.save(tmp_path / "op1.npy", x)
    run = subprocess.run([*env_run, "run", str(folder), "--input", f"op1={tmp_path / 'op1.npy'}", "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    op4 = next(o for o in model["operands"] if o["name"] == "op4")
    got = np.load(tmp_path / "out" / "op4.npy") / op4["scale"] + op4["zero_point"]
    assert np.abs(got.reshape(-1) - np.asarray(model["examples"][0]["outputs"]["op4"])).max() <= 1


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "vector.json"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("edit", "field", "code"), [
    (lambda m: m["operands"][1].pop("dims"), "operands[1]", "E0901"),
    (lambda m: m["operands"][0].__setitem__("type", "TENSOR_FLOAT16"), "operands[0].type", "E0901"),
    (lambda m: m["operands"][1].__setitem__("value", [1.0]), "operands[1].value", "E0901"),
    (lambda m: m["operations"][0].__setitem__("op", "TRANSPOSE"), "operations[0].op", "E0901"),
    (lambda m: m["operations"][0]["inputs"].__setitem__(1, "nope"), "operations[0].inputs[1]", "E0901"),
    (lambda m: m["operations"][0]["inputs"].pop(), "operations[0].inputs", "E0901"),
])
def test_malformed_vector_is_a_located_diagnostic_naming_the_field(edit, field: str, code: str,
                                                                   vectors: dict[str, dict], tmp_path: Path) -> None:
    model = json.loads(json.dumps(vectors["conv_float"] if "conv_float" in vectors else vectors["conv_float_2"]))
    edit(model)
    path = _write(tmp_path, json.dumps(model, indent=1))
    data, loc = read_vector(path)
    with pytest.raises(DiagnosticError) as err:
        to_sknd(data, tmp_path / "out", locator=loc)
    d = err.value.diagnostics[0]
    assert d.code == code and d.message.startswith(field), d.message
    assert d.span.file == str(path) and d.span.line > 1
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_invalid_json_is_located(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"name": "x",\n "operands": [1, 2,]\n}')
    with pytest.raises(DiagnosticError) as err:
        read_vector(path)
    d = err.value.diagnostics[0]
    assert d.code == "E0900" and d.span.line == 2 and "JSON" in d.message


def test_every_quantized_vector_passes_through_skriptnd_run_itself(vectors: dict[str, dict],
                                                                   results: dict[str, VectorResult],
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """issue 26: each quantized vector (weights as inputs, 16-bit, ... included) gives the same verdict when its
    graph runs through plain ``skriptnd.run`` (what ``sknd run`` runs) as through the conformance runner: the
    runner has no fallback of its own."""
    import skriptnd
    from skriptnd.targets.conformance import nnapi_run, runner

    assert runner.run is skriptnd.run  # the session's results ran through it; again with no runner around it:
    monkeypatch.setattr(nnapi_run, "run_graph", lambda graph, inputs: (skriptnd.run(graph, inputs), "skriptnd.run"))
    quantized = [n for n, r in results.items() if r.path and r.path != "fp32 TOSA"]
    assert len(quantized) >= 40 and any("fake quantization" in results[n].path for n in quantized)
    for name in quantized:
        again = run_vector(vectors[name], tmp_path)
        assert (again.ok, again.detail) == (results[name].ok, results[name].detail), name
