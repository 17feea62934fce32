"""The @lower evaluator (spec §2.12) against independent plain-numpy references.

Every stdlib operator tested here is run through `run_lowering` on random inputs and compared
with a reference written below in plain numpy (never through the evaluator). Tolerances: exact
for int/bool results and data movement; rtol=1e-5/atol=1e-6 for element-wise float32 maths;
rtol=1e-4/atol=1e-4 for sums of products (matmul, conv, pools, resampling).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from skriptnd import lower
from skriptnd.api import find_operator
from skriptnd.diagnostics import CODES
from skriptnd.lower import LoweringError, compile_lowering, run_lowering
from skriptnd.semantics.binding import bind
from skriptnd.semantics.values import Pack, TensorValue
from skriptnd.syntax import parse_module

EW = {"rtol": 1e-5, "atol": 1e-6}
SUM = {"rtol": 1e-4, "atol": 1e-4}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

rng = np.random.default_rng(1234)


def _kind(a: np.ndarray) -> str:
    return {"f": "real", "i": "int", "b": "bool"}[a.dtype.kind]


def _tv(x):
    if x is None:
        return None
    if isinstance(x, list):
        return Pack([TensorValue(_kind(a), a.shape) for a in x])
    return TensorValue(_kind(x), x.shape)


def _attr(v):
    return Pack([_attr(x) for x in v]) if isinstance(v, list | tuple) else v


def definition(op: str):
    if op.startswith("operator") or "\n" in op:
        module, diags = parse_module(op, "<test>")
        assert not diags, diags
        return module.definitions[0]
    d, diags = find_operator(op)
    assert d is not None, diags
    return d


def run(op: str, attrs: dict | None = None, inputs=(), type_args=()):
    d = definition(op)
    b = bind(d, {k: _attr(v) for k, v in (attrs or {}).items()}, [_tv(x) for x in inputs], type_args)
    outs = run_lowering(d, b, list(inputs))
    for out, info in zip(outs, b.outputs, strict=True):
        if info.shape is not None and None not in info.shape:
            assert out.shape == tuple(info.shape)
        dtype = {"real": np.float32, "int": np.int64, "bool": np.bool_}[info.dtype]
        assert (out[0] if isinstance(out, list) else out).dtype == dtype
    return outs


def run1(op, attrs=None, inputs=(), type_args=()):
    (out,) = run(op, attrs, inputs, type_args)
    return out


def rnd(*shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def irnd(*shape, low=-5, high=6):
    return rng.integers(low, high, shape).astype(np.int64)


def brnd(*shape):
    return rng.random(shape) < 0.5


# ================================================================ math: unary


UNARY = {
    "math.neg": lambda x: -x,
    "math.rcp": lambda x: 1.0 / x,
    "math.sqr": lambda x: x * x,
    "math.exp": np.exp,
    "math.sin": np.sin,
    "math.tanh": np.tanh,
    "math.atan": np.arctan,
    "math.abs": np.abs,
    "math.sign": np.sign,
    "math.floor": np.floor,
    "math.ceil": np.ceil,
    # round half away from zero (§2.4), exact in float64 for float32 inputs
    "math.round": lambda x: (np.sign(x.astype(np.float64)) * np.floor(np.abs(x.astype(np.float64)) + 0.5)),
    "nn.sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x.astype(np.float64))),
    "nn.silu": lambda x: x / (1.0 + np.exp(-x.astype(np.float64))),
    "nn.softplus": lambda x: np.log1p(np.exp(x.astype(np.float64))),
    "nn.elu": lambda x: np.where(x < 0, np.expm1(x.astype(np.float64)), x),
    "nn.erf": np.vectorize(math.erf),
    "nn.relu": lambda x: np.maximum(x, 0),
    "math.iden": lambda x: x,
    "math.rsqr": lambda x: 1.0 / (x.astype(np.float64) ** 2),
    "math.cos": np.cos,
    "math.tan": np.tan,
    "math.sinh": np.sinh,
    "math.cosh": np.cosh,
    "math.asinh": np.arcsinh,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    x = rnd(3, 4, 5, low=-3, high=3)
    x[0, 0, :4] = [0.5, -0.5, 1.5, -2.5]  # ties of round
    np.testing.assert_allclose(run1(op, {}, [x]), UNARY[op](x).astype(np.float32), **EW)


@pytest.mark.parametrize("op, ref, low, high", [
    ("math.sqrt", np.sqrt, 0.1, 5), ("math.log", np.log, 0.1, 5), ("math.rsqrt", lambda x: 1 / np.sqrt(x), 0.1, 5),
    ("math.log2", np.log2, 0.1, 5), ("math.acosh", np.arccosh, 1.0, 5), ("math.asin", np.arcsin, -0.99, 0.99),
    ("math.acos", np.arccos, -0.99, 0.99), ("math.atanh", np.arctanh, -0.9, 0.9)])
def test_unary_domain(op, ref, low, high):
    x = rnd(4, 6, low=low, high=high)
    np.testing.assert_allclose(run1(op, {}, [x]), ref(x.astype(np.float64)), **EW)


def test_int_and_bool_unary():
    x = irnd(5, 7)
    np.testing.assert_array_equal(run1("math.neg", {}, [x]), -x)
    np.testing.assert_array_equal(run1("math.abs", {}, [x]), np.abs(x))
    np.testing.assert_array_equal(run1("math.sign", {}, [x]), np.sign(x))
    b = brnd(3, 4)
    np.testing.assert_array_equal(run1("math.not", {}, [b]), ~b)


def test_erf_accuracy():
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    ref = np.vectorize(math.erf)(x.astype(np.float64))
    np.testing.assert_allclose(run1("nn.erf", {}, [x]), ref, rtol=3e-6, atol=2e-7)


@pytest.mark.parametrize("approximation", ["TANH", "SIGMOID", "EXACT"])
def test_gelu(approximation):
    x = rnd(50).astype(np.float32)
    x64 = x.astype(np.float64)
    if approximation == "TANH":
        ref = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    elif approximation == "SIGMOID":
        ref = x64 / (1 + np.exp(-1.702 * x64))
    else:
        ref = 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / np.sqrt(2)))
    attrs = {"approximate": approximation} if approximation != "EXACT" else {}
    np.testing.assert_allclose(run1("nn.gelu", attrs, [x]), ref, **EW)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.1}, {"max": 1.0}, {"alpha": 0.2, "max": 0.5}])
def test_relu_variants(attrs):
    x = rnd(4, 5)
    ref = np.maximum(np.minimum(x, attrs["max"]) if "max" in attrs else x, attrs.get("alpha", 0.0) * x
                     if "alpha" in attrs else 0.0)
    np.testing.assert_allclose(run1("nn.relu", attrs, [x]), ref, **EW)


def test_prelu_selu_thresholded():
    x = rnd(2, 3, 4)
    alpha = rnd(3)
    np.testing.assert_allclose(run1("nn.prelu", {}, [x, alpha]),
                               np.where(x < 0, alpha[None, :, None] * x, x), **EW)
    np.testing.assert_allclose(run1("nn.thresholded_relu", {"theta": 0.5}, [x]), np.where(x > 0.5, x, 0), **EW)
    ref = 1.05 * np.where(x < 0, 1.67 * np.expm1(x.astype(np.float64)), x)
    np.testing.assert_allclose(run1("nn.selu", {"alpha": 1.67, "lambda": 1.05}, [x]), ref, **EW)


def test_cast():
    x = rnd(3, 4, low=-3, high=3)
    np.testing.assert_array_equal(run1("layout.cast", {}, [x], ["int"]), np.trunc(x).astype(np.int64))
    np.testing.assert_array_equal(run1("layout.cast", {}, [x], ["bool"]), x != 0)
    i = irnd(3, 4)
    np.testing.assert_array_equal(run1("layout.cast", {}, [i], ["real"]), i.astype(np.float32))


# ================================================================ math: binary with broadcasting


def _aligned(a: np.ndarray, align, rz: int) -> np.ndarray:
    """Reshape a to rank rz, placing its dimensions at `align` (default: right-aligned)."""
    r = a.ndim
    q = r + abs(align or 0)
    p = (rz - q if align < 0 else align) if align is not None else rz - r
    return a.reshape((1,) * p + a.shape + (1,) * (rz - r - p))


def _rank(a, align):
    return a.ndim + abs(align or 0)


BINARY = {
    "math.add": np.add, "math.sub": np.subtract, "math.mul": np.multiply, "math.div": np.divide,
    "math.min": np.minimum, "math.max": np.maximum, "math.lt": np.less, "math.ge": np.greater_equal,
    "math.gt": np.greater, "math.le": np.less_equal,
    "math.eq": np.equal, "math.ne": np.not_equal,
}


@st.composite
def broadcast_case(draw):
    rz = draw(st.integers(1, 4))
    full = [draw(st.integers(1, 4)) for _ in range(rz)]

    def operand():
        r = draw(st.integers(0, rz))
        start = draw(st.integers(0, rz - r))
        shape = [1 if draw(st.booleans()) else full[start + k] for k in range(r)]
        explicit = draw(st.booleans())
        align = None
        if explicit:
            align = start if draw(st.booleans()) else -(rz - r - start) if rz - r - start > 0 else start
        elif start != rz - r:
            align = start
        return shape, align

    (sx, ax), (sy, ay) = operand(), operand()
    return sx, ax, sy, ay


@SETTINGS
@given(case=broadcast_case(), op=st.sampled_from(sorted(BINARY)))
def test_binary_broadcasting(case, op):
    sx, ax, sy, ay = case
    x, y = rnd(*sx), rnd(*sy, low=0.5, high=2.0)
    attrs = {k: v for k, v in (("lhs_align", ax), ("rhs_align", ay)) if v is not None}
    rz = max(_rank(x, ax), _rank(y, ay))
    ex, ey = _aligned(x, ax, rz), _aligned(y, ay, rz)
    assume(all(a == b or a == 1 or b == 1 for a, b in zip(ex.shape, ey.shape, strict=True)))
    ref = BINARY[op](ex, ey)
    out = run1(op, attrs, [x, y])
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, **EW)


def test_int_binary():
    x, y = irnd(3, 4, low=-20, high=20), irnd(4, low=1, high=6) * np.array([1, -1, 1, -1])
    np.testing.assert_array_equal(run1("math.div", {}, [x, y]), np.floor_divide(x, y))
    np.testing.assert_array_equal(run1("math.mod", {}, [x, y]), np.mod(x, y))
    np.testing.assert_array_equal(run1("math.pow", {}, [np.abs(x) % 4, np.abs(y)]), (np.abs(x) % 4) ** np.abs(y))
    a, b = brnd(3, 4), brnd(3, 4)
    np.testing.assert_array_equal(run1("math.and", {}, [a, b]), a & b)
    np.testing.assert_array_equal(run1("math.or", {}, [a, b]), a | b)
    np.testing.assert_array_equal(run1("math.xor", {}, [a, b]), a ^ b)


def test_real_pow_and_mod():
    x, y = rnd(3, 4, low=0.5, high=3), rnd(3, 4, low=-2, high=2)
    np.testing.assert_allclose(run1("math.pow", {}, [x, y]), x.astype(np.float64) ** y, **EW)
    np.testing.assert_allclose(run1("math.mod", {}, [y, x]), np.mod(y, x), rtol=1e-5, atol=1e-5)


def test_select_and_clamp():
    c, x, y = brnd(2, 1, 4), rnd(2, 3, 4), rnd(4)
    np.testing.assert_array_equal(run1("math.select", {}, [c, x, y]), np.where(c, x, y))
    ci = brnd(3)
    np.testing.assert_array_equal(run1("math.select", {"cond_align": 1}, [ci, x, y]),
                                  np.where(ci[None, :, None], x, y))
    a, b = rnd(3, 1, low=-1, high=0), rnd(4, low=0, high=1)
    np.testing.assert_allclose(run1("math.clamp", {}, [x, a, b]), np.minimum(np.maximum(x, a), b), **EW)


def test_axpb_axpby():
    a, x, b, y = rnd(3, 1), rnd(3, 4), rnd(4), rnd(1, 4)
    np.testing.assert_allclose(run1("math.axpb", {}, [a, x, b]), a * x + b, **EW)
    np.testing.assert_allclose(run1("math.axpby", {}, [a, x, b, y]), a * x + b * y, **EW)


# ================================================================ math: n-ary and reductions


def test_nary():
    xs = [rnd(3, 4) for _ in range(3)]
    np.testing.assert_allclose(run1("math.sum_n", {}, [xs]), xs[0] + xs[1] + xs[2], **EW)
    np.testing.assert_allclose(run1("math.prod_n", {}, [xs]), xs[0] * xs[1] * xs[2], **EW)
    np.testing.assert_array_equal(run1("math.min_n", {}, [xs]), np.minimum.reduce(xs))
    np.testing.assert_array_equal(run1("math.max_n", {}, [xs]), np.maximum.reduce(xs))
    np.testing.assert_array_equal(run1("math.argmax_n", {}, [xs]), np.argmax(np.stack(xs), axis=0))
    np.testing.assert_array_equal(run1("math.argmin_n", {}, [xs]), np.argmin(np.stack(xs), axis=0))
    bs = [brnd(5) for _ in range(4)]
    np.testing.assert_array_equal(run1("math.any_n", {}, [bs]), np.logical_or.reduce(bs))
    np.testing.assert_array_equal(run1("math.all_n", {}, [bs]), np.logical_and.reduce(bs))


def test_argmax_n_ties_take_the_first():
    xs = [np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 5.0, 3.0], np.float32)]
    np.testing.assert_array_equal(run1("math.argmax_n", {}, [xs]), [0, 1, 0])


REDUCE = {
    "math.sum_reduce": np.sum, "math.prod_reduce": np.prod, "math.min_reduce": np.min,
    "math.max_reduce": np.max,
}


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(),
       op=st.sampled_from(sorted(REDUCE)), squeeze=st.booleans())
def test_reductions(shape, data, op, squeeze):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    x = rnd(*shape, low=0.5, high=1.5)
    ref = REDUCE[op](x, axis=tuple(axes), keepdims=not squeeze)
    np.testing.assert_allclose(run1(op, {"axes": axes, "squeeze": squeeze}, [x]), ref, **SUM)


def test_bool_reductions_and_defaults():
    b = brnd(3, 4, 5)
    np.testing.assert_array_equal(run1("math.any_reduce", {"axes": [1]}, [b]), b.any(1, keepdims=True))
    np.testing.assert_array_equal(run1("math.all_reduce", {"axes": [0, 2], "squeeze": True}, [b]), b.all((0, 2)))
    x = rnd(2, 3)
    np.testing.assert_allclose(run1("math.sum_reduce", {}, [x]), x.sum(keepdims=True), **SUM)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("squeeze", [False, True])
@pytest.mark.parametrize("op, ref", [("math.argmax", np.argmax), ("math.argmin", np.argmin)])
def test_argmax_argmin(axis, squeeze, op, ref):
    x = rnd(3, 4, 5)
    x[1, 2, :] = 1.0  # ties: the first wins
    x[:, 1, 2] = -3.0
    expected = ref(x, axis=axis)
    if not squeeze:
        expected = np.expand_dims(expected, axis)
    np.testing.assert_array_equal(run1(op, {"axis": axis, "squeeze": squeeze}, [x]), expected)


@pytest.mark.parametrize("axes", [[1], [0, 2], [2, 0], [0, 1, 2]])
@pytest.mark.parametrize("squeeze", [False, True])
@pytest.mark.parametrize("op, ref", [("math.argmax_nd", np.argmax), ("math.argmin_nd", np.argmin)])
def test_argmax_nd(axes, squeeze, op, ref):
    x = rnd(3, 4, 2)
    kept = [a for a in range(3) if a not in axes]
    moved = np.moveaxis(x, axes, list(range(3 - len(axes), 3)))  # reduced axes last, in `axes` order
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    pos = ref(flat, axis=-1)
    idx = np.stack(np.unravel_index(pos, [x.shape[a] for a in axes]), axis=-1)
    if not squeeze:
        idx = idx.reshape([1 if a in axes else x.shape[a] for a in range(3)] + [len(axes)])
    np.testing.assert_array_equal(run1(op, {"axes": axes, "squeeze": squeeze}, [x]), idx)


# ================================================================ linear algebra


def test_dot_matvec_outer():
    x, y = rnd(7), rnd(7)
    np.testing.assert_allclose(run1("linalg.dot", {}, [x, y, None]), np.dot(x, y), **SUM)
    b = rnd()
    np.testing.assert_allclose(run1("linalg.dot", {}, [x, y, np.asarray(b)]), np.dot(x, y) + b, **SUM)
    A = rnd(4, 7)
    np.testing.assert_allclose(run1("linalg.matvec", {}, [A, x, None]), A @ x, **SUM)
    z = rnd(4)
    np.testing.assert_allclose(run1("linalg.matvec", {"transA": True}, [A, z, None]), A.T @ z, **SUM)
    np.testing.assert_allclose(run1("linalg.outer", {}, [rnd(2, 3), rnd(4)])[..., 0].shape, (2, 3))
    u, v = rnd(2, 3), rnd(4)
    np.testing.assert_allclose(run1("linalg.outer", {}, [u, v]), u[:, :, None] * v, **EW)


@pytest.mark.parametrize("transA", [False, True])
@pytest.mark.parametrize("transB", [False, True])
@pytest.mark.parametrize("batch", [((), ()), ((2,), (2,)), ((3, 1), (2,)), ((1,), (4, 1, 1)[1:])])
def test_matmul(transA, transB, batch):
    ba, bb = batch
    m, k, n = 3, 5, 4
    A = rnd(*ba, *((k, m) if transA else (m, k)))
    B = rnd(*bb, *((n, k) if transB else (k, n)))
    ref = np.matmul(np.swapaxes(A, -1, -2) if transA else A, np.swapaxes(B, -1, -2) if transB else B)
    out = run1("linalg.matmul", {"transA": transA, "transB": transB}, [A, B, None])
    np.testing.assert_allclose(out, ref, **SUM)
    C = rnd(*ref.shape[-2:])
    out = run1("linalg.matmul", {"transA": transA, "transB": transB}, [A, B, C])
    np.testing.assert_allclose(out, ref + C, **SUM)


def test_linear():
    x, w, b = rnd(5, 6), rnd(3, 6), rnd(3)
    np.testing.assert_allclose(run1("nn.linear", {}, [x, w, b]), x @ w.T + b, **SUM)
    np.testing.assert_allclose(run1("nn.linear", {}, [x, w, None]), x @ w.T, **SUM)


# ================================================================ convolution and pooling


def _conv_ref(x, w, b, stride, dilation, lo, hi, groups, ox=None):
    """NCX convolution by accumulating shifted strided slices, one filter tap at a time."""
    d = x.ndim - 2
    K = w.shape[2:]
    fd = [(K[i] - 1) * dilation[i] + 1 for i in range(d)]
    if ox is None:
        ox = [(x.shape[2 + i] + lo[i] + hi[i] - fd[i]) // stride[i] + 1 for i in range(d)]
    hi = [max(hi[i], (ox[i] - 1) * stride[i] + fd[i] - x.shape[2 + i] - lo[i]) for i in range(d)]
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(lo[i], hi[i]) for i in range(d)])
    N, C = x.shape[:2]
    n_out = w.shape[0]
    g = groups
    m, fc = n_out // g, C // g
    out = np.zeros((N, n_out, *ox))
    for tap in np.ndindex(*K):
        sl = tuple(slice(tap[i] * dilation[i], tap[i] * dilation[i] + stride[i] * (ox[i] - 1) + 1, stride[i])
                   for i in range(d))
        patch = xp[(slice(None), slice(None), *sl)]
        for gi in range(g):
            wt = w[(slice(gi * m, (gi + 1) * m), slice(None), *tap)]
            out[:, gi * m:(gi + 1) * m] += np.einsum("nc...,oc->no...", patch[:, gi * fc:(gi + 1) * fc], wt)
    if b is not None:
        out += b.reshape((1, n_out) + (1,) * d)
    return out


def _to_ncx(x, fmt):
    d = x.ndim - 2
    if fmt == "NXC":
        return np.moveaxis(x, -1, 1)
    if fmt == "XCN":
        return x.transpose([d + 1, d] + list(range(d)))
    return x


def _from_ncx(x, fmt):
    d = x.ndim - 2
    if fmt == "NXC":
        return np.moveaxis(x, 1, -1)
    if fmt == "XCN":
        return x.transpose(list(range(2, d + 2)) + [1, 0])
    return x


def _filter_from_ncx(w, fmt):
    d = w.ndim - 2
    if fmt == "NXC":
        return np.moveaxis(w, 1, -1)
    if fmt == "XCN":
        return w.transpose(list(range(2, d + 2)) + [1, 0])
    if fmt == "CXN":
        return w.transpose([1] + list(range(2, d + 2)) + [0])
    return w


@st.composite
def conv_case(draw):
    d = draw(st.integers(1, 2))
    g = draw(st.sampled_from([1, 2]))
    fc, m = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    K = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 3)) for _ in range(d)]
    dilation = [draw(st.integers(1, 2)) for _ in range(d)]
    lo = [draw(st.integers(0, 2)) for _ in range(d)]
    hi = [draw(st.integers(0, 2)) for _ in range(d)]
    X = [max((K[i] - 1) * dilation[i] + 1 - lo[i] - hi[i], 1) + draw(st.integers(0, 4)) for i in range(d)]
    return d, g, fc, m, K, stride, dilation, lo, hi, X, draw(st.booleans()), draw(st.sampled_from(
        ["NCX", "NXC", "XCN"])), draw(st.sampled_from(["NCX", "NXC", "XCN", "CXN"]))


@SETTINGS
@given(case=conv_case())
def test_conv(case):
    d, g, fc, m, K, stride, dilation, lo, hi, X, with_bias, dfmt, ffmt = case
    x = rnd(2, g * fc, *X)
    w = rnd(g * m, fc, *K)
    b = rnd(g * m) if with_bias else None
    ref = _conv_ref(x, w, b, stride, dilation, lo, hi, g)
    attrs = {"stride": stride, "dilation": dilation, "padding": lo + hi, "groups": g, "data_format": dfmt,
             "filter_format": ffmt}
    out = run1("nn.conv", attrs, [_from_ncx(x, dfmt), _filter_from_ncx(w, ffmt), b])
    np.testing.assert_allclose(_to_ncx(out, dfmt), ref, **SUM)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("align", ["UPPER", "LOWER"])
def test_conv_default_padding(ceil_mode, align):
    x, w = rnd(1, 3, 9, 8), rnd(4, 3, 3, 2)
    stride = [1, 1] if not ceil_mode else [2, 3]
    out = run1("nn.conv", {"stride": stride, "ceil_mode": ceil_mode, "padding_align": align}, [x, w, None])
    # total padding as the spec defines it ("same"-like), the surplus on the upper or lower side
    fd = [3, 2]
    ix = [9, 8]
    total = [((-(-ix[i] // stride[i]) if ceil_mode else ix[i] // stride[i]) - 1) * stride[i] + fd[i] - ix[i]
             for i in range(2)]
    lo = [t // 2 if align == "UPPER" else -(-t // 2) for t in total]
    hi = [t - lo_ for t, lo_ in zip(total, lo, strict=True)]
    ox = [(-(-(ix[i] + total[i] - fd[i]) // stride[i]) if ceil_mode else (ix[i] + total[i] - fd[i]) // stride[i]) + 1
          for i in range(2)]
    np.testing.assert_allclose(out, _conv_ref(x, w, None, stride, [1, 1], lo, hi, 1, ox), **SUM)


def test_conv_depthwise():
    x, w = rnd(2, 4, 7, 7), rnd(4, 1, 3, 3)
    out = run1("nn.conv", {"groups": 0, "padding": [1, 1, 1, 1]}, [x, w, None])
    np.testing.assert_allclose(out, _conv_ref(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 4), **SUM)


def _deconv_ref(x, w, b, stride, dilation, lo, ox, groups):
    d = x.ndim - 2
    N, n = x.shape[:2]
    K = w.shape[2:]
    fc = w.shape[1]
    g = groups
    m = n // g
    ix = x.shape[2:]
    full_size = [(ix[i] - 1) * stride[i] + (K[i] - 1) * dilation[i] + 1 for i in range(d)]
    full = np.zeros((N, fc * g, *full_size))
    for tap in np.ndindex(*K):
        sl = tuple(slice(tap[i] * dilation[i], tap[i] * dilation[i] + stride[i] * (ix[i] - 1) + 1, stride[i])
                   for i in range(d))
        for gi in range(g):
            wt = w[(slice(gi * m, (gi + 1) * m), slice(None), *tap)]
            full[(slice(None), slice(gi * fc, (gi + 1) * fc), *sl)] += np.einsum(
                "nm...,mc->nc...", x[:, gi * m:(gi + 1) * m], wt)
    pad_hi = [max(0, lo[i] + ox[i] - full_size[i]) for i in range(d)]
    pad_lo = [max(0, -lo[i]) for i in range(d)]
    full = np.pad(full, [(0, 0), (0, 0)] + list(zip(pad_lo, pad_hi, strict=True)))
    out = full[(slice(None), slice(None), *(slice(lo[i] + pad_lo[i], lo[i] + pad_lo[i] + ox[i]) for i in range(d)))]
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * d)
    return out


@pytest.mark.parametrize("stride, dilation, padding, groups", [
    ([1], [1], [0, 0], 1), ([2], [1], [1, 1], 1), ([2], [2], [1, 0], 2), ([3], [1], None, 1)])
@pytest.mark.parametrize("dfmt", ["NCX", "NXC"])
def test_deconv_1d(stride, dilation, padding, groups, dfmt):
    x = rnd(2, 2 * groups, 5)
    w = rnd(2 * groups, 3, 3)
    b = rnd(3 * groups)
    attrs = {"stride": stride, "dilation": dilation, "groups": groups, "data_format": dfmt}
    if padding is not None:
        attrs["padding"] = padding
    out = run1("nn.deconv", attrs, [_from_ncx(x, dfmt), w, b])
    fd = (3 - 1) * dilation[0] + 1
    total = sum(padding) if padding is not None else fd - stride[0]
    lo = padding[0] if padding is not None else total // 2
    ox = (5 - 1) * stride[0] + fd - total
    np.testing.assert_allclose(_to_ncx(out, dfmt), _deconv_ref(x, w, b, stride, dilation, [lo], [ox], groups), **SUM)


def test_deconv_2d():
    x, w = rnd(1, 4, 4, 5), rnd(4, 2, 3, 2)
    out = run1("nn.deconv", {"stride": [2, 1], "padding": [1, 0, 1, 1], "groups": 2}, [x, w, None])
    ox = [(4 - 1) * 2 + 3 - 2, (5 - 1) * 1 + 2 - 1]
    np.testing.assert_allclose(out, _deconv_ref(x, w, None, [2, 1], [1, 1], [1, 0], ox, 2), **SUM)


def _pool_ref(x, size, stride, dilation, lo, hi, fill, reduce):
    d = x.ndim
    fd = [(size[i] - 1) * dilation[i] + 1 for i in range(d)]
    ox = [(x.shape[i] + lo[i] + hi[i] - fd[i]) // stride[i] + 1 for i in range(d)]
    xp = np.pad(x, list(zip(lo, hi, strict=True)), constant_values=fill)
    taps = []
    for tap in np.ndindex(*size):
        sl = tuple(slice(tap[i] * dilation[i], tap[i] * dilation[i] + stride[i] * (ox[i] - 1) + 1, stride[i])
                   for i in range(d))
        taps.append(xp[sl])
    return reduce(np.stack(taps), axis=0)


@SETTINGS
@given(data=st.data(), op=st.sampled_from(["nn.max_pool", "nn.sum_pool"]))
def test_pools(data, op):
    shape = [2, 3, data.draw(st.integers(5, 8)), data.draw(st.integers(5, 8))]
    size = [1, 1] + [data.draw(st.integers(1, 3)) for _ in range(2)]
    stride = [1, 1] + [data.draw(st.integers(1, 2)) for _ in range(2)]
    dilation = [1, 1] + [data.draw(st.integers(1, 2)) for _ in range(2)]
    lo = [0, 0] + [data.draw(st.integers(0, 1)) for _ in range(2)]
    hi = [0, 0] + [data.draw(st.integers(0, 1)) for _ in range(2)]
    x = rnd(*shape)
    attrs = {"axes": [0, 1, 2, 3], "size": size, "stride": stride, "dilation": dilation, "padding": lo + hi}
    fill, reduce = (-np.inf, np.max) if op == "nn.max_pool" else (0.0, np.sum)
    np.testing.assert_allclose(run1(op, attrs, [x]), _pool_ref(x, size, stride, dilation, lo, hi, fill, reduce),
                               **SUM)


def test_max_pool_default_axes():
    x = rnd(1, 2, 6, 6)
    out = run1("nn.max_pool", {"size": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1]}, [x])
    ref = _pool_ref(x, [1, 1, 3, 3], [1, 1, 2, 2], [1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], -np.inf, np.max)
    np.testing.assert_array_equal(out, ref)


# ================================================================ layout


def test_tensor_uniform_range_shape():
    vals = [float(v) for v in range(6)]
    np.testing.assert_array_equal(run1("layout.tensor", {"shape": [2, 3], "value": vals}, [], ["real"]),
                                  np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(run1("layout.tensor", {"shape": [2, 2], "value": 7}, [], ["int"]),
                                  np.full((2, 2), 7))
    np.testing.assert_array_equal(run1("layout.uniform", {"shape": [3, 2]}, [np.asarray(2.5, np.float32)]),
                                  np.full((3, 2), 2.5, np.float32))
    np.testing.assert_array_equal(run1("layout.range", {"first": 2, "last": 11, "stride": 3}, []), [2, 5, 8])
    np.testing.assert_allclose(run1("layout.range", {"first": 1.0, "last": -1.0, "stride": -0.5}, []),
                               [1.0, 0.5, 0.0, -0.5])
    np.testing.assert_array_equal(run1("layout.shape", {}, [rnd(2, 5, 3)]), [2, 5, 3])


# layout.flatten with rank 0 needed an erratum (docs/spec-errata.md L4); it is covered below.


@pytest.mark.parametrize("axis, rank", [(0, None), (1, 2), (-2, 2), (2, 0)])
def test_flatten_unflatten(axis, rank):
    x = rnd(2, 3, 4, 5)
    attrs = {"axis": axis} if rank is None else {"axis": axis, "rank": rank}
    a = axis % 4
    r = 4 - a if rank is None else rank
    ref = x.reshape(x.shape[:a] + (-1,) + x.shape[a + r:]) if r else np.expand_dims(x, a)
    out = run1("layout.flatten", attrs, [x])
    np.testing.assert_array_equal(out, ref)
    if r:
        back = run1("layout.unflatten", {"axis": a, "shape": list(x.shape[a:a + r])}, [out])
        np.testing.assert_array_equal(back, x)


def test_squeeze_unsqueeze_transpose():
    x = rnd(1, 3, 1, 4)
    np.testing.assert_array_equal(run1("layout.squeeze", {"axes": [0, 2]}, [x]), x.reshape(3, 4))
    np.testing.assert_array_equal(run1("layout.squeeze", {"axes": [-2]}, [x]), x.reshape(1, 3, 4))
    y = rnd(3, 4)
    np.testing.assert_array_equal(run1("layout.unsqueeze", {"axes": [0, 3]}, [y]), y.reshape(1, 3, 4, 1))
    np.testing.assert_array_equal(run1("layout.unsqueeze", {"axes": [-1]}, [y]), y.reshape(3, 4, 1))
    z = rnd(2, 3, 4, 5)
    np.testing.assert_array_equal(run1("layout.transpose", {}, [z]), z.transpose(3, 2, 1, 0))
    np.testing.assert_array_equal(run1("layout.transpose", {"perm": [0, 2, 3, 1]}, [z]), z.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(run1("layout.transpose", {"axis": 1, "perm": [3, 1, 2]}, [z]),
                                  z.transpose(0, 3, 1, 2))


def test_concat_split_stack_unstack():
    xs = [rnd(2, k, 3) for k in (1, 3, 2)]
    np.testing.assert_array_equal(run1("layout.concat", {"axis": 1}, [xs]), np.concatenate(xs, axis=1))
    same = [rnd(2, 3) for _ in range(3)]
    np.testing.assert_array_equal(run1("layout.concat", {"axis": -1}, [same]), np.concatenate(same, axis=-1))
    x = rnd(2, 6, 3)
    outs = run1("layout.split", {"axis": 1, "count": 3}, [x])
    for got, ref in zip(outs, np.split(x, 3, axis=1), strict=True):
        np.testing.assert_array_equal(got, ref)
    outs = run1("layout.split", {"axis": 1, "sizes": [1, 2, 3]}, [x])
    for got, ref in zip(outs, np.split(x, [1, 3], axis=1), strict=True):
        np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(run1("layout.stack", {"axis": 1}, [same]), np.stack(same, axis=1))
    sq = [rnd(2, 1, 3) for _ in range(2)]
    np.testing.assert_array_equal(run1("layout.stack", {"axis": 1, "squeeze": True}, [sq]),
                                  np.concatenate(sq, axis=1))
    for got, ref in zip(run1("layout.unstack", {"axis": 2}, [x]), np.moveaxis(x, 2, 0), strict=True):
        np.testing.assert_array_equal(got, ref)
    for got, ref in zip(run1("layout.unstack", {"axis": 0, "squeeze": False}, [x]), np.split(x, 2, axis=0),
                        strict=True):
        np.testing.assert_array_equal(got, ref)


def test_tile_broadcast_slice():
    x = rnd(2, 3)
    np.testing.assert_array_equal(run1("layout.tile", {"repeats": [2, 3]}, [x]), np.tile(x, (2, 3)))
    np.testing.assert_array_equal(run1("layout.tile", {"axes": [1], "repeats": [2]}, [x]), np.tile(x, (1, 2)))
    y = rnd(1, 3, 1)
    np.testing.assert_array_equal(run1("layout.broadcast", {"shape": [4, 3, 2]}, [y]), np.broadcast_to(y, (4, 3, 2)))
    np.testing.assert_array_equal(run1("layout.broadcast", {"axes": [2], "shape": [5]}, [y]),
                                  np.broadcast_to(y, (1, 3, 5)))
    z = rnd(5, 7)
    cases = [({"axes": [1], "begin": [1], "end": [6], "stride": [2]}, z[:, 1:6:2]),
             ({"axes": [0, 1], "begin": [4, 6], "end": [0, -1], "stride": [-1, -2]}, z[4:0:-1, 6::-2]),
             ({"begin": [1, 2], "end": [3, 100]}, z[1:3, 2:])]
    for attrs, ref in cases:
        np.testing.assert_array_equal(run1("layout.slice", attrs, [z]), ref)


@pytest.mark.parametrize("method, np_mode", [("CONSTANT", "constant"), ("REFLECT", "reflect"),
                                             ("REPLICATE", "edge"), ("SYMMETRIC", "symmetric")])
def test_pad(method, np_mode):
    x = rnd(3, 4)
    out = run1("layout.pad", {"padding": [1, 2, 2, 1], "method": method}, [x, None])
    np.testing.assert_array_equal(out, np.pad(x, [(1, 2), (2, 1)], mode=np_mode))
    out = run1("layout.pad", {"axes": [1], "padding": [0, 3], "method": method}, [x, None])
    np.testing.assert_array_equal(out, np.pad(x, [(0, 0), (0, 3)], mode=np_mode))


def test_pad_value_and_int():
    x = irnd(2, 3)
    out = run1("layout.pad", {"padding": [1, 0, 0, 2]}, [x, np.asarray(9)])
    np.testing.assert_array_equal(out, np.pad(x, [(1, 0), (0, 2)], constant_values=9))


def test_gather_scatter():
    data = rnd(3, 5, 2)
    index = irnd(2, 4, low=0, high=5)
    np.testing.assert_array_equal(run1("layout.gather", {"axis": 1}, [data, index]), np.take(data, index, axis=1))
    nd_idx = irnd(4, 2, low=0, high=3)
    nd_idx[:, 1] = rng.integers(0, 5, 4)
    np.testing.assert_array_equal(run1("layout.gather_nd", {}, [data, nd_idx]), data[nd_idx[:, 0], nd_idx[:, 1]])
    b_idx = irnd(3, 2, 1, low=0, high=5)
    ref = np.stack([data[b][b_idx[b, :, 0]] for b in range(3)])
    np.testing.assert_array_equal(run1("layout.gather_nd", {"batch_dims": 1}, [data, b_idx]), ref)
    # scatter: distinct indices per row (duplicates have no defined order in the spec's prose)
    indices = np.stack([rng.permutation(5)[:3] for _ in range(3 * 2)]).reshape(3, 2, 3).transpose(0, 2, 1)
    updates = rnd(3, 3, 2)
    ref = data.copy()
    for s in range(3):
        for m in range(3):
            for t in range(2):
                ref[s, indices[s, m, t], t] = updates[s, m, t]
    np.testing.assert_array_equal(run1("layout.scatter", {"axis": 1}, [data, indices, updates]), ref)
    sidx = np.array([[0, 1], [2, 4], [1, 0]])
    upd = rnd(3, 2)
    ref = data.copy()
    ref[sidx[:, 0], sidx[:, 1]] = upd
    np.testing.assert_array_equal(run1("layout.scatter_nd", {}, [data, sidx, upd]), ref)


def test_nonzero_dynamic_extent():
    x = irnd(3, 4, low=-1, high=2)
    out = run1("layout.nonzero", {}, [x])
    np.testing.assert_array_equal(out, np.stack(np.nonzero(x)))
    assert out.shape == (2, np.count_nonzero(x))
    np.testing.assert_array_equal(run1("layout.nonzero", {}, [np.zeros((2, 2), bool)]), np.zeros((2, 0)))


# ================================================================ image


def test_nearest_down_up_sample():
    x = rnd(1, 2, 4, 6)
    np.testing.assert_array_equal(run1("image.nearest_downsample", {"axes": [2, 3], "factor": [2, 3]}, [x]),
                                  x[:, :, ::2, ::3])
    np.testing.assert_array_equal(run1("image.nearest_upsample", {"axes": [2, 3], "factor": [2, 3]}, [x]),
                                  x.repeat(2, axis=2).repeat(3, axis=3))


def _linear_upsample_ref(x, axis, factor, symmetric, replicate):
    """1-D linear upsampling along `axis`: output sample o sits at input coordinate
    (o + 0.5) / factor - 0.5 (symmetric) or o / factor (aligned corners of the asymmetric filter)."""
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    n = x.shape[-1]
    out = np.zeros(x.shape[:-1] + (n * factor,))
    for o in range(n * factor):
        c = (o + 0.5) / factor - 0.5 if symmetric else o / factor
        i0 = math.floor(c)
        t = c - i0
        for i, w in ((i0, 1 - t), (i0 + 1, t)):
            if w == 0:
                continue
            if 0 <= i < n:
                out[..., o] += w * x[..., i]
            elif replicate:
                out[..., o] += w * x[..., min(max(i, 0), n - 1)]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("factor", [2, 3])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("replicate", [True, False])
def test_linear_upsample(factor, symmetric, replicate):
    x = rnd(2, 5)
    out = run1("image.linear_upsample", {"axes": [1], "factor": [factor], "symmetric": symmetric,
                                         "replicate_border": replicate}, [x])
    np.testing.assert_allclose(out, _linear_upsample_ref(x, 1, factor, symmetric, replicate), **SUM)


def _coords(out_size, in_size, transform):
    o = np.arange(out_size, dtype=np.float64)
    if transform == "ALIGNED":
        scale = 0.0 if out_size <= 1 else (in_size - 1) / (out_size - 1)
        return o * scale
    scale = in_size / out_size
    return o * scale + (0.5 * scale - 0.5 if transform == "SYMMETRIC" else 0.0)


# image.nearest_resize's lower-end clamp needed an erratum (docs/spec-errata.md L5).


@pytest.mark.parametrize("transform", ["SYMMETRIC", "ASYMMETRIC", "ALIGNED"])
@pytest.mark.parametrize("rounding", ["FLOOR", "CEIL", "ROUND_PREFER_FLOOR", "ROUND_PREFER_CEIL"])
@pytest.mark.parametrize("size", [[8, 4], [3, 3]])
def test_nearest_resize(transform, rounding, size):
    x = rnd(2, 4, 6)
    ref = x.astype(np.float64)
    for ax, n in zip((1, 2), size, strict=True):
        c = _coords(n, x.shape[ax], transform)
        r = {"FLOOR": np.floor(c), "CEIL": np.ceil(c), "ROUND_PREFER_FLOOR": np.ceil(c - 0.5),
             "ROUND_PREFER_CEIL": np.floor(c + 0.5)}[rounding]
        ref = np.take(ref, np.clip(r.astype(int), 0, x.shape[ax] - 1), axis=ax)
    out = run1("image.nearest_resize", {"axes": [1, 2], "size": size, "coordinate_transform": transform,
                                        "rounding_method": rounding}, [x])
    np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("transform", ["SYMMETRIC", "ASYMMETRIC", "ALIGNED"])
def test_linear_resize(transform):
    x = rnd(3, 4, 5)
    size = [7, 3]
    ref = x.astype(np.float64)
    for ax, n in zip((1, 2), size, strict=True):
        c = _coords(n, x.shape[ax], transform)
        i0 = np.floor(c).astype(int)
        t = c - np.floor(c)
        lo = np.take(ref, np.clip(i0, 0, x.shape[ax] - 1), axis=ax)
        hi = np.take(ref, np.clip(i0 + 1, 0, x.shape[ax] - 1), axis=ax)
        shape = [1] * 3
        shape[ax] = n
        w1 = np.abs(1 - t).reshape(shape)
        w0 = np.abs(0 - t).reshape(shape)
        ref = w1 * lo + w0 * hi
    out = run1("image.linear_resize", {"axes": [1, 2], "size": size, "coordinate_transform": transform}, [x])
    np.testing.assert_allclose(out, ref, **SUM)


def _grid_coords(grid, sizes, aligned):
    g = (grid.astype(np.float64) + 1.0) * 0.5
    s = np.asarray(sizes, dtype=np.float64)
    return g * (s - 1) if aligned else g * s - 0.5


def _fix(i, n, padding):
    if padding == "REFLECT":
        return np.where(i < 0, -i, np.where(i >= n, 2 * (n - 1) - i, i)), np.ones(i.shape, bool)
    if padding == "REPLICATE":
        return np.clip(i, 0, n - 1), np.ones(i.shape, bool)
    return np.clip(i, 0, n - 1), (i >= 0) & (i < n)


@pytest.mark.parametrize("padding", ["ZEROS", "REFLECT", "REPLICATE"])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_2d(padding, aligned, mode):
    n, c, h, w = 2, 3, 4, 5
    x = rnd(n, c, h, w)
    grid = rnd(n, 3, 2, 2, low=-1.1, high=1.1)  # the last dim holds (x, y): reversed spatial order
    coords = _grid_coords(grid[..., ::-1], [h, w], aligned)  # (n, zy, zx, 2) as (row, col)
    out_ref = np.zeros((n, c, 3, 2))
    if mode == "nearest":
        r = np.sign(coords) * np.floor(np.abs(coords) + 0.5)
        idx = r.astype(int)
        (iy, vy), (ix, vx) = _fix(idx[..., 0], h, padding), _fix(idx[..., 1], w, padding)
        for b in range(n):
            out_ref[b] = x[b][:, iy[b], ix[b]] * (vy[b] & vx[b])
    else:
        f = np.floor(coords).astype(int)
        for dy in (0, 1):
            for dx in (0, 1):
                iy, ix = f[..., 0] + dy, f[..., 1] + dx
                wgt = (1 - np.abs(iy - coords[..., 0])) * (1 - np.abs(ix - coords[..., 1]))
                (jy, vy), (jx, vx) = _fix(iy, h, padding), _fix(ix, w, padding)
                for b in range(n):
                    out_ref[b] += x[b][:, jy[b], jx[b]] * (wgt[b] * (vy[b] & vx[b]))
    out = run1(f"image._{mode}_grid_sample", {"padding": padding, "aligned": aligned}, [x, grid])
    np.testing.assert_allclose(out, out_ref, **SUM)


# ================================================================ quantization


def test_zero_point_linear_quantize():
    x = rnd(2, 3, 4, low=-3, high=3)
    zp, sc = [1, -2, 0], [0.05, 0.1, 0.02]
    for signed, symmetric, bits in [(True, False, 8), (True, True, 4), (False, False, 3)]:
        r = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
        m = 0 if not signed else (-r if symmetric else -r - 1)
        z = np.array(zp).reshape(1, 3, 1)
        s = np.array(sc, dtype=np.float64).reshape(1, 3, 1)
        q = x / s.astype(np.float32)
        rounded = np.sign(q) * np.floor(np.abs(q).astype(np.float64) + 0.5)
        ref = (np.clip(z + rounded, m, r) - z) * s
        out = run1("quant.zero_point_linear_quantize", {"zero_point": zp, "scale": sc, "bits": bits,
                                                        "signed": signed, "symmetric": symmetric}, [x])
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    out = run1("quant.zero_point_linear_quantize", {"zero_point": [0] * 3, "scale": [0.25] * 3, "bits": 8}, [x])
    np.testing.assert_allclose(out, np.clip(np.sign(x) * np.floor(np.abs(x / 0.25) + 0.5), -128, 127) * 0.25,
                               **EW)


def test_min_max_linear_quantize():
    x = rnd(2, 3, 4, low=-3, high=3)
    mn, mx = [-1.0, -2.0, 0.0], [1.0, 0.5, 2.0]
    for signed, symmetric, bits in [(True, False, 8), (True, True, 4), (False, False, 3)]:
        r = 2 ** bits - 1 - int(signed and symmetric)
        p = (2 ** (bits - 1) - int(symmetric)) if signed else 0
        lo = np.array(mn).reshape(1, 3, 1)
        hi = np.array(mx).reshape(1, 3, 1)
        scale = hi - lo
        v = (np.clip(x, lo, hi) - lo) / scale * r
        q = np.sign(v) * np.floor(np.abs(v) + 0.5) - p
        ref = (q + p) / r * scale + lo
        out = run1("quant.min_max_linear_quantize", {"min": mn, "max": mx, "bits": bits, "signed": signed,
                                                     "symmetric": symmetric}, [x])
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ================================================================ the spec's own §2.12 examples

SPEC_MATMUL = """
operator matmul {
  @input {
    A: real[m,k];
    B: real[k,n];
    Z: optional real[m,n];
  }
  @output {
    C: real[m,n];
  }
  @lower {
    C[i,j] = Z[i,j] ?? 0.0,
      i < m, j < n;
    C[i,j] += A[i,l] * B[l,j],
      i < m, l < k, j < n;
  }
}
"""


def test_spec_matmul_optional_init():
    A, B, Z = rnd(3, 4), rnd(4, 5), rnd(3, 5)
    np.testing.assert_allclose(run1(SPEC_MATMUL, {}, [A, B, None]), A @ B, **SUM)
    np.testing.assert_allclose(run1(SPEC_MATMUL, {}, [A, B, Z]), A @ B + Z, **SUM)


ADD_TO_ALL = {
    "explicit pack index": """
operator add_to_all {
  @input { xs: real[n,m]..(k); z: real[n,m]; }
  @output { ys: real[n,m]..(k); }
  @lower {
    ys[ki][ni,mi] = xs[ki][ni,mi] + z[ni,mi],
      ki < k, ni < n, mi < m;
  }
}""",
    "packed assignment": """
operator add_to_all {
  @input { xs: real[n,m]..(k); z: real[n,m]; }
  @output { ys: real[n,m]..(k); }
  @lower {
    ys[ni,mi] = xs[ni,mi] + z[ni,mi],
      ni < n, mi < m;
  }
}""",
    "unrolled": """
operator add_to_all {
  @input { xs: real[n,m]..(k); z: real[n,m]; }
  @output { ys: real[n,m]..(k); }
  @lower {
    unroll..(ki -> k)
      ys[ki][ni,mi] = xs[ki][ni,mi] + z[ni,mi],
        ni < n, mi < m;
  }
}""",
}


@pytest.mark.parametrize("form", sorted(ADD_TO_ALL))
def test_spec_add_to_all(form):
    xs, z = [rnd(2, 3) for _ in range(4)], rnd(2, 3)
    ys = run1(ADD_TO_ALL[form], {}, [xs, z])
    assert len(ys) == 4
    for x, y in zip(xs, ys, strict=True):
        np.testing.assert_allclose(y, x + z, **EW)


@pytest.mark.parametrize("index", ["ki", ":"])
def test_spec_add_to_all_single_tensor(index):
    src = f"""
operator add_to_all {{
  @input {{ xs: real[n,m,k]; z: real[n,m]; }}
  @output {{ ys: real[n,m,k]; }}
  @using {{ ki = [0:k]; }}
  @lower {{
    ys[ni,mi,{index}] = xs[ni,mi,{index}] + z[ni,mi],
      ni < n, mi < m;
  }}
}}"""
    xs, z = rnd(2, 3, 4), rnd(2, 3)
    np.testing.assert_allclose(run1(src, {}, [xs, z]), xs + z[:, :, None], **EW)


MAX_IDX = """
operator max_idx {
  @input { x: real[n]; }
  @output { idx: int[]; }
  @lower {
    idx[] = 0;
    idx[] := i,
      i < n | x[i,] > x[idx[],];
  }
}"""

MAX_IDX_2D = """
operator max_idx_2d {
  @input { x: real[m,n]; }
  @output { idx: int[2]; }
  @lower {
    idx[:,] = 0;
    idx[:,] := [i,j],
      i < m, j < n | x[i,j] > x[idx[:,]..];
  }
}"""

MAX_IDX_2D_PACKED = """
operator max_idx_2d {
  @input { x: real[m,n]; }
  @output { idx: int[]..(2); }
  @lower {
    idx[] = 0;
    idx[] := [i,j],
      i < m, j < n | x[i,j] > x[idx[]..];
  }
}"""


def test_spec_max_idx():
    x = rnd(17)
    x[[3, 9]] = 5.0  # a tie: the first one wins
    assert int(run1(MAX_IDX, {}, [x])) == 3


@pytest.mark.parametrize("src", [MAX_IDX_2D, MAX_IDX_2D_PACKED])
def test_spec_max_idx_2d_atomic(src):
    x = rnd(4, 6)
    x[2, 1] = x[3, 5] = 7.0
    out = run1(src, {}, [x])
    got = [int(v) for v in out] if isinstance(out, list) else out.tolist()
    assert got == [2, 1]


def test_spec_smoothing_bounded_skip():
    src = """
operator smooth {
  @attrib { w: int; }
  @input { x: real[s]; }
  @output { y: real[s]; }
  @lower {
    y[i] += x[|i + j - w/2|] / real(w),
      i < s, j < w;
  }
}"""
    x = rnd(9)
    for w in (1, 3, 4):
        ref = np.zeros(9)
        for i in range(9):
            for j in range(w):
                p = i + j - w // 2
                if 0 <= p < 9:
                    ref[i] += x[p] / w
        np.testing.assert_allclose(run1(src, {"w": w}, [x]), ref, **EW)


def test_spec_remap():
    src = """
operator replicate {
  @attrib { n: int; }
  @input { x: real[s]; }
  @output { y: real[s + 2 * n]; }
  @lower {
    y[i] = x[|i - n <> 0 : s - 1|],
      i < s + 2 * n;
  }
}"""
    x = rnd(5)
    np.testing.assert_array_equal(run1(src, {"n": 3}, [x]), np.pad(x, 3, mode="edge"))


def test_spec_loop_local():
    src = """
operator f {
  @input { x: real[s..]; }
  @output { y: real[s..]; }
  @lower {
    with
      z = x[i..] ** 2.0:
    y[i..] = z * sin(z),
      i < s;
  }
}"""
    x = rnd(3, 4)
    z = x.astype(np.float64) ** 2
    np.testing.assert_allclose(run1(src, {}, [x]), z * np.sin(z), **EW)


WHERE_TRUE = """
operator where_true {
  @input { cond: bool[s..(d)]; }
  @output { idx: int[d,k|(s * ..)]; }
  @lower {
    idx[:,k] = i,
      i < s | cond[i..];
  }
}"""


@SETTINGS
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3), seed=st.integers(0, 1000))
def test_spec_where_true(shape, seed):
    cond = np.random.default_rng(seed).random(shape) < 0.4
    out = run1(WHERE_TRUE, {}, [cond])
    np.testing.assert_array_equal(out, np.stack(np.nonzero(cond)).reshape(len(shape), -1))


# ================================================================ errors, plans, chunks


def _op(body: str, inputs: str = "x: real[s];", outputs: str = "y: real[s];", attrib: str = "") -> str:
    return f"operator f {{ @attrib {{ {attrib} }} @input {{ {inputs} }} @output {{ {outputs} }} " \
           f"@lower {{ {body} }} }}"


def test_error_unguarded_index_out_of_range():
    src = _op("y[i] = x[i + 1,], i < s;")
    with pytest.raises(LoweringError) as info:
        run1(src, {}, [rnd(4)])
    err = info.value
    assert err.code == "E0710" and CODES["E0710"] == "error while evaluating @lower"
    assert "out of range" in err.message
    assert err.span.file == "<test>" and err.span.line == 1 and err.to_diagnostic().code == "E0710"


def test_error_int_division_by_zero():
    src = _op("y[i] = x[i,] / d[i,], i < s;", "x: int[s]; d: int[s];", "y: int[s];")
    with pytest.raises(LoweringError):
        run1(src, {}, [irnd(3), np.array([1, 0, 2])])
    np.testing.assert_array_equal(run1(src, {}, [np.array([7, -7, 5]), np.array([2, 2, -2])]), [3, -4, -3])


def test_unselected_branch_may_be_out_of_range():
    src = _op("y[i] = i < s - 1 ? x[i + 1,] : 0.0, i < s;")
    x = rnd(5)
    np.testing.assert_array_equal(run1(src, {}, [x]), np.append(x[1:], 0))


def test_left_hand_side_out_of_range():
    src = _op("y[i + 1] = x[i,], i < s;")
    with pytest.raises(LoweringError, match="left-hand side"):
        run1(src, {}, [rnd(3)])
    guarded = _op("y[|i + 1|] = x[i,], i < s;")
    x = rnd(3)
    np.testing.assert_array_equal(run1(guarded, {}, [x]), [0, x[0], x[1]])


def test_update_without_init_is_rejected():
    with pytest.raises(LoweringError, match="initialisation"):
        run1(_op("y[i] := x[i,], i < s;"), {}, [rnd(3)])


def test_min_max_without_init_use_extremes():
    src = _op("y[] >?= x[i,], i < s;", "x: int[s];", "y: int[];")
    assert int(run1(src, {}, [np.array([-5, -9, -7])])) == -5
    src = _op("y[] <?= x[i,], i < s;", "x: int[s];", "y: int[];")
    assert int(run1(src, {}, [np.array([5, 9, 7])])) == 5


def test_conditional_accumulation():
    src = _op("y[] += x[i,], i < s | x[i,] > 0.0;", outputs="y: real[];")
    x = rnd(20)
    np.testing.assert_allclose(run1(src, {}, [x]), x[x > 0].sum(), **SUM)


def test_plan_reuse_and_input_checks():
    d = definition("nn.conv")
    b = bind(d, {"padding": _attr([1, 1, 1, 1])}, [_tv(rnd(1, 2, 5, 5)), _tv(rnd(3, 2, 3, 3)), None])
    plan = compile_lowering(d, b)
    for _ in range(2):
        x, w = rnd(1, 2, 5, 5), rnd(3, 2, 3, 3)
        (out,) = plan.run([x, w, None])
        np.testing.assert_allclose(out, _conv_ref(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 1), **SUM)
    with pytest.raises(LoweringError, match="shape"):
        plan.run([rnd(1, 2, 6, 5), rnd(3, 2, 3, 3), None])


CHUNKED = [
    ("math.sum_reduce", {"axes": [1], "squeeze": True}, lambda: [rnd(6, 7, 5)]),
    ("math.argmax", {"axis": 1}, lambda: [rnd(6, 7, 5)]),
    ("nn.max_pool", {"size": [3, 3], "padding": [1, 1, 1, 1]}, lambda: [rnd(2, 3, 6, 5)]),
    ("nn.deconv", {"stride": [2]}, lambda: [rnd(2, 3, 5), rnd(3, 2, 3), None]),
    ("layout.pad", {"padding": [2, 1, 0, 3], "method": "REFLECT"}, lambda: [rnd(5, 6), None]),
    ("layout.nonzero", {}, lambda: [brnd(6, 7)]),
    ("layout.gather", {"axis": 0}, lambda: [rnd(6, 4), irnd(5, 3, low=0, high=6)]),
    ("linalg.matmul", {}, lambda: [rnd(6, 5), rnd(5, 4), rnd(6, 4)]),
]


@pytest.mark.parametrize("op, attrs, make", CHUNKED, ids=[c[0] for c in CHUNKED])
def test_chunked_spaces_agree(op, attrs, make, monkeypatch):
    inputs = make()
    expected = run(op, attrs, inputs)
    monkeypatch.setattr(lower.plan, "CHUNK_ELEMENTS", 16)
    d = definition(op)
    b = bind(d, {k: _attr(v) for k, v in attrs.items()}, [_tv(x) for x in inputs])
    plan = compile_lowering(d, b)
    got = plan.run(inputs)
    formulas = sum(len(blk.items) for blk in d.blocks if type(blk).__name__ == "LowerBlock")
    if op != "math.sum_reduce":  # that one is a single einsum: nothing is materialised
        assert plan.steps > formulas
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, **SUM)


def test_dtype_mapping():
    assert lower.NP_DTYPES == {"real": np.dtype(np.float32), "int": np.dtype(np.int64), "bool": np.dtype(np.bool_)}


def test_argmax_is_vectorised_over_kept_axes():
    """The sequential loop runs over the reduced axis only: 16 iterations for 64k elements."""
    import time

    x = rnd(64, 16, 64)
    start = time.perf_counter()
    out = run1("math.argmax", {"axis": 1, "squeeze": True}, [x])
    assert time.perf_counter() - start < 2.0
    np.testing.assert_array_equal(out, x.argmax(1))


def test_scatter_accumulation_with_duplicates():
    idx = np.array([0, 2, 2, 4, 0, 0])
    x = rnd(6)
    src = _op("y[idx[i,]] += x[i,], i < s;", "x: real[s]; idx: int[s];", "y: real[5];")
    ref = np.zeros(5)
    np.add.at(ref, idx, x)
    np.testing.assert_allclose(run1(src, {}, [x, idx]), ref, **EW)
    src = _op("y[idx[i,]] >?= x[i,], i < s;", "x: real[s]; idx: int[s];", "y: real[5];")
    ref = np.full(5, -np.inf)
    np.maximum.at(ref, idx, x)
    np.testing.assert_array_equal(run1(src, {}, [x, idx]), ref)
    src = _op("y[idx[i,]] = x[i,], i < s;", "x: real[s]; idx: int[s];", "y: real[5];")
    ref = np.zeros(5, np.float32)
    for k in range(6):  # sequential semantics: the last write wins
        ref[idx[k]] = x[k]
    np.testing.assert_array_equal(run1(src, {}, [x, idx]), ref)


def test_windowed_left_hand_side_max():
    src = _op("y[|2 * i + j - 1|] >?= x[i, j], i < n, j < k;", "x: real[n, k];", "y: real[7];")
    x = rnd(4, 3)
    ref = np.full(7, -np.inf)
    for i in range(4):
        for j in range(3):
            if 0 <= 2 * i + j - 1 < 7:
                ref[2 * i + j - 1] = max(ref[2 * i + j - 1], x[i, j])
    np.testing.assert_array_equal(run1(src, {}, [x]), ref.astype(np.float32))


def test_scalar_operators_in_formulas():
    src = _op("""y[i] = (x[i,] \\ 3) + (x[i,] <? 2) * 10 + (x[i,] >? -1) * 100
               + ((x[i,] > 0 => x[i,] % 2 == 0) ? 1000 : 0) + ((x[i,] > 0 ^ x[i,] < -3) ? 10000 : 0), i < s;""",
              "x: int[s];", "y: int[s];")
    x = np.arange(-6, 7)
    ref = (-(-x // 3)) + np.minimum(x, 2) * 10 + np.maximum(x, -1) * 100 \
        + np.where((x <= 0) | (x % 2 == 0), 1000, 0) + np.where((x > 0) ^ (x < -3), 10000, 0)
    np.testing.assert_array_equal(run1(src, {}, [x]), ref)
    src = _op("y[i] = frac(x[i,]) + round(x[i,]) * 10.0, i < s;")
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.25, -2.75], np.float32)
    ref = (x - np.floor(x)) + np.sign(x) * np.floor(np.abs(x) + 0.5) * 10
    np.testing.assert_allclose(run1(src, {}, [x]), ref, **EW)


def test_operator_without_lower_block():
    d = definition("nn.softmax")
    b = bind(d, {}, [_tv(rnd(2, 3))])
    with pytest.raises(LoweringError, match="no @lower block"):
        compile_lowering(d, b)
