"""Compiling a run of legalized operations into one TOSA program (the executor's TOSA backend).

Each standard operation legalizes to a small TOSA subgraph (skriptnd.tosa.legalize), typically
framed by layout transposes: an NCHW convolution is TRANSPOSE → CONV2D → TRANSPOSE. Run one by one,
those transposes would copy every activation twice per layer and transpose every filter on every
run. A :class:`Program` splices the subgraphs of consecutive operations into one TOSA graph and
simplifies it as a compiler does, before anything runs:

1. constants: operands that are variables or constants of the composed graph are known at plan
   time, so every TOSA operator whose operands are all constants is evaluated once (filters
   transposed to OHWI, biases reshaped, ...);
2. transposes are kept symbolic ("value = TRANSPOSE(base, perms)") and sunk through layout-agnostic
   operators (element-wise, CLAMP, reductions, CONCAT): the element-wise operator runs on the base
   (constant operands are transposed instead), so NHWC → NCHW → NHWC pairs between two
   convolutions cancel; a transpose is only materialized where an operator needs its layout;
3. dead operators are dropped; a CLAMP that is the only user of a convolution is applied in place, and so
   are the activations ONNX spells out in several operators after a convolution: SiLU (MUL(y, SIGMOID(y)))
   and hardswish (y * CLAMP(y * alpha + beta)), each on the output block while it is in cache;
4. each operator gets its fast fp32 form (skriptnd.tosa.program.fast) or the generic kernel, and values
   are freed after their last use.

A program keeps scratch buffers between runs (im2col columns, Winograd tiles), shared by its
operators: one program runs one call at a time (like an Executor; use one per thread).

The graph that runs is TOSA (``Program.ops``, printable with ``str(program)``) plus the int64/int32
conversions at the edges of index computations (``NARROW``/``WIDEN``, see ``BOUNDARY``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from skriptnd import parallel
from skriptnd.compose import ir
from skriptnd.tosa.legalize import graph_constant, legalize
from skriptnd.tosa.legalize.core import Subgraph
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.ops import OPS
from skriptnd.tosa.ops.control_flow import Graph
from skriptnd.tosa.ops.invoke import ITEM, LIST_OPS, apply
from skriptnd.tosa.program.fast import Clamp, Epilogue, HardSwish, Silu, specialise
from skriptnd.tosa.program.fast_extra import extra_form
from skriptnd.tosa.program.straight import Runner, StepFailed, straight_line

#: Operators whose listed operands are element-wise data (the others, e.g. MUL's shift, are not).
_ELEMENTWISE: dict[str, tuple[int, ...]] = {
    **{name: (0,) for name in (
        "CLAMP", "ERF", "SIGMOID", "TANH", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR",
        "LOG", "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "IDENTITY", "CAST")},
    **{name: (0, 1) for name in (
        "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "POW", "EQUAL", "GREATER", "GREATER_EQUAL",
        "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
        "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT")},
    "SELECT": (0, 1, 2),
}
_AXIS_OPS = {"REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_ANY", "REDUCE_ALL"}


@dataclass
class Op:
    """``output = name(*inputs, **attrs)`` over program value names."""

    name: str
    inputs: list[str]
    attrs: dict[str, Any]
    output: str
    #: which spliced subgraph (its index, see Builder.origin) the operator comes from; -1: none
    origin: int = -1


class ProgramError(Exception):
    """An operator of a program failed (a TOSA ERROR_IF or REQUIRE on run-time data, an index
    out of the int32 range, ...): ``op`` is the TOSA operator, ``cause`` the exception."""

    def __init__(self, op: Op, cause: BaseException) -> None:
        super().__init__(f"{op.name}: {cause}")
        self.op, self.cause = op, cause


@dataclass
class _Step:
    fn: Callable[..., Any]
    #: the generic kernel (with the fused clamp, if any), for when ``fn`` declines an operand type
    fallback: Callable[..., Any]
    #: the slots of the operands (a constant's slot holds it from the start of every call: Program._template)
    args: tuple[int, ...]
    out: int
    frees: tuple[int, ...]
    op: Op


@dataclass
class Program:
    """A TOSA graph over ``inputs`` (names in argument order) producing ``outputs``."""

    inputs: list[str]
    outputs: list[str] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: constant -> the graph tensor it holds (maybe re-laid out), for readable names in exports
    hints: dict[str, str] = field(default_factory=dict, repr=False)
    _steps: list[_Step] | None = field(default=None, repr=False)
    _slots: dict[str, int] = field(default_factory=dict, repr=False)
    #: the values list a call starts from: the constants the steps read in their slots, None elsewhere
    _template: list[Any] = field(default_factory=list, repr=False)
    #: the steps as plain tuples (fn, fallback, args, out, frees): what the loop unpacks, without attribute lookups
    _run: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    #: the steps as one straight-line function (skriptnd.tosa.program.straight); None: the loop runs them
    _straight: Runner | None = field(default=None, repr=False)

    def __str__(self) -> str:
        def show(name: str) -> str:
            c = self.constants.get(name)
            return name if c is None else f"{name}:const{list(c.shape)}"

        lines = [f"inputs: {', '.join(self.inputs)}"]
        lines += [f"{o.output} = {o.name}({', '.join(show(i) for i in o.inputs)})"
                  f"{' ' + str(o.attrs) if o.attrs else ''}" for o in self.ops]
        lines.append(f"outputs: {', '.join(show(o) for o in self.outputs)}")
        return "\n".join(lines)

    def __call__(self, args: Sequence[np.ndarray],
                 record: Callable[[Op, float], None] | None = None) -> list[np.ndarray]:
        """The program's outputs for ``args``; ``record(op, seconds)``, when given, is told each TOSA operator's
        time (a profile: skriptnd.profiling), after it ran."""
        if self._steps is None:
            self._plan()
        slots = self._slots
        values = self._template.copy()
        for name, arg in zip(self.inputs, args, strict=True):
            values[slots[name]] = arg
        # on several threads, the operators split their GEMMs over skriptnd.parallel's pool, one BLAS
        # thread each (OpenBLAS's own threads, spinning between calls, would take the pool's cores)
        with np.errstate(all="ignore"):  # inf and NaN results are the operators' (fast.py's docstring)
            if parallel.threads() > 1:
                with parallel.blas_single():
                    self._run_steps(values, record)
            else:
                self._run_steps(values, record)
        return [self.constants[o] if o in self.constants else values[slots[o]] for o in self.outputs]

    def _run_steps(self, values: list[Any], record: Callable[[Op, float], None] | None = None) -> None:
        """The steps in order: a straight loop over prepared tuples (issue 28: a small transformer's program is
        ~200 operators of a few microseconds each, so the loop's own cost counts); timed apart when profiled."""
        if record is not None:
            self._run_recorded(values, record)
            return
        if self._straight is not None:
            try:
                self._straight(values)
            except StepFailed as failed:
                raise ProgramError(self._steps[failed.index].op, failed.cause) from failed.cause  # type: ignore[index]
            return
        i = 0
        try:
            for i, (fn, fallback, args, out, frees) in enumerate(self._run):  # noqa: B007 - i: the failing step
                operands = [values[k] for k in args]
                result = fn(*operands)
                if result is NotImplemented:  # the fast form declined (another dtype): the generic kernel
                    result = fallback(*operands)
                values[out] = result
                for k in frees:
                    values[k] = None
        except Exception as err:  # noqa: BLE001 - attributed to the operator, reported by the caller
            raise ProgramError(self._steps[i].op, err) from err  # type: ignore[index]

    def _run_recorded(self, values: list[Any], record: Callable[[Op, float], None]) -> None:
        step = None
        try:
            for step in self._steps:  # type: ignore[union-attr]
                started = time.perf_counter()
                operands = [values[k] for k in step.args]
                result = step.fn(*operands)
                if result is NotImplemented:
                    result = step.fallback(*operands)
                values[step.out] = result
                for k in step.frees:
                    values[k] = None
                record(step.op, time.perf_counter() - started)
        except Exception as err:  # noqa: BLE001 - attributed to the operator, reported by the caller
            assert step is not None
            raise ProgramError(step.op, err) from err

    def _plan(self) -> None:
        uses = Counter(i for o in self.ops for i in o.inputs) + Counter(self.outputs)
        producer = {o.output: o for o in self.ops}
        fused: dict[str, str] = {}  # CLAMP (SiLU's SIGMOID and MUL) output -> the convolution output it is applied to
        clamps: dict[str, Epilogue] = {}  # a fused CLAMP or SiLU
        for o in self.ops:
            src = producer.get(o.inputs[0]) if o.inputs else None
            if (o.name == "CLAMP" and src is not None and src.name in (*_CONVOLUTIONS, "ADD")  # ADD: residual + relu
                    and uses[src.output] == 1):
                fused[o.output] = src.output
                clamps[src.output] = Clamp(float(o.attrs["min_val"]), float(o.attrs["max_val"]),
                                           o.attrs.get("nan_mode") == "IGNORE")
            silu = _silu_of(o, producer, uses, self.constants)
            if silu is not None and silu[0] not in clamps:  # MUL(y, SIGMOID(y)): y's SIGMOID and MUL go
                fused[o.output] = fused[silu[1]] = silu[0]
                clamps[silu[0]] = Silu()
            swish = _hardswish_of(o, producer, uses, self.constants)
            if swish is not None and swish[0] not in clamps:  # its MUL, ADD, CLAMP and MUL go
                fused.update((name, swish[0]) for name in swish[2])
                clamps[swish[0]] = swish[1]
        alias = fused  # a fused CLAMP's output is its convolution's
        slots: dict[str, int] = {}
        for name in self.inputs:
            slots.setdefault(name, len(slots))
        last: dict[str, int] = {}
        kept = [o for o in self.ops if o.output not in fused]
        for i, o in enumerate(kept):
            for name in o.inputs:
                last[alias.get(name, name)] = i
        keep = {alias.get(o, o) for o in self.outputs}
        steps: list[_Step] = []
        scratch: dict[str, np.ndarray] = {}  # shared by the steps, which run one at a time
        template: dict[int, Any] = {}
        for i, o in enumerate(kept):
            for n in o.inputs:
                if n in self.constants and n not in slots:
                    slots[n] = len(slots)
                    template[slots[n]] = self.constants[n]
            args = tuple(slots[alias.get(n, n)] for n in o.inputs)
            consts = [self.constants.get(n) for n in o.inputs]
            generic = _generic(o)
            if o.output in clamps:  # the generic kernel has no fused clamp: apply it after
                generic = _then_clamp(generic, clamps[o.output])
            fn = _first(specialise(o.name, consts, o.attrs, clamps.get(o.output), scratch),
                        None if o.output in clamps else extra_form(o.name, consts, o.attrs)) or generic
            slots.setdefault(o.output, len(slots))
            frees = tuple(slots[n] for n in set(alias.get(n, n) for n in o.inputs)
                          if n in slots and last.get(n) == i and n not in keep and n not in self.constants)
            steps.append(_Step(fn, generic, args, slots[o.output], frees, o))
        for clamp_out, conv_out in fused.items():
            slots[clamp_out] = slots[conv_out]
        self._template = [template.get(k) for k in range(len(slots) + 1)]
        self._run = [(st.fn, st.fallback, st.args, st.out, st.frees) for st in steps]
        self._straight = straight_line(steps, [slots[o] for o in self.outputs if o not in self.constants])
        self._slots, self._steps = slots, steps


def _first(a: Callable[..., Any] | None, b: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """``a``, then ``b`` where ``a`` declines (fast.py's fp32 ADD, fast_extra.py's int32 ADD)."""
    if a is None or b is None:
        return a or b

    def run(*args: Any) -> Any:
        result = a(*args)
        return b(*args) if result is NotImplemented else result

    return run


_CONVOLUTIONS = ("CONV2D", "DEPTHWISE_CONV2D")


def _silu_of(o: Op, producer: dict[str, Op], uses: Counter[str], constants: dict[str, np.ndarray]) -> tuple[str, str] | None:
    """(y, s) when ``o`` is MUL(y, s) or MUL(s, y) with s = SIGMOID(y), y a convolution's output used by
    these two only, s by ``o`` only, and no shift: a SiLU the convolution can apply (fast.Silu)."""
    if o.name != "MUL" or len(o.inputs) < 2:
        return None
    if len(o.inputs) > 2 and not (o.inputs[2] in constants and not np.any(constants[o.inputs[2]])):
        return None
    for y, s in (o.inputs[:2], o.inputs[1::-1]):
        sig, conv = producer.get(s), producer.get(y)
        if (sig is not None and sig.name == "SIGMOID" and sig.inputs[0] == y and conv is not None
                and conv.name in _CONVOLUTIONS and uses[s] == 1 and uses[y] == 2 and y != s):
            return y, s
    return None


def _scalar(name: str, constants: dict[str, np.ndarray]) -> float | None:
    c = constants.get(name)
    return float(c.reshape(-1)[0]) if c is not None and c.size == 1 and c.dtype == np.float32 else None


def _hardswish_of(o: Op, producer: dict[str, Op], uses: Counter[str],
                  constants: dict[str, np.ndarray]) -> tuple[str, HardSwish, list[str]] | None:
    """(y, the fused form, the outputs it replaces) when ``o`` is MUL(y, CLAMP(ADD(MUL(y, alpha), beta)))
    (operands in either order, scalar constants, no shifts), y a convolution's output used by the two
    MULs only and each step's output by the next only."""
    def other(op: Op, name: str) -> str | None:
        a, b = op.inputs[:2]
        return b if a == name else a if b == name else None

    def plain_mul(op: Op | None) -> bool:
        return (op is not None and op.name == "MUL" and len(op.inputs) >= 2
                and all(i in constants and not np.any(constants[i]) for i in op.inputs[2:]))

    if not plain_mul(o):
        return None
    for y, c in (o.inputs[:2], o.inputs[1::-1]):
        conv, clamp = producer.get(y), producer.get(c)
        if conv is None or conv.name not in _CONVOLUTIONS or uses[y] != 2 or clamp is None or clamp.name != "CLAMP":
            continue
        add = producer.get(clamp.inputs[0])
        if add is None or add.name != "ADD" or uses[c] != 1 or uses[add.output] != 1:
            continue
        scaled = next((producer.get(i) for i in add.inputs if producer.get(i) is not None), None)
        if not plain_mul(scaled) or uses[scaled.output] != 1 or other(scaled, y) is None:  # type: ignore[union-attr]
            continue
        alpha = _scalar(other(scaled, y), constants)  # type: ignore[arg-type, union-attr]
        beta = _scalar(other(add, scaled.output), constants)  # type: ignore[arg-type, union-attr]
        if alpha is None or beta is None:
            continue
        bounds = Clamp(float(clamp.attrs["min_val"]), float(clamp.attrs["max_val"]),
                       clamp.attrs.get("nan_mode") == "IGNORE")
        return y, HardSwish(alpha, beta, bounds), [scaled.output, add.output, c, o.output]  # type: ignore[union-attr]
    return None


def _generic(o: Op) -> Callable[..., Any]:
    if o.name in BOUNDARY:
        return BOUNDARY[o.name]
    if o.name in LIST_OPS or o.name == ITEM:
        return lambda *xs: apply(o.name, list(xs), o.attrs)
    return partial(OPS[o.name], **o.attrs)


def _then_clamp(fn: Callable[..., Any], bounds: Epilogue) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        shift = np.zeros(1, np.int8)
        if isinstance(bounds, Silu):
            y = fn(*args)
            return OPS["MUL"](y, OPS["SIGMOID"](y), shift)
        if isinstance(bounds, HardSwish):
            y = fn(*args)
            t = OPS["ADD"](OPS["MUL"](y, np.full([1] * y.ndim, bounds.alpha, np.float32), shift),
                           np.full([1] * y.ndim, bounds.beta, np.float32))
            c = bounds.bounds
            t = OPS["CLAMP"](t, min_val=c.lo, max_val=c.hi, nan_mode="IGNORE" if c.ignore_nan else "PROPAGATE")
            return OPS["MUL"](y, t, shift)
        return OPS["CLAMP"](fn(*args), min_val=bounds.lo, max_val=bounds.hi,
                            nan_mode="IGNORE" if bounds.ignore_nan else "PROPAGATE")

    return run


#: constants up to this many elements are shared by value within a program (Builder.constant)
_SMALL = 64


def _cse_key(name: str, inputs: list[str], attrs: dict[str, Any]) -> tuple[Any, ...] | None:
    """What identifies an operator's value for Builder._append, or None where two must stay two (control flow,
    list operators, attributes other than plain numbers, strings and lists of them)."""
    if name in LIST_OPS or name == ITEM or name.startswith(("WHILE", "COND", "VARIABLE", "CUSTOM")):
        return None
    for v in attrs.values():
        plain = v if isinstance(v, list | tuple) else [v]
        if not all(x is None or isinstance(x, int | float | str | bool) for x in plain):
            return None
    return (name, tuple(inputs), repr(sorted(attrs.items())))  # repr: -0.0 is not 0.0, True is not 1


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


class Builder:
    """Splices legalized subgraphs into a :class:`Program`, folding and sinking as it goes."""

    def __init__(self) -> None:
        self.program = Program(inputs=[])
        self._n = 0
        #: value -> (base value, perms): the value is TRANSPOSE(base, perms), not computed (yet)
        self._lazy: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._materialized: dict[str, str] = {}
        self._widened: dict[str, str] = {}  # WIDEN output -> its int32 source
        #: WHILE_LOOP output -> (the original input positions it kept, original position -> constant moved in)
        self._loops: dict[str, tuple[list[int], dict[int, str]]] = {}
        #: recorded on the operators appended from now on (the caller's index of what it splices)
        self.origin = -1
        #: (operator, operands, attributes) -> its value: a second identical operator is the first (see _append)
        self._computed: dict[tuple[Any, ...], str] = {}
        #: small unnamed constants by value, so that equal ones (shifts, zero points, 1.0) are one name
        self._small: dict[tuple[Any, ...], str] = {}
        #: RESHAPE output -> its input: a RESHAPE of it reshapes that input instead
        self._reshaped: dict[str, str] = {}

    # -- values -----------------------------------------------------------------------------------

    def _fresh(self, prefix: str = "v") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def input(self) -> str:
        name = self._fresh("in")
        self.program.inputs.append(name)
        return name

    def constant(self, value: np.ndarray, hint: str | None = None) -> str:
        value = np.asarray(value)
        key = (value.dtype.str, value.shape, value.tobytes()) if not hint and value.size <= _SMALL else None
        if key is not None and key in self._small:
            return self._small[key]
        name = self._fresh("c")
        self.program.constants[name] = value
        if hint:
            self.program.hints[name] = hint
        if key is not None:
            self._small[key] = name
        return name

    def _hint(self, names: Sequence[str]) -> str | None:
        return next((self.program.hints[n] for n in names if n in self.program.hints), None)

    def output(self, name: str) -> str:
        """``name`` as a program output (a pending transpose is materialized)."""
        name = self._real(name)
        self.program.outputs.append(name)
        return name

    def _real(self, name: str) -> str:
        lazy = self._lazy.get(name)
        if lazy is None:
            return name
        done = self._materialized.get(name)
        if done is None:
            done = self._append("TRANSPOSE", [lazy[0]], {"perms": list(lazy[1])})
            self._materialized[name] = done
        return done

    # -- operators --------------------------------------------------------------------------------

    def splice(self, subgraph: Subgraph, args: Sequence[Any]) -> list[str]:
        """Add a legalized subgraph whose inputs are ``args`` (program value names, lists for
        packs, None for omitted optionals); returns the names of its outputs, a pack's items in order."""
        ints = getattr(subgraph, "int_values", set())
        env: dict[str, str] = {}
        for local, arg in zip(subgraph.inputs, args, strict=True):
            if isinstance(local, list):
                env.update((n, self.emit(NARROW, [a], {}) if n in ints else a) for n, a in zip(local, arg, strict=True))
            elif local is not None:
                env[local] = self.emit(NARROW, [arg], {}) if local in ints else arg
        for local, value in subgraph.constants.items():
            env[local] = self.constant(value)
        for o in subgraph.ops:
            env[o.output] = self.emit(o.name, [env[i] for i in o.inputs], dict(o.attrs))
        flat = [n for o in subgraph.outputs for n in (o if isinstance(o, list) else [o])]  # a pack: its items
        return [self.emit(WIDEN, [env[o]], {}) if o in ints else env[o] for o in flat]

    def emit(self, name: str, inputs: list[str], attrs: dict[str, Any]) -> str:
        consts = self.program.constants
        if name == "TRANSPOSE":
            base, inner = self._lazy.get(inputs[0], (inputs[0], None))
            perms = tuple(int(p) for p in attrs["perms"])
            if inner is not None:
                perms = tuple(inner[p] for p in perms)
            if base in consts:
                return self.constant(np.ascontiguousarray(np.transpose(consts[base], perms)), self._hint([base]))
            if perms == tuple(range(len(perms))):
                return base
            out = self._fresh()
            self._lazy[out] = (base, perms)
            return out
        if name == "IDENTITY":
            return inputs[0]
        if name == "WHILE_LOOP":
            return self._while_loop([self._real(i) for i in inputs], attrs)
        if name == ITEM and inputs[0] in self._loops:
            kept, constant = self._loops[inputs[0]]
            index = int(attrs["index"])
            if index in constant:  # a constant the loop passed through: itself
                return constant[index]
            return self._append(ITEM, inputs, {"index": kept.index(index)})
        if name == NARROW and inputs[0] in self._widened:  # int32 -> int64 -> int32
            return self._widened[inputs[0]]
        sunk = self._sink(name, inputs, attrs)
        if sunk is not None:
            return sunk
        inputs = [self._real(i) for i in inputs]
        if all(i in consts for i in inputs):
            return self.constant(_evaluate(name, [consts[i] for i in inputs], attrs), self._hint(inputs))
        if name == "RESHAPE" and inputs[0] in self._reshaped and all(i in consts for i in inputs[1:]):
            inputs = [self._reshaped[inputs[0]], *inputs[1:]]  # a reshape of a reshape: one (a view either way)
        out = self._append(name, inputs, attrs)
        if name == WIDEN:
            self._widened[out] = inputs[0]
        if name == "RESHAPE":
            self._reshaped[out] = inputs[0]
        return out

    def _while_loop(self, inputs: list[str], attrs: dict[str, Any]) -> str:
        """A WHILE_LOOP whose loop-invariant constants (inputs the body passes through unchanged, e.g. a
        recurrent weight) become constants of its regions: compilers then see the weight, not a loop-carried
        value. Never evaluated at plan time (its value is a list; it may be long-running)."""
        cond, body = attrs["cond_graph"], attrs["body_graph"]
        consts = self.program.constants
        constant = {i: n for i, n in enumerate(inputs) if n in consts and isinstance(body.body, list)
                    and isinstance(cond.body, list) and body.output_names[i] == body.input_names[i]}
        if not constant:
            out = self._append("WHILE_LOOP", inputs, attrs)
            self._loops[out] = (list(range(len(inputs))), {})
            return out
        kept = [i for i in range(len(inputs)) if i not in constant]

        def without(g: Graph, outputs: bool) -> Graph:
            used = {x for node in g.body for i in node.inputs for x in (i if isinstance(i, list) else [i])}
            used |= {g.output_names[i] for i in (kept if outputs else range(len(g.output_names)))}
            values = {g.input_names[i]: consts[n] for i, n in constant.items() if g.input_names[i] in used}
            return Graph([g.inputs[i] for i in kept], [g.outputs[i] for i in kept] if outputs else list(g.outputs),
                         g.body, [g.input_names[i] for i in kept],
                         [g.output_names[i] for i in kept] if outputs else list(g.output_names),
                         {**g.constants, **values})

        new = {"cond_graph": without(cond, False), "body_graph": without(body, True)}
        out = self._append("WHILE_LOOP", [inputs[i] for i in kept], {**attrs, **new})
        self._loops[out] = (kept, dict(constant))
        return out

    def _append(self, name: str, inputs: list[str], attrs: dict[str, Any]) -> str:
        """A new operator, unless the same operator on the same operands with the same attributes was appended
        before (GPT-2's layer norms compute x - mean twice): then its value. TOSA operators are pure; control
        flow and list operators are always new."""
        key = _cse_key(name, inputs, attrs)
        if key is not None and key in self._computed:
            return self._computed[key]
        out = self._fresh()
        self.program.ops.append(Op(name, inputs, attrs, out, self.origin))
        if key is not None:
            self._computed[key] = out
        return out

    def _sink(self, name: str, inputs: list[str], attrs: dict[str, Any]) -> str | None:
        """Run a layout-agnostic operator on the bases of transposed operands (see the module doc)."""
        lazy = [self._lazy.get(i) for i in inputs]
        perms = {entry[1] for entry in lazy if entry is not None}
        if len(perms) != 1:
            return None
        (p,) = perms
        inv = _inverse(p)
        consts = self.program.constants
        if name in _ELEMENTWISE:
            data = _ELEMENTWISE[name]
            new = list(inputs)
            for i in data:
                if i >= len(inputs):
                    continue
                if lazy[i] is not None:
                    new[i] = lazy[i][0]  # type: ignore[index]
                elif inputs[i] in consts and consts[inputs[i]].ndim == len(p):
                    new[i] = self.constant(np.ascontiguousarray(np.transpose(consts[inputs[i]], inv)),
                                           self._hint([inputs[i]]))
                else:
                    return None
            if any(lazy[i] is not None for i in range(len(inputs)) if i not in data):
                return None
            out = self._fresh()
            self._lazy[out] = (self._append(name, new, attrs), p)
            return out
        if name in _AXIS_OPS or name == "CONCAT":
            if any(entry is None or entry[1] != p for entry in lazy[:len(inputs) if name == "CONCAT" else 1]):
                return None
            bases = [entry[0] for entry in lazy[:len(inputs) if name == "CONCAT" else 1]]  # type: ignore[index]
            new_attrs = dict(attrs, axis=int(p[int(attrs["axis"])]))
            out = self._fresh()
            self._lazy[out] = (self._append(name, bases + inputs[len(bases):], new_attrs), p)
            return out
        return None

    def finish(self) -> Program:
        """Drop operators no output depends on."""
        prog = self.program
        needed = set(prog.outputs)
        kept: list[Op] = []
        for o in reversed(prog.ops):
            if o.output in needed:
                kept.append(o)
                needed.update(o.inputs)
        prog.ops = kept[::-1]
        prog.constants = {k: v for k, v in prog.constants.items() if k in needed}
        prog.hints = {k: v for k, v in prog.hints.items() if k in prog.constants}
        return prog


def graph_program(graph: ir.Graph, variables: dict[str, Any], *, unroll_budget: int = 0) -> Program | None:
    """A whole composed float graph as one simplified program (what the exports write: `sknd export
    --tosa-mlir` and `--spirv`, as the iree backend compiles): every operation's legalized subgraph
    (skriptnd.tosa.legalize) spliced in order by a :class:`Builder`, so constants are folded, filters
    re-laid out once and the NCHW ↔ NHWC transpose pairs between operations cancelled. Inputs and outputs
    are the graph's, in order; ``variables`` by name; static-length recurrent layers legalize through
    skriptnd.tosa.legalize.recurrent (a WHILE_LOOP, or unrolled within ``unroll_budget`` steps). The caller
    has checked that every operation legalizes (skriptnd.tosa.mlir.export.check_exportable). None when the graph
    keeps SkriptND int (int64) values between operations (the program's NARROW / WIDEN edges, which TOSA
    has no type for): the exporters then write it operation by operation."""
    builder = Builder()
    # static-length nn.lstm: a WHILE_LOOP, or unrolled within ``unroll_budget`` steps (not a TABLE rule)
    recurrent = RecurrentLegalizer(unroll_budget=unroll_budget)
    names: dict[int, str] = {}

    def name_of(t: ir.Tensor) -> str:
        if id(t) not in names:
            names[id(t)] = builder.constant(graph_constant(t, variables), t.name)
        return names[id(t)]

    for t in graph.inputs:
        names[id(t)] = builder.input()
    for k, op in enumerate(graph.operations):
        sg = recurrent(op) or legalize(op)[0]
        if sg is None:
            return None
        builder.origin = k
        args = [None if v is None else [name_of(t) for t in v] if isinstance(v, list) else name_of(v)
                for v in op.inputs]
        flat = [t for v in op.outputs for t in (v if isinstance(v, list) else [v])]
        for t, name in zip(flat, builder.splice(sg, args), strict=True):
            names[id(t)] = name
    for t in graph.outputs:
        builder.output(name_of(t))
    program = builder.finish()
    if any(o.name in BOUNDARY for o in program.ops):
        return None
    return program


def _narrow(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.size and (a.min() < -(2 ** 31) or a.max() > 2 ** 31 - 1):
        raise ValueError("an int tensor has values outside the int32 range TOSA supports")
    return a.astype(np.int32)


def _widen(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


#: The two non-TOSA operators of a program: SkriptND ``int`` is int64, TOSA's indices int32
#: (see Subgraph.int_values in skriptnd.tosa.legalize.core); a WIDEN followed by a NARROW cancels.
NARROW, WIDEN = "NARROW_INT64", "WIDEN_INT32"
BOUNDARY: dict[str, Callable[..., np.ndarray]] = {NARROW: _narrow, WIDEN: _widen}


def placeholder_value(o: Op, operands: list[Any], constants: dict[str, np.ndarray],
                      scratch: dict[str, np.ndarray]) -> Any:
    """``o``'s value on placeholder operands, for its type (the MLIR writer's and conv_as_matmul's shape
    reading): ITEM reads its WHILE_LOOP's list; a WHILE_LOOP is not run (its results have its operands'
    types, so its value is the operand list); the others run their fast form (BLAS convolutions) when they
    have one, else the TOSA kernel."""
    if o.name == ITEM:
        return operands[0][int(o.attrs["index"])]
    if o.name == "WHILE_LOOP":
        return list(operands)
    with np.errstate(all="ignore"):
        if o.name not in LIST_OPS and o.name not in BOUNDARY:
            fast = specialise(o.name, [constants.get(i) for i in o.inputs], o.attrs, None, scratch)
            result = fast(*operands) if fast is not None else NotImplemented
            if result is not NotImplemented:
                return np.asarray(result)
        return _evaluate(o.name, operands, o.attrs)


def _evaluate(name: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    if name in BOUNDARY:
        return BOUNDARY[name](*arrays)
    return np.asarray(apply(name, arrays, attrs))
