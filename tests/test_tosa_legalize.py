"""Table-driven TOSA legalization (skriptnd.tosa.legalize): differential tests.

Each mapped operator is composed in a one-operation graph; the legalized TOSA subgraph (run with
skriptnd.tosa.ops.OPS) is compared with the operator's @lower block (`run_lowering`, the reference
semantics; for @compose-only operators such as softmax/mean_reduce/avg_pool, the executor with the
``lower`` backend) on the
same random float32 inputs. Tolerances: exact for data movement, rtol=1e-5/atol=1e-6 otherwise.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import skriptnd
import skriptnd.model
from skriptnd.backends import kernels_for
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute.executor import Executor
from skriptnd.lower import LoweringError, run_lowering
from skriptnd.tosa.legalize import TABLE, coverage, legalize, run_subgraph

ROOT = Path(__file__).resolve().parents[1]
EW = {"rtol": 1e-5, "atol": 1e-6}
SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_DIR = Path(tempfile.mkdtemp(prefix="sknd_tosa_legalize_"))
_N = [0]


def _compose(inputs: dict[str, str], expr: str, out_type: str = "real"):
    decl = " ".join(f"{k}: {v};" for k, v in inputs.items())
    src = (f"import math;\nimport nn;\nimport layout;\nimport linalg;\nimport quant;\n"
           f"graph G {{\n @input {{ {decl} }}\n @output {{ z: {out_type}[~..]; }}\n"
           f" @compose {{ z = {expr}; }}\n}}\n")
    _N[0] += 1
    path = _DIR / f"m{_N[0]}" / "main.sknd"
    path.parent.mkdir()
    path.write_text(src)
    graph = skriptnd.model.load(path).compose()
    assert len(graph.operations) == 1, graph.operations
    return graph, graph.operations[0]


def _random(t, rng):
    if t.dtype == "bool":
        return rng.integers(0, 2, t.shape).astype(np.bool_)
    return rng.uniform(-2.0, 2.0, t.shape).astype(np.float32)


def check(inputs: dict[str, str], expr: str, *, out_type: str = "real", exact: bool = False, seed: int = 0,
          positive: bool = False):
    try:
        graph, op = _compose(inputs, expr, out_type)
    except DiagnosticError:  # attributes the stdlib rejects (e.g. a window larger than the padded input)
        reject()
    sg, reason = legalize(op)
    if sg is None and "wholly in the padding" in reason:  # a documented fallback (an empty input crop)
        reject()
    assert sg is not None, reason
    rng = np.random.default_rng(seed)
    args = []
    for v in op.inputs:
        if isinstance(v, list):
            args.append([_random(t, rng) for t in v])
        else:
            a = None if v is None else _random(v, rng)
            args.append(np.abs(a) + np.float32(0.1) if positive and a is not None else a)
    (got,) = run_subgraph(sg, args)
    try:
        (ref,) = run_lowering(op.definition, op.binding, args)
    except LoweringError:  # @compose-only operator: the executor
        feed = {t.name: a for t, a in zip(graph.inputs, [x for v in args for x in (v if isinstance(v, list) else [v])],
                                          strict=True)}
        ref = Executor(graph, {}, kernels=kernels_for("lower")[0], optimize=False).run(feed)["z"]
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape, got.dtype, ref.dtype)
    if exact or ref.dtype == np.bool_:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, **EW)
    return sg


# -- element-wise --------------------------------------------------------------------------------

UNARY = ["math.neg", "math.abs", "math.exp", "math.log", "math.sqrt", "math.rsqrt", "math.rcp", "math.floor",
         "math.ceil", "math.sin", "math.cos", "math.tanh", "nn.sigmoid", "nn.erf", "nn.silu", "math.iden"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    positive = name in ("math.log", "math.sqrt", "math.rsqrt")
    check({"x": "real[2,3,4]"}, f"{name}(x)", positive=positive, exact=name in ("math.iden", "math.neg"))


@st.composite
def aligned(draw):
    """Shapes x, y and lhs/rhs_align attributes the stdlib accepts."""
    rz = draw(st.integers(1, 4))
    full = draw(st.lists(st.integers(1, 3), min_size=rz, max_size=rz))
    ry = draw(st.integers(0, rz))
    py = draw(st.integers(0, rz - ry))
    ys = [draw(st.sampled_from([1, full[py + i]])) for i in range(ry)]
    xs = [draw(st.sampled_from([1, d])) if draw(st.booleans()) else d for d in full]
    attr = "" if py == rz - ry else f"{{rhs_align={py}}}"
    return xs, ys, attr


def _t(dtype, shape):
    return f"{dtype}[{','.join(map(str, shape))}]"


@pytest.mark.parametrize("name", ["math.add", "math.sub", "math.mul", "math.div", "math.min", "math.max"])
@SETTINGS
@given(case=aligned(), seed=st.integers(0, 99))
def test_binary(name, case, seed):
    xs, ys, attr = case
    check({"x": _t("real", xs), "y": _t("real", ys)}, f"{name}{attr}(x, y)", seed=seed)


@pytest.mark.parametrize("name", ["math.lt", "math.gt", "math.le", "math.ge", "math.eq", "math.ne"])
@SETTINGS
@given(case=aligned())
def test_compare(name, case):
    xs, ys, attr = case
    # operands from a small set so that ties (eq/le/ge) occur
    graph, op = _compose({"x": _t("real", xs), "y": _t("real", ys)}, f"{name}{attr}(x, y)", "bool")
    sg, reason = legalize(op)
    rng = np.random.default_rng(1)
    args = [rng.integers(-1, 2, _t_shape).astype(np.float32) for _t_shape in (tuple(xs), tuple(ys))]
    np.testing.assert_array_equal(run_subgraph(sg, args)[0], run_lowering(op.definition, op.binding, args)[0])


@pytest.mark.parametrize("name", ["math.and", "math.or", "math.xor"])
def test_logical(name):
    check({"x": "bool[2,3]", "y": "bool[3]"}, f"{name}(x, y)", out_type="bool")


def test_select():
    check({"c": "bool[2,1,4]", "x": "real[3,4]", "y": "real[2,3,1]"}, "math.select(c, x, y)")
    check({"c": "bool[3]", "x": "real[2,3,4]", "y": "real[]"}, "math.select{cond_align=1}(c, x, y)")


@SETTINGS
@given(alpha=st.one_of(st.none(), st.floats(0.0, 1.0, width=32)),
       mx=st.one_of(st.none(), st.floats(0.25, 3.0, width=32)))
def test_relu(alpha, mx):
    attrs = ", ".join(f"{k}={v!r}" for k, v in (("alpha", alpha), ("max", mx)) if v is not None)
    check({"x": "real[2,3,4]"}, f"nn.relu{{{attrs}}}(x)" if attrs else "nn.relu(x)")


# -- reductions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_reduce(name, shape, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    squeeze = data.draw(st.booleans())
    check({"x": _t("real", shape)}, f"math.{name}_reduce{{axes={axes}, squeeze={str(squeeze).lower()}}}(x)",
          exact=name in ("max", "min"))


def test_softmax():
    check({"x": "real[2,5,3]"}, "nn.softmax(x)")
    check({"x": "real[2,5,3]"}, "nn.softmax{axes=[1, -1]}(x)")


# -- data movement (exact) -----------------------------------------------------------------------


def test_reshape_family():
    check({"x": "real[2,3,4]"}, "layout.reshape{shape=[4,-1]}(x)", exact=True)
    check({"x": "real[2,3,4]"}, "layout.flatten{axis=1}(x)", exact=True)
    check({"x": "real[2,1,4]"}, "layout.squeeze{axes=[1]}(x)", exact=True)
    check({"x": "real[2,4]"}, "layout.unsqueeze{axes=[0, 2]}(x)", exact=True)


@SETTINGS
@given(perm=st.permutations([0, 1, 2, 3]))
def test_transpose(perm):
    check({"x": "real[2,3,4,5]"}, f"layout.transpose{{perm={list(perm)}}}(x)", exact=True)


@SETTINGS
@given(axis=st.integers(-3, 2), sizes=st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_concat(axis, sizes):
    base = [2, 3, 4]
    shapes = [base[:axis % 3] + [s] + base[axis % 3 + 1:] for s in sizes]
    inputs = {f"x{i}": _t("real", s) for i, s in enumerate(shapes)}
    check(inputs, f"layout.concat{{axis={axis}}}([{', '.join(inputs)}])", exact=True)


@SETTINGS
@given(data=st.data())
def test_slice(data):
    shape = [4, 5, 6]
    axes = data.draw(st.lists(st.integers(0, 2), unique=True, min_size=1))
    begin = [data.draw(st.integers(0, shape[a] - 1)) for a in axes]
    end = [data.draw(st.integers(b + 1, shape[a] + 2)) for a, b in zip(axes, begin, strict=True)]
    check({"x": _t("real", shape)}, f"layout.slice{{axes={axes}, begin={begin}, end={end}}}(x)", exact=True)


@SETTINGS
@given(padding=st.lists(st.integers(0, 2), min_size=4, max_size=4), value=st.booleans())
def test_pad(padding, value):
    if value:
        check({"x": "real[2,3]", "v": "real[]"}, f"layout.pad{{padding={padding}}}(x, v)", exact=True)
    else:
        check({"x": "real[2,3]"}, f"layout.pad{{padding={padding}}}(x)", exact=True)


@SETTINGS
@given(repeats=st.lists(st.integers(1, 3), min_size=2, max_size=2))
def test_tile(repeats):
    check({"x": "real[2,3,4]"}, f"layout.tile{{axes=[0, -1], repeats={repeats}}}(x)", exact=True)


# -- linear algebra, convolution, pooling --------------------------------------------------------


@SETTINGS
@given(ta=st.booleans(), tb=st.booleans(), batch=st.sampled_from([([], []), ([2], []), ([2, 1], [3]), ([1], [2]), ([2, 3], []), ([], [2, 3]), ([2, 3], [3]),
                                                                   ([1, 1], [2, 3]), ([2, 3], [2, 3]), ([3], [1]), ([2, 1, 4], [1, 3, 4]),
                                                                   ([3, 2, 1], [2, 4])]),
       bias=st.booleans())
def test_matmul(ta, tb, batch, bias):
    a = [*batch[0], *([4, 3] if ta else [3, 4])]
    b = [*batch[1], *([5, 4] if tb else [4, 5])]
    inputs = {"a": _t("real", a), "b": _t("real", b)}
    if bias:
        inputs["c"] = "real[3,5]"
    args = "a, b, c" if bias else "a, b"
    check(inputs, f"linalg.matmul{{transA={str(ta).lower()}, transB={str(tb).lower()}}}({args})")


def test_linear():
    check({"x": "real[3,6]", "w": "real[4,6]", "b": "real[4]"}, "nn.linear(x, w, b)")
    check({"x": "real[3,6]", "w": "real[4,6]"}, "nn.linear(x, w)")


@st.composite
def conv_case(draw):
    stride = draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    dilation = draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
    k = draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    size = [draw(st.integers((kk - 1) * d + 1, 9)) for kk, d in zip(k, dilation, strict=True)]
    padding = draw(st.one_of(st.none(), st.lists(st.integers(0, 2), min_size=4, max_size=4)))
    return stride, dilation, k, size, padding, draw(st.sampled_from(["UPPER", "LOWER"])), draw(st.booleans())


@SETTINGS
@given(case=conv_case(), depthwise=st.booleans(), bias=st.booleans())
def test_conv(case, depthwise, bias):
    stride, dilation, k, size, padding, align, ceil = case
    c, n = (3, 6) if depthwise else (3, 4)
    attrs = f"stride={stride}, dilation={dilation}, padding_align='{align}', ceil_mode={str(ceil).lower()}"
    if padding is not None:
        attrs += f", padding={padding}"
    if depthwise:
        attrs += ", groups=0"
    inputs = {"x": _t("real", [2, c, *size]), "w": _t("real", [n, 1 if depthwise else c, *k])}
    if bias:
        inputs["b"] = f"real[{n}]"
    expr = f"nn.conv{{{attrs}}}({', '.join(inputs)})"
    sg = check(inputs, expr)
    if not any(o.name == ("DEPTHWISE_CONV2D" if depthwise else "CONV2D") for o in sg.ops):
        # Only allowed when every window lies wholly in the padding: then @lower's output cannot depend on x.
        _, op = _compose(inputs, expr)
        rng = np.random.default_rng(1)
        args = [_random(t, rng) if t is not None else None for t in op.inputs]
        (a,) = run_lowering(op.definition, op.binding, args)
        (b,) = run_lowering(op.definition, op.binding, [args[0] * 3 + 1, *args[1:]])
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("pool", ["max_pool", "avg_pool"])
@SETTINGS
@given(case=conv_case(), ignore_border=st.booleans())
def test_pool(pool, case, ignore_border):
    stride, _, k, size, padding, align, ceil = case
    attrs = f"size={k}, stride={stride}, padding_align='{align}', ceil_mode={str(ceil).lower()}"
    if padding is not None:
        attrs += f", padding={padding}"
    if pool == "avg_pool":
        attrs += f", ignore_border={str(ignore_border).lower()}"
    try:
        graph, op = _compose({"x": _t("real", [2, 3, *size])}, f"nn.{pool}{{{attrs}}}(x)")
    except DiagnosticError:
        reject()
    sg, reason = legalize(op)
    if sg is None:  # avg_pool with pad >= kernel and ignore_border, or windows wholly in the padding
        assert (pool == "avg_pool" and "pad < kernel" in reason) or "wholly in the padding" in reason
        return
    check({"x": _t("real", [2, 3, *size])}, f"nn.{pool}{{{attrs}}}(x)", exact=pool == "max_pool")


# -- fallbacks and coverage ----------------------------------------------------------------------


@pytest.mark.parametrize("inputs, expr, reason", [
    ({"x": "real[2,6,6,6]"}, "nn.max_pool{axes=[1,2,3], size=[7,7,7], padding=[3,3,3,3,3,3]}(x)", "strided SLICEs"),
    ({"x": "real[6,6]"}, "layout.pad{padding=[6,1], axes=[0], method='REFLECT'}(x)", "reflects only once"),
    ({"x": "int[6]", "y": "int[6]"}, "math.add(x, y)", "could wrap in int32"),  # inputs: unbounded
    ({"x": "real[2,3]"}, "quant.min_max_linear_quantize{min=[-1.0,-1.0,-1.0], max=[2.0,2.0,2.0], bits=8}(x)",
     "not a power of two"),
    ({"x": "real[6]"}, "layout.slice{axes=[0], begin=[2], end=[2]}(x)", "empty tensor"),
])
def test_fallback_reason(inputs, expr, reason):
    _, op = _compose(inputs, expr, "int" if "int" in str(inputs) else "real")
    sg, why = legalize(op)
    assert sg is None and reason in why, why


def test_coverage_digits():
    graph = skriptnd.model.load(ROOT / "models" / "digits").compose()
    report = coverage(graph)
    assert [op.op for op, _, _ in report] == [op.op for op in graph.operations]
    assert all(ok for _, ok, _ in report), [(op.op, why) for op, ok, why in report if not ok]


def test_coverage_alexnet():
    graph = skriptnd.model.load(ROOT / "models" / "alexnet").compose()
    report = coverage(graph)
    assert len(report) == len(graph.operations)
    assert all(ok for _, ok, _ in report), [(op.op, why) for op, ok, why in report if not ok]


def test_digits_end_to_end():
    """The whole digits graph run op by op through the legalized subgraphs matches the executor."""
    graph = skriptnd.model.load(ROOT / "models" / "digits").compose(random_weights=True)
    image = np.random.default_rng(3).uniform(0, 1, (1, 1, 8, 8)).astype(np.float32)
    ref = skriptnd.run(graph, {"image": image})["probabilities"]
    values = {graph.inputs[0]: image}
    for op in graph.operations:
        args = []
        for t in op.inputs:
            if t is not None and t not in values:
                values[t] = graph.variable_source(t) if t.kind == "variable" else t.value
            args.append(None if t is None else values[t])
        sg, reason = legalize(op)
        assert sg is not None, reason
        values[op.outputs[0]] = run_subgraph(sg, args)[0]
    np.testing.assert_allclose(values[graph.outputs[0]], ref, rtol=1e-5, atol=1e-6)


def test_table_names_are_stdlib_operators():
    assert all("." in name for name in TABLE)
