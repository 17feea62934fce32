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


def _dynamic_batch_cnn(path: Path) -> Path:
    """Conv -> Relu -> MaxPool with a symbolic batch: MaxPool's geometry needs the static shape."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 4, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_the_hint_is_an_input_shape_to_copy_and_it_works(tmp_path: Path) -> None:
    model = _dynamic_batch_cnn(tmp_path / "m.onnx")
    with pytest.raises(DiagnosticError) as err:
        import_onnx(model, tmp_path / "a")
    (d,) = err.value.diagnostics
    if d.code != "E0808":  # the importer may come to keep the batch symbolic (issue 25): then nothing to hint
        pytest.skip(f"imports without fixing the shape now ({d.code})")
    m = re.search(r"--input-shape (\w+)=([\d,]+)", d.hint or "")
    assert m and m.group(1) == "x" and m.group(2) == "1,1,8,8", d.hint
    assert "--fold-constants" not in d.hint  # a MaxPool's geometry is a shape: folding cannot help
    shapes = {m.group(1): [int(v) for v in m.group(2).split(",")]}
    folder = import_onnx(model, tmp_path / "b", input_shapes=shapes).path  # the hint, as given, imports it
    graph = skriptnd.load(folder).compose()
    assert [int(d) for d in graph.outputs[0].shape] == [1, 4, 4, 4]
