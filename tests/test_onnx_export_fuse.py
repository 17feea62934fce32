"""What onnxruntime runs of our ONNX export of an imported model (issue 28): a clamp with constant bounds is one
Clip, and an imported HardSwish / HardSigmoid comes back as HardSwish / HardSigmoid (skriptnd.interop.onnx_export
.fuse), not as four element-wise nodes, with the same values (onnxruntime on the original, and skriptnd.run)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import skriptnd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_oracle import assert_close, require_ort, run_onnx  # noqa: E402
from test_onnx_export_ops import graph_of  # noqa: E402

ZOO = Path(__file__).resolve().parent / "data" / "zoo"


@pytest.fixture(scope="module", autouse=True)
def _ort() -> None:
    require_ort()


def _ops(model: Any) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in model.graph.node)


def test_an_imported_mobilenet_v3_exports_its_hard_activations_as_onnx_has_them(tmp_path: Path) -> None:
    import onnx

    from skriptnd.interop.onnx_export import to_onnx

    original = ZOO / "ci_mobilenet_v3_se.onnx"
    folder = tmp_path / "m"
    skriptnd.import_model(str(original), str(folder))
    graph = skriptnd.load(folder).compose()
    model = to_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    ours, theirs = _ops(model), _ops(onnx.load(str(original)))
    assert theirs["HardSwish"] > 0 and theirs["HardSigmoid"] > 0
    assert ours["HardSwish"] == theirs["HardSwish"] and ours["HardSigmoid"] == theirs["HardSigmoid"]
    assert ours["Where"] == ours["Greater"] == ours["Less"] == ours["Clip"] == 0
    assert ours["Conv"] == theirs["Conv"]
    feeds = dict(np.load(ZOO / "ci_mobilenet_v3_se.inputs.npz"))
    got = run_onnx(model, feeds)
    expected = run_onnx(onnx.load(str(original)), feeds)
    for name, value in expected.items():
        assert_close(got[name], value, 1e-5)
    np.testing.assert_allclose(got[next(iter(expected))], skriptnd.run(graph, feeds)[graph.output_name(0)],
                               rtol=0, atol=1e-4 * float(np.abs(next(iter(expected.values()))).max()))


def test_a_clamp_with_constant_bounds_is_one_clip(tmp_path: Path) -> None:
    from skriptnd.interop.onnx_export import to_onnx

    g = graph_of({"x": "real[2,5]"}, {"y": "real[2,5]", "z": "real[2,5]"},
                 "y = math.clamp(x, -1.0, 0.5); z = math.clamp(x, 0.5, -1.0);", tmp_path)
    model = to_onnx(g)
    ops = _ops(model)
    assert ops["Clip"] == 1  # y; z's bounds are the wrong way round, where Clip and clamp differ
    assert ops["Where"] == 2
    x = np.array([[-3.0, -1.0, -0.0, 0.5, 2.0], [0.25, -0.75, 0.0, 1e30, -1e30]], np.float32)
    got, expected = run_onnx(model, {"x": x}), skriptnd.run(g, {"x": x})
    for name in ("y", "z"):
        np.testing.assert_array_equal(got[name], expected[name])


def _node(op: str, inputs: list[str], output: str, **attrs: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, inputs, [output], name=output, **attrs)


def _chain(alpha: float, then_mul: bool = True) -> tuple[list[Any], list[Any]]:
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.full((1, 1), alpha, np.float32), "alpha"),
             numpy_helper.from_array(np.full((1, 1), 0.5, np.float32), "beta"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(1.0, np.float32), "hi")]
    nodes = [_node("Mul", ["x", "alpha"], "m"), _node("Add", ["m", "beta"], "a"), _node("Clip", ["a", "lo", "hi"], "c")]
    if then_mul:
        nodes.append(_node("Mul", ["x", "c"], "y"))
    return nodes, inits


def test_the_chains_become_hardswish_and_hardsigmoid() -> None:
    from skriptnd.interop.onnx_export import fuse

    shapes = {"x": (2, 3), "c": (2, 3), "y": (2, 3)}
    nodes, inits = _chain(float(np.float32(1 / 6)))
    fused = fuse.hard_activations(nodes, inits, shapes, ["y"])
    assert [(n.op_type, list(n.input), list(n.output)) for n in fused] == [("HardSwish", ["x"], ["y"])]
    assert fuse.read_initializers(fused, inits, ["y"]) == []
    nodes, inits = _chain(0.2)  # not HardSwish's alpha: HardSigmoid, then the Mul
    fused = fuse.hard_activations(nodes, inits, shapes, ["y"])
    assert [n.op_type for n in fused] == ["HardSigmoid", "Mul"]
    attrs = {a.name: a.f for a in fused[0].attribute}
    assert attrs == pytest.approx({"alpha": 0.2, "beta": 0.5})


@pytest.mark.parametrize("case", ["extra reader", "graph output", "subgraph reader", "broadcast", "unknown shape"])
def test_a_chain_whose_values_are_needed_elsewhere_stays(case: str) -> None:
    from onnx import helper

    from skriptnd.interop.onnx_export import fuse

    nodes, inits = _chain(float(np.float32(1 / 6)))
    shapes = {"x": (2, 3), "c": (2, 3), "y": (2, 3)}
    outputs = ["y"]
    if case == "extra reader":
        nodes.append(_node("Neg", ["a"], "n"))
        outputs.append("n")
    elif case == "graph output":
        outputs.append("m")
    elif case == "subgraph reader":  # an If branch reads 'a' by name from the outer graph
        branch = helper.make_graph([_node("Identity", ["a"], "b")], "branch", [],
                                   [helper.make_tensor_value_info("b", 1, None)])
        nodes.append(helper.make_node("If", ["cond"], ["r"], then_branch=branch, else_branch=branch))
        outputs.append("r")
    elif case == "broadcast":
        shapes["c"] = (1, 2, 3)  # the constants raised x's rank: HardSwish would not
    else:
        del shapes["x"]
    fused = fuse.hard_activations(nodes, inits, shapes, outputs)
    assert [n.op_type for n in fused] == [n.op_type for n in nodes]
    assert len(fuse.read_initializers(fused, inits, outputs)) == len(inits)
