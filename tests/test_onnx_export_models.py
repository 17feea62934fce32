"""ONNX export of the shipped models (skriptnd.interop.onnx_export, `sknd export --onnx`).

Each model of ``models/`` is composed with its weights (the zoo's from its ``make_weights.py``, written
into a temporary copy of the folder; alexnet has none and gets seeded random weights), exported to
ONNX (which runs ``onnx.checker.check_model(full_check=True)``), and run in onnxruntime; the outputs
must match ``skriptnd.run`` (rtol 1e-4 relative to the largest magnitude; integer outputs exactly).
The CLI writes the same file atomically; a graph with operations ONNX cannot express is one located
diagnostic per operation, exit 1, and nothing is written.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import skriptnd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_oracle import assert_close, require_ort, run_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def sknd(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def _with_zoo_weights(name: str, folder: Path) -> Path:
    """The model's .sknd files and the weights its make_weights.py writes, in ``folder``."""
    for source in (MODELS / name).rglob("*.sknd"):
        target = folder / source.relative_to(MODELS / name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    spec = importlib.util.spec_from_file_location(f"onnx_zoo_{name}", MODELS / name / "make_weights.py")
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    make.save(make.weights(), folder)
    return folder


def _frozen(graph: Any) -> dict[str, np.ndarray]:
    """The graph's variables, drawn once (random weights are drawn anew on each access otherwise)."""
    values = {t.name: np.asarray(graph.variable_source(t)) for t in graph.variables}
    graph.variable_source = lambda t: values[t.name]
    return values


def _inputs(graph: Any, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.standard_normal([int(d) for d in t.shape]).astype(np.float32) for t in graph.inputs}


def _check(graph: Any, feeds: dict[str, np.ndarray], **kwargs: Any) -> Any:
    from skriptnd.interop.onnx_export import to_onnx

    model = to_onnx(graph, variables=_frozen(graph), **kwargs)
    got = run_onnx(model, feeds)
    expected = skriptnd.run(graph, feeds)
    for i in range(len(graph.outputs)):
        name = graph.output_name(i)
        assert_close(got[name], expected[name])
    return model


@pytest.fixture(scope="module")
def ort() -> Any:
    return require_ort()


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "transformer", "yolo_head"])
def test_zoo_model_matches_onnxruntime(name: str, tmp_path: Path, ort: Any) -> None:
    graph = skriptnd.load(_with_zoo_weights(name, tmp_path)).compose()
    model = _check(graph, _inputs(graph))
    assert len(model.graph.initializer) >= len(graph.variables)


def test_digits_samples_match_onnxruntime(ort: Any) -> None:
    graph = skriptnd.load(MODELS / "digits").compose(attribs={"batch": 2})
    x = np.stack([np.load(MODELS / "digits" / "samples" / f"{i}.npy").astype(np.float32).reshape(1, 8, 8)
                  for i in (3, 7)])
    model = _check(graph, {"image": x})
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "MaxPool", "Gemm", "Softmax", "Relu"} <= ops
    probabilities = run_onnx(model, {"image": x})["probabilities"]
    assert list(probabilities.argmax(axis=1)) == [3, 7]


def test_alexnet_random_weights(ort: Any) -> None:
    graph = skriptnd.load(MODELS / "alexnet").compose(random_weights=True, seed=3)
    _check(graph, _inputs(graph))


def test_lstm_maps_to_the_onnx_lstm_operator(tmp_path: Path, ort: Any) -> None:
    graph = skriptnd.load(_with_zoo_weights("lstm", tmp_path)).compose(graph="LSTM")
    model = _check(graph, _inputs(graph))
    assert [n.op_type for n in model.graph.node].count("LSTM") == 2


def test_lstm_with_step_counts(tmp_path: Path, ort: Any) -> None:
    graph = skriptnd.load(_with_zoo_weights("lstm", tmp_path)).compose(graph="LSTMSteps", attribs={"batch": 2})
    feeds = {"X": _inputs(graph)["X"], "steps": np.array([5, 5], np.int64)}
    model = _check(graph, feeds)
    assert run_onnx(model, feeds)["Y"].shape == (5, 2, 32)


@pytest.mark.parametrize("opset", [17, 18, 20, 21])
def test_opsets(opset: int, ort: Any) -> None:
    graph = skriptnd.load(MODELS / "transformer").compose()
    model = _check(graph, _inputs(graph), opset=opset)
    assert model.opset_import[0].version == opset
    assert ("Gelu" in {n.op_type for n in model.graph.node}) == (opset >= 20)


# -- the command line --------------------------------------------------------------------------


def test_cli_writes_a_checked_model(tmp_path: Path, ort: Any) -> None:
    import onnx

    out = tmp_path / "digits.onnx"
    proc = sknd("export", str(MODELS / "digits"), "--onnx", str(out), "--attrib", "batch=3")
    assert proc.returncode == 0, proc.stderr
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [3, 1, 8, 8]
    graph = skriptnd.load(MODELS / "digits").compose(attribs={"batch": 3})
    feeds = _inputs(graph, seed=5)
    assert_close(run_onnx(model, feeds)["probabilities"], skriptnd.run(graph, feeds)["probabilities"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.onnx"]  # no temporary left behind


def test_cli_opset_option(tmp_path: Path) -> None:
    out = tmp_path / "t.onnx"
    assert sknd("export", str(MODELS / "transformer"), "--onnx", str(out), "--onnx-opset", "20").returncode == 0
    import onnx

    assert onnx.load(str(out)).opset_import[0].version == 20
    proc = sknd("export", str(MODELS / "digits"), "--onnx", str(tmp_path / "x.onnx"), "--onnx-opset", "9")
    assert proc.returncode == 2 and not (tmp_path / "x.onnx").exists()


def test_unsupported_operations_are_all_located_and_nothing_is_written(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "main.sknd").write_text(UNSUPPORTED_OPS)
    out = tmp_path / "out.onnx"
    proc = sknd("export", str(model), "--onnx", str(out), "--color", "never")
    assert proc.returncode == 1
    assert proc.stderr.count("error[E0840]") == 2, proc.stderr
    assert "main.sknd:8:" in proc.stderr and "main.sknd:9:" in proc.stderr
    assert "image.avg_roi_pool" in proc.stderr and "^" in proc.stderr  # the source line with a caret
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # nothing written, no temporary left


UNSUPPORTED_OPS = """\
import nn;
import image;
graph G {
    @input { x: real[1,2,8,8]; r: real[3,4]; i: int[3]; }
    @output { y: real[3,2,2,2]; z: real[3,2,1,1]; }
    @compose {
        a = nn.relu(x);
        y = image.avg_roi_pool{output_size=[2,2]}(a, r, i);
        z = image.avg_roi_pool{output_size=[1,1]}(x, r, i);
    }
}
"""


def test_stateful_graph_is_refused(tmp_path: Path) -> None:
    from skriptnd.diagnostics import DiagnosticError
    from skriptnd.interop.onnx_export import to_onnx

    model = tmp_path / "m"
    model.mkdir()
    (model / "main.sknd").write_text(
        "import math;\ngraph G {\n    @input { x: real[2]; }\n    @output { y: real[2]; }\n"
        "    @variable { acc: real[2]; }\n    @compose { y = math.add(acc, x); }\n    @update { acc = y; }\n}\n")
    graph = skriptnd.load(model).compose(random_weights=True)
    with pytest.raises(DiagnosticError) as err:
        to_onnx(graph)
    assert [d.code for d in err.value.diagnostics] == ["E0842"]
    assert err.value.diagnostics[0].span.line == 5


def test_digits_int8_is_a_qdq_graph_matching_the_integer_graph(ort: Any) -> None:
    """@quantize -> QuantizeLinear/DequantizeLinear; onnxruntime's answer equals the integer TOSA graph
    that `skriptnd.run` executes (up to float rounding of the softmax) on 64 random images."""
    graph = skriptnd.load(MODELS / "digits_int8").compose(attribs={"batch": 64})
    from skriptnd.interop.onnx_export import to_onnx

    model = to_onnx(graph)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("DequantizeLinear") >= 9 and ops.count("QuantizeLinear") >= 4  # 6 weights + 4 activations
    int8 = {i.name for i in model.graph.initializer if i.data_type == 3}
    assert len(int8) >= 3  # the three filters are stored as int8
    x = np.random.default_rng(0).random([64, 1, 8, 8]).astype(np.float32)
    got = run_onnx(model, {"image": x})["probabilities"]
    expected = np.asarray(skriptnd.run(graph, {"image": x})["probabilities"])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert (got.argmax(1) == expected.argmax(1)).all()


def test_api_refusal_lists_every_unsupported_operation(tmp_path: Path) -> None:
    from skriptnd.diagnostics import DiagnosticError
    from skriptnd.interop.onnx_export import check_exportable, export_onnx

    model = tmp_path / "m"
    model.mkdir()
    (model / "main.sknd").write_text(UNSUPPORTED_OPS)
    graph = skriptnd.load(model).compose()
    diags = check_exportable(graph)
    assert [(d.code, d.span.line) for d in diags] == [("E0840", 8), ("E0840", 9)]
    assert "image.avg_roi_pool" in diags[0].message
    with pytest.raises(DiagnosticError):
        export_onnx(graph, tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


def test_external_data_beyond_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ort: Any) -> None:
    """Above the protobuf limit (lowered here to 1 kB) the model is checked from a file and saved as
    OUT.onnx plus OUT.onnx.data; onnx and onnxruntime load the pair."""
    import onnx

    import skriptnd.interop.onnx_export as onnx_export

    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_THRESHOLD", 1024)
    graph = skriptnd.load(MODELS / "digits").compose()
    out = onnx_export.export_onnx(graph, tmp_path / "digits.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.onnx", "digits.onnx.data"]
    model = onnx.load(str(out))  # reads the external data
    onnx.checker.check_model(str(out), full_check=True)
    assert any(i.data_location == onnx.TensorProto.EXTERNAL
               for i in onnx.load(str(out), load_external_data=False).graph.initializer)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    feeds = _inputs(graph)
    assert_close(session.run(None, feeds)[0], skriptnd.run(graph, feeds)["probabilities"])
    assert_close(run_onnx(model, feeds)["probabilities"], skriptnd.run(graph, feeds)["probabilities"])


def _control_flow_model(tmp_path: Path) -> skriptnd.Model:
    from test_control_flow import GRAPHS, LIBRARY  # the control-flow suite's spec examples

    folder = tmp_path / "cf"
    folder.mkdir()
    (folder / "main.sknd").write_text(LIBRARY + GRAPHS)
    return skriptnd.load(folder)


CONTROL_FEEDS = {
    "Loops": lambda rng, i: {"a": rng.standard_normal(4), "b": rng.standard_normal(4), "c": rng.standard_normal(4),
                             "z": rng.standard_normal(4), "m": rng.standard_normal([3, 3]) * 0.7,
                             "p": np.asarray(i, np.int64), "k": np.asarray(2 * i + 1, np.int64)},
    "Conditions": lambda rng, i: {"x0": np.asarray(0.1 + 2 * i, np.float32), "bound": np.asarray(5.0),
                                  "n": np.asarray(i, np.int64)},
    "Branches": lambda rng, i: {"a": rng.standard_normal(4) * (i - 1), "b": rng.standard_normal(4),
                                "c": np.asarray(i % 2 == 0)},
}


@pytest.mark.parametrize("name", sorted(CONTROL_FEEDS))
def test_control_flow_as_onnx_if_and_loop(name: str, tmp_path: Path, ort: Any) -> None:
    """Dynamic ifs (with elif chains and block branches) become If, loops (counts, bounds, while/do-while
    conditions, carried values, scanned packs, the iteration index, nested loops) become Loop."""
    from skriptnd.interop.onnx_export import to_onnx

    graph = _control_flow_model(tmp_path).compose(graph=name)
    model = to_onnx(graph)
    ops = {n.op_type for n in model.graph.node}
    assert ops & {"If", "Loop"}
    rng = np.random.default_rng(1)
    for i in range(4):  # both branches, zero and several iterations
        feeds = {k: np.asarray(v, np.float32) if np.asarray(v).dtype == np.float64 else np.asarray(v)
                 for k, v in CONTROL_FEEDS[name](rng, i).items()}
        got, expected = run_onnx(model, feeds), skriptnd.run(graph, feeds)
        for out in expected:
            assert_close(got[out], expected[out])


def test_loops_with_scan_outputs_of_dynamic_length_are_located(tmp_path: Path) -> None:
    """A loop that may stop early cannot produce a pack: one E0843 per such loop, at the loop, and the
    operations reading its results are not reported again."""
    from skriptnd.diagnostics import DiagnosticError
    from skriptnd.interop.onnx_export import to_onnx

    graph = _control_flow_model(tmp_path).compose(graph="Bodies")
    with pytest.raises(DiagnosticError) as err:
        to_onnx(graph)
    diags = err.value.diagnostics
    assert [d.code for d in diags] == ["E0843", "E0843"]
    assert all("dynamic length" in d.message for d in diags)
    assert len({d.span.line for d in diags}) == 2


def test_the_coverage_table_in_the_docs_is_current() -> None:
    from skriptnd.interop.onnx_export.coverage import BEGIN, END, table

    text = (ROOT / "docs" / "onnx-export.md").read_text()
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    assert current == table(), "regenerate with: python -m skriptnd.interop.onnx_export.coverage"


def test_an_unnamed_dynamic_input_extent_is_a_dim_param(tmp_path: Path) -> None:
    """`x: real[~|8, 3]` (formerly E0841): the extent is a dim_param of the input, named after it, and the
    model runs at any size (issue 25, item 5; tests/test_dynamic_export.py has the named extents)."""
    from skriptnd.interop.onnx_export import to_onnx

    require_ort()
    model = tmp_path / "m"
    model.mkdir()
    (model / "main.sknd").write_text(
        "import nn;\ngraph G {\n    @input { x: real[~|8, 3]; }\n    @output { y: real[~|8, 3]; }\n"
        "    @compose { y = nn.relu(x); }\n}\n")
    exported = to_onnx(skriptnd.load(model).compose())
    assert [d.dim_param or d.dim_value for d in exported.graph.input[0].type.tensor_type.shape.dim] == ["x_0", 3]
    for n in (2, 7):
        x = np.linspace(-1, 1, 3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_array_equal(run_onnx(exported, {"x": x})["y"], np.maximum(x, 0))
