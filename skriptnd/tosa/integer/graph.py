"""The result of lowering a quantized graph: a flat integer TOSA graph (:class:`IntegerGraph`) that runs on the
numpy TOSA operators and is written as TOSA MLIR. Its own module so that what runs or writes such a graph
(backends, the MLIR writer) does not import the lowering (:mod:`skriptnd.tosa.integer.lower`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skriptnd import profiling
from skriptnd.compose.input_shapes import shape_mismatch
from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.compose.quantization import NUMPY_INT, QParams, quantize
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.source import NO_SPAN, Span
from skriptnd.tosa.legalize import Subgraph, TosaOp
from skriptnd.tosa.program.exact import Runner

__all__ = ["IntegerGraph", "QValue", "where"]


@dataclass
class QValue:
    """A graph tensor's value in the TOSA graph: its name there and its quantization (None: fp32)."""

    name: str
    qp: QParams | None


@dataclass
class IntegerGraph:
    """A flat TOSA graph computing a composed graph with quantized tensors in integer arithmetic.

    ``inputs``: ``(TOSA value, graph input tensor, its QParams or None for an fp32 input)``;
    ``outputs``: ``(graph output name, TOSA value)`` (the outputs are real: quantized results are
    dequantized in the graph); ``values``: every graph tensor's :class:`QValue` (by tensor name), for
    reading intermediate integers; ``notes``: how each operation was lowered.
    """

    name: str
    inputs: list[tuple[str, Tensor, QParams | None]]
    outputs: list[tuple[str, str]]
    ops: list[TosaOp] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    values: dict[str, QValue] = field(default_factory=dict)
    notes: list[tuple[Operation, str]] = field(default_factory=list)
    #: the constants that are shape operands (int64 too, like int48 values: told apart by name)
    shapes: set[str] = field(default_factory=set)
    #: the composed graph, whose attributes an input-shape diagnostic names (`--attrib batch=2`)
    graph: Graph | None = field(default=None, repr=False)
    #: the runner of each subgraph run so far (by its outputs; None: the graph outputs), whose fast forms
    #: (skriptnd.tosa.program.exact) are made once
    _runners: dict[tuple[str, ...] | None, Runner] = field(default_factory=dict, repr=False, compare=False)

    def subgraph(self, outputs: list[str] | None = None) -> Subgraph:
        """The graph as a :class:`Subgraph` computing the TOSA values ``outputs`` (default: the graph
        outputs), without the operations they do not need."""
        outs = [v for _, v in self.outputs] if outputs is None else list(outputs)
        needed = set(outs)
        kept: list[TosaOp] = []
        for op in reversed(self.ops):
            if op.output in needed:
                kept.append(op)
                needed.update(op.inputs)
        kept.reverse()
        consts = {k: v for k, v in self.constants.items() if k in needed}
        return Subgraph(inputs=[n for n, _, _ in self.inputs], outputs=outs, ops=kept, constants=consts)

    def quantize_inputs(self, inputs: dict[str, Any]) -> list[np.ndarray]:
        """The TOSA graph's input arrays: real values of quantized inputs go through their quantize
        operator (integer arrays are taken as already quantized: an unsigned array holds the operator's own
        codes, 0..255 for uint8, stored with the quantization's offset; a signed one the stored values), fp32
        inputs as float32."""
        arrays = []
        for _, t, qp in self.inputs:
            if t.name not in inputs:
                raise DiagnosticError([Diagnostic(code="E0711", message=f"no value given for input '{t.name}'",
                                                  span=where(t))])
            a = np.asarray(inputs[t.name])
            if tuple(a.shape) != tuple(t.shape):
                raise shape_mismatch(self.graph, t, a.shape)
            if qp is None:
                arrays.append(a.astype(np.float32))
            elif a.dtype.kind == "u" and qp.offset:  # uint8 codes of an unsigned input (a TFLite uint8 model's)
                arrays.append((a.astype(np.int64) + qp.offset).astype(NUMPY_INT[qp.dtype]))
            elif a.dtype.kind in "iu":
                arrays.append(a.astype(NUMPY_INT[qp.dtype]))
            else:
                arrays.append(quantize(a, qp))
        return arrays

    def run(self, inputs: dict[str, Any], outputs: list[str] | None = None) -> dict[str, np.ndarray]:
        """Run on the numpy TOSA operators; ``inputs`` by graph input name (see :meth:`quantize_inputs`).
        Returns the graph outputs by name, or the TOSA values ``outputs`` by value name."""
        key = None if outputs is None else tuple(outputs)
        runner = self._runners.get(key)
        if runner is None:
            runner = self._runners[key] = Runner(self.subgraph(outputs))
        prof = profiling.active()
        record = None
        if prof is not None:  # each TOSA operator's time, under one entry for the whole integer graph
            def record(tosa: str, seconds: float) -> None:
                prof.add_inner("integer TOSA graph", self.name, None, seconds, tosa)
        results = runner(self.quantize_inputs(inputs), record)
        names = [n for n, _ in self.outputs] if outputs is None else list(outputs)
        return dict(zip(names, results, strict=True))

    def value(self, tensor: str) -> QValue:
        return self.values[tensor]


def where(x: Operation | Tensor | None) -> Span:
    span = getattr(x, "span", None)
    return span if isinstance(span, Span) else NO_SPAN
