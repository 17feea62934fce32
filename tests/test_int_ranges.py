"""int add / sub / mul compiled as TOSA int32 only where a range analysis proves they cannot wrap (issue 30).

skriptnd.compose.int_ranges gives each int tensor an interval of the values @lower can compute; the
legalization maps an int add / sub / mul when its result's interval fits int32. Checked here against
hand-computed intervals, against numpy's int64 arithmetic on random values within the ranges (hypothesis),
and, for the ONNX importer's wrap of negative gather indices (``select(i < 0, clamp(i, -n-1, -1) + n, i)``),
against onnxruntime on the ONNX original, through the numpy backend and IREE (one compiled module).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx_models import require_onnx
from onnx_oracle import run_onnx

import skriptnd
from skriptnd.backends import Options, prepare
from skriptnd.diagnostics import DiagnosticError
from skriptnd.tosa.legalize import legalize, run_subgraph

I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1


def _compose(folder: Path, constants: str, compose: str, outputs: str, inputs: str = "i: int[6];"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.sknd").write_text(
        "import math;\nimport layout;\n"
        f"graph G {{\n @input {{ {inputs} }}\n @output {{ {outputs} }}\n @constant {{ {constants} }}\n"
        f" @compose {{ {compose} }}\n}}\n")
    return skriptnd.load(str(folder)).compose()


def _by_output(graph) -> dict:
    return {op.outputs[0].name: op for op in graph.operations}


def test_ranges_by_hand(tmp_path: Path) -> None:
    """Intervals of a small graph, computed by hand: clamp bounds an input, add / sub / mul combine bounds,
    select takes the hull of its branches, an input is unknown, and so is arithmetic on it."""
    graph = _compose(
        tmp_path, "n: int[] = 100; lo: int[] = -101; hi: int[] = -1; k: int[6] = [3, -7, 0, 1, 2, 3];",
        "c = math.clamp(i, lo, hi); y = math.add(c, n); w = math.mul(y, y); d = math.sub(k, c);"
        " m = math.lt(i, hi); s = math.select(m, y, d); u = math.add(i, n);",
        "y: int[6]; w: int[6]; d: int[6]; s: int[6]; u: int[6];", "i: int[6];")
    ranges = {t.name: t.value_range for op in graph.operations for t in op.outputs if t.dtype == "int"}
    assert ranges["c"] == (-101, -1)
    assert ranges["y"] == (-1, 99)
    assert ranges["w"] == (-99, 99 * 99)  # (-1) * 99 is the smallest product of [-1, 99] x [-1, 99]
    assert ranges["d"] == (-7 + 1, 3 + 101)
    assert ranges["s"] == (-6, 104)  # the hull of y's [-1, 99] and d's [-6, 104]
    assert ranges["u"] is None
    assert graph.inputs[0].value_range is None
    ops = _by_output(graph)
    for name in ("y", "w", "d"):
        sg, reason = legalize(ops[name])
        assert sg is not None, (name, reason)
    sg, reason = legalize(ops["u"])
    assert sg is None and "could wrap in int32" in reason and "'i' unbounded" in reason, reason


@pytest.mark.parametrize(("bound", "legal"), [(46340, True), (46341, False)])
def test_mul_at_the_int32_edge(tmp_path: Path, bound: int, legal: bool) -> None:
    """46340^2 < 2^31 - 1 < 46341^2: the square of a clamped value compiles exactly up to the edge."""
    graph = _compose(tmp_path, f"a: int[] = {-bound}; b: int[] = {bound};",
                     "c = math.clamp(i, a, b); z = math.mul(c, c);", "z: int[6];")
    sg, reason = legalize(_by_output(graph)["z"])
    assert (sg is not None) == legal, reason


_BOUND = st.integers(I32_MIN, I32_MAX)  # what an int constant may hold (skriptnd.compose E0502)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=_BOUND, b=_BOUND, k=_BOUND, op=st.sampled_from(["add", "sub", "mul"]), seed=st.integers(0, 99))
def test_legal_exactly_when_the_result_fits(tmp_path_factory: pytest.TempPathFactory, a: int, b: int, k: int,
                                            op: str, seed: int) -> None:
    """``clamp(i, a, b) op k``: legalized iff every result over [a, b] fits int32 (computed here from the
    bounds directly), and then TOSA's int32 result equals numpy's int64 one, at the bounds and between."""
    lo, hi = min(a, b), max(a, b)
    graph = _compose(tmp_path_factory.mktemp("g"), f"a: int[] = {lo}; b: int[] = {hi}; k: int[] = {k};",
                     f"c = math.clamp(i, a, b); z = math.{op}(c, k);", "z: int[6];")
    fn = {"add": lambda x: x + k, "sub": lambda x: x - k, "mul": lambda x: x * k}[op]
    fits = all(I32_MIN <= fn(x) <= I32_MAX for x in (lo, hi))  # fn is monotonic: its ends suffice
    sg, reason = legalize(_by_output(graph)["z"])
    assert (sg is not None) == fits, reason
    if sg is None:
        return
    c = np.random.default_rng(seed).integers(lo, hi, 6, endpoint=True).astype(np.int64)
    c[:2] = lo, hi
    (got,) = run_subgraph(sg, [c, np.array(k, np.int64)])
    np.testing.assert_array_equal(got, fn(c))


# ------------------------------------------------------------------ the importer's wrap of gather indices


def _gather_model(n: int):
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    table = np.arange(n * 3, dtype=np.float32).reshape(n, 3) * 0.5 - 1.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0, name="g")], "gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 3])], [numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_negative_data_indices_match_onnxruntime(tmp_path: Path) -> None:
    """Gather with int64 data indices over all of [-n, n): the import matches onnxruntime on the numpy
    backend and, compiled as one IREE module (the wrap's add proven to fit int32), under --via iree."""
    n = 7
    model = _gather_model(n)
    ids = np.array([[-7, -1, 0, 6, -4], [3, -6, 5, -2, 1]], np.int64)
    expected = run_onnx(model, {"ids": ids})["y"]
    graph = skriptnd.load(skriptnd.import_model(model, tmp_path / "m")).compose()
    add = next(op for op in graph.operations if op.op == "math.add")
    assert add.outputs[0].value_range == (-1, n - 1)
    np.testing.assert_array_equal(skriptnd.run(graph, {"ids": ids}, backend="numpy")["y"], expected)
    if importlib.util.find_spec("iree") is None or importlib.util.find_spec("iree.compiler") is None:
        pytest.skip("iree not installed")
    runner = prepare(graph, "iree", Options(threads=1, cache_dir=str(tmp_path / "cache")))
    assert runner.plan[0].startswith(f"{graph.name}: all {len(graph.operations)} operations compiled by IREE")
    np.testing.assert_array_equal(runner.run({"ids": ids})["y"], expected)


@pytest.mark.parametrize("bad", [-8, 7, -(2 ** 31)])
def test_index_outside_minus_n_to_n_stays_an_error(tmp_path: Path, bad: int) -> None:
    """An index outside [-n, n) is refused by the gather as in onnxruntime, not wrapped into range."""
    model = _gather_model(7)
    ids = np.zeros([2, 5], np.int64)
    ids[1, 2] = bad
    graph = skriptnd.load(skriptnd.import_model(model, tmp_path / "m")).compose()
    with pytest.raises(DiagnosticError):
        skriptnd.run(graph, {"ids": ids}, backend="numpy")
