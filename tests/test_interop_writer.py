"""skriptnd.interop.writer: the model folders every importer writes (text in house style, atomic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.writer import (
    Attrib,
    Call,
    Expr,
    GraphText,
    ModelFolder,
    Names,
    TensorDecl,
    literal,
    write_model,
)


def _graph(arg: str = "x") -> GraphText:
    return GraphText(
        name="G", attribs=[Attrib("batch", "int", 2)],
        inputs=[TensorDecl(arg, "real", [Expr("batch"), 3])], outputs=[TensorDecl("y", "real", [Expr("batch"), 3])],
        constants=[TensorDecl("c", "real", [3], [1.0, -2.0, 0.5])], variables=[TensorDecl("w", "real", [3])],
        body=[Call(["t"], "math.mul", [arg, "w"], label="scale"), Call(["y"], "math.add", ["t", "c"])])


def test_written_folder_runs(tmp_path: Path) -> None:
    w = np.array([2.0, 3.0, 4.0], np.float32)
    out = write_model(ModelFolder(_graph(), {"w": w}), tmp_path / "m")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = skriptnd.run(skriptnd.load(out).compose(), {"x": x})["y"]
    np.testing.assert_array_equal(y, x * w + np.array([1.0, -2.0, 0.5], np.float32))
    assert "scale: math.mul" in (out / "main.sknd").read_text()


def test_names_are_sanitized_and_unique() -> None:
    names = Names(["y"])
    assert names("/conv1/Conv_output_0") == "conv1_Conv_output_0"
    assert names("y") == "y_2"  # taken
    assert names("nn") == "nn"  # a module name is a valid tensor name: `nn.relu(nn)` calls the operator
    assert names("type") == "type_"  # a reserved word is not
    assert names("1x") == "t_1x"
    assert names("/conv1/Conv_output_0") == "conv1_Conv_output_0"  # stable
    assert names.renamed == {"/conv1/Conv_output_0": "conv1_Conv_output_0", "y": "y_2", "type": "type_", "1x": "t_1x"}


def test_literals() -> None:
    assert literal([1, 2.0, True, "a'b", float("-inf")]) == "[1, 2.0, true, 'a\\'b', -inf]"
    assert literal(np.float32(0.5)) == "0.5" and literal(1e-20) == "1e-20"
    with pytest.raises(ValueError):
        literal(float("nan"))


def test_nonempty_target_is_refused_and_nothing_written(tmp_path: Path) -> None:
    target = tmp_path / "m"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(DiagnosticError) as err:
        write_model(ModelFolder(_graph(), {"w": np.ones(3, np.float32)}), target)
    assert "not empty" in err.value.diagnostics[0].message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"] and (target / "keep.txt").read_text() == "mine"


def test_failure_midway_leaves_nothing(tmp_path: Path) -> None:
    bad = ModelFolder(_graph(), {"w": np.array(["not", "numbers", "!"])})  # the tensor file format refuses str
    with pytest.raises(Exception):  # noqa: B017 - whatever the tensor writer raises, nothing may remain
        write_model(bad, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_unparsable_text_is_a_bug_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        write_model(ModelFolder(_graph(arg="x"), modules={"ops/bad.sknd": "operator {"}), tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_several_outputs_and_packs_render_in_the_grammar_form() -> None:
    assert Call(["m", "v"], "math.moments", ["x"]).text() == "m, v = math.moments(x);"
    assert Call([["a", "b"]], "layout.split", ["x"], {"axis": 0, "count": 2}).text() == \
        "[a, b] = layout.split{axis=0, count=2}(x);"


def test_call_with_several_results_renders_as_the_grammar_reads_it() -> None:
    from skriptnd.interop.writer import Call, render

    call = Call(["values", "indices"], "algo.top_k", ["x"], {"k": 2, "axis": 1})
    assert call.text() == "values, indices = algo.top_k{k=2, axis=1}(x);"
    text = ("import algo;\ngraph G {\n    @input {\n        x: real[1, 4];\n    }\n    @output {\n"
            "        values: real[1, 2];\n        indices: int[1, 2];\n    }\n    @compose {\n        "
            + call.text() + "\n    }\n}\n")
    assert "values, indices = algo.top_k" in render(text, "g.sknd")
