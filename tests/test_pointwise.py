"""The kernels of skriptnd/execute/pointwise.py (element-wise arithmetic, math.moments, nn.softmax,
nn.gelu, layout.transpose, layout.reshape) against the operators' own definitions: each graph
runs once with the default kernels and once with `kernels_for("lower")` (every stdlib operator on
its @lower plan or @compose graph), on random shapes (hypothesis) and values.

Tolerance: |kernel - reference| <= 1e-6 + 1e-5 |reference| (float32; reductions sum in another
order; gelu's exact form avoids the float32 cancellation of 1 + erf for large negative inputs,
where the definition rounds to 0 and the kernel keeps values below 1e-7). The tests also check
that the kernels ran (did not decline), and that they decline what they do not handle
(alignment attributes, integer arithmetic), leaving the definition to run.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_counting import load_source, run_both

import skriptnd
from skriptnd.compose.ir import Graph
from skriptnd.execute import KERNELS, Executor, pointwise

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ATOL, RTOL = 1e-6, 1e-5

_DIMS = "@attrib { a: int = 1; b: int = 1; c: int = 1; d: int = 1; }"

SOURCE = f"""import math;
import nn;
import layout;

graph Binary {{
    {_DIMS}
    @input {{ x: real[a,b,c]; full: real[a,b,c]; row: real[c]; col: real[a,b,1]; }}
    @output {{ s1: real[a,b,c]; s2: real[a,b,c]; s3: real[a,b,c]; s4: real[a,b,c];
               r1: real[a,b,c]; r2: real[a,b,c]; r3: real[a,b,c]; r4: real[a,b,c];
               c1: real[a,b,c]; c2: real[a,b,c]; c3: real[a,b,c]; c4: real[a,b,c];
               k1: real[a,b,c]; k2: real[a,b,c]; q: real[a,b,c]; e: real[a,b,c]; }}
    @compose {{
        s1 = math.add(x, full); s2 = math.sub(x, full); s3 = math.mul(x, full); s4 = math.div(x, full);
        r1 = math.add(x, row); r2 = math.sub(row, x); r3 = math.mul(x, row); r4 = math.div(x, row);
        c1 = math.add(col, x); c2 = math.sub(x, col); c3 = math.mul(col, x); c4 = math.div(x, col);
        k1 = math.add(x, 1e-5); k2 = math.mul(x, 0.125);
        q = math.sqrt(full); e = math.exp(x);
    }}
}}

graph Moments {{
    {_DIMS}
    @input {{ x: real[a,b,c]; }}
    @output {{ m1: real[a,b,1]; v1: real[a,b,1]; m2: real[b]; v2: real[b]; m3: real[1,1,1]; v3: real[1,1,1];
               m4: real[a,b]; v4: real[a,b]; m5: real[]; v5: real[]; }}
    @compose {{
        m1, v1 = math.moments{{axes=[2]}}(x);
        m2, v2 = math.moments{{axes=[0,2], squeeze=true}}(x);
        m3, v3 = math.moments(x);
        m4, v4 = math.moments{{axes=[-1], squeeze=true}}(x);
        m5, v5 = math.moments{{squeeze=true}}(x);
    }}
}}

graph Softmax {{
    {_DIMS}
    @input {{ x: real[a,b,c,d]; }}
    @output {{ y1: real[a,b,c,d]; y2: real[a,b,c,d]; y3: real[a,b,c,d]; y4: real[a,b,c,d]; }}
    @compose {{
        y1 = nn.softmax(x);
        y2 = nn.softmax{{axes=[3]}}(x);
        y3 = nn.softmax{{axes=[0,2]}}(x);
        y4 = nn.softmax{{axes=[-2]}}(x);
    }}
}}

graph Gelu {{
    {_DIMS}
    @input {{ x: real[a,b,c]; }}
    @output {{ y1: real[a,b,c]; y2: real[a,b,c]; y3: real[a,b,c]; }}
    @compose {{
        y1 = nn.gelu(x);
        y2 = nn.gelu{{approximate='TANH'}}(x);
        y3 = nn.gelu{{approximate='SIGMOID'}}(x);
    }}
}}

graph Layout {{
    {_DIMS}
    @input {{ x: real[a,b,c,d]; }}
    @output {{ t1: real[a,c,b,d]; t2: real[d,c,b,a]; t3: real[a,d,b,c]; t4: real[a,b,d,c];
               p1: real[a,b,c,2,d]; p2: real[a,b*c,d]; p3: real[a*b*c*d]; }}
    @compose {{
        t1 = layout.transpose{{perm=[0,2,1,3]}}(x);
        t2 = layout.transpose(x);
        t3 = layout.transpose{{axis=1, perm=[3,1,2]}}(x);
        t4 = layout.transpose{{axis=-2}}(x);
        x2 = layout.concat{{axis=3}}([x, x]);
        p1 = layout.reshape{{axis=3, rank=1, shape=[2, d]}}(x2);
        p2 = layout.reshape{{axis=1, rank=2, shape=[b*c]}}(x);
        p3 = layout.reshape{{shape=[a*b*c*d]}}(x);
    }}
}}

graph Declined {{
    {_DIMS}
    @input {{ x: real[a,b,c]; y: real[a]; i: int[a,b,c]; j: int[c]; }}
    @output {{ z: real[a,b,c]; n: int[a,b,c]; }}
    @compose {{
        z = math.add{{rhs_align=0}}(x, y);
        n = math.add(i, j);
    }}
}}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> skriptnd.Model:
    return load_source(tmp_path_factory.mktemp("pointwise"), SOURCE)


def _compare(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, int]:
    fast, reference, calls = run_both(graph, inputs, pointwise.POINTWISE_KERNELS)
    assert fast.keys() == reference.keys()
    for name, expected in reference.items():
        actual = fast[name]
        assert actual.shape == expected.shape, name
        assert actual.dtype == expected.dtype, name
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=name)
    return calls


dims3 = st.fixed_dictionaries({"a": st.integers(1, 3), "b": st.integers(1, 4), "c": st.integers(1, 5)})
dims4 = st.fixed_dictionaries({"a": st.integers(1, 3), "b": st.integers(1, 3), "c": st.integers(1, 4),
                               "d": st.integers(1, 4)})


def _real(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@SETTINGS
@given(dims=dims3, seed=st.integers(0, 2**16))
def test_elementwise_arithmetic_with_broadcasting(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = dims["a"], dims["b"], dims["c"]

    def away_from_zero(*shape: int) -> np.ndarray:
        return (np.sign(rng.standard_normal(shape)) * rng.uniform(0.5, 2.0, shape)).astype(np.float32)

    inputs = {"x": _real(rng, a, b, c, scale=2.0), "full": np.abs(away_from_zero(a, b, c)),
              "row": away_from_zero(c), "col": away_from_zero(a, b, 1)}
    calls = _compare(model.compose("Binary", attribs=dims), inputs)
    assert calls == {"math.add": 4, "math.sub": 3, "math.mul": 4, "math.div": 3, "math.sqrt": 1, "math.exp": 1}


@SETTINGS
@given(dims=dims3, seed=st.integers(0, 2**16), offset=st.floats(-100, 100))
def test_moments(model: skriptnd.Model, dims: dict[str, int], seed: int, offset: float) -> None:
    rng = np.random.default_rng(seed)
    x = _real(rng, dims["a"], dims["b"], dims["c"]) + np.float32(offset)
    calls = _compare(model.compose("Moments", attribs=dims), {"x": x})
    assert calls == {"math.moments": 5}


@SETTINGS
@given(dims=dims4, seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 30.0]))
def test_softmax(model: skriptnd.Model, dims: dict[str, int], seed: int, scale: float) -> None:
    x = _real(np.random.default_rng(seed), dims["a"], dims["b"], dims["c"], dims["d"], scale=scale)
    calls = _compare(model.compose("Softmax", attribs=dims), {"x": x})
    assert calls == {"nn.softmax": 4}


@SETTINGS
@given(dims=dims3, seed=st.integers(0, 2**16), scale=st.sampled_from([0.3, 2.0, 6.0]))
def test_gelu(model: skriptnd.Model, dims: dict[str, int], seed: int, scale: float) -> None:
    x = _real(np.random.default_rng(seed), dims["a"], dims["b"], dims["c"], scale=scale)
    calls = _compare(model.compose("Gelu", attribs=dims), {"x": x})
    assert calls == {"nn.gelu": 3}


def test_gelu_exact_form_against_math_erf(model: skriptnd.Model) -> None:
    """The exact gelu on a grid from -12 to 12 against float64 math.erf (relative 1e-6 where
    the value is not tiny, absolute 1e-7 everywhere)."""
    import math

    x = np.linspace(-12, 12, 2401, dtype=np.float32).reshape(1, 1, -1)
    graph = model.compose("Gelu", attribs={"a": 1, "b": 1, "c": x.shape[2]})
    y = Executor(graph, {}, kernels=KERNELS).run({"x": x})["y1"].astype(np.float64)
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * np.vectorize(math.erfc)(-x64 / math.sqrt(2.0))
    np.testing.assert_allclose(y, exact, rtol=1e-6, atol=1e-7)


@SETTINGS
@given(dims=dims4, seed=st.integers(0, 2**16))
def test_transpose_and_reshape(model: skriptnd.Model, dims: dict[str, int], seed: int) -> None:
    x = _real(np.random.default_rng(seed), dims["a"], dims["b"], dims["c"], dims["d"])
    calls = _compare(model.compose("Layout", attribs=dims), {"x": x})
    assert calls == {"layout.transpose": 4, "layout.reshape": 3}


def test_transpose_results_are_new_arrays(model: skriptnd.Model) -> None:
    """Results never alias the input (a later in-place kernel must not change an argument)."""
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    graph = model.compose("Layout", attribs={"a": 1, "b": 2, "c": 3, "d": 4})
    out = Executor(graph, {}, kernels=KERNELS).run({"x": x})
    for name in ("t1", "t2", "t3", "t4", "p1", "p2", "p3"):
        assert not np.shares_memory(out[name], x)
        assert out[name].flags.c_contiguous
    np.testing.assert_array_equal(out["t1"], x.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(out["t2"], x.transpose(3, 2, 1, 0))
    np.testing.assert_array_equal(out["t3"], x.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(out["p2"], x.reshape(1, 6, 4))


def test_kernels_decline_alignment_and_integers(model: skriptnd.Model) -> None:
    dims = {"a": 2, "b": 3, "c": 4}
    rng = np.random.default_rng(0)
    inputs = {"x": _real(rng, 2, 3, 4), "y": _real(rng, 2), "i": rng.integers(-5, 5, (2, 3, 4)),
              "j": rng.integers(-5, 5, 4)}
    calls = _compare(model.compose("Declined", attribs=dims), inputs)
    assert calls == {}
    out = Executor(model.compose("Declined", attribs=dims), {}, kernels=KERNELS).run(inputs)
    np.testing.assert_allclose(out["z"], inputs["x"] + inputs["y"][:, None, None], rtol=1e-6)
    np.testing.assert_array_equal(out["n"], inputs["i"] + inputs["j"])
