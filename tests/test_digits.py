"""The digits CNN (models/digits): composing it, and running it against its numpy reference.

The weights, samples and reference accuracy are the files models/digits/train.py writes; the numpy
forward pass is imported from that script. Running the graph goes through `skriptnd.execute`,
which evaluates the stdlib operators' @lower formulas with `skriptnd.lower.compile_lowering`.

Running is checked both on the graph as `compose` gives it by default (stdlib operators atomic,
`nn.softmax` included: a composite without a kernel runs its own @compose) and fully decomposed to
@lower operators (`decompose=True`, `--decompose-all`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import skriptnd
from skriptnd.compose import Graph

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "digits"
SAMPLES = MODEL / "samples"
REFERENCE = json.loads((MODEL / "reference_accuracy.json").read_text())
LABELS: dict[str, int] = json.loads((SAMPLES / "labels.json").read_text())
RUN_BATCH = 90  # the 360 test images in 4 runs


def _train_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("digits_train", MODEL / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = _train_module()


def _needs_lower() -> None:
    """Skip until the @lower evaluator (skriptnd.lower.compile_lowering) is there."""
    pytest.importorskip("skriptnd.lower")
    try:
        from skriptnd.lower import compile_lowering  # noqa: F401
    except ImportError:
        pytest.skip("skriptnd.lower.compile_lowering is not available yet")


@pytest.fixture(scope="module")
def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    pytest.importorskip("sklearn")
    return train.load_split()


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return train.load_weights()


@pytest.fixture(scope="module")
def model() -> skriptnd.Model:
    return skriptnd.load(MODEL)


MODES = [pytest.param(False, id="default"), pytest.param(True, id="decomposed")]


def _run(graph: Graph, x: np.ndarray, decompose: bool) -> np.ndarray:
    return np.asarray(skriptnd.run(graph, {"image": x})["probabilities"])


@pytest.fixture(scope="module", params=MODES)
def decompose(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.fixture(scope="module")
def test_run(model: skriptnd.Model, split: tuple[np.ndarray, ...], decompose: bool
             ) -> tuple[np.ndarray, np.ndarray]:
    """The graph's probabilities for the whole test split, and the images, in batches of RUN_BATCH."""
    _needs_lower()
    x_test = split[1]
    assert len(x_test) % RUN_BATCH == 0
    graph = model.compose(attribs={"batch": RUN_BATCH}, decompose=decompose)
    outputs = [_run(graph, x_test[i:i + RUN_BATCH], decompose) for i in range(0, len(x_test), RUN_BATCH)]
    return np.concatenate(outputs), x_test


# ------------------------------------------------------------------------------ composition


@pytest.mark.parametrize("batch", [1, 7, RUN_BATCH])
def test_composed_shapes(model: skriptnd.Model, batch: int) -> None:
    graph = model.compose(attribs={"batch": batch})
    assert graph.name == "Digits"
    assert [(t.name, t.dtype, t.shape) for t in graph.inputs] == [("image", "real", (batch, 1, 8, 8))]
    assert [(t.name, t.dtype, t.shape) for t in graph.outputs] == [("probabilities", "real", (batch, 10))]
    assert {t.name: t.shape for t in graph.variables} == train.SHAPES
    shapes = {op.label: op.outputs[0].shape for op in graph.operations}
    assert shapes == {
        "conv1": (batch, 8, 8, 8), "relu1": (batch, 8, 8, 8), "pool1": (batch, 8, 4, 4),
        "conv2": (batch, 16, 4, 4), "relu2": (batch, 16, 4, 4), "pool2": (batch, 16, 2, 2),
        "flat": (batch, 64), "logits": (batch, 10), "probabilities": (batch, 10),
    }
    ops = {op.label: op for op in graph.operations}
    assert ops["conv1"].op == "nn.conv" and list(ops["conv1"].attribs["padding"]) == [1, 1, 1, 1]
    assert ops["pool2"].op == "nn.max_pool" and list(ops["pool2"].attribs["axes"]) == [2, 3]
    assert ops["probabilities"].op == "nn.softmax" and list(ops["probabilities"].attribs["axes"]) == [1]


def test_default_batch_is_one(model: skriptnd.Model) -> None:
    assert model.compose().inputs[0].shape == (1, 1, 8, 8)


def test_weight_files(weights: dict[str, np.ndarray]) -> None:
    for name, shape in train.SHAPES.items():
        assert (MODEL / f"main.Digits.{name}.dat").is_file()
        assert weights[name].dtype == np.float32 and weights[name].shape == shape


def test_samples() -> None:
    assert LABELS == {f"{d}.npy": d for d in range(10)}
    for name in LABELS:
        x = np.load(SAMPLES / name, allow_pickle=False)
        assert x.dtype == np.float32 and x.shape == (1, 1, 8, 8)
        assert 0.0 <= x.min() and x.max() <= 1.0


def test_committed_size_is_small() -> None:
    files = [p for p in MODEL.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) < 1_000_000


def test_check_cli() -> None:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "check", str(MODEL)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problems" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- numpy reference


def test_numpy_reference_accuracy(split: tuple[np.ndarray, ...], weights: dict[str, np.ndarray]) -> None:
    _, x_test, _, y_test = split
    assert REFERENCE["split"]["test_size"] == train.TEST_SIZE
    assert REFERENCE["split"]["random_state"] == train.SPLIT_SEED
    assert REFERENCE["test_count"] == len(y_test) == 360
    correct = int((train.predict(weights, x_test) == y_test).sum())
    assert correct == REFERENCE["test_correct"]
    assert REFERENCE["test_accuracy"] >= 0.95


def test_numpy_forward_predicts_samples(weights: dict[str, np.ndarray]) -> None:
    for name, label in LABELS.items():
        assert int(train.forward(weights, np.load(SAMPLES / name)).argmax()) == label, name


# ----------------------------------------------------------------------------------- running


def test_probabilities_sum_to_one(test_run: tuple[np.ndarray, np.ndarray]) -> None:
    probs, _ = test_run
    assert probs.shape == (360, 10)
    assert np.all(probs >= 0.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_accuracy_matches_reference(test_run: tuple[np.ndarray, np.ndarray], split: tuple[np.ndarray, ...]
                                   ) -> None:
    probs, _ = test_run
    accuracy = float((probs.argmax(axis=1) == split[3]).mean())
    assert accuracy >= 0.95
    assert abs(accuracy - REFERENCE["test_accuracy"]) <= 0.005


def test_matches_numpy_forward(test_run: tuple[np.ndarray, np.ndarray], weights: dict[str, np.ndarray]) -> None:
    probs, x_test = test_run
    expected = train.forward(weights, x_test)
    np.testing.assert_allclose(probs, expected, rtol=0, atol=1e-4)


def test_samples_run(model: skriptnd.Model, weights: dict[str, np.ndarray], decompose: bool) -> None:
    _needs_lower()
    graph = model.compose(attribs={"batch": 1}, decompose=decompose)
    for name, label in LABELS.items():
        x = np.load(SAMPLES / name)
        probs = _run(graph, x, decompose)
        assert probs.shape == (1, 10)
        np.testing.assert_allclose(probs, train.forward(weights, x), rtol=0, atol=1e-4)
        assert int(probs.argmax()) == label, name


@pytest.mark.parametrize("decompose", MODES)
def test_run_cli(tmp_path: Path, decompose: bool) -> None:
    _needs_lower()
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "run", "models/digits",
                           "--input", "image=models/digits/samples/3.npy", "--output-dir", str(tmp_path),
                           *(["--decompose-all"] if decompose else [])],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probs = np.load(tmp_path / "probabilities.npy", allow_pickle=False)
    assert probs.shape == (1, 10)
    assert int(probs.argmax()) == LABELS["3.npy"] == 3
