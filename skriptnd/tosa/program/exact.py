"""Fast integer forms of TOSA operators that give exactly the generic kernels' integers.

An integer TOSA graph (skriptnd.tosa.integer.lower: a quantized graph) spends nearly all its time in
CONV2D, whose generic kernel (:mod:`skriptnd.tosa.ops.tensor_ops`) accumulates in int64, which numpy
multiplies without BLAS (about 2 s of 2.2 s per ResNet-18 sample). The forms here compute the same
integers with float64 BLAS:

* every product of an int8 value less its zero point (at most 255 in magnitude) by an int8 weight less
  its zero point (at most 255), or of an int16 value by an int8 weight, is an integer far below 2^53, and
  so is every partial sum of ``K`` of them while ``K * max|x| * max|w| <= 2^53``: float64 adds them
  without rounding, whatever order BLAS picks. The bound is checked when the form is made (from the
  weights, which are constants, and the input type); beyond it there is no fast form;
* RESCALE is the generic kernel's formula in the same int64 operations, without the per-call checks of
  the attributes (done once, when the form is made).

Each form takes the generic kernel's operands and returns ``NotImplemented`` for anything it was not made
for or any REQUIRE that may fail (an accumulator outside int32, a RESCALE input outside
``2^(shift-1)``, an inexact output size): then the generic kernel runs, which computes or raises the
TOSA error. :func:`exact_form` returns ``None`` when an operator has no fast form here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skriptnd import parallel
from skriptnd.tosa.legalize.core import Subgraph, run_subgraph
from skriptnd.tosa.ops.invoke import apply
from skriptnd.tosa.program.fast import specialise

F32 = np.float32
F64 = np.float64
I64 = np.int64
Fn = Callable[..., Any]

#: float64 holds every integer up to this magnitude exactly
EXACT = float(1 << 53)
#: float32 holds every integer up to this magnitude exactly
EXACT32 = float(1 << 24)
_INT = {"int8": np.int8, "int16": np.int16, "int32": np.int32}
_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(1 << 31), (1 << 31) - 1)}
_ACC = {np.dtype(np.int8): ("int32", 255), np.dtype(np.int16): ("int48", 65535)}  # input -> (acc_t, max |x - zp|)
_ACC_RANGE = {"int32": _RANGE["int32"], "int48": (-(1 << 47), (1 << 47) - 1)}


def exact_form(name: str, consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Fn | None:
    """The fast exact form of TOSA operator ``name`` (operands ``consts``: their values where known when
    the form is made, None where only known at run time; ``attrs``: its attributes), or None."""
    if attrs.get("version", "1.0") != "1.0":
        return None
    if name in ("CONV2D", "DEPTHWISE_CONV2D"):
        return _conv(name, consts, attrs)
    if name == "MATMUL":
        return _matmul(consts, attrs)
    if name == "RESCALE":
        return _rescale(consts, attrs)
    if name == "CLAMP":
        return _clamp(attrs)
    if name == "CAST":
        return _cast(attrs)
    if name in SAME_BITS:  # fp32 forms that round as the generic kernels do (skriptnd.tosa.program.fast)
        return specialise(name, consts, attrs)
    return None


#: operators whose fast fp32 forms give the generic kernels' bits: data movement, comparisons and
#: selection, exact unary operators, and ADD/SUB/MUL, whose float32 result is the float64 result rounded
#: once to float32 (double rounding through float64 is harmless for one +, - or *)
SAME_BITS = frozenset({"ADD", "SUB", "MUL", "ABS", "CEIL", "FLOOR", "SELECT", "GREATER", "GREATER_EQUAL",
                       "EQUAL", "RESHAPE", "TRANSPOSE"})


def _clamp(attrs: dict[str, Any]) -> Fn | None:
    """CLAMP of int8/int16 values (the generic kernel's ``clip(int(min_val), int(max_val))``)."""
    lo, hi = attrs["min_val"], attrs["max_val"]
    if any(isinstance(v, float) and not v.is_integer() for v in (lo, hi)):
        return None
    lo, hi = int(lo), int(hi)

    def run(x: Any) -> Any:
        if not (isinstance(x, np.ndarray) and x.dtype in (np.int8, np.int16)):
            return NotImplemented
        t = "int8" if x.dtype == np.int8 else "int16"
        if not (_RANGE[t][0] <= lo <= hi <= _RANGE[t][1]):
            return NotImplemented
        return np.clip(x, x.dtype.type(lo), x.dtype.type(hi))

    return run


def _cast(attrs: dict[str, Any]) -> Fn | None:
    """CAST fp32 -> int8/int16 (round half to even, NaN -> 0, saturate) and int8/int16 -> fp32 (exact)."""
    to = str(attrs.get("output_dtype", "")).lower()
    if to not in ("int8", "int16", "fp32", "float32"):
        return None

    def run(x: Any) -> Any:
        if not isinstance(x, np.ndarray):
            return NotImplemented
        if to in _INT and x.dtype == F32:
            lo, hi = _RANGE[to]
            y = np.rint(x)
            np.nan_to_num(y, copy=False, nan=0.0)
            np.clip(y, F32(lo), F32(hi), out=y)
            return y.astype(_INT[to])
        if to not in _INT and x.dtype in (np.int8, np.int16):
            return x.astype(F32)
        return NotImplemented

    return run


def _scalar(c: np.ndarray | None, dtype: type) -> int | None:
    """A TOSA 1.0 zero point operand's value: a known ``[1]`` array of ``dtype``, else None."""
    if c is None or c.dtype != dtype or c.shape != (1,):
        return None
    return int(c[0])


def _fits(a: np.ndarray, lo: int, hi: int) -> bool:
    """All of ``a`` within ``[lo, hi]`` (compared as Python ints: int64 values beyond 2^53 too)."""
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) <= hi)


class _Conv:
    """CONV2D / DEPTHWISE_CONV2D on int8 (int32 accumulator) or int16 (int48) inputs with constant int8
    weights, bias and zero points: im2col and GEMMs (convolution) or one product per tap (depthwise),
    exact by the bounds in the module docstring. Where the reduction's partial sums stay within 2^24
    (``xmax * wmax`` per product), in float32, the GEMM split along the reduction into such pieces whose
    results are added in float64; else in float64."""

    def __init__(self, depthwise: bool, weight: np.ndarray, bias: np.ndarray, wzp: int, in_dtype: np.dtype,
                 acc_t: str, attrs: dict[str, Any], xmax: int, wmax: int) -> None:
        self.depthwise = depthwise
        self.in_dtype, self.acc_t = in_dtype, acc_t
        self.pad = [int(p) for p in np.asarray(attrs["pad"]).reshape(-1)]
        self.stride = [int(s) for s in np.asarray(attrs["stride"]).reshape(-1)]
        self.dilation = [int(d) for d in np.asarray(attrs["dilation"]).reshape(-1)]
        product = max(1, xmax * wmax)
        if depthwise:  # [KH, KW, C, M]
            self.kernel = weight.shape[:2]
            self.ic, m = weight.shape[2], weight.shape[3]
            self.oc = self.ic * m
            taps = self.kernel[0] * self.kernel[1]
            self.dtype = F32 if taps * product <= EXACT32 else F64
            self.w = (weight.astype(self.dtype) - wzp).reshape(taps, self.ic, m)
            self.pieces: list[slice] = []
        else:  # [OC, KH, KW, IC] -> [KH * KW * IC, OC]
            self.oc, self.kernel, self.ic = weight.shape[0], weight.shape[1:3], weight.shape[3]
            k = int(np.prod(weight.shape[1:]))
            piece = int(EXACT32 // product)  # the longest reduction float32 sums exactly
            parts = -(-k // max(piece, 1))
            self.dtype = F32 if piece >= min(k, 64) else F64  # short pieces: one float64 GEMM is faster
            step = -(-k // parts) if self.dtype == F32 else k
            self.pieces = [slice(a, min(a + step, k)) for a in range(0, k, step)]
            self.w = np.ascontiguousarray((weight.astype(self.dtype) - wzp).reshape(self.oc, -1).T)
        self.bias = bias.astype(F64)

    def __call__(self, x: Any, weight: Any, bias: Any, input_zp: Any, weight_zp: Any, **_: Any) -> Any:
        if not (isinstance(x, np.ndarray) and x.dtype == self.in_dtype and x.ndim == 4 and x.shape[3] == self.ic):
            return NotImplemented
        izp = _scalar(input_zp, self.in_dtype.type)
        if izp is None:
            return NotImplemented
        n, h, w = x.shape[:3]
        pt, pb, pl, pr = self.pad
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        nh, nw = h + pt + pb - eh, w + pl + pr - ew
        if nh < 0 or nw < 0 or nh % sh or nw % sw:
            return NotImplemented  # the generic kernel raises the ERROR_IF
        oh, ow = nh // sh + 1, nw // sw + 1
        xv = np.zeros((n, h + pt + pb, w + pl + pr, self.ic), self.dtype)  # x - zp, padded with 0 (as the kernel)
        np.subtract(x, self.dtype(izp), out=xv[:, pt:pt + h, pl:pl + w, :], casting="unsafe")
        s0, s1, s2, s3 = xv.strides
        taps = np.lib.stride_tricks.as_strided(
            xv, (n, oh, ow, kh, kw, self.ic), (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False)
        if self.depthwise:
            m = self.w.shape[2]
            acc = np.zeros((n, oh, ow, self.ic, m), self.dtype)
            for k in range(kh * kw):
                acc += taps[:, :, :, k // kw, k % kw, :, None] * self.w[k]
            acc = acc.reshape(n, oh, ow, self.oc).astype(F64)
        else:
            cols = taps.reshape(n * oh * ow, kh * kw * self.ic)  # copies the windows (im2col)
            acc = np.zeros((n * oh * ow, self.oc), F64)
            for p in self.pieces:
                acc += parallel.gemm(cols[:, p], self.w[p])
            acc = acc.reshape(n, oh, ow, self.oc)
        lo, hi = _ACC_RANGE[self.acc_t]
        if not _fits(acc, lo, hi):
            return NotImplemented
        acc += self.bias  # exact: |acc| <= 2^47 and |bias| < 2^47
        if not _fits(acc, lo, hi):
            return NotImplemented
        return acc.astype(np.int32 if self.acc_t == "int32" else np.int64)


def _conv(name: str, consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Fn | None:
    if len(consts) != 5 or attrs.get("local_bound", False):
        return None
    _, weight, bias, izp, wzp = consts
    if weight is None or bias is None or izp is None or wzp is None or weight.dtype != np.int8 or weight.ndim != 4:
        return None
    if izp.dtype not in _ACC or izp.shape != (1,):
        return None
    acc_t, xmax = _ACC[izp.dtype]
    if str(attrs.get("acc_type") or acc_t).lower() != acc_t:
        return None
    wz = _scalar(wzp, np.int8)
    bias_dtype = np.int32 if acc_t == "int32" else np.int64
    depthwise = name == "DEPTHWISE_CONV2D"
    oc = weight.shape[2] * weight.shape[3] if depthwise else weight.shape[0]
    if wz is None or bias.dtype != bias_dtype or bias.ndim != 1 or bias.shape[0] not in (1, oc):
        return None
    if acc_t == "int48" and (int(izp[0]) != 0 or wz != 0):
        return None  # the generic kernel's ERROR_IF: nonzero zero points only for int8
    taps = int(np.prod(weight.shape[:2] if depthwise else weight.shape[1:]))
    wmax = max(abs(int(weight.max(initial=0)) - wz), abs(int(weight.min(initial=0)) - wz))
    if taps * xmax * wmax > EXACT:
        return None  # partial sums may round in float64
    form = _Conv(depthwise, weight, bias, wz, izp.dtype, acc_t, attrs, xmax, wmax)
    if len(form.pad) != 4 or len(form.stride) != 2 or len(form.dilation) != 2 or min(form.pad, default=0) < 0 \
            or min(form.stride + form.dilation) < 1:
        return None
    return form


def _matmul(consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Fn | None:
    """MATMUL on int8 operands (int32 result) as a float64 batched GEMM, exact while
    ``C * 255 * 255 <= 2^53`` (checked per call, C is the reduction length)."""
    if attrs.get("output_dtype") not in (None, "int32", "INT32"):
        return None

    def run(a: Any, b: Any, a_zp: Any = None, b_zp: Any = None, **_: Any) -> Any:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == np.int8 and b.dtype == np.int8
                and a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]):
            return NotImplemented
        az, bz = _scalar(a_zp, np.int8), _scalar(b_zp, np.int8)
        if az is None or bz is None or a.shape[2] * 255 * 255 > EXACT:
            return NotImplemented
        acc = parallel.gemm(a.astype(F64) - az, b.astype(F64) - bz)
        if not _fits(acc, *_RANGE["int32"]):
            return NotImplemented
        return acc.astype(np.int32)

    return run


class _Rescale:
    """RESCALE (TOSA 1.0, scale32, single or double rounding, signed) with constant multipliers, shifts and zero
    points: ``clip(((v - izp) * m + (1 << (s - 1)) [± (1 << 30) where s > 31, by v's sign]) >> s + ozp)`` in
    int64, as the generic kernel."""

    def __init__(self, mult: np.ndarray, shift: np.ndarray, izp: int, ozp: int, in_dtype: np.dtype, out_t: str,
                 per_channel: bool, double: bool = False) -> None:
        self.mult, self.shift = mult.astype(I64), shift.astype(I64)
        self.rnd = np.left_shift(I64(1), self.shift - 1)
        #: double rounding's extra ±2^30 (for values >= 0 / < 0), 0 on channels with shift <= 31
        self.nudge = np.where(self.shift > 31, I64(1 << 30), I64(0)) if double else None
        self.lim = int(np.left_shift(I64(1), self.shift - 1).min())  # the REQUIRE |v| < 2^(shift-1), all channels
        self.izp, self.ozp, self.in_dtype, self.out_t = izp, ozp, in_dtype, out_t
        self.per_channel = per_channel
        if not per_channel:
            self.mult, self.shift, self.rnd = self.mult[0], self.shift[0], self.rnd[0]
            if self.nudge is not None:
                self.nudge = self.nudge[0]

    def __call__(self, x: Any, *_: Any, **__: Any) -> Any:
        if not (isinstance(x, np.ndarray) and x.dtype == self.in_dtype):
            return NotImplemented
        if self.per_channel and (x.ndim < 1 or x.shape[-1] != self.mult.shape[0]):
            return NotImplemented
        v = x.astype(I64)
        if self.izp:
            v -= self.izp
        if not _fits(v, -self.lim, self.lim - 1):
            return NotImplemented  # maybe within a channel's own limit, or a REQUIRE: the generic kernel
        nudge = None if self.nudge is None else np.where(v >= 0, self.nudge, -self.nudge)
        v *= self.mult
        v += self.rnd
        if nudge is not None:
            v += nudge
        v >>= self.shift
        if self.ozp:
            v += self.ozp
        lo, hi = _RANGE[self.out_t]
        np.clip(v, lo, hi, out=v)
        return v.astype(_INT[self.out_t])


def _rescale(consts: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Fn | None:
    if len(consts) != 5 or any(c is None for c in consts[1:]):
        return None
    _, mult, shift, izp_c, ozp_c = consts
    assert mult is not None and shift is not None and izp_c is not None and ozp_c is not None
    out_t = str(attrs.get("output_dtype", "")).lower()
    if (out_t not in _INT or not attrs.get("scale32") or attrs.get("input_unsigned") or attrs.get("output_unsigned")
            or attrs.get("double_round") is not None
            or attrs.get("rounding_mode", "SINGLE_ROUND") not in ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND")):
        return None
    in_dtype = izp_c.dtype
    if in_dtype.type not in (np.int8, np.int16, np.int32) or mult.dtype != np.int32 or shift.dtype != np.int8:
        return None
    izp, ozp = _scalar(izp_c, in_dtype.type), _scalar(ozp_c, _INT[out_t])
    if izp is None or ozp is None or (in_dtype != np.int8 and izp) or (out_t != "int8" and ozp):
        return None
    mult, shift = mult.reshape(-1), shift.reshape(-1)
    per_channel = bool(attrs.get("per_channel", False))
    if mult.size < 1 or mult.shape != shift.shape or (not per_channel and mult.size != 1) \
            or (mult < 0).any() or (shift < 2).any() or (shift > 62).any():
        return None
    return _Rescale(mult, shift, izp, ozp, in_dtype, out_t, per_channel, attrs.get("rounding_mode") == "DOUBLE_ROUND")


class Runner:
    """Runs a :class:`Subgraph` as :func:`skriptnd.tosa.legalize.core.run_subgraph` does, each operator by its
    exact fast form where it has one (made once, from the subgraph's constants), else the generic kernel."""

    def __init__(self, sg: Subgraph) -> None:
        self.sg = sg
        self.forms: list[Fn | None] = [
            exact_form(o.name, [sg.constants.get(i) for i in o.inputs], o.attrs) for o in sg.ops]

    def __call__(self, args: Sequence[Any], record: Callable[[str, float], None] | None = None) -> list[Any]:
        """The subgraph's outputs; ``record(TOSA operator name, seconds)``, when given, is told each operator's
        time after it ran (a profile: skriptnd.profiling)."""
        sg = self.sg
        if sg.int_values or not all(isinstance(n, str) for n in sg.inputs):
            return run_subgraph(sg, args)  # int inputs narrowed, packs: the general runner
        env: dict[str, Any] = dict(sg.constants)
        env.update(zip(sg.inputs, args, strict=True))
        # as a compiled program (skriptnd.tosa.program.build): the GEMMs split over skriptnd.parallel's pool,
        # one BLAS thread each (OpenBLAS's own threads, spinning between calls, would take the pool's cores)
        with np.errstate(all="ignore"):  # inf and NaN results are the operators' (fast.py's docstring)
            if parallel.threads() > 1:
                with parallel.blas_single():
                    self._run(env, record)
            else:
                self._run(env, record)
        return [env[n] for n in sg.outputs]

    def _run(self, env: dict[str, Any], record: Callable[[str, float], None] | None) -> None:
        started = 0.0
        for o, form in zip(self.sg.ops, self.forms, strict=True):
            if record is not None:
                started = time.perf_counter()
            operands = [env[i] for i in o.inputs]
            result = NotImplemented
            if form is not None:
                with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN as the generic kernels give them
                    result = form(*operands)
            env[o.output] = apply(o.name, operands, o.attrs) if result is NotImplemented else result
            if record is not None:
                record(o.name, time.perf_counter() - started)
