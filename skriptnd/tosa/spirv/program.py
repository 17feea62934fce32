"""The flat TOSA program a SPIR-V module holds: graph inputs, constants, TOSA operators, graph outputs.

:func:`from_graph` takes it from the same lowering the MLIR export uses: for a graph with ``@quantize``
entries the integer graph of :mod:`skriptnd.tosa.integer.lower`, otherwise the graph's simplified TOSA program
(:func:`skriptnd.tosa.program.build.graph_program`: each operation's legalized subgraph spliced in order, constants
folded, inverse transpose pairs cancelled), which :func:`skriptnd.tosa.mlir.export.to_mlir` writes too (so the
two exports hold the same operators with the same attributes). Every value's type comes from running the
program once on the numpy TOSA operators, as the MLIR export does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skriptnd.diagnostics import DiagnosticError
from skriptnd.source import Span
from skriptnd.tosa.legalize import graph_constant, legalize
from skriptnd.tosa.legalize.core import Subgraph, TosaOp
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.ops.invoke import apply


@dataclass
class TosaProgram:
    """``outputs = ops(inputs, constants)``; ``shapes``: the constants that are shape_t operands (int64)."""

    name: str
    inputs: list[str]
    outputs: list[str]
    ops: list[TosaOp] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: set[str] = field(default_factory=set)
    #: value name -> example array (dtype and shape) of every input, constant and operator result
    types: dict[str, np.ndarray] = field(default_factory=dict)
    #: names of the graph's inputs and outputs (for OpName), in order
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    #: operator output -> where it comes from in the source (for diagnostics)
    spans: dict[str, Span] = field(default_factory=dict)

    def subgraph(self) -> Subgraph:
        return Subgraph(inputs=list(self.inputs), outputs=list(self.outputs), ops=list(self.ops),
                        constants=dict(self.constants))

    def run(self, args: Sequence[Any]) -> list[np.ndarray]:
        """The outputs for ``args`` (one array per input, in order) on the numpy TOSA operators."""
        env: dict[str, Any] = dict(self.constants)
        env.update(zip(self.inputs, args, strict=True))
        for o in self.ops:
            env[o.output] = _apply(o, [env[i] for i in o.inputs])
        return [np.asarray(env[n]) for n in self.outputs]


def _apply(o: TosaOp, operands: list[Any]) -> Any:
    return apply(o.name, operands, o.attrs)


def infer_types(p: TosaProgram, examples: Sequence[np.ndarray]) -> None:
    """Fill ``p.types`` by running the program once on ``examples``."""
    types: dict[str, Any] = {n: np.asarray(a) for n, a in p.constants.items()}
    types.update(zip(p.inputs, examples, strict=True))
    for o in p.ops:
        with np.errstate(all="ignore"):
            types[o.output] = _apply(o, [types[i] for i in o.inputs])
    p.types = types


def _span(x: Any) -> Span | None:
    span = getattr(x, "span", None)
    return span if isinstance(span, Span) else None


def from_graph(graph: Any, variables: dict[str, np.ndarray] | None = None) -> TosaProgram:
    """The TOSA program of a composed graph; :class:`DiagnosticError` (E0750/E0760/E0761) when it does not
    lower, exactly as the MLIR export reports it."""
    from skriptnd.compose.quantization import has_quantization
    from skriptnd.tosa.integer.lower import NUMPY_INT, lower_quantized

    if has_quantization(graph):
        ig = lower_quantized(graph, variables)
        sg = ig.subgraph()
        p = TosaProgram(name=ig.name, inputs=list(sg.inputs), outputs=list(sg.outputs), ops=list(sg.ops),
                        constants=dict(sg.constants), shapes=set(ig.shapes) & set(sg.constants),
                        input_names=[t.name for _, t, _ in ig.inputs], output_names=[n for n, _ in ig.outputs])
        examples = [np.zeros([int(d) for d in t.shape], np.float32 if qp is None else NUMPY_INT[qp.dtype])
                    for _, t, qp in ig.inputs]
        infer_types(p, examples)
        return p
    return _from_float_graph(graph, variables)


def _from_float_graph(graph: Any, variables: dict[str, np.ndarray] | None) -> TosaProgram:
    from skriptnd.tosa.mlir.export import check_exportable

    diags = check_exportable(graph)
    if diags:
        raise DiagnosticError(diags)
    if variables is None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    from skriptnd.tosa.program.build import graph_program

    # the simplified program --tosa-mlir writes, but recurrent layers unrolled (no regions in SPV_ARM_graph)
    program = graph_program(graph, variables, unroll_budget=RecurrentLegalizer.MAX_UNROLLED)
    if program is not None:
        p = TosaProgram(name=graph.name, inputs=list(program.inputs), outputs=list(program.outputs),
                        ops=[TosaOp(o.name, list(o.inputs), dict(o.attrs), o.output) for o in program.ops],
                        constants=dict(program.constants),
                        shapes={n for n, a in program.constants.items() if np.asarray(a).dtype == np.int64},
                        input_names=[t.name for t in graph.inputs], output_names=[t.name for t in graph.outputs])
        for o in program.ops:
            span = _span(graph.operations[o.origin]) if o.origin >= 0 else None
            if span is not None:
                p.spans[o.output] = span
        infer_types(p, [np.ones([int(d) for d in t.shape], np.bool_ if t.dtype == "bool" else np.float32)
                        for t in graph.inputs])
        return p
    return _from_float_graph_by_operation(graph, variables)


def _from_float_graph_by_operation(graph: Any, variables: dict[str, np.ndarray]) -> TosaProgram:
    """Each operation's legalized subgraph spliced as it is, for what graph_program does not take (as the
    MLIR export does)."""
    p = TosaProgram(name=graph.name, inputs=[], outputs=[], input_names=[t.name for t in graph.inputs],
                    output_names=[t.name for t in graph.outputs])
    names: dict[int, str] = {}  # id(tensor) -> value name

    def constant(a: np.ndarray, hint: str) -> str:
        name = f"c{len(p.constants)}_{hint}"
        p.constants[name] = a
        if a.dtype == np.int64:  # the MLIR export's tosa.const_shape
            p.shapes.add(name)
        return name

    def value_of(t: Any) -> str:
        if id(t) not in names:
            names[id(t)] = constant(graph_constant(t, variables), t.name)
        return names[id(t)]

    examples = []
    for i, t in enumerate(graph.inputs):
        names[id(t)] = f"in{i}"
        p.inputs.append(f"in{i}")
        examples.append(np.ones([int(d) for d in t.shape], np.bool_ if t.dtype == "bool" else np.float32))
    recurrent = RecurrentLegalizer(unroll_budget=RecurrentLegalizer.MAX_UNROLLED)
    for k, op in enumerate(graph.operations):
        sg = recurrent(op) or legalize(op)[0]
        assert sg is not None  # check_exportable refused what does not legalize
        env: dict[str, str] = {}
        for local, t in zip(sg.inputs, op.inputs, strict=False):
            if local is None or t is None:
                continue
            for n, tt in zip(local, t, strict=True) if isinstance(local, list) else [(local, t)]:
                env[n] = value_of(tt)
        for n, a in sg.constants.items():
            env[n] = constant(np.asarray(a), n)
        for o in sg.ops:
            if o.name == "IDENTITY":  # not an instruction of the set: the value itself
                env[o.output] = env[o.inputs[0]]
                continue
            out = f"v{k}_{o.output}"
            p.ops.append(TosaOp(o.name, [env[i] for i in o.inputs], dict(o.attrs), out))
            env[o.output] = out
            span = _span(op)
            if span is not None:
                p.spans[out] = span
        for local, t in zip(sg.outputs, op.outputs, strict=True):
            for n, tt in zip(local, t, strict=True) if isinstance(local, list) else [(local, t)]:
                names[id(tt)] = env[n]
    p.outputs = [value_of(t) for t in graph.outputs]
    infer_types(p, examples)
    return p
