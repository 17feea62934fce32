"""The model zoo (models/resnet18, mobilenetv2, lstm, transformer, yolo_head) against onnxruntime.

Each model runs through skriptnd (`skriptnd.load(folder).compose(...)`, `skriptnd.run(graph, ...)`: stdlib
operators on compiled @lower plans, intrinsics on native kernels) with weights written by the
model's own `make_weights.py` into a temporary copy of the model folder, so the tensor files go
through the same path as a user's. The reference is an independent implementation of the same
network with the same weight arrays: an ONNX graph built here with `onnx.helper` from the
architecture (not from the composed skriptnd graph) and run by onnxruntime on the CPU with one
thread. Layout conversions happen on the ONNX side only: LSTM gates [i, f, g, o] -> ONNX [i, o, f, c]
with a zero recurrence bias, dense filters transposed for MatMul, and so on.

Also: `sknd check` reports no problems for every model, `sknd compose` prints the expected
input and output shapes, the variables of each graph are exactly those `make_weights.py` writes,
the committed weights of the small models are what `make_weights.py` writes, and each folder
stays small (generated weights of ResNet-18 and MobileNetV2 are ignored, not committed).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from onnx_models import Onnx, lstm_onnx, mobilenetv2_onnx, resnet18_onnx, transformer_onnx

import skriptnd
from skriptnd.io import read_tensor

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
ZOO = ["resnet18", "mobilenetv2", "lstm", "transformer", "yolo_head"]
#: Small models whose weights are committed; the others generate theirs (tens of MB).
COMMITTED = ["lstm", "transformer", "yolo_head"]

RTOL = 1e-4  # relative to the largest magnitude of the reference output


# ------------------------------------------------------------------------------------ helpers


def _make_weights(name: str) -> ModuleType:
    path = MODELS / name / "make_weights.py"
    spec = importlib.util.spec_from_file_location(f"zoo_{name}_make_weights", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy_with_weights(name: str, folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """The model's .sknd files copied to `folder`, and freshly generated weights written there."""
    for source in (MODELS / name).rglob("*.sknd"):
        target = folder / source.relative_to(MODELS / name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    make = _make_weights(name)
    params = make.weights()
    make.save(params, folder)
    return folder, params


@pytest.fixture(scope="module")
def ort() -> Any:
    """onnxruntime (and onnx), part of the dev extra; without them the comparisons cannot run."""
    pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[dev]' installs it)")
    return pytest.importorskip("onnxruntime",
                               reason="onnxruntime is not installed (pip install -e '.[dev]' installs it)")


def _assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL) -> float:
    """Equal shapes and max |actual - expected| <= rtol * max |expected|; returns that relative error."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert np.all(np.isfinite(actual))
    scale = float(np.abs(expected).max())
    error = float(np.abs(actual.astype(np.float64) - expected).max()) / scale
    assert error <= rtol, f"relative error {error:.3g} > {rtol:.3g} (max |expected| = {scale:.3g})"
    return error


def _compose_cli(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "compose", str(MODELS / name), *args],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# ------------------------------------------------------------------------------- all models


@pytest.mark.parametrize("name", ZOO)
def test_check_cli(name: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "check", str(MODELS / name)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problems found" in proc.stdout + proc.stderr
    assert "warning" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("name", "args", "header"), [
    ("resnet18", ["-a", "height=64", "-a", "width=64"],
     "graph ResNet18(input: real[1, 3, 64, 64]) -> (output: real[1, 1000])"),
    ("resnet18", ["-a", "batch=2"], "graph ResNet18(input: real[2, 3, 224, 224]) -> (output: real[2, 1000])"),
    ("mobilenetv2", [], "graph MobileNetV2(input: real[1, 3, 224, 224]) -> (output: real[1, 1000])"),
    ("mobilenetv2", ["-a", "height=96", "-a", "width=128"],
     "graph MobileNetV2(input: real[1, 3, 96, 128]) -> (output: real[1, 1000])"),
    ("lstm", ["-a", "seq=5", "-a", "batch=3"],
     "graph LSTM(X: real[5, 3, 16]) -> (Y: real[~|5, 3, 32], hN: real[2, 3, 32], cN: real[2, 3, 32])"),
    ("lstm", ["--graph", "LSTMSteps"], "graph LSTMSteps(X: real[8, 1, 16], steps: int[1]) -> "
     "(Y: real[~|8, 1, 32], hN: real[2, 1, 32], cN: real[2, 1, 32])"),
    ("transformer", ["-a", "seq=10"], "graph Transformer(tokens: real[1, 10, 64]) -> (output: real[1, 10, 64])"),
    ("yolo_head", [], "graph YoloHead(features: real[1, 32, 8, 8]) -> "
     "(boxes: real[1, 32, 4], scores: real[1, 4, 32], selected: int[~|32, 3])"),
])
def test_compose_cli(name: str, args: list[str], header: str) -> None:
    assert _compose_cli(name, *args).splitlines()[0] == header


@pytest.mark.parametrize("name", ZOO)
def test_variables_are_those_make_weights_writes(name: str) -> None:
    model = skriptnd.load(MODELS / name)
    expected = _make_weights(name).shapes()
    for graph_name in model.graph_names:
        graph = model.compose(graph_name)
        assert {t.name: t.shape for t in graph.variables} == expected, graph_name
        assert all(t.dtype == "real" for t in graph.variables)


@pytest.mark.parametrize("name", ZOO)
def test_folder_is_small(name: str) -> None:
    """Committed files stay under 1 MB per model; generated weights are ignored where listed so."""
    folder = MODELS / name
    ignored = (folder / ".gitignore").read_text().split() if (folder / ".gitignore").exists() else []
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
             and not ("*.dat" in ignored and p.suffix == ".dat")]
    assert {"main.sknd", "README.md", "make_weights.py"} <= {p.name for p in files}
    assert sum(p.stat().st_size for p in files) < 1_000_000
    if name not in COMMITTED:
        assert "*.dat" in ignored


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_weights_are_reproducible(name: str) -> None:
    make = _make_weights(name)
    model = skriptnd.load(MODELS / name)
    for graph_name in model.graph_names:
        for var, array in make.weights().items():
            stored = read_tensor(MODELS / name / f"main.{graph_name}.{var}.dat")
            assert stored.dtype == np.float32
            np.testing.assert_array_equal(stored, array, err_msg=f"{graph_name}.{var}")


# ----------------------------------------------------------------------------------- ResNet-18


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder, params = _copy_with_weights("resnet18", tmp_path_factory.mktemp("resnet18"))
    return skriptnd.load(folder), params


def test_resnet18_structure(resnet18: tuple[skriptnd.Model, dict[str, np.ndarray]]) -> None:
    model, _ = resnet18
    graph = model.compose(attribs={"height": 64, "width": 64})
    ops = {op.label: op for op in graph.operations}
    # composition by labels: blocks > conv_bn > conv and batch_norm; stdlib operators stay atomic
    assert ops["conv1.conv"].op == "nn.conv" and list(ops["conv1.conv"].attribs["stride"]) == [2, 2]
    assert ops["conv1.bn"].op == "nn.batch_norm" and ops["conv1.bn"].attribs["epsilon"] == pytest.approx(1e-5)
    assert ops["layer2_0.downsample.conv"].outputs[0].shape == (1, 128, 8, 8)
    assert list(ops["layer2_0.downsample.conv"].attribs["padding"]) == [0, 0, 0, 0]
    assert not any(label.startswith(("layer1_0.downsample", "layer2_1.downsample")) for label in ops)
    assert ops["layer4_1.output"].outputs[0].shape == (1, 512, 2, 2)
    assert ops["fc"].op == "nn.linear" and ops["fc"].outputs[0].shape == (1, 1000)
    assert sum(op.op == "nn.conv" for op in graph.operations) == 20
    assert sum(op.op == "nn.batch_norm" for op in graph.operations) == 20


def test_resnet18_matches_onnxruntime(resnet18: tuple[skriptnd.Model, dict[str, np.ndarray]], ort: Any) -> None:
    model, params = resnet18
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    actual = skriptnd.run(model.compose(attribs={"height": 64, "width": 64}), {"input": x})["output"]
    reference = resnet18_onnx(params)
    expected = reference.run(ort, {"input": x}, {"logits": reference.logits})["logits"]
    _assert_close(actual, expected)


# --------------------------------------------------------------------------------- MobileNetV2


@pytest.fixture(scope="module")
def mobilenetv2(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder, params = _copy_with_weights("mobilenetv2", tmp_path_factory.mktemp("mobilenetv2"))
    return skriptnd.load(folder), params


def test_mobilenetv2_structure(mobilenetv2: tuple[skriptnd.Model, dict[str, np.ndarray]]) -> None:
    model, _ = mobilenetv2
    graph = model.compose(attribs={"height": 64, "width": 64})
    ops = {op.label: op for op in graph.operations}
    depthwise = ops["block2.depthwise.conv"]
    assert depthwise.attribs["groups"] == 0 and depthwise.inputs[1].shape == (96, 1, 3, 3)
    assert depthwise.outputs[0].shape == (1, 96, 16, 16)
    assert "block1.expand.conv" not in ops  # expansion 1: no 1x1 expansion
    assert ops["block3.output"].op == "math.add" and "block4.output" not in ops  # residual only at stride 1
    assert ops["block2.depthwise.output"].op == "nn.relu" and ops["block2.depthwise.output"].attribs["max"] == 6.0
    assert ops["conv18.conv"].outputs[0].shape == (1, 1280, 2, 2)
    assert sum(op.op == "nn.conv" for op in graph.operations) == 52


def test_mobilenetv2_matches_onnxruntime(mobilenetv2: tuple[skriptnd.Model, dict[str, np.ndarray]],
                                         ort: Any) -> None:
    model, params = mobilenetv2
    x = np.random.default_rng(2).standard_normal((1, 3, 64, 64)).astype(np.float32)
    actual = skriptnd.run(model.compose(attribs={"height": 64, "width": 64}), {"input": x})["output"]
    reference = mobilenetv2_onnx(params, _make_weights("mobilenetv2").blocks())
    expected = reference.run(ort, {"input": x}, {"logits": reference.logits})["logits"]
    _assert_close(actual, expected)


# ---------------------------------------------------------------------------------------- LSTM

SEQ, BATCH = 8, 3


@pytest.fixture(scope="module")
def lstm(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder, params = _copy_with_weights("lstm", tmp_path_factory.mktemp("lstm"))
    return skriptnd.load(folder), params


@pytest.fixture(scope="module")
def lstm_input() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((SEQ, BATCH, 16)).astype(np.float32)


@pytest.mark.parametrize("decompose", [False, True], ids=["default", "decomposed"])
def test_lstm_matches_onnxruntime(lstm: tuple[skriptnd.Model, dict[str, np.ndarray]], lstm_input: np.ndarray,
                                  ort: Any, decompose: bool) -> None:
    model, params = lstm
    graph = model.compose("LSTM", attribs={"seq": SEQ, "batch": BATCH}, decompose=decompose)
    actual = skriptnd.run(graph, {"X": lstm_input})
    reference = lstm_onnx(params, with_steps=False)
    expected = reference.run(ort, {"X": lstm_input}, {"Y": reference.Y, "hN": reference.hN, "cN": reference.cN})
    for name in ("Y", "hN", "cN"):
        _assert_close(actual[name], expected[name])


@pytest.mark.parametrize("steps", [SEQ, 5, 1])
def test_lstm_steps_matches_onnxruntime(lstm: tuple[skriptnd.Model, dict[str, np.ndarray]], lstm_input: np.ndarray,
                                        ort: Any, steps: int) -> None:
    """The dynamic `steps` input (equal for all batch items): Y has `steps` rows; ONNX's
    sequence_lens gives the same final states and zeros past the end of Y."""
    model, params = lstm
    graph = model.compose("LSTMSteps", attribs={"seq": SEQ, "batch": BATCH})
    actual = skriptnd.run(graph, {"X": lstm_input, "steps": np.full(BATCH, steps, np.int64)})
    reference = lstm_onnx(params, with_steps=True)
    expected = reference.run(ort, {"X": lstm_input, "steps": np.full(BATCH, steps, np.int32)},
                             {"Y": reference.Y, "hN": reference.hN, "cN": reference.cN})
    assert actual["Y"].shape == (steps, BATCH, 32)
    assert not expected["Y"][steps:].any()
    _assert_close(actual["Y"], expected["Y"][:steps])
    _assert_close(actual["hN"], expected["hN"])
    _assert_close(actual["cN"], expected["cN"])


# --------------------------------------------------------------------------------- Transformer


@pytest.fixture(scope="module")
def transformer(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder, params = _copy_with_weights("transformer", tmp_path_factory.mktemp("transformer"))
    return skriptnd.load(folder), params


@pytest.mark.parametrize("decompose", [False, True], ids=["default", "decomposed"])
def test_transformer_matches_onnxruntime(transformer: tuple[skriptnd.Model, dict[str, np.ndarray]], ort: Any,
                                         decompose: bool) -> None:
    model, params = transformer
    tokens = np.random.default_rng(4).standard_normal((2, 16, 64)).astype(np.float32)
    graph = model.compose(attribs={"batch": 2, "seq": 16}, decompose=decompose)
    actual = skriptnd.run(graph, {"tokens": tokens})["output"]
    reference = transformer_onnx(params, heads=4)
    expected = reference.run(ort, {"tokens": tokens}, {"output": reference.output})["output"]
    _assert_close(actual, expected)


# ---------------------------------------------------------------------------------- YOLO head

YOLO = {"height": 8, "width": 8, "classes": 4, "stride": 32.0, "anchors": [10.0, 13.0, 16.0, 30.0, 33.0, 23.0],
        "candidates": 32, "max_detections": 8, "iou_threshold": 0.45, "score_threshold": 0.3}


def yolo_head_onnx(w: dict[str, np.ndarray], batch: int) -> Onnx:
    """The head, YOLOv3 decoding, TopK candidates (GatherND) and NonMaxSuppression in ONNX; input 'features'."""
    b = Onnx()
    h, wd, classes, na = YOLO["height"], YOLO["width"], YOLO["classes"], len(YOLO["anchors"]) // 2
    n, k = na * h * wd, YOLO["candidates"]
    x = b.op("Conv", "features", b.const(w["conv1_filter"]), b.const(w["conv1_bias"]), kernel_shape=[3, 3],
             pads=[1, 1, 1, 1])
    x = b.op("LeakyRelu", x, alpha=0.1)
    x = b.op("Conv", x, b.const(w["conv2_filter"]), b.const(w["conv2_bias"]), kernel_shape=[1, 1])
    x = b.op("Reshape", x, b.ints(batch, na, 5 + classes, h, wd))
    x = b.op("Transpose", x, perm=[0, 1, 3, 4, 2])  # [b, anchor, y, x, 5 + classes]
    txy, twh, tobj, tcls = b.op("Split", x, b.ints(2, 2, 1, classes), axis=4, outputs=4)
    gy, gx = np.meshgrid(np.arange(h), np.arange(wd), indexing="ij")
    grid = np.stack([gx, gy], axis=-1)  # [y, x, 2]: (x, y) of each cell
    xy = b.op("Mul", b.op("Add", b.op("Sigmoid", txy), b.const(grid)), b.const(YOLO["stride"]))
    anchors = np.array(YOLO["anchors"]).reshape(na, 1, 1, 2)
    wh = b.op("Mul", b.op("Exp", twh), b.const(anchors))
    boxes = b.op("Reshape", b.op("Concat", xy, wh, axis=4), b.ints(batch, n, 4))
    scores = b.op("Reshape", b.op("Mul", b.op("Sigmoid", tobj), b.op("Sigmoid", tcls)), b.ints(batch, n, classes))
    confidence = b.op("ReduceMax", scores, b.ints(2), keepdims=0)
    _, best = b.op("TopK", confidence, b.ints(k), axis=1, largest=1, sorted=1, outputs=2)
    picked = b.op("Unsqueeze", best, b.ints(2))
    b.boxes = b.op("GatherND", boxes, picked, batch_dims=1)
    b.scores = b.op("Transpose", b.op("GatherND", scores, picked, batch_dims=1), perm=[0, 2, 1])
    b.selected = b.op("NonMaxSuppression", b.boxes, b.scores, b.ints(YOLO["max_detections"]),
                      b.const([YOLO["iou_threshold"]]), b.const([YOLO["score_threshold"]]), center_point_box=1)
    return b


@pytest.fixture(scope="module")
def yolo_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder, params = _copy_with_weights("yolo_head", tmp_path_factory.mktemp("yolo_head"))
    return skriptnd.load(folder), params


def test_yolo_head_defaults_are_the_tested_ones(yolo_head: tuple[skriptnd.Model, dict[str, np.ndarray]]) -> None:
    model, _ = yolo_head
    graph = model.compose()
    nms = graph.operations[-1]
    assert nms.op == "algo.nonmax_suppress" and nms.label == "nms"
    assert nms.attribs["box_format"] == "CENTER"
    assert nms.attribs["max_outputs_per_class"] == YOLO["max_detections"]
    assert nms.attribs["iou_threshold"] == pytest.approx(YOLO["iou_threshold"])
    assert nms.attribs["score_threshold"] == pytest.approx(YOLO["score_threshold"])
    (top,) = [op for op in graph.operations if op.op == "algo.top_k"]
    assert top.attribs["k"] == YOLO["candidates"] and top.attribs["axis"] == 1
    assert list(graph.tensor("anchor_sizes").value.ravel()) == YOLO["anchors"]


@pytest.mark.parametrize(("batch", "decompose"), [(1, False), (2, False), (2, True)],
                         ids=["batch1", "batch2", "batch2-decomposed"])
def test_yolo_head_matches_onnxruntime(yolo_head: tuple[skriptnd.Model, dict[str, np.ndarray]], ort: Any,
                                       batch: int, decompose: bool) -> None:
    model, params = yolo_head
    features = np.random.default_rng(5).standard_normal((batch, 32, 8, 8)).astype(np.float32)
    actual = skriptnd.run(model.compose(attribs={"batch": batch}, decompose=decompose), {"features": features})
    reference = yolo_head_onnx(params, batch)
    expected = reference.run(ort, {"features": features},
                             {"boxes": reference.boxes, "scores": reference.scores, "selected": reference.selected})
    _assert_close(actual["boxes"], expected["boxes"])
    _assert_close(actual["scores"], expected["scores"])
    assert actual["selected"].dtype == np.int64
    np.testing.assert_array_equal(actual["selected"], expected["selected"])
    # the case is not trivial: some candidates pass the score threshold and are suppressed, and the
    # per-class limit is reached for some class
    scores = expected["scores"]
    eligible = int((scores > YOLO["score_threshold"]).sum())
    assert 0 < len(expected["selected"]) < eligible
    per_class = np.unique(expected["selected"][:, :2], axis=0, return_counts=True)[1]
    assert per_class.max() == YOLO["max_detections"]

