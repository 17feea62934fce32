"""Dynamic-range (hybrid) TFLite models (issue 27): int8 weights with scales read by CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED and BATCH_MATMUL whose input and output are float. LiteRT quantizes the input on the fly; the
import reproduces it (ops/_hybrid.py). Oracle: ai-edge-litert's interpreter with its default kernels, and with
its reference kernels (BUILTIN_REF) for `reference_kernels=True`: the two differ by a quantization step where the
reference kernel quantizes symmetrically, so each must match its own."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tflite_import import _run_imported, one_op
from tflite_oracle import builtin_options, pack, run_litert, schema, unpack

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.tflite_import.importer import import_tflite


def hybrid_model(builtin: str, x_shape: list[int], w_shape: list[int], axis: int, scales: list[float],
                 out_shape: list[int], options: Any, seed: int = 0, bias: bool = True) -> bytes:
    """A one-operator model whose input 1 is int8 codes with `scales` (per channel along `axis` when several),
    a float input 0 and (with `bias`) a float bias over the output's last axis."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-127, 128, w_shape).astype(np.int8)
    inputs = [(x_shape, None), ([], codes)]
    if bias:
        inputs.append(([], rng.standard_normal(out_shape[-1]).astype(np.float32)))
    model = unpack(one_op(builtin, inputs, [out_shape], options))
    q = schema().QuantizationParametersT()
    q.scale, q.zeroPoint, q.quantizedDimension = list(scales), [0] * len(scales), axis
    model.subgraphs[0].tensors[1].quantization = q
    return pack(model)


def _check(data: bytes, x: np.ndarray, tmp_path: Path, reference: bool) -> float:
    """The imported model against LiteRT (its default or reference kernels); the largest difference relative
    to the output's magnitude."""
    expected = next(iter(run_litert(data, [x], "BUILTIN_REF" if reference else "AUTO").values()))
    out = Path(tempfile.mkdtemp(dir=tmp_path)) / "m"  # hypothesis reuses tmp_path
    import_tflite(data, out, reference_kernels=reference)
    got = next(iter(_run_imported(out, [x]).values()))
    assert got.shape == expected.shape
    return float(np.abs(got - expected).max() / max(1.0, float(np.abs(expected).max())))


def _per(n: int, per_channel: bool) -> list[float]:
    return list(np.linspace(0.004, 0.02, n)) if per_channel else [0.011]


CASES = {
    "fc_symmetric": lambda pc: ("FULLY_CONNECTED", [3, 5], [4, 5], 0, _per(4, pc), [3, 4],
                                builtin_options("FullyConnectedOptions", fusedActivationFunction=1)),
    "fc_asymmetric_rank3": lambda pc: ("FULLY_CONNECTED", [2, 3, 5], [4, 5], 0, _per(4, pc), [2, 3, 4],
                                       builtin_options("FullyConnectedOptions", asymmetricQuantizeInputs=True,
                                                keepNumDims=True)),
    "conv_same_strided": lambda pc: ("CONV_2D", [2, 7, 7, 3], [4, 3, 3, 3], 0, _per(4, pc), [2, 4, 4, 4],
                                     builtin_options("Conv2DOptions", padding=0, strideW=2, strideH=2,
                                              fusedActivationFunction=3)),
    "depthwise": lambda pc: ("DEPTHWISE_CONV_2D", [2, 6, 6, 4], [1, 3, 3, 8], 3, _per(8, pc), [2, 6, 6, 8],
                             builtin_options("DepthwiseConv2DOptions", padding=0, strideW=1, strideH=1, depthMultiplier=2)),
}


#: (case, per channel): LiteRT's hybrid depthwise convolution needs per-channel scales, so it has no per-tensor case
HYBRID_CASES = [pytest.param(case, pc, id=f"{case}-{'per_channel' if pc else 'per_tensor'}")
                for case in sorted(CASES) for pc in (True, False) if pc or case != "depthwise"]


@pytest.mark.parametrize("reference", [False, True], ids=["default_kernels", "reference_kernels"])
@pytest.mark.parametrize(("case", "per_channel"), HYBRID_CASES)
def test_hybrid_operator_matches_the_interpreter(case: str, per_channel: bool, reference: bool,
                                                 tmp_path: Path) -> None:
    builtin, xs, ws, axis, scales, out, options = CASES[case](per_channel)
    data = hybrid_model(builtin, xs, ws, axis, scales, out, options)
    x = (np.random.default_rng(1).standard_normal(xs) * 2 + 0.5).astype(np.float32)
    assert _check(data, x, tmp_path, reference) < 1e-5


@pytest.mark.parametrize("adj_y", [False, True])
def test_hybrid_batch_matmul(adj_y: bool, tmp_path: Path) -> None:
    data = hybrid_model("BATCH_MATMUL", [2, 3, 5], [4, 5] if adj_y else [5, 4], 0, [0.013], [2, 3, 4],
                        builtin_options("BatchMatMulOptions", adjY=adj_y), bias=False)
    x = (np.random.default_rng(2).standard_normal([2, 3, 5]) - 0.3).astype(np.float32)
    for reference in (False, True):
        assert _check(data, x, tmp_path, reference) < 1e-5


def test_the_two_kernel_sets_differ_where_the_reference_quantizes_symmetrically(tmp_path: Path) -> None:
    """Why `reference_kernels` exists: on a symmetric FULLY_CONNECTED LiteRT's default and reference kernels give
    results a quantization step apart, and each import matches only its own."""
    data = hybrid_model("FULLY_CONNECTED", [3, 5], [4, 5], 0, [0.01, 0.02, 0.015, 0.005], [3, 4],
                        builtin_options("FullyConnectedOptions"))
    x = (np.random.default_rng(3).standard_normal([3, 5]) + 1.0).astype(np.float32)
    default, reference = (next(iter(run_litert(data, [x], r).values())) for r in ("AUTO", "BUILTIN_REF"))
    assert np.abs(default - reference).max() > 1e-3
    out = tmp_path / "ref"
    import_tflite(data, out, reference_kernels=True)
    got = next(iter(_run_imported(out, [x]).values()))
    np.testing.assert_allclose(got, reference, atol=1e-5)
    assert np.abs(got - default).max() > 1e-3


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 4), depth=st.integers(1, 9), units=st.integers(1, 5), zero_row=st.booleans(),
       asym=st.booleans(), reference=st.booleans(), seed=st.integers(0, 2**16),
       offset=st.floats(-3, 3, allow_nan=False))
def test_hybrid_fully_connected_on_any_rows(rows: int, depth: int, units: int, zero_row: bool, asym: bool,
                                            reference: bool, seed: int, offset: float, tmp_path: Path) -> None:
    """Any shapes, inputs all of one sign (an asymmetric range pinned at 0), and all-zero rows (scale 1, codes 0)."""
    data = hybrid_model("FULLY_CONNECTED", [rows, depth], [units, depth], 0, list(np.linspace(0.003, 0.03, units)),
                        [rows, units], builtin_options("FullyConnectedOptions", asymmetricQuantizeInputs=asym), seed=seed)
    x = (np.random.default_rng(seed).standard_normal([rows, depth]) + offset).astype(np.float32)
    if zero_row:
        x[0] = 0.0
    assert _check(data, x, tmp_path, reference) < 1e-5


def test_int8_weights_with_an_int8_input_are_the_quantized_import(tmp_path: Path) -> None:
    """Only a float input makes an operator hybrid: int8 activations belong to the quantized import (a @quantize
    graph, tests/test_tflite_int8.py), whose linear layer reads the weights as real values with their entry."""
    data = hybrid_model("FULLY_CONNECTED", [3, 5], [4, 5], 0, [0.01], [3, 4], builtin_options("FullyConnectedOptions"))
    model = unpack(data)
    s = schema()
    for index in (0, 3):  # the input and the output
        t = model.subgraphs[0].tensors[index]
        t.type, t.quantization = 9, s.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [0.1], [0]
    import_tflite(pack(model), tmp_path / "out")
    text = (tmp_path / "out" / "main.sknd").read_text()
    assert "@quantize" in text and "nn.linear(" in text and "math.round" not in text


def test_weights_with_a_zero_point_are_refused(tmp_path: Path) -> None:
    """LiteRT's hybrid kernels read the codes as symmetric; a zero point would be ignored there, so it is refused
    here rather than given another meaning."""
    model = unpack(hybrid_model("FULLY_CONNECTED", [3, 5], [4, 5], 0, [0.01], [3, 4], builtin_options("FullyConnectedOptions")))
    model.subgraphs[0].tensors[1].quantization.zeroPoint = [3]
    with pytest.raises(DiagnosticError) as err:
        import_tflite(pack(model), tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0864" and "zero point" in err.value.diagnostics[0].message


def test_the_cli_imports_for_the_reference_kernels_on_request(tmp_path: Path) -> None:
    """`sknd import --reference-kernels` gives BUILTIN_REF's results; the option is a usage error for other
    formats."""
    data = hybrid_model("FULLY_CONNECTED", [3, 5], [4, 5], 0, [0.01, 0.02, 0.015, 0.005], [3, 4],
                        builtin_options("FullyConnectedOptions"))
    src = tmp_path / "fc.tflite"
    src.write_bytes(data)
    x = (np.random.default_rng(3).standard_normal([3, 5]) + 1.0).astype(np.float32)
    for flag, resolver in (([], "AUTO"), (["--reference-kernels"], "BUILTIN_REF")):
        out = tmp_path / f"m{len(flag)}"
        proc = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(src), "-o", str(out), *flag],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        got = next(iter(_run_imported(out, [x]).values()))
        np.testing.assert_allclose(got, next(iter(run_litert(data, [x], resolver).values())), atol=1e-5)
    (tmp_path / "g.nnef").write_text("version 1.0;\ngraph G( x ) -> ( y ) { x = external(shape = [1]); y = copy(x); }\n")
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(tmp_path / "g.nnef"), "-o",
                           str(tmp_path / "n"), "--reference-kernels"], capture_output=True, text=True)
    assert proc.returncode == 2 and "TFLite models only" in proc.stdout + proc.stderr
