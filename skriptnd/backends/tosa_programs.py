"""The TOSA side of the numpy backend: standard operations run as compiled TOSA programs.

The executor (skriptnd.execute) knows no TOSA: it runs the kernel mapping it is handed, and calls the
mapping's ``compile_segments`` hook at plan time when it has one. :class:`TosaKernels` is that mapping for
the numpy and iree backends (skriptnd.backends.kernel_maps hands it to the executor).

At plan time (Executor.prepare) every maximal run of consecutive operations that legalize
(skriptnd.tosa.legalize) becomes one ``tosa.program`` operation: their TOSA subgraphs spliced into a
:class:`skriptnd.tosa.program.build.Program`, with the graph's variables and constants as TOSA constants
(so filters are re-laid out once, and layout transposes between operations cancel). Operations that
do not legalize (and intrinsics) run as before: their @lower plans, or native kernels for intrinsics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from skriptnd import profiling
from skriptnd.compose.ir import Operation, Tensor, flat_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.execute.executor import read_keys
from skriptnd.semantics.intrinsics import STDLIB_INTRINSICS
from skriptnd.source import NO_SPAN, Span
from skriptnd.tosa.legalize import legalize, run_subgraph
from skriptnd.tosa.ops import TosaError, TosaUnpredictable
from skriptnd.tosa.program.build import Builder, ProgramError
from skriptnd.tosa.program.build import Op as TosaOp

PROGRAM_OP = "tosa.program"
Kernel = Callable[[Operation, list[Any]], Any]


def _subgraph(op: Operation, extra: Callable[[Operation], Any] | None = None) -> Any:
    """The operation's TOSA subgraph if it can join a program (legalize refuses control flow);
    ``extra``: a backend's own legalization, tried first. A pack output (layout.split, layout.unstack)
    joins as its items, each a program value: left out, every split of a dynamo-exported ShuffleNetV2
    cut the iree backend's graph into 14 modules with the splits on numpy (issue 30)."""
    if extra is not None:
        sg = extra(op)
        if sg is not None:
            return sg
    return legalize(op)[0]


def compile_segments(operations: list[Operation], known: Callable[[Tensor], np.ndarray | None],
                     keep: set[int], extra: Callable[[Operation], Any] | None = None) -> list[Operation]:
    """``operations`` with every run of legalizable ones replaced by a ``tosa.program`` operation.

    ``known(t)``: a tensor's plan-time value (variables, constants) or None; ``keep``: ids of tensors
    that must stay visible (graph outputs, @update values); ``extra``: a backend's own legalization of
    some operations (e.g. unrolled recurrences for a compiler), tried before the TABLE's rules."""
    last_use: dict[int, int] = {}
    #: items of packs that may be shorter at run time (the scan outputs of loops, §2.10.1)
    dynamic_items: set[int] = set()
    for i, op in enumerate(operations):
        for key in read_keys(op):
            last_use[key] = i
        if op.subgraphs:
            dynamic_items.update(id(t) for v in op.outputs if isinstance(v, list) for t in v)
    result: list[Operation] = []
    run: list[tuple[int, Operation, Any]] = []

    def flush() -> None:
        if not run:
            return
        end = run[-1][0]
        builder = Builder()
        names: dict[int, str] = {}
        external: list[Tensor] = []

        def name_of(t: Tensor) -> str:
            name = names.get(id(t))
            if name is None:
                value = known(t)
                if value is not None:
                    name = builder.constant(np.asarray(value))
                else:
                    name = builder.input()
                    external.append(t)
                names[id(t)] = name
            return name

        produced: list[Tensor] = []
        for k, (_, op, sg) in enumerate(run):
            builder.origin = k
            args = [None if v is None else [name_of(t) for t in v] if isinstance(v, list) else name_of(v)
                    for v in op.inputs]
            outs = builder.splice(sg, args)
            fused = op.attribs.get("fused_relu")  # skriptnd.execute.optimize applied a relu here
            if fused is not None and fused is not False and outs:
                hi = float("inf") if fused is True else float(fused)
                outs[0] = builder.emit("CLAMP", [outs[0]], {"min_val": 0.0, "max_val": hi})
            for t, name in zip(flat_tensors(op.outputs), outs, strict=True):
                names[id(t)] = name
                produced.append(t)
        results = [t for t in produced if id(t) in keep or last_use.get(id(t), -1) > end]
        for t in results:
            builder.output(names[id(t)])
        program = builder.finish()
        first = run[0][1]
        result.append(Operation(op=PROGRAM_OP, definition=None, inputs=list(external), outputs=list(results),
                                attribs={"program": program, "operations": [_source(op) for _, op, _ in run]},
                                label=first.label, span=first.span))
        run.clear()

    for i, op in enumerate(operations):
        packs = [t for v in op.inputs if isinstance(v, list) for t in v]
        sg = None if any(id(t) in dynamic_items for t in packs) else _subgraph(op, extra)
        if sg is None:
            flush()
            result.append(op)
        else:
            run.append((i, op, sg))
    flush()
    return result


def _source(op: Operation) -> Operation:
    """What a program keeps of an operation it compiled: its name, attributes, label and span (for
    diagnostics), not its tensors, whose plan-time values (e.g. folded filters) the program holds
    in its own layout."""
    return replace(op, inputs=[], outputs=[], binding=None, subgraphs={})


def _recorder(prof: profiling.Profile, operations: list[Operation]) -> Callable[[TosaOp, float], None]:
    """Each TOSA operator's time, attributed to the standard operation it implements (its label and line)."""
    def record(top: TosaOp, seconds: float) -> None:
        source = operations[top.origin] if 0 <= top.origin < len(operations) else operations[0]
        span = source.span if isinstance(source.span, Span) else None
        prof.add_inner(source.op, source.label, span, seconds, top.name)
    return record


def _run_program(op: Operation, args: list[Any]) -> list[Any]:
    prof = profiling.active()
    try:
        if prof is None:
            return op.attribs["program"](args)
        return op.attribs["program"](args, _recorder(prof, op.attribs["operations"]))
    except ProgramError as err:  # located at the standard operation the failing TOSA operator implements
        operations = op.attribs["operations"]
        source = operations[err.op.origin] if 0 <= err.op.origin < len(operations) else operations[0]
        cause = str(err.cause) or type(err.cause).__name__
        span = source.span if isinstance(source.span, Span) else NO_SPAN
        raise DiagnosticError([Diagnostic(
            code="E0713", message=f"{source.op} failed: {cause}", span=span,
            notes=(Note(f"in TOSA {err.op.name}, in operation '{source.label}'" if source.label
                        else f"in TOSA {err.op.name}"),))]) from None


def _composed_shapes(op: Operation, args: list[Any]) -> bool:
    """Whether the arguments have the shapes the operation was composed (and legalized) for; in a
    loop, a dynamic extent or pack length may differ at run time (then the @lower plan rebinds)."""
    for v, a in zip(op.inputs, args, strict=True):
        if isinstance(v, list):
            if not isinstance(a, list) or len(a) != len(v) or any(
                    np.shape(x) != t.shape for t, x in zip(v, a, strict=True)):
                return False
        elif v is not None and np.shape(a) != v.shape:
            return False
    return True


def _tosa_kernel(cache: dict[int, Any], fallback: Mapping[str, Kernel]) -> Kernel:
    """One operation's TOSA subgraph (for operations inside control-flow subgraphs, which are not
    compiled into programs), else the native kernel of ``fallback``, else NotImplemented (@lower)."""

    def run(op: Operation, args: list[Any]) -> Any:
        entry = cache.get(id(op))
        if entry is None or entry[0] is not op:
            entry = (op, legalize(op)[0])
            cache[id(op)] = entry
        subgraph = entry[1]
        if subgraph is not None and _composed_shapes(op, args):
            try:
                results = run_subgraph(subgraph, args)
            except (TosaError, TosaUnpredictable) as err:  # the executor locates it at the operation
                raise ValueError(str(err)) from None
            fused = op.attribs.get("fused_relu")  # skriptnd.execute.optimize applied a relu here
            if fused is not None and fused is not False:
                results[0] = np.maximum(results[0], 0) if fused is True else np.clip(results[0], 0, fused)
            return results
        kernel = fallback.get(op.op)
        return NotImplemented if kernel is None else kernel(op, args)

    return run


class TosaKernels(Mapping[str, Kernel]):
    """TOSA first: runs of legalizable operations compile into programs (``compile_segments``, the
    plan-time hook Executor.prepare calls); any other operation runs its ``fallback`` kernel when it
    has one (intrinsics always do; with ``fallback=KERNELS`` also the fast native kernels), else
    its @lower plan."""

    compile_segments = staticmethod(compile_segments)

    def __init__(self, fallback: Mapping[str, Kernel]) -> None:
        self._fallback = fallback
        self._runner = _tosa_kernel({}, fallback)

    def __getitem__(self, name: str) -> Kernel:
        if name == PROGRAM_OP:
            return _run_program
        if name in STDLIB_INTRINSICS and name in self._fallback:
            return self._fallback[name]
        return self._runner

    def get(self, name: str, default: Kernel | None = None) -> Any:
        return self[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fallback)

    def __len__(self) -> int:
        return len(self._fallback)
