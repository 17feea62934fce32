"""Exporting graphs with dynamic extents (issue 25, item 5).

ONNX: a dynamic extent of a graph input is a `dim_param` named after it (`n`, `h`, `w`), outputs too where
their extents are expressions of those; the exported model runs in onnxruntime at two different shapes and
agrees with numpy computations written here. An operation whose ONNX form needs the size itself is refused
(E0840 at the operation, naming the extent, with a hint). TOSA MLIR is written with static shapes: a dynamic
input is one E0750 at its declaration naming its extents and the --attrib to give.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.diagnostics import DiagnosticError

sys.path.insert(0, str(Path(__file__).parent))
from onnx_oracle import require_ort, run_onnx  # noqa: E402
from test_dynamic_run import _conv_same  # noqa: E402

GRAPH = """import nn;
import math;
import layout;
graph dyn {
    @input { x: real[n|8, 3, h|16, w|16]; b: real[n|8, 4]; f: real[4, 3, 3, 3]; m: real[4, 5]; }
    @output { y: real[n, 5]; z: real[n, 4, h, w]; flat: real[n, 3 * h * w]; p: real[n, 3, h + 2, w]; s: real[n, 4]; }
    @compose {
        c = nn.conv{padding=[1, 1, 1, 1]}(x, f);
        z = nn.relu(c);
        e = math.mean_reduce{axes=[2, 3], squeeze=true}(z);
        s = math.add(e, b);
        mt = layout.transpose{perm=[1, 0]}(m);
        y = nn.linear(s, mt);
        flat = layout.flatten{axis=1}(x);
        p = layout.pad{axes=[2], padding=[1, 1]}(x);
    }
}
"""


def _dims(value_info: object) -> list[object]:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]  # type: ignore[attr-defined]


def test_dynamic_extents_are_dim_params_and_the_model_runs_at_two_shapes(tmp_path: Path) -> None:
    from skriptnd.interop.onnx_export import to_onnx

    require_ort()
    (tmp_path / "main.sknd").write_text(GRAPH)
    graph = skriptnd.load(tmp_path).compose()
    model = to_onnx(graph)
    assert {i.name: _dims(i) for i in model.graph.input} == {
        "x": ["n", 3, "h", "w"], "b": ["n", 4], "f": [4, 3, 3, 3], "m": [4, 5]}
    assert {o.name: _dims(o) for o in model.graph.output} == {
        "y": ["n", 5], "z": ["n", 4, "h", "w"], "flat": ["n", "3*h*w"], "p": ["n", 3, "h + 2", "w"], "s": ["n", 4]}
    rng = np.random.default_rng(11)
    f, m = rng.standard_normal((4, 3, 3, 3), np.float32), rng.standard_normal((4, 5), np.float32)
    for shape in [(2, 3, 5, 7), (1, 3, 16, 3)]:
        x = rng.standard_normal(shape, np.float32)
        b = rng.standard_normal((shape[0], 4), np.float32)
        got = run_onnx(model, {"x": x, "b": b, "f": f, "m": m})
        z = np.maximum(_conv_same(x, f), 0.0)
        s = z.mean(axis=(2, 3)) + b
        np.testing.assert_allclose(got["z"], z, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["s"], s, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["y"], s @ m, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got["flat"], x.reshape(shape[0], -1))
        np.testing.assert_array_equal(got["p"], np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0))))
        ours = skriptnd.run(graph, {"x": x, "b": b, "f": f, "m": m})  # the numpy backend agrees
        np.testing.assert_allclose(ours["y"], got["y"], rtol=1e-4, atol=1e-4)


REFUSED = """import nn;
import layout;
graph G {
    @input { x: real[n|8, 4, h|16, w|16]; }
    @output { a: real[n, 4, h, w]; c: real[n, 4 * h * w]; r: real[n, 4, h, w]; }
    @compose {
        a = nn.max_pool{axes=[2, 3], size=[3, 3], padding=[1, 1, 1, 1]}(x);
        c = layout.reshape{shape=[n, 4 * h * w]}(x);
        r = nn.relu(x);
    }
}
"""


def test_an_operation_that_needs_a_dynamic_size_is_refused_located() -> None:
    """Max pooling's ONNX padding and a reshape whose target holds `h` would be written for one size: E0840 at
    each, naming the extent, with what to do; the relu exports (no other diagnostic)."""
    import tempfile

    from skriptnd.interop.onnx_export import check_exportable

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "main.sknd").write_text(REFUSED)
        diags = check_exportable(skriptnd.load(tmp).compose())
    assert [(d.code, d.span.line) for d in diags] == [("E0840", 7), ("E0840", 8)]
    assert "tensor 'x' has a dynamic extent (n, 4, h, w)" in diags[0].message
    assert "attribute 'shape' is given by a dynamic extent (shape=[n, 4*h*w])" in diags[1].message
    assert all(d.hint is not None and "--attrib h=VALUE" in d.hint for d in diags)


def test_a_constant_holding_a_dynamic_extent_is_never_written(tmp_path: Path) -> None:
    """core.concrete: a SymInt reaching an initializer or a node attribute is refused, not written as its
    sample (the bound); ints() keeps SymInts for the same reason."""
    from skriptnd.interop.onnx_export.core import Context, Unsupported, concrete, ints
    from skriptnd.semantics.symbolic import SymInt

    h = SymInt.named("h", 16)
    assert ints([h, 3]) == [16, 3] and ints([h, 3])[0] is h
    assert concrete([1, (2, 3)], "x") == [1, (2, 3)]
    with pytest.raises(Unsupported, match="constant 'shape' depends on the dynamic extent 'h - 1'"):
        Context(opset=17, variables={}).i64([h - 1, 2])
    with pytest.raises(Unsupported, match="Pad attribute 'pads' depends on the dynamic extent '2\\*h'"):
        Context(opset=17, variables={}).node("Pad", ["x"], pads=[0, 2 * h])


def test_tosa_mlir_export_refuses_a_dynamic_input_once_with_the_attribs_to_give(tmp_path: Path) -> None:
    from skriptnd.tosa.mlir.export import to_mlir

    (tmp_path / "main.sknd").write_text(GRAPH)
    with pytest.raises(DiagnosticError) as info:
        to_mlir(skriptnd.load(tmp_path).compose())
    diags = info.value.diagnostics
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("E0750", 5, 14), ("E0750", 5, 43)]
    assert diags[0].message == ("graph input 'x' (real[n|8, 3, h|16, w|16]) has the dynamic extents 'n', 'h', 'w'; "
                                "TOSA MLIR is exported with static shapes")
    assert "`real[8, 3, 16, 16]`" in diags[0].hint and "--attrib n=8 --attrib h=16 --attrib w=16" in diags[0].hint
    assert "has the dynamic extent 'n';" in diags[1].message
