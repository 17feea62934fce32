"""E0808 (a shape SkriptND needs at import time is dynamic) gives a fix to copy (issue 25): an --input-shape for
each input with dynamic dimensions, and --fold-constants only where it was not given."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from onnx_models import require_onnx

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.onnx_import import import_onnx


def _dynamic_cnn(path: Path, dims: list) -> Path:
    """Conv -> Relu -> MaxPool (1x2 windows) on an input of shape `dims` (names are dim_params)."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[1, 2], strides=[1, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, "ho", "wo"])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_symbolic_batch_goes_through_maxpool(tmp_path: Path) -> None:
    """The batch is a graph attribute; the MaxPool's geometry needs only the spatial extents (issue 25: this
    stopped with E0808 'the shape of ... [batch, 4, 8, 8] must be known at import time')."""
    model = _dynamic_cnn(tmp_path / "m.onnx", ["batch", 1, 8, 8])
    result = import_onnx(model, tmp_path / "a")
    assert result.attribs == ["batch"]
    for batch in (1, 3):
        graph = skriptnd.load(result.path).compose(attribs={"batch": batch})
        assert [int(d) for d in graph.outputs[0].shape] == [batch, 4, 8, 4]


def test_the_hint_names_the_dimension_and_is_an_input_shape_to_copy(tmp_path: Path) -> None:
    """A dynamic extent that a MaxPool needs: the diagnostic names the input and dimension, and its hint fixes
    that one only (the batch keeps its name) and imports as given."""
    model = _dynamic_cnn(tmp_path / "m.onnx", ["batch", 1, "h", 8])
    with pytest.raises(DiagnosticError) as err:
        import_onnx(model, tmp_path / "a")
    (d,) = err.value.diagnostics
    assert d.code == "E0808"
    assert "dimension 2 ('h') of input 'x'" in d.message, d.message
    m = re.search(r"--input-shape (\w+)=([\w,]+)", d.hint or "")
    assert m and m.group(1) == "x" and m.group(2) == "batch,1,1,8", d.hint
    assert "--fold-constants" not in d.hint  # a MaxPool's geometry is a shape: folding cannot help
    shapes = {m.group(1): [int(v) if v.isdigit() else v for v in m.group(2).split(",")]}
    result = import_onnx(model, tmp_path / "b", input_shapes=shapes)  # the hint, as given, imports it
    assert result.attribs == ["batch"]
    graph = skriptnd.load(result.path).compose(attribs={"batch": 2})
    assert [int(d) for d in graph.outputs[0].shape] == [2, 4, 1, 4]


@pytest.mark.parametrize("fold", [False, True])
def test_fold_constants_is_suggested_only_when_not_given(tmp_path: Path, fold: bool) -> None:
    """A Reshape's shape computed from a run-time input: E0808; its hint offers --fold-constants only to an
    import that did not ask for it (issue 25)."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    nodes = [helper.make_node("Add", ["n", "one"], ["s"], name="add"),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
                                           helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["k"])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(DiagnosticError) as err:
        import_onnx(tmp_path / "m.onnx", tmp_path / "a", fold_constants=fold)
    (d,) = err.value.diagnostics
    assert d.code == "E0808" and "target shape" in d.message
    assert ("--fold-constants" in d.hint) is not fold, d.hint
