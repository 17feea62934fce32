"""The LSTM kernels of skriptnd/execute/recurrent.py (`nn.lstm`, `nn.lstm_loop`, `nn.lstm_step`)
against two independent references, on random small shapes (hypothesis):

* the operators' own `@compose` graphs (spec §4.4.5, stdlib/nn.sknd), run by the executor with
  only the intrinsic kernels (`kernels_for("lower")`: every stdlib operator on its `@lower` plan,
  the loops of `lstm_loop` / `_jagged_lstm_loops` step by step);
* onnxruntime's `LSTM` operator (for `nn.lstm`), with the gates reordered [i, f, g, o] ->
  [i, o, f, c], the bias as ONNX's `Wb` with a zero `Rb`, and `sequence_lens` for `steps`
  (clamped to the sequence length as `do..(steps)` clamps the iteration count).

Tolerance: |kernel - reference| <= 1e-5 + 1e-5 |reference| elementwise (all float32; the kernel
sums the matrix products in another order and computes sigmoid(v) as 0.5 + 0.5 tanh(v / 2)).
Cases the kernel declines (jagged or zero step counts, other dtypes, wrong shapes) return
NotImplemented, so the graph behaves exactly as without the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_counting import load_source, run_both

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import KERNELS, Executor, recurrent

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ATOL = RTOL = 1e-5

_SIZES = "@attrib { seq: int = 2; batch: int = 1; input: int = 1; hidden: int = 1; }"
_WEIGHTS = "W: real[4*hidden,input]; R: real[4*hidden,hidden]; B: real[4*hidden];"
_STATES = "h0: real[batch,hidden]; c0: real[batch,hidden];"
_OUTPUTS = "@output { Y: real[~|seq,batch,hidden]; hN: real[batch,hidden]; cN: real[batch,hidden]; }"

SOURCE = f"""import nn;

graph Full {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} {_STATES} }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B, h0, c0); }}
}}

graph Defaults {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B); }}
}}

graph Steps {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} {_STATES} steps: int[batch]; }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B, h0, c0, steps); }}
}}

graph Dynamic {{
    {_SIZES}
    @input {{ X: real[s|seq,batch,input]; {_WEIGHTS} {_STATES} }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B, h0, c0); }}
}}

graph Stacked {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} R2: real[4*hidden,hidden]; W2: real[4*hidden,hidden];
              steps: int[batch]; }}
    {_OUTPUTS}
    @compose {{
        Y1, ~, ~ = nn.lstm(X, W, R, B, ~, ~, steps);
        Y, hN, cN = nn.lstm(Y1, W2, R2, B, ~, ~, steps);
    }}
}}

graph Loop {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} {_STATES} count: int[]; }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm_loop(X, W, R, B, h0, c0, count); }}
}}

graph LoopAll {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; {_WEIGHTS} {_STATES} }}
    {_OUTPUTS}
    @compose {{ Y, hN, cN = nn.lstm_loop(X, W, R, B, h0, c0); }}
}}

graph Vars {{
    {_SIZES}
    @input {{ X: real[seq,batch,input]; }}
    {_OUTPUTS}
    @variable {{ {_WEIGHTS} }}
    @compose {{ Y, hN, cN = nn.lstm(X, W, R, B); }}
}}

graph Step {{
    {_SIZES}
    @input {{ x: real[batch,input]; {_WEIGHTS} {_STATES} }}
    @output {{ h1: real[batch,hidden]; c1: real[batch,hidden]; }}
    @compose {{ h1, c1 = nn.lstm_step(h0, c0, x, W, R, B); }}
}}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> skriptnd.Model:
    return load_source(tmp_path_factory.mktemp("recurrent"), SOURCE)


def _run_both(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                                     dict[str, int]]:
    """(outputs with the kernels, outputs of the @compose / @lower reference, kernel calls)."""
    return run_both(graph, inputs, recurrent.RECURRENT_KERNELS)


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def _onnx_gates(a: np.ndarray) -> np.ndarray:
    i, f, g, o = np.split(a, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def onnx_lstm(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray, h0: np.ndarray | None = None,
              c0: np.ndarray | None = None, steps: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """onnxruntime's LSTM (forward, one direction) on the same arrays: Y [s, b, n], hN, cN."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    n = R.shape[1]
    s, b, _ = X.shape
    inits = [numpy_helper.from_array(_onnx_gates(W)[None], "W"), numpy_helper.from_array(_onnx_gates(R)[None], "R"),
             numpy_helper.from_array(np.concatenate([_onnx_gates(B), np.zeros(4 * n, np.float32)])[None], "B")]
    feeds = {"X": X}
    names = ["X", "W", "R", "B", "", "", ""]
    if steps is not None:
        feeds["lens"] = np.minimum(steps, s).astype(np.int32)
        names[4] = "lens"
    for k, (name, state) in enumerate((("h0", h0), ("c0", c0))):
        if state is not None:
            feeds[name] = state[None]
            names[5 + k] = name
    while names[-1] == "":
        names.pop()
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    graph = helper.make_graph(
        [helper.make_node("LSTM", names, ["Y", "hN", "cN"], hidden_size=n)], "lstm",
        [helper.make_tensor_value_info(k, types[v.dtype], list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in ("Y", "hN", "cN")], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    Y, hN, cN = session.run(["Y", "hN", "cN"], feeds)
    return {"Y": Y[:, 0], "hN": hN[0], "cN": cN[0]}


sizes = st.fixed_dictionaries({"seq": st.integers(1, 6), "batch": st.integers(1, 4), "input": st.integers(1, 5),
                               "hidden": st.integers(1, 5)})


def _arrays(seed: int, seq: int, batch: int, input: int, hidden: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def real(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {"X": real(seq, batch, input), "W": real(4 * hidden, input, scale=0.8),
            "R": real(4 * hidden, hidden, scale=0.8), "B": real(4 * hidden, scale=0.5),
            "h0": real(batch, hidden), "c0": real(batch, hidden, scale=2.0)}


# ---------------------------------------------------------------------------- nn.lstm


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16))
def test_lstm_matches_compose_and_onnxruntime(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    data = _arrays(seed, **dims)
    fast, reference, calls = _run_both(model.compose("Full", attribs=dims), data)
    assert calls == {"nn.lstm": 1}
    expected = onnx_lstm(**data)
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16))
def test_lstm_default_states(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    """h0 and c0 omitted: the declared defaults, 0.0."""
    data = _arrays(seed, **dims)
    del data["h0"], data["c0"]
    fast, reference, calls = _run_both(model.compose("Defaults", attribs=dims), data)
    assert calls == {"nn.lstm": 1}
    expected = onnx_lstm(**data)
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16), count=st.integers(1, 9))
def test_lstm_with_equal_steps(model: skriptnd.Model, dims: dict[str, int], seed: int, count: int) -> None:
    """`steps` equal for every batch item: min(steps, seq) steps (a count above seq runs seq), Y has
    that many rows; onnxruntime's Y is zero past them."""
    data = _arrays(seed, **dims)
    steps = np.full(dims["batch"], count, np.int64)
    fast, reference, calls = _run_both(model.compose("Steps", attribs=dims), {**data, "steps": steps})
    assert calls == {"nn.lstm": 1}
    expected = onnx_lstm(**data, steps=steps)
    rows = min(count, dims["seq"])
    assert fast["Y"].shape == (rows, dims["batch"], dims["hidden"])
    assert not expected["Y"][rows:].any()
    expected["Y"] = expected["Y"][:rows]
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16), rows=st.integers(1, 6))
def test_lstm_on_a_dynamic_sequence_length(model: skriptnd.Model, dims: dict[str, int], seed: int, rows: int) -> None:
    """X: real[s|seq, ...]: the sequence length is the actual input's (at most seq)."""
    rows = min(rows, dims["seq"])
    data = _arrays(seed, **{**dims, "seq": rows})
    fast, reference, calls = _run_both(model.compose("Dynamic", attribs=dims), data)
    assert calls == {"nn.lstm": 1}
    expected = onnx_lstm(**data)
    for name in ("Y", "hN", "cN"):
        assert fast[name].shape == expected[name].shape
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16), count=st.integers(1, 8))
def test_stacked_lstms_with_steps(model: skriptnd.Model, dims: dict[str, int], seed: int, count: int) -> None:
    """Two layers with `steps`, as models/lstm's LSTMSteps: the second reads the first's Y, whose
    first extent is dynamic (min(steps, seq) rows)."""
    data = _arrays(seed, **dims)
    del data["h0"], data["c0"]
    rng = np.random.default_rng(seed + 1)
    hidden = dims["hidden"]
    data["W2"] = (rng.standard_normal((4 * hidden, hidden)) * 0.8).astype(np.float32)
    data["R2"] = (rng.standard_normal((4 * hidden, hidden)) * 0.8).astype(np.float32)
    steps = np.full(dims["batch"], count, np.int64)
    fast, reference, calls = _run_both(model.compose("Stacked", attribs=dims), {**data, "steps": steps})
    assert calls == {"nn.lstm": 2}
    first = onnx_lstm(data["X"], data["W"], data["R"], data["B"], steps=steps)
    rows = min(count, dims["seq"])
    expected = onnx_lstm(first["Y"][:rows], data["W2"], data["R2"], data["B"], steps=steps)
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])


@pytest.mark.parametrize("steps", [[5, 3], [0, 0], [-1, -1], [2, 0]])
def test_lstm_declines_what_the_composite_rejects(model: skriptnd.Model, steps: list[int]) -> None:
    """Jagged counts (the stack of the items' Ys fails, docs/spec-errata.md) and counts of zero or
    less: the kernel declines and the composite's own error is reported, the same with or without
    the kernel."""
    dims = {"seq": 5, "batch": 2, "input": 3, "hidden": 4}
    data = {**_arrays(0, **dims), "steps": np.array(steps)}
    graph = model.compose("Steps", attribs=dims)
    errors = []
    for kernels in (KERNELS, kernels_for("lower")[0]):
        with pytest.raises(DiagnosticError) as err:
            Executor(graph, {}, kernels=kernels).run(data)
        errors.append([(d.code, d.message) for d in err.value.diagnostics])
    assert errors[0] == errors[1]


def test_lstm_runs_the_clamped_equal_counts() -> None:
    """Counts that differ but clamp to the same min(steps, seq) are equal counts."""
    data = _arrays(1, 4, 3, 2, 3)
    X, W, R, B = data["X"], data["W"], data["R"], data["B"]
    got = recurrent.lstm(None, [X, W, R, B, None, None, np.array([4, 9, 5])])  # type: ignore[arg-type]
    assert got is not NotImplemented
    expected = onnx_lstm(X, W, R, B)
    for a, name in zip(got, ("Y", "hN", "cN"), strict=True):
        _close(a, expected[name])


def test_kernels_decline_unhandled_arguments() -> None:
    data = _arrays(2, 3, 2, 2, 3)
    X, W, R, B, h0, c0 = (data[k] for k in ("X", "W", "R", "B", "h0", "c0"))
    lstm: Callable[[list[Any]], Any] = lambda args: recurrent.lstm(None, args)  # type: ignore[arg-type]  # noqa: E731
    assert lstm([X, W, R, B]) is not NotImplemented
    assert lstm([X.astype(np.float64), W, R, B]) is NotImplemented  # another dtype
    assert lstm([X, W, R, B.astype(np.float16)]) is NotImplemented
    assert lstm([X, W[:, :1], R, B]) is NotImplemented  # W does not fit X
    assert lstm([X, W, R[:4], B]) is NotImplemented  # R not [4n, n]
    assert lstm([X, W, R, B, h0[:1], c0]) is NotImplemented  # h0 not [b, n]
    assert lstm([X, W, R, B, h0, c0, np.array([1.0, 1.0])]) is NotImplemented  # real steps
    assert lstm([X, W, R, B, h0, c0, np.array([1])]) is NotImplemented  # steps not [b]
    assert lstm([X[:0], W, R, B]) is NotImplemented  # no step
    loop = recurrent.lstm_loop
    assert loop(None, [X, W, R, B]) is NotImplemented  # type: ignore[arg-type]  # no states
    assert loop(None, [X, W, R, B, h0, c0, np.array(0)]) is NotImplemented  # type: ignore[arg-type]
    step = recurrent.lstm_step
    assert step(None, [h0, c0, X[0], W, R, B]) is not NotImplemented  # type: ignore[arg-type]
    assert step(None, [h0, c0, X[0].astype(np.float64), W, R, B]) is NotImplemented  # type: ignore[arg-type]
    assert step(None, [h0.T, c0, X[0], W, R, B]) is NotImplemented  # type: ignore[arg-type]


# ------------------------------------------------------------------- lstm_loop, lstm_step


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16), count=st.integers(1, 9))
def test_lstm_loop_with_a_count(model: skriptnd.Model, dims: dict[str, int], seed: int, count: int) -> None:
    data = _arrays(seed, **dims)
    fast, reference, calls = _run_both(model.compose("Loop", attribs=dims), {**data, "count": np.array(count)})
    assert calls == {"nn.lstm_loop": 1}
    assert fast["Y"].shape[0] == min(count, dims["seq"])
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16))
def test_lstm_loop_without_a_count(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    data = _arrays(seed, **dims)
    fast, reference, calls = _run_both(model.compose("LoopAll", attribs=dims), data)
    assert calls == {"nn.lstm_loop": 1}
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])


@SETTINGS
@given(dims=sizes, seed=st.integers(0, 2**16))
def test_lstm_step(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    data = _arrays(seed, **dims)
    data["x"] = data.pop("X")[0]
    fast, reference, calls = _run_both(model.compose("Step", attribs=dims), data)
    assert calls == {"nn.lstm_step": 1}
    for name in ("h1", "c1"):
        _close(fast[name], reference[name])
    expected = onnx_lstm(data["x"][None], data["W"], data["R"], data["B"], data["h0"], data["c0"])
    _close(fast["h1"], expected["hN"])
    _close(fast["c1"], expected["cN"])


def test_models_lstm_runs_on_the_kernel() -> None:
    """models/lstm composes its layers as nn.lstm operations, which the default executor runs on
    the kernel (the zoo test compares the model's outputs with onnxruntime)."""
    graph = skriptnd.load(Path(__file__).resolve().parents[1] / "models" / "lstm").compose(
        "LSTM", attribs={"seq": 3, "batch": 2})
    assert [op.op for op in graph.operations].count("nn.lstm") == 2
    rng = np.random.default_rng(5)
    variables = {t.name: (rng.standard_normal(t.shape) * 0.3).astype(np.float32) for t in graph.variables}
    X = rng.standard_normal((3, 2, 16)).astype(np.float32)
    out, reference, calls = run_both(graph, {"X": X}, recurrent.RECURRENT_KERNELS, variables)
    assert calls == {"nn.lstm": 2}
    for name in ("Y", "hN", "cN"):
        _close(out[name], reference[name])


def test_prepared_kernel_keeps_the_regrouped_variables(model: skriptnd.Model) -> None:
    """Inside an execution plan the kernel regroups variable weights once and keeps them while the
    executor holds the same arrays; new arrays (another variables mapping) are regrouped again.
    Weights that are graph inputs are regrouped on every call (no prepared kernel)."""
    dims = {"seq": 4, "batch": 3, "input": 2, "hidden": 5}
    graph = model.compose("Vars", attribs=dims)
    (op,) = graph.operations
    assert callable(recurrent.lstm.prepare(op, {}))  # type: ignore[attr-defined]
    (full,) = model.compose("Full", attribs=dims).operations
    assert recurrent.lstm.prepare(full, {}) is None  # type: ignore[attr-defined]
    data = _arrays(3, **dims)
    weights = {k: data[k] for k in ("W", "R", "B")}
    fast = Executor(graph, weights, kernels=KERNELS)
    reference = Executor(graph, weights, kernels=kernels_for("lower")[0], optimize=False)
    for seed in (4, 5):
        X = _arrays(seed, **dims)["X"]
        got, expected = fast.run({"X": X}), reference.run({"X": X})
        for name in ("Y", "hN", "cN"):
            _close(got[name], expected[name])
    other = {k: (v * 0.5).astype(np.float32) for k, v in weights.items()}
    fast.variables = reference.variables = other
    got, expected = fast.run({"X": data["X"]}), reference.run({"X": data["X"]})
    for name in ("Y", "hN", "cN"):
        _close(got[name], expected[name])
    _close(got["Y"], onnx_lstm(data["X"], other["W"], other["R"], other["B"])["Y"])


def test_lstm_on_a_larger_case(model: skriptnd.Model) -> None:
    """Moderate sizes (32 steps, hidden 40, batch 5, with states and steps clamped per item)
    against both references: rounding does not build up beyond the tolerance."""
    dims = {"seq": 32, "batch": 5, "input": 24, "hidden": 40}
    data = _arrays(11, **dims)
    data["W"] *= 0.3
    data["R"] *= 0.3
    steps = np.array([40, 32, 33, 32, 99])
    fast, reference, calls = _run_both(model.compose("Steps", attribs=dims), {**data, "steps": steps})
    assert calls == {"nn.lstm": 1}
    expected = onnx_lstm(**data, steps=steps)
    for name in ("Y", "hN", "cN"):
        _close(fast[name], reference[name])
        _close(fast[name], expected[name])
