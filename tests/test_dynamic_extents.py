"""Dynamic extents as symbols of a graph body, dynamic packs, and `if` / loops over dynamic extents (spec §2.6.1,
§2.10.1, §3.1; issue 25, item 1).

Graphs of the kinds the Khronos reference's test suite accepts: `layout.reshape{shape=[h, -1]}` on
`real[h|100, w|100]`, `layout.split{count=s}` and `layout.unstack` into a pack `..(s)`, an `if` whose branches
keep or change a dynamic extent, `do..(n)` over a dynamic extent, `for ... do` into a graph output pack. Each
is checked (`sknd check`), composed, and run on the numpy backend at two different sizes, against numpy
computations written here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.check.program import check_paths
from skriptnd.diagnostics import DiagnosticError, Severity


def _model(tmp_path: Path, text: str) -> skriptnd.Model:
    (tmp_path / "main.sknd").write_text(text)
    # what `sknd check` reports without --verbose: no error, no warning (E0612 notes are --verbose's)
    assert [(d.code, d.message) for d in check_paths([tmp_path]).diagnostics if d.severity != Severity.NOTE] == []
    return skriptnd.load(tmp_path)


def _ramp(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 2.5


# ---------------------------------------------------------------- extents as symbols

RESHAPE = """import layout;
graph dynamic_reshape {
    @input { input: real[h|100, w|100]; }
    @output { output: real[h, w]; flat: real[h * w]; turned: real[w, h]; }
    @using { hw = h * w; }
    @assert { h <= w: "the input must be at least as wide as it is high", h, w; input.shape[0] <= 50; }
    @compose {
        output = layout.reshape{shape=[h, -1]}(input);
        flat = layout.reshape{shape=[hw]}(input);
        turned = layout.reshape{shape=[w, h]}(input);
    }
}
"""


@pytest.mark.parametrize("shape", [(3, 4), (2, 7)])
def test_extents_are_symbols_of_attributes_and_declared_outputs(tmp_path: Path, shape: tuple[int, int]) -> None:
    graph = _model(tmp_path, RESHAPE).compose()
    import sympy

    h, w = (sympy.Symbol(n, integer=True, nonnegative=True) for n in "hw")
    assert [t.symbolic for t in graph.outputs] == [(h, w), (h * w,), (w, h)]
    x = _ramp(*shape)
    out = skriptnd.run(graph, {"input": x})
    np.testing.assert_array_equal(out["output"], x)
    np.testing.assert_array_equal(out["flat"], x.reshape(-1))
    assert out["turned"].shape == shape[::-1]
    np.testing.assert_array_equal(out["turned"], x.reshape(shape[1], shape[0]))


def test_an_assert_on_dynamic_extents_is_judged_per_run(tmp_path: Path) -> None:
    """`h <= w` holds at the bounds (100, 100) and for [3, 4]; for [4, 3] the run fails at the assert."""
    graph = _model(tmp_path, RESHAPE).compose()
    assert skriptnd.run(graph, {"input": _ramp(3, 4)})["flat"].shape == (12,)
    with pytest.raises(DiagnosticError) as info:
        skriptnd.run(graph, {"input": _ramp(4, 3)})
    (d,) = info.value.diagnostics
    assert d.code == "E0501" and d.span.line == 6
    assert d.message == "the input must be at least as wide as it is high (h = 4, w = 3)"
    with pytest.raises(DiagnosticError) as info:  # `input.shape[0]` is a dynamic extent too (not its bound 100)
        skriptnd.run(graph, {"input": _ramp(51, 60)})
    assert info.value.diagnostics[0].code == "E0501" and info.value.diagnostics[0].span.col == 81


def test_a_declared_output_extent_must_be_the_composed_one(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(RESHAPE.replace("turned: real[w, h]", "turned: real[h, w]"))
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    (d,) = info.value.diagnostics
    assert d.code == "E0403" and "declared with shape real[h, w] but the composition produces [w, h]" in d.message


def test_an_extent_named_by_two_inputs_must_agree(tmp_path: Path) -> None:
    model = _model(tmp_path, """import math;
graph G {
    @input { x: real[n|10]; y: real[n|10]; }
    @output { z: real[n]; }
    @compose { z = math.add(x, y); }
}
""")
    graph = model.compose()
    for n in (2, 6):
        x, y = _ramp(n), _ramp(n) * 3
        np.testing.assert_array_equal(skriptnd.run(graph, {"x": x, "y": y})["z"], x + y)
    with pytest.raises(DiagnosticError) as info:
        skriptnd.run(graph, {"x": _ramp(2), "y": _ramp(3)})
    (d,) = info.value.diagnostics
    assert d.code == "E0711" and "dimension 0 of input 'y' is 3, but 'n' is 2" in d.message


@pytest.mark.parametrize("s", [4, 7])
def test_split_sizes_computed_from_an_extent(tmp_path: Path, s: int) -> None:
    graph = _model(tmp_path, r"""import layout;
graph dynamic_split {
    @input { input: real[s|10]; }
    @output { output1: real[s \ 2]; output2: real[s / 2]; }
    @compose { [output1, output2] = layout.split{axis=0, sizes=[s \ 2, s / 2]}(input); }
}
""").compose()
    x = _ramp(s)
    out = skriptnd.run(graph, {"input": x})
    half = -(-s // 2)  # `\` rounds up (§2.5)
    np.testing.assert_array_equal(out["output1"], x[:half])
    np.testing.assert_array_equal(out["output2"], x[half:])


# ---------------------------------------------------------------- dynamic packs


@pytest.mark.parametrize("s", [3, 5])
def test_split_into_a_pack_of_dynamic_length(tmp_path: Path, s: int) -> None:
    graph = _model(tmp_path, """import layout;
graph split_even {
    @input { input: real[s|5]; }
    @output { output: real[1]..(s); }
    @compose { output..(s) = layout.split{axis=0, count=s}(input); }
}
""").compose()
    assert graph.output_packs == {"output": (0, 5)}  # composed at its bound
    x = _ramp(s)
    out = skriptnd.run(graph, {"input": x})
    assert sorted(out) == [f"output.{j}" for j in range(s)]
    for j in range(s):
        np.testing.assert_array_equal(out[f"output.{j}"], x[j:j + 1])


@pytest.mark.parametrize("s", [2, 4])
def test_unstack_into_a_pack_of_dynamic_length_and_loops_over_it(tmp_path: Path, s: int) -> None:
    graph = _model(tmp_path, """import math;
import layout;
graph scan_dynamic {
    @input { data: real[s|5, 4]; }
    @output { rows: real[4]..(s); sums: real[4]..(s); total: real[4]; plus: real[4]..(s); }
    @compose {
        rows..(s) = layout.unstack{axis=0}(data);
        total, sums = with acc: real[4] = 0.0 for row : rows do {
            next = math.add(acc, row);
            yield next, next;
        };
        plus = for value : rows do block1: math.add(value, 1.0);
    }
}
""").compose()
    data = _ramp(s, 4)
    out = skriptnd.run(graph, {"data": data})
    assert len(out) == 3 * s + 1
    running = np.cumsum(data, axis=0)
    for j in range(s):
        np.testing.assert_array_equal(out[f"rows.{j}"], data[j])
        np.testing.assert_allclose(out[f"sums.{j}"], running[j], rtol=1e-6)
        np.testing.assert_array_equal(out[f"plus.{j}"], data[j] + 1)
    np.testing.assert_allclose(out["total"], data.sum(axis=0), rtol=1e-6)


def test_for_do_into_a_graph_output_pack(tmp_path: Path) -> None:
    """The reference suite's `parallel_for`: a scanning loop's outputs are the graph's output pack."""
    graph = _model(tmp_path, """import math;
graph parallel_for {
    @input { values: real[]..(3); }
    @output { output: real[]..(3); }
    @compose { output = for value : values do block1: math.add(value, 1.0); }
}
""").compose()
    assert graph.output_names == ["output.0", "output.1", "output.2"]
    for values in ([1.0, 2.0, 5.0], [-3.0, 0.5, 8.0]):
        out = skriptnd.run(graph, {f"values.{j}": np.float32(v) for j, v in enumerate(values)})
        assert [float(out[f"output.{j}"]) for j in range(3)] == [v + 1 for v in values]


def test_an_output_pack_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import math;
graph G {
    @input { values: real[]..(3); }
    @output { output: real[]..(2); }
    @compose { output = for value : values do math.add(value, 1.0); }
}
""")
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    (d,) = info.value.diagnostics
    assert d.code == "E0406" and "declared with 2 items but the composition gives 3" in d.message


# ---------------------------------------------------------------- if and loops on dynamic extents

IF = """import math;
import layout;
graph if_dynamic {
    @input { c: bool[]; x: real[n|10]; }
    @output { y: real[n]; z: real[n]; w: real[~|20]; }
    @compose {
        inter = if c then block1: math.add(x, 1.0) else block2: math.sub(x, 1.0);
        y = math.mul(inter, x);
        z = inter;
        w = if c then layout.concat{axis=0}([x, x]) else layout.pad{axes=[0], padding=[1, 1]}(x);
    }
}
"""


@pytest.mark.parametrize("n", [3, 6])
def test_if_branches_keep_the_declared_dynamic_extent(tmp_path: Path, n: int) -> None:
    graph = _model(tmp_path, IF).compose()
    y, z, w = graph.outputs
    assert (str(y.symbolic[0]), y.bounds) == ("n", (10,)) and (z.symbolic is not None and str(z.symbolic[0])) == "n"
    assert w.symbolic is None and w.bounds == (20,)  # 2n or n + 2: unnamed, at most 20
    x = _ramp(n)
    for c in (True, False):
        out = skriptnd.run(graph, {"c": np.array(c), "x": x})
        inter = x + 1 if c else x - 1
        np.testing.assert_array_equal(out["z"], inter)
        np.testing.assert_array_equal(out["y"], inter * x)
        np.testing.assert_array_equal(out["w"], np.concatenate([x, x]) if c else np.pad(x, 1))


def test_an_if_whose_branches_differ_cannot_be_declared_with_one_extent(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(IF.replace("w: real[~|20]", "w: real[n]"))
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    (d,) = info.value.diagnostics
    assert d.code == "E0403" and d.hint is not None and d.hint.endswith("declare them open: real[~|20]")


@pytest.mark.parametrize("n", [3, 5])
def test_a_loop_counted_by_a_dynamic_extent(tmp_path: Path, n: int) -> None:
    """`do..(n)` runs n times, n the actual extent (not its bound 10), and the carried value keeps `n`."""
    graph = _model(tmp_path, """import math;
graph loop_dynamic {
    @input { x: real[n|10]; }
    @output { y: real[n]; z: real[n]; }
    @compose {
        y = with xi = x do..(n) block1: math.mul(xi, 2.0);
        z = math.add(y, x);
    }
}
""").compose()
    x = _ramp(n)
    out = skriptnd.run(graph, {"x": x})
    np.testing.assert_array_equal(out["y"], x * 2.0 ** n)
    np.testing.assert_array_equal(out["z"], x * 2.0 ** n + x)


def test_unroll_refuses_a_count_given_by_a_dynamic_extent(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import math;
graph G {
    @input { x: real[n|10]; }
    @output { y: real[n]; }
    @compose { y = with xi = x unroll..(n) math.mul(xi, 2.0); }
}
""")
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    (d,) = info.value.diagnostics
    assert d.code == "E0503" and "given by a dynamic extent" in d.message


@pytest.mark.parametrize("n", [2, 3])
def test_a_loop_that_changes_a_dynamic_extent_leaves_it_open(tmp_path: Path, n: int) -> None:
    """The body doubles the carried extent: after the loop it is neither `n` nor bounded by 10, and inside the
    body `xi.shape[0]` is the extent of the iteration (n, then 2n), not the initial one."""
    graph = _model(tmp_path, """import layout;
graph grow {
    @input { x: real[n|10]; }
    @output { y: real; z: real; }
    @compose {
        y = with xi = x do..(3) layout.concat{axis=0}([xi, xi]);
        z = with xi = x do..(2) {
            r = layout.reshape{shape=[xi.shape[0], 1]}(xi);
            c = layout.concat{axis=1}([r, r]);
            f = layout.reshape{shape=[-1]}(c);
            yield f;
        };
    }
}
""").compose()
    y, z = graph.outputs
    assert (y.shape, y.bounds, y.symbolic) == ((None,), None, None)
    x = _ramp(n)
    out = skriptnd.run(graph, {"x": x})
    np.testing.assert_array_equal(out["y"], np.tile(x, 8))
    np.testing.assert_array_equal(out["z"], np.repeat(x, 4))


@pytest.mark.parametrize("c", [1, 2])
def test_the_items_of_an_input_pack_share_a_named_extent(tmp_path: Path, c: int) -> None:
    """The reference suite's `dynamic_concat`: `real[4, c|2, 3]..(5)` concatenated gives `5 * c`; an unnamed
    extent (`~|3`) is each item's own."""
    graph = _model(tmp_path, """import layout;
graph dynamic_concat {
    @input { inputs: real[4, c|2, 3]..(5); others: real[~|3]..(2); }
    @output { output: real[4, 5 * c, 3]; joined: real[~|6]; }
    @compose {
        output = layout.concat{axis=1}(inputs);
        joined = layout.concat{axis=0}(others);
    }
}
""").compose()
    items = [_ramp(4, c, 3) + 100 * j for j in range(5)]
    others = {"others.0": _ramp(1), "others.1": _ramp(3)}  # different unnamed extents
    out = skriptnd.run(graph, {**{f"inputs.{j}": x for j, x in enumerate(items)}, **others})
    np.testing.assert_array_equal(out["output"], np.concatenate(items, axis=1))
    np.testing.assert_array_equal(out["joined"], np.concatenate([others["others.0"], others["others.1"]]))
    items[3] = _ramp(4, 3 - c, 3)
    with pytest.raises(DiagnosticError) as info:
        skriptnd.run(graph, {**{f"inputs.{j}": x for j, x in enumerate(items)}, **others})
    assert info.value.diagnostics[0].code == "E0711"


@pytest.mark.parametrize("x", [[0, 1, 0, 2, 0, 0, 3, 0, 0, 0], [5, 0, 0, 0, 0, 0, 0, 0, 0, 6]])
def test_extents_of_data_dependent_results_are_known_per_run(tmp_path: Path, x: list[int]) -> None:
    """`idx.shape[1]` of a `layout.nonzero` result (`int[1, ~|10]`) in an attribute of an operation that does not
    read `idx`, and as a loop count: its value in this run, not the bound 10."""
    graph = _model(tmp_path, """import math;
import layout;
graph G {
    @input { x: real[10]; }
    @output { flat: int; count: int[]; doubled: real[]; }
    @compose {
        idx = layout.nonzero(x);
        flat = layout.reshape{shape=[idx.shape[1]]}(idx);
        count = layout.tensor<int>{value=[idx.shape[1]]}();
        doubled = with v = 1.0 do..(idx.shape[1]) math.mul(v, 2.0);
    }
}
""").compose()
    values = np.array(x, np.float32)
    out = skriptnd.run(graph, {"x": values})
    (nonzero,) = np.nonzero(values)
    assert out["flat"].tolist() == nonzero.tolist() and int(out["count"]) == len(nonzero)
    assert float(out["doubled"]) == 2.0 ** len(nonzero)


def test_checking_samples_of_attributes_are_not_dynamic_extents(tmp_path: Path) -> None:
    """`sknd check` composes a graph for a symbol standing for an attribute without a default (`k`): a loop
    unrolled `k` times is fine there, unlike one unrolled over a dynamic extent."""
    _model(tmp_path, """import math;
graph G {
    @attrib { k: int; }
    @input { x: real[4]; }
    @output { y: real[4]; }
    @compose { y = with xi = x unroll..(k) math.mul(xi, 2.0); }
}
""")


def test_a_compile_time_if_on_a_dynamic_extent_is_refused_and_the_hint_runs(tmp_path: Path) -> None:
    """`if n > 5` on `real[n|10]` would be decided at the bound (10) for every size: refused, located, with a
    tensor condition to write instead; that one branches per run (n = 3 and n = 7)."""
    text = """import math;
import layout;
graph G {
    @input { x: real[n|10]; }
    @output { y: real[n]; }
    @compose { y = if n > 5 then math.add(x, 1.0) else math.sub(x, 1.0); }
}
"""
    (tmp_path / "main.sknd").write_text(text)
    (d,) = check_paths([tmp_path]).diagnostics
    assert d.code == "E0503" and (d.span.line, d.span.col) == (6, 23) and d.hint is not None
    tensor, condition = d.hint.split("'")[1], d.hint.split("'")[3].replace(" then ...", "")
    assert (tensor, condition) == ("n_ = layout.tensor<int>{value=[n]}();", "if math.gt(n_, 5)")
    graph = _model(tmp_path, text.replace("y = if n > 5", f"{tensor} y = {condition}")).compose()
    for n in (3, 7):
        x = _ramp(n)
        np.testing.assert_array_equal(skriptnd.run(graph, {"x": x})["y"], x + 1 if n > 5 else x - 1)


def test_an_attribute_choosing_on_a_dynamic_extent_is_refused(tmp_path: Path) -> None:
    """`repeats=[n > 5 ? 1 : 2]` would be chosen at the bound for every size (arithmetic such as `[h, -1]` is
    fine: it is evaluated per run); `sknd check` and composing refuse it at the expression."""
    (tmp_path / "main.sknd").write_text("""import layout;
graph G {
    @input { x: real[n|10]; }
    @output { y: real; }
    @compose { y = layout.tile{axes=[0], repeats=[n > 5 ? 1 : 2]}(x); }
}
""")
    (d,) = check_paths([tmp_path]).diagnostics
    assert d.code == "E0503" and (d.span.line, d.span.col) == (5, 50) and "attribute 'repeats'" in d.message
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    assert info.value.diagnostics[0].code == "E0503"
