"""Whole models through `sknd import`: ResNet-18, MobileNetV2 and a transformer encoder built as ONNX graphs
with onnx.helper from the architecture (tests/onnx_models.py, the graphs test_model_zoo compares the
hand-written models with), and the same networks exported from PyTorch when torch is installed.

Each is imported, run by skriptnd (the API, and `sknd run` once) and compared with onnxruntime on the
same ONNX model: max error <= 1e-4 of the largest output magnitude. The import time of ResNet-18 is
measured (target < 2 s)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from onnx_models import mobilenetv2_onnx, require_onnx, resnet18_onnx, transformer_onnx

import skriptnd

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-4


def _make_weights(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"onnx_import_{name}_weights", ROOT / "models" / name /
                                                  "make_weights.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _close(actual: np.ndarray, expected: np.ndarray) -> float:
    assert actual.shape == expected.shape
    error = float(np.abs(actual.astype(np.float64) - expected).max()) / float(np.abs(expected).max())
    assert error <= RTOL, f"relative error {error:.3g}"
    return error


def _reference(name: str) -> tuple[Any, dict[str, np.ndarray], dict[str, str]]:
    make = _make_weights(name)
    w = make.weights()
    rng = np.random.default_rng(7)
    if name == "resnet18":
        b = resnet18_onnx(w)
        return b, {"input": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}, {"logits": b.logits}
    if name == "mobilenetv2":
        b = mobilenetv2_onnx(w, make.blocks())
        return b, {"input": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}, {"logits": b.logits}
    b = transformer_onnx(w, heads=4)
    return b, {"tokens": rng.standard_normal((2, 16, 64)).astype(np.float32)}, {"output": b.output}


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "transformer"])
def test_imported_model_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    _, ort = require_onnx()
    builder, inputs, outputs = _reference(name)
    model = builder.model(inputs, outputs)
    path = skriptnd.import_model(model, tmp_path / name)
    actual = skriptnd.run(skriptnd.load(path).compose(), inputs)
    expected = builder.run(ort, inputs, outputs)
    for key in outputs:
        _close(actual[key], expected[key])


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "transformer"])
def test_round_trip_onnx_sknd_onnx(name: str, tmp_path: Path) -> None:
    """ONNX -> sknd import -> compose -> ONNX export: the exported model gives the original's outputs
    in onnxruntime (two independent converters meeting at the same semantics)."""
    _, ort = require_onnx()
    from onnx_oracle import run_onnx

    from skriptnd.interop.onnx_export import to_onnx

    builder, inputs, outputs = _reference(name)
    original = builder.model(inputs, outputs)
    graph = skriptnd.load(skriptnd.import_model(original, tmp_path / name)).compose()
    exported = to_onnx(graph)
    assert [i.name for i in exported.graph.input] == list(inputs)
    assert [o.name for o in exported.graph.output] == list(outputs)
    back = run_onnx(exported, inputs)
    expected = builder.run(ort, inputs, outputs)
    for key in outputs:
        _close(back[key], expected[key])


def test_resnet18_import_time_and_cli_run(tmp_path: Path) -> None:
    onnx, ort = require_onnx()
    builder, inputs, outputs = _reference("resnet18")
    src = tmp_path / "resnet18.onnx"
    onnx.save(builder.model(inputs, outputs), str(src))
    start = time.perf_counter()
    path = skriptnd.import_model(src, tmp_path / "m")
    print(f"ResNet-18 import: {time.perf_counter() - start:.2f} s")  # a figure for the log, never asserted
    text = (path / "main.sknd").read_text()
    assert text.count("nn.conv{") == 20 and text.count("nn.batch_norm{") == 20 and "nn.linear(" in text
    np.save(tmp_path / "x.npy", inputs["input"])
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "run", str(path), "--input", f"input={tmp_path / 'x.npy'}",
                           "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    _close(np.load(tmp_path / "out" / "logits.npy"), builder.run(ort, inputs, outputs)["logits"])


# ------------------------------------------------------------------------------------ PyTorch


def _torch() -> Any:
    return pytest.importorskip("torch", reason="torch is optional (the onnx.helper twins above always run)")


def _export(module: Any, example: Any, path: Path) -> Path:
    torch = _torch()
    module.eval()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused encoder kernel has no ONNX export
    with torch.no_grad():
        torch.onnx.export(module, (example,), str(path), input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)
    return path


def _torch_resnet_block() -> Any:
    torch = _torch()
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
            self.bn2 = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 10)

        def forward(self, x: Any) -> Any:
            x = self.pool(torch.relu(self.bn1(self.conv1(x))))
            x = torch.relu(x + self.bn2(self.conv2(x)))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return torch.softmax(self.fc(x), dim=-1)

    torch.manual_seed(0)
    net = Net()
    for bn in (net.bn1, net.bn2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    return net


def _torch_encoder() -> Any:
    """A pre-norm encoder layer (attention spelled out: torch's fused encoder has no ONNX export)."""
    torch = _torch()
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self, dim: int = 32, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

        def forward(self, x: Any) -> Any:
            b, s, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
            q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            attn = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            x = x + self.out((attn @ v).transpose(1, 2).reshape(b, s, d))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))

    torch.manual_seed(0)
    return Encoder()


@pytest.mark.parametrize(("make", "shape"), [(_torch_resnet_block, (2, 3, 32, 32)), (_torch_encoder, (2, 10, 32))],
                         ids=["cnn", "encoder"])
def test_pytorch_export_imports(make: Any, shape: tuple, tmp_path: Path) -> None:
    _, ort = require_onnx()
    torch = _torch()
    net = make()
    x = torch.randn(*shape)
    src = _export(net, x, tmp_path / "model.onnx")
    path = skriptnd.import_model(src, tmp_path / "m")
    actual = skriptnd.run(skriptnd.load(path).compose(), {"x": x.numpy()})["y"]
    expected = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    _close(actual, expected)
    with torch.no_grad():
        _close(actual, net(x).numpy())


def test_pytorch_dynamic_batch_with_input_shape(tmp_path: Path) -> None:
    """A dynamic batch stays symbolic (issue 25): the Shape→Gather→Concat→Reshape chains of the attention fold
    to expressions of the graph attribute `batch`, and the model runs at two batches; --input-shape still fixes
    it (everything folds to numbers)."""
    _, ort = require_onnx()
    torch = _torch()

    net = _torch_encoder().eval()
    x = torch.randn(3, 10, 32)
    src = tmp_path / "model.onnx"
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(net, (x,), str(src), input_names=["x"], output_names=["y"], opset_version=17, dynamo=False,
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    dynamic = skriptnd.import_model(src, tmp_path / "dynamic")
    session = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    for batch in (3, 2):
        xb = torch.randn(batch, 10, 32).numpy()
        actual = skriptnd.run(skriptnd.load(dynamic).compose(attribs={"batch": batch}), {"x": xb})["y"]
        _close(actual, session.run(None, {"x": xb})[0])
    path = skriptnd.import_model(src, tmp_path / "m", input_shapes={"x": [3, 10, 32]})
    actual = skriptnd.run(skriptnd.load(path).compose(), {"x": x.numpy()})["y"]
    _close(actual, ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0])


def test_stacked_lstm_sequence_model(tmp_path: Path) -> None:
    """models/lstm's reference: two stacked ONNX LSTM layers (Squeeze, Concat of the final states)."""
    _, ort = require_onnx()
    from onnx_models import lstm_onnx

    builder = lstm_onnx(_make_weights("lstm").weights(), with_steps=False)
    inputs = {"X": np.random.default_rng(3).standard_normal((8, 3, 16)).astype(np.float32)}
    outputs = {"Y": builder.Y, "hN": builder.hN, "cN": builder.cN}
    path = skriptnd.import_model(builder.model(inputs, outputs), tmp_path / "m")
    assert (path / "main.sknd").read_text().count("nn.lstm(") == 2
    actual = skriptnd.run(skriptnd.load(path).compose(), inputs)
    expected = builder.run(ort, inputs, outputs)
    for key in outputs:
        _close(actual[key], expected[key])
