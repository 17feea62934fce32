"""Running a composed graph (spec chapter 3, §3.1).

Operations run in order: an atomic operation dispatches to a registered kernel when there is
one (intrinsics have to have one), otherwise to the compiled plan of its `@lower` formulas;
`if` and `loop` operations run their subgraphs. Plans are built once per operation and kept,
so repeated runs do no analysis. The top-level graph runs from an execution plan built on the
first run (`Executor.prepare`): callables resolved up front, intermediates freed after their last
use, and (with `optimize`) batch norms folded into convolutions (skriptnd.execute.optimize).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from skriptnd import profiling
from skriptnd.compose.composer import NUMPY_DTYPES, Composer
from skriptnd.compose.extents import (
    UNKNOWN,
    bind_extents,
    extent_symbols,
    input_extents,
    resolve,
    resolve_attribs,
    symbolic_attribs,
)
from skriptnd.compose.input_shapes import describe as _describe
from skriptnd.compose.input_shapes import shape_fits, shape_mismatch
from skriptnd.compose.ir import Graph, Operation, RunAsserts, Tensor, Value, flat_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.execute.optimize import optimize_operations
from skriptnd.execute.specialise import bound_to, composed_shape
from skriptnd.lower import LoweringError, compile_lowering
from skriptnd.semantics.binding import Binder, Site
from skriptnd.semantics.intrinsics import operator_kind
from skriptnd.semantics.values import Pack, TensorValue
from skriptnd.source import NO_SPAN, Span

register_codes({
    "E0711": "wrong input for a graph",
    "E0712": "no implementation for an operator",
    "E0713": "error while running an operation",
})

#: A value while a graph runs: an array, a list of arrays for a tensor pack, None for an omitted input.
RunValue = np.ndarray | list[np.ndarray] | None
#: A kernel computes an operation's outputs from its input arrays (lists for tensor packs).
Kernel = Callable[[Operation, list[Any]], list[Any]]
KERNELS: dict[str, Kernel] = {}


def kernel(name: str) -> Callable[[Kernel], Kernel]:
    """Register a native implementation of an operator (qualified name, e.g. 'algo.top_k')."""

    def register(fn: Kernel) -> Kernel:
        KERNELS[name] = fn
        return fn

    return register


def _span(op: Operation) -> Span:
    return op.span if isinstance(op.span, Span) else NO_SPAN


@dataclass
class Executor:
    graph: Graph
    variables: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: The kernel mapping, handed in by the backend that runs the graph (skriptnd.backends.kernel_maps: the
    #: numpy backend's maps to TOSA programs); the default: the native kernels, else @lower
    kernels: Mapping[str, Kernel] = field(default_factory=lambda: KERNELS)
    #: Called after each top-level operation with (operations done, operations in all): progress bars.
    on_operation: Callable[[int, int], None] | None = None
    _plans: dict[int, Any] = field(default_factory=dict, repr=False)
    #: (operation, actual argument shapes) -> the operation rebound to those shapes (see _specialised)
    _specials: dict[tuple[Any, Any], Operation] = field(default_factory=dict, repr=False)
    #: Plan-time graph rewrites (skriptnd.execute.optimize: batch-norm folding, relu fusion)
    optimize: bool = True
    #: The execution plan of the top-level graph (see prepare), built on the first run
    _program: list[tuple[Any, ...]] | None = field(default=None, repr=False)
    _constants: dict[int, Any] = field(default_factory=dict, repr=False)
    #: Scratch buffers the prepared kernels share (they run one at a time), e.g. im2col columns
    _scratch: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Variables folded into constants by prepare (no longer read)
    _released: set[str] = field(default_factory=set, repr=False)
    #: The values of the graph inputs' dynamic extent symbols in the current run (skriptnd.compose.extents)
    _extents: dict[Any, int] = field(default_factory=dict, repr=False)
    #: operation id -> whether an attribute of it is given by a dynamic extent (see _atomic)
    _symbolic: dict[int, bool] = field(default_factory=dict, repr=False)
    #: operation id -> (tensor id, [(dimension, symbol)]) of its results' dynamic extents (see _note_extents)
    _defines: dict[int, list[tuple[int, list[tuple[int, Any]]]]] = field(default_factory=dict, repr=False)
    #: the graph's constants as (key, value) and its variable tensors, listed once (see run): a run of a small
    #: graph should not walk all its tensors twice (issue 28)
    _fixed: tuple[list[tuple[int, Any]], list[Tensor]] | None = field(default=None, repr=False)
    #: (input tensor id, dtype, shape) of arrays already found to fit a static input: the next array of the
    #: same dtype and shape needs no check again (a small graph's run costs tens of microseconds; issue 28)
    _fitting: set[tuple[int, np.dtype, tuple[int, ...]]] = field(default_factory=set, repr=False)

    def prepare(self) -> None:
        """Build the execution plan once: each top-level operation's callable resolved up front
        (a kernel, specialised by its `prepare(op, scratch)` hook when it has one, else the
        operation's plan),
        its argument / result keys, and the intermediates whose last use it is (freed after it,
        which bounds peak memory by the live activations). With `optimize`, batch norms are first
        folded into the preceding convolutions (skriptnd.execute.optimize). Built once: later
        calls do nothing."""
        if self._program is not None:
            return
        operations = list(self.graph.operations)
        self._constants = {}
        keep = {id(t) for t in self.graph.outputs} | {id(t) for t in self.graph.updates.values()}
        if self.optimize and not self.graph.updates:
            operations, constants = optimize_operations(operations, self.graph, self.variables)
            self._constants = {id(t): t.value for t in constants}
            self._release(operations)
        segmenter = getattr(self.kernels, "compile_segments", None)
        if segmenter is not None:  # a backend compiling runs of operations (e.g. skriptnd.backends.tosa_programs)
            operations = segmenter(operations, self._known, keep)
            self._release(operations)
        last: dict[int, int] = {}
        for i, op in enumerate(operations):
            for key in read_keys(op):
                last[key] = i
        program: list[tuple[Any, ...]] = []
        for i, op in enumerate(operations):
            simple = (op.op not in ("if", "loop") and not op.subgraphs
                      and not any(isinstance(v, list) for v in op.inputs + op.outputs)
                      and not symbolic_attribs(op.attribs))  # attributes given by dynamic extents: per run
            produced = [id(t) for t in flat_tensors(op.outputs)]
            frees = tuple(k for k in set(read_keys(op)) | set(produced) if last.get(k, i) <= i and k not in keep)
            if simple:
                fn = self.kernels.get(op.op)
                call = None
                if fn is not None:
                    prep = getattr(fn, "prepare", None)
                    call = prep(op, self._scratch) if prep is not None else None
                    if call is None:
                        call = _bound_kernel(fn, op)
                program.append((0, op, call, tuple(None if v is None else id(v) for v in op.inputs),
                                tuple(None if v is None else id(v) for v in op.outputs), frees))
            else:
                program.append((1, op, None, (), (), frees))
        self._program = program

    def _release(self, operations: list[Operation]) -> None:
        """Drop the variables and plan-time constants no operation reads any more (folded into
        others, or captured by a compiled program), so the weights are not held twice. A new
        mapping: the caller's is untouched."""
        read = {key for op in operations for key in read_keys(op)}
        self._released |= {t.name for t in self.graph.variables if id(t) not in read}
        self.variables = {k: v for k, v in self.variables.items() if k not in self._released}
        self._constants = {k: v for k, v in self._constants.items() if k in read}

    def _known(self, t: Tensor) -> np.ndarray | None:
        """A tensor's value at plan time: constants, and variables unless the graph updates them."""
        if t.kind == "constant":
            return self._constants.get(id(t), t.value)
        if t.kind == "variable" and not self.graph.updates:
            return self.variables.get(t.name)
        return None

    def check_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[int, Any]:
        """The run's input arrays (by tensor id, converted to the graph's dtypes) after every check that
        ``inputs`` fit the graph: a value for each input, types and shapes within bounds, extents named twice
        agreeing, the asserts on dynamic extents, no unknown names (E0711 / E0501, located). Sets this run's
        extents (skriptnd.compose.extents)."""
        values: dict[int, Any] = {}
        fitting = self._fitting
        for t in self.graph.inputs:
            if t.name not in inputs:
                raise DiagnosticError([Diagnostic(code="E0711", message=f"no value given for input '{t.name}' "
                                                  f"({_describe(t)})", span=_where(t))])
            given = inputs[t.name]
            if type(given) is np.ndarray and (id(t), given.dtype, given.shape) in fitting:
                values[id(t)] = given.astype(NUMPY_DTYPES[t.dtype], copy=False)
                continue
            values[id(t)] = _check_input(self.graph, t, given)
            if type(given) is np.ndarray and not t.dynamic and t.dtype in NUMPY_DTYPES and len(fitting) < 64:
                fitting.add((id(t), given.dtype, given.shape))
        self._extents = input_extents(self.graph, {t.name: np.shape(values[id(t)]) for t in self.graph.inputs}) \
            if any(t.dynamic for t in self.graph.inputs) else {}
        if self.graph.run_asserts is not None:
            self._judge_asserts(self.graph.run_asserts, {t.name: np.shape(values[id(t)]) for t in self.graph.inputs})
        unknown = set(inputs) - {t.name for t in self.graph.inputs}
        if unknown:  # located at the graph's inputs (the @input block), with the closest name
            names = [t.name for t in self.graph.inputs]
            close = difflib.get_close_matches(sorted(unknown)[0], names, n=1)
            raise DiagnosticError([Diagnostic(code="E0711", message=f"graph '{self.graph.name}' has no input "
                                              f"{', '.join(repr(u) for u in sorted(unknown))}; its inputs are "
                                              f"{', '.join(names)}",
                                              span=_where(self.graph.inputs[0]) if self.graph.inputs else NO_SPAN,
                                              hint=f"did you mean '{close[0]}'?" if close else None)])
        return values

    @property
    def extents(self) -> dict[Any, int]:
        """The values of the dynamic extents' symbols in the current (or last checked) run."""
        return self._extents

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._program is None:  # first: it releases folded variables before values holds them
            self.prepare()
        values = self.check_inputs(inputs)
        if self._fixed is None:
            self._fixed = self._fixed_values()
        constants, variables = self._fixed
        values.update(constants)
        for t in variables:
            if t.name not in self.variables:
                raise DiagnosticError([Diagnostic(code="E0701", message=f"no value for variable '{t.name}'",
                                                  span=_where(t))])
            values[id(t)] = self.variables[t.name]
        values.update(self._constants)
        self._run_program(values)
        if self.graph.updates:  # @update (§2.11): the next run sees the new variable values
            variables = dict(self.variables)
            for name, new in self.graph.updates.items():  # graph-level variables: unscoped names
                variables[name] = values[id(new)]
            self.variables = variables
        packed = {i for first, n in self.graph.output_packs.values() for i in range(first, first + n)}
        # an item of an output pack of dynamic length beyond its length in this run is not a result
        return {self.graph.output_name(i): values[id(t)] for i, t in enumerate(self.graph.outputs)
                if i not in packed or id(t) in values}

    def _fixed_values(self) -> tuple[list[tuple[int, Any]], list[Tensor]]:
        """The constants a run puts in its values (those the plan's operations or the outputs read; all of them
        where an `if` or `loop` runs subgraphs, which read what they capture) and the variables not released.
        Listed once, after prepare: a small graph compiled as one module should not copy tens of unread
        constants into every run's values (issue 28)."""
        assert self._program is not None
        constants = [(id(t), t.value) for t in self.graph.tensors if t.kind == "constant"]
        if all(step[0] == 0 for step in self._program):
            read = {k for step in self._program for k in step[3] if k is not None}
            read |= {id(t) for t in self.graph.outputs}
            constants = [(k, v) for k, v in constants if k in read]
        variables = [t for t in self.graph.tensors if t.kind == "variable" and t.name not in self._released]
        return constants, variables

    def _judge_asserts(self, checks: RunAsserts, shapes: dict[str, tuple[int, ...]]) -> None:
        """The graph's asserts on its dynamic extents (`h <= w`, `x.shape[0] <= 50`), on this run's extents and
        input shapes: E0501 at the assert."""
        binder = Binder(checks.signature, Site())
        env: dict[str, Any] = {}
        for name, value in checks.env.items():
            got = resolve(value, self._extents)
            env[name] = value if got is UNKNOWN else got
        packs: dict[str, list[TensorValue]] = {}
        for t in self.graph.inputs:  # the inputs as the asserts see them (`x.shape`), packs `xs.0` ... as packs
            value = TensorValue(t.dtype, tuple(shapes[t.name]))
            if "." in t.name:
                packs.setdefault(t.name.rsplit(".", 1)[0], []).append(value)
            else:
                env[t.name] = value
        env.update({name: Pack(items) for name, items in packs.items()})
        binder.env, binder.dtypes = env, dict(checks.dtypes)
        for a in checks.asserts:
            if not binder.assertion_holds(a):
                binder.report_assertion(a)

    # ------------------------------------------------------------ operations

    def _run_program(self, values: dict[int, Any]) -> None:
        """The prepared plan on ``values``, which run() filled with the inputs, constants and variables."""
        op = None
        program = self._program
        assert program is not None
        report = self.on_operation
        prof = profiling.active()
        started = mark = 0.0
        try:
            for done, (kind, op, call, ins, outs, frees) in enumerate(program):
                if report is not None:
                    report(done, len(program))
                if prof is not None:
                    started, mark = time.perf_counter(), prof.inner
                if kind == 0:
                    args = [None if k is None else values[k] for k in ins]
                    results = call(args) if call is not None else NotImplemented
                    if results is NotImplemented:
                        results = self._atomic_plan(op, args)
                    for k, r in zip(outs, results, strict=False):
                        if k is not None:
                            values[k] = r
                elif op.op == "if":
                    self._run_if(op, values)
                elif op.op == "loop":
                    self._run_loop(op, values)
                else:
                    results = self._atomic(op, [_get(values, v) for v in op.inputs])
                    for out, result in zip(op.outputs, results, strict=False):
                        _put(values, out, result)
                self._note_extents(op, values)
                for k in frees:
                    values.pop(k, None)
                if prof is not None:
                    prof.step(op.op, op.label, _span(op), time.perf_counter() - started, mark)
        except DiagnosticError:
            raise
        except (ArithmeticError, ValueError, IndexError) as err:
            assert op is not None
            raise DiagnosticError([Diagnostic(
                code="E0713", message=f"{op.op} failed: {err}", span=_span(op),
                notes=(Note(f"in operation '{op.label}'"),) if op.label else ())]) from None

    def _run_graph(self, graph: Graph, values: dict[int, Any]) -> None:
        for t in graph.tensors:
            if t.kind == "constant" and id(t) not in values:
                values[id(t)] = t.value
        report = self.on_operation if graph is self.graph else None
        for done, op in enumerate(graph.operations, start=1):
            if report is not None:
                report(done - 1, len(graph.operations))
            if op.op == "if":
                self._run_if(op, values)
                self._note_extents(op, values)
            elif op.op == "loop":
                self._run_loop(op, values)
                self._note_extents(op, values)
            else:
                args = [_get(values, v) for v in op.inputs]
                try:
                    results = self._atomic(op, args)
                except DiagnosticError:
                    raise
                except (ArithmeticError, ValueError, IndexError) as err:
                    raise DiagnosticError([Diagnostic(
                        code="E0713", message=f"{op.op} failed: {err}", span=_span(op),
                        notes=(Note(f"in operation '{op.label}'"),) if op.label else ())]) from None
                for out, result in zip(op.outputs, results, strict=False):
                    _put(values, out, result)
                self._note_extents(op, values)

    def _note_extents(self, op: Operation, values: dict[int, Any]) -> None:
        """The dynamic extents an operation's results give values to (`idx.shape[1]` of a `layout.nonzero`
        result, read by a later attribute; each iteration's in a loop): this run's values of their symbols."""
        found = self._defines.get(id(op))
        if found is None:
            found = self._defines[id(op)] = [(id(t), extent_symbols(t)) for t in flat_tensors(op.outputs)
                                             if t.dynamic]
        for key, symbols in found:
            value = values.get(key)
            if value is not None:
                shape = np.shape(value)
                for k, sym in symbols:
                    if k < len(shape):
                        self._extents[sym] = int(shape[k])

    def _atomic(self, op: Operation, args: list[Any]) -> list[Any]:
        symbolic = self._symbolic.get(id(op))
        if symbolic is None:  # asked once per operation: loop bodies run their operations many times
            symbolic = self._symbolic[id(op)] = symbolic_attribs(op.attribs)
        if symbolic:
            op = self._concrete(op, args)
        fn = self.kernels.get(op.op)
        if fn is not None:
            results = fn(op, args)
            if results is not NotImplemented:  # a kernel declines a case it does not handle: the plan runs
                return results
        return self._atomic_plan(op, args)

    def _atomic_plan(self, op: Operation, args: list[Any]) -> list[Any]:
        if op.definition is None or operator_kind(op.definition) == "intrinsic":
            raise DiagnosticError([Diagnostic(code="E0712", message=f"operator '{op.op}' has no @lower formulas "
                                              "and no native kernel is registered for it", span=_span(op))])
        special = self._specialised(op, args)
        if special is not op:  # bound to this run's shapes (a dynamic extent): the backend's kernel may take
            fn = self.kernels.get(op.op)  # it now (numpy: its TOSA subgraph), once per distinct shapes
            if fn is not None:
                results = fn(special, args)
                if results is not NotImplemented:
                    return results
        op = special
        plan = self._plans.get(id(op))
        if plan is None:
            plan = self._plan(op)
            self._plans[id(op)] = plan
        if isinstance(plan, Graph):  # a composite without a kernel runs its own @compose
            values: dict[int, Any] = {}
            flat = [a for arg in args for a in (arg if isinstance(arg, list) else [arg] if arg is not None else [])]
            for t, a in zip(plan.inputs, flat, strict=True):
                values[id(t)] = a
            self._run_graph(plan, values)
            return _regroup(op.outputs, [values[id(t)] for t in plan.outputs])
        try:
            results = plan.run(args)
            fused = op.attribs.get("fused_relu")  # see skriptnd.execute.optimize
            if fused is not None and fused is not False:
                results = [np.maximum(results[0], 0) if fused is True else np.clip(results[0], 0, fused)]
            return results
        except LoweringError as err:
            raise DiagnosticError([Diagnostic(code="E0710", message=err.message, span=err.span,
                                              notes=(Note(f"while running '{op.op}' ({op.label})", _span(op)),))]) \
                from None

    def _concrete(self, op: Operation, args: list[Any]) -> Operation:
        """The operation with its attributes given by dynamic extents (`layout.reshape{shape=[h, -1]}` on
        `real[h|100, w|100]`) made concrete for this run, and bound to its actual argument shapes (§3.1).
        The extents' values come from the operation's own arguments, else from the graph inputs and the
        results computed so far (see _note_extents)."""
        extents = dict(self._extents)
        tensors: list[Tensor] = []
        shapes: list[tuple[int, ...]] = []
        for v, a in zip(op.inputs, args, strict=False):
            for t, x in zip(v, a or [], strict=False) if isinstance(v, list) else [(v, a)]:
                if t is not None and x is not None:
                    tensors.append(t)
                    shapes.append(np.shape(x))
        bind_extents(tensors, shapes, extents)
        attribs = resolve_attribs(op.attribs, extents)
        if isinstance(attribs, str):
            raise DiagnosticError([Diagnostic(
                code="E0713", message=f"attribute '{attribs}' of {op.op} depends on a dynamic extent that has no "
                f"value in this run ({op.attribs[attribs]})", span=_span(op),
                notes=(Note(f"in operation '{op.label}'"),) if op.label else ())])
        return self._specialised(replace(op, attribs=attribs), args, key=(id(op), repr(sorted(attribs.items()))))

    def _specialised(self, op: Operation, args: list[Any], key: tuple[int, str] | None = None) -> Operation:
        """The operation bound to the shapes of its actual arguments.

        Composition binds an operation to static shapes; a dynamic extent (a graph input `s|10`, an
        operator output `~|k`) or a tensor pack of dynamic length (the scan outputs of a loop with a
        tensor iteration count, §2.10.1) only gets its true size at run time. Then, as §3.1 asks,
        the output shapes are inferred again from the actual input shapes, with the same attributes
        and generic types: the operator is bound anew (once per distinct shapes), and its plan is
        built for that binding.
        """
        if op.binding is None or op.definition is None:
            return op
        actual = tuple(_shape_of(a) for a in args)
        if key is None and actual == tuple(composed_shape(v) for v in op.inputs):
            return op
        full = (key or (id(op),), actual)  # key: an operation whose attributes were made concrete (_concrete)
        special = self._specials.get(full)
        if special is None:
            special = bound_to(op, actual, concrete=key is not None)
            self._specials[full] = special
        return special

    def _plan(self, op: Operation) -> Any:
        if operator_kind(op.definition) == "composite" and self.graph.program is not None:
            return Composer(self.graph.program).expand(op)
        return compile_lowering(op.definition, op.binding)

    def _run_if(self, op: Operation, values: dict[int, Any]) -> None:
        k = 0
        while f"cond{k}" in op.subgraphs:
            cond = op.subgraphs[f"cond{k}"]
            self._run_graph(cond, values)
            if bool(np.asarray(values[id(cond.outputs[0])]).reshape(-1)[0]):
                branch = op.subgraphs[f"then{k}"]
                break
            k += 1
        else:
            branch = op.subgraphs["else"]
        self._run_graph(branch, values)
        for out, t in zip(op.outputs, branch.outputs, strict=False):
            _put(values, out, values[id(t)])

    def _run_loop(self, op: Operation, values: dict[int, Any]) -> None:
        n_carried, n_scans = op.attribs["carried"], op.attribs["scans"]
        body = op.subgraphs["body"]
        params = body.inputs
        carried = [_get(values, v) for v in op.inputs[:n_carried]]
        scans = [_get(values, v) for v in op.inputs[n_carried:n_carried + n_scans]]
        limit = op.attribs.get("max_iterations")
        for pack in scans:  # a scanned pack of dynamic length (see _get) bounds the iterations too
            limit = len(pack) if limit is None else min(limit, len(pack))
        if op.attribs.get("has_count"):
            count = int(np.asarray(_get(values, op.inputs[-1])).reshape(-1)[0])
            limit = count if limit is None else min(limit, count)
        has_index = len(params) > n_carried + n_scans
        dynamic_params = [p for p in params if p.dynamic]
        scan_outputs: list[list[Any]] = [[] for _ in body.outputs[n_carried:]]
        i = 0
        while limit is None or i < limit:
            for p, v in zip(params[:n_carried], carried, strict=True):
                values[id(p)] = v
            for p, pack in zip(params[n_carried:n_carried + n_scans], scans, strict=True):
                values[id(p)] = pack[i]
            if has_index:
                values[id(params[-1])] = np.array(i, dtype=np.int64)
            if dynamic_params:  # this iteration's extents of the loop variables and items (see _note_extents)
                bind_extents(dynamic_params, [np.shape(values[id(p)]) for p in dynamic_params], self._extents)
            if "pre_cond" in op.subgraphs and not self._condition(op.subgraphs["pre_cond"], values):
                break
            self._run_graph(body, values)
            results = [values[id(t)] for t in body.outputs]
            carried = results[:n_carried]
            for k, r in enumerate(results[n_carried:]):
                scan_outputs[k].append(r)
            i += 1
            if "post_cond" in op.subgraphs:
                for p, v in zip(params[:n_carried], carried, strict=True):
                    values[id(p)] = v
                if not self._condition(op.subgraphs["post_cond"], values):
                    break
        for out, v in zip(op.outputs[:n_carried], carried, strict=True):
            _put(values, out, v)
        for out, items in zip(op.outputs[n_carried:], scan_outputs, strict=True):
            _put(values, out, items)

    def _condition(self, graph: Graph, values: dict[int, Any]) -> bool:
        self._run_graph(graph, values)
        return bool(np.asarray(values[id(graph.outputs[0])]).reshape(-1)[0])


def _bound_kernel(fn: Kernel, op: Operation) -> Callable[[list[Any]], Any]:
    return lambda args: fn(op, args)


def read_keys(op: Operation) -> list[int]:
    """The keys of the tensors an operation reads, its subgraphs' reads of enclosing values included."""
    keys = [id(t) for t in flat_tensors(op.inputs)]
    for sub in op.subgraphs.values():
        keys.extend(id(t) for t in sub.outputs)
        for inner in sub.operations:
            keys.extend(read_keys(inner))
    return keys


def _regroup(outputs: list[Value], flat: list[Any]) -> list[Any]:
    """Flat subgraph results back into the operation's outputs (packs as lists)."""
    out: list[Any] = []
    it = iter(flat)
    for v in outputs:
        if v is None:
            out.append(None)
        elif isinstance(v, list):
            out.append([next(it) for _ in v])
        else:
            out.append(next(it))
    return out


def _get(values: dict[int, Any], v: Value) -> Any:
    if v is None:
        return None
    if isinstance(v, list):
        # A pack may have a dynamic length (at most its composed one), e.g. the scan outputs of a
        # loop with a tensor iteration count (§2.10.1): its value is the prefix that was computed.
        items = []
        for t in v:
            if id(t) not in values:
                break
            items.append(values[id(t)])
        return items
    return values[id(v)]


def _put(values: dict[int, Any], out: Value, result: RunValue) -> None:
    if out is None:
        return
    if isinstance(out, list):
        for t, r in zip(out, result, strict=False):
            values[id(t)] = r
        for t in out[len(result):]:  # a shorter (dynamic-length) pack: no stale items from a
            values.pop(id(t), None)  # previous iteration of an enclosing loop may remain
    else:
        values[id(out)] = result


def _shape_of(a: RunValue) -> Any:
    """The shape of an argument value: a tuple, a tuple of tuples for a pack, None for null."""
    if a is None:
        return None
    if isinstance(a, list):
        return tuple(tuple(np.shape(x)) for x in a)
    return tuple(np.shape(a))


def _where(t: Tensor) -> Span:
    return t.span if isinstance(t.span, Span) else NO_SPAN


def _check_input(graph: Graph, t: Tensor, array: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(array)
    expected = NUMPY_DTYPES.get(t.dtype)
    kind = {"real": "f", "int": "iu", "bool": "b"}.get(t.dtype, "")
    # ml_dtypes' bfloat16 (what onnx's numpy_helper gives for an ONNX bfloat16 tensor) is a real too
    floating = arr.dtype.kind == "V" and "float" in arr.dtype.name
    if arr.dtype.kind not in kind and not (floating and t.dtype == "real"):
        raise DiagnosticError([Diagnostic(code="E0711", message=f"input '{t.name}' must be {t.dtype} "
                                          f"({_describe(t)}), got an array of {arr.dtype}", span=_where(t),
                                          hint="convert it, e.g. with numpy's astype")])
    if not shape_fits(t, arr.shape):
        raise shape_mismatch(graph, t, arr.shape)
    return arr.astype(expected, copy=False) if expected is not None else arr


def run(graph: Graph, inputs: Mapping[str, np.ndarray], variables: Mapping[str, np.ndarray] | None = None
        ) -> dict[str, np.ndarray]:
    return Executor(graph, variables or {}).run(inputs)
