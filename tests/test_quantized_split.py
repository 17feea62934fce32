"""Quantized graphs run by default per operation (issue 26): the operations that do not lower to integer
TOSA (E0761) run with fake quantization, the others as integer TOSA regions (skriptnd.backends.quantized_split);
`sknd export` refuses such a graph with one diagnostic naming every operation and what would make it lower.

The expectations are independent of the split: the integer path's own results (the whole graph's integer
lowering of a graph that lowers), numpy by hand (a float convolution on the dequantized values, the quantize
operator's formula), and onnxruntime on the QDQ models.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd import backends
from skriptnd.backends.quantized_split import INTEGER_OP, IntegerRunner, SplitRunner
from skriptnd.diagnostics import DiagnosticError
from skriptnd.tosa.integer.lower import lower_quantized

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "digits_int8"
SAMPLES = ROOT / "models" / "digits" / "samples"


def _samples() -> np.ndarray:
    return np.concatenate([np.load(SAMPLES / f"{d}.npy") for d in range(10)]).astype(np.float32)


def _entry(text: str, name: str) -> str:
    return re.search(rf"^ *{name}: quant\.[^\n]*$", text, re.M).group(0)  # type: ignore[union-attr]


def _conv_relu_digits(tmp_path: Path, names: tuple[str, ...] = ("conv2",)) -> Path:
    """models/digits_int8 with each convolution of ``names`` in onnxruntime's Conv -> Relu -> QDQ pattern:
    its @quantize entry moved to the relu after it (so the convolution's output has none: E0761), and
    pool1 and relu2 as outputs too."""
    folder = tmp_path / "digits_conv_relu"
    shutil.copytree(MODEL, folder)
    text = (folder / "main.sknd").read_text(encoding="utf-8")
    for name in names:
        line = _entry(text, name)
        text = text.replace(line, line.replace(f"{name}:", name.replace("conv", "relu") + ":"))
    text = text.replace("probabilities: real[batch, 10];", "probabilities: real[batch, 10];\n"
                        "        pool1: real[batch, 8, 4, 4];\n        relu2: real[batch, 16, 4, 4];")
    (folder / "main.sknd").write_text(text, encoding="utf-8")
    return folder


def _line_of(folder: Path, needle: str) -> int:
    return next(i for i, line in enumerate((folder / "main.sknd").read_text().splitlines(), 1) if needle in line)


def test_one_refused_operation_falls_back_alone(tmp_path: Path) -> None:
    """conv2 refuses (no @quantize on its output): it alone runs with fake quantization, every other operation
    as integer TOSA, in two regions (before and after it), as the plan says; pool1, computed before it, is
    exactly what the whole integer graph of models/digits_int8 computes."""
    folder = _conv_relu_digits(tmp_path)
    graph = skriptnd.load(folder).compose(attribs={"batch": 10})
    runner = backends.prepare(graph, "numpy")
    assert isinstance(runner, SplitRunner)
    [(op, d)] = runner.refused
    assert (op.label, op.op, d.code) == ("conv2", "nn.conv", "E0761") and "no @quantize entry" in d.message
    assert (Path(d.span.file).name, d.span.line) == ("main.sknd", _line_of(folder, "conv2 = nn.conv"))
    labels = [o.label for o in graph.operations]
    assert [o.label for o in runner.integer_operations] == [lb for lb in labels if lb != "conv2"]
    assert [r.integer for r in runner.regions] == [True, False, True]
    assert sum(o.op == INTEGER_OP for o in runner.executor.graph.operations) == 2
    assert "integer TOSA for 8 of 9 operations (2 regions)" in runner.plan[0]
    assert len(runner.plan) == 2 and "'conv2' (nn.conv): E0761 at " in runner.plan[1]

    x = _samples()
    got = skriptnd.run(graph, {"image": x})
    original = skriptnd.load(MODEL).compose(attribs={"batch": 10})
    whole = lower_quantized(original, simplify=False)
    pool1 = whole.values["pool1"]
    ints = whole.run({"image": x}, outputs=[pool1.name])[pool1.name].astype(np.float32)
    assert pool1.qp is not None
    expected = (ints - np.float32(pool1.qp.zero_point[0])) * np.float32(pool1.qp.scale[0])
    np.testing.assert_array_equal(got["pool1"], expected)
    assert int((got["probabilities"].argmax(axis=1) == np.arange(10)).sum()) >= 9


def _fake_quant(x: np.ndarray, scale: np.ndarray | float, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """The quantize operator by hand: clamp(zp + round_half_away(x / scale)) back to reals."""
    t = np.asarray(x, np.float64) / np.asarray(scale, np.float64)
    q = np.clip(zero_point + np.sign(t) * np.floor(np.abs(t) + 0.5), lo, hi)
    return ((q - zero_point) * np.asarray(scale, np.float64)).astype(np.float32)


def _params(text: str, name: str) -> tuple[np.ndarray, int]:
    line = _entry(text, name)
    scales = re.search(r"scale=\[?([^\]}]*)", line).group(1)  # type: ignore[union-attr]
    zp = int(re.search(r"zero_point=(-?\d+)", line).group(1))  # type: ignore[union-attr]
    return np.array([float(s) for s in scales.split(",")]), zp


def test_the_refused_operation_computes_fake_quantization(tmp_path: Path) -> None:
    """relu2 = the quantize operator of its entry applied to relu(conv2) computed in float on the dequantized
    pool1 and fake-quantized weights, by hand in numpy: equal on nearly every element, one step at most (an
    exact tie rounds by float32 arithmetic in the graph)."""
    folder = _conv_relu_digits(tmp_path)
    text = (folder / "main.sknd").read_text()
    graph = skriptnd.load(folder).compose(attribs={"batch": 10})
    got = skriptnd.run(graph, {"image": _samples()})
    source = graph.variable_source
    weights = {t.name: np.asarray(source(t), np.float32) for t in graph.variables}
    ws, _ = _params(text, "conv2_filter")
    bs, _ = _params(text, "conv2_bias")
    w = _fake_quant(weights["conv2_filter"], ws[:, None, None, None], 0, -127, 127)
    b = _fake_quant(weights["conv2_bias"], bs, 0, -(2 ** 31), 2 ** 31 - 1)
    x = np.pad(got["pool1"], [(0, 0), (0, 0), (1, 1), (1, 1)])
    patches = np.stack([x[:, :, i:i + 4, j:j + 4] for i in range(3) for j in range(3)], axis=-1)  # [n,c,4,4,9]
    conv = np.einsum("ncxyk,ock->noxy", patches.astype(np.float64), w.reshape(16, 8, 9).astype(np.float64))
    conv = conv + b[None, :, None, None]
    rs, rz = _params(text, "relu2")
    expected = _fake_quant(np.maximum(conv, 0.0), rs[0], rz, -128, 127)
    step = float(rs[0])
    diff = np.abs(got["relu2"] - expected)
    assert float(diff.max()) <= step * 1.001
    assert float(np.mean(diff <= step * 1e-3)) >= 0.99  # equal but for float rounding


def test_a_graph_that_lowers_runs_as_one_integer_graph() -> None:
    runner = backends.prepare(skriptnd.load(MODEL).compose(), "numpy")
    assert isinstance(runner, IntegerRunner)


def _sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args, "--color", "never"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_run_names_each_fallback_once_and_export_refuses_naming_each_operation(tmp_path: Path) -> None:
    """Both convolutions in the Conv -> Relu -> QDQ pattern: `sknd run` runs (exit 0), saying once which
    operations fall back and why; `sknd export --tosa-mlir` and `--spirv` refuse with one E0761 located at
    conv1 whose notes name conv1 and conv2 (label, main.sknd:line:col) and what would make each lower, and
    write nothing."""
    folder = _conv_relu_digits(tmp_path, ("conv1", "conv2"))
    lines = {name: _line_of(folder, f"{name} = nn.conv") for name in ("conv1", "conv2")}
    run = _sknd("run", str(folder), "--random-inputs", "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("fake quantization for 'conv1' (nn.conv): E0761 at ") == 1
    assert run.stderr.count("fake quantization for 'conv2' (nn.conv): E0761 at ") == 1
    assert "integer TOSA for 7 of 9 operations" in run.stderr
    compose = _sknd("compose", str(folder), "--tosa")
    assert compose.returncode == 0, compose.stderr
    assert "@quantize: 2 operations do not lower to integer TOSA" in compose.stdout
    assert "conv1 (nn.conv): the output 'conv1'" in compose.stdout and "conv2 (nn.conv)" in compose.stdout
    for flag, out in (("--tosa-mlir", "m.mlir"), ("--spirv", "m.spv")):
        proc = _sknd("export", str(folder), flag, str(tmp_path / out))
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("error[E0761]") == 1, proc.stderr
        assert f"main.sknd:{lines['conv1']}:" in proc.stderr.splitlines()[0]
        assert "2 operations of graph 'DigitsInt8' cannot be lowered to integer TOSA" in proc.stderr
        for name in ("conv1", "conv2"):
            assert re.search(rf"note: '{name}' \(nn.conv\): the output '{name}' of 'nn.conv' has no @quantize "
                             rf"entry.*; to lower it: add '{name}: quant.zero_point_linear_quantize.*"
                             rf"main.sknd:{lines[name]}:\d+\)", proc.stderr), proc.stderr
        assert not (tmp_path / out).exists()


# -- onnxruntime QDQ models -----------------------------------------------------------------------------


def _conv_relu_qdq(tmp_path: Path) -> Path:
    """The minimal Conv -> Relu -> Q/DQ pattern without Q/DQ on the convolution's output, as QDQ exporters
    write a fused conv-relu: Q/DQ on the input, int8 per-channel weights and int32 bias through
    DequantizeLinear, uint8 output (zero point 0: relu's range)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = rng.integers(-127, 128, (6, 3, 3, 3)).astype(np.int8)
    ws = (rng.uniform(0.5, 1.5, 6) * 0.01).astype(np.float32)
    xs = np.float32(0.02)
    b = rng.integers(-2000, 2000, 6).astype(np.int32)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(ws, "w_s"),
             numpy_helper.from_array(np.zeros(6, np.int8), "w_z"), numpy_helper.from_array(b, "b_q"),
             numpy_helper.from_array((ws * xs).astype(np.float32), "b_s"),
             numpy_helper.from_array(np.zeros(6, np.int32), "b_z"), numpy_helper.from_array(np.array(xs), "x_s"),
             numpy_helper.from_array(np.array(3, np.int8), "x_z"), numpy_helper.from_array(np.array(np.float32(0.03)), "y_s"),
             numpy_helper.from_array(np.array(0, np.uint8), "y_z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["b_q", "b_s", "b_z"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "y_s", "y_z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"])]
    graph = helper.make_graph(nodes, "conv_relu_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     [2, 3, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 9, 9])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = tmp_path / "conv_relu_qdq.onnx"
    onnx.save(model, str(path))
    return path


def test_conv_relu_qdq_pattern_imports_and_runs_by_default_like_onnxruntime(tmp_path: Path) -> None:
    """The pattern's convolution refuses (E0761: no @quantize on its output) and falls back; the relu and the
    output's quantization run as integer TOSA; the result is onnxruntime's (unfused QDQ: exact float
    Dequantize -> Conv -> Relu -> Quantize) within one step, equal on nearly every element."""
    pytest.importorskip("onnxruntime")
    from skriptnd.backends.via_onnxruntime import session

    path = _conv_relu_qdq(tmp_path)
    graph = skriptnd.load(skriptnd.import_model(path, tmp_path / "imported")).compose()
    runner = backends.prepare(graph, "numpy")
    assert isinstance(runner, SplitRunner)
    assert [op.op for op, _ in runner.refused] == ["nn.conv"]
    assert "nn.relu" in [o.op for o in runner.integer_operations]
    x = np.random.default_rng(1).normal(0.0, 1.0, (2, 3, 9, 9)).astype(np.float32)
    got = skriptnd.run(graph, {"x": x})["y"]
    expected = session(str(path), unfused_qdq=True).run(None, {"x": x})[0]
    diff = np.abs(got - expected) / 0.03
    assert float(diff.max()) <= 1.0 + 1e-4 and float(np.mean(diff < 1e-4)) >= 0.99
    assert len(np.unique(expected)) > 20


def _strip_conv_output_qdq(model: object) -> int:
    """Turn onnxruntime's Conv -> Q/DQ -> Relu -> Q/DQ (QDQKeepRemovableActivations) into Conv -> Relu -> Q/DQ:
    the QuantizeLinear/DequantizeLinear pair between a convolution and the relu reading it, removed."""
    nodes = list(model.graph.node)  # type: ignore[attr-defined]
    producer = {o: n for n in nodes for o in n.output}
    readers: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    removed = 0
    for relu in [n for n in nodes if n.op_type == "Relu"]:
        dq = producer.get(relu.input[0])
        q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
        conv = producer.get(q.input[0]) if q is not None and q.op_type == "QuantizeLinear" else None
        if conv is None or conv.op_type != "Conv" or readers[q.input[0]] != 1 or readers[dq.output[0]] != 1:
            continue
        relu.input[0] = q.input[0]
        model.graph.node.remove(q)  # type: ignore[attr-defined]
        model.graph.node.remove(dq)  # type: ignore[attr-defined]
        removed += 1
    return removed


def test_an_onnxruntime_quantized_resnet18_in_the_conv_relu_pattern_runs_like_onnxruntime(tmp_path: Path) -> None:
    """ResNet-18 quantized by onnxruntime (quantize_static, QDQ, int8, per-channel weights, MinMax) with its
    convolutions followed by a relu in the Conv -> Relu -> Q/DQ pattern: imported, it runs by default (those
    convolutions with fake quantization, the other 41 operations as integer TOSA) and its logits are
    onnxruntime's (unfused QDQ) within one quantization step everywhere, equal on most (measured on
    torchvision's weights at 224x224: equal on 82-84 %, within one step on all, SQNR 35-37 dB)."""
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper
    from onnx_models import resnet18_onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from test_model_zoo import _copy_with_weights

    from skriptnd.backends.via_onnxruntime import session

    _, params = _copy_with_weights("resnet18", tmp_path / "float")
    b = resnet18_onnx(params)
    shape = [1, 3, 64, 64]  # small, for CI: the same graph
    graph = helper.make_graph([*b.nodes, helper.make_node("Identity", [b.logits], ["output"])], "resnet18",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.OPSET)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "resnet18.onnx"))
    # onnxruntime's own pre-processing (batch norms folded into the convolutions), as its docs advise
    quant_pre_process(str(tmp_path / "resnet18.onnx"), str(tmp_path / "resnet18_pre.onnx"))
    rng = np.random.default_rng(3)
    calibration = iter([{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(3)])

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(calibration, None)

    qdq = tmp_path / "resnet18_int8.onnx"
    quantize_static(str(tmp_path / "resnet18_pre.onnx"), str(qdq), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                    extra_options={"QDQKeepRemovableActivations": True})
    quantized = onnx.load(str(qdq))
    assert _strip_conv_output_qdq(quantized) == 9  # the stem and each block's first convolution
    onnx.save(quantized, str(qdq))
    graph_ = skriptnd.load(skriptnd.import_model(qdq, tmp_path / "imported")).compose()
    runner = backends.prepare(graph_, "numpy")
    assert isinstance(runner, SplitRunner)
    assert len(runner.refused) == 9 and {op.op for op, _ in runner.refused} == {"nn.conv"}
    assert all("no @quantize entry" in d.message for _, d in runner.refused)
    assert sum(o.op == "nn.conv" for o in runner.integer_operations) == 11  # the others: integer TOSA
    x = rng.standard_normal(shape).astype(np.float32)
    got = skriptnd.run(graph_, {"input": x})["output"]
    expected = session(str(qdq), unfused_qdq=True).run(None, {"input": x})[0]
    step = float(np.abs(np.diff(np.unique(expected))).min())  # the output's quantization step
    steps = np.abs(got - expected) / step
    assert float(steps.max()) <= 1.0 + 1e-3
    assert float(np.mean(steps < 1e-3)) >= 0.6, float(np.mean(steps < 1e-3))
    assert int(got.argmax()) == int(expected.argmax())


PER_CHANNEL_INPUT = """import nn;
import quant;

graph PerChannelInput {
    @input {
        x: real[1, 2, 4, 4];
    }
    @output {
        y: real[1, 3, 4, 4];
    }
    @variable {
        w: real[3, 2, 3, 3];
        b: real[3];
    }
    @compose {
        r = nn.relu(x);
        y = nn.conv{padding=[1, 1, 1, 1]}(r, w, b);
    }
    @quantize {
        x: quant.zero_point_linear_quantize{zero_point=0, bits=8, channel_axis=1, scale=[0.02, 0.05]};
        r: quant.zero_point_linear_quantize{zero_point=-128, bits=8, scale=0.03};
        w: quant.zero_point_linear_quantize{zero_point=0, bits=8, symmetric=true, channel_axis=0, scale=[0.01, 0.02, 0.015]};
        y: quant.zero_point_linear_quantize{zero_point=0, bits=8, scale=0.05};
    }
}
"""


def test_an_input_quantized_per_channel_is_fake_quantized_and_the_rest_runs_on_integers(tmp_path: Path) -> None:
    """No integer TOSA graph takes a per-channel input (export refuses it), but the operations after it still
    lower: the input goes through its quantize operator, the relu (fp32 on it, quantized in the graph) and
    the convolution run as integer TOSA; the result is fake quantization's (--via kernels) within one step."""
    (tmp_path / "main.sknd").write_text(PER_CHANNEL_INPUT, encoding="utf-8")
    graph = skriptnd.load(tmp_path).compose(random_weights=True)
    runner = backends.prepare(graph, "numpy")
    assert isinstance(runner, SplitRunner)
    assert [t.name for t in runner.real_inputs] == ["x"] and not runner.refused
    assert [o.op for o in runner.integer_operations] == ["nn.relu", "nn.conv"]
    assert "integer TOSA for all 2 operations" in runner.plan[0] and "input 'x': quantized per channel" in runner.plan[1]
    with pytest.raises(DiagnosticError) as err:  # what `sknd export` reports: located at the input
        lower_quantized(graph)
    [d] = err.value.diagnostics
    assert d.code == "E0761" and "quantized per channel" in d.message and d.span.line == 6
    x = np.random.default_rng(2).uniform(-3, 3, (1, 2, 4, 4)).astype(np.float32)
    got = skriptnd.run(graph, {"x": x})["y"]
    expected = skriptnd.run(graph, {"x": x}, backend="kernels")["y"]
    assert float(np.abs(got - expected).max()) <= 0.05 * 1.001 and np.unique(expected).size > 10
    assert float(np.mean(np.abs(got - expected) < 1e-6)) >= 0.9
