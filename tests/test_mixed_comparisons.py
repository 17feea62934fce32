"""Erratum L2: a standard comparison takes an int and a real (the stdlib declares `X: num; Y: num`, and the
Khronos reference compares mixed types) and compares them as numbers, on every backend alike.

The expectation is numpy's own comparison of the values in float64 (which holds every float32 and every int
below 2**53 exactly), computed here independently of skriptnd."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.backends import BACKENDS
from skriptnd.check.program import check_paths
from skriptnd.compose.ir import Graph
from skriptnd.tosa.legalize import legalize

SOURCE = """import math;

graph G {
    @input {
        a: real[6];
        x: real[6, 3];
        b: int[6];
    }
    @output {
        lt: bool[6];
        ge: bool[6];
        eq: bool[6];
        ne: bool[6];
        gt: bool[6];
        le: bool[6];
    }
    @compose {
        i = math.argmax{axis=1, squeeze=true}(x);
        lt = math.lt(a, b);
        ge = math.ge(b, a);
        eq = math.eq(a, b);
        ne = math.ne(b, a);
        gt = math.gt(i, a);
        le = math.le(a, i);
    }
}
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    folder = tmp_path_factory.mktemp("mixed")
    (folder / "main.sknd").write_text(SOURCE, encoding="utf-8")
    return skriptnd.load(folder).compose()


def _inputs() -> dict[str, np.ndarray]:
    # 2**24 + 1 is no float32: a float32 comparison of the int would round it and call it equal to 2**24
    a = np.array([0.5, 2.0, -3.0, 2.0 ** 24, 1.0, 1.5], np.float32)
    b = np.array([1, 2, -4, 2 ** 24 + 1, 6, -(2 ** 40)], np.int64)
    x = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
    return {"a": a, "x": x, "b": b}


def _expected(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, b, i = inputs["a"].astype(np.float64), inputs["b"].astype(np.float64), inputs["x"].argmax(axis=1)
    return {"lt": a < b, "ge": b >= a, "eq": a == b, "ne": b != a, "gt": i > a, "le": a <= i}


@pytest.mark.parametrize("backend", ["numpy", "lower", "kernels", "iree", "onnxruntime"])
def test_mixed_comparisons_compare_numbers(graph: Graph, backend: str) -> None:
    if BACKENDS[backend].missing():
        pytest.skip(BACKENDS[backend].missing())
    inputs = _inputs()
    out = skriptnd.run(graph, inputs, backend=backend)
    for name, want in _expected(inputs).items():
        np.testing.assert_array_equal(out[name], want, err_msg=f"{backend}: {name}")


def test_a_mixed_comparison_maps_to_tosa_only_where_float32_is_exact(graph: Graph) -> None:
    """argmax's index (0..2, skriptnd.compose.int_ranges) is exact as float32: CAST + GREATER; a graph input's
    int is not proven within 2**24: it stays on numpy, saying why."""
    by_output = {op.outputs[0].name: op for op in graph.operations}
    sg, why = legalize(by_output["gt"])
    assert sg is not None and [o.name for o in sg.ops].count("CAST") == 1, why
    sg, why = legalize(by_output["lt"])
    assert sg is None and "not proven within +-2**24" in why


@pytest.mark.parametrize(("op", "message"), [("lt", "not allowed for generic type 'Y: num'"),
                                               ("eq", "a comparison takes two numbers")])
def test_bool_and_real_still_do_not_compare(tmp_path: Path, op: str, message: str) -> None:
    """lt's X and Y are `num` (no bool at all); eq's are any `type`, but two of one type or two numbers."""
    (tmp_path / "main.sknd").write_text(f"""import math;

graph G {{
    @input {{ a: real[2]; b: bool[2]; }}
    @output {{ e: bool[2]; }}
    @compose {{ e = math.{op}(a, b); }}
}}
""", encoding="utf-8")
    (d,) = check_paths([str(tmp_path / "main.sknd")]).diagnostics
    assert d.code == "E0412" and message in d.message, d.message
