"""The onnxruntime backend (skriptnd.backends.via_onnxruntime on skriptnd.interop.onnx_export) on imported
models with int64 inputs and GatherElements (issue 30: BERT's export was refused with E0840 because the
imported ``gather_elements`` had no ONNX mapping; GPT-2 and LLaMA had their int64 token ids fed as float).

The oracle is onnxruntime on the hand-built original ONNX model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import skriptnd
from skriptnd.interop.onnx_import import import_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_oracle import require_ort, run_onnx  # noqa: E402


def _model() -> tuple[object, dict[str, np.ndarray]]:
    """ids: int64[2, 6] -> Gather from an embedding table; GatherElements of the embeddings along the
    sequence by int64 positions; a Cast of the ids to float added in (the ids must arrive as integers)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    table = rng.standard_normal((11, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
        helper.make_node("GatherElements", ["emb", "pos"], ["picked"], axis=1),
        helper.make_node("Cast", ["ids"], ["idsf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["idsf", "axes"], ["idsu"]),
        helper.make_node("Add", ["picked", "idsu"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 6]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [2, 6, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 4])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([2], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    feeds = {"ids": rng.integers(0, 11, (2, 6)).astype(np.int64),
             "pos": rng.integers(0, 6, (2, 6, 4)).astype(np.int64)}
    return model, feeds


def test_int64_inputs_and_gather_elements_through_our_onnx_export(tmp_path: Path) -> None:
    require_ort()
    model, feeds = _model()
    expected = run_onnx(model, feeds)["y"]
    graph = skriptnd.load(import_model(model, tmp_path / "m")).compose()
    assert {t.dtype for t in graph.inputs} == {"int"}
    assert any(op.op == "ops.index.gather_elements" for op in graph.operations)
    got = skriptnd.run(graph, feeds, backend="onnxruntime")["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(skriptnd.run(graph, feeds)["y"], expected, rtol=1e-6, atol=1e-6)  # and numpy agrees
