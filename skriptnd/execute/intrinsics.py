"""Native kernels for the standard library's intrinsics (spec chapter 4).

The six operators below have neither `@lower` nor `@compose` in NNEF 2.0 rev 8
(`skriptnd.semantics.intrinsics.STDLIB_INTRINSICS`), so the executor needs a native kernel for
each. The spec gives their interfaces only; wherever a convention had to be chosen, the kernel's
docstring says which, with the spec line (line numbers refer to the rev 8 markdown) and the
sibling operator whose `@lower` fixes it. Every kernel is vectorised with numpy: the only Python
loops run over resized axes, over kernel taps (4^d for cubic grid sampling), over the offsets
within an ROI bin (max pooling; at most the longest bin's length) and over the candidate ranks of
the (inherently sequential, l. 6783) greedy non-maximum suppression; never over tensor elements.

Kernels return float32 for `real`, int64 for `int` (as the composer's NUMPY_DTYPES) and compute
internally in float64.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation
from skriptnd.execute.executor import RunValue, kernel

__all__ = ["keys_cubic"]

_REAL = np.float32
_INT = np.int64


# ============================================================================ helpers


def keys_cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel W(t) with coefficient `a` (R. Keys, 1981).

    W(t) = (a+2)|t|^3 - (a+3)|t|^2 + 1          for |t| <= 1
         = a|t|^3 - 5a|t|^2 + 8a|t| - 4a        for 1 < |t| < 2
         = 0                                     otherwise
    """
    t = np.abs(np.asarray(t, dtype=np.float64))
    t2 = t * t
    t3 = t2 * t
    near = (a + 2.0) * t3 - (a + 3.0) * t2 + 1.0
    far = a * t3 - 5.0 * a * t2 + 8.0 * a * t - 4.0 * a
    return np.where(t <= 1.0, near, np.where(t < 2.0, far, 0.0))


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """`round` as the spec's built-in (half away from zero; docs/spec-errata.md S5)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _pack(v: RunValue | tuple[np.ndarray, ...]) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else [v]


# ============================================================================ image.cubic_resize


#: The grid-sampling intrinsic has no coefficient attribute; it uses the resize default (l. 6404).
GRID_SAMPLE_CUBIC_A = -0.75


def _resize_matrix(extent: int, size: int, transform: str, a: float) -> np.ndarray:
    """The [size, extent] matrix of one axis of the cubic resize (rows sum to 1)."""
    if transform == "ALIGNED":
        scale = 0.0 if size <= 1 else (extent - 1) / (size - 1)
    else:
        scale = extent / size
    offset = 0.5 * scale - 0.5 if transform == "SYMMETRIC" else 0.0
    r = np.arange(size, dtype=np.float64) * scale + offset
    base = np.floor(r)
    j = np.arange(-1, 3)
    taps = base[:, None].astype(np.int64) + j  # [size, 4]
    weights = keys_cubic(r[:, None] - taps, a)
    matrix = np.zeros((size, extent))
    rows = np.broadcast_to(np.arange(size)[:, None], taps.shape)
    np.add.at(matrix, (rows, np.clip(taps, 0, max(extent - 1, 0))), weights)
    return matrix


@kernel("image.cubic_resize")
def cubic_resize(op: Operation, args: list[Any]) -> list[Any]:
    """Separable cubic-convolution resize along `axes` to `size` (§4.5.2, l. 6399-6431).

    Conventions, shared with `image.linear_resize` (l. 6355-6396), whose `@lower` fixes them:
    - the output sample `i` of an axis maps to the source coordinate `r = i * scale + offset`
      with `scale`/`offset` exactly as `linear_resize`'s `@using` (l. 6381-6383): SYMMETRIC is
      the half-pixel transform `(i + 0.5) * s / size - 0.5`, ASYMMETRIC `i * s / size`,
      ALIGNED `i * (s - 1) / (size - 1)` (0 when `size == 1`);
    - the four taps `floor(r) - 1 .. floor(r) + 2` are weighted with Keys' kernel
      `W(r - tap)` using the attribute `coeff_a` (default -0.75, l. 6404; resize and rescale
      pass `cubic_coeff_a`, also -0.75, l. 6440, 6495);
    - taps outside the axis are clamped to `[0, s - 1]` (replicate border), as `linear_resize`
      does with `|int(floor(r)) + j <> 0 : s[axes] - 1|` (l. 6392).
    - `antialias` is accepted and ignored, as in `linear_resize`, whose `@lower` never reads
      it (l. 6359 vs l. 6388-6393): a cubic downscale does not widen its kernel. (Decision.)
    """
    (x,) = args
    x = np.asarray(x, dtype=np.float64)
    a = float(op.attribs.get("coeff_a", -0.75))
    transform = op.attribs.get("coordinate_transform", "SYMMETRIC")
    axes = _pack(op.attribs.get("axes", list(range(x.ndim))))
    sizes = _pack(op.attribs["size"])
    out = x
    for ax, size in zip(axes, sizes, strict=True):
        ax = _axis(int(ax), x.ndim)
        matrix = _resize_matrix(x.shape[ax], int(size), transform, a)
        out = np.moveaxis(np.tensordot(matrix, out, axes=([1], [ax])), 0, ax)
    return [out.astype(_REAL)]


# ============================================================================ image._cubic_grid_sample


def _pad_index(i: np.ndarray, extent: int, padding: str) -> tuple[np.ndarray, np.ndarray | None]:
    """A tap index made valid for an axis of `extent`; the second result is the validity of
    ZEROS padding (None: every tap is valid)."""
    if padding == "REPLICATE":
        return np.clip(i, 0, extent - 1), None
    if padding == "REFLECT":
        if extent == 1:
            return np.zeros_like(i), None
        period = 2 * (extent - 1)
        m = np.mod(i, period)
        return np.where(m >= extent, period - m, m), None
    valid = (i >= 0) & (i < extent)
    return np.clip(i, 0, max(extent - 1, 0)), valid


@kernel("image._cubic_grid_sample")
def cubic_grid_sample(op: Operation, args: list[Any]) -> list[Any]:
    """Bicubic (d-cubic) sampling of `input[n,c,s..]` at `grid[n,z..,d]` (§4.5.4, l. 6642-6663).

    Conventions, shared with `image._linear_grid_sample` (l. 6607-6639):
    - the grid's last axis lists coordinates in reverse axis order (`di = [d-1:-1:-1]`,
      l. 6621): `grid[..., 0]` addresses the last spatial axis (x), as in PyTorch;
    - `g = (grid + 1) / 2` and `x = aligned ? g * (s - 1) : g * s - 0.5` (l. 6629-6630);
    - the 4^d taps `floor(x) - 1 .. floor(x) + 2` per axis get the product of Keys' weights
      with a = -0.75 (the `_cubic_grid_sample` signature has no coefficient; -0.75 is the
      `cubic_resize`/`resize` default, l. 6404, and PyTorch's bicubic grid_sample. Decision.);
    - padding applies per tap index as in the linear sibling (l. 6633-6635): ZEROS skips a tap
      with any index out of range (`|i|`), REPLICATE clamps (`|i <> 0 : s - 1|`), REFLECT mirrors
      about the border pixels (`|i <> -i : 2 * (s - 1) - i|`). Where one reflection is not enough
      (taps reach 2 pixels beyond the border, so axes of extent < 3) the reflection repeats with
      period 2(s - 1) (index 0 for s == 1), which agrees with the spec's formula wherever that
      formula lands in range. (Decision.)
    """
    x, grid = args
    x = np.asarray(x, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    padding = op.attribs.get("padding", "ZEROS")
    aligned = bool(op.attribs.get("aligned", False))
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    d = len(spatial)
    if 0 in spatial:
        raise ValueError("cannot sample an input with an empty spatial extent")
    zs = grid.shape[1:-1]
    count = int(np.prod(zs, dtype=np.int64))
    points = grid.reshape(n, count, d)[..., ::-1]  # component k addresses spatial axis k
    extents = np.array(spatial, dtype=np.float64)
    g = (points + 1.0) * 0.5
    pos = g * (extents - 1.0) if aligned else g * extents - 0.5  # [n, count, d]
    base = np.floor(pos)
    frac = pos - base
    base = base.astype(np.int64)
    batch = np.arange(n)[:, None]
    out = np.zeros((n, count, c))
    # per-axis weights and padded indices for the 4 taps: [4][n, count, d]
    weights = [keys_cubic(frac - j, GRID_SAMPLE_CUBIC_A) for j in range(-1, 3)]
    indices: list[list[tuple[np.ndarray, np.ndarray | None]]] = [
        [_pad_index(base[..., k] + j, spatial[k], padding) for k in range(d)] for j in range(-1, 3)]
    for taps in itertools.product(range(4), repeat=d):  # 4^d kernel taps, not tensor elements
        w = np.ones((n, count))
        inside = np.ones((n, count), dtype=bool)
        where = []
        for k, t in enumerate(taps):
            w = w * weights[t][..., k]
            index, valid = indices[t][k]
            if valid is not None:
                inside &= valid
            where.append(index)
        values = x[(batch, slice(None), *where)]  # [n, count, c]
        out += np.where(inside[..., None], w[..., None] * values, 0.0)  # ZEROS skips the tap
    return [np.moveaxis(out, 2, 1).reshape((n, c, *zs)).astype(_REAL)]


# ============================================================================ image.*_roi_pool


def _reduce_bins(cur: np.ndarray, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, axis: int,
                 mode: str) -> np.ndarray:
    """Reduce `cur[L, c, ..., s, ...]` along `axis` over the bins `[lo[r, p], hi[r, p])` of
    row `rows[r]` (bounds within `[0, s]`); returns `[n, c, ..., P, ...]`, the P bins in place of
    the axis. An empty bin gives an arbitrary value (the caller masks it).

    'avg' sums through prefix sums (two gathers per bin); 'max' runs over the offsets within a
    bin (at most the longest bin's length, like the taps of a pooling window), each step one
    vectorised gather of every bin of every ROI.
    """
    before = (slice(None),) * (axis - 1)
    r = rows[:, None]
    extent = cur.shape[axis]
    if mode == "avg":
        zero = np.zeros_like(np.take(cur, [0], axis=axis))
        prefix = np.concatenate([zero, np.cumsum(cur, axis=axis)], axis=axis)
        result = prefix[(r, *before, hi)] - prefix[(r, *before, lo)]
    else:  # a -inf slot at index `extent` stands for the offsets past a bin's end
        pad = np.full_like(np.take(cur, [0], axis=axis), -np.inf)
        padded = np.concatenate([cur, pad], axis=axis)
        result = padded[(r, *before, np.where(lo < hi, lo, extent))]
        for offset in range(1, int((hi - lo).max(initial=1))):
            at = lo + offset
            np.maximum(result, padded[(r, *before, np.where(at < hi, at, extent))], out=result)
    return np.moveaxis(result, 1, axis)  # the advanced indices [n, P] come first


def _roi_pool(op: Operation, args: list[Any], mode: str) -> np.ndarray:
    x, rois, index = args
    x = np.asarray(x, dtype=np.float64 if mode == "avg" else np.float32)
    rois = np.asarray(rois, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    b, c = x.shape[:2]
    spatial = x.shape[2:]
    d = len(spatial)
    sizes = [int(p) for p in _pack(op.attribs["output_size"])]
    n = rois.shape[0]
    bad = (index < 0) | (index >= b)
    if bad.any():
        raise ValueError(f"ROI batch index out of range [0, {b}): {index[bad][:5].tolist()}")
    start = _round_half_away(rois[:, :d]).astype(np.int64)  # [n, d]
    end = _round_half_away(rois[:, d:]).astype(np.int64)
    length = np.maximum(end - start + 1, 1)
    cur = x
    rows = index
    count = np.ones((n, *sizes), dtype=np.int64)
    for k, (extent, bins) in enumerate(zip(spatial, sizes, strict=True)):
        p = np.arange(bins)
        lo = (p * length[:, k:k + 1]) // bins + start[:, k:k + 1]  # floor(p * e / P), exact
        hi = -((-(p + 1) * length[:, k:k + 1]) // bins) + start[:, k:k + 1]  # ceil((p + 1) * e / P)
        lo = np.clip(lo, 0, extent)
        hi = np.clip(hi, 0, extent)
        cur = _reduce_bins(cur, rows, lo, hi, 2 + k, mode)
        rows = np.arange(n)
        shape = [n] + [1] * d
        shape[1 + k] = bins
        count = count * (hi - lo).reshape(shape)
    count = count[:, None]
    result = cur / np.maximum(count, 1) if mode == "avg" else cur
    return np.where(count == 0, 0.0, result).astype(_REAL)


_ROI_DOC = """
    Conventions (the spec gives the interface only, l. 6534-6568; decisions):
    - `rois[r] = [begin_0, .., begin_{d-1}, end_0, .., end_{d-1}]`, in the input's spatial
      axis order and in input pixel units (no spatial scale attribute). The begins-then-ends
      layout of a `2 * d` pack is the spec's own for paddings (`padding[:d]`/`padding[d:]`,
      l. 5212-5214; `layout.pad`, l. 2546-2547). For 2-d that is (y1, x1, y2, x2).
    - ROI *pooling* as in Fast R-CNN (Caffe, torchvision.ops.roi_pool, ONNX MaxRoiPool), not
      ROI align (no sampling attribute): coordinates are rounded to integers (half away from
      zero, the spec's `round`), the end is inclusive, so an ROI spans
      `e = max(end - begin + 1, 1)` pixels; bin `p` of `P` covers
      `[begin + floor(p * e / P), begin + ceil((p + 1) * e / P))` (computed exactly in
      integers), clipped to the input. An ROI whose end precedes its begin spans the one
      pixel at its begin. `index[r]` selects the batch item (out of range is an error).
"""


@kernel("image.max_roi_pool")
def max_roi_pool(op: Operation, args: list[Any]) -> list[Any]:
    return [_roi_pool(op, args, "max")]


@kernel("image.avg_roi_pool")
def avg_roi_pool(op: Operation, args: list[Any]) -> list[Any]:
    return [_roi_pool(op, args, "avg")]


max_roi_pool.__doc__ = ("Max over each bin of each ROI (§4.5.3, l. 6539-6552).\n" + _ROI_DOC +
                        "    - a bin that lies entirely outside the input (empty after clipping) gives 0.\n")
avg_roi_pool.__doc__ = ("Mean over each bin of each ROI (§4.5.3, l. 6555-6568).\n" + _ROI_DOC +
                        "    - the mean is over the bin's pixels inside the input; an empty bin gives 0.\n")


# ============================================================================ algo.top_k


@kernel("algo.top_k")
def top_k(op: Operation, args: list[Any]) -> list[Any]:
    """The `k` largest (or smallest) items along `axis` and their indices (§4.7, l. 6788-6809).

    - The selected axis has extent `k <? m` (l. 6799-6800): k is clipped to the axis extent.
    - Indices are positions along `axis` (0 .. m-1), int64.
    - Ties: stable, the lower index ranks first (and wins the last places when ties cross the
      k-th position). (Decision.)
    - `sorted=true`: values in descending (`largest`) or ascending order. `sorted=false`: the
      same selection, in ascending index order (the order in the input); the spec leaves that
      order open. (Decision.)
    - NaNs rank after every number in both directions (numpy's sort order). (Decision.)
    """
    (x,) = args
    x = np.asarray(x)
    axis = _axis(int(op.attribs.get("axis", 0)), x.ndim)
    k = min(int(op.attribs["k"]), x.shape[axis])
    largest = bool(op.attribs.get("largest", True))
    key = -x if largest else x
    order = np.argsort(key, axis=axis, kind="stable")
    chosen = np.take(order, np.arange(k), axis=axis)
    if not op.attribs.get("sorted", True):
        chosen = np.sort(chosen, axis=axis)
    values = np.take_along_axis(x, chosen, axis=axis)
    return [values.astype(_REAL), chosen.astype(_INT)]


# ============================================================================ algo.nonmax_suppress


def _box_bounds(boxes: np.ndarray, box_format: str) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners [..., 2] of boxes [..., 4]."""
    if box_format == "CENTER":
        center, half = boxes[..., :2], 0.5 * boxes[..., 2:]
        return center - half, center + half
    a, b = boxes[..., :2], boxes[..., 2:]
    return np.minimum(a, b), np.maximum(a, b)


def _iou(lo: np.ndarray, hi: np.ndarray, lo_all: np.ndarray, hi_all: np.ndarray) -> np.ndarray:
    """IoU of boxes [K, 2] with rows of boxes [K, n, 2] -> [K, n]; 0 where the union is empty."""
    overlap = np.minimum(hi[:, None], hi_all) - np.maximum(lo[:, None], lo_all)
    inter = np.prod(np.clip(overlap, 0.0, None), axis=-1)
    area = np.prod(np.clip(hi - lo, 0.0, None), axis=-1)
    areas = np.prod(np.clip(hi_all - lo_all, 0.0, None), axis=-1)
    union = area[:, None] + areas - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0.0, inter / np.where(union > 0.0, union, 1.0), 0.0)


@kernel("algo.nonmax_suppress")
def nonmax_suppress(op: Operation, args: list[Any]) -> list[Any]:
    """Greedy non-maximum suppression per batch item and class (§4.7, l. 6816-6840).

    Output `indices[k] = [batch, class, box]` (ONNX NonMaxSuppression's selected_indices),
    ordered by batch, then class, then selection order (descending score); the dynamic extent
    is the number selected, at most `b * c * max_outputs_per_class` (l. 6828). Decisions:
    - `box_format` 'CORNERS': `[a0, a1, b0, b1]`, two opposite corners in either order
      (normalised with min/max, as ONNX); 'CENTER': `[center0, center1, size0, size1]`. IoU is
      symmetric in the two axes, so which axis is y and which x does not matter.
    - Candidates are visited by descending score, ties by lower box index. A candidate is kept
      when its score is `> score_threshold` (strict, as ONNX; no threshold when omitted), fewer
      than `max_outputs_per_class` boxes are kept for the class, and its IoU with every kept box
      of the same batch item and class is `<= iou_threshold`, i.e. IoU `> iou_threshold`
      suppresses (ONNX): with the default 0.0 any overlap suppresses, disjoint boxes survive.
    - IoU is 0 when the union has zero area (degenerate boxes never suppress).
    - Classes are independent: a box may be selected for several classes.
    The greedy selection is sequential (l. 6783): the loop runs over candidate ranks, vectorised
    over every (batch, class) pair and over the boxes.
    """
    boxes, scores = args
    boxes = np.asarray(boxes, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    b, n = boxes.shape[:2]
    c = scores.shape[1]
    box_format = op.attribs.get("box_format", "CORNERS")
    max_out = op.attribs.get("max_outputs_per_class")
    max_out = n if max_out is None else int(max_out)
    iou_threshold = float(op.attribs.get("iou_threshold", 0.0))
    score_threshold = op.attribs.get("score_threshold")
    lo, hi = _box_bounds(boxes, box_format)  # [b, n, 2]
    order = np.argsort(-scores, axis=-1, kind="stable")  # [b, c, n]
    ranked = np.take_along_axis(scores, order, axis=-1)
    if score_threshold is None:
        eligible = np.ones_like(ranked, dtype=bool)
    else:
        eligible = ranked > float(score_threshold)
    suppressed = np.zeros((b, c, n), dtype=bool)  # by box index
    selected = np.zeros((b, c, n), dtype=bool)  # by rank
    kept = np.zeros((b, c), dtype=np.int64)
    last = int(eligible.sum(axis=-1).max(initial=0)) if max_out > 0 else 0
    for t in range(last):  # candidate ranks: the sequential part
        box = order[:, :, t]
        hit = np.take_along_axis(suppressed, box[..., None], axis=-1)[..., 0]
        take = eligible[:, :, t] & (kept < max_out) & ~hit
        if not take.any():
            if (kept >= max_out).all():
                break
            continue
        selected[:, :, t] = take
        kept += take
        bi, ci = np.nonzero(take)
        j = box[bi, ci]
        suppressed[bi, ci] |= _iou(lo[bi, j], hi[bi, j], lo[bi], hi[bi]) > iou_threshold
    bi, ci, ti = np.nonzero(selected)
    result = np.stack([bi, ci, order[bi, ci, ti]], axis=-1) if bi.size else np.zeros((0, 3))
    return [result.astype(_INT).reshape(-1, 3)]
