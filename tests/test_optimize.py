"""The plan-time rewrites of skriptnd/execute/optimize.py: batch-norm folding and relu fusion give
the outputs of the unoptimised graph (to float32 rounding, 1e-4 relative)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.execute import KERNELS, Executor

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-4

SOURCE = """import nn;
graph G {
    @input { x: real[2,3,9,9]; }
    @output { y: real[2,4,5,5]; }
    @variable { w: real[4,3,3,3]; m: real[4]; v: real[4]; b: real[4]; s: real[4]; }
    @compose {
        c = nn.conv{stride=2, padding=1}(x, w);
        n = nn.batch_norm{epsilon=1e-3}(c, m, v, b, s);
        y = nn.relu(n);
    }
}
"""


def _close(a: np.ndarray, b: np.ndarray) -> None:
    scale = max(float(np.abs(b).max()), 1e-6)
    assert a.shape == b.shape
    assert float(np.abs(a - b).max()) <= RTOL * scale


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, np.ndarray], dict[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "main.sknd").write_text(SOURCE)
    graph = skriptnd.load(folder).compose()
    rng = np.random.default_rng(1)
    variables = {"w": rng.standard_normal((4, 3, 3, 3)), "m": rng.standard_normal(4),
                 "v": rng.uniform(0.5, 2.0, 4), "b": rng.standard_normal(4), "s": rng.standard_normal(4)}
    variables = {k: np.asarray(v, np.float32) for k, v in variables.items()}
    inputs = {"x": rng.standard_normal((2, 3, 9, 9)).astype(np.float32)}
    return graph, variables, inputs


def _by_hand(x: np.ndarray, v: dict[str, np.ndarray]) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((2, 4, 5, 5))
    for i in range(5):
        for j in range(5):
            out[:, :, i, j] = np.einsum("bcyx,ncyx->bn", xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3], v["w"])
    ch = (1, 4, 1, 1)
    out = (out - v["m"].reshape(ch)) / np.sqrt(v["v"].reshape(ch) + 1e-3) * v["s"].reshape(ch) + v["b"].reshape(ch)
    return np.maximum(out, 0.0)


def test_tiny_conv_bn_relu_folds_into_one_operation(tiny: Any) -> None:
    graph, variables, inputs = tiny
    plain = Executor(graph, variables, kernels=KERNELS, optimize=False).run(inputs)["y"]
    fast = Executor(graph, variables, kernels=KERNELS)
    y = fast.run(inputs)["y"]
    assert fast._program is not None and len(fast._program) == 1  # conv + batch_norm + relu -> one conv
    assert fast._program[0][1].attribs["fused_relu"] is True
    _close(y, plain)
    _close(y, _by_hand(inputs["x"], variables).astype(np.float32))
    assert (y >= 0).all()
    # the default (TOSA) backend folds too: one program made of the one rewritten convolution
    tosa = Executor(graph, variables, kernels=kernels_for("numpy")[0])
    _close(tosa.run(inputs)["y"], y)
    assert tosa._program is not None and len(tosa._program) == 1
    (conv,) = tosa._program[0][1].attribs["operations"]
    assert conv.op == "nn.conv" and conv.attribs["fused_relu"] is True
    # the weights are held once, by the program (re-laid-out): neither the variables nor the
    # folded filter stay in the executor, nor in what the program keeps of the operation
    assert not tosa.variables and not tosa._constants and not conv.inputs


def test_folding_without_conv_kernel_runs_the_plan(tiny: Any) -> None:
    """A convolution kernel that declines: the rebound conv's @lower plan runs, then the fused relu."""
    graph, variables, inputs = tiny
    declining = {**KERNELS, "nn.conv": lambda op, args: NotImplemented}
    ex = Executor(graph, variables, kernels=declining)
    y = ex.run(inputs)["y"]
    assert ex._program is not None and len(ex._program) == 1
    _close(y, _by_hand(inputs["x"], variables).astype(np.float32))


def test_no_folding_when_the_conv_output_is_used_twice(tmp_path: Path) -> None:
    source = SOURCE.replace("@output { y: real[2,4,5,5]; }", "@output { y: real[2,4,5,5]; z: real[2,4,5,5]; }") \
        .replace("y = nn.relu(n);", "y = nn.relu(n); z = nn.relu(c);")
    (tmp_path / "main.sknd").write_text(source)
    graph = skriptnd.load(tmp_path).compose()
    rng = np.random.default_rng(2)
    variables = {k: rng.uniform(0.5, 1.5, s).astype(np.float32)
                 for k, s in {"w": (4, 3, 3, 3), "m": 4, "v": 4, "b": 4, "s": 4}.items()}
    inputs = {"x": rng.standard_normal((2, 3, 9, 9)).astype(np.float32)}
    ex = Executor(graph, variables, kernels=KERNELS)
    out = ex.run(inputs)
    ref = Executor(graph, variables, kernels=KERNELS, optimize=False).run(inputs)
    assert ex._program is not None and len(ex._program) == 4  # nothing folded or fused
    for k in ("y", "z"):
        _close(out[k], ref[k])


def test_digits_model_unchanged() -> None:
    model = skriptnd.load(ROOT / "models" / "digits")
    graph = model.compose(attribs={"batch": 5})
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    x = graph.inputs[0]
    inputs = {x.name: np.random.default_rng(3).uniform(0, 16, (5, *x.shape[1:])).astype(np.float32)}
    ex = Executor(graph, variables, kernels=KERNELS)
    out = ex.run(inputs)
    ref = Executor(graph, variables, kernels=KERNELS, optimize=False).run(inputs)
    assert ex._program is not None and len(ex._program) < len(graph.operations)  # the relus are fused
    for k in ref:
        _close(out[k], ref[k])


def test_resnet18_folded(tmp_path_factory: pytest.TempPathFactory) -> None:
    import test_model_zoo as zoo

    folder, _ = zoo._copy_with_weights("resnet18", tmp_path_factory.mktemp("resnet18"))
    graph = skriptnd.load(folder).compose(attribs={"height": 64, "width": 64})
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    inputs = {"input": np.random.default_rng(4).standard_normal((1, 3, 64, 64)).astype(np.float32)}
    ex = Executor(graph, variables, kernels=KERNELS)
    out = ex.run(inputs)
    ref = Executor(graph, variables, kernels=KERNELS, optimize=False).run(inputs)
    batch_norms = sum(op.op == "nn.batch_norm" for op in graph.operations)
    assert batch_norms == 20
    assert ex._program is not None and not any(step[1].op == "nn.batch_norm" for step in ex._program)
    for k in ref:
        _close(out[k], ref[k])
    # the plan is kept: a second run gives the same result
    for k, v in ex.run(inputs).items():
        np.testing.assert_array_equal(v, out[k])
