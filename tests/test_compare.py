"""`sknd compare` (issue 26, item 3): backends compared operation by operation; the first operation that
diverges is named and located. The divergence is planted: a backend whose relu kernel is wrong by 1.5x."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import skriptnd
from skriptnd.backends import BACKENDS
from skriptnd.backends.base import Backend, Options, Runner
from skriptnd.backends.compare import compare_backends, probe_graph
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.kernel_maps import kernels_for
from skriptnd.cli.app import app
from skriptnd.compose.ir import Graph, Operation

ROOT = Path(__file__).resolve().parents[1]


class _WrongRelu(Backend):
    """The kernels backend with nn.relu off by a factor of 1.5 (the planted fault)."""

    def __init__(self) -> None:
        super().__init__("wrong-relu", "test only: nn.relu times 1.5")

    def prepare(self, graph: Graph, options: Options) -> Runner:
        kernels, optimize = kernels_for("kernels")
        table = dict(kernels)
        table["nn.relu"] = lambda op, args: [np.maximum(args[0], 0) * np.float32(1.5)]
        return ExecutorRunner(graph, table, False, ["wrong relu"])


@pytest.fixture
def wrong_relu() -> Iterator[str]:
    BACKENDS["wrong-relu"] = _WrongRelu()
    yield "wrong-relu"
    del BACKENDS["wrong-relu"]


def _digits() -> tuple[Graph, dict[str, Any]]:
    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    return graph, {"image": np.load(ROOT / "models" / "digits" / "samples" / "3.npy")}


def test_two_correct_backends_agree_on_every_operation() -> None:
    graph, inputs = _digits()
    (cmp,) = compare_backends(graph, inputs, ["numpy", "lower"])
    assert cmp.first_divergence is None
    assert [r.label for r in cmp.rows] == [op.label for op in graph.operations]
    assert all(r.max_rel < 1e-5 for r in cmp.rows)


def test_the_first_divergence_is_the_faulty_operation(wrong_relu: str) -> None:
    graph, inputs = _digits()
    relus = [k for k, op in enumerate(graph.operations) if op.op == "nn.relu"]
    (cmp,) = compare_backends(graph, inputs, ["numpy", wrong_relu])
    first = cmp.first_divergence
    assert first is not None and first.op == "nn.relu" and first.label == graph.operations[relus[0]].label
    assert [r.agree for r in cmp.rows[:relus[0]]] == [True] * relus[0]  # everything before it agrees
    assert first.file is not None and first.file.endswith("main.sknd") and first.line == graph.operations[relus[0]].span.line
    assert first.max_rel == pytest.approx(0.5, rel=1e-3)  # 1.5x: off by half of the largest value


def test_the_probe_leaves_the_graph_alone() -> None:
    graph, _ = _digits()
    outputs = list(graph.outputs)
    probe, probes = probe_graph(graph)
    assert graph.outputs == outputs and probe is not graph
    assert len(probes) == sum(len(op.outputs) for op in graph.operations)
    assert isinstance(graph.operations[0], Operation)


def test_the_command_exits_1_and_names_the_operation(wrong_relu: str) -> None:
    runner = CliRunner()
    image = str(ROOT / "models" / "digits" / "samples" / "3.npy")
    ok = runner.invoke(app, ["compare", "models/digits", "--input", f"image={image}", "--via", "numpy,lower"],
                       env={"NO_COLOR": "1", "COLUMNS": "150"})
    assert ok.exit_code == 0, ok.output
    assert "agrees with numpy on every operation" in ok.output
    bad = runner.invoke(app, ["compare", "models/digits", "--input", f"image={image}", "--via",
                              f"numpy,{wrong_relu}", "--format", "json"], env={"NO_COLOR": "1"})
    assert bad.exit_code == 1
    (data,) = json.loads(bad.output)
    assert data["agree"] is False and data["first_divergence"]["op"] == "nn.relu"
    usage = runner.invoke(app, ["compare", "models/digits", "--via", "numpy"])
    assert usage.exit_code == 2


def _two_conv_onnx(path: Path) -> Path:
    from onnx_models import require_onnx

    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="first_conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="second_conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_against_the_original_onnx_a_corrupted_convolution_is_named(tmp_path: Path) -> None:
    """The imported folder agrees with onnxruntime on the original node by node; with one convolution's
    weights corrupted in the folder, that convolution is the first divergence."""
    from skriptnd.backends.compare import compare_with_onnx
    from skriptnd.io.tensor_file import read_tensor, write_tensor

    original = _two_conv_onnx(tmp_path / "m.onnx")
    folder = skriptnd.import_model(original, tmp_path / "m")
    x = {"x": np.random.default_rng(5).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    good = compare_with_onnx(skriptnd.load(folder).compose(), x, str(original))
    assert good.first_divergence is None and [r.op for r in good.rows] == ["nn.conv", "nn.relu", "nn.conv"]
    (weights,) = [f for f in Path(folder).glob("*.dat") if f.name.endswith("w2.dat")]
    write_tensor(weights, read_tensor(weights) * 1.01)  # 1 %: far above float rounding
    bad = compare_with_onnx(skriptnd.load(folder).compose(), x, str(original))
    first = bad.first_divergence
    assert first is not None and first.op == "nn.conv" and first.label.startswith("second_conv")
    assert [r.agree for r in bad.rows[:2]] == [True, True]
    result = CliRunner().invoke(app, ["compare", str(folder), "--reference", str(original), "--random-inputs"],
                                env={"NO_COLOR": "1", "COLUMNS": "150"})
    assert result.exit_code == 1 and "first divergence" in result.output and "second_conv" in result.output


def test_numpy_against_a_miscompiling_iree_names_the_miscompiled_operation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30's LayerNorm -> MatMul graph with IREE made to compile EXP where numpy runs RECIPROCAL in the
    sqrt's operation (test_iree_loud's deterministic miscompile), the self-check off: compare names 'root'."""
    from test_iree_loud import LAYERNORM_MATMUL, _miscompile, require

    require("iree.compiler", "iree.runtime")
    (tmp_path / "main.sknd").write_text(LAYERNORM_MATMUL, encoding="utf-8")
    graph = skriptnd.load(tmp_path).compose(random_weights=True, seed=1)
    _miscompile(monkeypatch, "RECIPROCAL", 3, "EXP")
    x = {"x": np.random.default_rng(2).standard_normal((2, 10, 32)).astype(np.float32)}
    (cmp,) = compare_backends(graph, x, ["numpy", "iree"], Options(verify=False, cache_dir=str(tmp_path / "c")))
    first = cmp.first_divergence
    assert first is not None and first.label == "root" and first.op == "math.sqrt"
    assert [r.agree for r in cmp.rows[:3]] == [True, True, True]  # moments, sub, add
