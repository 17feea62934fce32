"""`sknd quantize` (skriptnd.quantize, issue 26 item 2): post-training static quantization.

Checked against independent expectations: the digits CNN keeps its test accuracy (reference_accuracy.json)
within 1 point; the parameters are those the rules give, recomputed here from the weights and from the
numpy forward pass of models/digits/train.py; the SQNR it reports is recomputed from two runs; a small
ResNet (residual adds, a strided 1x1 shortcut, global average pooling, a classifier) quantized by us is at
least as close to float as onnxruntime's quantize_static (QDQ, per channel, MinMax) on the same
calibration data, and runs as an integer TOSA graph; the NNAPI and MLI targets' tables map every operation
of the result; bad calibration data gets a located E0850 and writes nothing.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import skriptnd
from skriptnd.quantize import Method, Settings, Target, load_calibration, quantize_model, sqnr_db
from skriptnd.quantize.observe import BINS, Observed
from skriptnd.quantize.scales import activation_range

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": str(ROOT)}


def sknd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=300)


def _train() -> ModuleType:
    spec = importlib.util.spec_from_file_location("digits_train_q", DIGITS / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """200 training digits as calibration data, `sknd quantize models/digits` run once on them."""
    pytest.importorskip("sklearn")
    train = _train()
    x_train, x_test, _, y_test = train.load_split()
    folder = tmp_path_factory.mktemp("digits_q")
    calib = folder / "calib"
    calib.mkdir()
    np.save(calib / "image.npy", x_train[:200])  # [200, 1, 8, 8]: a sample is the input [1, 1, 8, 8] without its 1
    shipped = np.load(DIGITS / "calibration.npz")["image"]
    assert np.array_equal(shipped, x_train[:200])  # the shipped calibration data: 200 training digits
    out = folder / "digits_q"
    proc = sknd("quantize", str(DIGITS), "-o", str(out), "--calibration", str(DIGITS / "calibration.npz"),
                "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"train": train, "calib": x_train[:200], "x_test": x_test, "y_test": y_test, "out": out,
            "report": json.loads(proc.stdout), "folder": folder}


def test_digits_keeps_its_accuracy_and_runs_as_integer_tosa(digits: dict[str, Any]) -> None:
    reference = json.loads((DIGITS / "reference_accuracy.json").read_text())
    graph = skriptnd.load(digits["out"]).compose(attribs={"batch": len(digits["y_test"])})
    probs = skriptnd.run(graph, {"image": digits["x_test"]})["probabilities"]  # the default: the integer graph
    accuracy = float(np.mean(probs.argmax(axis=1) == digits["y_test"]))
    assert abs(accuracy - reference["test_accuracy"]) <= 0.01, (accuracy, reference["test_accuracy"])
    assert digits["report"]["integer_tosa"] is True, digits["report"]
    proc = sknd("compose", str(digits["out"]), "--tosa")
    assert "runs as an integer TOSA graph" in proc.stdout, proc.stdout


def test_the_reported_sqnr_is_that_of_the_two_runs(digits: dict[str, Any]) -> None:
    n = len(digits["calib"])
    floats = skriptnd.run(skriptnd.load(DIGITS).compose(attribs={"batch": n}), {"image": digits["calib"]})
    ints = skriptnd.run(skriptnd.load(digits["out"]).compose(attribs={"batch": n}), {"image": digits["calib"]})
    expected = 10 * math.log10(np.sum(floats["probabilities"].astype(np.float64) ** 2)
                               / np.sum((ints["probabilities"].astype(np.float64) - floats["probabilities"]) ** 2))
    assert digits["report"]["sqnr_db"]["probabilities"] == pytest.approx(expected, abs=0.05)
    assert expected > 30  # 8 bits: well above the ~20 dB of a wrong scale or a missing requantization


def _entries(folder: Path) -> dict[str, dict[str, Any]]:
    graph = skriptnd.load(folder).compose()
    return {t.name: dict(t.quant["attribs"]) for t in graph.tensors if t.quant is not None}


def test_the_parameters_follow_the_rules(digits: dict[str, Any]) -> None:
    """Recomputed from the float weights and train.forward's activations on the 200 samples."""
    train = digits["train"]
    params = train.load_weights(DIGITS)
    q = _entries(digits["out"])
    assert set(q) == {"image", "conv1_filter", "conv1_bias", "conv1", "conv2_filter", "conv2_bias", "conv2",
                      "fc_filter", "fc_bias", "logits", "probabilities"}  # relu, pool, flatten keep theirs
    cache: dict[str, Any] = {}
    train.forward(params, digits["calib"], cache)
    logits = cache["flat"] @ params["fc_filter"].T + params["fc_bias"]
    x = digits["calib"]
    assert q["image"]["scale"] == pytest.approx((x.max() - min(x.min(), 0)) / 255, rel=1e-6)
    for name, values in (("conv1", cache["c1"]), ("conv2", cache["c2"])):  # a relu follows: [0, max]
        assert q[name]["zero_point"] == -128
        assert q[name]["scale"] == pytest.approx(np.maximum(values, 0).max() / 255, rel=1e-6)
    lo, hi = min(logits.min(), 0), max(logits.max(), 0)
    assert q["logits"]["scale"] == pytest.approx((hi - lo) / 255, rel=1e-6)
    assert q["logits"]["zero_point"] == -128 - round(lo / ((hi - lo) / 255))
    assert q["probabilities"]["scale"] == 1 / 256 and q["probabilities"]["zero_point"] == -128
    inputs = {"conv1": "image", "conv2": "conv1", "fc": "conv2"}
    for layer, source in inputs.items():
        w = params[f"{layer}_filter"].astype(np.float64)
        expected = np.abs(w.reshape(w.shape[0], -1)).max(axis=1) / 127
        f, b = q[f"{layer}_filter"], q[f"{layer}_bias"]
        assert f["symmetric"] is True and f["zero_point"] == 0 and f["channel_axis"] == 0
        np.testing.assert_allclose(f["scale"], expected, rtol=1e-12)
        assert b["bits"] == 32 and b["zero_point"] == 0
        np.testing.assert_allclose(b["scale"], q[source]["scale"] * expected, rtol=1e-12)


def test_the_user_s_text_is_kept_and_exports(digits: dict[str, Any]) -> None:
    text = (digits["out"] / "main.sknd").read_text()
    assert "# [batch,8,8,8]" in text and text.count("@quantize {") == 1 and "import quant;" in text
    for name in ("conv1_filter", "fc_bias"):  # the weights, byte for byte
        assert (digits["out"] / f"main.Digits.{name}.dat").read_bytes() == (DIGITS / f"main.Digits.{name}.dat").read_bytes()
    mlir = digits["folder"] / "q.mlir"
    proc = sknd("export", str(digits["out"]), "--tosa-mlir", str(mlir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tosa.conv2d" in mlir.read_text() and "xi8>" in mlir.read_text()


def test_requantizing_a_quantized_model_replaces_its_block(digits: dict[str, Any]) -> None:
    calib = digits["folder"] / "calib"
    out = digits["folder"] / "int8_again"
    proc = sknd("quantize", str(ROOT / "models" / "digits_int8"), "-o", str(out), "--calibration", str(calib),
                "--per-tensor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (out / "main.sknd").read_text()
    assert text.count("@quantize {") == 1 and text.count("import quant;") == 1
    q = _entries(out)
    assert "channel_axis" not in q["conv1_filter"] and np.ndim(q["conv1_filter"]["scale"]) == 0  # --per-tensor
    assert "runs as an integer TOSA graph" in proc.stdout


@pytest.mark.parametrize("target, name", [("nnapi", "Android NNAPI 1.0"), ("mli", "embARC MLI 2.0")])
def test_target_rules_map_every_operation(digits: dict[str, Any], target: str, name: str) -> None:
    out = digits["folder"] / f"digits_{target}"
    proc = sknd("quantize", str(DIGITS), "-o", str(out), "--calibration", str(digits["folder"] / "calib"),
                "--target", target)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    q = _entries(out)
    if target == "nnapi":  # uint8 asymmetric per tensor; softmax 1/256 with zero point 0
        assert all(e.get("signed") is False for k, e in q.items() if "bias" not in k)
        assert all(np.ndim(e["scale"]) == 0 for e in q.values())
        assert q["probabilities"]["scale"] == 1 / 256 and q["probabilities"]["zero_point"] == 0
        assert all(0 <= e["zero_point"] <= 255 for k, e in q.items() if "bias" not in k)
    table = sknd("compose", str(out), "--target", target)
    assert f"9 of 9 operations map to {name}" in table.stdout, table.stdout


def _observed(values: np.ndarray) -> Observed:
    obs = Observed()
    obs.add(values)
    obs.add_to_histogram(values)
    assert obs.histogram is not None and obs.histogram.sum() == values.size and obs.histogram.size == BINS
    return obs


def test_percentile_ignores_an_outlier() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200_000), [1000.0]])
    obs = _observed(values)
    assert activation_range(obs, Method.minmax) == (values.min(), 1000.0)
    lo, hi = activation_range(obs, Method.percentile)
    width = (1000.0 - values.min()) / BINS
    assert abs(hi - np.percentile(values, 99.99)) <= 2 * width and abs(lo - np.percentile(values, 0.01)) <= 2 * width


def test_mse_clips_a_heavy_tail_where_the_error_is_least() -> None:
    """Laplace(0, 1) values: the squared error of 8-bit quantization over [-a, a], computed here directly
    on the values for a few clips, is least near the clip the method chooses (and below the max)."""
    rng = np.random.default_rng(1)
    values = rng.laplace(size=200_000)
    lo, hi = activation_range(_observed(values), Method.mse)
    assert hi < values.max() and lo > values.min()

    def error(a_lo: float, a_hi: float) -> float:
        scale = (a_hi - a_lo) / 255
        q = np.clip(np.round((values - a_lo) / scale), 0, 255) * scale + a_lo
        return float(np.mean((q - values) ** 2))

    chosen = error(lo, hi)
    assert chosen < error(values.min(), values.max())  # better than minmax
    assert chosen <= 1.1 * min(error(values.min() * f, values.max() * f) for f in np.linspace(0.1, 1, 46))


def test_exclude_keeps_an_operation_in_float_and_says_what_follows(digits: dict[str, Any]) -> None:
    out = digits["folder"] / "excluded"
    proc = sknd("quantize", str(DIGITS), "-o", str(out), "--calibration", str(digits["folder"] / "calib"),
                "--exclude", "logits", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["float"] == {"logits": "excluded (--exclude)"}
    assert {"fc_filter", "fc_bias", "logits"}.isdisjoint(_entries(out))
    # a linear layer needs a quantized output to run in integers: the report says the graph does not lower
    assert report["integer_tosa"] is False and "E0761" in report["integer"]
    assert report["sqnr_db"]["probabilities"] > 30
    proc = sknd("quantize", str(DIGITS), "-o", str(digits["folder"] / "x"), "--calibration",
                str(digits["folder"] / "calib"), "--exclude", "nope")
    assert proc.returncode == 2 and "no operation labelled nope" in proc.stderr


# -- bad calibration data ----------------------------------------------------------------------------------


def _bad(tmp_path: Path, make: str) -> tuple[Path, str]:
    images = np.stack([np.load(DIGITS / "samples" / f"{d}.npy")[0] for d in range(10)])  # [10, 1, 8, 8]
    data = tmp_path / "calib"
    data.mkdir()
    if make == "missing":
        np.save(data / "pixels.npy", images)
        return data, "no calibration data for input 'image'"
    if make == "shape":
        np.save(data / "image.npy", images[:, :, :4])
        return data, "has shape [10, 1, 4, 8]; expected [samples, 1, 1, 8, 8] or [samples, 1, 8, 8]"
    if make == "nan":
        images[3, 0, 2, 2] = np.nan
        np.save(data / "image.npy", images)
        return data, "holds 1 NaN or infinite value"
    if make == "empty":
        np.savez(tmp_path / "calib.npz", image=images[:0])
        return tmp_path / "calib.npz", "holds no samples"
    if make == "pickle":
        np.save(data / "image.npy", np.array([object()]), allow_pickle=True)
        return data, "cannot read the calibration data for input 'image'"
    return tmp_path / "nowhere", "does not exist"


@pytest.mark.parametrize("make", ["missing", "shape", "nan", "empty", "pickle", "absent"])
def test_bad_calibration_data_is_a_located_diagnostic(tmp_path: Path, make: str) -> None:
    data, message = _bad(tmp_path, make)
    out = tmp_path / "out"
    proc = sknd("quantize", str(DIGITS), "-o", str(out), "--calibration", str(data))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error[E0850]" in proc.stderr and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    if make in ("shape", "nan", "missing"):  # at the input's declaration, quoted
        assert "main.sknd:11:9" in proc.stderr and "image: real[batch, 1, 8, 8];" in proc.stderr


def test_the_ten_sample_digits_also_calibrate(tmp_path: Path) -> None:
    """The [N, *input shape] form (each sample [1, 1, 8, 8]) from an .npz, through the API."""
    images = np.stack([np.load(DIGITS / "samples" / f"{d}.npy") for d in range(10)])  # [10, 1, 1, 8, 8]
    np.savez(tmp_path / "c.npz", image=images)
    model = skriptnd.load(DIGITS)
    graph = model.compose()
    data = load_calibration(tmp_path / "c.npz", graph)
    assert data.count == 10
    result = quantize_model(model, graph, data, tmp_path / "q", Settings(method=Method.percentile))
    assert result.integer is not None and result.sqnr["probabilities"] > 25


# -- a small ResNet against onnxruntime's quantize_static -----------------------------------------------------


def _small_resnet(rng: np.random.Generator) -> Any:
    """conv 3x3 s2 + relu; a basic block; a block with a strided 1x1 shortcut; global average pool; Gemm.
    He-normal filters with small biases (batch norm folded, as torch's exporter leaves it)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    count = [0]

    def conv(x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        count[0] += 1
        n = count[0]
        w = (rng.standard_normal((cout, cin, k, k)) * math.sqrt(2 / (cin * k * k))).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"w{n}"), numpy_helper.from_array(b, f"b{n}")])
        nodes.append(helper.make_node("Conv", [x, f"w{n}", f"b{n}"], [f"c{n}"], name=f"conv{n}", kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4))
        if not relu:
            return f"c{n}"
        nodes.append(helper.make_node("Relu", [f"c{n}"], [f"r{n}"], name=f"relu{n}"))
        return f"r{n}"

    def add_relu(a: str, b: str, tag: str) -> str:
        nodes.append(helper.make_node("Add", [a, b], [f"s{tag}"], name=f"add{tag}"))
        nodes.append(helper.make_node("Relu", [f"s{tag}"], [f"o{tag}"], name=f"out{tag}"))
        return f"o{tag}"

    x = conv("image", 3, 16, 3, 2, True)
    x = add_relu(conv(conv(x, 16, 16, 3, 1, True), 16, 16, 3, 1, False), x, "1")
    x = add_relu(conv(conv(x, 16, 32, 3, 2, True), 32, 32, 3, 1, False), conv(x, 16, 32, 1, 2, False), "2")
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    fc = (rng.standard_normal((10, 32)) / math.sqrt(32)).astype(np.float32)
    inits.extend([numpy_helper.from_array(fc, "fc_w"), numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")])
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "small_resnet",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    """Smooth random images (low-frequency noise upsampled, as natural images are mostly smooth), normalized."""
    coarse = rng.standard_normal((n, 3, 4, 4)).astype(np.float32)
    fine = coarse.repeat(8, axis=2).repeat(8, axis=3)
    return (fine + 0.2 * rng.standard_normal((n, 3, 32, 32))).astype(np.float32)


def test_a_small_resnet_is_as_close_to_float_as_onnxruntime_quantize_static(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(26)
    model = _small_resnet(rng)
    onnx.save(model, tmp_path / "resnet.onnx")
    x = _images(rng, 32)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter([{"image": x[i:i + 1]} for i in range(len(x))])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantization.quantize_static(str(tmp_path / "resnet.onnx"), str(tmp_path / "ort_q.onnx"), Reader(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=quantization.QuantType.QInt8,
                                 weight_type=quantization.QuantType.QInt8,
                                 calibrate_method=quantization.CalibrationMethod.MinMax)
    float_session = ort.InferenceSession(str(tmp_path / "resnet.onnx"), providers=["CPUExecutionProvider"])
    quant_session = ort.InferenceSession(str(tmp_path / "ort_q.onnx"), providers=["CPUExecutionProvider"])
    reference = np.concatenate([float_session.run(None, {"image": x[i:i + 1]})[0] for i in range(len(x))])
    theirs = np.concatenate([quant_session.run(None, {"image": x[i:i + 1]})[0] for i in range(len(x))])

    folder = skriptnd.import_model(model, tmp_path / "imported")
    np.save(tmp_path / "image.npy", x)
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "image.npy", x)
    proc = sknd("quantize", str(folder), "-o", str(tmp_path / "q"), "--calibration", str(calib), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["integer_tosa"] is True, report
    graph = skriptnd.load(tmp_path / "q").compose()
    ours = np.concatenate([skriptnd.run(graph, {"image": x[i:i + 1]})["logits"] for i in range(len(x))])
    ours_db, theirs_db = sqnr_db(reference, ours), sqnr_db(reference, theirs)
    assert report["sqnr_db"]["logits"] == pytest.approx(ours_db, abs=0.2)  # our float run is onnxruntime's
    assert ours_db >= theirs_db - 0.05, (ours_db, theirs_db)  # the same arithmetic: equal within rounding
    assert ours_db > 25


def test_target_enum_names_the_cli_choices() -> None:
    proc = sknd("quantize", "--help")
    assert proc.returncode == 0
    for choice in [*Target, *Method]:
        assert choice.value in proc.stdout


def test_only_the_model_folder_is_copied(tmp_path: Path) -> None:
    """A linked folder pointing outside the model is not followed, and an OUT inside the model folder is
    not copied into the next OUT."""
    import shutil

    model_dir = tmp_path / "m"
    shutil.copytree(DIGITS, model_dir, ignore=shutil.ignore_patterns("samples", "*.py"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.dat").write_bytes(b"not part of the model")
    (model_dir / "linked").symlink_to(outside, target_is_directory=True)
    model = skriptnd.load(model_dir)
    graph = model.compose()
    data = load_calibration(DIGITS / "calibration.npz", graph)
    for _ in range(2):
        quantize_model(model, graph, data, model_dir / "q", Settings(), overwrite=True)
    written = {p.relative_to(model_dir / "q").as_posix() for p in (model_dir / "q").rglob("*")}
    assert "main.sknd" in written and "main.Digits.fc_filter.dat" in written
    assert not any(w.startswith(("linked", "q")) for w in written), written
