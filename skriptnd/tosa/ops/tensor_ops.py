"""Tensor operators (TOSA 1.0 §2.3): MATMUL, CONV2D, DEPTHWISE_CONV2D, AVG_POOL2D, MAX_POOL2D.

Integer operators accumulate exactly in int64 (int8×int8 → int32, int16×int8 → int48) and REQUIRE the
final accumulator to fit ``acc_t`` (the spec checks every partial sum; only the final value is checked
here). Float operators compute in float64 and round once to the output type (the spec allows any
summation order within its error bound). Zero points are TOSA 1.0 ``[1]``-shaped operands; with
``version="0.30"`` they may be plain numbers. Padding is not materialised with the zero point: padded taps
are skipped (equivalently, ``input - input_zp`` is padded with 0). Convolutions follow TOSA 1.0 in
casting the accumulator to ``out_t`` before adding the bias in ``out_t`` (two roundings for fp16 outputs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import check_nan_mode, const_scalar, tensor
from skriptnd.tosa.ops.dtypes import INT_RANGES, round_float
from skriptnd.tosa.ops.errors import check_version, error_if, require
from skriptnd.tosa.ops.quantization import apply_scale_32

__all__ = ["matmul", "conv2d", "depthwise_conv2d", "conv3d", "transpose_conv2d", "avg_pool2d", "max_pool2d"]

_I64 = np.int64

# (input type, weight type) -> allowed (accumulator/output types)
_CONV_ROWS = {
    ("int8", "int8"): ("int32",),
    ("int16", "int8"): ("int48",),
    ("fp16", "fp16"): ("fp16", "fp32"),
    ("bf16", "bf16"): ("fp32",),
    ("fp32", "fp32"): ("fp32",),
}
_ACC_DEFAULT = {"int8": "int32", "int16": "int48", "fp16": "fp16", "bf16": "fp32", "fp32": "fp32"}
_OUT_TYPE = {"int32": "int32", "int48": "int48"}


def _acc_type(op: str, in_t: str, w_t: str, acc_type: str | None) -> str:
    error_if((in_t, w_t) not in _CONV_ROWS, f"unsupported type combination ({in_t}, {w_t})", op)
    acc = _ACC_DEFAULT[in_t] if acc_type is None else str(acc_type).lower()
    error_if(acc not in _CONV_ROWS[(in_t, w_t)], f"acc_type {acc} not allowed for ({in_t}, {w_t})", op)
    return acc


def _out_type(in_t: str, acc: str) -> str:
    """Output type of a convolution/MATMUL: the accumulator for integers, the input type for floats."""
    return _OUT_TYPE.get(acc, in_t)


def _zero_point(x: ArrayLike, op: str, name: str, t: str, version: str) -> int:
    v = const_scalar(x, op, name, t, version)
    if t.startswith("int"):
        lo, hi, _ = INT_RANGES[t]
        error_if(not lo <= v <= hi, f"{name} out of range of {t}", op)
    error_if(t != "int8" and v != 0, f"{name} must be zero for non-int8 types", op)
    return v


def _values(a: np.ndarray, t: str, zp: int) -> np.ndarray:
    if t.startswith("int"):
        return a.astype(_I64) - _I64(zp)
    return a.astype(np.float64)


def _finish(acc: np.ndarray, acc_t: str, out_t: str, op: str) -> np.ndarray:
    if acc_t.startswith("int"):
        lo, hi, _ = INT_RANGES[acc_t]
        require(acc.size == 0 or (int(acc.min()) >= lo and int(acc.max()) <= hi),
                f"accumulator fits {acc_t}", op)
        return acc.astype(np.int64 if acc_t == "int48" else np.int32)
    with np.errstate(all="ignore"):
        return round_float(acc, out_t)


def _ints(v: Sequence[int], n: int, op: str, name: str) -> list[int]:
    v = [int(x) for x in np.asarray(v).reshape(-1)]
    error_if(len(v) != n, f"{name} must have {n} values", op)
    return v


def _out_size(op: str, size: int, pad0: int, pad1: int, extent: int, stride: int, what: str) -> int:
    """``idiv_check(size + pads - extent, stride) + 1`` with the exact-division ERROR_IF."""
    num = size + pad0 + pad1 - extent
    error_if(num < 0, f"{what}: output size < 1", op)
    error_if(num % stride != 0, f"{what}: idiv_check({num}, {stride}) is not exact", op)
    return num // stride + 1


def _windows(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
             pad: Sequence[int], fill: float, op: str) -> np.ndarray:
    """im2col: [N, *spatial, C] → [N, *out, *kernel, C] windows (padded with ``fill``)."""
    nsp = len(kernel)
    pad_width = [(0, 0)] + [(pad[2 * i], pad[2 * i + 1]) for i in range(nsp)] + [(0, 0)]
    xp = np.pad(x, pad_width, constant_values=fill)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilation, strict=True)]
    outs = [_out_size(op, x.shape[1 + i], pad[2 * i], pad[2 * i + 1], extents[i], stride[i], f"dim {i}")
            for i in range(nsp)]
    w = np.lib.stride_tricks.sliding_window_view(xp, extents, axis=tuple(range(1, 1 + nsp)))
    # w: [N, *padded - extent + 1, C, *extents]
    sl = (slice(None),) + tuple(slice(None, o * s, s) for o, s in zip(outs, stride, strict=True)) + (slice(None),)
    sl = sl + tuple(slice(None, None, d) for d in dilation)
    w = w[sl]
    # move C to the end: [N, *out, *kernel, C]
    return np.moveaxis(w, 1 + nsp, -1)


def _check_geometry(op: str, pad: list[int], stride: list[int], dilation: list[int] | None) -> None:
    error_if(any(p < 0 for p in pad), "pad < 0", op)
    error_if(any(s < 1 for s in stride), "stride < 1", op)
    if dilation is not None:
        error_if(any(d < 1 for d in dilation), "dilation < 1", op)


def _bias(b: ArrayLike, op: str, oc: int, acc_t: str, out_t: str) -> np.ndarray:
    bias, bt = tensor(b, op, "bias")
    error_if(bt != out_t, f"bias has type {bt}, expected {out_t}", op)
    error_if(bias.ndim != 1 or bias.shape[0] not in (1, oc), "shape(bias) != [OC] or [1]", op)
    return bias.astype(_I64) if acc_t.startswith("int") else bias.astype(np.float64)


def matmul(a: ArrayLike, b: ArrayLike, a_zp: ArrayLike = 0, b_zp: ArrayLike = 0, *, output_dtype: str | None = None,
           version: str = "1.0") -> np.ndarray:
    """MATMUL: ``[N,H,C] x [N,C,W] -> [N,H,W]``; ``output_dtype`` picks fp16/fp32 for fp16 inputs."""
    op = "MATMUL"
    check_version(version)
    A, at = tensor(a, op, "A")
    B, bt = tensor(b, op, "B")
    error_if(at != bt, "A and B types differ", op)
    acc_t = _acc_type(op, at, "int8" if at == "int16" else bt, output_dtype)
    error_if(at == "int16" and bt != "int16", "B type", op)
    if at == "int16":
        acc_t = "int48"
    error_if(A.ndim != 3 or B.ndim != 3, "rank(A) != 3 || rank(B) != 3", op)
    error_if(A.shape[0] != B.shape[0] or A.shape[2] != B.shape[1], "shape(A) / shape(B) mismatch", op)
    az = _zero_point(a_zp, op, "A_zp", at, version)
    bz = _zero_point(b_zp, op, "B_zp", bt, version)
    acc = np.matmul(_values(A, at, az), _values(B, bt, bz))
    out_t = acc_t if acc_t.startswith("int") else acc_t
    return _finish(acc, acc_t, out_t, op)


def _conv(op: str, input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike, weight_zp: ArrayLike, pad: ArrayLike, stride: ArrayLike,
          dilation: ArrayLike, acc_type: str | None, version: str, depthwise: bool, nsp: int = 2) -> np.ndarray:
    check_version(version)
    x, it = tensor(input, op, "input")
    w, wt = tensor(weight, op, "weight")
    acc_t = _acc_type(op, it, wt, acc_type)
    out_t = _out_type(it, acc_t)
    error_if(x.ndim != nsp + 2 or w.ndim != nsp + 2, f"rank(input) != {nsp + 2} || rank(weight) != {nsp + 2}", op)
    pad = _ints(pad, 2 * nsp, op, "pad")
    stride, dilation = _ints(stride, nsp, op, "stride"), _ints(dilation, nsp, op, "dilation")
    _check_geometry(op, pad, stride, dilation)
    iz = _zero_point(input_zp, op, "input_zp", it, version)
    wz = _zero_point(weight_zp, op, "weight_zp", wt, version)
    n, ic = x.shape[0], x.shape[-1]
    if depthwise:
        kernel, wc, m = w.shape[:nsp], w.shape[nsp], w.shape[nsp + 1]  # [KH, KW, C, M]
        oc = ic * m
    else:
        oc, kernel, wc = w.shape[0], w.shape[1:1 + nsp], w.shape[-1]  # [OC, *K, IC]
    error_if(wc != ic, "weight channels != input channels", op)
    b = _bias(bias, op, oc, acc_t, out_t)
    cols = _windows(_values(x, it, iz), kernel, stride, dilation, pad, 0, op)  # [N, *out, *kernel, IC]
    wv = _values(w, wt, wz)
    out_sp = cols.shape[1:1 + nsp]
    ktaps = int(np.prod(kernel))
    if depthwise:
        acc = np.einsum("pkc,kcm->pcm", cols.reshape(-1, ktaps, ic), wv.reshape(ktaps, ic, m))
    else:
        acc = cols.reshape(-1, ktaps * ic) @ wv.reshape(oc, ktaps * ic).T
    acc = acc.reshape(n, *out_sp, oc)
    return _add_bias(acc, b, acc_t, out_t, op)


def _add_bias(acc: np.ndarray, b: np.ndarray, acc_t: str, out_t: str, op: str) -> np.ndarray:
    # TOSA 1.0: out = static_cast<out_t>(acc); out = apply_add_s<out_t>(out, bias) (two roundings for floats)
    out = _finish(acc, acc_t, out_t, op)
    if acc_t.startswith("int"):
        return _finish(out.astype(_I64) + b, acc_t, out_t, op)
    with np.errstate(all="ignore"):
        return round_float(out.astype(np.float64) + b, out_t)


def conv2d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike = 0, weight_zp: ArrayLike = 0, *, pad: ArrayLike, stride: ArrayLike,
           dilation: ArrayLike, acc_type: str | None = None, local_bound: bool = False, version: str = "1.0") -> np.ndarray:
    """CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [OC] or [1] → [N,OH,OW,OC]."""
    return _conv("CONV2D", input, weight, bias, input_zp, weight_zp, pad, stride, dilation, acc_type, version, False)


def depthwise_conv2d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike = 0, weight_zp: ArrayLike = 0, *, pad: ArrayLike,
                     stride: ArrayLike, dilation: ArrayLike, acc_type: str | None = None, local_bound: bool = False,
                     version: str = "1.0") -> np.ndarray:
    """DEPTHWISE_CONV2D: input [N,IH,IW,C], weight [KH,KW,C,M], bias [C*M] or [1] → [N,OH,OW,C*M]."""
    return _conv("DEPTHWISE_CONV2D", input, weight, bias, input_zp, weight_zp, pad, stride, dilation, acc_type,
                 version, True)


def conv3d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike = 0, weight_zp: ArrayLike = 0, *, pad: ArrayLike, stride: ArrayLike,
           dilation: ArrayLike, acc_type: str | None = None, local_bound: bool = False, version: str = "1.0") -> np.ndarray:
    """CONV3D: input [N,ID,IH,IW,IC], weight [OC,KD,KH,KW,IC], pad [6], stride/dilation [3] → [N,OD,OH,OW,OC]."""
    return _conv("CONV3D", input, weight, bias, input_zp, weight_zp, pad, stride, dilation, acc_type, version,
                 False, 3)


def transpose_conv2d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike = 0, weight_zp: ArrayLike = 0, *, out_pad: ArrayLike,
                     stride: ArrayLike, acc_type: str | None = None, local_bound: bool = False,
                     version: str = "1.0") -> np.ndarray:
    """TRANSPOSE_CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC] (not flipped) scattered to
    ``oy = iy*stride_y + out_pad_top + ky``; OH = (IH-1)*stride_y + out_pad_top + out_pad_bottom + KH.
    Negative ``out_pad`` crops (ERROR_IF out_pad <= -K)."""
    op = "TRANSPOSE_CONV2D"
    check_version(version)
    x, it = tensor(input, op, "input")
    w, wt = tensor(weight, op, "weight")
    acc_t = _acc_type(op, it, wt, acc_type)
    out_t = _out_type(it, acc_t)
    error_if(x.ndim != 4 or w.ndim != 4, "rank(input) != 4 || rank(weight) != 4", op)
    out_pad, stride = _ints(out_pad, 4, op, "out_pad"), _ints(stride, 2, op, "stride")
    error_if(any(s < 1 for s in stride), "stride < 1", op)
    n, ih, iw, ic = x.shape
    oc, kh, kw, wc = w.shape
    error_if(wc != ic, "weight channels != input channels", op)
    error_if(out_pad[0] <= -kh or out_pad[1] <= -kh, "out_pad_top/bottom <= -KH", op)
    error_if(out_pad[2] <= -kw or out_pad[3] <= -kw, "out_pad_left/right <= -KW", op)
    error_if((ih - 1) * stride[0] + out_pad[0] + out_pad[1] + kh < 1, "OH < 1", op)
    error_if((iw - 1) * stride[1] + out_pad[2] + out_pad[3] + kw < 1, "OW < 1", op)
    iz = _zero_point(input_zp, op, "input_zp", it, version)
    wz = _zero_point(weight_zp, op, "weight_zp", wt, version)
    b = _bias(bias, op, oc, acc_t, out_t)
    xv, wv = _values(x, it, iz), _values(w, wt, wz)
    fh, fw = (ih - 1) * stride[0] + kh, (iw - 1) * stride[1] + kw
    full = np.zeros((n, fh, fw, oc), xv.dtype)
    for ky in range(kh):  # loop over kernel taps only
        for kx in range(kw):
            full[:, ky:ky + (ih - 1) * stride[0] + 1:stride[0], kx:kx + (iw - 1) * stride[1] + 1:stride[1], :] += \
                xv @ wv[:, ky, kx, :].T
    t, bt, lft, r = out_pad
    full = np.pad(full, [(0, 0), (max(t, 0), max(bt, 0)), (max(lft, 0), max(r, 0)), (0, 0)])
    full = full[:, max(-t, 0):full.shape[1] - max(-bt, 0), max(-lft, 0):full.shape[2] - max(-r, 0), :]
    return _add_bias(full, b, acc_t, out_t, op)


def _pool_geometry(op: str, kernel: ArrayLike, stride: ArrayLike, pad: ArrayLike) -> tuple[list[int], list[int], list[int]]:
    kernel, stride, pad = _ints(kernel, 2, op, "kernel"), _ints(stride, 2, op, "stride"), _ints(pad, 4, op, "pad")
    error_if(any(k < 1 for k in kernel), "kernel < 1", op)
    _check_geometry(op, pad, stride, None)
    error_if(pad[0] >= kernel[0] or pad[1] >= kernel[0], "pad_top/pad_bottom >= kernel_y", op)
    error_if(pad[2] >= kernel[1] or pad[3] >= kernel[1], "pad_left/pad_right >= kernel_x", op)
    return kernel, stride, pad


def max_pool2d(input: ArrayLike, *, kernel: ArrayLike, stride: ArrayLike, pad: ArrayLike, nan_mode: str = "PROPAGATE",
               version: str = "1.0") -> np.ndarray:
    """MAX_POOL2D: padding never contributes; ``nan_mode`` PROPAGATE / IGNORE (all-NaN → NaN)."""
    op = "MAX_POOL2D"
    check_nan_mode(op, nan_mode, version)
    x, t = tensor(input, op)
    error_if(t not in ("int8", "int16", "fp16", "bf16", "fp32"), f"unsupported type {t}", op)
    error_if(x.ndim != 4, "rank(input) != 4", op)
    kernel, stride, pad = _pool_geometry(op, kernel, stride, pad)
    if t.startswith("int"):
        cols = _windows(x.astype(_I64), kernel, stride, (1, 1), pad, INT_RANGES[t][0] - 1, op)
        return cols.max(axis=(3, 4)).astype(x.dtype)
    valid = _windows(np.ones(x.shape[:3] + (1,), bool), kernel, stride, (1, 1), pad, False, op)
    cols = _windows(x.astype(np.float64), kernel, stride, (1, 1), pad, -np.inf, op)
    nan = np.isnan(cols)
    m = np.where(nan, -np.inf, cols).max(axis=(3, 4))
    if nan_mode == "PROPAGATE":
        m = np.where(nan.any(axis=(3, 4)), np.nan, m)
    else:  # IGNORE: NaN only when every in-bounds element is NaN
        m = np.where((valid & ~nan).any(axis=(3, 4)), m, np.nan)
    return round_float(m, t)


def _reciprocal_scale(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = count.astype(_I64)
    k = np.frexp((c - 1).astype(np.float64))[1].astype(_I64)  # 32 - clz(c - 1): (1 << k) / 2 < c <= (1 << k)
    numerator = ((_I64(1) << 30) + 1) << k
    return numerator // c, 30 + k


def avg_pool2d(input: ArrayLike, input_zp: ArrayLike = 0, output_zp: ArrayLike = 0, *, kernel: ArrayLike, stride: ArrayLike, pad: ArrayLike,
               acc_type: str | None = None, version: str = "1.0") -> np.ndarray:
    """AVG_POOL2D: the divisor counts only in-bounds positions; integers use ``reciprocal_scale`` +
    ``apply_scale_32`` (round half up) and clip to the input type after adding ``output_zp``."""
    op = "AVG_POOL2D"
    check_version(version)
    x, t = tensor(input, op)
    rows = {"int8": ("int32",), "int16": ("int32",), "fp16": ("fp16", "fp32"), "bf16": ("fp32",), "fp32": ("fp32",)}
    error_if(t not in rows, f"unsupported type {t}", op)
    acc = {"int8": "int32", "int16": "int32", "fp16": "fp16", "bf16": "fp32", "fp32": "fp32"}[t] \
        if acc_type is None else str(acc_type).lower()
    error_if(acc not in rows[t], f"acc_type {acc} not allowed for {t}", op)
    error_if(x.ndim != 4, "rank(input) != 4", op)
    kernel, stride, pad = _pool_geometry(op, kernel, stride, pad)
    iz = _zero_point(input_zp, op, "input_zp", t, version)
    oz = _zero_point(output_zp, op, "output_zp", t, version)
    ones = np.ones(x.shape[:3] + (1,), _I64)
    count = _windows(ones, kernel, stride, (1, 1), pad, 0, op).sum(axis=(3, 4))
    cols = _windows(_values(x, t, iz), kernel, stride, (1, 1), pad, 0, op)
    s = cols.sum(axis=(3, 4))
    if t.startswith("int"):
        lo, hi, _ = INT_RANGES["int32"]
        require(s.size == 0 or (int(s.min()) >= lo and int(s.max()) <= hi), "accumulator fits int32", op)
        mult, shift = _reciprocal_scale(np.broadcast_to(count, s.shape))
        r = apply_scale_32(s, mult, shift, False, version=version, op=op) + oz
        tlo, thi, _ = INT_RANGES[t]
        return np.clip(r, tlo, thi).astype(x.dtype)
    with np.errstate(all="ignore"):
        return round_float(s / count, t)
