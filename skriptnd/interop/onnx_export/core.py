"""The building blocks every ONNX converter uses: the converter registry and the emission context.

A converter takes the :class:`Context` and one :class:`~skriptnd.compose.ir.Operation` of a standard
operator and returns the ONNX value names of the operation's outputs (a list per pack output, ``None``
for an omitted optional output); it emits ONNX nodes and initializers through the context. When it
cannot express the operation (an attribute combination, a dynamic extent it needs), it raises
:class:`Unsupported` with the reason; a composite operator is then exported through its own
@compose (see :mod:`.walk`), anything else becomes a located diagnostic.

Converters read shapes from the composed tensors and from the operation's binding (``op.binding.env``: the
stdlib's @using symbols such as conv's ``offset`` and ``ox`` or the aligned broadcast shapes ``ex``/``ey``),
so every attribute written to ONNX is a constant. A dynamic extent (`x: real[n|8, 3, h|64, w|64]`, issue 25)
reaches a converter as a SymInt, its exact expression (:func:`shape`): arithmetic that cancels it (conv's end
padding `(h - 1) + 3 - h - 1`) gives a constant, while a constant that still holds it is refused
(:func:`concrete`, the check of every initializer and node attribute) and so is a decision taken on it (the
guards walk.convert records). So the ONNX model is right at every size, or the operation is refused, located,
naming the extent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, SupportsInt

import numpy as np
import numpy.typing as npt

from skriptnd.compose.extents import is_symbolic
from skriptnd.compose.ir import Graph, Operation, Tensor

if TYPE_CHECKING:  # onnx is an optional dependency, imported when exporting
    from onnx import NodeProto, TensorProto

#: An attribute or binding value that converters read as integers: a Python or numpy int, a sympy integer.
IntLike = SupportsInt

#: SkriptND element types and their numpy/ONNX counterparts (SkriptND int is 64-bit).
NUMPY = {"real": np.float32, "int": np.int64, "bool": np.bool_}


class Unsupported(Exception):
    """The operation (or this attribute combination) has no ONNX form; the message says why."""


#: What a converter returns: the ONNX value name of each output (a list per pack output, None for an
#: omitted optional output).
Results = list[str | list[str] | None]

Converter = Callable[["Context", Operation], Results]

#: stdlib operator name -> converter
CONVERTERS: dict[str, Converter] = {}
#: stdlib operator name -> what it becomes in ONNX (docs/onnx-export.md's table)
DESCRIPTIONS: dict[str, str] = {}


def converter(*names: str, onnx: str) -> Callable[[Converter], Converter]:
    """Register a converter for the given stdlib operators; ``onnx`` says what they become."""

    def register(fn: Converter) -> Converter:
        for name in names:
            assert name not in CONVERTERS, f"two ONNX converters for {name}"
            CONVERTERS[name] = fn
            DESCRIPTIONS[name] = onnx
        return fn

    return register


def ints(v: IntLike | Iterable[IntLike] | None) -> list[int]:
    """A list of Python ints from an attribute or binding value (scalar, list, numpy, sympy)."""
    if v is None:
        return []
    if isinstance(v, list | tuple | np.ndarray):
        return [_int(x) for x in v]
    return [_int(v)]


def product(values: Iterable[int]) -> int:
    """The product of extents, exact for dynamic ones (numpy's prod would take their sample values)."""
    out = 1
    for v in values:
        out = out * v
    return out


def _int(x: IntLike) -> int:
    """An int; a dynamic extent's SymInt stays one (int() would give its sample value: see the docstring)."""
    return x if is_symbolic(x) else int(x)  # type: ignore[return-value]


def per_dim(v: IntLike | Iterable[IntLike] | None, d: int, default: int = 1) -> list[int]:
    """A per-dimension attribute (a single value stands for every dimension)."""
    v = ints(v) or [default]
    return v * d if len(v) == 1 else v


def shape(t: Tensor) -> list[int]:
    """The shape of a composed tensor: a dynamic extent named by the graph's inputs (`h`, `h * w`) as a SymInt
    of its expression (see the module docstring); Unsupported for one without an expression (an extent only the
    data gives, or an `if` whose branches differ)."""
    if t.shape is None:
        raise Unsupported(f"tensor '{t.name}' has no known rank")
    if not any(d is None for d in t.shape):
        return [int(d) for d in t.shape]
    from skriptnd.semantics.symbolic import SymInt, symbol  # lazy: sympy, only for dynamic extents

    symbolic = list(t.symbolic or (None,) * len(t.shape))
    for k, (d, e) in enumerate(zip(t.shape, symbolic, strict=True)):
        if d is None and e is None:
            if t.kind != "input":
                raise Unsupported(f"tensor '{t.name}' has a dynamic shape {_dims(t.shape)} that this mapping needs "
                                  "static")
            symbolic[k] = symbol(f"{t.name}_{k}")  # an unnamed input extent (`~|8`), as compose.frame names it

    bounds = t.bounds or (None,) * len(t.shape)
    return [int(d) if d is not None else SymInt(b if b is not None else 1, e)
            for d, e, b in zip(t.shape, symbolic, bounds, strict=True)]


def concrete(value: Any, what: str) -> Any:
    """``value`` (a number, or nested lists/tuples of them) when it holds no dynamic extent; Unsupported
    naming the extent otherwise: it would be written into the model as its sample value."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif is_symbolic(v):
            raise Unsupported(f"{what} depends on the dynamic extent '{v}', which ONNX would get as a constant")
    return value


def _dims(dims: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def env(op: Operation, name: str) -> Any:
    if op.binding is None or name not in op.binding.env:
        raise Unsupported(f"no binding value '{name}'")
    return op.binding.env[name]


def norm_axes(axes: IntLike | Iterable[IntLike] | None, rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in ints(axes)]


def inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


@dataclass
class Context:
    """Accumulates the ONNX graph: nodes, initializers and the ONNX names of composed tensors."""

    opset: int
    variables: dict[str, np.ndarray]
    nodes: list[NodeProto] = field(default_factory=list)
    initializers: list[TensorProto] = field(default_factory=list)
    taken: set[str] = field(default_factory=set)
    names: dict[int, str] = field(default_factory=dict)  # id(tensor) -> ONNX value name
    label: str = ""  # node-name prefix: the composed operation's label
    #: the expansions of composite operations: kept alive so that ``names``' ids stay unique
    keep: list[Graph] = field(default_factory=list)

    # -- names -----------------------------------------------------------------------------------

    def fresh(self, hint: str = "t") -> str:
        base = "".join(c if c.isalnum() or c in "_.:/" else "_" for c in hint) or "t"
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def mark(self) -> tuple[int, int, set[str], dict[int, str]]:
        """A restore point (a converter that fails leaves nothing behind)."""
        return len(self.nodes), len(self.initializers), set(self.taken), dict(self.names)

    def restore(self, mark: tuple[int, int, set[str], dict[int, str]]) -> None:
        del self.nodes[mark[0]:]
        del self.initializers[mark[1]:]
        self.taken, self.names = set(mark[2]), dict(mark[3])

    # -- values ----------------------------------------------------------------------------------

    def const(self, value: npt.ArrayLike, dtype: npt.DTypeLike = np.float32, hint: str = "const") -> str:
        """An initializer holding ``value`` (converted to ``dtype`` unless it is already an array of it)."""
        from onnx import numpy_helper

        if not isinstance(value, np.ndarray):
            concrete(value, f"constant '{hint}'")
        a = value if isinstance(value, np.ndarray) and dtype is None else np.asarray(value, dtype)
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.array(a, order="C"), name))  # keeps 0-d arrays 0-d
        return name

    def i64(self, values: Sequence[int] | int, hint: str = "shape") -> str:
        concrete(values, f"constant '{hint}'")
        return self.const(np.asarray(values, np.int64), np.int64, hint)

    def value(self, t: Tensor) -> str:
        """The ONNX name of a composed tensor; variables and constants become initializers on first use."""
        if id(t) in self.names:
            return self.names[id(t)]
        if t.kind == "variable":
            if t.name not in self.variables:
                raise Unsupported(f"no value for variable '{t.name}'")
            a = self.variables[t.name]
        elif t.value is not None:
            a = t.value
        else:
            raise Unsupported(f"tensor '{t.name}' is used before it is computed")
        if t.dtype not in NUMPY:
            raise Unsupported(f"{t.dtype} tensor '{t.name}' (ONNX tensors here are real, int or bool)")
        a = np.asarray(a, NUMPY[t.dtype])
        dims = shape(t)
        a = np.broadcast_to(a, dims).copy() if a.size == 1 and list(a.shape) != dims else a.reshape(dims)
        name = self.const(a, None, t.name)
        self.names[id(t)] = name
        return name

    def node(self, op_type: str, inputs: Sequence[str | None], outputs: int = 1, **attrs: Any) -> Any:
        """Emit one node; returns its output name (or the list of names when ``outputs`` != 1).
        ``None`` attributes are left out; omitted optional inputs are ``None`` (written as '')."""
        from onnx import helper

        outs = [self.fresh(f"{self.label or op_type}:{op_type}") for _ in range(outputs)]
        attrs = {k: concrete(v, f"{op_type} attribute '{k}'") for k, v in attrs.items() if v is not None}
        ins = list(inputs)
        while ins and ins[-1] is None:
            ins.pop()
        self.nodes.append(helper.make_node(op_type, [i or "" for i in ins], outs,
                                           name=self.fresh(f"{self.label or op_type}/{op_type}"), **attrs))
        return outs[0] if outputs == 1 else outs

    # -- small idioms ----------------------------------------------------------------------------

    def reshape(self, x: str, dims: Sequence[int]) -> str:
        return self.node("Reshape", [x, self.i64(list(dims))])

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        perm = [int(p) for p in perm]
        return x if perm == list(range(len(perm))) else self.node("Transpose", [x], perm=perm)

    def cast(self, x: str, dtype: str) -> str:
        from onnx import TensorProto

        to = {"real": TensorProto.FLOAT, "int": TensorProto.INT64, "bool": TensorProto.BOOL,
              "int32": TensorProto.INT32, "float64": TensorProto.DOUBLE}[dtype]
        return self.node("Cast", [x], to=to)

    def scalar(self, v: float | int | bool, dtype: str = "real") -> str:
        return self.const(np.asarray(v, NUMPY[dtype]), None, "scalar")

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool) -> str:
        """ReduceX over ``axes``: as an input from opset 18 (13 for ReduceSum), as an attribute before."""
        axes = [int(a) for a in axes]
        if self.opset >= 18 or (op_type == "ReduceSum" and self.opset >= 13):
            return self.node(op_type, [x, self.i64(axes, "axes")], keepdims=int(keepdims))
        return self.node(op_type, [x], axes=axes, keepdims=int(keepdims))

    def unsqueeze(self, x: str, axes: Sequence[int]) -> str:
        return self.node("Unsqueeze", [x, self.i64(list(axes), "axes")])

    def squeeze(self, x: str, axes: Sequence[int]) -> str:
        return self.node("Squeeze", [x, self.i64(list(axes), "axes")])

    def slice(self, x: str, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
              steps: Sequence[int] | None = None) -> str:
        ins = [x, self.i64(list(starts), "starts"), self.i64(list(ends), "ends"), self.i64(list(axes), "axes")]
        if steps is not None:
            ins.append(self.i64(list(steps), "steps"))
        return self.node("Slice", ins)


def aligned(ctx: Context, op: Operation, i: int, key: str) -> str:
    """Input ``i`` reshaped to its aligned (broadcast-ready) shape ``op.binding.env[key]`` when it differs
    (SkriptND aligns operands by attributes such as lhs_align; ONNX broadcasts numpy-style)."""
    t = op.inputs[i]
    x = ctx.value(t)
    if op.binding is None or key not in op.binding.env:
        return x
    want = ints(op.binding.env[key])
    have = shape(t)
    if want == have:
        return x
    if t.kind == "constant" and t.value is not None and t.dtype in NUMPY:  # folded here: no Reshape node to run
        return ctx.const(np.asarray(t.value, NUMPY[t.dtype]).reshape(want), None, "aligned")
    return ctx.reshape(x, want)
