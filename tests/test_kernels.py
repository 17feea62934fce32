"""The fast kernels of skriptnd/execute/kernels.py against the @lower / @compose reference.

Each operation is bound directly (`skriptnd.semantics.binding.bind`) on random shapes and
attributes; the kernel's result must agree with `run_lowering` on the same binding (or, for the
composite batch_norm and avg_pool, with the executor running their @compose graph without the
kernel) to float32 rounding. Cases a kernel does not handle must return NotImplemented.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.api import find_operator
from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.diagnostics import DiagnosticError
from skriptnd.execute import KERNELS, Executor
from skriptnd.execute import kernels as fast
from skriptnd.lower import run_lowering
from skriptnd.semantics.binding import bind
from skriptnd.semantics.values import Pack, TensorValue

RTOL = 1e-4
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _attr(v: Any) -> Any:
    return Pack([_attr(x) for x in v]) if isinstance(v, list | tuple) else v


def _operation(name: str, attribs: dict[str, Any], inputs: list[np.ndarray | None]) -> Operation:
    d, diags = find_operator(name)
    assert d is not None, diags
    binding = bind(d, {k: _attr(v) for k, v in attribs.items()},
                   [None if x is None else TensorValue("real", x.shape) for x in inputs])
    values = [None if x is None else Tensor(f"in{i}", "real", x.shape, kind="input") for i, x in enumerate(inputs)]
    outputs = [Tensor(f"out{i}", info.dtype, tuple(info.shape)) for i, info in enumerate(binding.outputs)]
    bound = {k: v for k, v in binding.env.items() if k in attribs or k in {a.name for a in d.attribs}} \
        if hasattr(d, "attribs") else {}
    return Operation(op=name, definition=d, inputs=values, outputs=outputs,
                     attribs={**bound, **{k: _attr(v) for k, v in attribs.items()}}, binding=binding)


def _reference(op: Operation, inputs: list[np.ndarray | None]) -> np.ndarray:
    return run_lowering(op.definition, op.binding, list(inputs))[0]


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    return repr(v)


def _composite(name: str, attribs: dict[str, Any], inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(kernel result, reference) for a composite operator (batch_norm, avg_pool): a one-operation
    model is composed; the reference runs the operator's @compose graph without any fast kernel."""
    module = name.split(".")[0]
    params = [f"x{i}" for i in range(len(inputs))]
    decls = "\n".join(f"        x{i}: real[{', '.join(map(str, x.shape))}];" for i, x in enumerate(inputs))
    attr = ", ".join(f"{k}={_literal(v)}" for k, v in attribs.items())
    source = (f"import {module};\ngraph G {{\n    @input {{\n{decls}\n    }}\n    @output {{\n        y: real[];\n"
              f"    }}\n    @compose {{\n        y = {name}{{{attr}}}({', '.join(params)});\n    }}\n}}\n")
    shape = ", ".join(map(str, _bound(name, attribs, list(inputs)).outputs[0].shape))
    folder = Path(tempfile.mkdtemp(prefix="sknd_kernels_"))
    try:
        (folder / "main.sknd").write_text(source.replace("y: real[];", f"y: real[{shape}];"))
        graph = skriptnd.load(folder).compose()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    (op,) = graph.operations
    assert op.op == name
    (actual,) = KERNELS[name](op, list(inputs))
    kernels = {k: v for k, v in KERNELS.items() if k not in fast.FAST_KERNELS}
    values = dict(zip(params, inputs, strict=True))
    expected = Executor(graph, kernels=kernels).run(values)["y"]
    return actual, expected


def _bound(name: str, attribs: dict[str, Any], inputs: list[np.ndarray | None]) -> Operation:
    """The bound operation; an attribute combination the definition rejects is not a test case."""
    try:
        return _operation(name, attribs, inputs)
    except DiagnosticError:
        assume(False)
        raise


def _scale(expected: np.ndarray) -> float:
    finite = np.abs(expected[np.isfinite(expected)])
    return max(float(finite.max(initial=0.0)), 1.0)


def _check(name: str, attribs: dict[str, Any], inputs: list[np.ndarray | None]) -> np.ndarray:
    op = _bound(name, attribs, inputs)
    (actual,) = KERNELS[name](op, list(inputs))
    expected = _reference(op, inputs)
    assert actual.shape == expected.shape == tuple(op.outputs[0].shape)
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=RTOL * _scale(expected))
    prepare = getattr(KERNELS[name], "prepare", None)  # the executor plan's specialised kernel
    call = prepare(op, {}) if prepare is not None else None
    if call is not None:
        for _ in range(2):  # twice: its buffers are reused
            (prepared,) = call(list(inputs))
            assert prepared.shape == expected.shape and prepared.dtype == np.float32
            np.testing.assert_allclose(prepared, expected, rtol=RTOL, atol=RTOL * _scale(expected))
    return actual


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------- conv


@st.composite
def conv_cases(draw: Any) -> tuple[dict[str, Any], list[np.ndarray | None]]:
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    d = draw(st.sampled_from([1, 2, 2, 3]))
    groups = draw(st.sampled_from([1, 1, 2, 0]))
    fc = draw(st.integers(1, 3)) if groups != 0 else 1
    g = draw(st.integers(2, 3)) if groups == 0 else groups
    m = draw(st.integers(1, 3)) if groups != 0 else 1
    b = draw(st.integers(1, 2))
    size = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 3)) for _ in range(d)]
    dilation = [draw(st.integers(1, 2)) for _ in range(d)]
    ix = [draw(st.integers(1, 7)) for _ in range(d)]
    attribs: dict[str, Any] = {"stride": stride, "dilation": dilation, "groups": groups}
    if draw(st.booleans()):
        attribs["padding"] = [draw(st.integers(0, 2)) for _ in range(2 * d)]
        pads = [attribs["padding"][i] + attribs["padding"][d + i] for i in range(d)]
    else:
        attribs["padding_align"] = draw(st.sampled_from(["UPPER", "LOWER"]))
        attribs["ceil_mode"] = draw(st.booleans())
        pads = None
    fd = [(f - 1) * dl + 1 for f, dl in zip(size, dilation, strict=True)]
    if pads is not None:
        assume(all(i + p >= f for i, p, f in zip(ix, pads, fd, strict=True)))
    else:
        ix = [max(i, f) for i, f in zip(ix, fd, strict=True)]  # automatic padding may be negative
    data_format = draw(st.sampled_from(["NCX", "NCX", "NXC", "XCN"]))
    filter_format = draw(st.sampled_from(["NCX", "NCX", "NXC", "XCN", "CXN"]))
    attribs |= {"data_format": data_format, "filter_format": filter_format}
    ic, n = fc * g, m * g
    x = {"NCX": [b, ic, *ix], "NXC": [b, *ix, ic], "XCN": [*ix, ic, b]}[data_format]
    w = {"NCX": [n, fc, *size], "NXC": [n, *size, fc], "XCN": [*size, fc, n], "CXN": [fc, *size, n]}[filter_format]
    bias = _rand(rng, n) if draw(st.booleans()) else None
    return attribs, [_rand(rng, *x), _rand(rng, *w), bias]


@SETTINGS
@given(conv_cases())
def test_conv(case: tuple[dict[str, Any], list[np.ndarray | None]]) -> None:
    attribs, inputs = case
    _check("nn.conv", attribs, inputs)


@pytest.mark.parametrize("shape, groups, stride, padding", [
    ((1, 64, 14, 14), 1, 2, [1, 1, 1, 1]),   # ResNet
    ((1, 32, 9, 9), 0, 1, [1, 1, 1, 1]),     # depthwise (MobileNet)
    ((2, 16, 8, 8), 4, 1, [0, 0, 0, 0]),     # grouped 1x1
])
def test_conv_model_cases(shape: tuple[int, ...], groups: int, stride: int, padding: list[int]) -> None:
    rng = np.random.default_rng(0)
    c = shape[1]
    fc = 1 if groups == 0 else c // groups
    size = 3 if padding[0] else 1
    inputs = [_rand(rng, *shape), _rand(rng, 2 * c if groups else c, fc, size, size), None]
    _check("nn.conv", {"groups": groups, "stride": [stride, stride], "padding": padding}, inputs)


def test_prepared_conv_paths_and_fused_relu() -> None:
    """The prepared convolution: im2col into the shared scratch, 1x1 stride-1 as a plain product,
    depthwise, and the relu that skriptnd.execute.optimize fuses (`fused_relu`: True or a max)."""
    from dataclasses import replace

    rng = np.random.default_rng(5)
    scratch: dict[str, Any] = {}
    cases = [((1, 8, 6, 6), 1, 1, 3, [1, 1, 1, 1]), ((2, 8, 5, 5), 1, 1, 1, [0, 0, 0, 0]),
             ((1, 8, 7, 7), 0, 2, 3, [1, 1, 1, 1]), ((1, 8, 6, 6), 2, 2, 3, [0, 1, 0, 1])]
    for shape, groups, stride, size, padding in cases:
        c = shape[1]
        fc = 1 if groups == 0 else c // groups
        inputs = [_rand(rng, *shape), _rand(rng, c, fc, size, size), _rand(rng, c)]
        op = _operation("nn.conv", {"groups": groups, "stride": [stride, stride], "padding": padding}, inputs)
        expected = _reference(op, inputs)
        for fused, ref in ((None, expected), (True, np.maximum(expected, 0)), (0.5, np.clip(expected, 0, 0.5))):
            special = replace(op, attribs={**op.attribs, "fused_relu": fused})
            call = fast.conv.prepare(special, scratch)
            assert call is not None
            (actual,) = call(list(inputs))
            np.testing.assert_allclose(actual, ref, rtol=RTOL, atol=RTOL * _scale(expected))
        assert call([inputs[0].astype(np.float64), *inputs[1:]]) is NotImplemented


# ----------------------------------------------------------------------------- matrix products


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 5), st.booleans(), st.integers(0, 100))
def test_linear(b: int, c: int, n: int, with_bias: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    _check("nn.linear", {}, [_rand(rng, b, c), _rand(rng, n, c), _rand(rng, n) if with_bias else None])


@SETTINGS
@given(st.sampled_from([((), ()), ((2,), (2,)), ((2, 3), (2, 3)), ((1, 1), (3,)), ((2,), ())]),
       st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans(),
       st.booleans(), st.integers(0, 100))
def test_matmul(batch: tuple[tuple[int, ...], tuple[int, ...]], m: int, k: int, n: int, ta: bool, tb: bool,
                with_c: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _rand(rng, *batch[0], *((k, m) if ta else (m, k)))
    b = _rand(rng, *batch[1], *((n, k) if tb else (k, n)))
    c = _rand(rng, m, n) if with_c else None
    _check("linalg.matmul", {"transA": ta, "transB": tb}, [a, b, c])


# ------------------------------------------------------------------------------------- pooling


@st.composite
def pool_cases(draw: Any) -> tuple[dict[str, Any], list[np.ndarray | None]]:
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    rank = draw(st.integers(3, 4))
    shape = [draw(st.integers(1, 7)) for _ in range(rank)]
    axes = draw(st.sampled_from([list(range(2, rank)), [rank - 1], [1, rank - 1], [-1]]))
    k = len(axes)
    size = [draw(st.integers(1, 3)) for _ in range(k)]
    attribs: dict[str, Any] = {"axes": axes, "size": size, "stride": [draw(st.integers(1, 3)) for _ in range(k)],
                               "dilation": [draw(st.integers(1, 2)) for _ in range(k)]}
    fd = [(s - 1) * d + 1 for s, d in zip(size, attribs["dilation"], strict=True)]
    if draw(st.booleans()):
        attribs["padding"] = [draw(st.integers(0, 2)) for _ in range(2 * k)]
        for i, a in enumerate(axes):
            shape[a] = max(shape[a], fd[i] - attribs["padding"][i] - attribs["padding"][k + i])
    else:
        attribs["padding_align"] = draw(st.sampled_from(["UPPER", "LOWER"]))
        attribs["ceil_mode"] = draw(st.booleans())
        for i, a in enumerate(axes):
            shape[a] = max(shape[a], fd[i])
    return attribs, [_rand(rng, *shape)]


@SETTINGS
@given(pool_cases(), st.sampled_from(["nn.max_pool", "nn.sum_pool"]))
def test_pool(case: tuple[dict[str, Any], list[np.ndarray | None]], name: str) -> None:
    _check(name, *case)


@SETTINGS
@given(pool_cases(), st.booleans())
def test_avg_pool(case: tuple[dict[str, Any], list[np.ndarray | None]], ignore_border: bool) -> None:
    attribs, inputs = case
    actual, expected = _composite("nn.avg_pool", {**attribs, "ignore_border": ignore_border}, inputs)
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=RTOL * _scale(expected))


# ---------------------------------------------------------------------------------- elementwise


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.integers(0, 3), st.booleans(), st.integers(0, 100))
def test_batch_norm(shape: list[int], axis: int, affine: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    axis %= len(shape)
    c = shape[axis]
    inputs = [_rand(rng, *shape), _rand(rng, c), np.abs(_rand(rng, c))]
    if affine:
        inputs += [_rand(rng, c), _rand(rng, c)]
    actual, expected = _composite("nn.batch_norm", {"channel_axis": axis, "epsilon": 1e-3}, inputs)
    np.testing.assert_array_equal(actual, expected)  # the same float32 operations in the same order


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.sampled_from([None, 0.0, 0.1, 1.0]),
       st.sampled_from([None, 0.5, 6.0]), st.integers(0, 100))
def test_relu(shape: list[int], alpha: float | None, top: float | None, seed: int) -> None:
    attribs = {k: v for k, v in {"alpha": alpha, "max": top}.items() if v is not None}
    x = _rand(np.random.default_rng(seed), *shape)
    actual = _check("nn.relu", attribs, [x])
    np.testing.assert_array_equal(actual, _reference(_operation("nn.relu", attribs, [x]), [x]))


# ------------------------------------------------------------------------------------ fallbacks


def test_declines_other_shapes_and_dtypes() -> None:
    rng = np.random.default_rng(0)
    x, w = _rand(rng, 1, 2, 5, 5), _rand(rng, 3, 2, 3, 3)
    op = _operation("nn.conv", {"padding": [1, 1, 1, 1]}, [x, w, None])
    assert fast.conv(op, [_rand(rng, 1, 2, 6, 5), w, None]) is NotImplemented  # not the composed shape
    assert fast.conv(op, [x.astype(np.float64), w, None]) is NotImplemented
    relu = _operation("nn.relu", {}, [x])
    assert fast.relu(relu, [x.astype(np.float64)]) is NotImplemented


def test_executor_falls_back_to_the_plan() -> None:
    rng = np.random.default_rng(0)
    x, w = _rand(rng, 1, 2, 5, 5), _rand(rng, 3, 2, 3, 3)
    op = _operation("nn.conv", {"padding": [1, 1, 1, 1]}, [x, w, None])
    graph = Graph("g", inputs=[t for t in op.inputs if t is not None], outputs=op.outputs, operations=[op],
                  tensors=[t for t in op.inputs if t is not None] + op.outputs)
    calls = []

    def declining(o: Operation, args: list[Any]) -> Any:
        calls.append(o)
        return NotImplemented

    out = Executor(graph, kernels={"nn.conv": declining}).run({"in0": x, "in1": w})["out0"]
    assert calls
    np.testing.assert_allclose(out, _reference(op, [x, w, None]), rtol=RTOL, atol=RTOL)
