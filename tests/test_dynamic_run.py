"""Running and exporting graphs with dynamic extents (issue 25, items 5 and 6).

A graph composed once with `x: real[n|8, 3, h|16, w|16]` runs at any shape within its bounds: the numpy
backend binds each operation to the actual shapes once per distinct shapes and runs its TOSA subgraph (not
its @lower formulas), and nothing is composed again. Results are checked against numpy computations
written here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.backends import prepare, tosa_programs
from skriptnd.compose.composer import Composer
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import executor

CNN = """import nn;
import math;
import layout;
graph cnn {
    @input { x: real[n|8, 3, h|16, w|16]; f: real[4, 3, 3, 3]; m: real[4, 5]; }
    @output { y: real[n, 5]; z: real[n, 4, h, w]; }
    @compose {
        c = nn.conv{padding=[1, 1, 1, 1]}(x, f);
        z = nn.relu(c);
        e = math.mean_reduce{axes=[2, 3], squeeze=true}(z);
        mt = layout.transpose{perm=[1, 0]}(m);
        y = nn.linear(e, mt);
    }
}
"""


def _conv_same(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """A 3x3 convolution with one pixel of zero padding, written out (cross-correlation, as nn.conv)."""
    n, _, h, w = x.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, f.shape[0], h, w))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", padded[:, :, i:i + h, j:j + w], f[:, :, i, j])
    return out


def _expected(x: np.ndarray, f: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.maximum(_conv_same(x, f), 0.0)
    return z.mean(axis=(2, 3)) @ m, z


@pytest.fixture
def cnn(tmp_path: Path) -> skriptnd.compose.ir.Graph:
    (tmp_path / "main.sknd").write_text(CNN)
    return skriptnd.load(tmp_path).compose()


def test_one_composition_runs_at_several_shapes_as_tosa_programs(cnn: skriptnd.compose.ir.Graph,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each distinct input shapes get the graph bound to them, planned once as TOSA programs: no @lower plan
    is compiled, nothing is composed again, and a shape seen before reuses its plan (the old code bound and
    ran each operation on its own, through its @lower formulas)."""
    calls = {"programs": 0}
    real = tosa_programs._run_program

    def counted(*a: object) -> object:
        calls["programs"] += 1
        return real(*a)

    def refused(*a: object, **k: object) -> object:
        raise AssertionError("composed or planned again for a new shape")

    monkeypatch.setattr(tosa_programs, "_run_program", counted)
    monkeypatch.setattr(executor, "compile_lowering", refused)
    monkeypatch.setattr(Composer, "compose_definition", refused)
    runner = prepare(cnn)
    rng = np.random.default_rng(7)
    f, m = rng.standard_normal((4, 3, 3, 3), np.float32), rng.standard_normal((4, 5), np.float32)
    for shape in [(2, 3, 6, 7), (1, 3, 16, 9), (2, 3, 6, 7), (8, 3, 3, 16)]:
        x = rng.standard_normal(shape, np.float32)
        before = calls["programs"]
        out = skriptnd.run(cnn, {"x": x, "f": f, "m": m})
        assert calls["programs"] > before
        y, z = _expected(x, f, m)
        assert out["z"].shape == z.shape and out["y"].shape == (shape[0], 5)
        np.testing.assert_allclose(out["z"], z, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)
    assert runner.shaped is not None and runner.shaped.prepared == 3


@pytest.mark.parametrize("backend", ["kernels", "lower"])
def test_the_other_numpy_backends_agree_at_two_shapes(cnn: skriptnd.compose.ir.Graph, backend: str) -> None:
    rng = np.random.default_rng(3)
    f, m = rng.standard_normal((4, 3, 3, 3), np.float32), rng.standard_normal((4, 5), np.float32)
    for shape in [(3, 3, 5, 4), (1, 3, 12, 11)]:
        x = rng.standard_normal(shape, np.float32)
        out = skriptnd.run(cnn, {"x": x, "f": f, "m": m}, backend=backend)
        y, z = _expected(x, f, m)
        np.testing.assert_allclose(out["z"], z, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)


def test_attributes_given_by_extents_are_made_concrete_per_shape(tmp_path: Path) -> None:
    """`layout.reshape{shape=[h * w]}` and `split{sizes=[s \\ 2, ...]}`-like attributes take this run's extents when
    the graph is bound to the shapes; an `if` (whose branches read the enclosing tensors) runs as composed."""
    (tmp_path / "main.sknd").write_text(r"""import layout;
import math;
graph G {
    @input { x: real[h|10, w|10]; }
    @output { flat: real[h * w]; halves: real[h \ 2, w]; rest: real[h / 2, w]; turned: real[w, h]; }
    @compose {
        flat = layout.reshape{shape=[h * w]}(x);
        [halves, rest] = layout.split{axis=0, sizes=[h \ 2, h / 2]}(x);
        t = layout.reshape{shape=[w, -1]}(x);
        turned = math.mul(t, 2.0);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    runner = prepare(graph)
    for shape in [(3, 4), (5, 2), (3, 4)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        out = skriptnd.run(graph, {"x": x})
        up = -(-shape[0] // 2)
        np.testing.assert_array_equal(out["flat"], x.reshape(-1))
        np.testing.assert_array_equal(out["halves"], x[:up])
        np.testing.assert_array_equal(out["rest"], x[up:])
        np.testing.assert_array_equal(out["turned"], x.reshape(shape[1], shape[0]) * 2)
    assert runner.shaped is not None and runner.shaped.prepared == 2


def test_iree_compiles_each_distinct_shape_once_and_agrees(cnn: skriptnd.compose.ir.Graph, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """--via iree on a graph with dynamic extents: the graph bound to each distinct input shapes, compiled whole
    (the old code left every operation with a dynamic extent on numpy), its plan saying so; a shape seen
    before reuses its module."""
    pytest.importorskip("iree.compiler")
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    runner = prepare(cnn, "iree")
    assert "dynamic extents (h, n, w): one IREE module for all shapes where" in runner.plan[0]
    rng = np.random.default_rng(5)
    f, m = rng.standard_normal((4, 3, 3, 3), np.float32), rng.standard_normal((4, 5), np.float32)
    for shape in [(2, 3, 6, 7), (1, 3, 9, 4), (2, 3, 6, 7)]:
        x = rng.standard_normal(shape, np.float32)
        out = skriptnd.run(cnn, {"x": x, "f": f, "m": m}, backend="iree")
        y, z = _expected(x, f, m)
        np.testing.assert_allclose(out["z"], z, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)
    assert runner.shaped.prepared == 2
    # the mean over h and w multiplies by 1 / (h * w): a constant that follows the extents, so no one module
    assert "the TOSA program changes with the sizes" in runner.plan[1]
    assert [line.split(": cnn: ")[0] for line in runner.plan[2:]] == ["for x[2, 3, 6, 7]", "for x[1, 3, 9, 4]"]
    assert all(": all " in line and "operations compiled by IREE" in line for line in runner.plan[2:])  # no split


def test_iree_compiles_one_module_for_every_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the batch is dynamic: the programs of three bindings differ only in tensor types and reshape
    targets, so one module with IREE's dynamic dimensions runs every batch (compiled once; the old code left
    every operation on numpy), checked against numpy at the three sizes compared."""
    pytest.importorskip("iree.compiler")
    from skriptnd.backends import via_iree

    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "main.sknd").write_text(CNN.replace("x: real[n|8, 3, h|16, w|16]", "x: real[n|8, 3, 6, 5]")
                                              .replace("z: real[n, 4, h, w]", "z: real[n, 4, 6, 5]"))
    graph = skriptnd.load(tmp_path / "m").compose()
    compiled = []
    real = via_iree.IreeModule.__init__

    def counted(self: object, *a: object, **k: object) -> None:
        compiled.append(a[0])
        real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(via_iree.IreeModule, "__init__", counted)
    rng = np.random.default_rng(2)
    f, m = rng.standard_normal((4, 3, 3, 3), np.float32), rng.standard_normal((4, 5), np.float32)
    for n in (3, 1, 8, 5):
        x = rng.standard_normal((n, 3, 6, 5), np.float32)
        out = skriptnd.run(graph, {"x": x, "f": f, "m": m}, backend="iree")
        y, z = _expected(x, f, m)
        np.testing.assert_allclose(out["z"], z, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)
    assert len(compiled) == 1 and "tensor<?x3x6x5xf32>" in str(compiled[0])
    plan = prepare(graph, "iree").plan
    assert plan[1].startswith("one module for all shapes (IREE dynamic dimensions), checked against numpy at "
                              "x[3, 3, 6, 5]; x[4, 3, 6, 5]; x[5, 3, 6, 5]")
    with pytest.raises(DiagnosticError) as info:  # a batch beyond the bound is still E0711
        skriptnd.run(graph, {"x": np.zeros((9, 3, 6, 5), np.float32), "f": f, "m": m}, backend="iree")
    assert info.value.diagnostics[0].code == "E0711"


def test_merging_two_programs_keeps_only_types_and_one_reshape_entry_dynamic() -> None:
    from skriptnd.backends.iree_dynamic import merge, perturbed

    def program(n: int, scale: str = "1.0", target: str = "[{n}, 16]") -> str:
        return (f'  %0 = "tosa.const_shape"() <{{values = dense<{target.format(n=n)}> : tensor<2xindex>}}> : () -> '
                f'!tosa.shape<2>\n  %1 = "tosa.reshape"(%arg0, %0) : (tensor<{n}x16x1x1xf32>, !tosa.shape<2>) -> '
                f'tensor<{n}x16xf32>\n  %2 = "tosa.const"() <{{values = dense<{scale}> : tensor<1xf32>}}>\n')

    merged = merge(program(2), program(3))
    assert merged is not None and "dense<[-1, 16]>" in merged and "tensor<?x16x1x1xf32>" in merged
    assert "tensor<?x16xf32>" in merged and "tensor<2xindex>" in merged  # the target's own type stays
    assert merge(program(2), program(3, scale="0.5")) is None  # a constant that follows the extent
    assert merge(program(2, target="[{n}, {n}]"), program(3, target="[{n}, {n}]")) is None  # two entries
    assert merge(program(2), program(2)) is None  # nothing dynamic
    assert perturbed({"n": 3}, {"n": 4}, 1) == {"n": 4} and perturbed({"n": 4}, {"n": 4}, 2) == {"n": 2}
    assert perturbed({"n": 1}, {"n": 1}, 1) is None


def test_iree_runs_a_dynamic_graph_it_cannot_bind_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `if` keeps the graph from being bound to static shapes: --via iree runs it as composed, the
    operations with dynamic extents on numpy, the plan saying so (the old code failed with a TypeError in
    the grouped-convolution rewrite on a dynamic convolution)."""
    pytest.importorskip("iree.compiler")
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "main.sknd").write_text("""import nn;
import math;
graph G {
    @input { c: bool[]; x: real[n|4, 2, 5, 5]; f: real[4, 1, 3, 3]; }
    @output { y: real[n, 4, 5, 5]; }
    @compose {
        a = nn.conv{padding=[1, 1, 1, 1], groups=2}(x, f);
        y = if c then math.add(a, 1.0) else math.sub(a, 1.0);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    rng = np.random.default_rng(1)
    f = rng.standard_normal((4, 1, 3, 3), np.float32)
    for n, c in [(1, True), (3, False)]:
        x = rng.standard_normal((n, 2, 5, 5), np.float32)
        out = skriptnd.run(graph, {"c": np.array(c), "x": x, "f": f}, backend="iree")
        groups = [_conv_same(x[:, g:g + 1], f[2 * g:2 * g + 2]) for g in range(2)]
        np.testing.assert_allclose(out["y"], np.concatenate(groups, axis=1) + (1 if c else -1), rtol=1e-4, atol=1e-4)
    plan = prepare(graph, "iree").plan
    assert any("not bound to static shapes" in line for line in plan)


PROPERTY = r"""import nn;
import math;
import layout;
graph P {
    @input { x: real[n|4, 2, h|9, w|9]; f: real[3, 2, 3, 3]; }
    @output { y: real[n, 3, h, w]; flat: real[n, 2 * h * w]; top: real[n, 2, h \ 2, w]; }
    @compose {
        c = nn.conv{padding=[1, 1, 1, 1]}(x, f);
        y = nn.relu(c);
        flat = layout.reshape{shape=[n, -1]}(x);
        [top, bottom] = layout.split{axis=2, sizes=[h \ 2, h / 2]}(x);
    }
}
"""


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_any_shapes_within_the_bounds_in_any_order(tmp_path_factory: pytest.TempPathFactory,
                                                    shapes: list[tuple[int, int, int]], seed: int) -> None:
    """Runs at shapes drawn within the bounds, repeated or not, in any order, on one composition and one
    runner: each result is the numpy computation of that run's input (a plan kept for one shape is never
    used for another)."""
    folder = tmp_path_factory.mktemp("p")
    (folder / "main.sknd").write_text(PROPERTY)
    graph = skriptnd.load(folder).compose()
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((3, 2, 3, 3), np.float32)
    for n, h, w in shapes + shapes[::-1]:
        x = rng.standard_normal((n, 2, h, w), np.float32)
        out = skriptnd.run(graph, {"x": x, "f": f})
        np.testing.assert_allclose(out["y"], np.maximum(_conv_same(x, f), 0), rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(out["flat"], x.reshape(n, -1))
        np.testing.assert_array_equal(out["top"], x[:, :, :-(-h // 2)])
    assert prepare(graph).shaped.prepared == len(set(shapes))
