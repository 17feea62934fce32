"""ONNX `If` (condition computed at run time) and `Loop` imported as SkriptND control flow, run by
skriptnd and compared with onnxruntime on the same inputs (both branches of every If are exercised;
loops with a count, a condition, both, carried values and scan outputs), plus the located refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_onnx_import import _compare, _model, _ort, _sknd, rand
from test_onnx_import import check as _check_untyped

import skriptnd
from skriptnd.diagnostics import DiagnosticError


def _helper() -> Any:
    from onnx import helper

    return helper


def _vi(name: str, elem: int, shape: list[int] | None) -> Any:
    return _helper().make_tensor_value_info(name, elem, shape)


FLOAT, INT64, BOOL = 1, 7, 9


def check(nodes: list[Any], inputs: dict[str, np.ndarray], outputs: list[str] | dict[str, tuple[int, list[int]]],
          folder: Path, initializers: dict[str, np.ndarray] | None = None) -> None:
    """Like test_onnx_import.check, with typed graph outputs (onnx's inference leaves a Loop's output
    shapes open)."""
    if isinstance(outputs, list):
        _check_untyped(nodes, inputs, outputs, folder, initializers)
        return
    model = _model(nodes, inputs, list(outputs), initializers)
    del model.graph.output[:]
    model.graph.output.extend(_vi(k, e, s) for k, (e, s) in outputs.items())
    expected = _ort(model, inputs)
    actual = _sknd(model, inputs, folder)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        _compare(a, e)


def _if_node(inputs_then: list[Any], inputs_else: list[Any], out_shape: list[int]) -> Any:
    h = _helper()
    then_g = h.make_graph(inputs_then, "then", [], [_vi("t_out", FLOAT, out_shape)])
    else_g = h.make_graph(inputs_else, "else", [], [_vi("e_out", FLOAT, out_shape)])
    return h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)


@pytest.mark.parametrize("flag", [True, False])
def test_if_with_runtime_condition(flag: bool, tmp_path: Path) -> None:
    h = _helper()
    x, z = rand(2, 3), rand(2, 3)
    s = rand(1)
    s[0] = 1.0 if flag else -1.0
    nodes = [h.make_node("ReduceSum", ["s"], ["ssum"], keepdims=0, name="sum"),
             h.make_node("Greater", ["ssum", "zero"], ["c"], name="positive"),
             _if_node([h.make_node("Add", ["x", "z"], ["t0"]), h.make_node("Mul", ["t0", "x"], ["t_out"])],
                      [h.make_node("Sub", ["x", "z"], ["e_out"])], [2, 3])]
    check(nodes, {"x": x, "z": z, "s": s}, ["y"], tmp_path / "m",
          initializers={"zero": np.array(0.0, np.float32)})


@pytest.mark.parametrize("flag", [True, False])
def test_if_condition_as_graph_input_with_two_outputs(flag: bool, tmp_path: Path) -> None:
    h = _helper()
    then_g = h.make_graph([h.make_node("Neg", ["x"], ["a1"]), h.make_node("Abs", ["x"], ["b1"])], "then", [],
                          [_vi("a1", FLOAT, [4]), _vi("b1", FLOAT, [4])])
    else_g = h.make_graph([h.make_node("Relu", ["x"], ["a2"]), h.make_node("Identity", ["x"], ["b2"])], "else",
                          [], [_vi("a2", FLOAT, [4]), _vi("b2", FLOAT, [4])])
    nodes = [h.make_node("If", ["c"], ["p", "q"], name="pick", then_branch=then_g, else_branch=else_g)]
    check(nodes, {"x": rand(4), "c": np.array(flag)}, ["p", "q"], tmp_path / "m")


def _loop(body_nodes: list[Any], body_in: list[Any], body_out: list[Any], inputs: list[str],
          outputs: list[str]) -> Any:
    h = _helper()
    body = h.make_graph(body_nodes, "body", body_in, body_out)
    return h.make_node("Loop", inputs, outputs, name="loop", body=body)


def test_loop_count_only_with_index(tmp_path: Path) -> None:
    """sum of x * i for i < M, M a run-time input."""
    h = _helper()
    body = [h.make_node("Cast", ["i"], ["fi"], to=FLOAT), h.make_node("Mul", ["x", "fi"], ["xi"]),
            h.make_node("Add", ["acc_in", "xi"], ["acc_out"]), h.make_node("Identity", ["cin"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("acc_in", FLOAT, [3])],
                 [_vi("cout", BOOL, []), _vi("acc_out", FLOAT, [3])], ["M", "", "acc0"], ["acc"])
    for m in (0, 1, 4):
        check([loop], {"x": rand(3), "acc0": rand(3), "M": np.array(m, np.int64)}, {"acc": (FLOAT, [3])}, tmp_path / f"m{m}")


def test_loop_condition_only(tmp_path: Path) -> None:
    """double x while its sum is below a bound (the body computes the next condition)."""
    h = _helper()
    body = [h.make_node("Mul", ["v_in", "two"], ["v_out"]), h.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "bound"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [2])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, [2])], ["", "c0", "v0"], ["v"])
    for c0 in (True, False):
        check([loop], {"v0": np.array([0.25, 0.5], np.float32), "bound": np.array(20.0, np.float32),
                       "c0": np.array(c0)}, {"v": (FLOAT, [2])}, tmp_path / f"c{c0}",
              initializers={"two": np.array(2.0, np.float32)})


@pytest.mark.parametrize("m", [2, 10])
def test_loop_count_and_condition_two_carried(m: int, tmp_path: Path) -> None:
    """count the doublings: stops on the condition (m=10) or on the count (m=2)."""
    h = _helper()
    body = [h.make_node("Mul", ["v_in", "two"], ["v_out"]), h.make_node("Add", ["k_in", "one"], ["k_out"]),
            h.make_node("Less", ["v_out", "bound"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, []),
                        _vi("k_in", INT64, [])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, []), _vi("k_out", INT64, [])],
                 ["M", "c0", "v0", "k0"], ["v", "k"])
    check([loop], {"v0": np.array(1.5, np.float32), "bound": np.array(20.0, np.float32), "M": np.array(m, np.int64),
                   "c0": np.array(True), "k0": np.array(0, np.int64)}, {"v": (FLOAT, []), "k": (INT64, [])}, tmp_path / "m",
          initializers={"two": np.array(2.0, np.float32), "one": np.array(1, np.int64)})


def test_loop_scan_outputs_with_constant_count(tmp_path: Path) -> None:
    """running sums of the rows, stacked as a scan output, with the final sum carried."""
    h = _helper()
    body = [h.make_node("Gather", ["rows", "i"], ["row"], axis=0), h.make_node("Add", ["s_in", "row"], ["s_out"]),
            h.make_node("Identity", ["s_out"], ["scan"]), h.make_node("Identity", ["cin"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("s_in", FLOAT, [3])],
                 [_vi("cout", BOOL, []), _vi("s_out", FLOAT, [3]), _vi("scan", FLOAT, [3])],
                 ["M", "", "s0"], ["s", "partial"])
    check([loop], {"rows": rand(4, 3), "s0": rand(3)}, {"s": (FLOAT, [3]), "partial": (FLOAT, [4, 3])}, tmp_path / "m",
          initializers={"M": np.array(4, np.int64)})


def test_loop_with_if_in_body(tmp_path: Path) -> None:
    """sum of |x_i| written with an If inside the loop body (nested control flow)."""
    h = _helper()
    then_g = h.make_graph([h.make_node("Sub", ["t_in", "xi"], ["a"])], "then", [], [_vi("a", FLOAT, [])])
    else_g = h.make_graph([h.make_node("Add", ["t_in", "xi"], ["b"])], "else", [], [_vi("b", FLOAT, [])])
    body = [h.make_node("Gather", ["x", "i"], ["xi"], axis=0), h.make_node("Less", ["xi", "zero"], ["neg"]),
            h.make_node("If", ["neg"], ["t_out"], then_branch=then_g, else_branch=else_g),
            h.make_node("Identity", ["cin"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("t_in", FLOAT, [])],
                 [_vi("cout", BOOL, []), _vi("t_out", FLOAT, [])], ["M", "", "t0"], ["t"])
    check([loop], {"x": rand(5), "t0": np.array(0.0, np.float32)}, {"t": (FLOAT, [])}, tmp_path / "m",
          initializers={"M": np.array(5, np.int64), "zero": np.array(0.0, np.float32)})


def test_loop_scan_output_with_condition_is_refused(tmp_path: Path) -> None:
    h = _helper()
    body = [h.make_node("Add", ["v_in", "v_in"], ["v_out"]), h.make_node("Identity", ["v_out"], ["scan"]),
            h.make_node("Less", ["v_out", "bound"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, []), _vi("scan", FLOAT, [])],
                 ["M", "c0", "v0"], ["v", "all"])
    model = _model([loop], {"v0": np.array(1.0, np.float32), "bound": np.array(9.0, np.float32),
                            "c0": np.array(True)}, ["v", "all"], {"M": np.array(5, np.int64)})
    del model.graph.output[:]
    model.graph.output.extend([_vi("v", FLOAT, []), _vi("all", FLOAT, [None])])
    with pytest.raises(DiagnosticError) as info:
        skriptnd.import_model(model, tmp_path / "m")
    text = str(info.value)
    assert "E0808" in text and "'loop'" in text and "scan outputs" in text
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("name", ["Branches", "Conditions", "Loops"])
def test_round_trip_of_exported_control_flow(name: str, tmp_path: Path) -> None:
    """SkriptND graphs with dynamic ifs (elif chains, block branches) and loops (counts, bounds,
    while/do-while conditions, the iteration index) exported as ONNX If/Loop by the exporter, imported
    back, run by skriptnd and compared with onnxruntime on the exported model."""
    from test_onnx_export_models import CONTROL_FEEDS, _control_flow_model

    from skriptnd.interop.onnx_export import to_onnx

    model = to_onnx(_control_flow_model(tmp_path).compose(graph=name))
    composed = skriptnd.load(skriptnd.import_model(model, tmp_path / "back")).compose()
    rng = np.random.default_rng(1)
    for i in range(4):  # both branches, zero and several iterations
        feeds = {k: np.asarray(v, np.float32) if np.asarray(v).dtype == np.float64 else np.asarray(v)
                 for k, v in CONTROL_FEEDS[name](rng, i).items()}
        expected = _ort(model, feeds)
        actual = list(skriptnd.run(composed, feeds).values())
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _compare(a, e)


@pytest.mark.parametrize("flag", [True, False])
def test_if_condition_of_one_element_and_count_of_one_element(flag: bool, tmp_path: Path) -> None:
    """ONNX allows a one-element tensor as If's condition and Loop's trip count."""
    h = _helper()
    then_g = h.make_graph([h.make_node("Neg", ["x"], ["a1"])], "then", [], [_vi("a1", FLOAT, [4])])
    else_g = h.make_graph([h.make_node("Exp", ["x"], ["a2"])], "else", [], [_vi("a2", FLOAT, [4])])
    body = [h.make_node("Add", ["v_in", "p"], ["v_out"]), h.make_node("Identity", ["cin"], ["cout"])]
    nodes = [h.make_node("If", ["c"], ["p"], name="pick", then_branch=then_g, else_branch=else_g),
             _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [4])],
                   [_vi("cout", BOOL, []), _vi("v_out", FLOAT, [4])], ["M", "", "x"], ["y"])]
    check(nodes, {"x": rand(4), "c": np.array([flag]), "M": np.array([3], np.int64)},
          {"y": (FLOAT, [4])}, tmp_path / "m")


def test_if_branches_of_different_shapes_are_refused(tmp_path: Path) -> None:
    h = _helper()
    then_g = h.make_graph([h.make_node("Identity", ["x"], ["a1"])], "then", [], [_vi("a1", FLOAT, [4])])
    else_g = h.make_graph([h.make_node("Concat", ["x", "x"], ["a2"], axis=0)], "else", [], [_vi("a2", FLOAT, [8])])
    node = h.make_node("If", ["c"], ["y"], name="pick", then_branch=then_g, else_branch=else_g)
    model = _model([node], {"x": rand(4), "c": np.array(True)}, ["y"])
    del model.graph.output[:]
    model.graph.output.extend([_vi("y", FLOAT, [None])])
    with pytest.raises(DiagnosticError) as info:
        skriptnd.import_model(model, tmp_path / "m")
    text = str(info.value)
    assert "E0807" in text and "'pick'" in text and ("[4] vs [8]" in text or "[8] vs [4]" in text)
    assert not (tmp_path / "m").exists()


def test_loop_with_a_false_constant_condition_gives_the_initial_values(tmp_path: Path) -> None:
    h = _helper()
    body = [h.make_node("Mul", ["v_in", "v_in"], ["v_out"]), h.make_node("Identity", ["cin"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [3])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, [3])], ["M", "never", "x"], ["y"])
    check([loop], {"x": rand(3)}, {"y": (FLOAT, [3])}, tmp_path / "m",
          initializers={"M": np.array(4, np.int64), "never": np.array(False)})


def test_loop_without_count_or_condition_is_refused(tmp_path: Path) -> None:
    h = _helper()
    body = [h.make_node("Neg", ["v_in"], ["v_out"]), h.make_node("Identity", ["cin"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [3])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, [3])], ["", "", "x"], ["y"])
    model = _model([loop], {"x": rand(3)}, ["y"])
    del model.graph.output[:]
    model.graph.output.extend([_vi("y", FLOAT, [3])])
    with pytest.raises(DiagnosticError) as info:
        skriptnd.import_model(model, tmp_path / "m")
    assert "E0807" in str(info.value) and "'loop'" in str(info.value) and "never ends" in str(info.value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(0, 6), bound=st.floats(-4.0, 40.0, width=32), start=st.floats(0.5, 3.0, width=32))
def test_loop_count_and_condition_property(m: int, bound: float, start: float, tmp_path: Path) -> None:
    """x <- 2x + i while x < bound, at most m times, for any count and bound (also zero iterations)."""
    h = _helper()
    body = [h.make_node("Cast", ["i"], ["fi"], to=FLOAT), h.make_node("Mul", ["v_in", "two"], ["d"]),
            h.make_node("Add", ["d", "fi"], ["v_out"]), h.make_node("Less", ["v_out", "bound"], ["cout"])]
    loop = _loop(body, [_vi("i", INT64, []), _vi("cin", BOOL, []), _vi("v_in", FLOAT, [])],
                 [_vi("cout", BOOL, []), _vi("v_out", FLOAT, [])], ["M", "c0", "v0"], ["v"])
    feeds = {"v0": np.array(start, np.float32), "bound": np.array(bound, np.float32), "M": np.array(m, np.int64)}
    nodes = [h.make_node("Less", ["v0", "bound"], ["c0"]), loop]
    check(nodes, feeds, {"v": (FLOAT, [])}, tmp_path / f"m{len(list(tmp_path.iterdir()))}",
          initializers={"two": np.array(2.0, np.float32)})
