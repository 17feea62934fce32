"""Fast native kernels for the hot standard-library operators (nn.conv, nn.linear, linalg.matmul,
nn.max_pool, nn.sum_pool, nn.avg_pool, nn.batch_norm, nn.relu).

These operators have exact reference semantics in their `@lower` (or `@compose`) definitions in
`stdlib/nn.sknd` and `stdlib/linalg.sknd`, which the executor can always run through a compiled
plan. The kernels below compute the same values with a few large numpy / BLAS calls:

* `nn.conv`: im2col on a zero-filled copy of the input (the definition's bounded index
  `|stride * i + dilation * j - offset|` skips out-of-range taps, which is what zeros do), then
  one `np.matmul` with the groups as the batch axis (one GEMM per group); depthwise convolutions
  (one input channel per group, one output channel per group) are a loop of fused multiply-adds
  over the filter taps. `offset`, `ox`, `g` come from the operation's bound `@using` symbols.
* pooling: a loop over the window taps of strided views of a padded copy (-inf for max, 0 for
  sum), any pooled axes; `avg_pool` divides by the count of in-range taps (`ignore_border`) or by
  the window size, as its `@compose`.
* `nn.linear`, `linalg.matmul`: `np.matmul` (batch broadcasting as the definition's: equal batch
  shapes or an all-ones one), plus the bias / C term.
* `nn.batch_norm`: the `@compose` chain (sub, div by sqrt(variance + epsilon), mul, add) in float32
  with the same operation order, so the result is bit-identical; `nn.relu`: min / max.

Inside the executor's plan (`Executor.prepare`) `nn.conv` is specialised once per operation by
`conv.prepare(op, scratch)`: a padded input buffer of its own, the im2col columns in a scratch
buffer the plan's convolutions share, 1x1 stride-1 convolutions as a plain product, depthwise ones
as a per-channel product on the columns, the product written by `np.matmul(..., out=...)`, and the
relu that `skriptnd.execute.optimize` fused into it (`fused_relu`) applied in place. Max pooling
reduces one pooled axis at a time (exact: the window is a box).

The floating-point summation order of the matrix products differs from the reference einsum (so
results agree to float32 rounding, not bit-for-bit); everything else is computed as the
definitions do. A kernel that meets a case it does not handle (another dtype, an argument whose
shape differs from the composed one, e.g. a dynamic extent, negative strides ...) returns
`NotImplemented`, and the executor then runs the operation's `@lower` plan / `@compose` graph.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from skriptnd.compose.ir import Operation
from skriptnd.execute.executor import kernel

__all__ = ["FAST_KERNELS"]

_F32 = np.dtype(np.float32)

#: The operators that have a fast kernel here (qualified names).
FAST_KERNELS = ("nn.conv", "nn.linear", "linalg.matmul", "nn.max_pool", "nn.sum_pool", "nn.avg_pool",
                "nn.batch_norm", "nn.relu")


# ============================================================================ helpers


def _ints(v: object) -> list[int] | None:
    try:
        return [int(x) for x in v]
    except TypeError:
        return None


def _arguments(op: Operation, args: list[Any], count: int) -> list[Any] | None:
    """The `count` arguments (trailing optional ones that were left out as None) when each is a
    float32 array of exactly the composed shape (or None where the composed input is None): then
    the binding's symbols (`offset`, `os` ...) describe them. Otherwise None: the kernel declines."""
    if len(args) > count or len(op.inputs) != len(args):
        return None
    for a, t in zip(args, op.inputs, strict=True):
        if a is None and t is None:
            continue
        if not isinstance(a, np.ndarray) or a.dtype != _F32 or t is None or isinstance(t, list):
            return None
        if a.shape != tuple(t.shape):
            return None
    return list(args) + [None] * (count - len(args))


def _sym(op: Operation, name: str, default: object = None) -> Any:
    """An attribute or `@using` symbol of the bound operation."""
    env = op.binding.env if op.binding is not None else {}
    value = env.get(name)
    if value is None:
        value = op.attribs.get(name)
    return default if value is None else value


def _output_shape(op: Operation) -> tuple[int, ...] | None:
    out = op.outputs[0] if op.outputs else None
    if out is None or isinstance(out, list) or out.shape is None:
        return None
    shape = _ints(out.shape)
    return tuple(shape) if shape is not None else None


def _windowed(x: np.ndarray, axes: list[int], offset: list[int], stride: list[int], fd: list[int],
              out: list[int], fill: float) -> np.ndarray:
    """A copy of `x` along `axes` whose index k is x's index k - offset, covering the indices
    [0, (out - 1) * stride + fd) that the windows read; out-of-range positions hold `fill`."""
    plan = _window_plan(x.shape, axes, offset, stride, fd, out)
    if plan is None:
        return x  # no padding needed: the windows only read x itself
    shape, src, dst = plan
    buf = np.full(shape, fill, dtype=x.dtype)
    buf[dst] = x[src]
    return buf


def _window_plan(xshape: tuple[int, ...], axes: list[int], offset: list[int], stride: list[int], fd: list[int],
                 out: list[int]) -> tuple[list[int], tuple[slice, ...], tuple[slice, ...]] | None:
    """The padded buffer of _windowed: (its shape, the part of x copied, where it goes), None when
    the windows only read x itself."""
    starts = [-o for o in offset]
    ends = [(n - 1) * s + f - o for n, s, f, o in zip(out, stride, fd, offset, strict=True)]
    if all(s == 0 for s in starts) and all(e <= xshape[a] for a, e in zip(axes, ends, strict=True)):
        return None
    ndim = len(xshape)
    shape = list(xshape)
    src: list[slice] = [slice(None)] * ndim
    dst: list[slice] = [slice(None)] * ndim
    for a, s, e in zip(axes, starts, ends, strict=True):
        shape[a] = e - s
        lo, hi = max(s, 0), min(e, xshape[a])
        if hi <= lo:  # every window lies entirely outside the input
            src[a] = slice(0, 0)
            dst[a] = slice(0, 0)
        else:
            src[a] = slice(lo, hi)
            dst[a] = slice(lo - s, hi - s)
    return shape, tuple(src), tuple(dst)


def _tap(buf: np.ndarray, axes: list[int], tap: tuple[int, ...], dilation: list[int], stride: list[int],
         out: list[int]) -> np.ndarray:
    """The strided view of `buf` that tap `tap` of every window reads (output positions on `axes`)."""
    index: list[slice] = [slice(None)] * buf.ndim
    for a, j, d, s, n in zip(axes, tap, dilation, stride, out, strict=True):
        start = j * d
        index[a] = slice(start, start + (n - 1) * s + 1, s)
    return buf[tuple(index)]


# ============================================================================ nn.conv


_DATA_FORMATS = ("NCX", "NXC", "XCN")


def _data_to_ncx(x: np.ndarray, fmt: str) -> np.ndarray:
    r = x.ndim
    if fmt == "NCX":
        return x
    if fmt == "NXC":  # [b, x.., c]
        return x.transpose(0, r - 1, *range(1, r - 1))
    return x.transpose(r - 1, r - 2, *range(r - 2))  # XCN: [x.., c, b]


def _data_from_ncx(y: np.ndarray, fmt: str) -> np.ndarray:
    r = y.ndim
    if fmt == "NCX":
        return y
    if fmt == "NXC":
        return np.ascontiguousarray(y.transpose(0, *range(2, r), 1))
    return np.ascontiguousarray(y.transpose(*range(2, r), 1, 0))


def _filter_to_ncx(w: np.ndarray, fmt: str) -> np.ndarray:
    r = w.ndim
    if fmt == "NCX":
        return w
    if fmt == "NXC":  # [n, x.., c]
        return w.transpose(0, r - 1, *range(1, r - 1))
    if fmt == "XCN":  # [x.., c, n]
        return w.transpose(r - 1, r - 2, *range(r - 2))
    return w.transpose(r - 1, 0, *range(1, r - 1))  # CXN: [c, x.., n]


@kernel("nn.conv")
def conv(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 3)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    x, w, bias = args[0], args[1], args[2]
    data_format, filter_format = _sym(op, "data_format", "NCX"), _sym(op, "filter_format", "NCX")
    stride, dilation = _ints(_sym(op, "stride")), _ints(_sym(op, "dilation"))
    offset, fx, fd, g = _ints(_sym(op, "offset")), _ints(_sym(op, "fx")), _ints(_sym(op, "fd")), _sym(op, "g")
    os_ = _output_shape(op)
    if (data_format not in _DATA_FORMATS or filter_format not in ("NCX", "NXC", "XCN", "CXN") or None in
            (stride, dilation, offset, fx, fd, os_) or not isinstance(g, int) or g <= 0):
        return NotImplemented
    d = x.ndim - 2
    if not (len(stride) == len(dilation) == len(offset) == len(fx) == d) or min(stride) <= 0 or min(dilation) <= 0:
        return NotImplemented
    xn = _data_to_ncx(x, data_format)
    wn = _filter_to_ncx(w, filter_format)
    b, ic = xn.shape[:2]
    n, fc = wn.shape[:2]
    if ic != fc * g or n % g:
        return NotImplemented
    m = n // g
    ox = list(os_[2:]) if data_format == "NCX" else list(os_[1:-1]) if data_format == "NXC" else list(os_[:-2])
    axes = list(range(2, d + 2))
    buf = _windowed(xn, axes, offset, stride, fd, ox, 0.0)
    positions = int(np.prod(ox))
    taps = int(np.prod(fx))
    if fc == 1 and m == 1 and g > 1:  # depthwise: a multiply-add per tap
        wt = wn.reshape(n, taps)
        out = np.zeros((b, n, *ox), dtype=_F32)
        tmp = np.empty_like(out)
        shape = (1, n) + (1,) * d
        for t, tap in enumerate(itertools.product(*(range(f) for f in fx))):
            np.multiply(_tap(buf, axes, tap, dilation, stride, ox), wt[:, t].reshape(shape), out=tmp)
            out += tmp
    else:
        # cols[b, c, taps.., positions..]: a strided view of the padded input, then one copy
        s = buf.strides
        view = as_strided(buf, shape=(b, ic, *fx, *ox),
                          strides=(s[0], s[1], *(s[2 + i] * dilation[i] for i in range(d)),
                                   *(s[2 + i] * stride[i] for i in range(d))), writeable=False)
        cols = view.reshape(b, g, fc * taps, positions)
        out = np.matmul(wn.reshape(g, m, fc * taps), cols).reshape(b, n, *ox)
    if bias is not None:
        out += bias.reshape((1, n) + (1,) * d)
    _fused_relu(op, out)
    return [_data_from_ncx(out, data_format)]


def _prepare_conv(op: Operation, scratch: dict[str, Any]) -> Any:
    """A convolution specialised once for the executor's plan (Executor.prepare): NCX data and filter,
    static shapes. Depthwise convolutions too: one (1 x taps) by (taps x positions) product per
    channel on the im2col columns is several times faster than the generic kernel's tap loop. Its padded input buffer (zero border written once) is its own;
    the im2col columns go to a scratch buffer shared by the plan's convolutions (they run one after
    the other), so they are allocated once, not per run. A 1x1, stride-1, unpadded convolution is a
    plain matrix product of the filter with the input. The product writes straight into the output
    (`np.matmul(..., out=...)`); bias and a fused relu are added in place. None: not specialised
    (the generic kernel runs)."""
    if (op.binding is None or _sym(op, "data_format", "NCX") != "NCX" or _sym(op, "filter_format", "NCX") != "NCX"
            or not op.inputs or len(op.inputs) > 3):
        return None
    x_t, w_t = op.inputs[0], op.inputs[1] if len(op.inputs) > 1 else None
    if x_t is None or w_t is None or isinstance(x_t, list) or isinstance(w_t, list):
        return None
    xs, ws, os_ = _ints(x_t.shape), _ints(w_t.shape), _output_shape(op)
    stride, dilation = _ints(_sym(op, "stride")), _ints(_sym(op, "dilation"))
    offset, fx, fd, g = _ints(_sym(op, "offset")), _ints(_sym(op, "fx")), _ints(_sym(op, "fd")), _sym(op, "g")
    if None in (xs, ws, os_, stride, dilation, offset, fx, fd) or not isinstance(g, int) or g <= 0:
        return None
    d = len(xs) - 2
    if not (d >= 1 and len(ws) == d + 2 and len(stride) == len(dilation) == len(offset) == len(fx) == len(fd) == d):
        return None
    if min(stride) <= 0 or min(dilation) <= 0:
        return None
    b, ic = xs[:2]
    n, fc = ws[:2]
    if ic != fc * g or n % g or os_[:2] != (b, n):
        return None
    m, ox = n // g, list(os_[2:])
    positions, taps = int(np.prod(ox)), int(np.prod(fx))
    k = fc * taps
    axes = list(range(2, d + 2))
    out_shape, bias_shape = (b, n, *ox), (1, n) + (1,) * d
    pointwise = taps == 1 and all(s == 1 for s in stride) and not any(offset) and ox == xs[2:]
    window = _window_plan(xs, axes, offset, stride, fd, ox)
    pad = None
    if window is not None and not pointwise:
        pad = np.zeros(window[0], dtype=_F32)
        pad_view = pad[window[2]]

    def columns(src: np.ndarray) -> np.ndarray:
        st = src.strides
        view = as_strided(src, shape=(b, ic, *fx, *ox),
                          strides=(st[0], st[1], *(st[2 + i] * dilation[i] for i in range(d)),
                                   *(st[2 + i] * stride[i] for i in range(d))), writeable=False)
        size = b * ic * taps * positions
        flat = scratch.get("cols")
        if flat is None or flat.size < size:
            flat = scratch["cols"] = np.empty(size, dtype=_F32)
        cols = flat[:size].reshape(view.shape)
        np.copyto(cols, view)
        return cols.reshape(b, g, k, positions)

    def call(args: list[Any]) -> Any:
        checked = _arguments(op, args, 3)
        if checked is None:
            return NotImplemented
        x, w, bias = checked
        if pointwise:
            cols = x.reshape(b, g, k, positions)
        elif pad is not None:
            np.copyto(pad_view, x[window[1]])
            cols = columns(pad)
        else:
            cols = columns(x)
        out = np.empty(out_shape, dtype=_F32)
        np.matmul(w.reshape(g, m, k), cols, out=out.reshape(b, g, m, positions))
        if bias is not None:
            out += bias.reshape(bias_shape)
        _fused_relu(op, out)
        return [out]

    return call


conv.prepare = _prepare_conv  # type: ignore[attr-defined]


def _fused_relu(op: Operation, out: np.ndarray) -> None:
    """The relu that skriptnd.execute.optimize fused into the operation, in place (`fused_relu`:
    True, or the relu's `max`)."""
    fused = op.attribs.get("fused_relu")
    if fused is None or fused is False:
        return
    np.maximum(out, np.float32(0.0), out=out)
    if fused is not True:
        np.minimum(out, np.float32(fused), out=out)


# ============================================================================ matrix products


@kernel("nn.linear")
def linear(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 3)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    x, w, bias = args
    out = x @ w.T
    if bias is not None:
        out += bias
    return [out]


@kernel("linalg.matmul")
def matmul(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 3)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    a, bmat, c = args
    if a.ndim < 2 or bmat.ndim < 2:
        return NotImplemented
    ea, eb = a.shape[:-2], bmat.shape[:-2]
    dz = max(len(ea), len(eb))
    ea, eb = (1,) * (dz - len(ea)) + ea, (1,) * (dz - len(eb)) + eb
    ones = (1,) * dz
    if not (ea == eb or ea == ones or eb == ones):  # the definition's broadcasting: all or nothing
        return NotImplemented
    if _sym(op, "transA", False):
        a = a.swapaxes(-1, -2)
    if _sym(op, "transB", False):
        bmat = bmat.swapaxes(-1, -2)
    out = np.matmul(a, bmat)
    if c is not None:
        out = out + c
    shape = _output_shape(op)
    if shape is None or out.shape != shape:
        return NotImplemented
    return [out]


# ============================================================================ pooling


def _pool_params(op: Operation, x: np.ndarray) -> tuple[list[int], ...] | None:
    def sym(name: str) -> list[int] | None:
        return _ints(_sym(op, name))

    axes, size, stride, dilation = sym("axes"), sym("size"), sym("stride"), sym("dilation")
    fd, paddings = sym("fd"), sym("paddings")
    shape = _output_shape(op)
    if None in (axes, size, stride, dilation, fd, paddings, shape):
        return None
    k = len(axes)
    if not (len(size) == len(stride) == len(dilation) == len(fd) == k) or min(stride, default=1) <= 0:
        return None
    axes = [a % x.ndim for a in axes]
    if len(set(axes)) != k:
        return None
    offset = sym("offset")
    if offset is None:  # avg_pool has no `offset` symbol: the one of the sum_pool it composes
        padding = sym("padding")
        upper = _sym(op, "padding_align", "UPPER") == "UPPER"
        offset = padding[:k] if padding is not None else [p // 2 if upper else -(-p // 2) for p in paddings]
    out = [shape[a] for a in axes]
    return axes, size, stride, dilation, fd, offset, out


def _tap_reduce(x: np.ndarray, params: tuple[list[int], ...], fill: float, ufunc: np.ufunc) -> np.ndarray:
    axes, size, stride, dilation, fd, offset, out = params
    buf = _windowed(x, axes, offset, stride, fd, out, fill)
    if ufunc is np.maximum and len(axes) > 1:
        # the window is a box: the maximum over it is the maximum over each axis in turn (exact),
        # sum(size) passes instead of prod(size)
        for a, f, dl, st, n in zip(axes, size, dilation, stride, out, strict=True):
            result1: np.ndarray | None = None
            for j in range(f):
                index: list[slice] = [slice(None)] * buf.ndim
                index[a] = slice(j * dl, j * dl + (n - 1) * st + 1, st)
                view = buf[tuple(index)]
                if result1 is None:
                    result1 = view.copy()
                else:
                    ufunc(result1, view, out=result1)
            assert result1 is not None
            buf = result1
        return buf if buf is not x else buf.copy()
    result: np.ndarray | None = None
    for tap in itertools.product(*(range(s) for s in size)):
        view = _tap(buf, axes, tap, dilation, stride, out)
        if result is None:
            result = view.copy()
        else:
            ufunc(result, view, out=result)
    assert result is not None
    return result


@kernel("nn.max_pool")
def max_pool(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 1)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    params = _pool_params(op, args[0])
    if params is None:
        return NotImplemented
    return [_tap_reduce(args[0], params, -np.inf, np.maximum)]


@kernel("nn.sum_pool")
def sum_pool(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 1)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    params = _pool_params(op, args[0])
    if params is None:
        return NotImplemented
    return [_tap_reduce(args[0], params, 0.0, np.add)]


@kernel("nn.avg_pool")
def avg_pool(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 1)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    x = args[0]
    params = _pool_params(op, x)
    if params is None:
        return NotImplemented
    total = _tap_reduce(x, params, 0.0, np.add)
    if _sym(op, "ignore_border", True):
        axes = params[0]
        ones = np.ones([x.shape[a] if a in axes else 1 for a in range(x.ndim)], dtype=_F32)
        count = _tap_reduce(ones, params, 0.0, np.add)
    else:
        count = np.float32(float(np.prod(params[1])))
    with np.errstate(invalid="ignore"):  # a window wholly in the padding: 0 / 0 = NaN, as @lower computes it
        return [np.divide(total, count, dtype=_F32)]


# ============================================================================ elementwise


@kernel("nn.batch_norm")
def batch_norm(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 5)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    x, mean, variance, bias, scale = args
    align = _sym(op, "align")
    if not isinstance(align, int) or not 0 <= align < x.ndim:
        return NotImplemented
    shape = [1] * x.ndim
    shape[align] = x.shape[align]

    def channel(v: np.ndarray) -> np.ndarray:
        return v.reshape(shape)

    epsilon = np.float32(_sym(op, "epsilon", 1e-5))
    std = np.sqrt(variance + epsilon)  # the @compose chain, in the same order and precision
    out = np.subtract(x, channel(mean))
    out /= channel(std)
    if scale is not None:
        out *= channel(scale)
    if bias is not None:
        out += channel(bias)
    return [out]


@kernel("nn.relu")
def relu(op: Operation, args: list[Any]) -> Any:
    args = _arguments(op, args, 1)  # type: ignore[assignment]
    if args is None:
        return NotImplemented
    x = args[0]
    alpha, top = _sym(op, "alpha"), _sym(op, "max")
    y = np.minimum(x, np.float32(top)) if top is not None else x
    if alpha is not None:
        return [np.maximum(y, np.float32(alpha) * x)]
    return [np.maximum(y, np.float32(0.0))]
