"""Quantized execution: a composed graph with ``@quantize`` info lowered to an integer TOSA 1.0 graph.

:func:`lower_quantized` turns a graph whose tensors carry ``@quantize`` entries (the quant module's
``zero_point_linear_quantize`` / ``min_max_linear_quantize``, read as affine :class:`QParams` by
:mod:`skriptnd.compose.quantization`) into one flat TOSA graph (:class:`IntegerGraph`) in which every
quantized tensor is an int8 (or int16) tensor holding exactly the integers its quantize operator
computes (up to the rounding of the requantizations, see below). It runs on the numpy TOSA operators
(:meth:`IntegerGraph.run`, ``sknd run --via tosa``) and is written as TOSA MLIR by
:func:`skriptnd.tosa.integer.mlir.to_mlir` (``sknd export --tosa-mlir``).

**Values.** A quantized tensor ``t`` with scale ``s`` and zero point ``z`` holds ``q`` with
``real = (q - z) * s``. Graph inputs with @quantize are integer inputs of the TOSA graph (the host
quantizes real inputs with the input's operator: :meth:`IntegerGraph.quantize_inputs`); quantized
variables and constants become integer ``tosa.const`` s (the operator applied to the float values).

**Operations.**

- ``nn.conv`` (2-D NCX, groups 1 or depthwise: the fp32 legalization's geometry, see
  :mod:`skriptnd.tosa.legalize`): CONV2D / DEPTHWISE_CONV2D on int8 input and filter with their zero
  points (the filter's must be one number: symmetric per-channel filters have 0), an int32 bias at the
  accumulator scale ``s_in * s_w[c]`` (zero point 0: the bias's own integers when its @quantize entry
  has that scale, else its values rounded to it), an int32 accumulator, then RESCALE per output channel
  to the output's int8 quantization (which the output must have);
- ``nn.linear``: MATMUL int8 × int8 → int32 (filter transposed on the host), ADD of the int32 bias,
  RESCALE per output channel;
- int16 activations (zero point 0: TOSA allows zero points only for int8) with int8 filters: CONV2D
  int16 × int8 → int48 with an int48 bias, RESCALE with a 16-bit multiplier (the only one TOSA allows
  for 48-bit values); ``nn.linear`` becomes a 1×1 CONV2D (MATMUL would need int16 filters, and int48
  has no ADD for the bias). The MLIR then needs TOSA's ``int16`` extension;
- quantization-transparent operations (their fp32 legalization only moves or selects values: RESHAPE,
  TRANSPOSE, SLICE, PAD, TILE, CONCAT — its tensor pack flattened —, IDENTITY, MAX_POOL2D, CLAMP): run on
  the integers unchanged, the output keeps the input's quantization; CLAMP bounds (``nn.relu``: ``[0, inf]``) and PAD values are
  quantized (``-inf`` of a max-pool's padding is the lowest integer). This is exact: ``relu``, max and
  the layout operators commute with the quantize operator on its own grid;
- anything else runs in fp32 on dequantized values (CAST to fp32, SUB zero point, MUL scale: the same
  float32 arithmetic as the operator's ``real(q - z) * s``), e.g. the final ``nn.softmax``; a quantized
  output of such an operation (per tensor, int8/int16) is quantized in the graph as its quantize
  operator does (:meth:`_Lowering.quantize_real`: times the reciprocal scale, rounded half away from
  zero, plus the zero point, clamped);
- an output with a quantization different from what the operation produced (e.g. a relu with its own
  @quantize entry) is requantized with an int8 → int8 RESCALE.

**RESCALE parameters** (:func:`rescale_parameters`). A real factor ``S > 0`` is ``m * 2^e`` with
``0.5 <= m < 1`` (``frexp``); the 32-bit multiplier is ``M = floor(m * 2^31 + 1/2)`` (``2^30 <= M <=
2^31``; ``M = 2^31`` becomes ``2^30`` with ``e + 1``) and the shift ``n = 31 - e``, so ``M * 2^-n``
is within ``2^-32`` relative of ``S``; 16-bit multipliers use ``2^15``/``15`` instead. A shift above 62
(``S < 2^-31``) is reduced to 62 by shifting the multiplier right (rounding); a shift below 2 (``S >=
2^29``) is refused. RESCALE then computes ``floor((v * M + 2^(n-1)) / 2^n)``: ``v * S`` rounded half
toward +inf, where the quantize operator rounds half away from zero — the integer result can differ
from fake quantization by one step on exact ties and when ``v * S`` lies within the multiplier's
error of a tie. The TOSA REQUIRE ``|v| < 2^(n-1)`` is checked from a bound of the accumulator.
``lower_quantized(..., rounding=...)`` chooses other roundings of 32-bit RESCALEs, further from the quantize
operator's exact rounding (they round the other way near ties, within ``2^(30-n)`` of a half) but what
TFLite's kernels compute: ``"DOUBLE_ROUND"`` (TOSA's double rounding) is gemmlowp's
``MultiplyByQuantizedMultiplier`` bit for bit (the 31-bit high multiply rounded, then the shift rounded half
away from zero: LiteRT's reference kernels); ``"HIGH_MUL_HALF_UP"`` is the same high multiply followed by a
shift rounded half up, as LiteRT's optimized kernels (ruy, NEON rounding shifts) compute it, written as two
RESCALEs (to int32 by ``M 2^-min(n, 31)``, then by ``2^30 2^-(30 + max(n - 31, 0))``; single where the
accumulator's bound reaches 2^30): the codes of LiteRT's default CPU kernels (tests/test_tflite_int8.py).

Each operation is lowered on its own (NCHW at its boundaries, as the fp32 legalization does); then
layout operations on constants are folded (filters transposed on the host) and TRANSPOSE pairs that
cancel — directly or around a CLAMP — are removed (``simplify``).

Anything else — per-channel activation quantization, quantized outputs of operations that have no
integer lowering, control flow, dynamic shapes, bit widths without an integer type — is refused with an
``E0761`` diagnostic located at the operation. The lowering goes on past a refused operation (its outputs
stand in as :func:`boundary_qparams` says), so :func:`lower_quantized` refuses a graph with one diagnostic
naming every operation that does not lower and what would make it lower (:func:`refusal`), and
:func:`partition` tells a backend which operations lower: the numpy backend runs the others with fake
quantization (skriptnd.backends.quantized_split).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from skriptnd.compose.ir import Graph, Operation, Tensor, flat_tensors
from skriptnd.compose.quantization import NUMPY_INT, QParams, dequantize, has_quantization, qparams, quantize
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.tosa.integer.graph import IntegerGraph, QValue
from skriptnd.tosa.integer.graph import where as _where
from skriptnd.tosa.integer.simplify import simplify_graph
from skriptnd.tosa.legalize import Subgraph, TosaOp, legalize

register_codes({"E0761": "operation cannot be lowered to integer TOSA"})

__all__ = ["ROUNDINGS", "IntegerGraph", "Partition", "boundary_qparams", "lower_quantized", "partition", "refusal",
           "rescale_parameters"]

#: TOSA operators that only move, select or compare values: exact on quantized integers.
TRANSPARENT = {"RESHAPE", "TRANSPOSE", "SLICE", "PAD", "TILE", "CONCAT", "IDENTITY", "MAX_POOL2D", "CLAMP"}
#: the requantization roundings lower_quantized offers (module docstring)
ROUNDINGS = ("SINGLE_ROUND", "DOUBLE_ROUND", "HIGH_MUL_HALF_UP")
_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(2 ** 31), 2 ** 31 - 1)}


def rescale_parameters(scale: float, scale32: bool = True) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``multiplier * 2^-shift ≈ scale`` for TOSA RESCALE (see the module
    docstring); ValueError for a scale that is not positive and finite or too large (shift < 2)."""
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"a rescale factor must be positive and finite, got {scale!r}")
    bits = 31 if scale32 else 15
    mantissa, exponent = math.frexp(scale)  # scale = mantissa * 2^exponent, 0.5 <= mantissa < 1
    multiplier = math.floor(mantissa * (1 << bits) + 0.5)  # exact: a power-of-two scaling of a double
    if multiplier == 1 << bits:
        multiplier, exponent = multiplier >> 1, exponent + 1
    shift = bits - exponent
    if shift > 62:
        drop = shift - 62
        multiplier = (multiplier + (1 << (drop - 1))) >> drop if drop < 64 else 0
        shift = 62
    if shift < 2:
        raise ValueError(f"rescale factor {scale!r} is too large for RESCALE (shift {shift} < 2)")
    return int(multiplier), int(shift)


def _fail(at: Operation | Tensor | None, message: str, hint: str | None = None) -> DiagnosticError:
    """E0761 at an operation (noting its label) or at a tensor's declaration."""
    notes = (Note(f"in operation '{at.label}'"),) if isinstance(at, Operation) and at.label else ()
    return DiagnosticError([Diagnostic(code="E0761", message=message, span=_where(at), notes=notes, hint=hint)])


def _tensors(values: list[Any]) -> list[Tensor]:
    return [t for v in values if v is not None for t in (v if isinstance(v, list) else [v])]


class _Lowering:
    def __init__(self, graph: Graph, variables: dict[str, np.ndarray],
                 input_qparams: Mapping[int, QParams | None] | None = None, rounding: str = "SINGLE_ROUND") -> None:
        self.graph = graph
        self.rounding = rounding  # of 32-bit RESCALEs (TOSA allows only single rounding for 16-bit ones)
        self.variables = variables
        self.input_qparams = input_qparams or {}
        self.ig = IntegerGraph(name=graph.name, inputs=[], outputs=[], graph=graph)
        self.vals: dict[int, QValue] = {}
        #: the operations that did not lower (E0761 each), in graph order: the lowering goes on past them
        self.refused: list[tuple[Operation, Diagnostic]] = []
        self._n = 0

    # -- emitting ---------------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"v{self._n}_{hint}"

    def const(self, value: ArrayLike, dtype: DTypeLike, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.ig.constants[name] = np.asarray(value, dtype=dtype)
        return name

    def shape(self, dims: Sequence[int]) -> str:
        name = self.const([int(d) for d in dims], np.int64, "shape")
        self.ig.shapes.add(name)
        return name

    def emit(self, name: str, *inputs: str, hint: str | None = None, **attrs: Any) -> str:
        out = self.fresh(hint or name.lower())
        self.ig.ops.append(TosaOp(name, list(inputs), attrs, out))
        return out

    def zp(self, value: int, dtype: str) -> str:
        return self.const([int(value)], np.int64 if dtype == "int48" else NUMPY_INT[dtype], "zp")

    def rescale(self, x: str, factors: np.ndarray, in_zp: int, in_dtype: str, out: QParams, bound: int,
                op: Operation | None) -> str:
        """RESCALE ``x`` (values ``v`` with ``|v - in_zp| <= bound``) by ``factors`` (one, or one per
        channel along the last axis) to ``out``'s integer type and zero point."""
        scale32 = in_dtype != "int48"  # a 48-bit value can only be scaled with a 16-bit multiplier
        params = []
        for f in np.atleast_1d(factors):
            try:
                params.append(rescale_parameters(float(f), scale32=scale32))
            except ValueError as err:
                raise _fail(op, f"cannot requantize: {err}") from None
        for (_, shift), f in zip(params, np.atleast_1d(factors), strict=True):
            if scale32 and bound >= 1 << (shift - 1):
                raise _fail(op, f"RESCALE with shift {shift} requires |value| < 2^{shift - 1}, but the value can "
                            f"reach {bound}: the output scale is too small for this operation's range")
            if not scale32 and bound * float(f) >= 2 ** 31 - 1:
                raise _fail(op, f"RESCALE of an int48 value up to {bound} by {float(f):.3g} can leave int32")
        per_channel = len(params) > 1
        lo, hi = out.qmin, out.qmax
        if scale32 and self.rounding == "HIGH_MUL_HALF_UP" and bound < 1 << 30:
            # the 31-bit high multiply rounded (one RESCALE to int32 by M 2^-min(n, 31)), then the remaining
            # shift rounded half up (a RESCALE by 2^30 2^-(30 + max(n - 31, 0))): LiteRT's optimized kernels
            high = self.emit("RESCALE", x, self.const([m for m, _ in params], np.int32, "multiplier"),
                             self.const([min(n, 31) for _, n in params], np.int8, "shift"),
                             self.zp(in_zp, in_dtype), self.zp(0, "int32"), output_dtype="int32", scale32=True,
                             rounding_mode="SINGLE_ROUND", per_channel=per_channel, input_unsigned=False,
                             output_unsigned=False)
            y = self.emit("RESCALE", high, self.const([1 << 30] * len(params), np.int32, "multiplier"),
                          self.const([30 + max(n - 31, 0) for _, n in params], np.int8, "shift"), self.zp(0, "int32"),
                          self.zp(int(out.zero_point[0]), out.dtype), output_dtype=out.dtype, scale32=True,
                          rounding_mode="SINGLE_ROUND", per_channel=per_channel, input_unsigned=False,
                          output_unsigned=False)
        else:
            mult = self.const([m for m, _ in params], np.int32 if scale32 else np.int16, "multiplier")
            shift = self.const([s for _, s in params], np.int8, "shift")
            rounding = "DOUBLE_ROUND" if scale32 and self.rounding == "DOUBLE_ROUND" else "SINGLE_ROUND"
            y = self.emit("RESCALE", x, mult, shift, self.zp(in_zp, in_dtype),
                          self.zp(int(out.zero_point[0]), out.dtype), output_dtype=out.dtype, scale32=scale32,
                          rounding_mode=rounding, per_channel=per_channel, input_unsigned=False, output_unsigned=False)
        if (lo, hi) != _RANGE[out.dtype]:  # a narrower range than the type's (symmetric, fewer bits)
            y = self.emit("CLAMP", y, min_val=lo, max_val=hi)
        return y

    def dequantized(self, v: QValue, rank: int) -> str:
        """fp32 ``(q - zp) * scale`` of a quantized value (zero_point_linear_quantize's own arithmetic)."""
        if v.qp is None:
            return v.name
        qp = v.qp
        shape = [1] * rank
        if qp.axis is not None:
            shape[qp.axis] = qp.scale.size
        f = self.emit("CAST", v.name, output_dtype="fp32")
        # min_max_linear_quantize maps back as (q + p) / r * (max - min) + min: the same value up to float
        # rounding (an ulp or so); zero_point_linear_quantize's real(q - zp) * scale exactly
        zp = self.const(qp.zero_point.astype(np.float32).reshape(shape), np.float32, "zpf")
        sc = self.const(qp.scale.astype(np.float32).reshape(shape), np.float32, "scale")
        d = self.emit("SUB", f, zp)
        return self.emit("MUL", d, sc, self.const([0], np.int8, "shift0"))

    def quantize_real(self, x: str, qp: QParams, rank: int, op: Operation | None) -> str:
        """The integers ``qp``'s quantize operator gives for the fp32 value ``x``: ``zp + round(x / scale)``
        (``x`` times the fp32 reciprocal of the scale, rounded half away from zero as the operator's
        ``round`` — ABS, FLOOR(+0.5), SELECT on the sign —, plus the zero point, clamped to the range in
        fp32, where the values are whole numbers, then CAST to the type)."""
        if qp.axis is not None or qp.dtype not in ("int8", "int16"):
            raise _fail(op, f"cannot quantize an fp32 result inside the graph to {qp.describe()}; only per-tensor "
                        "int8/int16 quantization is supported")
        ones = [1] * rank
        y = self.emit("MUL", x, self.const(np.full(ones, 1.0 / float(qp.scale[0]), np.float32), np.float32, "rscale"),
                      self.const([0], np.int8, "shift0"))
        zero = self.const(np.zeros(ones, np.float32), np.float32, "zero")
        up = self.emit("FLOOR", self.emit("ADD", self.emit("ABS", y),
                                          self.const(np.full(ones, 0.5, np.float32), np.float32, "half")))
        rounded = self.emit("SELECT", self.emit("GREATER_EQUAL", y, zero), up, self.emit("SUB", zero, up))
        q = self.emit("ADD", rounded, self.const(np.full(ones, float(qp.zero_point[0]), np.float32), np.float32, "zpf"))
        q = self.emit("CLAMP", q, min_val=float(qp.qmin), max_val=float(qp.qmax))  # whole numbers: CAST is exact
        return self.emit("CAST", q, output_dtype=qp.dtype)

    # -- values -----------------------------------------------------------------------------------

    def value(self, t: Tensor, op: Operation | None) -> QValue:
        found = self.vals.get(id(t))
        if found is not None:
            return found
        if t.kind in ("variable", "constant"):
            if t.kind == "variable":
                if t.name not in self.variables:
                    raise _fail(op, f"no value for variable '{t.name}'")
                array = np.asarray(self.variables[t.name])
            else:
                array = np.asarray(t.value)
            array = array.reshape([int(d) for d in t.shape])
            if t.quant is not None:
                qp = qparams(t)
                v = QValue(self.const(quantize(array, qp), NUMPY_INT[qp.dtype], _hint(t.name)), qp)
            else:
                v = QValue(self.const(array, np.float32 if t.dtype == "real" else None, _hint(t.name)), None)
            self.vals[id(t)] = v
            return v
        raise _fail(op, f"tensor '{t.name}' is used before it is computed")

    def activation_qp(self, v: QValue, op: Operation, what: str, tensor: Tensor | None = None) -> QParams:
        if v.qp is None:
            raise _fail(op, f"the {what} of '{op.op}' is not quantized (no @quantize entry reaches it), so it "
                        "cannot run in integer arithmetic",
                        hint=f"give '{tensor.name}' a @quantize entry" if tensor is not None
                        else "give the tensor a @quantize entry")
        if v.qp.axis is not None:
            raise _fail(op, f"the {what} of '{op.op}' is quantized per channel; integer TOSA operations need "
                        "per-tensor activation quantization")
        if v.qp.dtype not in ("int8", "int16"):
            raise _fail(op, f"the {what} of '{op.op}' is {v.qp.dtype}; activations must be int8 or int16")
        if v.qp.dtype == "int16" and int(v.qp.zero_point[0]) != 0:
            raise _fail(op, f"the {what} of '{op.op}' is int16 with zero point {int(v.qp.zero_point[0])}; TOSA "
                        "allows zero points only for int8", hint="quantize 16-bit activations with zero_point=0")
        return v.qp

    # -- the graph --------------------------------------------------------------------------------

    def run(self) -> IntegerGraph:
        g = self.graph
        if g.updates:
            name = next(iter(g.updates))
            raise _fail(g.tensor(name),
                        f"the graph updates variable '{name}': stateful graphs are not lowered to integer TOSA")
        for t in g.inputs:
            if any(d is None for d in t.shape):
                raise _fail(t, f"graph input '{t.name}' has a dynamic shape")
            if id(t) in self.input_qparams:  # a region's input: as the whole graph's lowering had it
                qp = self.input_qparams[id(t)]
            else:
                qp = qparams(t) if t.quant is not None else None
            if qp is not None and qp.axis is not None:
                raise _fail(t, f"graph input '{t.name}' is quantized per channel; only per-tensor inputs are "
                            "lowered")
            name = f"in_{_hint(t.name)}"
            self.ig.inputs.append((name, t, qp))
            self.vals[id(t)] = QValue(name, qp)
        for op in g.operations:
            try:
                self.operation(op)
            except DiagnosticError as err:
                if len(err.diagnostics) != 1 or err.diagnostics[0].code != "E0761":
                    raise
                self.refused.append((op, err.diagnostics[0]))
                self.stand_in(op)
        if self.refused:
            return self.ig
        for i, t in enumerate(g.outputs):
            v = self.value(t, None) if id(t) not in self.vals else self.vals[id(t)]
            if t.kind in ("input", "variable", "constant") or v.qp is not None:
                name = self.dequantized(v, t.rank) if v.qp is not None else self.emit("IDENTITY", v.name)
            else:
                name = v.name
            self.ig.outputs.append((g.output_name(i), name))
        for t in g.tensors:
            if id(t) in self.vals:
                self.ig.values[t.name] = self.vals[id(t)]
        return self.ig

    def stand_in(self, op: Operation) -> None:
        """Values for the outputs of a refused operation, so that the lowering can go on and find every
        other refusal: what fake quantization gives its readers (:func:`boundary_qparams`)."""
        for t in flat_tensors(op.outputs):
            self.vals[id(t)] = QValue(self.fresh("refused"), boundary_qparams(t))

    def operation(self, op: Operation) -> None:
        if op.subgraphs:
            raise _fail(op, f"control flow ('{op.op}') is not lowered to integer TOSA")
        for t in _tensors(op.inputs) + _tensors(op.outputs):
            if any(d is None for d in t.shape):
                raise _fail(op, f"'{op.op}' has a dynamic shape")
        if op.op == "nn.conv":
            out, how = self.conv(op)
        elif op.op == "nn.linear":
            out, how = self.linear(op)
        else:
            # tensor packs (layout.concat's inputs) are flattened, as the legalization's subgraph names them
            tensors = [t for v in op.inputs for t in (v if isinstance(v, list) else [v])]
            inputs = [None if t is None else self.value(t, op) if id(t) not in self.vals else self.vals[id(t)]
                      for t in tensors]
            sg, reason = legalize(op)
            if sg is None:
                raise _fail(op, f"'{op.op}' has no TOSA lowering: {reason}")
            names = [n for v in sg.inputs for n in (v if isinstance(v, list) else [v])]
            quantized = [v for v in inputs if v is not None and v.qp is not None]
            if quantized and all(o.name in TRANSPARENT for o in sg.ops) and len(op.outputs) == 1:
                out, how = self.transparent(op, sg, inputs, names), "on the integers (quantization-transparent)"
            else:
                out, how = self.in_float(op, sg, inputs, names, tensors), "fp32 on dequantized values"
        self.ig.notes.append((op, how))
        for t, v in zip(op.outputs, out, strict=True):
            if t is None:
                continue
            if t.quant is not None:
                want = qparams(t)
                if v.qp is None:  # an fp32 result with a quantized output: quantize it in the graph
                    v = QValue(self.quantize_real(v.name, want, t.rank, op), want)
                if not v.qp.same_as(want, rtol=1e-9):
                    ok = ("int8", "int16")
                    if want.axis is not None or v.qp.axis is not None or want.dtype not in ok or v.qp.dtype not in ok \
                            or (want.dtype == "int16" and int(want.zero_point[0]) != 0):
                        raise _fail(op, f"output '{t.name}' needs requantization from {v.qp.describe()} to "
                                    f"{want.describe()}; only per-tensor int8/int16 (zero point 0) is supported")
                    lo, hi = _RANGE[v.qp.dtype]
                    bound = max(abs(hi - int(v.qp.zero_point[0])), abs(lo - int(v.qp.zero_point[0])))
                    name = self.rescale(v.name, v.qp.scale / want.scale, int(v.qp.zero_point[0]), v.qp.dtype, want,
                                        bound, op)
                    v = QValue(name, want)
            self.vals[id(t)] = v

    # -- quantization-transparent and fp32 operations ------------------------------------------------

    def transparent(self, op: Operation, sg: Subgraph, inputs: list[QValue | None], names: list[str | None]
                    ) -> list[QValue]:
        used = {i for o in sg.ops for i in o.inputs}
        # inputs the subgraph never reads (a clamp's constant bounds, folded into CLAMP's attributes) need no
        # quantization of their own
        present = [v for n, v in zip(names, inputs, strict=False) if v is not None and (n is None or n in used)]
        first = present[0].qp
        for v in present:
            if v.qp is None or first is None or not v.qp.same_as(first, rtol=1e-9):
                raise _fail(op, f"the inputs of '{op.op}' have different quantizations; requantizing them to a "
                            "common one is not supported")
            self.activation_qp(v, op, "input")
        assert first is not None
        env: dict[str, str] = {}
        for n, v in zip(names, inputs, strict=False):
            if n is not None and v is not None:
                env[n] = v.name
        for n, a in sg.constants.items():
            if a.dtype == np.int64:  # shape operands
                env[n] = self.shape(a)
            else:  # PAD values: quantized; -inf (max-pool padding) is the lowest integer
                env[n] = self.const(self.quantize_scalar(a, first), NUMPY_INT[first.dtype], "padq")
        for o in sg.ops:
            attrs = dict(o.attrs)
            if o.name == "CLAMP":
                attrs["min_val"] = int(self.quantize_scalar(np.float64(attrs["min_val"]), first).reshape(-1)[0])
                attrs["max_val"] = int(self.quantize_scalar(np.float64(attrs["max_val"]), first).reshape(-1)[0])
            env[o.output] = self.emit(o.name, *[env[i] for i in o.inputs], **attrs)
        return [QValue(env[n], first) for n in sg.outputs]

    @staticmethod
    def quantize_scalar(a: np.ndarray, qp: QParams) -> np.ndarray:
        a = np.asarray(a, np.float64)
        finite = np.isfinite(a)
        q = quantize(np.where(finite, a, 0.0), qp).astype(np.int64)
        q = np.where(np.isposinf(a), qp.qmax, np.where(np.isneginf(a), qp.qmin, q))
        return q.astype(NUMPY_INT[qp.dtype])

    def in_float(self, op: Operation, sg: Subgraph, inputs: list[QValue | None], names: list[str | None],
                 tensors: list[Tensor | None]) -> list[QValue]:
        env: dict[str, str] = {}
        for n, v, t in zip(names, inputs, tensors, strict=False):
            if n is not None and v is not None:
                env[n] = self.dequantized(v, t.rank)
        for n, a in sg.constants.items():
            env[n] = self.shape(a) if a.dtype == np.int64 else self.const(a, a.dtype, "c")
        for o in sg.ops:
            env[o.output] = self.emit(o.name, *[env[i] for i in o.inputs], **o.attrs)
        return [QValue(env[n], None) for n in sg.outputs]

    # -- convolution and linear ----------------------------------------------------------------------

    def _weights(self, op: Operation, i: int, per_channel_axis: int) -> tuple[QValue, QParams]:
        t = op.inputs[i]
        if t is None or t.kind not in ("variable", "constant") or t.quant is None:
            computed = t is None or t.kind not in ("variable", "constant")
            raise _fail(op, f"the filter of '{op.op}' must be a variable or constant with a @quantize entry",
                        hint="weights must be constants: give the filter as a @variable (weights given as graph "
                        "inputs or computed in the graph are not folded into the integer graph)" if computed else
                        f"add '{t.name}: quant.zero_point_linear_quantize{{zero_point=0, bits=8, symmetric=true, "
                        "channel_axis=0, scale=[...]}' to the @quantize block")
        v = self.value(t, op)
        qp = v.qp
        assert qp is not None
        if qp.dtype != "int8":
            raise _fail(op, f"the filter of '{op.op}' is {qp.bits}-bit; TOSA convolutions take int8 filters",
                        hint=f"TOSA has no int{qp.bits} x int{qp.bits} convolution: quantize the filter to 8 bits "
                        "(int16 activations with int8 filters lower)" if qp.bits > 8 else None)
        if qp.axis is not None and qp.axis != per_channel_axis:
            raise _fail(op, f"the filter of '{op.op}' is quantized along axis {qp.axis}; per-channel filter "
                        f"quantization must be along the output channels (channel_axis={per_channel_axis})")
        if np.any(qp.zero_point != qp.zero_point[0]):
            raise _fail(op, f"the filter of '{op.op}' has different zero points per channel; TOSA takes one "
                        "weight zero point", hint="use symmetric per-channel quantization (zero_point=0)")
        return v, qp

    def _bias(self, op: Operation, acc_scale: np.ndarray, channels: int, acc: str = "int32") -> str:
        """The bias at the accumulator scale ``acc_scale`` (per output channel), of the accumulator type
        ``acc`` (int32, or int48 held in int64)."""
        t = op.inputs[2] if len(op.inputs) > 2 else None
        if t is None:
            return self.const(np.zeros(channels), np.int64 if acc == "int48" else np.int32, "bias0")
        if t.kind not in ("variable", "constant"):
            raise _fail(op, f"the bias of '{op.op}' is computed in the graph; only a variable or constant bias "
                        "is folded into the integer accumulator")
        array = np.asarray(self.variables[t.name] if t.kind == "variable" else t.value,
                           np.float32).reshape(-1)
        array = np.broadcast_to(array, (channels,)) if array.size == 1 else array
        if t.quant is not None:
            qp = qparams(t)
            scale = np.broadcast_to(qp.scale, (channels,))
            if qp.dtype == "int32" and np.all(qp.zero_point == 0) and np.allclose(scale, acc_scale, rtol=1e-6,
                                                                                   atol=0.0):
                q = quantize(array.reshape([int(d) for d in t.shape]), qp).reshape(-1)
                return self.const(np.broadcast_to(q, (channels,)), np.int64 if acc == "int48" else np.int32,
                                  _hint(t.name))
            array = dequantize(quantize(array.reshape([int(d) for d in t.shape]), qp), qp).reshape(-1)
            array = np.broadcast_to(array, (channels,))
        ratio = array.astype(np.float64) / acc_scale
        q = np.where(np.abs(ratio) - np.floor(np.abs(ratio)) >= 0.5, np.floor(np.abs(ratio)) + 1,
                     np.floor(np.abs(ratio))) * np.sign(ratio)
        limit = 2 ** 47 - 1 if acc == "int48" else 2 ** 31 - 1
        if np.any(np.abs(q) > limit):
            raise _fail(op, f"the bias of '{op.op}' does not fit {acc} at the accumulator scale")
        return self.const(q, np.int64 if acc == "int48" else np.int32, _hint(t.name))

    def _output_qp(self, op: Operation) -> QParams:
        out = op.outputs[0]
        if out.quant is None:
            raise _fail(op, f"the output '{out.name}' of '{op.op}' has no @quantize entry: the integer "
                        "accumulator cannot be requantized without its scale", hint=f"add '{out.name}: "
                        "quant.zero_point_linear_quantize{...}' to the @quantize block")
        qp = qparams(out)
        if qp.axis is not None or qp.dtype not in ("int8", "int16"):
            raise _fail(op, f"the output '{out.name}' of '{op.op}' must be quantized to int8 or int16 per tensor, "
                        f"not {qp.describe()}")
        if qp.dtype == "int16" and int(qp.zero_point[0]) != 0:
            raise _fail(op, f"the output '{out.name}' of '{op.op}' is int16 with zero point "
                        f"{int(qp.zero_point[0])}; TOSA allows zero points only for int8")
        return qp

    def conv(self, op: Operation) -> tuple[list[QValue], str]:
        x = self.vals.get(id(op.inputs[0])) or self.value(op.inputs[0], op)
        xq = self.activation_qp(x, op, "input", op.inputs[0])
        w, wq = self._weights(op, 1, 0)
        yq = self._output_qp(op)
        sg, reason = legalize(op)
        if sg is None:
            raise _fail(op, f"this convolution has no TOSA lowering: {reason}")
        convs = [i for i, o in enumerate(sg.ops) if o.name in ("CONV2D", "DEPTHWISE_CONV2D")]
        if len(convs) != 1 or any(o.name not in TRANSPARENT for i, o in enumerate(sg.ops) if i != convs[0]):
            raise _fail(op, "unexpected fp32 legalization of nn.conv (expected one CONV2D/DEPTHWISE_CONV2D and "
                        f"layout operations): {[o.name for o in sg.ops]}")
        oc = int(op.outputs[0].shape[-1 if op.attribs.get("data_format", "NCX") == "NXC" else 1])
        wscale = np.broadcast_to(wq.scale, (oc,)).astype(np.float64)
        acc_scale = xq.scale[0] * wscale
        env: dict[str, str] = {sg.inputs[0]: x.name, sg.inputs[1]: w.name}
        bias_in = sg.ops[convs[0]].inputs[2]
        acc_t = "int32" if xq.dtype == "int8" else "int48"
        env[bias_in] = self._bias(op, acc_scale, oc, acc_t)
        for n, a in sg.constants.items():
            if n != bias_in and n not in sg.ops[convs[0]].inputs[3:]:
                env[n] = self.shape(a) if a.dtype == np.int64 else self.const(a, a.dtype, "c")
        result = ""
        for i, o in enumerate(sg.ops):
            if i == convs[0]:
                src, wname, _, _, _ = o.inputs
                acc = self.emit(o.name, env[src], env[wname], env[bias_in], self.zp(int(xq.zero_point[0]), xq.dtype),
                                self.zp(int(wq.zero_point[0]), "int8"), **{**o.attrs, "acc_type": acc_t})
                taps = int(np.prod(op.inputs[1].shape[1:]))
                span = _RANGE[xq.dtype][1] - _RANGE[xq.dtype][0]
                bound = taps * span * 255 + int(np.abs(self.ig.constants[env[bias_in]]).max(initial=0))
                result = self.rescale(acc, acc_scale / yq.scale[0], 0, acc_t, yq, bound, op)
                env[o.output] = result
            else:
                env[o.output] = self.emit(o.name, *[env[k] for k in o.inputs], **o.attrs)
        return [QValue(env[sg.outputs[0]], yq)], (f"{sg.ops[convs[0]].name} {xq.dtype} → {acc_t}, RESCALE "
                                                  f"{'per channel ' if wq.axis is not None else ''}to {yq.dtype}")

    def linear(self, op: Operation) -> tuple[list[QValue], str]:
        x = self.vals.get(id(op.inputs[0])) or self.value(op.inputs[0], op)
        xq = self.activation_qp(x, op, "input", op.inputs[0])
        wt = op.inputs[1]
        w, wq = self._weights(op, 1, 0)
        yq = self._output_qp(op)
        b, c = (int(d) for d in op.inputs[0].shape)
        n = int(wt.shape[0])
        w_nc = self.ig.constants[w.name]
        wscale = np.broadcast_to(wq.scale, (n,)).astype(np.float64)
        acc_scale = xq.scale[0] * wscale
        if xq.dtype == "int16":  # MATMUL would need int16 filters and int48 has no ADD: a 1x1 CONV2D
            wname = self.const(w_nc.reshape(n, 1, 1, c), np.int8, _hint(wt.name) + "_ohwi")
            xs = self.emit("RESHAPE", x.name, self.shape([b, 1, 1, c]))
            bias = self._bias(op, acc_scale, n, "int48")
            acc = self.emit("CONV2D", xs, wname, bias, self.zp(0, "int16"), self.zp(int(wq.zero_point[0]), "int8"),
                            pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], acc_type="int48")
            bound = c * 65535 * 255 + int(np.abs(self.ig.constants[bias]).max(initial=0))
            y = self.rescale(acc, acc_scale / yq.scale[0], 0, "int48", yq, bound, op)
            y = self.emit("RESHAPE", y, self.shape([b, n]))
            return [QValue(y, yq)], (f"1x1 CONV2D int16 → int48 (bias included), RESCALE "
                                     f"{'per channel ' if wq.axis is not None else ''}to {yq.dtype}")
        # [N, C] → [1, C, N] on the host
        wname = self.const(np.ascontiguousarray(w_nc.T).reshape(1, c, n), np.int8, _hint(wt.name) + "_t")
        xs = self.emit("RESHAPE", x.name, self.shape([1, b, c]))
        acc = self.emit("MATMUL", xs, wname, self.zp(int(xq.zero_point[0]), "int8"),
                        self.zp(int(wq.zero_point[0]), "int8"))
        bias = self._bias(op, acc_scale, n)
        bias_values = self.ig.constants[bias]
        self.ig.constants[bias] = bias_values.reshape(1, 1, n)
        acc = self.emit("ADD", acc, bias)
        bound = c * 255 * 255 + int(np.abs(bias_values).max(initial=0))
        y = self.rescale(acc, acc_scale / yq.scale[0], 0, "int32", yq, bound, op)
        y = self.emit("RESHAPE", y, self.shape([b, n]))
        return [QValue(y, yq)], (f"MATMUL int8 → int32, ADD bias, RESCALE "
                                 f"{'per channel ' if wq.axis is not None else ''}to {yq.dtype}")


def boundary_qparams(t: Tensor) -> QParams | None:
    """How an integer TOSA graph takes tensor ``t`` from outside (computed by an operation that runs with fake
    quantization): as the integers of its @quantize entry where an integer operation can read those (per
    tensor, int8, or int16 with zero point 0), else as its real value (fp32; fake quantization has already
    rounded it to its grid)."""
    if t.quant is None or t.dtype != "real":
        return None
    try:
        qp = qparams(t)
    except DiagnosticError:
        return None
    usable = qp.axis is None and (qp.dtype == "int8" or (qp.dtype == "int16" and int(qp.zero_point[0]) == 0))
    return qp if usable else None


@dataclass
class Partition:
    """Which operations of a quantized graph lower to integer TOSA: ``refused``, the others' E0761 (in
    graph order); ``qparams``, by tensor id, each tensor's quantization in the integer graph (None: fp32),
    which a region of the graph lowered on its own takes for its inputs (``lower_quantized(...,
    input_qparams=...)``) so that it lowers exactly as it does within the whole graph."""

    refused: list[tuple[Operation, Diagnostic]]
    qparams: dict[int, QParams | None]
    #: graph inputs quantized per channel, which no integer TOSA graph takes as integers: taken as their
    #: real values, quantized by their quantize operator outside (fake quantization)
    real_inputs: list[Tensor] = field(default_factory=list)


def partition(graph: Graph, variables: dict[str, np.ndarray] | None = None) -> Partition:
    """Lower ``graph`` operation by operation, noting each that refuses (a refused operation's outputs
    stand in as :func:`boundary_qparams` says; an input quantized per channel is taken as real values);
    raises :class:`DiagnosticError` only for what concerns the whole graph (updates, dynamic input shapes,
    E0760)."""
    if variables is None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    real = [t for t in graph.inputs if t.quant is not None and qparams(t).axis is not None]
    lowering = _Lowering(graph, variables, {id(t): None for t in real})
    lowering.run()
    return Partition(lowering.refused, {k: v.qp for k, v in lowering.vals.items()}, real)


def refusal(graph: Graph, refused: Sequence[tuple[Operation, Diagnostic]]) -> Diagnostic:
    """One located E0761 for the operations of ``graph`` that do not lower: the refusal itself when one
    does not, else at the first, a note for each (label, where, why and what would make it lower)."""
    if len(refused) == 1:
        return refused[0][1]
    notes = []
    for op, d in refused:
        name = f"'{op.label}' ({op.op})" if op.label else f"'{op.op}'"
        notes.append(Note(f"{name}: {d.message}" + (f"; to lower it: {d.hint}" if d.hint else ""),
                          span=d.span if d.span.line else None))
    first = refused[0][1]
    return Diagnostic(code="E0761", message=f"{len(refused)} operations of graph '{graph.name}' cannot be lowered to "
                      f"integer TOSA; the first: {first.message}", span=first.span, notes=tuple(notes),
                      hint="each note says what would make its operation lower")


def _hint(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:40] or "t"


def lower_quantized(graph: Graph, variables: dict[str, np.ndarray] | None = None, *,
                    simplify: bool = True, input_qparams: Mapping[int, QParams | None] | None = None,
                    rounding: str = "SINGLE_ROUND") -> IntegerGraph:
    """The integer TOSA graph of ``graph`` (see the module docstring); ``variables`` by name (default:
    the model's tensor files). ``simplify``: fold constant layout operations and cancel TRANSPOSE pairs
    (then ``values`` keeps only the graph tensors whose TOSA values remain; without it every tensor's
    value is there, in the graph's own layout). Raises :class:`DiagnosticError` (E0760/E0761) for what
    it cannot lower: one diagnostic naming every operation that does not lower (:func:`refusal`).
    ``input_qparams``: by tensor id, the quantization of graph inputs that are a region's inputs (see
    :class:`Partition`), instead of their @quantize entries. ``rounding``: of 32-bit RESCALEs, one of
    `ROUNDINGS` (TFLite's requantizations, see the module docstring)."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, not {rounding!r}")
    if not has_quantization(graph):
        raise _fail(None, f"graph '{graph.name}' has no @quantize entries: nothing to run in integer arithmetic")
    if variables is None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    lowering = _Lowering(graph, variables, input_qparams, rounding)
    ig = lowering.run()
    if lowering.refused:
        raise DiagnosticError([refusal(graph, lowering.refused)])
    if simplify:
        simplify_graph(ig)
    return ig
