"""A graph with @quantize entries on the numpy backend: integer TOSA per operation where it lowers, fake
quantization for the operations that do not (issue 26).

:func:`skriptnd.tosa.integer.lower.partition` lowers the graph operation by operation and collects each
refusal (E0761: e.g. a convolution's output without a @quantize entry, as onnxruntime's Conv -> Relu -> QDQ
pattern imports; weights given as graph inputs; 16-bit filters, which TOSA's convolutions do not take).
When none refuses, the whole graph runs as one integer TOSA graph (:class:`IntegerRunner`). Otherwise the
operations split into regions, maximal runs of consecutive operations that do or do not lower, and the graph
runs on the executor as fake quantization runs it (``--via kernels``: each quantized tensor through its
quantize operator after the operation computing it, :func:`skriptnd.compose.quantization.quantize_step`),
except that each integer region is one ``tosa.integer`` operation: the region lowered on its own, its inputs
taken as the whole graph's lowering has them (:class:`~skriptnd.tosa.integer.lower.Partition`), so it
computes the same integers as it does within the whole graph, on the numpy TOSA operators.

Values cross a region's boundary as fake quantization has them: an integer region quantizes a quantized
input with the tensor's @quantize entry (the integers fake quantization rounds it to; an input it cannot
read as integers, e.g. one quantized per channel, it takes as real values, already on their grid) and gives
its outputs back dequantized (real values on the grid, which the tensor's quantize operator, run after the
region for the operations outside it, leaves as they are). So each refused operation computes what fake
quantization computes, and each other what the integer graph does. The plan says which operations fall
back and why, once.

A graph input quantized per channel, which no integer TOSA graph takes as integers, goes through its
quantize operator first (fake quantization) and the integer regions read it as fp32. Refusals that concern
the whole graph (it updates variables, an input has a dynamic shape) cannot be split: then the whole graph
runs with fake quantization (:class:`FakeQuantRunner`), its plan saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from skriptnd.backends.base import Options, Progress, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.integer_graph import lower_for_running
from skriptnd.compose.ir import Graph, Operation, Tensor, Value, flat_tensors
from skriptnd.compose.quantization import fake_quantize, quantize_step, quantized_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.execute import KERNELS
from skriptnd.execute.executor import Kernel
from skriptnd.tosa.integer import lower as quantized
from skriptnd.tosa.integer.graph import IntegerGraph
from skriptnd.tosa.integer.lower import Partition

__all__ = ["FakeQuantRunner", "INTEGER_OP", "IntegerRunner", "Region", "SplitRunner", "describe", "prepare_quantized"]

#: The executor operation that runs one integer region (attribute ``integer``: its IntegerGraph).
INTEGER_OP = "tosa.integer"


def _where(d: Diagnostic, graph: Graph) -> str:
    return f"{d.span.file}:{d.span.line}:{d.span.col}" if d.span is not None and d.span.line else graph.name


class IntegerRunner(Runner):
    """A quantized graph as its integer TOSA graph on the numpy TOSA operators."""

    def __init__(self, graph: Graph) -> None:
        self.integer = lower_for_running(graph)
        self.plan = [f"running the integer TOSA graph of {graph.name} ({len(self.integer.ops)} TOSA operations)"]

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        return self.integer.run(dict(inputs))


class FakeQuantRunner(ExecutorRunner):
    """A quantized graph run with fake quantization throughout (float arithmetic, every quantized tensor
    rounded to its grid, as ``--via kernels``), where the integer lowering refuses the graph as a whole;
    ``refusal`` is why (E0761), its plan says it."""

    def __init__(self, graph: Graph, refusal: Diagnostic, options: Options) -> None:
        self.refusal = refusal
        super().__init__(fake_quantize(graph), KERNELS, True,
                         [f"{graph.name}: fake quantization for the whole graph (float arithmetic, each quantized "
                          f"tensor rounded to its grid): no integer TOSA graph, {refusal.code} at "
                          f"{_where(refusal, graph)}: {refusal.message}"],
                         threads=options.threads)


@dataclass
class Region:
    """Consecutive operations of the graph that all lower to integer TOSA (``integer``) or all do not."""

    integer: bool
    operations: list[Operation]


def _regions(graph: Graph, refused: set[int]) -> list[Region]:
    regions: list[Region] = []
    for op in graph.operations:
        integer = id(op) not in refused
        if regions and regions[-1].integer == integer:
            regions[-1].operations.append(op)
        else:
            regions.append(Region(integer, [op]))
    return regions


def _run_integer(op: Operation, args: list[Any]) -> list[Any]:
    """The ``tosa.integer`` kernel: the region's IntegerGraph on its inputs (by the region's input names)."""
    ig: IntegerGraph = op.attribs["integer"]
    results = ig.run({name: a for name, a in zip(op.attribs["inputs"], args, strict=True)})
    return [results[t.name] for t in flat_tensors(op.outputs)]


def _integer_operation(graph: Graph, region: Region, part: Partition, variables: dict[str, np.ndarray],
                       later: set[int], seen: Mapping[int, Tensor]) -> Operation:
    """One integer region as a ``tosa.integer`` operation: reads the tensors its operations read from
    outside it (``seen``: what fake quantization gives the readers of each quantized tensor, for an input
    the region takes as real values), writes those read after it (``later``: by id) or graph outputs."""
    produced: set[int] = set()
    inputs: list[Tensor] = []
    for op in region.operations:
        for t in flat_tensors(op.inputs):
            if id(t) not in produced and t.kind not in ("variable", "constant") and all(t is not x for x in inputs):
                inputs.append(t)
        produced.update(id(t) for t in flat_tensors(op.outputs))
    outputs = [t for op in region.operations for t in flat_tensors(op.outputs) if id(t) in later]
    sub = replace(graph, operations=list(region.operations), inputs=inputs, outputs=outputs,
                  output_names=[t.name for t in outputs], updates={})
    given = {id(t): part.qparams.get(id(t)) for t in inputs}
    ig = quantized.lower_quantized(sub, variables, input_qparams=given)
    # a quantized input is quantized by the region itself (the raw value gives the same integers as its
    # quantize operator's output); one it reads as real values is read as fake quantization has it
    reads: list[Value] = [t if given[id(t)] is not None else seen.get(id(t), t) for t in inputs]
    first = region.operations[0]
    return Operation(op=INTEGER_OP, definition=None, inputs=reads, outputs=list(outputs),
                     attribs={"integer": ig, "inputs": [t.name for t in inputs],
                              "operations": [o.label or o.op for o in region.operations]},
                     label=first.label, span=first.span)


def split_graph(graph: Graph, part: Partition, variables: dict[str, np.ndarray]) -> tuple[Graph, list[Region]]:
    """The graph the executor runs (see the module docstring) and its regions."""
    refused = {id(op) for op, _ in part.refused}
    regions = _regions(graph, refused)
    quantized_ids = {id(t) for t in quantized_tensors(graph)}
    tensors = list(graph.tensors)
    seen: dict[int, Tensor] = {}  # quantized tensor id -> its fake-quantized value
    steps: list[Operation] = []

    def step(t: Tensor) -> Operation:
        out, op = quantize_step(graph, t)
        tensors.append(out)
        seen[id(t)] = out
        steps.append(op)
        return op

    def sub(v: Value) -> Any:
        if isinstance(v, list):
            return [sub(x) for x in v]
        return seen.get(id(v), v) if v is not None else None

    outputs_ids = {id(t) for t in graph.outputs}
    operations: list[Operation] = [step(t) for t in graph.tensors
                                   if id(t) in quantized_ids and t.kind in ("input", "variable", "constant")]
    for k, region in enumerate(regions):
        if region.integer:
            later = {id(t) for r in regions[k + 1:] for op in r.operations for t in flat_tensors(op.inputs)}
            op = _integer_operation(graph, region, part, variables, later | outputs_ids, seen)
            operations.append(op)
            operations.extend(step(t) for t in flat_tensors(op.outputs) if id(t) in quantized_ids)
        else:
            for op in region.operations:
                operations.append(replace(op, inputs=[sub(v) for v in op.inputs]))
                operations.extend(step(t) for t in flat_tensors(op.outputs) if id(t) in quantized_ids)
    outputs = [seen.get(id(t), t) for t in graph.outputs]
    # a quantize step nothing reads (e.g. of weights only an integer region reads) is dropped
    read = {id(t) for op in operations for t in flat_tensors(op.inputs)} | {id(t) for t in outputs}
    step_ids = {id(op) for op in steps}
    operations = [op for op in operations if id(op) not in step_ids or id(op.outputs[0]) in read]
    names = [graph.output_name(i) for i in range(len(graph.outputs))]
    return replace(graph, operations=operations, tensors=tensors, outputs=outputs, output_names=names), regions


class SplitRunner(ExecutorRunner):
    """A quantized graph some of whose operations do not lower to integer TOSA: those with fake
    quantization, the others as integer TOSA regions (see the module docstring); ``refused``: each
    refused operation with its E0761; ``regions``: the operations in graph order, by how they run."""

    def __init__(self, graph: Graph, part: Partition, options: Options) -> None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
        self.refused = list(part.refused)
        split, self.regions = split_graph(graph, part, variables)
        total = len(graph.operations)
        integer = sum(len(r.operations) for r in self.regions if r.integer)
        how = "fake quantization (float arithmetic, each quantized tensor rounded to its grid)"
        regions = sum(r.integer for r in self.regions)
        if not integer:
            head = f"{graph.name}: {how} for all {total} operations, none lowers to integer TOSA:"
        elif integer < total:
            head = (f"{graph.name}: integer TOSA for {integer} of {total} operations ({regions} regions), {how} "
                    f"for {total - integer} that do not lower:")
        else:
            head = f"{graph.name}: integer TOSA for all {total} operations, {how} for inputs it cannot take:"
        self.real_inputs = list(part.real_inputs)
        lines = [f"  fake quantization for input '{t.name}': quantized per channel, which no integer TOSA graph "
                 "takes; its quantize operator runs first, the integer TOSA graph reads the result as fp32"
                 for t in self.real_inputs]
        lines += [f"  fake quantization for '{op.label or op.op}' ({op.op}): {d.code} at {_where(d, graph)}: "
                  f"{d.message}" for op, d in self.refused]
        kernels: dict[str, Kernel] = {**KERNELS, INTEGER_OP: _run_integer}
        super().__init__(split, kernels, True, [head, *lines], threads=options.threads)

    @property
    def integer_operations(self) -> list[Operation]:
        """The graph's operations that run as integer TOSA."""
        return [op for r in self.regions if r.integer for op in r.operations]


def prepare_quantized(graph: Graph, options: Options) -> Runner:
    """The runner of a graph with @quantize entries (see the module docstring)."""
    try:
        part = quantized.partition(graph)
    except DiagnosticError as err:
        if err.diagnostics[0].code != "E0761":
            raise
        return FakeQuantRunner(graph, err.diagnostics[0], options)
    if not part.refused and not part.real_inputs:
        return IntegerRunner(graph)
    return SplitRunner(graph, part, options)


def describe(runner: Runner) -> str:
    """How a prepared graph runs, in a few words (the conformance reports' path column)."""
    if isinstance(runner, IntegerRunner):
        inside = sorted({op.op for op, how in runner.integer.notes if how.startswith("fp32")})
        return "integer TOSA" + (f" (fp32 inside for {', '.join(inside)})" if inside else "")
    if isinstance(runner, SplitRunner):
        ops = [f"input {t.name}" for t in runner.real_inputs] + sorted({op.op for op, _ in runner.refused})
        n = len(runner.integer_operations)
        return (f"integer TOSA + fake quantization (fake quantization for {', '.join(ops)}; integer TOSA for {n} "
                "operations)" if n else f"fake quantization ({runner.refused[0][1].message.split(':')[0][:60]})")
    if isinstance(runner, FakeQuantRunner):
        return "fake quantization (" + runner.refusal.message.split(":")[0][:60] + ")"
    return "fp32 TOSA"
