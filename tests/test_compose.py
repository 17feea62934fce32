"""Graph composition (spec chapter 3, §2.10): shapes, labels and scopes, decomposition,
compile-time control flow, dynamic control flow as subgraphs, and the `sknd compose` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.check.program import check_paths
from skriptnd.compose import Operation, Tensor
from skriptnd.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parents[1]

LIBRARY = """
import math;
import linalg;

operator add_all {
    @input { xs: real[n]..(k); }
    @output { y: real[n]; }
    @compose { y = with sum: real[n] = 0.0 for x : xs unroll math.add(sum, x); }
}

operator add_all_dyn {
    @input { xs: real[n]..(k); }
    @output { y: real[n]; }
    @compose { y = with sum: real[n] = 0.0 for x : xs do math.add(sum, x); }
}

operator matpow {
    @input { A: real[n,n]; p: int[]; }
    @output { B: real[n,n]; }
    @constant { I: real[n,n] = i == j ? 1.0 : 0.0, i < n, j < n; }
    @compose { B = with X = I do..(p) linalg.matmul(X, A); }
}

public operator block {
    @input { x: real[n]; b: optional real[n]; }
    @output { y: real[n]; }
    @variable { w: real[n]; }
    @compose {
        t = math.mul(x, w);
        y = if ?b then math.add(t, b) else t;
    }
}

operator twice {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @compose { y = block(x, x); }
}
"""

GRAPH = """
graph G {
    @attrib { n: int = 4; }
    @input { a: real[n]; c: real[n]; p: int[]; m: real[3, 3]; }
    @output { s: real[n]; d: real[n]; q: real[3, 3]; z: real[n]; z2: real[n]; u: real[n]; }
    @compose {
        s = add_all([a, c, a]);
        d = add_all_dyn([a, c]);
        q = matpow(m, p);
        z = blk: block(a, c);
        z2 = block(a);
        u = twice(a);
    }
}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> skriptnd.Model:
    folder = tmp_path_factory.mktemp("model")
    (folder / "main.sknd").write_text(LIBRARY + GRAPH)
    return skriptnd.load(folder)


def names(values: list) -> list:
    return [[t.name for t in v] if isinstance(v, list) else None if v is None else v.name for v in values]


def test_alexnet_shapes_follow_the_pytorch_formulas() -> None:
    graph = skriptnd.load(ROOT / "models" / "alexnet").compose(attribs={"batch": 2})
    shapes = {op.label: op.outputs[0].shape for op in graph.operations}

    def out(i: int, k: int, s: int, p: int) -> int:  # torch.nn.Conv2d / MaxPool2d output size
        return (i + 2 * p - k) // s + 1

    side = out(224, 11, 4, 0)
    assert shapes["conv1"] == (2, 64, side, side)
    side = out(side, 3, 2, 0)
    assert shapes["pool1"] == (2, 64, side, side)
    side = out(out(side, 5, 1, 2), 3, 2, 0)
    assert shapes["pool2"] == (2, 192, side, side)
    side = out(side, 3, 2, 0)
    assert shapes["pool3"] == (2, 256, side, side)
    assert shapes["conv6"] == (2, 4096, side - 4, side - 4)
    assert shapes["flat1"] == (2, 4096)
    assert graph.outputs[0].shape == (2, 1000) and graph.outputs[0].name == "output"
    assert [t.name for t in graph.inputs] == ["input"]
    assert len(graph.variables) == 16
    assert all(op.op.startswith(("nn.", "layout.")) for op in graph.operations)  # stdlib stays atomic


def test_unroll_makes_a_tensor_per_step_and_labels_follow_scopes(model: skriptnd.Model) -> None:
    graph = model.compose()
    adds = [op for op in graph.operations if op.label.startswith("s.")]
    # add_all has one component without local tensors: its scope 's' propagates (§2.10)
    assert [op.label for op in adds] == ["s.0", "s.1", "s.2"]
    assert names(adds[0].outputs) == ["s.0.sum"] and names(adds[2].outputs) == ["s"]
    assert names(adds[1].inputs) == ["s.0.sum", "c"]


def test_static_if_and_optional_promotion(model: skriptnd.Model) -> None:
    graph = model.compose()
    by_label = {op.label: op for op in graph.operations if not op.subgraphs}
    # `if ?b`: b given -> the add is composed; b omitted -> only the mul, whose result is z2
    assert by_label["blk.y"].op == "math.add" and names(by_label["blk.y"].outputs) == ["z"]
    assert "z2.y" not in by_label and names(by_label["z2.t"].outputs) == ["z2"]
    # variables of invoked operators are scoped by the invocation's label
    assert {t.name for t in graph.variables} == {"blk.w", "z2.w", "u.w"}


def test_scope_propagates_through_single_component_operators(model: skriptnd.Model) -> None:
    graph = model.compose()
    # twice -> block: twice has one component and no locals, so block's tensors live in 'u'
    assert {op.label for op in graph.operations if op.label.startswith("u")} == {"u.t", "u.y"}


def test_dynamic_loops_become_operations_with_a_body(model: skriptnd.Model) -> None:
    graph = model.compose()
    loops = {op.label: op for op in graph.operations if op.op == "loop"}
    scan = loops["d"]
    assert scan.attribs["max_iterations"] == 2 and scan.attribs["carried"] == 1
    body = scan.subgraphs["body"]
    assert [op.op for op in body.operations] == ["math.add"]
    assert [t.shape for t in body.inputs] == [(4,), (4,)]
    power = loops["q.B"]  # matpow has a @constant: no scope propagation, label q.B
    assert power.attribs["has_count"] and power.attribs["max_iterations"] is None
    assert names(power.inputs) == ["q.I", "p"]
    identity = power.inputs[0]
    assert identity.kind == "constant" and identity.value.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_decompose_all_goes_down_to_primitives(model: skriptnd.Model) -> None:
    atomic = model.compose()
    decomposed = model.compose(decompose=True)
    assert all(isinstance(op, Operation) for op in decomposed.operations)
    assert len(decomposed.operations) >= len(atomic.operations)
    graph = skriptnd.load(ROOT / "models" / "alexnet").compose(decompose=True)
    assert {op.op for op in graph.operations} >= {"nn.conv", "layout.flatten"}
    assert all(op.definition is None or not any(b.__class__.__name__ == "ComposeBlock" and b.kind == "compose"
                                                for b in op.definition.blocks) for op in graph.operations)


def test_graph_attributes_and_errors(model: skriptnd.Model) -> None:
    graph = model.compose(attribs={"n": 7})
    assert graph.tensor("a").shape == (7,)
    with pytest.raises(DiagnosticError) as info:
        model.compose("H")
    assert info.value.diagnostics[0].code == "E0204"
    with pytest.raises(DiagnosticError) as info:
        model.compose(attribs={"nn": 3})
    assert info.value.diagnostics[0].code == "E0209" and "did you mean 'n'" in (info.value.diagnostics[0].hint or "")
    with pytest.raises(DiagnosticError) as info:
        model.compose(attribs={"n": 2.5})
    assert info.value.diagnostics[0].code == "E0301"


def test_invalid_invocation_is_reported_at_the_call(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import linalg;
graph G {
    @input { a: real[2, 3]; b: real[4, 5]; }
    @output { c: real[2, 5]; }
    @compose { c = linalg.matmul(a, b); }
}
""")
    with pytest.raises(DiagnosticError) as info:
        skriptnd.load(tmp_path).compose()
    (d,) = info.value.diagnostics
    assert d.code == "E0501" and (d.span.line, d.span.col) == (5, 20)
    assert d.notes and d.notes[0].span.file.endswith("linalg.sknd")


def test_dynamic_graph_input_keeps_its_bound(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import nn;
graph G {
    @input { x: real[s|10]; y: real[~|5, 3]; }
    @output { z: real; w: real; }
    @compose { z = nn.relu(x); w = nn.relu(y); }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    x, y = graph.inputs
    assert x.shape == (None,) and x.bounds == (10,)
    assert y.shape == (None, 3) and y.bounds == (5, None)
    assert isinstance(graph.outputs[0], Tensor)


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True)


def test_sknd_compose_formats(tmp_path: Path) -> None:
    alexnet = str(ROOT / "models" / "alexnet")
    text = sknd("compose", alexnet, "--attrib", "batch=3")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("graph AlexNet(input: real[3, 3, 224, 224]) -> (output: real[3, 1000])")
    assert "conv1: real[3, 64, 54, 54] = nn.conv{" in text.stdout
    data = json.loads(sknd("compose", alexnet, "--format", "json").stdout)
    assert data["outputs"] == ["output"] and len(data["operations"]) == 20
    assert data["operations"][0]["op"] == "nn.conv" and data["operations"][0]["inputs"] == ["input", "kernel1",
                                                                                           "bias1"]
    dot = sknd("compose", alexnet, "--format", "dot", "--output", str(tmp_path / "g.dot"))
    assert dot.returncode == 0 and (tmp_path / "g.dot").read_text().startswith('digraph "AlexNet"')
    bad = sknd("compose", alexnet, "--attrib", "batch=")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    missing = sknd("compose", str(tmp_path))
    assert missing.returncode == 1 and "E0003" in missing.stderr


def test_packed_constants_have_per_item_shapes_and_values(tmp_path: Path) -> None:
    # §2.7: a pack of constants, one uniform value per item, shapes from a per-item extent
    (tmp_path / "main.sknd").write_text("""import layout;
graph G {
    @input { x: real[2]; }
    @output { y: real[5]; }
    @using { sizes = [1, 2]; }
    @constant { c: real[..sizes]..(2) = [1.0, 2.0]; }
    @compose { y = layout.concat{axis=0}([x, c..]); }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    assert [(t.name, t.shape, t.value.tolist()) for t in graph.constants if not t.name.startswith("%")] == [
        ("c.0", (1,), [1.0]), ("c.1", (2,), [2.0, 2.0])]
    out = skriptnd.run(graph, {"x": np.array([5.0, 6.0], dtype=np.float32)})["y"]
    assert out.tolist() == [5.0, 6.0, 1.0, 2.0, 2.0]


def test_update_gives_the_next_run_new_variable_values(tmp_path: Path) -> None:
    # §2.11: @update assigns variables; an executor keeps them between runs
    (tmp_path / "main.sknd").write_text("""import math;
graph Counter {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @variable { total: real[3]; }
    @compose { y = math.add(total, x); }
    @update { total = y; }
}
""")
    from skriptnd.backends import kernels_for
    from skriptnd.execute import Executor

    graph = skriptnd.load(tmp_path).compose()
    executor = Executor(graph, {"total": np.zeros(3, np.float32)}, kernels=kernels_for("numpy")[0])
    ones = np.ones(3, np.float32)
    assert [executor.run({"x": ones})["y"].tolist() for _ in range(3)] == [[1.0] * 3, [2.0] * 3, [3.0] * 3]
    assert executor.variables["total"].tolist() == [3.0] * 3


def test_an_output_that_is_another_tensor_keeps_its_declared_name(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import nn;
graph G {
    @input { a: real[3]; }
    @output { z: real[3]; r: real[3]; }
    @compose { z = a; r = nn.relu(a); }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    out = skriptnd.run(graph, {"a": np.array([-1.0, 0.0, 2.0], dtype=np.float32)})
    assert sorted(out) == ["r", "z"]
    assert out["z"].tolist() == [-1.0, 0.0, 2.0] and out["r"].tolist() == [0.0, 0.0, 2.0]


def test_dynamic_extents_propagate_symbolically_with_upper_bounds(tmp_path: Path) -> None:
    # §3.1: shapes after a dynamic input stay expressions in its dynamic extents, with bounds
    (tmp_path / "main.sknd").write_text("""import nn;
import layout;
graph G {
    @input { x: real[s|10, 4]; }
    @output { y: real; z: real; }
    @compose {
        y = nn.relu(x);
        z = layout.concat{axis=0}([y, y]);
    }
}
""")
    import sympy

    graph = skriptnd.load(tmp_path).compose()
    s = sympy.Symbol("s", integer=True, nonnegative=True)
    relu, concat = graph.operations
    assert relu.outputs[0].shape == (None, 4) and relu.outputs[0].bounds == (10, None)
    assert concat.outputs[0].symbolic == (2 * s, None) and concat.outputs[0].bounds == (20, None)
    out = skriptnd.run(graph, {"x": np.ones((3, 4), np.float32)})
    assert out["y"].shape == (3, 4) and out["z"].shape == (6, 4)
    text = subprocess.run([sys.executable, "-m", "skriptnd", "compose", str(tmp_path)], capture_output=True,
                          text=True).stdout
    assert "z: real[2*s|20, 4] = layout.concat" in text


@pytest.mark.parametrize("public", [True, False])
def test_quantize_reaches_inside_public_operators_only(tmp_path: Path, public: bool) -> None:
    # §2.10: scoped names reach variables and constants; other tensors only in public operators
    (tmp_path / "main.sknd").write_text(f"""import math;
import quant;
{"public " if public else ""}operator scaled {{
    @input {{ x: real[n]; }}
    @output {{ y: real[n]; }}
    @variable {{ w: real[n]; }}
    @compose {{
        t = math.mul(x, w);
        y = math.add(t, x);
    }}
}}
graph G {{
    @input {{ x: real[4]; }}
    @output {{ y: real[4]; }}
    @compose {{ y = s: scaled(x); }}
    @quantize {{
        s.w: quant.zero_point_linear_quantize{{zero_point=0, scale=0.5, bits=8}};
        s.t: quant.zero_point_linear_quantize{{zero_point=0, scale=0.5, bits=8}};
    }}
}}
""")
    model = skriptnd.load(tmp_path)
    if public:
        graph = model.compose()
        assert graph.tensor("s.w").quant["op"] == "quant.zero_point_linear_quantize"
        assert graph.tensor("s.t").quant["attribs"]["scale"] == 0.5
    else:
        with pytest.raises(DiagnosticError) as info:
            model.compose()
        (d,) = info.value.diagnostics
        assert d.code == "E0201" and "not public" in d.message and (d.span.line, d.span.col) == (18, 9)
        # sknd check composes the graph for its defaults (issue 15): the same diagnostic
        assert check_paths([str(tmp_path)]).diagnostics == [d]


def test_explicit_label_in_a_static_branch_overrides_the_target_name(tmp_path: Path) -> None:
    # §2.10: "Both cases can be overridden by explicit labels" -- also when the invocation is the
    # branch a static `if` picks (found composing models/resnet18's downsampling shortcut)
    (tmp_path / "main.sknd").write_text("""import math;
operator scaled {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @variable { w: real[n]; }
    @compose { y = math.mul(x, w); }
}
operator block {
    @attrib { down: bool; }
    @input { x: real[n]; }
    @output { y: real[n]; }
    @compose {
        s = if down then ds: scaled(x) else x;
        t = if !down then x else other: scaled(x);
        y = math.add(s, t);
    }
}
graph G {
    @input { x: real[4]; }
    @output { y: real[4]; z: real[4]; }
    @compose {
        y = b1: block{down=true}(x);
        z = b2: block{down=false}(x);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    assert sorted(t.name for t in graph.variables) == ["b1.ds.w", "b1.other.w"]
    assert [op.label for op in graph.operations] == ["b1.ds.y", "b1.other.y", "b1.y", "b2.y"]


def test_bounds_of_extents_derived_from_dynamic_ones_are_numbers(tmp_path: Path) -> None:
    # nn.lstm's Y is real[~|s,b,n]; a second lstm on the first one's Y gets s = the first Y's dynamic
    # extent, whose bound (8) is what the second Y's bound is, not the symbol (found composing models/lstm)
    (tmp_path / "main.sknd").write_text("""import nn;
graph G {
    @input { X: real[8,1,2]; W1: real[12,2]; W2: real[12,3]; R: real[12,3]; B: real[12]; }
    @output { Y: real[~|8,1,3]; }
    @compose {
        Y1, ~, ~ = nn.lstm(X, W1, R, B);
        Y, ~, ~ = nn.lstm(Y1, W2, R, B);
    }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    (y,) = graph.outputs
    assert y.shape == (None, 1, 3) and y.bounds == (8, None, None)
    assert all(type(b) is int for b in y.bounds if b is not None)
    text = subprocess.run([sys.executable, "-m", "skriptnd", "compose", str(tmp_path)], capture_output=True,
                          text=True).stdout
    assert text.splitlines()[0] == "graph G(X: real[8, 1, 2], W1: real[12, 2], W2: real[12, 3], R: real[12, 3], " \
                                   "B: real[12]) -> (Y: real[~|8, 1, 3])"
