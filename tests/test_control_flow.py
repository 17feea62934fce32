"""Control flow at run time (spec §2.10, §2.10.1, §4.4.5): composed graphs executed with numpy
inputs and checked against independent numpy computations.

Covered: the spec's own examples (`add_to_all`, `add_all` with `do` and `unroll`, `matpow` with a
tensor power, `with s = 0 do..(i -> k) add(s, i)`), `while-do` and `do-while` loops, a condition
collapsed into the body, a condition combined with a count and with a `for` clause, loop bodies
that are blocks (carried values, scan outputs, the iteration index), nested loops, a dynamic `if`
inside a loop, a scanning loop with a tensor count (a pack of dynamic length), dynamic `if` on a
tensor condition (invocations and blocks), `if ?x` promotion, blocks with `yield` and labels;
and `nn.lstm` with and without `steps`, against a numpy LSTM written from §4.4.5's equations.

Every graph runs as composed by default (standard-library composites such as `nn.lstm` stay one
operation and run their own @compose) and fully decomposed (`decompose=True`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.compose import Graph, Operation
from skriptnd.diagnostics import DiagnosticError
from skriptnd.io import write_tensor

LIBRARY = """
import math;
import linalg;
import layout;

# spec §2.10.1, scanning loops
operator add_to_all {
    @input { xs: real[n]..(k); z: real[n]; }
    @output { ys: real[n]..(k); }
    @compose { ys = for x : xs do math.add(x, z); }
}

# spec §2.10.1, folding loops
operator add_all {
    @input { xs: real[n]..(k); }
    @output { y: real[n]; }
    @compose { y = with sum: real[n] = 0.0 for x : xs do math.add(sum, x); }
}

# spec §2.10.1, loop unrolling
operator add_all_unrolled {
    @input { xs: real[n]..(k); }
    @output { y: real[n]; }
    @compose { y = with sum: real[n] = 0.0 for x : xs unroll math.add(sum, x); }
}

# spec §2.10.1, iteration count: a tensor power
operator matpow {
    @input { A: real[n,n]; p: int[]; }
    @output { B: real[n,n]; }
    @constant { I: real[n,n] = i == j ? 1.0 : 0.0, i < n, j < n; }
    @compose { B = with X = I do..(p) linalg.matmul(X, A); }
}

# spec §2.10.1, iteration index: 0 + 1 + ... + (k - 1)
operator count_to {
    @input { k: int[]; }
    @output { sum: int[]; }
    @compose { sum = with s = 0 do..(i -> k) math.add(s, i); }
}

# one step of a loop whose body computes its own condition (spec §2.10.1, condition based looping)
operator double_step {
    @input { x: real[]; bound: real[]; }
    @output { y: real[]; c: bool[]; }
    @compose {
        y = math.mul(x, 2.0);
        c = math.lt(y, bound);
    }
}

operator choose {
    @input { x: real[n]; y: real[n]; c: bool[]; }
    @output { z: real[n]; }
    @compose { z = if c then math.add(x, y) else math.mul(x, y); }
}

operator choose_blocks {
    @input { x: real[n]; y: real[n]; }
    @output { z: real[n]; }
    @compose {
        z = if {
            s = math.sum_reduce{axes=[0]}(x);
            c = math.lt(s, 0.0);
            yield c;
        } then {
            r = math.sub(x, y);
            yield r;
        } else {
            r = math.mul(x, y);
            t = math.add(r, 1.0);
            yield t;
        };
    }
}

operator scale_or_negate {
    @input { x: real[n]; b: optional real[n]; }
    @output { y: real[n]; }
    @compose {
        y = if ?b then {
            t = math.mul(x, b);
            yield t;
        } else {
            t = math.neg(x);
            yield t;
        };
    }
}
"""

GRAPHS = """
graph Loops {
    @input { a: real[4]; b: real[4]; c: real[4]; z: real[4]; m: real[3,3]; p: int[]; k: int[]; }
    @output {
        y0: real[4]; y1: real[4]; y2: real[4];
        s: real[4]; su: real[4]; q: real[3,3]; cnt: int[]; cnt4: int[];
    }
    @compose {
        [y0, y1, y2] = add_to_all([a, b, c], z);
        s = add_all([a, b, c]);
        su = add_all_unrolled([a, b, c]);
        q = matpow(m, p);
        cnt = count_to(k);
        cnt4 = with s = 0 do..(i -> 4) math.add(s, i);
    }
}

graph Conditions {
    @input { x0: real[]; bound: real[]; n: int[]; }
    @output { w: real[]; dw: real[]; iw: real[]; its: int[]; col: real[]; go: bool[]; lim: real[]; }
    @compose {
        w = with x = x0 while math.lt(x, bound) do math.mul(x, 2.0);
        dw = with x = x0 do math.mul(x, 2.0) while math.lt(x, bound);
        iw, its = with x = x0, k = 0 while {
            t = math.lt(x, bound);
            yield t;
        } do {
            x2 = math.mul(x, 2.0);
            k2 = math.add(k, 1);
            yield x2, k2;
        };
        col, go = with x = x0, g = true while g do double_step(x, bound);
        lim = with x = x0 while math.lt(x, bound) do..(n) math.mul(x, 2.0);
    }
}

graph Bodies {
    @input { a: real[4]; b: real[4]; c: real[4]; v: real[3]; n: int[]; lim: real[]; }
    @output {
        acc: real[4]; f0: real[4]; f1: real[4]; f2: real[4]; idx: int[3];
        nest: real[4]; sabs: real[]; part: real[~|3, 4]; run: real[]; runs: real[~|3];
    }
    @compose {
        acc, [f0, f1, f2], ids..(3) = with sum: real[4] = 0.0 for x : [a, b, c] do..(i ->) {
            sum2 = math.add(sum, x);
            fx = math.mul(x, 3.0);
            yield sum2, fx, i;
        };
        idx = layout.stack{axis=0}(ids);
        nest = with t: real[4] = 0.0 for x : [a, b] do {
            inner = with u = t for y : [x, x] do math.add(u, y);
            yield inner;
        };
        vs..(3) = layout.unstack{axis=0}(v);
        sabs = with t = 0.0 for x : vs do {
            neg = math.lt(x, 0.0);
            t2 = if neg then math.sub(t, x) else math.add(t, x);
            yield t2;
        };
        shifted..(3) = for x : [a, b, c] do..(n) math.add(x, 1.0);
        part = layout.stack{axis=0}(shifted);
        run, partial..(3) = with t = 0.0 for x : vs while math.lt(t, lim) do {
            t2 = math.add(t, x);
            yield t2, t2;
        };
        runs = layout.stack{axis=0}(partial);
    }
}

graph Branches {
    @input { a: real[4]; b: real[4]; c: bool[]; }
    @output { z: real[4]; zb: real[4]; o1: real[4]; o2: real[4]; blk: real[4]; lb: real[4]; }
    @compose {
        z = choose(a, b, c);
        zb = choose_blocks(a, b);
        o1 = scale_or_negate(a, b);
        o2 = scale_or_negate(a);
        blk = {
            u = math.add(a, b);
            v = math.mul(u, u);
            yield v;
        };
        lb = lbl: {
            u = math.sub(a, b);
            yield u;
        };
    }
}
"""

MODES = [pytest.param(False, id="default"), pytest.param(True, id="decomposed")]

#: line numbers in main.sknd of the assignments in GRAPHS, by target name
GRAPH_LINES = {line.split("=")[0].strip(): k for k, line in enumerate((LIBRARY + GRAPHS).splitlines(), start=1)
               if "=" in line}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> skriptnd.Model:
    folder = tmp_path_factory.mktemp("control_flow")
    (folder / "main.sknd").write_text(LIBRARY + GRAPHS)
    return skriptnd.load(folder)


@pytest.fixture(scope="module", params=MODES)
def decompose(request: pytest.FixtureRequest) -> bool:
    return request.param


def real(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def all_ops(graph: Graph) -> list[Operation]:
    """The operations of a graph and of its control flow subgraphs, recursively."""
    ops = []
    for op in graph.operations:
        ops.append(op)
        for sub in op.subgraphs.values():
            ops.extend(all_ops(sub))
    return ops


# ================================================================ loops (spec examples)


def test_scanning_and_folding_loops(model: skriptnd.Model, decompose: bool) -> None:
    graph = model.compose("Loops", decompose=decompose)
    rng = np.random.default_rng(0)
    a, b, c, z = (real(rng, 4) for _ in range(4))
    m = real(rng, 3, 3)
    out = skriptnd.run(graph, {"a": a, "b": b, "c": c, "z": z, "m": m, "p": np.array(3), "k": np.array(5)})
    # add_to_all: a scanning loop whose scan outputs form the result pack
    for name, x in zip(["y0", "y1", "y2"], [a, b, c], strict=True):
        np.testing.assert_allclose(out[name], x + z, rtol=1e-6)
    # add_all: a folding loop, dynamic (one 'loop' operation) and unrolled (one add per item)
    np.testing.assert_allclose(out["s"], a + b + c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["su"], a + b + c, rtol=1e-5, atol=1e-6)
    loops = {op.label: op for op in graph.operations if op.op == "loop"}
    assert loops["s"].attribs["carried"] == 1 and loops["s"].attribs["max_iterations"] == 3
    assert [op.label for op in graph.operations if op.label.startswith("su")] == ["su.0", "su.1", "su.2"]
    np.testing.assert_allclose(out["q"], np.linalg.matrix_power(m.astype(np.float64), 3), rtol=1e-5, atol=1e-5)
    assert out["cnt"] == sum(range(5)) and out["cnt4"] == sum(range(4))


@pytest.mark.parametrize("p", [0, 1, 3])
def test_matpow_with_a_tensor_power(model: skriptnd.Model, decompose: bool, p: int) -> None:
    graph = model.compose("Loops", decompose=decompose)
    (power,) = [op for op in graph.operations if op.op == "loop" and op.attribs["has_count"]
                and op.attribs["max_iterations"] is None and op.outputs[0].shape == (3, 3)]
    assert power.attribs["carried"] == 1 and power.inputs[0].kind == "constant"  # X = I
    rng = np.random.default_rng(p)
    zeros = np.zeros(4, np.float32)
    m = real(rng, 3, 3)
    out = skriptnd.run(graph, {"a": zeros, "b": zeros, "c": zeros, "z": zeros, "m": m, "p": np.array(p), "k": np.array(p)})
    np.testing.assert_allclose(out["q"], np.linalg.matrix_power(m.astype(np.float64), p), rtol=1e-5, atol=1e-6)
    assert out["cnt"] == p * (p - 1) // 2


# ================================================================ condition based loops


def _while(x: float, bound: float, limit: int | None = None) -> tuple[float, int]:
    k = 0
    while x < bound and (limit is None or k < limit):
        x, k = x * 2.0, k + 1
    return x, k


def _do_while(x: float, bound: float) -> float:
    while True:
        x *= 2.0
        if not x < bound:
            return x


@pytest.mark.parametrize("x0", [1.5, 0.25, 20.0])
def test_while_and_do_while(model: skriptnd.Model, decompose: bool, x0: float) -> None:
    graph = model.compose("Conditions", decompose=decompose)
    assert [op.op for op in graph.operations] == ["loop"] * 5
    conds = [sorted(k for k in op.subgraphs if k != "body") for op in graph.operations]
    assert conds == [["pre_cond"], ["post_cond"], ["pre_cond"], ["pre_cond"], ["pre_cond"]]
    bound = 10.0
    out = skriptnd.run(graph, {"x0": np.float32(x0), "bound": np.float32(bound), "n": np.array(2)})
    w, k = _while(x0, bound)
    assert out["w"] == w
    assert out["dw"] == _do_while(x0, bound)  # differs from w when x0 >= bound: the body runs once
    assert out["iw"] == w and out["its"] == k  # condition and body written as blocks, counter carried
    # `with x = x0, g = true while g do double_step(x, bound)`: the body yields the next condition
    assert out["col"] == _do_while(x0, bound) and not out["go"]
    # condition and count combined: stops at whichever comes first
    assert out["lim"] == _while(x0, bound, limit=2)[0]


# ================================================================ loop bodies as blocks


def test_loop_bodies_written_as_blocks(model: skriptnd.Model, decompose: bool) -> None:
    graph = model.compose("Bodies", decompose=decompose)
    rng = np.random.default_rng(7)
    a, b, c = (real(rng, 4) for _ in range(3))
    v = np.array([1.5, -2.0, 0.75], np.float32)
    out = skriptnd.run(graph, {"a": a, "b": b, "c": c, "v": v, "n": np.array(3), "lim": np.float32(100.0)})
    # carried value, a pack of scan outputs and the iteration index as a scan output
    np.testing.assert_allclose(out["acc"], a + b + c, rtol=1e-5, atol=1e-6)
    for name, x in zip(["f0", "f1", "f2"], [a, b, c], strict=True):
        np.testing.assert_allclose(out[name], 3 * x, rtol=1e-6)
    assert out["idx"].tolist() == [0, 1, 2]
    # a loop inside a loop body: t + 2a + 2b
    np.testing.assert_allclose(out["nest"], 2 * a + 2 * b, rtol=1e-5, atol=1e-6)
    # a dynamic `if` inside a loop body, both branches taken: the sum of absolute values
    assert out["sabs"] == pytest.approx(float(np.abs(v).sum()))
    np.testing.assert_allclose(out["part"], np.stack([a, b, c]) + 1, rtol=1e-6)
    np.testing.assert_allclose(out["runs"], np.cumsum(v), rtol=1e-6)
    assert out["run"] == pytest.approx(float(v.sum()))


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tensor_count_gives_a_pack_of_dynamic_length(model: skriptnd.Model, decompose: bool, n: int) -> None:
    """`for x : xs do..(n)` with a tensor n: the packs' length (3) bounds the iterations, and
    the scan outputs are a pack of n tensors at run time (stacked: a [~|3, 4] tensor)."""
    graph = model.compose("Bodies", decompose=decompose)
    (loop,) = [op for op in graph.operations if op.label == "shifted"]
    assert loop.attribs["max_iterations"] == 3 and loop.attribs["has_count"]
    rng = np.random.default_rng(n)
    a, b, c = (real(rng, 4) for _ in range(3))
    v = np.array([1.0, 2.0, 4.0], np.float32)
    if n == 0:  # an empty pack gives layout.stack no item to take the rank from: it cannot bind
        with pytest.raises(DiagnosticError) as info:
            skriptnd.run(graph, {"a": a, "b": b, "c": c, "v": v, "n": np.array(n), "lim": np.float32(2.5)})
        (diag,) = info.value.diagnostics
        assert "operator 'stack'" in diag.notes[0].message and diag.span.line == GRAPH_LINES["part"]
        return
    out = skriptnd.run(graph, {"a": a, "b": b, "c": c, "v": v, "n": np.array(n), "lim": np.float32(2.5)})
    np.testing.assert_allclose(out["part"], np.stack([a, b, c])[:n] + 1, rtol=1e-6)
    # `for x : vs while t < 2.5`: stops after 1 + 2 (a condition shortening a scan too)
    assert out["run"] == 3.0 and out["runs"].tolist() == [1.0, 3.0]


# ================================================================ branching and blocks


def test_dynamic_if_takes_both_branches(model: skriptnd.Model, decompose: bool) -> None:
    graph = model.compose("Branches", decompose=decompose)
    ifs = {op.label: op for op in graph.operations if op.op == "if"}
    assert set(ifs) == {"z", "zb"}  # `if ?b` is decided at compile time, the others are not
    assert sorted(ifs["zb"].subgraphs) == ["cond0", "else", "then0"]
    assert [op.op for op in ifs["zb"].subgraphs["else"].operations] == ["math.mul", "math.add"]
    rng = np.random.default_rng(3)
    b = real(rng, 4)
    for positive in (True, False):
        a = np.abs(real(rng, 4)) * (1 if positive else -1)
        for c in (True, False):
            out = skriptnd.run(graph, {"a": a, "b": b, "c": np.array(c)})
            np.testing.assert_allclose(out["z"], a + b if c else a * b, rtol=1e-6)
            np.testing.assert_allclose(out["zb"], a - b if not positive else a * b + 1, rtol=1e-6)


def test_optional_promotion_and_blocks(model: skriptnd.Model, decompose: bool) -> None:
    graph = model.compose("Branches", decompose=decompose)
    by_label = {op.label: op for op in graph.operations if op.op != "if"}
    # `if ?b`: b given -> the `then` block (a mul), b omitted -> the `else` block (a neg)
    assert by_label["o1.t"].op == "math.mul" and by_label["o2.t"].op == "math.neg"
    # block results take the name they are assigned to; intermediates live in the block's scope
    assert by_label["blk.u"].op == "math.add" and by_label["blk.v"].outputs[0].name == "blk"
    assert by_label["lbl.u"].op == "math.sub" and by_label["lbl.u"].outputs[0].name == "lb"
    assert [t.name for t in graph.outputs] == ["z", "zb", "o1", "o2", "blk", "lb"]
    rng = np.random.default_rng(5)
    a, b = real(rng, 4), real(rng, 4)
    out = skriptnd.run(graph, {"a": a, "b": b, "c": np.array(True)})
    np.testing.assert_allclose(out["o1"], a * b, rtol=1e-6)
    np.testing.assert_allclose(out["o2"], -a, rtol=1e-6)
    np.testing.assert_allclose(out["blk"], (a + b) ** 2, rtol=1e-6)
    np.testing.assert_allclose(out["lb"], a - b, rtol=1e-6)


# ================================================================ nn.lstm (spec §4.4.5)

SEQ, BATCH, INPUT, HIDDEN = 5, 2, 3, 4

LSTM_GRAPHS = f"""
import nn;
import layout;

graph Full {{
    @input {{
        X: real[{SEQ},{BATCH},{INPUT}]; W: real[{4 * HIDDEN},{INPUT}]; R: real[{4 * HIDDEN},{HIDDEN}];
        B: real[{4 * HIDDEN}]; h0: real[{BATCH},{HIDDEN}]; c0: real[{BATCH},{HIDDEN}];
    }}
    @output {{ Y: real[~|{SEQ},{BATCH},{HIDDEN}]; hN: real[{BATCH},{HIDDEN}]; cN: real[{BATCH},{HIDDEN}]; }}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B, h0, c0); }}
}}

graph Steps {{
    @input {{
        X: real[{SEQ},{BATCH},{INPUT}]; W: real[{4 * HIDDEN},{INPUT}]; R: real[{4 * HIDDEN},{HIDDEN}];
        B: real[{4 * HIDDEN}]; h0: real[{BATCH},{HIDDEN}]; c0: real[{BATCH},{HIDDEN}]; steps: int[{BATCH}];
    }}
    @output {{ Y: real[~|{SEQ},{BATCH},{HIDDEN}]; hN: real[{BATCH},{HIDDEN}]; cN: real[{BATCH},{HIDDEN}]; }}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B, h0, c0, steps); }}
}}

# _jagged_lstm_loops without its Y: each batch item's own lstm_loop with its own tensor count
graph PerItem {{
    @input {{
        X: real[{SEQ},{BATCH},{INPUT}]; W: real[{4 * HIDDEN},{INPUT}]; R: real[{4 * HIDDEN},{HIDDEN}];
        B: real[{4 * HIDDEN}]; h0: real[{BATCH},{HIDDEN}]; c0: real[{BATCH},{HIDDEN}]; steps: int[{BATCH}];
    }}
    @output {{ hN: real[{BATCH},{HIDDEN}]; cN: real[{BATCH},{HIDDEN}]; }}
    @compose {{
        counts..({BATCH}) = layout.unstack{{axis=0}}(steps);
        Xs..({BATCH}) = layout.unstack{{axis=1, squeeze=false}}(X);
        h0s..({BATCH}) = layout.unstack{{axis=0, squeeze=false}}(h0);
        c0s..({BATCH}) = layout.unstack{{axis=0, squeeze=false}}(c0);
        Ys..({BATCH}), hNs..({BATCH}), cNs..({BATCH}) = for Xi : Xs, h0i : h0s, c0i : c0s, cnt : counts
                                                     do item: nn.lstm_loop(Xi, W, R, B, h0i, c0i, cnt);
        hN = layout.stack{{axis=0, squeeze=true}}(hNs);
        cN = layout.stack{{axis=0, squeeze=true}}(cNs);
    }}
}}

graph Weights {{
    @input {{ X: real[{SEQ},{BATCH},{INPUT}]; }}
    @output {{ Y: real[~|{SEQ},{BATCH},{HIDDEN}]; hN: real[{BATCH},{HIDDEN}]; cN: real[{BATCH},{HIDDEN}]; }}
    @variable {{ W: real[{4 * HIDDEN},{INPUT}]; R: real[{4 * HIDDEN},{HIDDEN}]; B: real[{4 * HIDDEN}]; }}
    @compose {{ Y, hN, cN = rnn: nn.lstm(X, W, R, B); }}
}}
"""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray, h0: np.ndarray, c0: np.ndarray,
                   steps: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A float64 LSTM from §4.4.5: gates [i, f, g, o] = x W^T + B + h R^T (split in this order),
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c'). Batch item k runs
    steps[k] steps (all SEQ without steps); Y[t, k] is h after step t, zero past steps[k]."""
    X, W, R, B = (np.asarray(a, np.float64) for a in (X, W, R, B))
    h, c = np.array(h0, np.float64), np.array(c0, np.float64)
    seq, batch, _ = X.shape
    counts = np.full(batch, seq) if steps is None else np.asarray(steps)
    Y = np.zeros((seq, batch, h.shape[1]))
    for t in range(seq):
        i, f, g, o = np.split(X[t] @ W.T + B + h @ R.T, 4, axis=1)
        c_next = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h_next = _sigmoid(o) * np.tanh(c_next)
        active = (t < counts)[:, None]
        h, c = np.where(active, h_next, h), np.where(active, c_next, c)
        Y[t] = np.where(active, h_next, 0.0)
    return Y, h, c


@pytest.fixture(scope="module")
def lstm_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[skriptnd.Model, dict[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("lstm")
    (folder / "main.sknd").write_text(LSTM_GRAPHS)
    rng = np.random.default_rng(42)
    data = {"X": real(rng, SEQ, BATCH, INPUT), "W": real(rng, 4 * HIDDEN, INPUT) * 0.7,
            "R": real(rng, 4 * HIDDEN, HIDDEN) * 0.7, "B": real(rng, 4 * HIDDEN) * 0.5,
            "h0": real(rng, BATCH, HIDDEN), "c0": real(rng, BATCH, HIDDEN)}
    for name in ("W", "R", "B"):  # variables of graph Weights: <module>.<graph>.<name>.dat
        write_tensor(folder / f"main.Weights.{name}.dat", data[name])
    return skriptnd.load(folder), data


def _check_lstm(out: dict[str, np.ndarray], expected: tuple[np.ndarray, np.ndarray, np.ndarray], seq: int) -> None:
    Y, hN, cN = expected
    assert out["Y"].shape == (seq, BATCH, HIDDEN)
    np.testing.assert_allclose(out["Y"], Y[:seq], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["hN"], hN, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["cN"], cN, rtol=1e-5, atol=1e-5)


def test_lstm_without_steps(lstm_model: tuple[skriptnd.Model, dict[str, np.ndarray]], decompose: bool) -> None:
    model, data = lstm_model
    graph = model.compose("Full", decompose=decompose)
    if decompose:  # lstm_loop's scanning loop over the sequence, with lstm_step inlined in its body
        (loop,) = [op for op in graph.operations if op.op == "loop"]
        assert loop.attribs["max_iterations"] == SEQ and not loop.attribs["has_count"]
        assert "nn.sigmoid" in {op.op for op in all_ops(loop.subgraphs["body"])}
    else:
        assert [op.op for op in graph.operations] == ["nn.lstm"]
    out = skriptnd.run(graph, data)
    _check_lstm(out, lstm_reference(**data), SEQ)


def test_lstm_default_states_and_weights_from_files(lstm_model: tuple[skriptnd.Model, dict[str, np.ndarray]],
                                                    decompose: bool) -> None:
    """h0 and c0 omitted: their default 0.0 fills [b, n] (§2.6, input defaults); W, R and B are
    variables read from main.Weights.{W,R,B}.dat."""
    model, data = lstm_model
    graph = model.compose("Weights", decompose=decompose)
    assert sorted(t.name for t in graph.variables) == ["B", "R", "W"]
    out = skriptnd.run(graph, {"X": data["X"]})
    zeros = np.zeros((BATCH, HIDDEN), np.float32)
    _check_lstm(out, lstm_reference(data["X"], data["W"], data["R"], data["B"], zeros, zeros), SEQ)


@pytest.mark.parametrize("steps", [[SEQ, SEQ], [3, 3], [1, 1]])
def test_lstm_with_equal_steps(lstm_model: tuple[skriptnd.Model, dict[str, np.ndarray]], decompose: bool,
                               steps: list[int]) -> None:
    """`steps` given: _jagged_lstm_loops runs lstm_loop per batch item with a tensor count; when
    all counts agree, Y is [count, b, n] (its first extent is dynamic, `~|s`)."""
    model, data = lstm_model
    graph = model.compose("Steps", decompose=decompose)
    count = np.array(steps)
    out = skriptnd.run(graph, {**data, "steps": count})
    _check_lstm(out, lstm_reference(**data, steps=count), steps[0])


@pytest.mark.parametrize("steps", [[SEQ, 3], [2, 4], [1, SEQ]])
def test_lstm_per_item_counts_for_the_final_states(lstm_model: tuple[skriptnd.Model, dict[str, np.ndarray]],
                                                   decompose: bool, steps: list[int]) -> None:
    """The well-defined part of jagged steps: each batch item's lstm_loop with a tensor count
    gives its own final states (hN, cN after steps[k] steps); only stacking the Ys is undefined."""
    model, data = lstm_model
    graph = model.compose("PerItem", decompose=decompose)
    count = np.array(steps)
    out = skriptnd.run(graph, {**data, "steps": count})
    _, hN, cN = lstm_reference(**data, steps=count)
    np.testing.assert_allclose(out["hN"], hN, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["cN"], cN, rtol=1e-5, atol=1e-5)


@pytest.mark.xfail(strict=True, raises=DiagnosticError, reason=(
    "spec §4.4.5 / stdlib nn.sknd: nn.lstm's prose allows step counts 'potentially different for each "
    "batch item', but _jagged_lstm_loops computes Y = layout.stack{axis=1, squeeze=true}(Ys) from per-item "
    "lstm_loop outputs Ys[k]: real[~|s,1,n] whose first extents are the (different) counts steps[k]; "
    "layout.stack requires equal shapes, and nothing pads the shorter items, so Y (and the whole "
    "operation) is undefined for jagged steps"))
def test_lstm_with_jagged_steps(lstm_model: tuple[skriptnd.Model, dict[str, np.ndarray]], decompose: bool) -> None:
    model, data = lstm_model
    graph = model.compose("Steps", decompose=decompose)
    count = np.array([SEQ, 3])
    try:
        out = skriptnd.run(graph, {**data, "steps": count})
    except DiagnosticError as err:  # expected failure: the stack of Ys, and nothing else
        (diag,) = err.diagnostics
        line = Path(diag.span.file).read_text().splitlines()[diag.span.line - 1]
        assert diag.code == "E0403" and "Y = layout.stack{axis=1, squeeze=true}(Ys)" in line, err
        raise
    Y, hN, cN = lstm_reference(**data, steps=count)  # items past their count: zero outputs, states kept
    np.testing.assert_allclose(out["hN"], hN, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["cN"], cN, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["Y"], Y, rtol=1e-5, atol=1e-5)


def test_dynamic_graph_inputs_are_bound_at_run_time(tmp_path: Path) -> None:
    """The same rebinding to actual shapes (§3.1) serves dynamic graph inputs (`s|10`, `~|5`)."""
    (tmp_path / "main.sknd").write_text("""import nn;
graph G {
    @input { x: real[s|10]; y: real[~|5, 3]; }
    @output { z: real; w: real; }
    @compose { z = nn.relu(x); w = nn.relu(y); }
}
""")
    graph = skriptnd.load(tmp_path).compose()
    for n, m in [(3, 2), (10, 5)]:
        x, y = np.linspace(-1, 1, n, dtype=np.float32), np.linspace(-1, 1, 3 * m, dtype=np.float32).reshape(m, 3)
        out = skriptnd.run(graph, {"x": x, "y": y})
        np.testing.assert_array_equal(out["z"], np.maximum(x, 0))
        np.testing.assert_array_equal(out["w"], np.maximum(y, 0))
