"""`sknd export --tosa-mlir/--tosa-flatbuffer` (skriptnd.tosa.mlir.export).

The digits model is exported to TOSA 1.0 MLIR; tosa-tools' ``tosa-opt`` parses and validates it and
serializes it to a flatbuffer, which the TOSA reference model executes (in a subprocess: it may abort the
process) on sample images; its outputs must match ``compose().run`` (rtol 1e-4). A graph with an operation
that is not legalized is refused with a located diagnostic (exit 1, no traceback, nothing written).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.tosa.mlir.export import to_flatbuffer, to_mlir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tosa_oracle import require_tosa_opt, run_flatbuffer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"
SAMPLES = DIGITS / "samples"

def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def _model(tmp_path: Path, source: str) -> Path:
    """A model folder holding ``source`` as its main.sknd."""
    model = tmp_path / "m"
    model.mkdir()
    (model / "main.sknd").write_text(source)
    return model


@pytest.fixture(scope="module")
def tools() -> None:
    require_tosa_opt()


def test_digits_mlir_is_accepted_and_matches_sknd_run(tmp_path: Path, tools: None) -> None:
    out = tmp_path / "digits.mlir"
    proc = sknd("export", str(DIGITS), "--tosa-mlir", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert 'func.func"() <{function_type = (tensor<1x1x8x8xf32>) -> (tensor<1x10xf32>), sym_name = "main"}>' in text
    for op in ("tosa.conv2d", "tosa.clamp", "tosa.max_pool2d", "tosa.reshape", "tosa.matmul", "tosa.reduce_max",
               "tosa.exp", "tosa.reciprocal", "tosa.mul", "tosa.const", "tosa.const_shape"):
        assert f'"{op}"(' in text, op
    fb = tmp_path / "digits.tosa"
    fb.write_bytes(to_flatbuffer(text))  # tosa-opt: parse, --tosa-validate (pro_fp), --tosa-serialize
    graph = skriptnd.load(DIGITS).compose()
    for sample in ("3.npy", "7.npy"):
        x = np.load(SAMPLES / sample).astype(np.float32).reshape(1, 1, 8, 8)
        expected = np.asarray(skriptnd.run(graph, {"image": x})["probabilities"])
        got = run_flatbuffer(fb, [x], tmp_path)
        np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-4, atol=1e-7)


def test_flatbuffer_option_batch_attribute(tmp_path: Path, tools: None) -> None:
    fb, mlir = tmp_path / "d.tosa", tmp_path / "d.mlir"
    proc = sknd("export", str(DIGITS), "--attrib", "batch=2", "--tosa-flatbuffer", str(fb), "--tosa-mlir", str(mlir))
    assert proc.returncode == 0, proc.stderr
    assert "tensor<2x1x8x8xf32>" in mlir.read_text()
    graph = skriptnd.load(DIGITS).compose(attribs={"batch": 2})
    x = np.stack([np.load(SAMPLES / f"{i}.npy").astype(np.float32).reshape(1, 8, 8) for i in (1, 2)])
    expected = np.asarray(skriptnd.run(graph, {"image": x})["probabilities"])
    np.testing.assert_allclose(run_flatbuffer(fb, [x], tmp_path).reshape(expected.shape), expected,
                               rtol=1e-4, atol=1e-7)


def test_unlegalized_operation_is_a_located_diagnostic(tmp_path: Path) -> None:
    model = _model(tmp_path, (
        "import quant;\ngraph G {\n    @input { x: real[1,2,8]; w: real[4,2,3]; }\n    @output { y: real[1,2,8]; }\n"
        "    @compose {\n        y = quant.min_max_linear_quantize{min=[-1.0, -1.0], max=[2.0, 2.0], bits=8}(x);\n"
        "    }\n}\n"))
    out = tmp_path / "out.mlir"
    out.write_text("old")
    proc = sknd("export", str(model), "--tosa-mlir", str(out), "--color", "never")
    assert proc.returncode == 1, proc.stderr
    assert "E0750" in proc.stderr and "quant.min_max_linear_quantize" in proc.stderr
    assert "not a power of two" in proc.stderr
    assert "main.sknd:6:" in proc.stderr
    assert out.read_text() == "old"  # nothing written
    with pytest.raises(skriptnd.diagnostics.DiagnosticError):
        to_mlir(skriptnd.load(model).compose())


def test_dynamic_output_points_at_its_declaration(tmp_path: Path) -> None:
    """A graph output of dynamic shape cannot be a TOSA result: the diagnostic names its @output line."""
    model = _model(tmp_path, (
        "import layout;\ngraph G {\n    @input { x: real[6]; }\n    @output { y: int[~, 1]; }\n"
        "    @compose { y = layout.nonzero(x); }\n}\n"))
    proc = sknd("export", str(model), "--tosa-mlir", str(tmp_path / "o.mlir"), "--color", "never")
    assert proc.returncode == 1, proc.stderr
    assert "main.sknd:4:15: error[E0750]: graph output 'y'" in proc.stderr, proc.stderr
    assert "<graph>" not in proc.stderr
    assert not (tmp_path / "o.mlir").exists()


def test_stateful_graph_points_at_the_updated_variable(tmp_path: Path) -> None:
    model = _model(tmp_path, (
        "import math;\ngraph Counter {\n    @input { x: real[3]; }\n    @output { y: real[3]; }\n"
        "    @variable { total: real[3]; }\n    @compose { y = math.add(total, x); }\n"
        "    @update { total = y; }\n}\n"))
    proc = sknd("export", str(model), "--tosa-mlir", str(tmp_path / "o.mlir"), "--random-weights", "--color", "never")
    assert proc.returncode == 1, proc.stderr
    assert "main.sknd:5:17: error[E0750]: the graph updates variable 'total'" in proc.stderr, proc.stderr
    assert not (tmp_path / "o.mlir").exists()


def test_needs_an_output_option() -> None:
    proc = sknd("export", str(DIGITS))
    assert proc.returncode == 2
