"""NNEF 1.x import of layout, reduction, linear-algebra, normalization, quantization and resampling
operations, against the nnef reference executor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_nnef_import import RNG, _rand, check

import skriptnd


@pytest.mark.parametrize("body", [
    "y = reshape(x, shape = [2, -1]);",
    "y = reshape(x, shape = [0, 12]);",
    "y = reshape(x, shape = [3, 4], axis_start = 1, axis_count = 2);",
    "y = reshape(x, shape = [-1], axis_start = 1);",
    "y = transpose(x, axes = [2, 0, 1]);",
    "y = transpose(x, axes = [1, 0]);",
    "y = squeeze(unsqueeze(x, axes = [0, 3]), axes = [3]);",
    "y = tile(x, repeats = [1, 2, 3]);",
    "y = slice(x, axes = [1, 2], begin = [1, -3], end = [3, 0]);",
    "y = slice(x, axes = [2], begin = [0], end = [4], stride = [2]);",
    "y = slice(x, axes = [0, 2], begin = [-1, 1], end = [2, -1]);",
    "y = pad(x, padding = [(0, 1), (2, 0), (1, 1)]);",
    "y = pad(x, padding = [(0, 0), (2, 1), (1, 2)], value = 1.5);",
    "y = pad(x, padding = [(0, 0), (2, 1), (1, 2)], border = 'reflect');",
    "y = pad(x, padding = [(1, 0), (2, 1), (3, 2)], border = 'replicate');",
    "y = pad(x, padding = [(0, 0), (2, 1), (1, 2)], border = 'reflect-even');",
])
def test_layout(tmp_path: Path, body: str) -> None:
    check(tmp_path, body, {"x": _rand(2, 3, 4)})


def test_split_concat_stack_unstack(tmp_path: Path) -> None:
    check(tmp_path, """
        [a, b, c] = split(x, axis = 2, ratios = [1, 2, 3]);
        d = concat([c, a, b], axis = 2);
        [u, v] = unstack(x, axis = 0);
        s = stack([v, u, v], axis = 1);
        y = add(d, x);
    """, {"x": _rand(2, 3, 6)}, outputs=("y", "s"))


def test_gather_and_cast(tmp_path: Path) -> None:
    idx = np.array([[2, 0], [1, 1]], np.int32)
    check(tmp_path, """
        g = gather(x, i, axis = 1);
        n = cast<integer>(gt(g, 0.0));
        f = cast<scalar>(n);
        y = add(g, f);
    """, {"x": _rand(2, 3, 4), "i": idx}, outputs=("y", "n"))


@pytest.mark.parametrize("op", ["sum_reduce", "mean_reduce", "min_reduce", "max_reduce"])
@pytest.mark.parametrize("axes", [[1], [0, 2]])
def test_reductions(tmp_path: Path, op: str, axes: list[int]) -> None:
    check(tmp_path, f"y = {op}(x, axes = {axes});", {"x": _rand(2, 3, 4)})


def test_sum_reduce_normalize_and_moments(tmp_path: Path) -> None:
    check(tmp_path, "y = sum_reduce(x, axes = [1, 2], normalize = true);\n(m, v) = moments(x, axes = [0, 2]);",
          {"x": _rand(2, 3, 4)}, outputs=("y", "m", "v"))


def test_arg_and_logical_reductions(tmp_path: Path) -> None:
    check(tmp_path, """
        a = argmax_reduce(x, axes = [1]);
        b = argmin_reduce(x, axes = [2]);
        p = gt(x, 0.5);
        c = any_reduce(p, axes = [2]);
        d = all_reduce(lt(x, 2.0), axes = [0, 1]);
        y = copy(x);
    """, {"x": _rand(2, 3, 4)}, outputs=("y", "a", "b", "c", "d"))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(tmp_path: Path, ta: bool, tb: bool) -> None:
    a = _rand(4, 3) if ta else _rand(3, 4)
    b = _rand(5, 4) if tb else _rand(4, 5)
    check(tmp_path, f"y = matmul(a, b, transposeA = {str(ta).lower()}, transposeB = {str(tb).lower()});",
          {"a": a, "b": b})


def test_batched_matmul(tmp_path: Path) -> None:
    check(tmp_path, "y = matmul(a, b);", {"a": _rand(2, 3, 4), "b": _rand(2, 4, 5)})


@pytest.mark.parametrize("bias", ["b", "0.0", "0.5"])
def test_linear(tmp_path: Path, bias: str) -> None:
    check(tmp_path, "w = variable(shape = [5, 4], label = 'w');\nb = variable(shape = [1, 5], label = 'b');\n"
          f"y = linear(x, w, {bias});", {"x": _rand(3, 4)}, {"w": _rand(5, 4), "b": _rand(1, 5)})


def test_batch_normalization(tmp_path: Path) -> None:
    names = ["mean", "var", "offset", "scale"]
    weights = {n: _rand(1, 3) for n in names}
    weights["var"] = np.abs(weights["var"]) + 0.1
    body = "".join(f"{n} = variable(shape = [1, 3], label = '{n}');\n" for n in names)
    check(tmp_path, body + "y = batch_normalization(x, mean, var, offset, scale, epsilon = 1e-3);",
          {"x": _rand(2, 3, 4, 4)}, weights)


@pytest.mark.parametrize("body", [
    "y = l1_normalization(x, axes = [1], bias = 0.5, epsilon = 1e-3);",
    "y = l2_normalization(x, axes = [1, 2], epsilon = 1e-3);",
    "y = local_response_normalization(x, size = [1, 3, 1, 1], alpha = 0.1, beta = 0.75, bias = 2.0);",
    "y = local_response_normalization(x, size = [1, 2, 3, 1], alpha = 0.2, beta = 0.5, bias = 1.0);",
    "y = local_response_normalization(x, size = [1, 4, 1, 1]);",
    "y = l2_normalization(x, axes = [1], bias = 0.25);",
    "y = l1_normalization(x, axes = [1, 3]);",
    "y = local_mean_normalization(x, size = [1, 1, 3, 3]);",
    "y = local_variance_normalization(x, size = [1, 1, 3, 3], bias = 1.0, epsilon = 1e-3);",
    "y = local_contrast_normalization(x, size = [1, 1, 3, 3], bias = 1.0, epsilon = 1e-3);",
])
def test_normalizations(tmp_path: Path, body: str) -> None:
    check(tmp_path, body, {"x": _rand(2, 3, 5, 5)})


@pytest.mark.parametrize("body", [
    "y = linear_quantize(x, -1.0, 1.5, bits = 4);",
    "y = min_max_linear_quantize(x, -1.0, 1.5, bits = 8, signed = true, symmetric = true);",
    "y = min_max_linear_quantize(x, -2.0, 1.0, bits = 5, signed = false, symmetric = false);",
    "y = zero_point_linear_quantize(x, 3, 0.05, bits = 8, signed = true, symmetric = false);",
    "y = zero_point_linear_quantize(x, 0, 0.1, bits = 4, signed = false, symmetric = false);",
    "y = logarithmic_quantize(x, 4.0, bits = 3);",
])
def test_quantize(tmp_path: Path, body: str) -> None:
    check(tmp_path, body, {"x": _rand(2, 3, 4) * 2})


@pytest.mark.parametrize("body", [
    "y = nearest_upsample(x, factor = [2, 3]);",
    "y = nearest_downsample(x, factor = [2, 1]);",
    "y = area_downsample(x, factor = [2, 2]);",
    "y = multilinear_upsample(x, factor = [2, 2]);",
    "y = multilinear_upsample(x, factor = [2, 2], method = 'asymmetric');",
    "y = multilinear_upsample(x, factor = [2, 2], border = 'constant');",
])
def test_resampling(tmp_path: Path, body: str) -> None:
    check(tmp_path, body, {"x": _rand(1, 2, 4, 6)})


def test_separable_conv(tmp_path: Path) -> None:
    check(tmp_path, """
        p = variable(shape = [3, 1, 3, 3], label = 'plane');
        q = variable(shape = [4, 3, 1, 1], label = 'point');
        b = variable(shape = [1, 4], label = 'bias');
        y = separable_conv(x, p, q, b, padding = [], stride = [2, 2]);
    """, {"x": _rand(1, 3, 7, 7)}, {"plane": _rand(3, 1, 3, 3), "point": _rand(4, 3, 1, 1), "bias": _rand(1, 4)},
          rtol=1e-4, atol=1e-4)


def test_integer_and_logical_data(tmp_path: Path) -> None:
    check(tmp_path, """
        f = cast<scalar>(i);
        c = gt(f, 0.0);
        s = select(c, i, j);
        t = concat([s, j], axis = 1);
        y = transpose(t, axes = [1, 0]);
        z = and(c, not(c));
    """, {"i": RNG.integers(-3, 4, (3, 4)).astype(np.int32), "j": RNG.integers(-3, 4, (3, 1)).astype(np.int32)},
          outputs=("y", "z"))


def test_float16_weights_are_copied_and_read(tmp_path: Path) -> None:
    # the nnef runtime cannot load 16-bit floats (it aborts), so the oracle here is numpy
    from nnef_oracle import write_graph

    from skriptnd.interop.nnef_import import import_nnef
    w = RNG.standard_normal((3, 4)).astype(np.float16)
    src = write_graph(tmp_path / "m", "graph G( x ) -> ( y )\n{\n  x = external(shape = [2, 4]);\n"
                      "  w = variable(shape = [3, 4], label = 'w');\n  y = linear(x, w);\n}\n", {"w": w})
    out = import_nnef(src, tmp_path / "out")
    assert (out / "main.G.w.dat").read_bytes() == (src / "w.dat").read_bytes()
    x = _rand(2, 4)
    np.testing.assert_allclose(skriptnd.run(skriptnd.load(out).compose(), {"x": x})["y"], x @ w.astype(np.float32).T,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args", ["mean, var, offset, scale", "mean, var, 0.0, 1.0", "mean, var, 0.5, scale",
                                  "m0, v0, 0.25, 2.0", "mean, var, offset, s2"])
def test_batch_normalization_forms(tmp_path: Path, args: str) -> None:
    weights = {"mean": _rand(1, 3), "var": np.abs(_rand(1, 3)) + 0.1, "offset": _rand(1, 3), "scale": _rand(1, 3),
               "s2": _rand(2, 3)}
    body = "".join(f"{n} = variable(shape = {list(w.shape)}, label = '{n}');\n" for n, w in weights.items())
    body += "m0 = constant(shape = [1], value = [0.5]);\nv0 = constant(shape = [1], value = [2.0]);\n"
    body += f"y = batch_normalization(x, {args}, epsilon = 1e-3);"
    out = check(tmp_path, body, {"x": _rand(2, 3, 4, 4)}, weights)
    assert ("nn.batch_norm" in (out / "main.sknd").read_text()) == (args in ("mean, var, offset, scale",
                                                                             "mean, var, 0.0, 1.0"))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(b=st.integers(-5, 4), e=st.integers(-5, 5), s=st.integers(1, 3), axis=st.integers(0, 2),
       pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       border=st.sampled_from(["constant", "reflect", "replicate", "reflect-even"]))
def test_slice_and_pad_property(tmp_path_factory, b, e, s, axis, pads, border) -> None:
    dim = (3, 4, 5)[axis]
    if b < -dim or e < -dim:  # NNEF clamps begin/end above the extent, but refuses them below -extent
        return
    lo = min(max(b + dim if b < 0 else b, 0), dim)
    hi = dim if e == 0 and s == 1 else min(max(e + dim if e < 0 else e, 0), dim)
    if hi <= lo:  # an empty slice: NNEF shape inference refuses it
        return
    if border in ("reflect", "reflect-even") and max(pads) >= dim - (border == "reflect"):
        return  # reflecting further than the tensor is not defined
    tmp = tmp_path_factory.mktemp("slice")
    padding = [(0, 0)] * 3
    padding[axis] = pads
    check(tmp, f"t = slice(x, axes = [{axis}], begin = [{b}], end = [{e}], stride = [{s}]);\n"
          f"y = pad(x, padding = {padding}, border = '{border}');", {"x": _rand(3, 4, 5)}, outputs=("t", "y"))
