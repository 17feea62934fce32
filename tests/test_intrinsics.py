"""Native kernels of the stdlib intrinsics (`skriptnd/execute/intrinsics.py`).

Every kernel is compared with an independent reference written below with plain Python loops
(textbook Keys cubic convolution, Fast R-CNN ROI pooling bin by bin, Python's stable `sorted` for
top-k, a straightforward greedy NMS), on random inputs and several attribute combinations
(hypothesis where shapes vary). Operations are bound through the real binder, so attributes carry
the stdlib defaults and output shapes are checked against the declared ones. The cubic kernels
are also checked against their linear siblings' `@lower` where both must agree (samples landing
exactly on pixels), which pins the shared coordinate conventions. An end-to-end test composes and
runs a model folder through the public API.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.api import find_operator
from skriptnd.compose.ir import Operation
from skriptnd.execute import KERNELS
from skriptnd.lower import run_lowering
from skriptnd.semantics.binding import bind
from skriptnd.semantics.intrinsics import STDLIB_INTRINSICS
from skriptnd.semantics.values import Pack, TensorValue

SUM = {"rtol": 1e-4, "atol": 1e-4}
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = {"real": np.float32, "int": np.int64, "bool": np.bool_}

rng = np.random.default_rng(2024)


# ============================================================================ harness


def _kind(a: np.ndarray) -> str:
    return {"f": "real", "i": "int", "b": "bool"}[a.dtype.kind]


def _attr(v: Any) -> Any:
    return Pack([_attr(x) for x in v]) if isinstance(v, list | tuple) else v


def bound_op(name: str, attrs: dict[str, Any], inputs: list[np.ndarray]) -> Operation:
    """An Operation as the composer makes it: attributes bound (with defaults) by the binder."""
    definition, diags = find_operator(name)
    assert definition is not None, diags
    binding = bind(definition, {k: _attr(v) for k, v in attrs.items()},
                   [TensorValue(_kind(a), a.shape) for a in inputs])
    attribs = {a.name: binding.env.get(a.name) for a in binding.signature.attribs}
    return Operation(op=name, definition=definition, inputs=[], outputs=[], attribs=attribs,
                     dtypes=dict(binding.dtypes), binding=binding)


def call(name: str, attrs: dict[str, Any], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run the registered kernel; check each output's dtype and its shape against the binding
    (static extents exactly, dynamic ones within their upper bounds)."""
    op = bound_op(name, attrs, inputs)
    outs = KERNELS[name](op, list(inputs))
    assert len(outs) == len(op.binding.outputs)
    for out, info in zip(outs, op.binding.outputs, strict=True):
        assert out.dtype == DTYPES[info.dtype], (info.name, out.dtype)
        assert out.ndim == len(info.shape)
        bounds = info.bounds or (None,) * len(info.shape)
        for actual, extent, bound in zip(out.shape, info.shape, bounds, strict=True):
            if extent is None:
                assert bound is None or actual <= bound
            else:
                assert actual == extent, (info.name, out.shape, info.shape)
    return outs


def lowered(name: str, attrs: dict[str, Any], inputs: list[np.ndarray]) -> np.ndarray:
    """A non-intrinsic sibling run through its @lower formulas."""
    definition, diags = find_operator(name)
    assert definition is not None, diags
    binding = bind(definition, {k: _attr(v) for k, v in attrs.items()},
                   [TensorValue(_kind(a), a.shape) for a in inputs])
    (out,) = run_lowering(definition, binding, list(inputs))
    return out


def test_every_stdlib_intrinsic_has_a_kernel() -> None:
    assert STDLIB_INTRINSICS <= set(KERNELS)


# ============================================================================ references: cubic


def keys(t: float, a: float) -> float:
    """Keys (1981) cubic convolution kernel, textbook form."""
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    if t < 2:
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
    return 0.0


def source_coordinate(i: int, extent: int, size: int, transform: str) -> float:
    if transform == "SYMMETRIC":
        return (i + 0.5) * extent / size - 0.5  # half-pixel centres
    if transform == "ASYMMETRIC":
        return i * extent / size
    return 0.0 if size == 1 else i * (extent - 1) / (size - 1)  # corners aligned


def ref_cubic_resize(x: np.ndarray, axes: list[int], sizes: list[int], transform: str,
                     a: float) -> np.ndarray:
    axes = [ax % x.ndim for ax in axes]
    out_shape = list(x.shape)
    for ax, size in zip(axes, sizes, strict=True):
        out_shape[ax] = size
    out = np.zeros(out_shape)
    for idx in np.ndindex(*out_shape):
        taps_per_axis = []
        for ax, size in zip(axes, sizes, strict=True):
            r = source_coordinate(idx[ax], x.shape[ax], size, transform)
            f = math.floor(r)
            clamp = x.shape[ax] - 1  # replicate border, as linear_resize
            taps_per_axis.append([(min(max(f + j, 0), clamp), keys(r - (f + j), a)) for j in (-1, 0, 1, 2)])
        total = 0.0
        for combo in itertools.product(*taps_per_axis):
            src = list(idx)
            w = 1.0
            for ax, (tap, wt) in zip(axes, combo, strict=True):
                src[ax] = tap
                w *= wt
            total += w * float(x[tuple(src)])
        out[idx] = total
    return out


def reflect(i: int, extent: int) -> int:
    """Mirror about the border pixels (`|i <> -i : 2 * (s - 1) - i|`), repeated until in range."""
    if extent == 1:
        return 0
    while not 0 <= i < extent:
        i = -i if i < 0 else 2 * (extent - 1) - i
    return i


def ref_cubic_grid_sample(x: np.ndarray, grid: np.ndarray, padding: str, aligned: bool) -> np.ndarray:
    n, c, *spatial = x.shape
    zs = grid.shape[1:-1]
    d = len(spatial)
    out = np.zeros((n, c, *zs))
    for b in range(n):
        for z in np.ndindex(*zs):
            total = np.zeros(c)
            taps_per_axis = []
            for k in range(d):
                g = (float(grid[(b, *z, d - 1 - k)]) + 1.0) / 2.0  # grid lists (x, y, ...): reversed
                pos = g * (spatial[k] - 1) if aligned else g * spatial[k] - 0.5
                f = math.floor(pos)
                taps_per_axis.append([(f + j, keys(pos - (f + j), -0.75)) for j in (-1, 0, 1, 2)])
            for combo in itertools.product(*taps_per_axis):
                w = math.prod(wt for _, wt in combo)
                src = []
                skip = False
                for k, (tap, _) in enumerate(combo):
                    if padding == "ZEROS":
                        skip = skip or not 0 <= tap < spatial[k]
                        src.append(tap)
                    elif padding == "REPLICATE":
                        src.append(min(max(tap, 0), spatial[k] - 1))
                    else:
                        src.append(reflect(tap, spatial[k]))
                if not skip:
                    total += w * x[(b, slice(None), *src)].astype(np.float64)
            out[(b, slice(None), *z)] = total
    return out


# ============================================================================ cubic resize


@pytest.mark.parametrize("transform", ["SYMMETRIC", "ASYMMETRIC", "ALIGNED"])
@pytest.mark.parametrize("a", [-0.75, -0.5])
def test_cubic_resize_2d(transform: str, a: float) -> None:
    x = rng.uniform(-2, 2, (2, 3, 5, 6)).astype(np.float32)
    for size in ([9, 4], [1, 13], [5, 6]):
        (out,) = call("image.cubic_resize", {"axes": [2, 3], "size": size, "coordinate_transform": transform,
                                             "coeff_a": a}, [x])
        np.testing.assert_allclose(out, ref_cubic_resize(x, [2, 3], size, transform, a), **SUM)


def test_cubic_resize_defaults() -> None:
    """Default axes are all axes; default coefficient -0.75 and SYMMETRIC transform."""
    x = rng.uniform(-2, 2, (4, 3)).astype(np.float32)
    (out,) = call("image.cubic_resize", {"size": [7, 2]}, [x])
    np.testing.assert_allclose(out, ref_cubic_resize(x, [0, 1], [7, 2], "SYMMETRIC", -0.75), **SUM)


@SETTINGS
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data(),
       transform=st.sampled_from(["SYMMETRIC", "ASYMMETRIC", "ALIGNED"]),
       a=st.sampled_from([-0.75, -0.5, -0.6]), antialias=st.booleans())
def test_cubic_resize_random(shape: list[int], data: st.DataObject, transform: str, a: float,
                             antialias: bool) -> None:
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                              unique_by=lambda v: v % len(shape)))
    sizes = data.draw(st.lists(st.integers(1, 8), min_size=len(axes), max_size=len(axes)))
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    (out,) = call("image.cubic_resize", {"axes": axes, "size": sizes, "coordinate_transform": transform,
                                         "coeff_a": a, "antialias": antialias}, [x])
    np.testing.assert_allclose(out, ref_cubic_resize(x, axes, sizes, transform, a), **SUM)


@pytest.mark.parametrize("transform, extent, size", [
    ("ASYMMETRIC", 8, 4), ("ASYMMETRIC", 4, 8), ("SYMMETRIC", 3, 9), ("SYMMETRIC", 9, 3), ("ALIGNED", 5, 9),
    ("ALIGNED", 9, 5), ("ALIGNED", 4, 1)])
def test_cubic_resize_agrees_with_linear_resize_on_pixels(transform: str, extent: int, size: int) -> None:
    """Where the source coordinate is a whole pixel both kernels return that pixel, so the cubic
    kernel must use linear_resize's coordinate transform (its @lower)."""
    x = rng.uniform(-2, 2, (3, extent)).astype(np.float32)
    attrs = {"axes": [1], "size": [size], "coordinate_transform": transform}
    (cubic,) = call("image.cubic_resize", attrs, [x])
    linear = lowered("image.linear_resize", attrs, [x])
    coords = np.array([source_coordinate(i, extent, size, transform) for i in range(size)])
    on_pixel = np.isclose(coords, np.round(coords), atol=1e-9)
    assert on_pixel.any()
    np.testing.assert_allclose(cubic[:, on_pixel], linear[:, on_pixel], rtol=1e-5, atol=1e-5)


def test_cubic_resize_reproduces_constants_and_runs_through_resize() -> None:
    x = np.full((2, 5, 4), 1.25, dtype=np.float32)
    (out,) = call("image.cubic_resize", {"axes": [1, 2], "size": [11, 3]}, [x])
    np.testing.assert_allclose(out, 1.25, rtol=1e-6)


# ============================================================================ cubic grid sample


@pytest.mark.parametrize("padding", ["ZEROS", "REFLECT", "REPLICATE"])
@pytest.mark.parametrize("aligned", [False, True])
def test_cubic_grid_sample_2d(padding: str, aligned: bool) -> None:
    x = rng.uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (2, 3, 4, 2)).astype(np.float32)
    (out,) = call("image._cubic_grid_sample", {"padding": padding, "aligned": aligned}, [x, grid])
    np.testing.assert_allclose(out, ref_cubic_grid_sample(x, grid, padding, aligned), **SUM)


@SETTINGS
@given(d=st.integers(1, 3), data=st.data(), padding=st.sampled_from(["ZEROS", "REFLECT", "REPLICATE"]),
       aligned=st.booleans())
def test_cubic_grid_sample_random(d: int, data: st.DataObject, padding: str, aligned: bool) -> None:
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    spatial = data.draw(st.lists(st.integers(1, 5), min_size=d, max_size=d))
    zs = data.draw(st.lists(st.integers(1, 3), min_size=d, max_size=d))
    x = rng.uniform(-2, 2, (n, c, *spatial)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, (n, *zs, d)).astype(np.float32)
    (out,) = call("image._cubic_grid_sample", {"padding": padding, "aligned": aligned}, [x, grid])
    np.testing.assert_allclose(out, ref_cubic_grid_sample(x, grid, padding, aligned), **SUM)


@pytest.mark.parametrize("padding", ["ZEROS", "REFLECT", "REPLICATE"])
@pytest.mark.parametrize("aligned", [False, True])
def test_cubic_grid_sample_agrees_with_linear_sibling_on_pixels(padding: str, aligned: bool) -> None:
    """At grid points on pixel centres (inside and up to 2 pixels outside) cubic and linear
    sampling both return the (padded) pixel: same axis order, pixel mapping and padding."""
    h, w = 4, 5
    x = rng.uniform(-2, 2, (1, 2, h, w)).astype(np.float32)
    rows, cols = np.meshgrid(np.arange(-2, h + 2), np.arange(-2, w + 2), indexing="ij")

    def to_grid(i: np.ndarray, extent: int) -> np.ndarray:
        return 2.0 * i / (extent - 1) - 1.0 if aligned else 2.0 * (i + 0.5) / extent - 1.0

    grid = np.stack([to_grid(cols, w), to_grid(rows, h)], axis=-1)[None].astype(np.float32)  # (x, y)
    attrs = {"padding": padding, "aligned": aligned}
    (cubic,) = call("image._cubic_grid_sample", attrs, [x, grid])
    linear = lowered("image._linear_grid_sample", attrs, [x, grid])
    np.testing.assert_allclose(cubic, linear, rtol=1e-4, atol=1e-4)


# ============================================================================ ROI pools


def half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def ref_roi_pool(x: np.ndarray, rois: np.ndarray, index: np.ndarray, output_size: list[int],
                 mode: str) -> np.ndarray:
    """Fast R-CNN ROI pooling, bin by bin: rounded corners, inclusive end, floor/ceil bins."""
    _, c, *spatial = x.shape
    d = len(spatial)
    out = np.zeros((len(rois), c, *output_size))
    for r, roi in enumerate(rois):
        begin = [half_away(float(v)) for v in roi[:d]]
        end = [half_away(float(v)) for v in roi[d:]]
        lengths = [max(e - s + 1, 1) for s, e in zip(begin, end, strict=True)]
        for bins in np.ndindex(*output_size):
            window = []
            for k in range(d):
                lo = begin[k] + math.floor(Fraction(bins[k] * lengths[k], output_size[k]))
                hi = begin[k] + math.ceil(Fraction((bins[k] + 1) * lengths[k], output_size[k]))
                window.append(slice(min(max(lo, 0), spatial[k]), min(max(hi, 0), spatial[k])))
            region = x[(int(index[r]), slice(None), *window)].reshape(c, -1).astype(np.float64)
            if region.shape[1] == 0:
                continue  # an empty bin is 0
            out[(r, slice(None), *bins)] = region.max(axis=1) if mode == "max" else region.mean(axis=1)
    return out


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_roi_pool_2d(mode: str) -> None:
    x = rng.uniform(-2, 2, (2, 3, 8, 7)).astype(np.float32)
    rois = np.array([[0, 0, 7, 6], [1.4, 2.5, 5.6, 3.2], [3, 3, 3, 3], [-3, -2, 2, 9],
                     [6, 5, 2, 1], [-5, -5, -2, -1], [2.5, -0.5, 9.5, 6.49]], dtype=np.float32)
    index = np.array([0, 1, 1, 0, 1, 0, 1], dtype=np.int64)
    for output_size in ([2, 3], [3, 3], [1, 1], [5, 4]):
        (out,) = call(f"image.{mode}_roi_pool", {"output_size": output_size}, [x, rois, index])
        np.testing.assert_allclose(out, ref_roi_pool(x, rois, index, output_size, mode), **SUM)


def test_roi_pool_whole_image_equals_adaptive_pooling() -> None:
    """An ROI covering the input with as many bins as pixels is the identity."""
    x = rng.uniform(-2, 2, (1, 2, 5, 6)).astype(np.float32)
    rois = np.array([[0, 0, 4, 5]], dtype=np.float32)
    index = np.zeros(1, np.int64)
    for mode in ("max", "avg"):
        (out,) = call(f"image.{mode}_roi_pool", {"output_size": [5, 6]}, [x, rois, index])
        np.testing.assert_allclose(out[0], x[0], rtol=1e-6)


@SETTINGS
@given(d=st.integers(1, 3), data=st.data(), mode=st.sampled_from(["max", "avg"]))
def test_roi_pool_random(d: int, data: st.DataObject, mode: str) -> None:
    b, c, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(0, 5))
    spatial = data.draw(st.lists(st.integers(1, 9), min_size=d, max_size=d))
    output_size = data.draw(st.lists(st.integers(1, 4), min_size=d, max_size=d))
    x = rng.uniform(-2, 2, (b, c, *spatial)).astype(np.float32)
    hi = np.array(spatial * 2, dtype=np.float64)
    rois = (rng.uniform(-0.3, 1.2, (n, 2 * d)) * hi).astype(np.float32)
    index = rng.integers(0, b, n).astype(np.int64)
    (out,) = call(f"image.{mode}_roi_pool", {"output_size": output_size}, [x, rois, index])
    np.testing.assert_allclose(out, ref_roi_pool(x, rois, index, output_size, mode), **SUM)


def test_roi_pool_rejects_batch_index_out_of_range() -> None:
    x = np.zeros((2, 1, 4, 4), np.float32)
    rois = np.zeros((1, 4), np.float32)
    with pytest.raises(ValueError, match="batch index"):
        call("image.max_roi_pool", {"output_size": [2, 2]}, [x, rois, np.array([2], np.int64)])


# ============================================================================ top_k


def ref_top_k(x: np.ndarray, k: int, axis: int, largest: bool, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    moved = np.moveaxis(x, axis, -1)
    m = moved.shape[-1]
    kk = min(k, m)
    values = np.zeros((*moved.shape[:-1], kk), np.float32)
    indices = np.zeros((*moved.shape[:-1], kk), np.int64)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = [float(v) for v in moved[idx]]
        ranked = sorted(range(m), key=lambda i: -row[i] if largest else row[i])  # stable: low index first
        chosen = ranked[:kk] if sort else sorted(ranked[:kk])
        indices[idx] = chosen
        values[idx] = [row[i] for i in chosen]
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("sort", [True, False])
def test_top_k_fixed(largest: bool, sort: bool) -> None:
    x = rng.integers(-3, 4, (4, 6, 5)).astype(np.float32)  # many ties
    for k, axis in [(3, 1), (1, 0), (5, -1), (9, 2), (6, -2)]:
        values, indices = call("algo.top_k", {"k": k, "axis": axis, "largest": largest, "sorted": sort}, [x])
        ref_values, ref_indices = ref_top_k(x, k, axis, largest, sort)
        np.testing.assert_array_equal(indices, ref_indices)
        np.testing.assert_array_equal(values, ref_values)


def test_top_k_ties_prefer_the_lowest_index() -> None:
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0], np.float32)
    values, indices = call("algo.top_k", {"k": 2}, [x])
    assert indices.tolist() == [1, 2] and values.tolist() == [3.0, 3.0]
    values, indices = call("algo.top_k", {"k": 4, "largest": False, "sorted": False}, [x])
    assert indices.tolist() == [0, 1, 2, 3]  # selection {0, 3, 1, 2} in input order


@SETTINGS
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(), largest=st.booleans(),
       sort=st.booleans(), ties=st.booleans())
def test_top_k_random(shape: list[int], data: st.DataObject, largest: bool, sort: bool, ties: bool) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(1, shape[axis] + 2))
    x = (rng.integers(-2, 3, shape) if ties else rng.standard_normal(shape)).astype(np.float32)
    values, indices = call("algo.top_k", {"k": k, "axis": axis, "largest": largest, "sorted": sort}, [x])
    ref_values, ref_indices = ref_top_k(x, k, axis, largest, sort)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(values, ref_values)


# ============================================================================ nonmax_suppress


def corners(box: list[float], box_format: str) -> tuple[float, float, float, float]:
    if box_format == "CENTER":
        c0, c1, s0, s1 = box
        return c0 - s0 / 2, c1 - s1 / 2, c0 + s0 / 2, c1 + s1 / 2
    a0, a1, b0, b1 = box
    return min(a0, b0), min(a1, b1), max(a0, b0), max(a1, b1)


def iou(p: tuple[float, ...], q: tuple[float, ...]) -> float:
    inter = max(min(p[2], q[2]) - max(p[0], q[0]), 0.0) * max(min(p[3], q[3]) - max(p[1], q[1]), 0.0)
    area_p = max(p[2] - p[0], 0.0) * max(p[3] - p[1], 0.0)
    area_q = max(q[2] - q[0], 0.0) * max(q[3] - q[1], 0.0)
    union = (area_p + area_q) - inter
    return inter / union if union > 0 else 0.0


def ref_nms(boxes: np.ndarray, scores: np.ndarray, box_format: str, max_out: int, iou_threshold: float,
            score_threshold: float | None) -> np.ndarray:
    rows = []
    b, c, n = scores.shape
    for bi in range(b):
        bx = [corners([float(v) for v in boxes[bi, j]], box_format) for j in range(n)]
        for ci in range(c):
            s = [float(v) for v in scores[bi, ci]]
            candidates = sorted(range(n), key=lambda j: -s[j])  # stable: ties by box index
            kept: list[int] = []
            for j in candidates:
                if len(kept) >= max_out:
                    break
                if score_threshold is not None and not s[j] > score_threshold:
                    continue
                if all(iou(bx[i], bx[j]) <= iou_threshold for i in kept):
                    kept.append(j)
            rows += [[bi, ci, j] for j in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def nms_attrs(box_format: str, max_out: int | None, iou_threshold: float,
              score_threshold: float | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"box_format": box_format, "iou_threshold": iou_threshold}
    if max_out is not None:
        attrs["max_outputs_per_class"] = max_out
    if score_threshold is not None:
        attrs["score_threshold"] = score_threshold
    return attrs


def random_boxes(b: int, n: int, box_format: str, integral: bool) -> np.ndarray:
    if integral:  # small integer boxes: exact IoU ties with the thresholds, degenerate boxes
        return rng.integers(0, 6, (b, n, 4)).astype(np.float32)
    if box_format == "CENTER":
        centers, sizes = rng.uniform(0, 10, (b, n, 2)), rng.uniform(0.5, 5, (b, n, 2))
        return np.concatenate([centers, sizes], -1).astype(np.float32)
    return rng.uniform(0, 10, (b, n, 4)).astype(np.float32)


@pytest.mark.parametrize("box_format", ["CORNERS", "CENTER"])
@pytest.mark.parametrize("max_out, iou_threshold, score_threshold", [
    (None, 0.0, None), (None, 0.5, None), (2, 0.3, None), (3, 0.5, 0.4), (0, 0.5, None), (10, 1.0, 0.9)])
def test_nms_fixed(box_format: str, max_out: int | None, iou_threshold: float,
                   score_threshold: float | None) -> None:
    boxes = random_boxes(2, 12, box_format, integral=False)
    scores = rng.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    (out,) = call("algo.nonmax_suppress", nms_attrs(box_format, max_out, iou_threshold, score_threshold),
                  [boxes, scores])
    expected = ref_nms(boxes, scores, box_format, 12 if max_out is None else max_out, iou_threshold,
                       score_threshold)
    np.testing.assert_array_equal(out, expected)


def test_nms_known_case() -> None:
    """Three overlapping boxes and a far one; the default (iou 0.0) suppresses any overlap."""
    boxes = np.array([[[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10.5], [20, 20, 30, 30]]], np.float32)
    scores = np.array([[[0.9, 0.95, 0.8, 0.5]]], np.float32)
    (out,) = call("algo.nonmax_suppress", {}, [boxes, scores])
    assert out.tolist() == [[0, 0, 1], [0, 0, 3]]
    (out,) = call("algo.nonmax_suppress", {"iou_threshold": 0.7}, [boxes, scores])
    assert out.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 3]]  # IoU(1, 0) = 81/119 <= 0.7 < IoU(0, 2)
    (out,) = call("algo.nonmax_suppress", {"iou_threshold": 0.7, "score_threshold": 0.5}, [boxes, scores])
    assert out.tolist() == [[0, 0, 1], [0, 0, 0]]  # a score equal to the threshold is dropped
    (out,) = call("algo.nonmax_suppress", {"iou_threshold": 81 / 119 - 1e-6}, [boxes, scores])
    assert out.tolist() == [[0, 0, 1], [0, 0, 3]]
    (out,) = call("algo.nonmax_suppress", {"iou_threshold": 0.7, "max_outputs_per_class": 1}, [boxes, scores])
    assert out.tolist() == [[0, 0, 1]]


@SETTINGS
@given(b=st.integers(1, 3), c=st.integers(1, 3), n=st.integers(0, 12),
       box_format=st.sampled_from(["CORNERS", "CENTER"]), integral=st.booleans(),
       max_out=st.one_of(st.none(), st.integers(0, 5)), iou_threshold=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
       score_threshold=st.one_of(st.none(), st.sampled_from([0.0, 0.3, 0.5])))
def test_nms_random(b: int, c: int, n: int, box_format: str, integral: bool, max_out: int | None,
                    iou_threshold: float, score_threshold: float | None) -> None:
    boxes = random_boxes(b, n, box_format, integral)
    scores = rng.integers(0, 5, (b, c, n)) / 4.0 if integral else rng.uniform(0, 1, (b, c, n))
    scores = scores.astype(np.float32)
    (out,) = call("algo.nonmax_suppress", nms_attrs(box_format, max_out, iou_threshold, score_threshold),
                  [boxes, scores])
    expected = ref_nms(boxes, scores, box_format, n if max_out is None else max_out, iou_threshold,
                       score_threshold)
    np.testing.assert_array_equal(out, expected)


# ============================================================================ end to end


MODEL = """import algo;
import image;

graph Detect {
    @input {
        x: real[3, 7];
        image: real[2, 2, 6, 5];
        rois: real[4, 4];
        batch: int[4];
        grid: real[2, 3, 4, 2];
        boxes: real[2, 8, 4];
        scores: real[2, 3, 8];
    }
    @output {
        values: real[3, 4];
        indices: int[3, 4];
        capped: int[3, 7];
        resized: real[2, 2, 9, 3];
        pooled: real[4, 2, 2, 3];
        sampled: real[2, 2, 3, 4];
        selected: int[~|2 * 3 * 3, 3];
    }
    @compose {
        values, indices = algo.top_k{k=4, axis=1}(x);
        _, capped = algo.top_k{k=10, axis=-1, largest=false}(x);
        resized = image.resize{axes=[2, 3], size=[9, 3], mode='CUBIC', coordinate_transform='ALIGNED'}(image);
        pooled = image.avg_roi_pool{output_size=[2, 3]}(image, rois, batch);
        sampled = image.grid_sample{mode='CUBIC', padding='REFLECT'}(image, grid);
        selected = algo.nonmax_suppress{max_outputs_per_class=3, iou_threshold=0.5}(boxes, scores);
    }
}
"""


@pytest.mark.parametrize("decompose", [False, True])
def test_end_to_end_through_the_public_api(tmp_path: Path, decompose: bool) -> None:
    """Composed as is, `image.resize`/`grid_sample` stay atomic and the executor expands them to
    the intrinsics; decomposed, the graph holds the intrinsics themselves."""
    (tmp_path / "main.sknd").write_text(MODEL)
    graph = skriptnd.load(tmp_path).compose(decompose=decompose)
    ops = {op.op for op in graph.operations}
    assert {"algo.top_k", "algo.nonmax_suppress", "image.avg_roi_pool"} <= ops
    if decompose:
        assert {"image.cubic_resize", "image._cubic_grid_sample"} <= ops
    inputs = {
        "x": rng.standard_normal((3, 7)).astype(np.float32),
        "image": rng.standard_normal((2, 2, 6, 5)).astype(np.float32),
        "rois": np.array([[0, 0, 5, 4], [1, 1, 3.6, 2], [2, 3, 2, 3], [-2, -1, 1, 1]], np.float32),
        "batch": np.array([0, 1, 1, 0], np.int64),
        "grid": rng.uniform(-1, 1, (2, 3, 4, 2)).astype(np.float32),
        "boxes": random_boxes(2, 8, "CORNERS", integral=False),
        "scores": rng.uniform(0, 1, (2, 3, 8)).astype(np.float32),
    }
    out = skriptnd.run(graph, inputs)
    assert set(out) == {t.name for t in graph.outputs}
    for t in graph.outputs:
        arr = out[t.name]
        assert arr.dtype == DTYPES[t.dtype] and arr.ndim == t.rank, t
        bounds = t.bounds or (None,) * t.rank
        for actual, extent, bound in zip(arr.shape, t.shape, bounds, strict=True):
            if extent is None:  # dynamic: the true extent, within the declared upper bound
                assert bound is None or actual <= bound, (t, arr.shape)
            else:
                assert actual == extent, (t, arr.shape)
    assert graph.tensor("selected").shape == (None, 3) and graph.tensor("selected").bounds == (18, None)
    ref_values, ref_indices = ref_top_k(inputs["x"], 4, 1, True, True)
    np.testing.assert_array_equal(out["values"], ref_values)
    np.testing.assert_array_equal(out["indices"], ref_indices)
    np.testing.assert_array_equal(out["capped"], ref_top_k(inputs["x"], 10, -1, False, True)[1])
    image = inputs["image"]
    resized = ref_cubic_resize(image, [2, 3], [9, 3], "ALIGNED", -0.75)
    np.testing.assert_allclose(out["resized"], resized, **SUM)
    pooled = ref_roi_pool(image, inputs["rois"], inputs["batch"], [2, 3], "avg")
    np.testing.assert_allclose(out["pooled"], pooled, **SUM)
    sampled = ref_cubic_grid_sample(image, inputs["grid"], "REFLECT", False)
    np.testing.assert_allclose(out["sampled"], sampled, **SUM)
    selected = ref_nms(inputs["boxes"], inputs["scores"], "CORNERS", 3, 0.5, None)
    np.testing.assert_array_equal(out["selected"], selected)
