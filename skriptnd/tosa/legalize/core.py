"""The legalization data structures: :class:`TosaOp`, :class:`Subgraph`, :class:`Rule`, the
:class:`Builder` rules use to emit TOSA operators, and :func:`run_subgraph`.

SkriptND ``int`` is 64-bit; TOSA integers are at most 32-bit. A subgraph value that stands for a
SkriptND ``int`` tensor (an index: ARGMAX's result, GATHER's indices) is listed in
:attr:`Subgraph.int_values`: it is int32 inside the subgraph, and :func:`run_subgraph` narrows such
inputs (checking the range) and widens such outputs to int64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from skriptnd.compose.ir import Operation, Tensor
from skriptnd.tosa.ops.invoke import apply

F32 = np.float32
I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1


@dataclass
class TosaOp:
    """One TOSA operator application: ``output = name(*inputs, **attrs)``; inputs name values."""

    name: str
    inputs: list[str]
    attrs: dict[str, Any]
    output: str


@dataclass
class Subgraph:
    """``inputs``: value names in the operation's input order (a pack: a list of names; an omitted
    optional input: ``None``); ``outputs``: one name per operation output (a pack: a list of names);
    ``constants``: named arrays (TOSA CONST; int64 arrays are CONST_SHAPE operands);
    ``int_values``: input/output names standing for SkriptND ``int`` (int64) tensors, int32 here."""

    inputs: list[Any]
    outputs: list[Any]
    ops: list[TosaOp] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    int_values: set[str] = field(default_factory=set)

    def __str__(self) -> str:
        lines = [f"{o.output} = {o.name}({', '.join(o.inputs)}){o.attrs or ''}" for o in self.ops]
        return "\n".join(lines)


#: legalizes one operation: (its TOSA subgraph or None, why not); handed to the composite rule, which
#: legalizes an operation's components with it (skriptnd.tosa.legalize.legalize)
Legalizer = Callable[[Operation], tuple[Subgraph | None, str]]


def _narrow(name: str, a: ArrayLike) -> np.ndarray:
    a = np.asarray(a)
    if a.size and (a.min() < I32_MIN or a.max() > I32_MAX):
        raise ValueError(f"int input {name!r} has values outside the int32 range TOSA supports")
    return a.astype(np.int32)


def run_subgraph(sg: Subgraph, args: Sequence[Any]) -> list[Any]:
    """Run ``sg`` on numpy ``args`` (the operation's inputs); one array (or list, for a pack) per output."""
    env: dict[str, Any] = dict(sg.constants)
    for name, arg in zip(sg.inputs, args, strict=True):
        if isinstance(name, list):
            env.update((n, _narrow(n, a) if n in sg.int_values else a) for n, a in zip(name, arg, strict=True))
        elif name is not None:
            env[name] = _narrow(name, arg) if name in sg.int_values else arg
    for o in sg.ops:
        env[o.output] = apply(o.name, [env[i] for i in o.inputs], o.attrs)

    def out(n: str) -> Any:
        return env[n].astype(np.int64) if n in sg.int_values else env[n]

    return [[out(n) for n in names] if isinstance(names, list) else out(names) for names in sg.outputs]


class Builder:
    """Emits the TOSA operators of one operation's subgraph."""

    def __init__(self, op: Operation):
        self.op = op
        self.env = op.binding.env if op.binding is not None else {}
        self.sg = Subgraph(inputs=[], outputs=[])
        self._n = 0
        for i, v in enumerate(op.inputs):
            if isinstance(v, list):
                self.sg.inputs.append([f"in{i}_{j}" for j in range(len(v))])
                self.sg.int_values.update(f"in{i}_{j}" for j, t in enumerate(v) if t is not None and t.dtype == "int")
            else:
                self.sg.inputs.append(None if v is None else f"in{i}")
                if v is not None and v.dtype == "int":
                    self.sg.int_values.add(f"in{i}")

    def arg(self, i: int) -> Any:
        return self.sg.inputs[i] if i < len(self.sg.inputs) else None

    def const(self, value: ArrayLike, dtype: DTypeLike = F32) -> str:
        name = f"c{len(self.sg.constants)}"
        self.sg.constants[name] = np.asarray(value, dtype=dtype)
        return name

    def scalar(self, value: ArrayLike, rank: int, dtype: DTypeLike = F32) -> str:
        """A constant of rank ``rank`` (TOSA element-wise operands need equal ranks)."""
        return self.const(np.full([1] * rank, value), dtype)

    def shape(self, dims: Sequence[int]) -> str:
        return self.const([int(d) for d in dims], np.int64)

    def emit(self, name: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        out = f"t{self._n}"
        self.sg.ops.append(TosaOp(name, list(inputs), attrs, out))
        return out

    # frequently used sequences
    def mul(self, x: str, y: str) -> str:
        return self.emit("MUL", x, y, self.const([0], np.int8))

    def neg(self, x: str) -> str:
        return self.emit("NEGATE", x, self.const([0.0]), self.const([0.0]))

    def reshape(self, x: str, from_shape: Sequence[int], to_shape: Sequence[int]) -> str:
        if tuple(from_shape) == tuple(to_shape):
            return x
        return self.emit("RESHAPE", x, self.shape(to_shape))

    def transpose(self, x: str, perms: Sequence[int]) -> str:
        if list(perms) == list(range(len(perms))):
            return x
        return self.emit("TRANSPOSE", x, perms=[int(p) for p in perms])

    def slice(self, x: str, shape: Sequence[int], start: Sequence[int], size: Sequence[int]) -> str:
        if tuple(start) == (0,) * len(start) and tuple(size) == tuple(shape):
            return x
        return self.emit("SLICE", x, self.shape(start), self.shape(size))

    def concat(self, parts: Sequence[str], axis: int) -> str:
        return parts[0] if len(parts) == 1 else self.emit("CONCAT", *parts, axis=axis)

    def done(self, *outputs: Any, ints: Sequence[bool] = ()) -> Subgraph:
        """Finish with ``outputs`` (a name, or a list of names for a pack); ``ints``: which outputs
        are SkriptND ``int`` (int32 here, widened by run_subgraph)."""
        def fresh(o: str) -> str:
            if o in self.sg.constants or any(o == n or (isinstance(n, list) and o in n) for n in self.sg.inputs):
                return self.emit("IDENTITY", o)
            return o

        outs: list[Any] = []
        for k, o in enumerate(outputs):
            if isinstance(o, list):
                seen: set[str] = set()
                names = []
                for x in o:
                    x = fresh(x)
                    if x in seen or any(x == p or (isinstance(p, list) and x in p) for p in outs):
                        x = self.emit("IDENTITY", x)
                    seen.add(x)
                    names.append(x)
                outs.append(names)
            else:
                o = fresh(o)
                if any(o == p or (isinstance(p, list) and o in p) for p in outs):
                    o = self.emit("IDENTITY", o)
                outs.append(o)
                if k < len(ints) and ints[k]:
                    self.sg.int_values.add(o)
        self.sg.outputs = outs
        return self.sg


@dataclass
class Rule:
    """``check(op)``: None if the rule applies, else why not; ``build(op)``: the subgraph."""

    description: str
    build: Callable[[Any], Subgraph]
    check: Callable[[Any], str | None] = lambda op: None


# -- helpers -------------------------------------------------------------------------------------


def ints(v: ArrayLike | None) -> list[int]:
    if v is None:
        return []
    if isinstance(v, int | np.integer):
        return [int(v)]
    return [int(x) for x in v]


def graph_constant(t: Tensor, variables: dict[str, Any]) -> np.ndarray:
    """The value of a composed graph's variable (from ``variables``, by name) or constant tensor, as the
    float32 / bool array a TOSA program holds (SkriptND int constants stay shape operands elsewhere).
    A computed tensor has no value yet: asking for one means the operations are out of order."""
    if t.kind == "variable":
        a = variables[t.name]
    elif t.kind == "constant":
        a = t.value
    else:
        raise ValueError(f"tensor '{t.name}' is used before it is computed")
    return np.asarray(a, np.bool_ if t.dtype == "bool" else np.float32).reshape([int(d) for d in t.shape])


def shape_of(t: Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def env(op: Operation, name: str) -> Any:
    return op.binding.env[name]


def norm_axes(axes: ArrayLike | None, rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in ints(axes)]


def aligned(b: Builder, i: int, expanded: str) -> str:
    """Input ``i`` reshaped to its aligned (broadcast-ready) shape ``b.env[expanded]``."""
    return b.reshape(b.arg(i), shape_of(b.op.inputs[i]), ints(b.env[expanded]))
