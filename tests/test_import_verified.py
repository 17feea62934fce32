"""Hostile or odd models are located diagnostics, never internal errors, and an import that reports
success wrote a folder that checks and runs (issue 23, items 9 and 10).

Each case is the smallest model showing one problem; the expected values are worked out by hand (the
identity, the relu of known inputs) or are what onnxruntime computes for the same model.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import write_graph

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import import_nnef

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _sknd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=cwd)
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    return proc


def _save(path: Path, nodes: list, inits: list = (), outputs: list | None = None,
          inputs: list | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], list(inits))
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def _nothing_left(folder: Path, out: str) -> None:
    assert not (folder / out).exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(f".{out}.")]


# -- item 9 --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("delta", [8, -8])
def test_initializer_raw_data_not_matching_its_dims(tmp_path: Path, delta: int) -> None:
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.raw_data = w.raw_data + bytes(delta) if delta > 0 else w.raw_data[:delta]
    src = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w])
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1 and f"{src}:1:1" in proc.stderr and "E0803" in proc.stderr
    assert f"holds {16 + delta} bytes of raw data" in proc.stderr or "too small" in proc.stderr
    _nothing_left(tmp_path, "out")


def test_a_string_attribute_that_is_not_utf8(tmp_path: Path) -> None:
    scales = numpy_helper.from_array(np.ones(1, np.float32), "s")
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="resize", mode="nearest")
    node.attribute[0].s = b"\xff\xfe"
    src = _save(tmp_path / "m.onnx", [node], [scales])
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1 and "E0803" in proc.stderr and "attribute 'mode' is not UTF-8" in proc.stderr
    _nothing_left(tmp_path, "out")


def test_check_refuses_an_int_constant_beyond_int32(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    text = ("import layout;\ngraph G {\n    @input { x: real[8]; }\n    @output { y: real[2]; }\n"
            "    @constant { i: int[2] = [0, VALUE]; }\n    @compose { y = layout.gather{axis=0}(x, i); }\n}\n")
    (tmp_path / "m" / "main.sknd").write_text(text.replace("VALUE", "4294967296"))
    proc = _sknd("check", str(tmp_path / "m"))
    assert proc.returncode == 1 and "E0502" in proc.stderr and f"{tmp_path / 'm' / 'main.sknd'}:5:17" in proc.stderr
    assert "4294967296" in proc.stderr
    proc = _sknd("run", str(tmp_path / "m"), "--random-inputs")
    assert proc.returncode == 1 and "E0502" in proc.stderr
    # the control: the int32 extremes are fine
    (tmp_path / "m" / "main.sknd").write_text(text.replace("[0, VALUE]", "[-2147483648, 2147483647]"))
    assert _sknd("check", str(tmp_path / "m")).returncode == 0


def test_an_imported_gather_with_indices_beyond_int32(tmp_path: Path) -> None:
    indices = helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array([0, 2**32], np.int64)))
    gather = helper.make_node("Gather", ["x", "i"], ["y"], name="g", axis=0)
    src = _save(tmp_path / "m.onnx", [indices, gather],
                inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1 and f"{src}:1:1" in proc.stderr and "E0794" in proc.stderr
    assert "4294967296" in proc.stderr
    _nothing_left(tmp_path, "out")


def _usage_text(stderr: str) -> str:
    """A usage error's words without the panel's frame and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", stderr).split())


def test_import_output_paths_that_cannot_be_written(tmp_path: Path) -> None:
    """E0790 is about the -o argument, not a source file: a usage error (exit 2) naming the option, the path
    and the fix, with no made-up file:line:col."""
    src = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"], name="r")])
    proc = _sknd("import", str(src), "-o", "/proc/x")
    said = _usage_text(proc.stderr)
    assert proc.returncode == 2 and "E0790" in said and "'-o' / '--output'" in said and "/proc/x cannot be" in said
    assert not re.search(r":\d+:\d+", proc.stderr), proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _sknd("import", str(src), "-o", ".", cwd=empty)
    said = _usage_text(proc.stderr)
    assert proc.returncode == 2 and "E0790" in said and "current folder" in said and "-o ./model" in said
    assert list(empty.iterdir()) == []
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep")
    proc = _sknd("import", str(src), "-o", str(full))
    said = _usage_text(proc.stderr)
    assert proc.returncode == 2 and "not empty" in said and "choose a new or empty folder" in said
    assert (full / "mine.txt").read_text() == "keep" and len(list(full.iterdir())) == 1
    proc = _sknd("import", str(src), "-o", str(tmp_path / "no" / "model"))
    said = _usage_text(proc.stderr)
    assert proc.returncode == 2 and "does not exist (create it first)" in said
    # the control: a new folder inside the current one is written
    proc = _sknd("import", str(src), "-o", "model", cwd=empty)
    assert proc.returncode == 0 and (empty / "model" / "main.sknd").is_file()


# -- item 10 -------------------------------------------------------------------------------------------------

def _run(folder: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    return skriptnd.run(skriptnd.load(folder).compose(), {"x": x})


def test_two_onnx_nodes_of_the_same_name_import_and_run(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "x"], ["y"], name="n"), helper.make_node("Relu", ["y"], ["z"], name="n")]
    src = _save(tmp_path / "m.onnx", nodes, outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])])
    _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert _sknd("check", str(tmp_path / "out")).returncode == 0
    x = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    np.testing.assert_array_equal(_run(tmp_path / "out", x)["z"], [0.0, 1.0, 4.0, 0.0])


def test_an_onnx_graph_whose_output_is_its_input(tmp_path: Path) -> None:
    src = _save(tmp_path / "m.onnx", [], outputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])])
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert _sknd("check", str(tmp_path / "out")).returncode == 0
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    (out,) = _run(tmp_path / "out", x).values()
    np.testing.assert_array_equal(out, x)


QUANT_GRAPH = "graph G( x ) -> ( y )\n{\n    x = external(shape = [4]);\n    y = relu(x);\n}\n"


@pytest.mark.parametrize(("entry", "why"), [
    ("zero_point_linear_quantize(zero_point = 0, scale = 0.0, bits = 8, signed = true, symmetric = false)",
     "scale must be positive"),
    ("zero_point_linear_quantize(zero_point = 0, scale = -1.0, bits = 8, signed = true, symmetric = false)",
     "scale must be positive"),
    ("zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 1000, signed = true, symmetric = false)",
     "1 to 32 bits"),
    ("min_max_linear_quantize(min = 1.0, max = 0.0, bits = 8, signed = true, symmetric = false)",
     "max must be greater than min"),
    ("min_max_linear_quantize(min = 1.0, max = 1.0, bits = 8, signed = true, symmetric = false)",
     "max must be greater than min"),
])
def test_an_nnef_graph_quant_that_could_not_run_is_refused_at_its_line(tmp_path: Path, entry: str, why: str) -> None:
    src = write_graph(tmp_path / "m", QUANT_GRAPH)
    (src / "graph.quant").write_text(f'"x": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, '
                                     f'signed = true, symmetric = false);\n"y": {entry};\n')
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    (diag,) = err.value.diagnostics
    assert diag.code == "E0835" and diag.span.file == str(src / "graph.quant") and diag.span.line == 2
    assert why in diag.message
    _nothing_left(tmp_path, "out")


def test_a_valid_nnef_graph_quant_still_imports_and_runs(tmp_path: Path) -> None:
    """The control: scale 0.5, 8 bits signed: relu then fake quantization to multiples of 0.5 in [-64, 63.5]."""
    src = write_graph(tmp_path / "m", QUANT_GRAPH)
    (src / "graph.quant").write_text('"y": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, '
                                     'signed = true, symmetric = false);\n')
    out = import_nnef(src, tmp_path / "out")
    got = _run(out, np.array([-1.0, 0.3, 0.8, 100.0], np.float32))["y"]
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0, 63.5])
