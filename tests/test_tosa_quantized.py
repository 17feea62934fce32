"""Quantized execution (issue #5): @quantize → integer TOSA graph (skriptnd.tosa.integer.lower).

- RESCALE parameters (``rescale_parameters``) against values derived by hand and exact rational
  arithmetic (``fractions``), and RESCALE with them against exact rounding of ``v * S``;
- the quant operators' numpy semantics (``skriptnd.compose.quantization``) against the operators' own
  @lower formulas run by the executor (fake quantization);
- models/digits_int8: the integer graph against the float graph with fake quantization (the @lower
  semantics of the quantize operators, ``--via lower``): every quantized tensor within one quantization
  step, accuracy on the digits test split within 1 % of the float model;
- the exported MLIR: accepted by tosa-opt (validate + serialize), run by the TOSA reference model
  bit-exactly equal to our numpy integer execution (int8 logits) and equal to ``sknd run --via tosa``;
- IREE compiles the exported MLIR and computes the same int8 logits;
- int16 activations, unsigned and min_max activation quantization, convolution geometries;
- refusals with located diagnostics.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.compose.quantization import dequantize, fake_quantize, qparams, quantize
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import Executor
from skriptnd.tosa.integer.lower import lower_quantized, rescale_parameters
from skriptnd.tosa.integer.mlir import to_mlir
from skriptnd.tosa.mlir.export import to_flatbuffer
from skriptnd.tosa.ops import OPS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tosa_oracle import require_tosa_opt, run_flatbuffer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "digits_int8"
FLOAT_MODEL = ROOT / "models" / "digits"
SAMPLES = FLOAT_MODEL / "samples"
REFERENCE = json.loads((FLOAT_MODEL / "reference_accuracy.json").read_text())


def _train_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("digits_train_q", FLOAT_MODEL / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


# -- RESCALE parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize(("scale", "scale32", "expected"), [
    (1.0, True, (1 << 30, 30)),  # the TOSA spec's "scale 1.0 = (1<<30, 30)"
    (0.5, True, (1 << 30, 31)),
    (0.25, True, (1 << 30, 32)),
    (0.75, True, (3 << 29, 31)),
    (1 / 3, True, (1431655765, 32)),  # round(2/3 * 2^31) = 1431655765.33 -> ...765
    (2 / 3, True, (1431655765, 31)),
    (3.0, True, (3 << 29, 29)),
    (2.0 ** -40, True, (1 << 22, 62)),  # 2^30 * 2^-70: shift 70 > 62, the multiplier loses 8 bits
    (1.0, False, (1 << 14, 14)),  # and (1<<14, 14) for 16-bit multipliers
    (1 / 3, False, (21845, 16)),  # round(2/3 * 2^15) = 21845.33
    (1 - 2.0 ** -40, True, (1 << 30, 30)),  # rounds up to 2^31: renormalised
])
def test_rescale_parameters_known_values(scale: float, scale32: bool, expected: tuple[int, int]) -> None:
    assert rescale_parameters(scale, scale32) == expected


@pytest.mark.parametrize("scale", [0.0, -0.5, math.inf, math.nan, 2.0 ** 30])
def test_rescale_parameters_refuse(scale: float) -> None:
    with pytest.raises(ValueError):
        rescale_parameters(scale)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=2.0 ** -31, max_value=2.0 ** 28, allow_nan=False, allow_infinity=False))
def test_rescale_parameters_are_the_nearest_normalised_multiplier(scale: float) -> None:
    m, n = rescale_parameters(scale)
    assert 1 << 30 <= m < 1 << 31 and 2 <= n <= 62
    exact = Fraction(scale) * (1 << n)  # the ideal multiplier at this shift
    assert abs(Fraction(m) - exact) <= Fraction(1, 2)
    assert Fraction(1 << 30) - Fraction(1, 2) <= exact < Fraction(1 << 31)  # normalised: no better shift


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=2.0 ** -20, max_value=4.0, allow_nan=False, allow_infinity=False),
       st.lists(st.integers(min_value=-(1 << 24), max_value=(1 << 24) - 1), min_size=1, max_size=16),
       st.integers(min_value=-128, max_value=127))
def test_rescale_with_derived_parameters_rounds_v_times_s(scale: float, values: list[int], zp: int) -> None:
    """RESCALE int32 → int8 computes clamp(round(v * S) + zp): exact rounding (half toward +inf) of the
    real product, except within the multiplier's error of a tie."""
    m, n = rescale_parameters(scale)
    v = np.array(values, np.int32)
    got = OPS["RESCALE"](v, np.array([m], np.int32), np.array([n], np.int8), np.array([0], np.int32),
                         np.array([zp], np.int8), output_dtype="int8", scale32=True)
    err = abs(Fraction(m, 1 << n) - Fraction(scale))  # |M 2^-n - S|
    for x, y in zip(values, got.tolist(), strict=True):
        exact = Fraction(x) * Fraction(scale)
        rounded = math.floor(exact + Fraction(1, 2))
        if abs(exact - math.floor(exact) - Fraction(1, 2)) <= abs(x) * err:
            continue  # v*S is within the approximation error of a tie: either neighbour is right
        assert y == max(-128, min(127, rounded + zp)), (x, scale)


# -- the quant operators' semantics -------------------------------------------------------------------

_IDENTITY = """import quant;
graph G {{
    @input {{ x: real[3,40]; }}
    @output {{ y: real[3,40]; }}
    @compose {{ y = x; }}
    @quantize {{ x: {quant}; }}
}}
"""


@pytest.mark.parametrize("quant", [
    "quant.zero_point_linear_quantize{zero_point=-128, scale=0.00392156862745098, bits=8}",
    "quant.zero_point_linear_quantize{zero_point=3, scale=0.0625, bits=8, symmetric=true}",
    "quant.zero_point_linear_quantize{zero_point=100, scale=0.02, bits=8, signed=false}",
    "quant.zero_point_linear_quantize{zero_point=0, scale=0.001, bits=16}",
    "quant.min_max_linear_quantize{min=-1.0, max=1.0, bits=8, symmetric=true}",
    "quant.min_max_linear_quantize{min=0.0, max=2.0, bits=8}",
    "quant.min_max_linear_quantize{min=0.0, max=3.0, bits=8, signed=false}",
])
def test_quantize_matches_the_operator_lowering(tmp_path: Path, quant: str) -> None:
    """dequantize(quantize(x)) equals the quantize operator's @lower output, exactly (ties included:
    x = k/16 with scale 1/255 hits 127.5), and the integers lie in the operator's range."""
    (tmp_path / "main.sknd").write_text(_IDENTITY.format(quant=quant))
    graph = skriptnd.load(tmp_path).compose()
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 40)) * 1.5).astype(np.float32)
    x[0, :17] = np.arange(17) / 16
    x[1, :3] = [1e9, -1e9, 0.0]
    kernels, optimize = kernels_for("lower")
    expected = Executor(fake_quantize(graph), {}, kernels=kernels, optimize=optimize).run({"x": x})["y"]
    qp = qparams(graph.tensor("x"))
    q = quantize(x, qp)
    assert q.dtype == {"int8": np.int8, "int16": np.int16}[qp.dtype]
    assert q.min() >= qp.qmin and q.max() <= qp.qmax
    np.testing.assert_array_equal(dequantize(q, qp), expected)


def test_min_max_with_a_fractional_zero_point_is_refused(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(_IDENTITY.format(quant="quant.min_max_linear_quantize{min=-1.0, max=1.0, "
                                                         "bits=8}"))
    graph = skriptnd.load(tmp_path).compose()
    with pytest.raises(DiagnosticError) as err:
        qparams(graph.tensor("x"))
    assert err.value.diagnostics[0].code == "E0760" and "-0.5" in err.value.diagnostics[0].message


# -- models/digits_int8 ----------------------------------------------------------------------------------

_INHERITED = {"relu1": "conv1", "pool1": "conv1", "relu2": "conv2", "pool2": "conv2", "flat": "conv2"}
_CHECKED = ["image", "conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flat", "logits"]


@pytest.fixture(scope="module")
def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    pytest.importorskip("sklearn")
    return _train_module().load_split()


def _fake_quant_values(graph: skriptnd.compose.Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """The fake-quantized float values of the checked tensors and the probabilities (--via lower)."""
    fq = fake_quantize(graph)
    by_name = {t.name: t for t in fq.tensors}
    outs = [by_name.get(f"{n}~q", by_name[n]) for n in _CHECKED]
    fq = replace(fq, outputs=[*outs, fq.outputs[0]], output_names=[*_CHECKED, "probabilities"])
    kernels, optimize = kernels_for("lower")
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    return Executor(fq, variables, kernels=kernels, optimize=optimize).run({"image": x})


def test_integer_graph_is_within_one_step_of_fake_quantization_and_as_accurate(split: tuple) -> None:
    _, x_test, _, y_test = split
    graph = skriptnd.load(MODEL).compose(attribs={"batch": len(x_test)})
    integer = lower_quantized(graph, simplify=False)  # every tensor's integers, in NCHW
    names = {op.op for op, _ in integer.notes}
    assert {"nn.conv", "nn.linear", "nn.relu", "nn.max_pool"} <= names
    ops = [o.name for o in integer.ops]
    assert ops.count("CONV2D") == 2 and ops.count("RESCALE") == 3 and "MATMUL" in ops and "MAX_POOL2D" in ops
    ints = integer.run({"image": x_test}, outputs=[integer.values[n].name for n in _CHECKED])
    fake = _fake_quant_values(graph, x_test)
    for name in _CHECKED:
        qp = qparams(graph.tensor(_INHERITED.get(name, name)))
        got = ints[integer.values[name].name]
        assert got.dtype == np.int8, name
        expected = quantize(fake[name], qp)  # the fake-quantized reals are on the grid: exact integers
        np.testing.assert_array_equal(dequantize(expected, qp), fake[name])
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        assert diff.max() <= 1, (name, int(diff.max()))
        assert np.mean(diff > 0) < 0.01, name  # off by one only near ties
    probabilities = integer.run({"image": x_test})["probabilities"]
    assert probabilities.dtype == np.float32
    int_accuracy = float(np.mean(probabilities.argmax(1) == y_test))
    fake_accuracy = float(np.mean(fake["probabilities"].argmax(1) == y_test))
    assert abs(int_accuracy - REFERENCE["test_accuracy"]) <= 0.01, int_accuracy
    assert abs(fake_accuracy - REFERENCE["test_accuracy"]) <= 0.01, fake_accuracy
    np.testing.assert_allclose(probabilities, fake["probabilities"], atol=0.02)


def test_weights_are_the_float_model_and_the_integers_derive_from_them() -> None:
    """Float weights + quantization parameters: the files are the float model's; the int8 filters and
    int32 biases in the integer graph are the quantize operators applied to them."""
    graph = skriptnd.load(MODEL).compose()
    float_graph = skriptnd.load(FLOAT_MODEL).compose()
    integer = lower_quantized(graph, simplify=False)  # filters not yet transposed to OHWI on the host
    for t in graph.variables:
        values = graph.variable_source(t)
        np.testing.assert_array_equal(values, float_graph.variable_source(float_graph.tensor(t.name)))
        qp = qparams(t)
        assert qp.dtype == ("int32" if t.name.endswith("bias") else "int8") and qp.axis == 0
    consts = list(integer.constants.values())
    w = quantize(graph.variable_source(graph.tensor("conv1_filter")), qparams(graph.tensor("conv1_filter")))
    assert any(c.dtype == np.int8 and c.shape == w.shape and np.array_equal(c, w) for c in consts)
    b = quantize(graph.variable_source(graph.tensor("fc_bias")), qparams(graph.tensor("fc_bias")))
    assert any(c.dtype == np.int32 and np.array_equal(c.reshape(-1), b) for c in consts)
    folded = lower_quantized(graph)  # CONV2D takes OHWI filters: transposed once, on the host
    assert any(c.dtype == np.int8 and np.array_equal(c, w.transpose(0, 2, 3, 1)) for c in folded.constants.values())
    assert [o.name for o in folded.ops].count("TRANSPOSE") == 2  # the input to NHWC, pool2 back to NCHW


def test_sknd_run_via_tosa_is_integer_and_agrees_with_fake_quantization(tmp_path: Path) -> None:
    out_int, out_fake = tmp_path / "int", tmp_path / "fake"
    sample = str(SAMPLES / "3.npy")
    proc = sknd("run", str(MODEL), "--input", f"image={sample}", "--via", "tosa", "-o", str(out_int))
    assert proc.returncode == 0, proc.stderr
    assert "integer TOSA graph" in proc.stderr
    proc = sknd("run", str(MODEL), "--input", f"image={sample}", "--via", "lower", "-o", str(out_fake))
    assert proc.returncode == 0, proc.stderr
    p_int = np.load(out_int / "probabilities.npy")
    p_fake = np.load(out_fake / "probabilities.npy")
    assert p_int.argmax() == p_fake.argmax() == 3
    np.testing.assert_allclose(p_int, p_fake, atol=1e-3)
    graph = skriptnd.load(MODEL).compose()
    np.testing.assert_array_equal(p_int, lower_quantized(graph).run({"image": np.load(sample)})["probabilities"])


# -- MLIR, tosa-opt and the reference model ------------------------------------------------------------

@pytest.fixture(scope="module")
def tools() -> None:
    require_tosa_opt()


def _samples() -> np.ndarray:
    return np.concatenate([np.load(SAMPLES / f"{d}.npy") for d in range(10)]).astype(np.float32)


def test_exported_int8_mlir_runs_bit_exactly_in_the_reference_model(tmp_path: Path, tools: None) -> None:
    x = _samples()
    graph = skriptnd.load(MODEL).compose(attribs={"batch": 10})
    integer = lower_quantized(graph)
    logits = integer.values["logits"].name
    mlir = to_mlir(integer, outputs=[logits])  # the integer part alone: int8 in, int8 logits out
    assert "(tensor<10x1x8x8xi8>) -> (tensor<10x10xi8>)" in mlir and "f32" not in mlir
    fb = to_flatbuffer(mlir, profile="pro_int")  # tosa-opt: parse, --tosa-validate (pro_int), serialize
    inputs = integer.quantize_inputs({"image": x})
    got = run_flatbuffer(fb, inputs, tmp_path)
    ours = integer.run({"image": x}, outputs=[logits])[logits]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, ours)
    assert list(got.argmax(1)) == list(range(10))


def test_sknd_export_int8_matches_sknd_run_in_the_reference_model(tmp_path: Path, tools: None) -> None:
    out, fbpath = tmp_path / "digits_int8.mlir", tmp_path / "digits_int8.tosa"
    proc = sknd("export", str(MODEL), "--attrib", "batch=10", "--tosa-mlir", str(out), "--tosa-flatbuffer",
                str(fbpath))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert '<{function_type = (tensor<10x1x8x8xi8>) -> (tensor<10x10xf32>), sym_name = "main"}>' in text
    for op in ("tosa.conv2d", "tosa.rescale", "tosa.clamp", "tosa.max_pool2d", "tosa.matmul", "tosa.cast",
               "tosa.exp"):
        assert f'"{op}"(' in text, op
    assert "acc_type = i32" in text and "rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>" in text
    assert "per_channel = true" in text
    x = _samples()
    graph = skriptnd.load(MODEL).compose(attribs={"batch": 10})
    integer = lower_quantized(graph)
    got = run_flatbuffer(fbpath.read_bytes(), integer.quantize_inputs({"image": x}), tmp_path)
    ours = integer.run({"image": x})["probabilities"]
    np.testing.assert_allclose(got, ours, rtol=1e-5, atol=1e-7)  # fp32 softmax: exp may differ in ulps
    np.save(tmp_path / "x.npy", x)
    proc = sknd("run", str(MODEL), "--attrib", "batch=10", "--input", f"image={tmp_path / 'x.npy'}", "--via",
                "tosa", "-o", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(got, np.load(tmp_path / "run" / "probabilities.npy"), rtol=1e-5, atol=1e-7)
    assert list(got.argmax(1)) == list(range(10))


# -- refusals --------------------------------------------------------------------------------------------

_SMALL = """import nn;
import quant;
graph G {{
    @input {{ x: real[1,2,4,4]; }}
    @output {{ y: real[1,3,4,4]; }}
    @variable {{ w: real[3,2,3,3]; }}
    @compose {{
        c = nn.conv{{padding=[1,1,1,1]}}(x, w);
        y = {tail};
    }}
    @quantize {{
        x: quant.zero_point_linear_quantize{{zero_point=0, scale=0.05, bits=8}};
        w: quant.zero_point_linear_quantize{{zero_point=0, scale=0.01, bits=8, symmetric=true}};
{more}
    }}
}}
"""


def _model(tmp_path: Path, source: str) -> Path:
    """A model folder holding ``source`` as its main.sknd."""
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "main.sknd").write_text(source)
    return folder


def _small(tmp_path: Path, tail: str, more: str) -> Path:
    return _model(tmp_path, _SMALL.format(tail=tail, more=more))


@pytest.mark.parametrize("quant", [
    "quant.zero_point_linear_quantize{zero_point=-10, scale=0.02, bits=8}",
    "quant.zero_point_linear_quantize{zero_point=118, scale=0.02, bits=8, signed=false}",  # stored as -10
    "quant.min_max_linear_quantize{min=-2.56, max=2.54, bits=8}",  # scale 0.02, zero point 0
])
def test_small_conv_relu_without_bias_runs_and_matches(tmp_path: Path, quant: str) -> None:
    folder = _small(tmp_path, "nn.relu(c)", f"        c: {quant};")
    graph = skriptnd.load(folder).compose()
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (1, 2, 4, 4)).astype(np.float32)
    variables = {"w": rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)}
    got = lower_quantized(graph, variables).run({"x": x})["y"]
    kernels, optimize = kernels_for("lower")
    fake = Executor(fake_quantize(graph), variables, kernels=kernels, optimize=optimize).run({"x": x})["y"]
    assert np.abs(got - fake).max() <= 0.02 + 1e-6  # within one step of c's scale
    assert got.min() >= 0


def test_in_graph_quantization_runs_bit_exactly_in_the_reference_model(tmp_path: Path, tools: None) -> None:
    """The fp32 sigmoid's quantized output (quantize_real: MUL, ABS, FLOOR, SELECT, CLAMP, CAST) exports as
    TOSA that tosa-opt validates and the reference model runs to the same int8 values."""
    folder = _small(tmp_path, "nn.sigmoid(c)", "        c: quant.zero_point_linear_quantize{zero_point=0, "
                    "scale=0.02, bits=8};\n        y: quant.zero_point_linear_quantize{zero_point=-128, "
                    "scale=0.004, bits=8};")
    graph = skriptnd.load(folder).compose(random_weights=True)
    integer = lower_quantized(graph)
    y = integer.values["y"].name
    mlir = to_mlir(integer, outputs=[y])
    for op in ("tosa.sigmoid", "tosa.floor", "tosa.select", "tosa.cast"):
        assert f'"{op}"(' in mlir, op
    fb = to_flatbuffer(mlir, profile="pro_int,pro_fp")
    x = np.random.default_rng(3).uniform(-3, 3, [int(d) for d in graph.inputs[0].shape]).astype(np.float32)
    got = run_flatbuffer(fb, integer.quantize_inputs({"x": x}), tmp_path)
    ours = integer.run({"x": x}, outputs=[y])[y]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, ours)


def test_conv_output_without_quantize_is_a_located_diagnostic(tmp_path: Path) -> None:
    folder = _small(tmp_path, "nn.relu(c)", "")
    proc = sknd("export", str(folder), "--tosa-mlir", str(tmp_path / "o.mlir"), "--random-weights", "--color",
                "never")
    assert proc.returncode == 1
    assert "E0761" in proc.stderr and "has no @quantize entry" in proc.stderr and "main.sknd:8:" in proc.stderr
    assert not (tmp_path / "o.mlir").exists()


def test_conv_output_without_quantize_runs_by_default_with_fake_quantization(tmp_path: Path) -> None:
    """The Conv -> Relu -> QDQ pattern (issue 26): the convolution does not lower (E0761), so the default
    backend runs it with fake quantization (the relu, unquantized, in fp32 in an integer TOSA region: the
    same arithmetic), exactly as --via kernels does, and says why."""
    folder = _small(tmp_path, "nn.relu(c)", "")
    graph = skriptnd.load(folder).compose(random_weights=True)
    x = np.random.default_rng(5).uniform(-3, 3, (1, 2, 4, 4)).astype(np.float32)
    got = skriptnd.run(graph, {"x": x})["y"]
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    kernels, optimize = kernels_for("kernels")
    expected = Executor(fake_quantize(graph), variables, kernels=kernels, optimize=optimize).run({"x": x})["y"]
    np.testing.assert_array_equal(got, expected)
    x_grid = np.clip(np.round(x / 0.05), -128, 127) * 0.05  # the input on its int8 grid (hand-computed)
    w = variables["w"]
    w_grid = np.clip(np.round(w / 0.01), -127, 127) * 0.01
    padded = np.pad(x_grid, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.einsum("nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3)),
                     w_grid)
    np.testing.assert_allclose(got, np.maximum(conv, 0), rtol=1e-5, atol=1e-5)
    np.save(tmp_path / "x.npy", x)
    proc = sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--random-weights", "--color", "never")
    assert proc.returncode == 0, proc.stderr
    assert "fake quantization" in proc.stderr and "E0761" in proc.stderr and "main.sknd:8:" in proc.stderr


def test_quantized_output_of_a_float_operation_is_quantized_in_the_graph(tmp_path: Path) -> None:
    """A sigmoid runs in fp32 on the dequantized conv output; its quantized output is quantized inside the
    integer graph as the quantize operator does (x / scale rounded half away from zero, plus the zero
    point): the same integers as fake quantization (numpy below), up to one step at an exact tie."""
    folder = _small(tmp_path, "nn.sigmoid(c)", "        c: quant.zero_point_linear_quantize{zero_point=0, "
                    "scale=0.02, bits=8};\n        y: quant.zero_point_linear_quantize{zero_point=-128, "
                    "scale=0.004, bits=8};")
    graph = skriptnd.load(folder).compose(random_weights=True)
    ig = lower_quantized(graph)
    assert any("fp32" in how for _, how in ig.notes)
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, [int(d) for d in graph.inputs[0].shape]).astype(np.float32)
    got = ig.run({"x": x})["y"].astype(np.float64)
    c = ig.run({"x": x}, outputs=[ig.values["c"].name])[ig.values["c"].name].astype(np.float64) * 0.02
    layout = np.transpose(c, (0, 3, 1, 2)) if c.shape != got.shape else c  # the TOSA value may be NHWC
    sig = 1.0 / (1.0 + np.exp(-layout))
    expected = (np.clip(-128 + np.sign(sig / 0.004) * np.floor(np.abs(sig / 0.004) + 0.5), -128, 127) + 128) * 0.004
    codes = got / 0.004
    assert np.allclose(codes, np.round(codes), atol=1e-3)  # on the output's grid
    assert np.abs(got - expected).max() <= 0.004 + 1e-6
    assert np.mean(np.isclose(got, expected, atol=1e-6)) > 0.95


def test_stateful_quantized_graph_points_at_the_updated_variable(tmp_path: Path) -> None:
    folder = _model(tmp_path, (
        "import math;\nimport quant;\ngraph G {\n    @input { x: real[3]; }\n    @output { y: real[3]; }\n"
        "    @variable { total: real[3]; }\n    @compose { y = math.add(total, x); }\n    @update { total = y; }\n"
        "    @quantize { x: quant.zero_point_linear_quantize{zero_point=0, scale=0.5, bits=8}; }\n}\n"))
    graph = skriptnd.load(folder).compose(random_weights=True)
    with pytest.raises(DiagnosticError) as err:
        lower_quantized(graph)
    diag = err.value.diagnostics[0]
    assert diag.code == "E0761" and "'total'" in diag.message
    assert (diag.span.line, diag.span.col) == (6, 17)  # `total: real[3];` in @variable


# -- int16 activations --------------------------------------------------------------------------------

_INT16 = """import nn;
import layout;
import quant;
graph G {
    @input { x: real[2,2,6,6]; }
    @output { y: real[2,5]; }
    @variable { w: real[4,2,3,3]; b: real[4]; fw: real[5,36]; fb: real[5]; }
    @compose {
        c = nn.conv{padding=[1,1,1,1]}(x, w, b);
        r = nn.relu(c);
        p = nn.max_pool{size=[2,2], stride=[2,2]}(r);
        f = layout.flatten{axis=1}(p);
        y = nn.linear(f, fw, fb);
    }
    @quantize {
        x: quant.zero_point_linear_quantize{zero_point=0, scale=0.0001, bits=16};
        w: quant.zero_point_linear_quantize{zero_point=0, scale=[0.01, 0.02, 0.015, 0.01], bits=8,
                                            symmetric=true, channel_axis=0};
        b: quant.zero_point_linear_quantize{zero_point=0, scale=[1e-06, 2e-06, 1.5e-06, 1e-06], bits=32,
                                            channel_axis=0};
        c: quant.zero_point_linear_quantize{zero_point=0, scale=0.0003, bits=16};
        fw: quant.zero_point_linear_quantize{zero_point=0, scale=0.01, bits=8, symmetric=true};
        y: quant.zero_point_linear_quantize{zero_point=0, scale=0.0005, bits=16};
    }
}
"""


def test_int16_activations_convolution_and_linear(tmp_path: Path) -> None:
    """int16 activations (zero point 0), int8 filters: CONV2D int16 x int8 -> int48 with an int48 bias,
    RESCALE with a 16-bit multiplier; nn.linear as a 1x1 CONV2D. Within one step of fake quantization."""
    (tmp_path / "main.sknd").write_text(_INT16)
    graph = skriptnd.load(tmp_path).compose()
    rng = np.random.default_rng(0)
    variables = {"w": rng.uniform(-1, 1, (4, 2, 3, 3)).astype(np.float32),
                 "b": rng.uniform(-0.5, 0.5, 4).astype(np.float32),
                 "fw": rng.uniform(-1, 1, (5, 36)).astype(np.float32),
                 "fb": rng.uniform(-0.5, 0.5, 5).astype(np.float32)}
    integer = lower_quantized(graph, variables, simplify=False)
    ops = integer.ops
    convs = [o for o in ops if o.name == "CONV2D"]
    assert len(convs) == 2 and all(o.attrs["acc_type"] == "int48" for o in convs)
    assert all(not o.attrs["scale32"] for o in ops if o.name == "RESCALE")
    kernels, optimize = kernels_for("lower")
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-2, 2, (2, 2, 6, 6)).astype(np.float32)
        names = ["c", "y"]
        got = integer.run({"x": x}, outputs=[integer.values[n].name for n in names])
        fq = fake_quantize(graph)
        by_name = {t.name: t for t in fq.tensors}
        fq = replace(fq, outputs=[by_name[f"{n}~q"] for n in names], output_names=names)
        fake = Executor(fq, variables, kernels=kernels, optimize=optimize).run({"x": x})
        for n in names:
            q = got[integer.values[n].name]
            assert q.dtype == np.int16
            expected = quantize(fake[n], qparams(graph.tensor(n))).astype(np.int64)
            assert np.abs(q.astype(np.int64) - expected).max() <= 1, n


def test_int16_mlir_runs_bit_exactly_in_the_reference_model(tmp_path: Path, tools: None) -> None:
    (tmp_path / "main.sknd").write_text(_INT16)
    graph = skriptnd.load(tmp_path).compose(random_weights=True, seed=1)
    rng = np.random.default_rng(1)
    variables = {t.name: rng.uniform(-0.9, 0.9, [int(d) for d in t.shape]).astype(np.float32)
                 for t in graph.variables}
    integer = lower_quantized(graph, variables)
    y = integer.values["y"].name
    mlir = to_mlir(integer, outputs=[y])
    assert "xi48>" in mlir and "acc_type = i48" in mlir and "scale32 = false" in mlir
    fb = to_flatbuffer(mlir, profile="pro_int extensions=int16")
    x = rng.uniform(-2, 2, (2, 2, 6, 6)).astype(np.float32)
    got = run_flatbuffer(fb, integer.quantize_inputs({"x": x}), tmp_path)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, integer.run({"x": x}, outputs=[y])[y])


_CONV = """import nn;
import quant;
graph G {{
    @input {{ x: real[2,4,7,7]; }}
    @output {{ y: real{oshape}; }}
    @variable {{ w: real{wshape}; b: real[{oc}]; }}
    @compose {{
        c = nn.conv{{{attrs}}}(x, w, b);
        y = nn.relu(c);
    }}
    @quantize {{
        x: quant.zero_point_linear_quantize{{zero_point=-3, scale=0.03, bits=8}};
        w: quant.zero_point_linear_quantize{{zero_point=0, scale={ws}, bits=8, symmetric=true, channel_axis=0}};
        c: quant.zero_point_linear_quantize{{zero_point=-20, scale=0.05, bits=8}};
    }}
}}
"""


@pytest.mark.parametrize(("attrs", "oshape", "wshape", "tosa_op"), [
    ("stride=[2,2], padding=[1,1,1,1]", "[2,6,4,4]", "[6,4,3,3]", "CONV2D"),
    ("padding=[0,0,0,0]", "[2,6,5,5]", "[6,4,3,3]", "CONV2D"),
    ("stride=[2,2]", "[2,6,3,3]", "[6,4,3,3]", "CONV2D"),  # automatic padding
    ("dilation=[2,2], padding=[2,2,2,2]", "[2,6,7,7]", "[6,4,3,3]", "CONV2D"),
    ("groups=4, padding=[1,1,1,1]", "[2,8,7,7]", "[8,1,3,3]", "DEPTHWISE_CONV2D"),  # channel multiplier 2
    ("groups=0, padding=[1,1,1,1]", "[2,4,7,7]", "[4,1,3,3]", "DEPTHWISE_CONV2D"),
])
def test_convolution_geometries_agree_with_fake_quantization(tmp_path: Path, attrs: str, oshape: str, wshape: str,
                                                             tosa_op: str) -> None:
    """Strides, padding (padded taps are the input zero point, i.e. real 0), dilation and depthwise
    convolutions with per-channel filters: the integer graph within one step of fake quantization."""
    oc = int(wshape[1:].split(",")[0])
    scales = "[" + ", ".join(str(0.01 * (1 + i % 3)) for i in range(oc)) + "]"
    (tmp_path / "main.sknd").write_text(_CONV.format(attrs=attrs, oshape=oshape, wshape=wshape, oc=oc, ws=scales))
    graph = skriptnd.load(tmp_path).compose()
    rng = np.random.default_rng(7)
    variables = {"w": rng.uniform(-1, 1, [int(d) for d in graph.tensor("w").shape]).astype(np.float32),
                 "b": rng.uniform(-0.3, 0.3, oc).astype(np.float32)}
    x = rng.uniform(-3, 3, (2, 4, 7, 7)).astype(np.float32)
    integer = lower_quantized(graph, variables)
    assert tosa_op in [o.name for o in integer.ops]
    got = integer.run({"x": x})["y"]
    kernels, optimize = kernels_for("lower")
    fake = Executor(fake_quantize(graph), variables, kernels=kernels, optimize=optimize).run({"x": x})["y"]
    assert got.shape == fake.shape
    assert np.abs(got - fake).max() <= 0.05 * (1 + 1e-5)
    assert np.mean(got != fake) < 0.02



# -- IREE: a second TOSA consumer ---------------------------------------------------------------------


def _iree_compile_tool() -> str | None:
    here = Path(sys.executable).parent / "iree-compile"
    return str(here) if here.is_file() else shutil.which("iree-compile")


def _require_iree() -> None:
    """Skip when iree-base-compiler/-runtime are missing locally; in CI (``CI`` set) fail instead."""
    missing = [] if _iree_compile_tool() else ["iree-compile (iree-base-compiler)"]
    try:
        import iree.runtime  # noqa: F401
    except ImportError:
        missing.append("iree.runtime (iree-base-runtime)")
    if missing and os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed; the dev extra installs them")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")


def test_int8_mlir_compiles_and_runs_with_iree(tmp_path: Path) -> None:
    """IREE (iree-compile --iree-input-type=tosa, llvm-cpu) computes the same int8 logits bit for bit
    and the same probabilities (fp32 softmax: within float rounding)."""
    _require_iree()
    import iree.runtime as ireert

    graph = skriptnd.load(MODEL).compose(attribs={"batch": 10})
    integer = lower_quantized(graph)
    x = _samples()
    inputs = integer.quantize_inputs({"image": x})
    logits = integer.values["logits"].name
    for name, outputs in (("logits", [logits]), ("probabilities", None)):
        mlir, vmfb = tmp_path / f"{name}.mlir", tmp_path / f"{name}.vmfb"
        mlir.write_text(to_mlir(integer, outputs=outputs))
        proc = subprocess.run([_iree_compile_tool() or "iree-compile", "--iree-input-type=tosa",
                               "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                               "--iree-llvmcpu-target-cpu=generic", str(mlir), "-o", str(vmfb)],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0 and vmfb.is_file(), proc.stderr[-3000:]
        module = ireert.load_vm_flatbuffer_file(str(vmfb), driver="local-sync")
        result = module.main(*inputs)
        got = np.array(result.to_host(), copy=True)
        del result, module
        ours = integer.run({"image": x}, outputs=outputs)
        expected = ours[logits] if outputs else ours["probabilities"]
        if outputs:
            assert got.dtype == np.int8
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_graph_run_of_a_quantized_model_runs_the_integer_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """skriptnd.run does what `sknd run`'s default backend does: the integer TOSA graph."""
    from skriptnd.tosa.integer import lower as quantized

    graph = skriptnd.load(MODEL).compose()
    x = np.load(ROOT / "models" / "digits" / "samples" / "3.npy")
    expected = lower_quantized(graph).run({"image": x})["probabilities"]
    lowered: list[str] = []
    original = quantized.lower_quantized
    monkeypatch.setattr(quantized, "lower_quantized", lambda g, *a, **k: lowered.append(g.name) or original(g, *a, **k))
    np.testing.assert_array_equal(skriptnd.run(graph, {"image": x})["probabilities"], expected)
    assert lowered == [graph.name] and int(expected.argmax()) == 3
