"""Dynamic batch in TFLite models (issue 27): -1 in an input's shape_signature becomes the graph attribute
`batch`; the imported model runs at several batches against LiteRT resized to the same
(resize_tensor_input + allocate_tensors). Where an operator could look into the batch, the model is imported at
the file's extents instead, and another batch is refused rather than computed wrongly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_tflite_import import DATA, ROOT, one_op
from tflite_oracle import builtin_options, pack, require_litert, unpack

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.tflite_import.importer import import_tflite


def _litert_at(model: Path | bytes, x: np.ndarray) -> np.ndarray:
    """LiteRT's only output for `x`, its input resized to x's shape first."""
    interpreter = require_litert()
    it = interpreter.Interpreter(**({"model_content": model} if isinstance(model, bytes) else
                                    {"model_path": str(model)}), num_threads=1)
    detail = it.get_input_details()[0]
    it.resize_tensor_input(detail["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(detail["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("name", ["dynamic_cnn", "dynamic_cnn_dr8"])
def test_a_dynamic_batch_runs_at_any_batch(name: str, tmp_path: Path) -> None:
    path = DATA / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"{path} not made (python benchmarks/zoo/make_tflite.py --ci)")
    import_tflite(path, tmp_path / "m")
    text = (tmp_path / "m" / "main.sknd").read_text()
    assert "batch: int = 1;" in text and "args_0: real[batch, 3, 16, 16];" in text
    model = skriptnd.load(tmp_path / "m")
    for batch in (1, 3, 6):
        x = np.random.default_rng(batch).standard_normal([batch, 3, 16, 16]).astype(np.float32)
        graph = model.compose(attribs={"batch": batch})
        got = skriptnd.run(graph, {"args_0": x})["output_0"]
        expected = _litert_at(path, x)
        assert got.shape == expected.shape == (batch, 5)
        np.testing.assert_allclose(got, expected, atol=1e-5)


def _with_dynamic_batch(data: bytes) -> bytes:
    model = unpack(data)
    sub = model.subgraphs[0]
    for i in sub.inputs:
        t = sub.tensors[i]
        t.shapeSignature = [-1, *t.shape[1:]]
    return pack(model)


def test_fully_connected_keeping_its_dims_reshapes_by_the_batch(tmp_path: Path) -> None:
    """FULLY_CONNECTED flattens its input to [-1, in] and, with keep_num_dims, gives the leading axes back: with a
    dynamic batch neither reshape may name the file's batch."""
    w = np.random.default_rng(0).standard_normal([4, 5]).astype(np.float32)
    data = _with_dynamic_batch(one_op("FULLY_CONNECTED", [([2, 3, 5], None), ([], w)], [[2, 3, 4]],
                                      builtin_options("FullyConnectedOptions", keepNumDims=True)))
    import_tflite(data, tmp_path / "m")
    model = skriptnd.load(tmp_path / "m")
    for batch in (2, 5):
        x = np.random.default_rng(batch).standard_normal([batch, 3, 5]).astype(np.float32)
        got = skriptnd.run(model.compose(attribs={"batch": batch}), {"in0": x})["out0"]
        np.testing.assert_allclose(got, _litert_at(data, x), atol=1e-5)


@pytest.mark.parametrize("case", ["reshape", "reduce_over_batch", "transpose_moves_batch", "not_the_batch_axis"])
def test_a_model_that_looks_into_the_batch_is_imported_static(case: str, tmp_path: Path) -> None:
    """Operators whose result depends on the batch's extent (a RESHAPE with a constant shape, a reduction or a
    transpose over axis 0), and -1 on another axis than 0: imported at the file's extents, and another batch is
    refused (E0-coded diagnostic), never computed wrongly."""
    if case == "reshape":
        data = one_op("RESHAPE", [([2, 6], None), ([], np.array([4, 3], np.int32))], [[4, 3]])
    elif case == "reduce_over_batch":
        data = one_op("SUM", [([2, 3], None), ([], np.array([0], np.int32))], [[3]], builtin_options("ReducerOptions"))
    elif case == "transpose_moves_batch":
        data = one_op("TRANSPOSE", [([2, 3], None), ([], np.array([1, 0], np.int32))], [[3, 2]])
    else:
        data = one_op("RELU", [([2, 3], None)], [[2, 3]])
    model = unpack(_with_dynamic_batch(data))
    if case == "not_the_batch_axis":
        model.subgraphs[0].tensors[0].shapeSignature = [2, -1]
    import_tflite(pack(model), tmp_path / "m")
    text = (tmp_path / "m" / "main.sknd").read_text()
    assert "batch" not in text and "in0: real[2, " in text
    with pytest.raises(DiagnosticError):
        graph = skriptnd.load(tmp_path / "m").compose()
        skriptnd.run(graph, {"in0": np.ones([3, *graph.inputs[0].shape[1:]], np.float32)})


def test_the_cli_names_the_batch_attribute(tmp_path: Path) -> None:
    path = DATA / "dynamic_cnn.tflite"
    if not path.exists():
        pytest.skip(f"{path} not made (python benchmarks/zoo/make_tflite.py --ci)")
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(path), "-o", str(tmp_path / "m")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "graph attributes: batch" in proc.stdout + proc.stderr
