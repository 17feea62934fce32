"""NNEF 1.x import: bad input is a located diagnostic (E0830-E0836) and nothing is written; custom fragments,
input shape overrides and the output folder rules."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import reference, write_graph
from test_nnef_import import _rand

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import import_nnef

CONV = """graph G( x ) -> ( y )
{
    x = external(shape = [1, 2, 6, 6]);
    w = variable(shape = [3, 2, 3, 3], label = 'conv/w');
    y = conv(x, w, 0.0, padding = []);
}
"""


def _fails(src: Path, out: Path, **kw) -> list:
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, out, **kw)
    assert not out.exists(), "nothing may be written"
    assert [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []
    return err.value.diagnostics


def test_unsupported_operations_are_listed_all_at_once_with_counts(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", """graph G( x, r, i ) -> ( y, z, u )
{
    x = external(shape = [1, 2, 6, 6]);
    r = external(shape = [2, 4]);
    i = external<integer>(shape = [2]);
    a = argmax_pool(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);
    b = argmax_pool(x, size = [1, 1, 3, 3], padding = []);
    y = sample(x, a, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);
    z = max_roi_pool(x, r, i, output_size = [2, 2]);
    u = relu(x);
}
""")
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0832"
    assert "4 operations cannot be imported: argmax_pool (2), max_roi_pool (1), sample (1)" in diag.message
    assert (diag.span.line, diag.span.col) == (8, 9)  # the first one (after the version line), at its name
    assert [n.span.line for n in diag.notes] == [8, 10, 11]
    assert "no standard SkriptND operator" in diag.notes[0].message


def test_syntax_error_is_located(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", "graph G( x ) -> ( y )\n{\n    x = external(shape = [1, 2]);\n"
                                      "    y = relu(x\n}\n")
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0831" and diag.span.file.endswith("graph.nnef")
    assert (diag.span.line, diag.span.col) == (7, 1)  # the version line and a blank line come first
    assert "expected token ')'" in diag.message


def test_undefined_operation_is_located(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", "graph G( x ) -> ( y )\n{\n    x = external(shape = [1, 2]);\n"
                                      "    y = frobnicate(x);\n}\n")
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0831" and (diag.span.line, diag.span.col) == (6, 9)
    assert "undefined operation 'frobnicate'" in diag.message


def test_truncated_tensor_file(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", CONV, {"conv/w": _rand(3, 2, 3, 3)})
    data = (src / "conv/w.dat").read_bytes()
    (src / "conv/w.dat").write_bytes(data[:-10])
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0833" and "conv/w.dat" in diag.message and (diag.span.line, diag.span.col) == (6, 9)


def test_missing_and_mismatched_tensor_files_are_all_reported(tmp_path: Path) -> None:
    text = CONV.replace("    y = conv", "    v = variable(shape = [3], label = 'v');\n    y = conv")
    src = write_graph(tmp_path / "m", text, {"v": _rand(4)})
    diags = _fails(src, tmp_path / "out")
    assert [d.code for d in diags] == ["E0833", "E0833"]
    assert "not found" in diags[0].message and "label 'conv/w'" in diags[0].message
    assert "float32[4]" in diags[1].message and "scalar[3]" in diags[1].message and diags[1].span.line == 7


def test_corrupt_header(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", CONV, {"conv/w": _rand(3, 2, 3, 3)})
    (src / "conv/w.dat").write_bytes(b"not a tensor file at all")
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0833"


def test_missing_model(tmp_path: Path) -> None:
    [diag] = _fails(tmp_path / "nowhere", tmp_path / "out")
    assert diag.code == "E0836"
    (tmp_path / "empty").mkdir()
    [diag] = _fails(tmp_path / "empty", tmp_path / "out")
    assert diag.code == "E0836" and "no graph.nnef" in diag.message


def test_nnef_package_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nnef", None)  # import nnef -> ImportError
    [diag] = _fails(tmp_path / "m", tmp_path / "out")
    assert diag.code == "E0830" and "pip install -e '.[nnef]'" in (diag.hint or "")


def test_shape_inference_failure_is_located(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", "graph G( x, z ) -> ( y )\n{\n    x = external(shape = [2, 3]);\n"
                                      "    z = external(shape = [4, 3]);\n    y = add(x, z);\n}\n")
    [diag] = _fails(src, tmp_path / "out")
    assert diag.code == "E0834" and diag.span.line == 7 and "broadcast" in diag.message


def test_non_empty_output_folder_is_refused(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", CONV, {"conv/w": _rand(3, 2, 3, 3)})
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, out)
    assert err.value.diagnostics[0].code == "E0790" and (out / "mine.txt").read_text() == "keep"


def test_weights_are_copied_byte_for_byte_and_graph_file_accepted(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", CONV, {"conv/w": _rand(3, 2, 3, 3)})
    out = import_nnef(src / "graph.nnef", tmp_path / "out")
    assert (out / "main.G.w.dat").read_bytes() == (src / "conv/w.dat").read_bytes()


def test_input_shapes_override(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", CONV, {"conv/w": _rand(3, 2, 3, 3)})
    out = import_nnef(src, tmp_path / "out", input_shapes={"x": [2, 2, 9, 7]})
    x = _rand(2, 2, 9, 7)
    y = skriptnd.run(skriptnd.load(out).compose(), {"x": x})["y"]
    assert y.shape == (2, 3, 9, 7)
    # the oracle on the same graph written with the new shape
    ref = write_graph(tmp_path / "ref", CONV.replace("[1, 2, 6, 6]", "[2, 2, 9, 7]"), {"conv/w": np.zeros(0)})
    (ref / "conv/w.dat").write_bytes((src / "conv/w.dat").read_bytes())
    np.testing.assert_allclose(y, reference(ref, [x])[0], rtol=1e-4, atol=1e-5)
    [diag] = _fails(src, tmp_path / "out2", input_shapes={"q": [1]})
    assert diag.code == "E0834" and "q" in diag.message


def test_names_that_are_not_skriptnd_identifiers_are_renamed(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", "graph G( nn ) -> ( type )\n{\n    nn = external(shape = [2]);\n"
                                      "    type = neg(nn);\n}\n")
    out = import_nnef(src, tmp_path / "out")
    text = (out / "main.sknd").read_text()
    assert "type -> type_" in text and "nn ->" not in text  # a module name is a valid tensor name
    x = _rand(2)
    np.testing.assert_array_equal(skriptnd.run(skriptnd.load(out).compose(), {"nn": x})["type_"], -x)


def test_outputs_that_are_declarations(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", "graph G( x ) -> ( v, c, y )\n{\n    x = external(shape = [2]);\n"
                                      "    v = variable(shape = [2], label = 'v');\n"
                                      "    c = constant(shape = [2], value = [1.5]);\n"
                                      "    y = add(x, v);\n}\n", {"v": _rand(2)})
    x = _rand(2)
    got = skriptnd.run(skriptnd.load(import_nnef(src, tmp_path / "out")).compose(), {"x": x})
    for name, want in zip(["v", "c", "y"], reference(src, [x]), strict=True):
        np.testing.assert_allclose(got[name], want, rtol=1e-6)
