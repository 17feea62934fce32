"""RESIZE (TOSA 1.0 §2.12.1), FFT2D / RFFT2D (§2.3.6, §2.3.10) and the TOSA 0.30 FULLY_CONNECTED.

RESIZE takes ``scale`` = [scale_y_n, scale_y_d, scale_x_n, scale_x_d], ``offset`` = [offset_y, offset_x] and
``border`` = [border_y, border_x] as ``shape_t`` operands; the output shape is derived from them
(``idiv_check``: a non-exact division is an ERROR_IF). Integer inputs (int8/int16, resize_t int16) are
computed exactly in int64: BILINEAR output is not normalised (it carries the factor
``scale_y_n * scale_x_n``) and has type int32 (int8 input) or int48 (int16 input); NEAREST keeps the input
type and rounds half up (``2 * r >= scale_n`` picks the next sample). Float inputs (resize_t = the input
type): ``dy = ry / scale_y_n`` is rounded to resize_t, the bilinear sum is evaluated as written in float64
(so ``inf * 0`` gives NaN) and rounded once to the output type.

With ``version="0.30"`` RESIZE takes the 0.30 attributes instead: ``output_size`` [OH,OW], ``stride``,
``offset`` (int16 fixed point with ``shift`` fractional bits for int8/int16 inputs, fp32 for float inputs),
``border``, ``shift`` and ``mode`` NEAREST/BILINEAR, and follows the 0.30 pseudocode (:func:`_resize_030`).

FFT2D / RFFT2D (fp32 only, H and W powers of two) are computed with ``numpy.fft`` in complex128 and rounded
once to fp32. Forward uses ``exp(-2πi(...))``, ``inverse=True`` uses ``exp(+2πi(...))``, and neither direction
is normalised (inverse = ``ifft2 * H * W``). RFFT2D returns ``[N, H, W/2+1]`` (TOSA 1.0); with
``version="0.30"`` it returns the ``[N, H/2+1, W/2+1]`` written in the 0.30 spec. Both return
``(output_real, output_imag)``. ``local_bound`` is accepted and has no effect (float64 meets either bound).

FULLY_CONNECTED exists only in TOSA 0.30 (``version="0.30"``; TOSA 1.0 raises :class:`TosaError`): input
[N,IC], weight [OC,IC], bias [OC] (out_t), zero points as plain numbers; out_t is the accumulator type
(``acc_type`` picks fp16/fp32 for fp16 inputs). Integer partial sums are checked against out_t
(``apply_add`` REQUIRE); float results are computed in float64 with the bias and rounded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import shape_operand, tensor
from skriptnd.tosa.ops.dtypes import INT_RANGES, BF16Array, round_float
from skriptnd.tosa.ops.errors import check_version, error_if, require
from skriptnd.tosa.ops.tensor_ops import _acc_type, _zero_point

__all__ = ["resize", "fft2d", "rfft2d", "fully_connected"]

_I64 = np.int64
_RESIZE_MODES = {"NEAREST_NEIGHBOR": "NEAREST", "NEAREST": "NEAREST", "BILINEAR": "BILINEAR"}
_RESIZE_OUT = {("int8", "BILINEAR"): "int32", ("int16", "BILINEAR"): "int48"}
_NP_OUT = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int48": np.int64}


def _resize_axis(op: str, size: int, n: int, d: int, offset: int, border: int, what: str) -> int:
    error_if(n <= 0 or d <= 0, f"scale_{what}_n <= 0 || scale_{what}_d <= 0", op)
    error_if(n > (1 << 11), f"scale_{what}_n > (1 << 11)", op)
    error_if(d >= 16 * n, f"scale_{what}_d >= 16 * scale_{what}_n", op)
    error_if(offset < -n or offset >= 16 * n, f"offset_{what} < -scale_{what}_n || offset_{what} >= 16 * scale_{what}_n",
             op)
    error_if(border < -16 * n or border >= n, f"border_{what} < -16 * scale_{what}_n || border_{what} >= scale_{what}_n",
             op)
    num = (size - 1) * n - offset + border
    error_if(num % d != 0, f"idiv_check({num}, {d}) is not exact", op)
    return num // d + 1


def _resize_coords(op: str, out: int, size: int, n: int, d: int, offset: int) -> tuple[np.ndarray, ...]:
    """Per-output index along one axis: (i0, i1, remainder r) with 0 <= r < n."""
    pos = np.arange(out, dtype=_I64) * d + offset
    i = np.floor_divide(pos, n)
    r = pos - i * n
    i0, i1 = np.maximum(i, 0), np.minimum(i + 1, size - 1)
    require(bool(np.all(i0 <= i1)), "-1 <= iy < IH && -1 <= ix < IW", op)  # holds under the ERROR_IF bounds
    return i0, i1, r


def resize(input: ArrayLike, scale: ArrayLike = None, offset: ArrayLike = None, border: ArrayLike = None, *, mode: str,
           version: str = "1.0", output_size: ArrayLike = None, stride: ArrayLike = None, shift: int = 0) -> np.ndarray:
    """RESIZE: input [N,IH,IW,C] → [N,OH,OW,C], ``mode`` NEAREST_NEIGHBOR (or NEAREST) / BILINEAR.

    TOSA 1.0: ``scale``, ``offset``, ``border`` operands. TOSA 0.30 (``version="0.30"``): the attributes
    ``output_size``, ``stride``, ``offset``, ``border``, ``shift`` (see :func:`_resize_030`).
    """
    op = "RESIZE"
    check_version(version)
    error_if(str(mode) not in _RESIZE_MODES, f"mode {mode!r} is not NEAREST_NEIGHBOR or BILINEAR", op)
    if version == "0.30":
        error_if(scale is not None, "scale is not a TOSA 0.30 RESIZE argument (use stride and shift)", op)
        return _resize_030(input, output_size, stride, offset, border, shift, _RESIZE_MODES[str(mode)])
    error_if(scale is None or offset is None or border is None, "RESIZE needs scale, offset and border operands", op)
    error_if(output_size is not None or stride is not None or shift != 0,
             "output_size, stride and shift are TOSA 0.30 RESIZE attributes", op)
    mode = _RESIZE_MODES[str(mode)]
    x, t = tensor(input, op)
    error_if(t not in ("int8", "int16", "fp16", "bf16", "fp32"), f"unsupported type {t}", op)
    error_if(x.ndim != 4, "rank(input) != 4", op)
    sc, off, bd = shape_operand(scale, op, "scale"), shape_operand(offset, op, "offset"), \
        shape_operand(border, op, "border")
    error_if(len(sc) != 4 or len(off) != 2 or len(bd) != 2, "shape(scale) != [4] || shape(offset/border) != [2]", op)
    yn, yd, xn, xd = sc
    nb, ih, iw, c = x.shape
    oh = _resize_axis(op, ih, yn, yd, off[0], bd[0], "y")
    ow = _resize_axis(op, iw, xn, xd, off[1], bd[1], "x")
    error_if(max(oh, ow, ih, iw) >= 16384, "max(OH, OW, IH, IW) >= 16384", op)
    error_if(oh < 1 or ow < 1, "OH < 1 || OW < 1", op)
    y0, y1, ry = _resize_coords(op, oh, ih, yn, yd, off[0])
    x0, x1, rx = _resize_coords(op, ow, iw, xn, xd, off[1])
    is_int = t.startswith("int")
    if mode == "NEAREST":
        if is_int:
            ny, nx = 2 * ry >= yn, 2 * rx >= xn
        else:
            ny = round_float(ry / yn, t).astype(np.float64) >= 0.5
            nx = round_float(rx / xn, t).astype(np.float64) >= 0.5
        iy, ix = np.where(ny, y1, y0), np.where(nx, x1, x0)
        return x[:, iy[:, None], ix[None, :], :].copy()
    if is_int:
        v = x.astype(_I64)
        dy, dx = ry[:, None, None], rx[None, :, None]
        uy, ux = _I64(yn), _I64(xn)
    else:
        v = x.astype(np.float64)
        dy = round_float(ry / yn, t).astype(np.float64)[:, None, None]
        dx = round_float(rx / xn, t).astype(np.float64)[None, :, None]
        uy = ux = 1.0
    yi0, yi1, xi0, xi1 = y0[:, None], y1[:, None], x0[None, :], x1[None, :]
    with np.errstate(all="ignore"):
        acc = (v[:, yi0, xi0, :] * (uy - dy) * (ux - dx) + v[:, yi0, xi1, :] * (uy - dy) * dx
               + v[:, yi1, xi0, :] * dy * (ux - dx) + v[:, yi1, xi1, :] * dy * dx)
        if is_int:
            out_t = _RESIZE_OUT[(t, mode)]
            return acc.astype(_NP_OUT[out_t])
        return round_float(acc, t)


def _pair(value: ArrayLike, name: str, floats: bool) -> list[Any]:
    op = "RESIZE"
    error_if(value is None, f"missing attribute {name}", op)
    a = np.asarray(value)
    error_if(a.shape != (2,), f"shape({name}) != [2]", op)
    if floats:
        error_if(a.dtype.kind not in "fiu", f"{name} must hold numbers", op)
        return [np.float32(v) for v in a]
    error_if(a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))),
             f"{name} must hold integers", op)
    return [int(v) for v in a]


def _resize_030_axis(op: str, size: int, stride: ArrayLike, offset: ArrayLike, border: int, shift: int, is_int: bool) -> int:
    """OH = idiv((IH-1)*(1<<shift) - offset_y, stride_y) + 1 + border_y (idiv truncates toward zero)."""
    if is_int:
        num = (size - 1) * (1 << shift) - offset
        q = abs(num) // stride * (1 if num >= 0 else -1)
    else:  # resize_t = fp32: the float quotient, truncated (the spec writes idiv for both)
        q = int(np.trunc((float(size - 1) - float(offset)) / float(stride)))
    return q + 1 + border


def _resize_030(input: ArrayLike, output_size: ArrayLike, stride: ArrayLike, offset: ArrayLike, border: ArrayLike, shift: int,
                mode: str) -> np.ndarray:
    """RESIZE as written in TOSA 0.30 §2.12.1.

    Integer inputs (int8/int16; resize_t = int16): ``stride``/``offset`` are fixed point with ``shift``
    fractional bits, ``y = oy * stride_y + offset_y``, ``iy = y >> shift``, ``dy = y - (iy << shift)``;
    BILINEAR is unnormalised (scale ``1 << (2 * shift)``): int8 → int32, int16 → int48 (int64 carrier);
    NEAREST picks the next sample when ``dy >= unit / 2``. Float inputs (fp16/bf16/fp32; resize_t = fp32):
    ``stride``/``offset`` are fp32, ``y`` is computed in fp32 (product, then sum, each rounded),
    ``iy = floor(y)``, ``dy = y - iy``; the bilinear sum is evaluated in float64 and rounded once to the
    input type. The output size is derived as in the pseudocode (for floats ``trunc((IH-1-offset)/stride)``);
    ``output_size`` (optional) must equal it. Edges clamp; a sample row/column outside [-1, IH-1] /
    [-1, IW-1] fails the REQUIRE.
    """
    op = "RESIZE"
    x, t = tensor(input, op)
    error_if(t not in ("int8", "int16", "fp16", "bf16", "fp32"), f"unsupported type {t}", op)
    error_if(x.ndim != 4, "rank(input) != 4", op)
    is_int = t.startswith("int")
    (sy, sx), (oy_, ox_) = _pair(stride, "stride", not is_int), _pair(offset, "offset", not is_int)
    by, bx = _pair(border, "border", False)
    shift = int(shift)
    nb, ih, iw, c = x.shape
    error_if(sx <= 0 or sy <= 0, "stride_x <= 0 || stride_y <= 0", op)
    if is_int:
        error_if(shift < 1 or shift > 11, "shift < 1 || shift > 11", op)
        error_if(sx >= (16 << shift), "stride_x >= (16 << shift)", op)
        error_if(sy >= (16 << shift), "stride_y >= (16 << shift)", op)
        error_if(ox_ <= (-16 << shift) or ox_ >= (16 << shift), "offset_x <= (-16 << shift) || offset_x >= (16 << shift)",
                 op)
        error_if(oy_ <= (-16 << shift) or oy_ >= (16 << shift), "offset_y <= (-16 << shift) || offset_y >= (16 << shift)",
                 op)
    else:
        error_if(shift != 0, "shift != 0", op)
        error_if(sx > iw or sy > ih, "stride_x > IW || stride_y > IH", op)
    oh = _resize_030_axis(op, ih, sy, oy_, by, shift, is_int)
    ow = _resize_030_axis(op, iw, sx, ox_, bx, shift, is_int)
    error_if(max(oh, ow, ih, iw) >= 16384, "max(OH, OW, IH, IW) >= 16384", op)
    error_if(oh < 1 or ow < 1, "OH < 1 || OW < 1", op)
    if output_size is not None:
        osz = _pair(output_size, "output_size", False)
        error_if(osz != [oh, ow], f"output_size {osz} != [OH, OW] = {[oh, ow]}", op)

    def axis(out: int, size: int, st: ArrayLike, off: ArrayLike) -> tuple[np.ndarray, ...]:
        if is_int:
            pos = np.arange(out, dtype=_I64) * st + off
            i = pos >> shift
            d = pos - (i << shift)
        else:
            pos = np.arange(out).astype(np.float32) * np.float32(st) + np.float32(off)  # fp32 steps
            i = np.floor(pos).astype(_I64)
            d = (pos - i.astype(np.float32)).astype(np.float64)
        i0, i1 = np.maximum(i, 0), np.minimum(i + 1, size - 1)
        require(bool(np.all(i0 <= i1)), "ix0 <= ix1 && iy0 <= iy1", op)
        return i0, i1, d

    y0, y1, dy = axis(oh, ih, sy, oy_)
    x0, x1, dx = axis(ow, iw, sx, ox_)
    unit = (1 << shift) if is_int else 1.0
    if mode == "NEAREST":
        half = unit // 2 if is_int else 0.5
        iy, ix = np.where(dy >= half, y1, y0), np.where(dx >= half, x1, x0)
        out = x[:, iy[:, None], ix[None, :], :].copy()
        return out.view(BF16Array) if t == "bf16" else out
    v = x.astype(_I64 if is_int else np.float64)
    dy, dx = dy[:, None, None], dx[None, :, None]
    yi0, yi1, xi0, xi1 = y0[:, None], y1[:, None], x0[None, :], x1[None, :]
    with np.errstate(all="ignore"):
        acc = (v[:, yi0, xi0, :] * (unit - dy) * (unit - dx) + v[:, yi0, xi1, :] * (unit - dy) * dx
               + v[:, yi1, xi0, :] * dy * (unit - dx) + v[:, yi1, xi1, :] * dy * dx)
        if is_int:
            return acc.astype(_NP_OUT[_RESIZE_OUT[(t, mode)]])
        return round_float(acc, t)


def _fft_input(op: str, x: ArrayLike, name: str) -> np.ndarray:
    a, t = tensor(x, op, name)
    error_if(t != "fp32", f"{name} has type {t}, expected fp32", op)
    error_if(a.ndim != 3, f"rank({name}) != 3", op)
    h, w = a.shape[1], a.shape[2]
    error_if(h < 1 or h & (h - 1), "!power_of_two(H)", op)
    error_if(w < 1 or w & (w - 1), "!power_of_two(W)", op)
    return a.astype(np.float64)


def _split(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return round_float(z.real, "fp32"), round_float(z.imag, "fp32")


def fft2d(input_real: ArrayLike, input_imag: ArrayLike, *, inverse: bool = False, local_bound: bool = False,
          version: str = "1.0") -> tuple[np.ndarray, np.ndarray]:
    """FFT2D: complex [N,H,W] → (real, imag) [N,H,W]; unnormalised in both directions."""
    op = "FFT2D"
    check_version(version)
    re, im = _fft_input(op, input_real, "input_real"), _fft_input(op, input_imag, "input_imag")
    error_if(re.shape != im.shape, "shape(input_real) != shape(input_imag)", op)
    z = re + 1j * im
    with np.errstate(all="ignore"):
        if inverse:
            out = np.fft.ifft2(z, axes=(1, 2)) * (re.shape[1] * re.shape[2])
        else:
            out = np.fft.fft2(z, axes=(1, 2))
    return _split(out)


def rfft2d(input_real: ArrayLike, *, local_bound: bool = False, version: str = "1.0") -> tuple[np.ndarray, np.ndarray]:
    """RFFT2D: real [N,H,W] → (real, imag) [N,H,W/2+1] (1.0) or [N,H/2+1,W/2+1] (0.30)."""
    op = "RFFT2D"
    check_version(version)
    x = _fft_input(op, input_real, "input_real")
    with np.errstate(all="ignore"):
        out = np.fft.rfft2(x, axes=(1, 2))
    if version == "0.30":
        out = out[:, : x.shape[1] // 2 + 1, :]
    return _split(out)


def fully_connected(input: ArrayLike, weight: ArrayLike, bias: ArrayLike, input_zp: ArrayLike = 0, weight_zp: ArrayLike = 0, *,
                    acc_type: str | None = None, version: str = "1.0") -> np.ndarray:
    """FULLY_CONNECTED (TOSA 0.30 only): input [N,IC], weight [OC,IC], bias [OC] → [N,OC] of out_t."""
    op = "FULLY_CONNECTED"
    check_version(version)
    error_if(version != "0.30", "FULLY_CONNECTED is not a TOSA 1.0 operator (use CONV2D or MATMUL)", op)
    x, it = tensor(input, op, "input")
    w, wt = tensor(weight, op, "weight")
    out_t = _acc_type(op, it, wt, acc_type)
    error_if(x.ndim != 2 or w.ndim != 2, "rank(input) != 2 || rank(weight) != 2", op)
    error_if(w.shape[1] != x.shape[1], "shape(weight)[1] != IC", op)
    b, bt = tensor(bias, op, "bias")
    error_if(bt != out_t, f"bias has type {bt}, expected {out_t}", op)
    error_if(b.shape != (w.shape[0],), "shape(bias) != [OC]", op)
    iz = _zero_point(input_zp, op, "input_zp", it, version)
    wz = _zero_point(weight_zp, op, "weight_zp", wt, version)
    if out_t.startswith("int"):
        prods = (x.astype(_I64) - iz)[:, None, :] * (w.astype(_I64) - wz)[None, :, :]  # [N,OC,IC]
        partial = np.cumsum(prods, axis=2)
        acc = (partial[..., -1] if partial.shape[2] else np.zeros(prods.shape[:2], _I64)) + b.astype(_I64)
        lo, hi, _ = INT_RANGES[out_t]
        ok = (partial.size == 0 or (int(partial.min()) >= lo and int(partial.max()) <= hi)) and \
            (acc.size == 0 or (int(acc.min()) >= lo and int(acc.max()) <= hi))
        require(ok, f"apply_add<{out_t}>: partial sums fit {out_t}", op)
        return acc.astype(_NP_OUT[out_t])
    with np.errstate(all="ignore"):
        acc = x.astype(np.float64) @ w.astype(np.float64).T + b.astype(np.float64)
        return round_float(acc, out_t)
