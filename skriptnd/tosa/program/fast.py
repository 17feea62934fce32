"""Fast fp32 forms of TOSA operators for compiled programs (skriptnd.tosa.program.build).

The generic kernels (:data:`skriptnd.tosa.ops.OPS`) check every ERROR_IF and compute floats in float64
so that any TOSA type is rounded exactly once. A compiled program has already been checked, knows
which operands are constants and runs fp32 only, so here fp32 operators are plain float32 numpy:

* element-wise ADD/SUB/MUL/MAXIMUM/MINIMUM/CLAMP/... give the same bits as the generic kernels
  (an IEEE float32 operation is what float64-then-round computes, for one operation);
* CONV2D / DEPTHWISE_CONV2D / MATMUL / AVG_POOL2D accumulate in float32 in BLAS order, which TOSA
  allows for fp32 (the result differs from the float64 reference by accumulation rounding only);
  convolution weights are laid out once for one GEMM (im2col over NHWC windows), a following
  CLAMP, SiLU or hardswish can be applied in place (``clamp``: :class:`Clamp`, :class:`Silu`,
  :class:`HardSwish`, with the float32 operations of their unfused forms);
* ERF is vectorised float32 (skriptnd.tosa.program.special) instead of ``math.erf`` per element.

:func:`specialise` returns ``None`` when an operation has no fast form here (then the program
calls the generic kernel).

The forms run inside their program's ``np.errstate(all="ignore")`` (build.Program, exact.Runner):
inf and NaN results are the operators', and a small transformer's ~30 comparisons, sums and RSQRTs each
entering their own errstate cost ~1.2 us apiece (issue 28). What runs on the pool's worker threads, whose
errstate is their own, still sets it there (the transcendental forms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from skriptnd import parallel
from skriptnd.tosa.program import special, winograd

F32 = np.float32
Fn = Callable[..., np.ndarray]

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ABS": np.abs, "CEIL": np.ceil, "FLOOR": np.floor, "NEGATE": np.negative,
}  # EXP, LOG, TANH, SIN, COS, SIGMOID, ERF: _TRANSCENDENTAL
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "ADD": np.add, "SUB": np.subtract, "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
}


class Clamp(NamedTuple):
    """A CLAMP fused into the operator before it, applied in place; ``ignore_nan``: TOSA's
    nan_mode IGNORE (a NaN becomes ``lo``, as SkriptND's relu ``x >? 0`` gives 0), else PROPAGATE."""

    lo: float
    hi: float
    ignore_nan: bool = False

    def apply(self, y: np.ndarray) -> np.ndarray:
        if self.ignore_nan:
            np.fmax(y, F32(self.lo), out=y)
            return np.fmin(y, F32(self.hi), out=y)
        return np.clip(y, F32(self.lo), F32(self.hi), out=y)


class Silu:
    """SiLU, ``y * SIGMOID(y)``, fused into the convolution before it (a SIGMOID whose only user is a
    MUL by its own operand, as ONNX exports of EfficientNet's activations are) and applied in place
    on each output block while it is in cache: the same float32 operations in the same order as
    SIGMOID's fast form then MUL, without the two passes and the tensor in between."""

    ignore_nan = False

    def apply(self, y: np.ndarray) -> np.ndarray:
        if not y.flags.c_contiguous:
            _silu_block(y, np.empty_like(y))
            return y
        flat = y.reshape(-1)
        parts = parallel.worth(y.nbytes, _TRANSCENDENTAL_SPLIT_BYTES)
        parallel.parallel_chunks(flat.size, lambda a, b: _silu_flat(flat[a:b]), parts)
        return y


class HardSwish(NamedTuple):
    """Hardswish, ``y * CLAMP(y * alpha + beta, lo, hi)`` (ONNX HardSwish as imported: MUL, ADD, CLAMP, MUL
    with scalar constants; MobileNetV3's activations), fused into the convolution before it and applied
    in place per output block: the same float32 operations as the four fast forms, in cache."""

    alpha: float
    beta: float
    bounds: Clamp

    ignore_nan = False

    def apply(self, y: np.ndarray) -> np.ndarray:
        if not y.flags.c_contiguous:
            self._block(y, np.empty_like(y))
            return y
        flat = y.reshape(-1)
        parts = parallel.worth(y.nbytes, _ELEMENTWISE_SPLIT_BYTES)
        parallel.parallel_chunks(flat.size, lambda a, b: _blocks(self._block, flat[a:b]), parts)
        return y

    def _block(self, y: np.ndarray, tmp: np.ndarray) -> None:
        np.multiply(y, F32(self.alpha), out=tmp)
        tmp += F32(self.beta)
        self.bounds.apply(tmp)
        y *= tmp


#: what a convolution applies to its output in place
Epilogue = Clamp | Silu | HardSwish

#: elements of a fused activation's blocks: 16 K made np.clip's per-call cost show (hardswish on [1,56,56,72]: 0.53 ms
#: CPU against 0.43 unfused); from 64 K on 0.30-0.37 (min of 30, process time)
_ACTIVATION_BLOCK = 1 << 16


def _blocks(fn: Callable[[np.ndarray, np.ndarray], None], y: np.ndarray) -> None:
    """``fn(block, tmp)`` over cache-sized blocks of the flat ``y``, ``tmp`` a scratch block."""
    k = min(_ACTIVATION_BLOCK, y.size)
    tmp = np.empty(k, F32)
    for a in range(0, y.size, k):
        b = min(y.size, a + k)
        fn(y[a:b], tmp[:b - a])


def _silu_flat(y: np.ndarray) -> None:
    _blocks(_silu_block, y)


def _silu_block(y: np.ndarray, tmp: np.ndarray) -> None:
    _sigmoid_into(y, tmp)
    y *= tmp


def _is_f32(a: object) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == F32


def specialise(name: str, consts: Sequence[np.ndarray | None], attrs: dict[str, Any],
               clamp: Epilogue | None = None, scratch: dict[str, np.ndarray] | None = None) -> Fn | None:
    """A fast callable taking all operands (constants included, as in the generic kernel) or None.

    ``consts[i]`` is operand ``i``'s plan-time value (None: known only at run time). ``clamp``:
    a CLAMP or SiLU to apply to the result (fused by the program). ``scratch``: buffers shared by the
    callables of one program (they run one at a time), e.g. the im2col columns."""
    known = [c for c in consts if c is not None]
    if any(c.dtype not in (F32, np.int64, np.int32, np.int8, np.bool_) for c in known):
        return None
    zero_points = all(_zero(c) for c in consts[3:])  # fp32 has none (TOSA: ERROR_IF nonzero)
    if name == "CONV2D" and _f32_consts(consts, (1, 2)) and zero_points:
        return _Conv2D(consts[1], consts[2], attrs, clamp, {} if scratch is None else scratch)  # type: ignore[arg-type]
    if name == "DEPTHWISE_CONV2D" and _f32_consts(consts, (1, 2)) and zero_points:
        return _Depthwise(consts[1], consts[2], attrs, clamp)  # type: ignore[arg-type]
    if name == "ADD" and isinstance(clamp, Clamp):  # a residual addition and its relu: one pass per chunk
        return _checked(lambda a, b: _binary(_then(np.add, clamp), a, b))
    if clamp is not None:
        return None
    if name == "MAX_POOL2D" and attrs.get("nan_mode", "PROPAGATE") == "PROPAGATE":
        return _max_pool(attrs)
    if name == "AVG_POOL2D" and all(_zero(c) for c in consts[1:]):
        return _avg_pool(attrs)
    if name == "MATMUL" and all(_zero(c) for c in consts[2:]):
        return _checked(lambda a, b, *zp: parallel.gemm(a, b))
    if name == "CLAMP":
        bounds = Clamp(float(attrs["min_val"]), float(attrs["max_val"]), attrs.get("nan_mode") == "IGNORE")
        return _checked(lambda x: _split_elementwise(bounds.apply, x))
    if name in _TRANSCENDENTAL:
        into = _TRANSCENDENTAL[name]
        return _checked(lambda x: _split_unary(into, x))
    if name in _UNARY and (name != "NEGATE" or all(_zero(c) for c in consts[1:])):
        fn = _UNARY[name]
        return _checked(lambda x, *zp: fn(x))
    if name == "RSQRT":
        return _checked(_rsqrt)
    if name in _REDUCE and (name == "REDUCE_SUM" or attrs.get("nan_mode", "PROPAGATE") == "PROPAGATE"):
        reduce, axis = _REDUCE[name], int(attrs["axis"])
        return _checked(lambda x: reduce(x, axis=axis, keepdims=True))
    if name == "RECIPROCAL":
        return _checked(lambda x: np.divide(F32(1), x))
    if name == "SELECT":
        return _select
    if name in _COMPARE:
        return _comparison(_COMPARE[name])
    if name in _BINARY:
        fn2 = _BINARY[name]
        return _binary_form(fn2)
    if name == "MUL" and (len(consts) < 3 or _zero(consts[2])):
        return _binary_form(np.multiply)
    if name == "RESHAPE":
        if len(consts) > 1 and consts[1] is not None:  # the usual case: the shape is known when planning
            fixed = tuple(int(d) for d in consts[1])
            return lambda x, shape: x.reshape(fixed)  # the method: np.reshape's dispatch costs ~1 us more
        return lambda x, shape: np.reshape(x, tuple(int(d) for d in shape))
    if name == "SLICE" and len(consts) == 3 and consts[1] is not None and consts[2] is not None:
        # a view: no operator of a program writes into its inputs, so the copy can be skipped
        window = tuple(slice(int(a), int(a) + int(n)) for a, n in zip(consts[1], consts[2], strict=True))
        return lambda x, start, size: x[window] if x.ndim == len(window) else NotImplemented
    if name == "TRANSPOSE":
        perms = tuple(int(p) for p in attrs["perms"])
        return lambda x: np.ascontiguousarray(np.transpose(x, perms))
    return None


#: SELECT and comparisons: exact in any order, so the generic kernels' float64 round trip and type checks
#: (ms on GPT-2's [1, 16, 2048] GELU tensors, sknd run --profile) can go
_COMPARE: dict[str, np.ufunc] = {"GREATER": np.greater, "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal}
_SAME_TYPES = (F32, np.int32, np.int16, np.int8, np.bool_)


def _select(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> Any:
    if not (isinstance(c, np.ndarray) and isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            and c.dtype == np.bool_ and a.dtype == b.dtype and a.dtype in _SAME_TYPES
            and c.ndim == a.ndim == b.ndim):
        return NotImplemented  # the generic kernel: its checks and errors
    return np.where(c, a, b)


def _comparison(fn: np.ufunc) -> Fn:
    def run(a: np.ndarray, b: np.ndarray) -> Any:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.dtype in (F32, np.int32) and a.ndim == b.ndim):
            return NotImplemented
        return fn(a, b)  # NaN compares false, as the generic kernel (no warning: the program's errstate)
    return run


def _zero(c: np.ndarray | None) -> bool:
    return c is not None and not np.any(c)


def _f32_consts(consts: Sequence[np.ndarray | None], idx: Sequence[int]) -> bool:
    return all(i < len(consts) and _is_f32(consts[i]) for i in idx)


def _checked(fn: Fn) -> Fn:
    """``fn`` for float32 operands; other types go to the generic kernel (returns NotImplemented)."""

    def run(*args: Any) -> Any:
        if not _is_f32(args[0]):
            return NotImplemented
        return fn(*args)

    return run


def _sum(x: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    """Accumulated in float64 and rounded once, as the generic kernel does: a float32 sum of values
    that cancel can be far off relative to the result."""
    return np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=np.float64).astype(F32)


#: the ufuncs' own reductions (what np.sum / np.max call, without their ~2 us of dispatch a call)
_REDUCE: dict[str, Callable[..., np.ndarray]] = {"REDUCE_SUM": _sum, "REDUCE_MAX": np.maximum.reduce,
                                                 "REDUCE_MIN": np.minimum.reduce}


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.divide(F32(1), np.sqrt(x))


def _sigmoid_into(x: np.ndarray, out: np.ndarray) -> None:
    """1 / (1 + exp(-x)) in float32 into ``out``, with the rounding of each step as written."""
    np.negative(x, out=out)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += F32(1)
    np.divide(F32(1), out, out=out)


def _unary_into(fn: np.ufunc) -> Callable[[np.ndarray, np.ndarray], None]:
    def into(x: np.ndarray, out: np.ndarray) -> None:
        with np.errstate(all="ignore"):  # inf / NaN results are the operator's (e.g. LOG(0) = -inf)
            fn(x, out=out)
    return into


#: Element-wise operators that cost ~10x a memory pass per element (numpy's float32 exp, tanh, log, sin are
#: scalar libm loops on this host; sknd run --profile: EfficientNet-B0's 65 SiLU sigmoids took 40 % of its run),
#: so they split over the worker threads from :data:`_TRANSCENDENTAL_SPLIT_BYTES` on.
_TRANSCENDENTAL: dict[str, Callable[[np.ndarray, np.ndarray], None]] = {
    "SIGMOID": _sigmoid_into, "EXP": _unary_into(np.exp), "LOG": _unary_into(np.log),
    "TANH": _unary_into(np.tanh), "SIN": _unary_into(np.sin), "COS": _unary_into(np.cos),
    # the generic kernel's math.erf per element took ConvNeXt-T's GELUs to 82 % of its run
    "ERF": special.erf_into,
}
_TRANSCENDENTAL_SPLIT_BYTES = 1 << 16


def _split_unary(into: Callable[[np.ndarray, np.ndarray], None], x: np.ndarray) -> np.ndarray:
    """``into(x, out)`` for a new C-ordered ``out``, in flat chunks over threads when ``x`` is large and
    C-contiguous (each element depends only on its own input, so the chunks give the same bits)."""
    y = np.empty_like(x, order="C")
    parts = parallel.worth(y.nbytes, _TRANSCENDENTAL_SPLIT_BYTES) if x.flags.c_contiguous else 1
    if parts == 1:
        into(x, y)
        return y
    src, flat = x.reshape(-1), y.reshape(-1)
    parallel.parallel_chunks(flat.size, lambda a, b: into(src[a:b], flat[a:b]), parts)
    return y


#: from this many output positions (n * oh * ow) a convolution splits into row blocks over threads
#: (measured on ResNet-18 / MobileNetV2 shapes, 2-vCPU EPYC)
_CONV_SPLIT_POSITIONS = 784


def _band_rows(r0: int, r1: int, top: int, stride: int, span: int, height: int) -> tuple[int, int, int, int]:
    """The input rows a band of output rows [r0, r1) reads, for a window ``span`` rows tall (``(k - 1) *
    dilation + 1``) moving by ``stride`` over an input of ``height`` rows padded by ``top``: (p0, p1) the
    padded rows, (x0, x1) the input rows among them."""
    p0, p1 = r0 * stride, (r1 - 1) * stride + span
    return p0, p1, max(0, p0 - top), min(height, p1 - top)


def _fill_band(buf: np.ndarray, x: np.ndarray, x0: int, x1: int, at: int, left: int) -> None:
    """Input rows [x0, x1) of ``x`` (its images already selected) into a zero-padded band buffer from row
    ``at``, column ``left``."""
    if x1 > x0:
        buf[:, at:at + x1 - x0, left:left + x.shape[2], :] = x[:, x0:x1]


class _Conv2D:
    """CONV2D NHWC x OHWI as one GEMM over im2col windows; buffers kept per input shape."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, attrs: dict[str, Any],
                 clamp: Epilogue | None, scratch: dict[str, np.ndarray]) -> None:
        oc, kh, kw, ic = weight.shape
        self.k = (kh, kw)
        # [(kh, kw, ic), oc] as a transposed view: BLAS reads it in place, no copy of the filter
        self.w = weight.reshape(oc, kh * kw * ic).T
        self.scratch = scratch
        self.b = np.broadcast_to(bias, (oc,)).astype(F32)
        self.pad = [int(p) for p in attrs["pad"]]
        self.stride = [int(s) for s in attrs["stride"]]
        self.dilation = [int(d) for d in attrs["dilation"]]
        self.clamp = clamp
        self._shape: tuple[int, ...] | None = None
        # 3x3 stride 1: Winograd F(2x2,3x3) where measured faster (skriptnd/tosa/program/winograd.py)
        self.weight, self.bias = weight, bias
        self.winograd_ok = (False, False)
        self.winograd: winograd.Winograd | None = None

    def _setup(self, shape: tuple[int, ...]) -> None:
        n, ih, iw, ic = shape
        (kh, kw), (t, b, left, r), (sy, sx), (dy, dx) = self.k, self.pad, self.stride, self.dilation
        hp, wp = ih + t + b, iw + left + r
        oh, ow = (hp - (kh - 1) * dy - 1) // sy + 1, (wp - (kw - 1) * dx - 1) // sx + 1
        self.out = (n, oh, ow)
        if (kh, kw, sy, sx, dy, dx) == (3, 3, 1, 1, 1, 1):
            self.winograd_ok = winograd.preferred(ic, self.w.shape[1], n, oh, ow)
        self.pointwise = kh == kw == 1 and not any(self.pad)
        if self.pointwise:
            self.padded = None
        else:
            self.padded = np.zeros((n, hp, wp, ic), F32)
            s = self.padded.strides
            self.windows = as_strided(self.padded, (n, oh, ow, kh, kw, ic),
                                      (s[0], s[1] * sy, s[2] * sx, s[1] * dy, s[2] * dx, s[3]), writeable=False)
        self._shape = shape
        self._plan_parts = 0

    def _columns(self) -> np.ndarray:
        """The im2col buffer, in the program's shared scratch (grown to the largest convolution)."""
        shape = self.windows.shape
        size = int(np.prod(shape))
        buf = self.scratch.get("im2col")
        if buf is None or buf.size < size:
            buf = self.scratch["im2col"] = np.empty(size, F32)
        return buf[:size].reshape(shape)

    def __call__(self, x: np.ndarray, *rest: Any) -> Any:
        if not _is_f32(x) or x.ndim != 4:
            return NotImplemented
        if x.shape != self._shape:
            self._setup(x.shape)
        # on the pool (threads > 1) every part of either form runs on one BLAS thread: the one-thread rule
        if self.winograd_ok[0] and self.winograd_ok[parallel.threads() == 1 and parallel.blas_threads() > 1]:
            if self.winograd is None:
                self.winograd = winograd.Winograd(self.weight, self.bias, self.pad, m=2, clamp=self.clamp,
                                                  scratch=self.scratch)
            if self.winograd.accepts(x):  # finite inputs (a NaN would spread over its tile)
                return self.winograd(x)
        n, oh, ow = self.out
        parts = parallel.worth(n * oh * ow, _CONV_SPLIT_POSITIONS) if n * oh > 1 else 1
        if parts > 1:
            return self._split(x, parts)
        if self.padded is None:
            sy, sx = self.stride
            src = x if sy == sx == 1 else x[:, ::sy, ::sx, :]
            cols = src.reshape(n * oh * ow, -1)
        else:
            t, _, left, _ = self.pad
            self.padded[:, t:t + x.shape[1], left:left + x.shape[2], :] = x
            cols = self._columns()
            np.copyto(cols, self.windows)
            cols = cols.reshape(n * oh * ow, -1)
        y = parallel.gemm(cols, self.w)
        y += self.b
        if self.clamp is not None:
            self.clamp.apply(y)
        return y.reshape(n, oh, ow, -1)

    def _split(self, x: np.ndarray, parts: int) -> np.ndarray:
        """The convolution in blocks of output rows (whole images when the batch has enough), one per
        thread: each copies the input rows its block reads into its own zero-padded buffer, builds
        its im2col rows, runs its GEMM on one BLAS thread, adds the bias and clamps (all in
        parallel; the serial path parallelises only the GEMM)."""
        n, oh, ow = self.out
        if self._plan_parts != parts:
            self._blocks = self._plan(x.shape, parts)
            self._plan_parts = parts
        y = np.empty((n * oh * ow, self.w.shape[1]), F32)
        with parallel.blas_single():
            parallel.parallel_for(len(self._blocks), lambda k: self._block(x, y, k))
        return y.reshape(n, oh, ow, -1)

    def _plan(self, shape: tuple[int, ...], parts: int) -> list[tuple[Any, ...]]:
        n, oh, ow = self.out
        _, ih, iw, ic = shape
        kh, kw = self.k
        (t, _, left, r), (sy, sx), (dy, dx) = self.pad, self.stride, self.dilation
        if n >= parts:
            ranges = [(i0, i1, 0, oh) for i0, i1 in parallel.split(n, parts)]
        else:
            ranges = [(i, i + 1, r0, r1) for i in range(n) for r0, r1 in parallel.split(oh, -(-parts // n))]
        blocks = []
        for k, (i0, i1, r0, r1) in enumerate(ranges):
            p0, p1, x0, x1 = _band_rows(r0, r1, t, sy, (kh - 1) * dy + 1, ih)
            rows = ((i0 * oh + r0) * ow, ((i1 - 1) * oh + r1) * ow)
            if self.padded is None:
                blocks.append((i0, i1, x0, x1, rows, None, None, None))
                continue
            buf = np.zeros((i1 - i0, p1 - p0, iw + left + r, ic), F32)
            s = buf.strides
            windows = as_strided(buf, (i1 - i0, r1 - r0, ow, kh, kw, ic),
                                 (s[0], s[1] * sy, s[2] * sx, s[1] * dy, s[2] * dx, s[3]), writeable=False)
            size = int(np.prod(windows.shape))
            key = f"im2col.{k}"
            cols = self.scratch.get(key)
            if cols is None or cols.size < size:
                cols = self.scratch[key] = np.empty(size, F32)
            blocks.append((i0, i1, x0, x1, rows, buf, windows, x0 + t - p0))
        return blocks

    def _block(self, x: np.ndarray, y: np.ndarray, k: int) -> None:
        i0, i1, x0, x1, (q0, q1), buf, windows, at = self._blocks[k]
        if buf is None:  # 1x1 without padding: the input rows are the GEMM's rows
            sy, sx = self.stride
            src = x[i0:i1, x0:x1:sy, ::sx, :]
            cols = src.reshape(q1 - q0, -1)  # a copy when strided
        else:
            _fill_band(buf, x[i0:i1], x0, x1, at, self.pad[2])
            size = int(np.prod(windows.shape))
            cols = self.scratch[f"im2col.{k}"][:size].reshape(windows.shape)
            np.copyto(cols, windows)
            cols = cols.reshape(q1 - q0, -1)
        out = y[q0:q1]
        np.matmul(cols, self.w, out=out)
        out += self.b
        if self.clamp is not None:
            self.clamp.apply(out)


#: channels from which a strided depthwise convolution reads its windows per channel (an inner loop of C)
#: rather than gathering each tap's columns into rows first: the gather's copy costs more than the longer
#: loop gains there (112x112x96 stride 2: 3.3 against 2.6 ms, 2-vCPU EPYC)
_DEPTHWISE_WIDE = 64
#: the most memory the weights tiled over the output width may take (ConvNeXt-T's largest: 1 MB at 56x56x96
#: 7x7); a wider image keeps the per-channel windows rather than a copy of the weights per output column
_DEPTHWISE_TILED_BYTES = 8 << 20


class _Depthwise:
    """DEPTHWISE_CONV2D NHWC x [KH,KW,C,M] as one ``np.einsum`` over a strided view of the padded input.

    Each output is w[0,0] x[..] + w[0,1] x[..] + ..., taps in order, in float32. numpy's loops are fast only
    over a long contiguous inner dimension; over windows ``[n, oh, ow, kh, kw, c]`` with the weights
    ``[kh, kw, c]`` the inner loop would be C elements long (16 in MobileNetV3's first layers: 3 ms for
    1.8 M multiply-adds, as 18 passes of one multiply or add per tap). So the weights are tiled over the
    output width once, ``[kh, kw, ow*c]``, and the windows are rows of OW*C contiguous floats: with column
    stride 1, the window of tap (ky, kx) at output row y is the span of padded input row y*sy + ky*dy
    starting at column kx*dx, a view; with a column stride S, the columns a tap reads are first gathered
    into one row per tap (``[n, rows, kw, ow*c]``, a copy of kw/S inputs). One einsum then sums over
    (ky, kx) with an inner loop of OW*C: 0.44 ms for that layer (2-vCPU EPYC), 1.0-1.7x the per-channel
    einsum on wider layers. Strided layers of :data:`_DEPTHWISE_WIDE` channels or more, and images so wide
    that the tiled weights would pass :data:`_DEPTHWISE_TILED_BYTES`, keep the per-channel windows. einsum
    holds the GIL, so the work does not split over threads; measured, it beats the taps split over two
    threads on every MobileNet, EfficientNet and ConvNeXt shape."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, attrs: dict[str, Any],
                 clamp: Epilogue | None) -> None:
        kh, kw, c, m = weight.shape
        self.w = weight.astype(F32).reshape(kh, kw, c * m)
        self.m = m
        self.b = np.broadcast_to(bias, (c * m,)).astype(F32)
        self.pad = [int(p) for p in attrs["pad"]]
        self.stride = [int(s) for s in attrs["stride"]]
        self.dilation = [int(d) for d in attrs["dilation"]]
        self.clamp = clamp
        self._shape: tuple[int, ...] | None = None

    def _setup(self, shape: tuple[int, ...]) -> None:
        """The padded input buffer, the tiled weights and, for a column stride, the per-tap row buffer."""
        n, ih, iw, c = shape
        kh, kw, cm = self.w.shape
        (t, b, left, r), (sy, sx), (dy, dx) = self.pad, self.stride, self.dilation
        hp, wp = ih + t + b, iw + left + r
        self.oh, self.ow = (hp - (kh - 1) * dy - 1) // sy + 1, (wp - (kw - 1) * dx - 1) // sx + 1
        span = self.ow * cm
        # the zero-padded input, each channel repeated m times (the channel multiplier): what the windows read
        self.src = src = np.zeros((n, hp, wp, cm), F32)
        tiled = self.w.size * self.ow * 4 <= _DEPTHWISE_TILED_BYTES
        self.wt = np.tile(self.w, (1, 1, self.ow)) if tiled and (sx == 1 or cm < _DEPTHWISE_WIDE) else self.w
        if sx == 1 and tiled:
            self.taps = None
            flat = src.reshape(n, hp, wp * cm)
            s = flat.strides
            self.windows = as_strided(flat, (n, self.oh, kh, kw, span), (s[0], s[1] * sy, s[1] * dy, s[2] * cm * dx, s[2]),
                                      writeable=False)
        elif cm >= _DEPTHWISE_WIDE or not tiled:  # the per-channel windows: an inner loop of cm, no gather
            self.taps = None
            s = src.strides
            self.windows = as_strided(src, (n, self.oh, self.ow, kh, kw, cm),
                                      (s[0], s[1] * sy, s[2] * sx, s[1] * dy, s[2] * dx, s[3]), writeable=False)
        else:
            self.taps = np.empty((n, hp, kw, span), F32)
            s = self.taps.strides
            self.windows = as_strided(self.taps, (n, self.oh, kh, kw, span), (s[0], s[1] * sy, s[1] * dy, s[2], s[3]),
                                      writeable=False)
        self._shape = shape

    def __call__(self, x: np.ndarray, *rest: Any) -> Any:
        if not _is_f32(x) or x.ndim != 4:
            return NotImplemented
        if x.shape != self._shape:
            self._setup(x.shape)
        n, ih, iw, _ = x.shape
        kh, kw, cm = self.w.shape
        t, left = self.pad[0], self.pad[2]
        inner = self.src[:, t:t + ih, left:left + iw, :]
        if self.m == 1:
            inner[...] = x
        else:  # [.., c * m] read as [.., c, m] (a view: the channel axis is contiguous), each channel m times
            inner.reshape(n, ih, iw, -1, self.m)[...] = x[..., None]
        if self.taps is not None:
            sx, dx, ow = self.stride[1], self.dilation[1], self.ow
            rows = self.taps.reshape(n, -1, kw, ow, cm)
            for kx in range(kw):
                np.copyto(rows[:, :, kx], self.src[:, :, kx * dx:kx * dx + (ow - 1) * sx + 1:sx])
        y = np.empty((n, self.oh, self.ow, cm), F32)
        if self.windows.ndim == 6:
            np.einsum("nyxijc,ijc->nyxc", self.windows, self.wt, out=y)
        else:
            np.einsum("nyijs,ijs->nys", self.windows, self.wt, out=y.reshape(n, self.oh, -1))
        y += self.b
        if self.clamp is not None:
            self.clamp.apply(y)
        return y


def _pool_dims(x: np.ndarray, attrs: dict[str, Any]) -> tuple[list[int], list[int], list[int], int, int]:
    kernel = [int(k) for k in attrs["kernel"]]
    stride = [int(s) for s in attrs["stride"]]
    pad = [int(p) for p in attrs["pad"]]
    oh = (x.shape[1] + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (x.shape[2] + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    return kernel, stride, pad, oh, ow


#: from this size (bytes of input for pooling, of output for element-wise operators) they split over
#: threads: a pass over 1 MB of float32 takes ~30-60 us, splitting it saves more than the hand-off
#: (~10-30 us)
_POOL_SPLIT_BYTES = 1 << 20
_ELEMENTWISE_SPLIT_BYTES = 1 << 20


def _split_elementwise(apply: Callable[[np.ndarray], Any], x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` with ``apply`` run in place on it, in flat chunks over threads when large."""
    y = np.empty_like(x, order="C")
    parts = parallel.worth(y.nbytes, _ELEMENTWISE_SPLIT_BYTES)
    if parts == 1:
        np.copyto(y, x)
        apply(y)
        return y
    src, flat = x.reshape(-1), y.reshape(-1)

    def chunk(a: int, b: int) -> None:
        np.copyto(flat[a:b], src[a:b])
        apply(flat[a:b])

    parallel.parallel_chunks(flat.size, chunk, parts)
    return y


def _binary_form(fn: np.ufunc) -> Fn:
    """``fn`` on float32 operands (MUL's shift, a zero, is ignored), through :func:`_binary` when ``a`` is large
    enough to split: one closure, as a small transformer runs ~100 of these on [1, 16, 128] tensors, where
    each wrapper layer's ~1 us counted against numpy's 2 us (issue 28)."""
    def run(a: Any, b: Any, *shift: Any) -> Any:
        if not (isinstance(a, np.ndarray) and a.dtype == F32):
            return NotImplemented
        if a.nbytes < _ELEMENTWISE_SPLIT_BYTES:
            return fn(a, b)
        return _binary(fn, a, b)

    return run


def _binary(fn: Callable[..., np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fn(a, b)``; when both are C-contiguous of one (large) shape, in flat chunks over threads. (Splitting
    broadcasting ones too, e.g. squeeze-excitation scales, was measured slower on the loaded 2-vCPU host,
    as splitting same-shape ones was that day: docs/performance.md, issue 28.)"""
    if (not isinstance(b, np.ndarray) or a.shape != b.shape or b.dtype != a.dtype
            or not (a.flags.c_contiguous and b.flags.c_contiguous)):
        return fn(a, b)
    parts = parallel.worth(a.nbytes, _ELEMENTWISE_SPLIT_BYTES)
    if parts == 1:
        return fn(a, b)
    y = np.empty_like(a)
    fa, fb, fy = a.reshape(-1), b.reshape(-1), y.reshape(-1)
    parallel.parallel_chunks(fy.size, lambda i, j: fn(fa[i:j], fb[i:j], out=fy[i:j]), parts)
    return y


def _then(fn: Callable[..., np.ndarray], clamp: Clamp) -> Callable[..., np.ndarray]:
    """``fn`` (a ufunc, maybe with ``out=``) with ``clamp`` applied in place to what it wrote."""
    def run(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        y = np.asarray(fn(a, b)) if out is None else fn(a, b, out=out)
        clamp.apply(y)
        return y
    return run


def _max_pool(attrs: dict[str, Any]) -> Fn:
    """Separable: the maximum over the kernel's columns, then over its rows (-inf padding never wins,
    TOSA requires pads smaller than the kernel so every window holds an input element). Large
    outputs split into bands of output rows over threads (maxima are exact: same result)."""

    def rows(x: np.ndarray, out: np.ndarray, r0: int, r1: int) -> None:
        (kh, kw), (sy, sx), (t, b, left, r), oh, ow = _pool_dims(x, attrs)
        p0, p1, x0, x1 = _band_rows(r0, r1, t, sy, kh, x.shape[1])
        top, bottom = max(0, t - p0), max(0, p1 - t - x.shape[1])
        band = x[:, x0:x1]
        if any((top, bottom, left, r)):
            band = np.pad(band, [(0, 0), (top, bottom), (left, r), (0, 0)], constant_values=-np.inf)
        cols = band[:, :, 0:(ow - 1) * sx + 1:sx, :]
        for kx in range(1, kw):
            cols = np.maximum(cols, band[:, :, kx:kx + (ow - 1) * sx + 1:sx, :])
        n = r1 - r0
        res = cols[:, 0:(n - 1) * sy + 1:sy]
        for ky in range(1, kh):
            res = np.maximum(res, cols[:, ky:ky + (n - 1) * sy + 1:sy])
        out[:, r0:r1] = res

    def run(x: np.ndarray) -> Any:
        if not _is_f32(x):
            return NotImplemented
        *_, oh, ow = _pool_dims(x, attrs)
        out = np.empty((x.shape[0], oh, ow, x.shape[3]), F32)
        parts = parallel.worth(x.nbytes, _POOL_SPLIT_BYTES) if oh > 1 else 1
        parallel.parallel_chunks(oh, lambda r0, r1: rows(x, out, r0, r1), parts)
        return out

    return run


def _avg_pool(attrs: dict[str, Any]) -> Fn:
    """Sum over the window's taps divided by the count of in-bounds positions (TOSA excludes padding)."""
    counts: dict[tuple[int, ...], np.ndarray] = {}

    def run(x: np.ndarray, *zp: Any) -> Any:
        if not _is_f32(x):
            return NotImplemented
        (kh, kw), (sy, sx), (t, b, left, r), oh, ow = _pool_dims(x, attrs)
        if any((t, b, left, r)):
            x = np.pad(x, [(0, 0), (t, b), (left, r), (0, 0)])
        total = np.zeros((x.shape[0], oh, ow, x.shape[3]), F32)
        for ky in range(kh):
            for kx in range(kw):
                total += x[:, ky:ky + (oh - 1) * sy + 1:sy, kx:kx + (ow - 1) * sx + 1:sx, :]
        count = counts.get(x.shape)
        if count is None:
            ih, iw = x.shape[1] - t - b, x.shape[2] - left - r
            ys = np.arange(oh) * sy - t
            xs = np.arange(ow) * sx - left
            cy = np.minimum(ys + kh, ih) - np.maximum(ys, 0)
            cx = np.minimum(xs + kw, iw) - np.maximum(xs, 0)
            count = counts[x.shape] = (cy[:, None] * cx[None, :]).astype(F32)[None, :, :, None]
        return total / count

    return run
