"""`@quantize` (spec §2.14) at run time: the quant module's operators as numbers, and fake quantization.

A tensor's ``@quantize`` entry (``Tensor.quant``, set by the composer) names an operator of the ``quant``
module (§4.6) with its attributes. This module reads such an entry as :class:`QParams` — the affine form
``real = (q - zero_point) * scale`` with an integer range, per tensor or per channel — and implements the
operators' ``@lower`` formulas in numpy (:func:`quantize`, :func:`dequantize`), in the float32 arithmetic
the @lower evaluator uses and with the spec's ``round`` (half away from zero), so the integers are those
the operator computes.

:func:`fake_quantize` returns a copy of a composed graph in which every quantized tensor is followed by
an invocation of its quantize operator (bound like any other operation, run by its own ``@lower`` plan):
the float model with fake quantization, the semantics ``sknd run`` gives a model with ``@quantize``.

``zero_point_linear_quantize{zero_point, scale, bits, signed, symmetric, channel_axis}`` is already in
affine form (``quantized = clamp(zp + round(x / scale), m, r)``). ``min_max_linear_quantize{min, max,
bits, ...}`` computes ``quantized = round((clamp(x, min, max) - min) / (max - min) * r) - p`` and maps it
back to ``(quantized + p) / r * (max - min) + min``: the affine form with ``scale = (max - min) / r`` and
``zero_point = -p - min / scale``, which must be an integer to be representable in integer arithmetic.
Unsigned 8/16-bit values are stored in the signed type of the same width with an offset of -128/-32768
(quantized values and zero point alike: the differences ``q - zp`` are unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from skriptnd.compose.ir import Graph, Operation, Tensor, Value
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.semantics.binding import Site, bind
from skriptnd.semantics.values import TensorValue
from skriptnd.source import NO_SPAN, Span

register_codes({"E0760": "unsupported quantization parameters"})

QUANT_OPS = ("zero_point_linear_quantize", "min_max_linear_quantize")


@dataclass(frozen=True)
class QParams:
    """A tensor's quantization in affine form: ``real = (q - zero_point) * scale``.

    ``scale``/``zero_point`` have one entry (per tensor) or one per index of ``axis`` (per channel);
    ``q`` and ``zero_point`` are in the storage encoding of ``dtype`` (int8/int16/int32), whose values the
    operator can produce lie in ``[qmin, qmax]``; ``offset`` is storage minus the operator's own value
    (-128 / -32768 for unsigned 8 / 16 bits, else 0).
    """

    op: str  # 'zero_point_linear_quantize' or 'min_max_linear_quantize'
    attribs: dict[str, Any]
    scale: np.ndarray  # float64 [1] or [C]
    zero_point: np.ndarray  # int64 [1] or [C], storage encoding
    qmin: int
    qmax: int
    axis: int | None
    bits: int
    dtype: str  # 'int8', 'int16' or 'int32'
    offset: int = 0

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def same_as(self, other: QParams, rtol: float = 0.0) -> bool:
        """Equal affine forms (scales within ``rtol``) and ranges: no requantization needed between them."""
        return (self.axis == other.axis and self.qmin == other.qmin and self.qmax == other.qmax
                and self.dtype == other.dtype and self.scale.shape == other.scale.shape
                and bool(np.all(self.zero_point == other.zero_point))
                and bool(np.all(np.abs(self.scale - other.scale) <= rtol * np.abs(other.scale))))

    def describe(self) -> str:
        s = ", ".join(f"{x:.6g}" for x in self.scale[:4]) + (", …" if self.scale.size > 4 else "")
        z = ", ".join(str(int(x)) for x in self.zero_point[:4]) + (", …" if self.zero_point.size > 4 else "")
        where = "" if self.axis is None else f" per channel (axis {self.axis})"
        return f"{self.dtype} scale [{s}] zero point [{z}]{where}"


def _span(t: Tensor) -> Span:
    return t.span if isinstance(t.span, Span) else NO_SPAN


def _fail(message: str, t: Tensor | None = None, hint: str | None = None) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code="E0760", message=message, span=_span(t) if t is not None else NO_SPAN,
                                       hint=hint)])


def _values(v: object) -> list[Any]:
    if isinstance(v, list | tuple):
        return list(v)
    return [v]


def quant_op_name(t: Tensor) -> str | None:
    """The quant operator of ``t``'s @quantize entry (unqualified), None if it has none."""
    if t.quant is None:
        return None
    return str(t.quant["op"]).rpartition(".")[2]


def qparams(t: Tensor) -> QParams:
    """The affine quantization of tensor ``t`` from its @quantize entry; E0760 when it cannot be one."""
    if t.quant is None:
        raise _fail(f"tensor '{t.name}' has no @quantize entry", t)
    name = quant_op_name(t)
    if name not in QUANT_OPS or not str(t.quant["op"]).startswith(("quant.", name)):
        raise _fail(f"tensor '{t.name}' is quantized by '{t.quant['op']}'; only the quant module's "
                    f"{' and '.join(QUANT_OPS)} are understood", t)
    a = dict(t.quant["attribs"])
    bits = int(a["bits"])
    signed = bool(a.get("signed", True))
    symmetric = bool(a.get("symmetric", False))
    axis_attr = int(a.get("channel_axis", 1))
    if name == "zero_point_linear_quantize":
        r = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
        m = (-r if symmetric else -r - 1) if signed else 0
        scales = [float(s) for s in _values(a["scale"])]
        zps = [int(z) for z in _values(a["zero_point"])]
    else:
        rr = 2 ** bits - 1 - int(signed and symmetric)
        p = 2 ** (bits - 1) - int(symmetric) if signed else 0
        m, r = -p, rr - p
        mins = [float(x) for x in _values(a["min"])]
        maxs = [float(x) for x in _values(a["max"])]
        n = max(len(mins), len(maxs))
        mins, maxs = mins * (n if len(mins) == 1 else 1), maxs * (n if len(maxs) == 1 else 1)
        scales, zps = [], []
        for lo, hi in zip(mins, maxs, strict=True):
            if not hi > lo:
                raise _fail(f"tensor '{t.name}': min_max_linear_quantize needs max > min, got min {lo} max {hi}", t)
            s = (hi - lo) / rr
            z = -p - lo / s
            if abs(z - round(z)) > 1e-6 * max(1.0, abs(z)):
                raise _fail(f"tensor '{t.name}': min_max_linear_quantize with min {lo:g}, max {hi:g} has the "
                            f"zero point {z:.6g}, not an integer: integer arithmetic cannot represent it", t,
                            hint="use symmetric=true, a range whose min is a multiple of (max-min)/"
                            f"{rr}, or zero_point_linear_quantize")
            scales.append(s)
            zps.append(int(round(z)))
    n = max(len(scales), len(zps))
    if len(scales) not in (1, n) or len(zps) not in (1, n):
        raise _fail(f"tensor '{t.name}': scale and zero point packs have different lengths", t)
    axis: int | None = None
    if n > 1:
        axis = axis_attr + t.rank if axis_attr < 0 else axis_attr
        if not 0 <= axis < t.rank or t.shape[axis] != n:
            raise _fail(f"tensor '{t.name}' {list(t.shape)}: {n} per-channel parameters do not match "
                        f"channel_axis {axis_attr}", t)
    scale = np.array(scales * (n if len(scales) == 1 else 1), np.float64)
    zero_point = np.array(zps * (n if len(zps) == 1 else 1), np.int64)
    if np.any(scale <= 0) or not np.all(np.isfinite(scale)):
        raise _fail(f"tensor '{t.name}': scales must be positive and finite", t)
    if bits <= 8 and (signed or bits < 8):
        dtype, offset = "int8", 0
    elif bits == 8:
        dtype, offset = "int8", -128
    elif bits <= 16 and (signed or bits < 16):
        dtype, offset = "int16", 0
    elif bits == 16:
        dtype, offset = "int16", -32768
    elif bits <= 32 and (signed or bits < 32):
        dtype, offset = "int32", 0
    else:
        raise _fail(f"tensor '{t.name}': {bits}-bit {'signed' if signed else 'unsigned'} quantization has no "
                    "integer type (at most 32 bits signed)", t)
    return QParams(op=name, attribs=a, scale=scale, zero_point=zero_point + offset, qmin=m + offset,
                   qmax=r + offset, axis=axis, bits=bits, dtype=dtype, offset=offset)


def _along(values: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    """Per-channel values shaped to broadcast along ``axis`` of a rank-``rank`` array."""
    if axis is None:
        return values.reshape(())
    shape = [1] * rank
    shape[axis] = values.size
    return values.reshape(shape)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    f = np.floor(ax)
    return np.copysign(np.where(ax - f >= 0.5, f + 1, f), x)


def _min_max_params(qp: QParams, rank: int) -> tuple[np.ndarray, np.ndarray, np.float32, int]:
    """min_max_linear_quantize's float32 min and max (along ``qp.axis`` of a rank-``rank`` array),
    its level count r and its offset p (@lower's formulas)."""
    a = qp.attribs
    n = qp.scale.size
    mins = [float(v) for v in _values(a["min"])]
    maxs = [float(v) for v in _values(a["max"])]
    mn = _along(np.asarray(mins * (n if len(mins) == 1 else 1), np.float32), qp.axis, rank)
    mx = _along(np.asarray(maxs * (n if len(maxs) == 1 else 1), np.float32), qp.axis, rank)
    signed, symmetric = bool(a.get("signed", True)), bool(a.get("symmetric", False))
    r = np.float32(2 ** qp.bits - 1 - int(signed and symmetric))
    p = 2 ** (qp.bits - 1) - int(symmetric) if signed else 0
    return mn, mx, r, p


NUMPY_INT = {"int8": np.int8, "int16": np.int16, "int32": np.int32}


def quantize(x: npt.ArrayLike, qp: QParams) -> np.ndarray:
    """The integers the quantize operator computes for real ``x`` (storage encoding, dtype ``qp.dtype``):
    the operator's @lower formula with ``round`` half away from zero. zero_point_linear_quantize divides
    the float32 input by the attribute's double value in float64 (as the @lower evaluator does for a
    per-tensor scale; for per-channel scales it divides in float32, which can round a value within
    float32 precision of a tie the other way); min_max_linear_quantize computes in float32."""
    x = np.asarray(x, np.float32)
    rank = x.ndim
    with np.errstate(all="ignore"):
        if qp.op == "zero_point_linear_quantize":
            scale = _along(qp.scale, qp.axis, rank)  # float64: x / scale is one correctly rounded division
            t = _round_half_away(x.astype(np.float64) / scale)
            t = np.clip(np.nan_to_num(t, nan=0.0, posinf=2.0 ** 40, neginf=-(2.0 ** 40)), -(2.0 ** 40), 2.0 ** 40)
            zp = _along(qp.zero_point - qp.offset, qp.axis, rank)
            q = np.clip(zp + t.astype(np.int64), qp.qmin - qp.offset, qp.qmax - qp.offset)
        else:
            mn, mx, r, p = _min_max_params(qp, rank)
            sc = mx - mn
            t = _round_half_away((np.minimum(np.maximum(x, mn), mx) - mn) / sc * r)
            q = np.nan_to_num(t).astype(np.int64) - p
    return (q + qp.offset).astype(NUMPY_INT[qp.dtype])


def dequantize(q: npt.ArrayLike, qp: QParams) -> np.ndarray:
    """The real value the quantize operator outputs for the integers ``q`` (storage encoding), by the
    operator's own formula in float32: ``real(q - zp) * scale``, or for min_max_linear_quantize
    ``(q + p) / r * (max - min) + min``. Equals ``(q - zero_point) * scale`` up to float rounding."""
    q = np.asarray(q).astype(np.int64)
    rank = q.ndim
    if qp.op == "zero_point_linear_quantize":
        zp = _along(qp.zero_point, qp.axis, rank)
        scale = _along(qp.scale.astype(np.float32), qp.axis, rank)
        return ((q - zp).astype(np.float32) * scale).astype(np.float32)
    mn, mx, r, p = _min_max_params(qp, rank)
    return ((q - qp.offset + p).astype(np.float32) / r * (mx - mn) + mn).astype(np.float32)


# -- fake quantization -------------------------------------------------------------------------------


def quantized_tensors(graph: Graph) -> list[Tensor]:
    """The tensors of ``graph`` (top level) with a @quantize entry."""
    return [t for t in graph.tensors if t.quant is not None]


def has_quantization(graph: Graph) -> bool:
    return any(t.quant is not None for t in graph.tensors)


def _quantize_operation(graph: Graph, t: Tensor, out: Tensor) -> Operation:
    program = graph.program
    found = None
    if program is not None and program.main is not None:
        found = program.resolve_operator(str(t.quant["op"]), program.main)
        if found is None and "quant" in program.modules:
            found = program.resolve_operator(f"quant.{quant_op_name(t)}", program.modules["quant"])
    if found is None:
        raise _fail(f"cannot find the quantize operator '{t.quant['op']}' of tensor '{t.name}'", t,
                    hint="import quant; and name it quant.zero_point_linear_quantize or "
                    "quant.min_max_linear_quantize")
    module, definition = found
    binding = bind(definition, dict(t.quant["attribs"]), [TensorValue(t.dtype, t.shape)],
                   list(t.quant.get("dtypes") or []), Site(span=_span(t)))
    attribs = {a.name: binding.env.get(a.name) for a in binding.signature.attribs}
    return Operation(op=f"{module.name}.{definition.name}", definition=definition, inputs=[t], outputs=[out],
                     attribs=attribs, dtypes=dict(binding.dtypes), label=f"@quantize {t.name}",
                     binding=binding, span=t.span, module=module)


def quantize_step(graph: Graph, t: Tensor) -> tuple[Tensor, Operation]:
    """The quantized tensor ``t`` through its quantize operator: ``(t~q, the operation computing it)``, what
    fake quantization gives ``t``'s readers (also for a graph that runs only some operations this way,
    skriptnd.backends.quantized_split)."""
    out = Tensor(name=f"{t.name}~q", dtype=t.dtype, shape=t.shape, kind="intermediate", bounds=t.bounds,
                 symbolic=t.symbolic)
    return out, _quantize_operation(graph, t, out)


def fake_quantize(graph: Graph) -> Graph:
    """A copy of ``graph`` whose quantized tensors are replaced, for every reader, by the output of their
    quantize operator (inputs, variables and constants before the first operation, the others right
    after the operation computing them). Tensors inside control-flow subgraphs are not handled (E0760)."""
    quantized = quantized_tensors(graph)
    if not quantized:
        return graph
    for op in graph.operations:
        for sub in op.subgraphs.values():
            if has_quantization(sub):
                raise _fail(f"@quantize of tensors inside '{op.op}' subgraphs is not supported")
    subst: dict[int, Tensor] = {}
    new_tensors = list(graph.tensors)
    pending: dict[int, Operation] = {}

    def make(t: Tensor) -> Operation:
        out, op = quantize_step(graph, t)
        new_tensors.append(out)
        subst[id(t)] = out
        return op

    head = [make(t) for t in quantized if t.kind in ("input", "variable", "constant")]
    for t in quantized:
        if t.kind not in ("input", "variable", "constant"):
            pending[id(t)] = make(t)

    def sub_value(v: Value) -> Any:
        if isinstance(v, list):
            return [sub_value(x) for x in v]
        return subst.get(id(v), v) if v is not None else None

    operations = list(head)
    for op in graph.operations:
        operations.append(replace(op, inputs=[sub_value(v) for v in op.inputs]))
        for out in op.outputs:
            for t in out if isinstance(out, list) else [out]:
                if t is not None and id(t) in pending:
                    operations.append(pending[id(t)])
    outputs = [subst.get(id(t), t) for t in graph.outputs]
    names = [graph.output_name(i) for i in range(len(graph.outputs))]
    result = replace(graph, operations=operations, tensors=new_tensors, outputs=outputs, output_names=names)
    return result
