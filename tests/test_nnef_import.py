"""NNEF 1.x import (skriptnd.interop.nnef_import), per operation: each graph is written as NNEF 1.x text with
random .dat weights, imported, run by skriptnd and compared with the nnef package's reference executor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import reference, write_graph

import skriptnd
from skriptnd.interop.nnef_import import import_nnef

RNG = np.random.default_rng(1234)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def check(tmp_path: Path, body: str, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray] = (),
          outputs: tuple[str, ...] = ("y",), rtol: float = 1e-4, atol: float = 1e-5) -> Path:
    """Write graph G(inputs) -> (outputs) with `body`, import it, run both, compare every output."""
    externals = "".join(f"    {name} = external<{_nnef_type(x)}>(shape = {list(x.shape)});\n"
                        for name, x in inputs.items())
    text = (f"graph G( {', '.join(inputs)} ) -> ( {', '.join(outputs)} )\n{{\n{externals}"
            + "".join(f"    {line.strip()}\n" for line in body.strip().splitlines()) + "}\n")
    src = write_graph(tmp_path / "nnef", text, weights)
    out = import_nnef(src, tmp_path / "sknd")
    got = skriptnd.run(skriptnd.load(out).compose(), dict(inputs))
    want = reference(src, list(inputs.values()))
    for name, expected in zip(outputs, want, strict=True):
        actual = np.asarray(got[name])
        assert actual.shape == expected.shape, (name, actual.shape, expected.shape, (out / "main.sknd").read_text())
        if expected.dtype.kind in "biu":
            np.testing.assert_array_equal(actual, expected.astype(actual.dtype), err_msg=name)
        else:
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=name)
    return out


def _nnef_type(x: np.ndarray) -> str:
    return {"f": "scalar", "i": "integer", "b": "logical"}[x.dtype.kind]


UNARY = ["copy", "neg", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh", "atan", "asinh", "abs", "sign",
         "floor", "ceil", "round", "sqr", "relu", "sigmoid", "softplus", "elu", "selu", "gelu", "silu"]
POSITIVE = ["rcp", "log", "sqrt", "rsqr", "rsqrt", "log2", "acosh"]
UNIT = ["asin", "acos", "atanh"]


@pytest.mark.parametrize("op", UNARY + POSITIVE + UNIT)
def test_unary(tmp_path: Path, op: str) -> None:
    x = _rand(2, 3, 4)
    if op in POSITIVE:
        x = np.abs(x) + 1.1
    if op in UNIT:
        x = np.tanh(x) * 0.9
    if op == "round":
        x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.2, -0.7]], np.float32)
    check(tmp_path, f"y = {op}(x);", {"x": x})


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "min", "max"])
@pytest.mark.parametrize("yshape", [(2, 3, 4), (1, 3), (2, 1, 4), ()])
def test_binary_with_nnef_broadcasting(tmp_path: Path, op: str, yshape: tuple[int, ...]) -> None:
    x, y = _rand(2, 3, 4), _rand(*yshape)
    if op == "pow":
        x = np.abs(x) + 0.5
    if op == "div":
        y = np.sign(y) * (np.abs(y) + 0.5)
    if yshape == ():
        check(tmp_path, f"y = {op}(x, {float(y):.6f});", {"x": x})
    else:
        check(tmp_path, f"y = {op}(x, z);", {"x": x, "z": y.astype(np.float32)})


@pytest.mark.parametrize("op", ["lt", "gt", "le", "ge", "eq", "ne"])
def test_comparisons(tmp_path: Path, op: str) -> None:
    x = RNG.integers(-2, 3, (3, 4)).astype(np.float32)
    z = RNG.integers(-2, 3, (3, 1)).astype(np.float32)
    check(tmp_path, f"y = {op}(x, z);", {"x": x, "z": z})


def test_logic_select_clamp(tmp_path: Path) -> None:
    x, z = _rand(3, 4), _rand(3, 4)
    check(tmp_path, """
        a = lt(x, 0.0);
        b = gt(z, 0.5);
        c = or(and(a, not(b)), b);
        s = select(c, x, z);
        y = clamp(s, -0.5, 0.7);
    """, {"x": x, "z": z})


def test_add_n_and_copy_n(tmp_path: Path) -> None:
    x, z = _rand(2, 5), _rand(2, 5)
    check(tmp_path, """
        [a, b] = copy_n(x, times = 2);
        y = add_n([a, b, z]);
    """, {"x": x, "z": z})


@pytest.mark.parametrize("alpha", [0.1, 1.5])
def test_leaky_relu(tmp_path: Path, alpha: float) -> None:
    check(tmp_path, f"y = leaky_relu(x, alpha = {alpha});", {"x": _rand(2, 3, 4)})


def test_prelu_per_channel(tmp_path: Path) -> None:
    out = check(tmp_path, "a = variable(shape = [1, 3], label = 'alpha');\ny = prelu(x, a);",
                {"x": _rand(2, 3, 4, 4)}, {"alpha": _rand(1, 3)})
    assert "nn.prelu" in (out / "main.sknd").read_text()


def test_softmax_and_softabs(tmp_path: Path) -> None:
    check(tmp_path, "s = softmax(x, axes = [1, 2]);\ny = softabs(s, epsilon = 0.5);", {"x": _rand(2, 3, 4)})
