"""Issue 25, item 3: an ONNX graph input that feeds only parameters (ReduceSum's axes, a Reshape's shape, TopK's
K ...) is imported as a graph attribute, and a run given its value with the inputs composes the graph for it
(once per distinct value). Results are checked against onnxruntime running the ONNX model itself.

Item 4's input types: a bfloat16 array is a real input (against numpy's own arithmetic)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx_models import require_onnx

import skriptnd
from skriptnd.diagnostics import DiagnosticError


def _model(nodes: list, inputs: list[tuple[str, int, list[int]]], outputs: list[tuple[str, int, list]],
           opset: int = 18) -> object:
    from onnx import helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _reduce_model(keepdims: int) -> object:
    from onnx import TensorProto, helper

    return _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=keepdims)],
                  [("x", TensorProto.FLOAT, [2, 3, 4]), ("axes", TensorProto.INT64, [1])],
                  [("y", TensorProto.FLOAT, ["a", "b"] if not keepdims else ["a", "b", "c"])])


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_input_is_an_attribute_bound_per_value(tmp_path: Path, keepdims: int) -> None:
    require_onnx()
    model = _reduce_model(keepdims)
    path = skriptnd.import_model(model, tmp_path / "m")
    text = (path / "main.sknd").read_text()
    assert "axes: int..(1);" in text and "@input {\n        x: real[2, 3, 4];\n    }" in text
    graph = skriptnd.load(path).compose(defer=True)
    assert graph.awaiting == ("axes",) and not graph.operations
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for axes in ([0], [-1], [1], [0]):
        a = np.array(axes, np.int64)
        got = skriptnd.run(graph, {"x": x, "axes": a})["y"]
        (expected,) = _onnxruntime(model, {"x": x, "axes": a})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert len(graph.__dict__["_rebound"]) == 3  # [0] was composed once, for its first run


def test_awaited_attribute_not_given_is_located(tmp_path: Path) -> None:
    require_onnx()
    path = skriptnd.import_model(_reduce_model(0), tmp_path / "m")
    model = skriptnd.load(path)
    with pytest.raises(DiagnosticError) as strict:
        model.compose()
    assert strict.value.diagnostics[0].code == "E0410"
    with pytest.raises(DiagnosticError) as run:
        skriptnd.run(model.compose(defer=True), {"x": np.zeros((2, 3, 4), np.float32)})
    d = run.value.diagnostics[0]
    assert d.code == "E0711" and "'axes'" in d.message and "--input axes=FILE.npy" in d.hint
    assert d.span.file.endswith("main.sknd") and d.span.line > 0
    # a composed graph is composed again for another value given with the inputs
    composed = model.compose(attribs={"axes": skriptnd.backends.bind.attribute_value("axes", [1])})
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(skriptnd.run(composed, {"x": x, "axes": np.array([2])})["y"], x.sum(axis=2))
    np.testing.assert_array_equal(skriptnd.run(composed, {"x": x})["y"], x.sum(axis=1))


def _case(op: str, data: np.ndarray, param: np.ndarray, **attrs: object) -> tuple[object, dict]:
    from onnx import TensorProto, helper

    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    outputs = ["y", "i"] if op == "TopK" else ["y"]
    n = param.size
    rank_out = {"Reshape": n, "Unsqueeze": data.ndim + n, "Squeeze": data.ndim - n} \
        .get(op, data.ndim)
    out_types = [elem[data.dtype], TensorProto.INT64][:len(outputs)]
    model = _model([helper.make_node(op, ["x", "p"], outputs, **attrs)],
                   [("x", elem[data.dtype], list(data.shape)), ("p", TensorProto.INT64, list(param.shape))],
                   [(o, t, [f"d{k}" for k in range(rank_out)]) for o, t in zip(outputs, out_types, strict=True)])
    return model, {"x": data, "p": param}


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5


@pytest.mark.parametrize(("op", "data", "params", "attrs"), [
    ("Reshape", X, [[4, 0, -1], [3, -1, 2], [1, 24, 1]], {}),
    ("Tile", X, [[1, 2, 1], [2, 1, 3]], {}),
    ("Pad", X, [[0, 1, 0, 2, 0, 1], [1, 0, 0, 0, 2, 0]], {}),
    ("TopK", X, [[1], [3]], {"axis": -1}),
    ("CumSum", X, [[0], [-1]], {}),
    ("Trilu", X, [[0], [-1], [2]], {"upper": 0}),
    ("Unsqueeze", X, [[0, 4], [-1, 1], [3, 0]], {}),
    ("Squeeze", X.reshape(2, 1, 3, 1, 4), [[1, 3], [-2, 1]], {}),
])
def test_parameter_inputs_match_onnxruntime(tmp_path: Path, op: str, data: np.ndarray, params: list,
                                            attrs: dict) -> None:
    require_onnx()
    first = np.array(params[0], np.int64)
    if op in ("CumSum", "Trilu"):
        first = first.reshape(())  # scalars in ONNX
    model, _ = _case(op, data, first, **attrs)
    path = skriptnd.import_model(model, tmp_path / op)
    assert "p: int" in (path / "main.sknd").read_text()  # a graph attribute, not an input
    graph = skriptnd.load(path).compose(defer=True)
    for values in params:
        p = np.array(values, np.int64).reshape(first.shape)
        got = skriptnd.run(graph, {"x": data, "p": p})
        expected = _onnxruntime(model, {"x": data, "p": p})
        for g, e in zip(got.values(), expected, strict=True):
            assert g.shape == e.shape, (values, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=1e-6)


def test_cli_binds_an_attribute_from_input_file(tmp_path: Path) -> None:
    require_onnx()
    import onnx

    onnx.save(_reduce_model(0), tmp_path / "r.onnx")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "a.npy", np.array([-1]))
    np.save(tmp_path / "bad.npy", x)
    sknd = [sys.executable, "-m", "skriptnd"]
    done = subprocess.run([*sknd, "import", str(tmp_path / "r.onnx"), "-o", str(tmp_path / "m")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "--input axes=FILE.npy" in done.stderr, done.stderr
    run = [*sknd, "run", str(tmp_path / "m"), "--input", f"x={tmp_path / 'x.npy'}"]
    done = subprocess.run([*run, "--input", f"axes={tmp_path / 'a.npy'}", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), x.sum(axis=-1))
    missing = subprocess.run(run, capture_output=True, text=True)
    assert missing.returncode == 1 and "E0711" in missing.stderr and "--input axes=FILE.npy" in missing.stderr
    wrong = subprocess.run([*run, "--input", f"axes={tmp_path / 'bad.npy'}"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "1-D" in wrong.stderr and "Traceback" not in wrong.stderr


def test_bfloat16_input_is_real(tmp_path: Path) -> None:
    require_onnx()
    import ml_dtypes
    from onnx import TensorProto, helper

    model = _model([helper.make_node("Add", ["x", "x"], ["y"])], [("x", TensorProto.BFLOAT16, [5])],
                   [("y", TensorProto.BFLOAT16, [5])])
    path = skriptnd.import_model(model, tmp_path / "m")
    x = np.array([1.5, -2.25, 3.0, 0.0078125, 100.0], dtype=ml_dtypes.bfloat16)
    got = skriptnd.run(skriptnd.load(path).compose(), {"x": x})["y"]
    np.testing.assert_array_equal(got.astype(ml_dtypes.bfloat16), (x.astype(np.float32) * 2).astype(ml_dtypes.bfloat16))


def test_expect_compares_in_the_reference_type(tmp_path: Path) -> None:
    """A float16 model's output runs as float32; `--expect` rounds it to the float16 reference first. 1000.5 * 3
    is 3001.5 in float32 and 3002 in float16 (onnxruntime's answer): 0.5 apart, beyond rtol 1e-4 of 3002 unless
    rounded, and a reference one float16 step off (3004) still mismatches."""
    require_onnx()
    import onnx
    from onnx import TensorProto, helper

    model = _model([helper.make_node("Add", ["x", "x"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])],
                   [("x", TensorProto.FLOAT16, [1])], [("y", TensorProto.FLOAT16, [1])])
    onnx.save(model, tmp_path / "h.onnx")
    x = np.array([1000.5], np.float16)
    (expected,) = _onnxruntime(model, {"x": x})
    assert expected.dtype == np.float16 and float(expected[0]) == 3002.0
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    np.save(tmp_path / "good" / "y.npy", expected)
    np.save(tmp_path / "bad" / "y.npy", np.array([3004.0], np.float16))
    sknd = [sys.executable, "-m", "skriptnd"]
    assert subprocess.run([*sknd, "import", str(tmp_path / "h.onnx"), "-o", str(tmp_path / "m")]).returncode == 0
    run = [*sknd, "run", str(tmp_path / "m"), "--input", f"x={tmp_path / 'x.npy'}", "--expect"]
    good = subprocess.run([*run, str(tmp_path / "good")], capture_output=True, text=True)
    assert good.returncode == 0 and "matches" in good.stderr, good.stderr
    bad = subprocess.run([*run, str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode == 1 and "MISMATCH" in bad.stderr


@pytest.mark.parametrize("values", [
    ([0, 1], [2, 3], [0, 2], [1, 1]),  # the first block
    ([-1, 10], [-3, -100], [1, 2], [-1, -2]),  # negative steps, out-of-range ends clamped
    ([1, -3], [1000, -1], [-1, 0], [2, 1]),  # negative axes and starts
])
def test_slice_operands_fed_at_run_time_match_onnxruntime(tmp_path: Path, values: tuple) -> None:
    require_onnx()
    from onnx import TensorProto, helper

    names = ["starts", "ends", "axes", "steps"]
    model = _model([helper.make_node("Slice", ["x", *names], ["y"])],
                   [("x", TensorProto.FLOAT, [2, 3, 4])] + [(n, TensorProto.INT64, [2]) for n in names],
                   [("y", TensorProto.FLOAT, ["a", "b", "c"])])
    path = skriptnd.import_model(model, tmp_path / "s")
    text = (path / "main.sknd").read_text()
    assert all(f"{n}: int..(2);" in text for n in names)
    feeds = {"x": X, **{n: np.array(v, np.int64) for n, v in zip(names, values, strict=True)}}
    got = skriptnd.run(skriptnd.load(path).compose(defer=True), feeds)["y"]
    (expected,) = _onnxruntime(model, feeds)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_input_feeding_data_too_stays_an_input(tmp_path: Path) -> None:
    """An input read as data as well as a parameter is not an attribute: it is a tensor input, and its use as
    a parameter is E0808 naming the value needed."""
    require_onnx()
    from onnx import TensorProto, helper

    model = _model([helper.make_node("ReduceSum", ["x", "a"], ["y"]), helper.make_node("Add", ["a", "a"], ["z"])],
                   [("x", TensorProto.FLOAT, [2, 3]), ("a", TensorProto.INT64, [1])],
                   [("y", TensorProto.FLOAT, ["p", "q"]), ("z", TensorProto.INT64, [1])])
    with pytest.raises(DiagnosticError) as err:
        skriptnd.import_model(model, tmp_path / "m")
    assert err.value.diagnostics[0].code == "E0808" and "axes" in err.value.diagnostics[0].message


def test_slice_clamping_is_python_slicing(tmp_path: Path) -> None:
    """Property: for any start, end and non-zero step fed at run time, the imported Slice gives numpy's
    `x[start:end:step]` along the axis (ONNX clamps as Python slices do); an empty slice is that or a located
    diagnostic (a begin past the end), never a wrong result."""
    require_onnx()
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from onnx import TensorProto, helper

    names = ["starts", "ends", "axes", "steps"]
    model = _model([helper.make_node("Slice", ["x", *names], ["y"])],
                   [("x", TensorProto.FLOAT, [7, 3])] + [(n, TensorProto.INT64, [1]) for n in names],
                   [("y", TensorProto.FLOAT, ["a", "b"])])
    graph = skriptnd.load(skriptnd.import_model(model, tmp_path / "s")).compose(defer=True)
    x = np.arange(21, dtype=np.float32).reshape(7, 3)
    bound = st.integers(-12, 12) | st.sampled_from([-2**62, 2**62])

    @settings(max_examples=40, deadline=None)
    @given(start=bound, end=bound, step=st.integers(-4, 4).filter(bool), axis=st.sampled_from([0, -2]))
    def check(start: int, end: int, step: int, axis: int) -> None:
        feeds = {"x": x, **{n: np.array([v], np.int64) for n, v in zip(names, (start, end, axis, step), strict=True)}}
        expected = x[start:end:step]
        try:
            got = skriptnd.run(graph, feeds)["y"]
        except DiagnosticError as err:  # only an empty slice may be refused (layout.slice's begin < extent)
            assert expected.shape[0] == 0 and err.diagnostics[0].span.line > 0, (start, end, step, axis)
            return
        assert got.shape == expected.shape, (start, end, step, axis)
        np.testing.assert_array_equal(got, expected)

    check()
