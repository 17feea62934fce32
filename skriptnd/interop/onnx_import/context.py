"""What a converter sees while it writes one ONNX node: the node, the known types, shapes and constant
values of every ONNX tensor, and the statements and declarations written so far.

Converters call `arg` for an input as a SkriptND argument (a constant input is declared on first use:
an initializer becomes a variable with a tensor file, a small folded value an @constant), `const` for
an input that must be known at import time (a Reshape's shape, a Slice's starts), and `emit` for each
statement; the statement that produces the node's output carries the node's name as its label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.writer import Attrib, Call, Expr, Names, TensorDecl

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import NodeProto, ValueInfoProto

#: ONNX TensorProto element types -> SkriptND types
REAL = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
INT = {2, 3, 4, 5, 6, 7, 12, 13}  # UINT8, INT8, UINT16, INT16, INT32, INT64, UINT32, UINT64
BOOL = {9}
#: A folded value up to this many items is written as an @constant literal; larger ones as a variable.
CONSTANT_LIMIT = 64

Dim = int | str | sym.SymDim | None  # an extent, a dim_param (a graph attribute), an expression of them, unknown


def sknd_type(elem_type: int) -> str | None:
    if elem_type in REAL:
        return "real"
    if elem_type in INT:
        return "int"
    if elem_type in BOOL:
        return "bool"
    return None


def array_type(array: np.ndarray) -> str:
    if array.dtype == np.bool_:
        return "bool"
    if np.issubdtype(array.dtype, np.integer):
        return "int"
    if np.issubdtype(array.dtype, np.floating) or "float" in array.dtype.name:  # also ml_dtypes' bfloat16
        return "real"
    raise ImportProblem("E0810", f"constant of type {array.dtype} has no SkriptND type")


def as_sknd_array(array: np.ndarray) -> np.ndarray:
    kind = array_type(array)
    return array.astype({"real": np.float32, "int": np.int64, "bool": np.bool_}[kind], copy=False)


@dataclass
class Node:
    """An ONNX node with its attributes decoded (bytes -> str, tensors -> numpy)."""

    proto: NodeProto
    op_type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    domain: str = ""

    @classmethod
    def of(cls, proto: NodeProto) -> Node:
        from onnx import helper, numpy_helper

        attrs: dict[str, Any] = {}
        for a in proto.attribute:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode("utf-8") for v in value]
            elif a.type == a.TENSOR:
                value = numpy_helper.to_array(value)
            attrs[a.name] = value
        return cls(proto, proto.op_type, proto.name, list(proto.input), list(proto.output), attrs, proto.domain)

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""

    @property
    def where(self) -> str:
        return f"node '{self.name}' ({self.op_type})" if self.name else f"a {self.op_type} node"


@dataclass
class Value:
    dtype: str | None
    shape: tuple[Dim, ...] | None
    elem: int | None = None  # the ONNX element type


@dataclass(frozen=True)
class Param:
    """A graph input that feeds only parameters (ReduceSum's axes, TopK's K), imported as the graph attribute
    `name` (`int..(length)`, or a scalar `int` for a 0-D input): converters write expressions of it."""

    name: str
    dtype: str
    length: int | None  # None: a scalar

    @property
    def type(self) -> str:
        return self.dtype if self.length is None else f"{self.dtype}..({self.length})"


@dataclass
class Context:
    opset: int
    values: dict[str, Value] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    initializers: set[str] = field(default_factory=set)
    names: Names = field(default_factory=Names)
    labels: Names = field(default_factory=Names)
    symbols: dict[str, str] = field(default_factory=dict)  # ONNX dim_param -> graph attribute name
    body: list[Call | str] = field(default_factory=list)
    constants: list[TensorDecl] = field(default_factory=list)
    variables: list[TensorDecl] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)  # extra modules (ops/*.sknd) by relative path
    imports: dict[str, None] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)  # ONNX tensor -> SkriptND name already defined
    consumers: dict[str, list[Node]] = field(default_factory=dict)  # ONNX tensor -> nodes reading it
    graph_outputs: set[str] = field(default_factory=set)
    quantize: dict[str, Any] = field(default_factory=dict)  # SkriptND tensor -> its @quantize entry
    pending: dict[str, Any] = field(default_factory=dict)  # QuantizeLinear outputs folded into @quantize
    node: Node | None = None
    #: The importer's walker for a subgraph's nodes (fold what is known, else convert through the registry),
    #: handed in by the importer so that the control-flow converters need not import it (as onnx's
    #: `reference/ops/op_if.py` receives its evaluator).
    convert_node: Callable[[Context, Node], None] | None = None
    #: the graph's (non-initializer) inputs, and whether --fold-constants was given: what E0808's hint suggests
    graph_inputs: list[str] = field(default_factory=list)
    fold_constants: bool = False
    #: graph inputs imported as graph attributes (ONNX name -> the attribute)
    params: dict[str, Param] = field(default_factory=dict)
    #: extents of tensors whose shape depends on a Param, as SkriptND expressions (for the output declarations)
    symbolic_shapes: dict[str, list[Expr]] = field(default_factory=dict)
    #: known values that depend on a symbolic dimension (a Shape -> Gather -> Concat chain of `batch`):
    #: object arrays of ints and sympy expressions (symbolic.py)
    symvals: dict[str, np.ndarray] = field(default_factory=dict)
    _label_used: bool = False

    # ------------------------------------------------------------------ what is known of a tensor

    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name) if name else None

    def param(self, name: str) -> Param | None:
        """The graph attribute a parameter input was imported as, None for any other tensor."""
        return self.params.get(name) if name else None

    def param_scalar(self, name: str) -> Expr | None:
        """A parameter input holding one value (a 0-D or one-item input: TopK's K, CumSum's axis) as an
        expression of its graph attribute; None for any other tensor."""
        p = self.param(name)
        if p is None or p.length not in (None, 1):
            return None
        return Expr(p.name if p.length is None else f"{p.name}[0]")

    def extent_texts(self, name: str) -> list[str]:
        """The extents of a tensor as SkriptND expression text (for extents computed from a graph attribute)."""
        return [d.text if isinstance(d, Expr) else str(d) for d in (self.extent(d) for d in self.shape(name))]

    def need_const(self, name: str, what: str) -> np.ndarray:
        value = self.const(name)
        if value is None and name in self.params:
            raise ImportProblem("E0808", f"{self.here}: its {what} is the graph input '{name}', fed at run time; "
                                "SkriptND needs this one at import time", hint="give its value in the model "
                                "(an initializer), or " + self.import_time_hint())
        if value is None:
            raise ImportProblem("E0808", f"{self.here}: its {what} is computed at run time; SkriptND needs it "
                                "at import time", hint=self.import_time_hint())
        return value

    def shape(self, name: str) -> tuple[Dim, ...]:
        if name in self.consts:
            return tuple(int(d) for d in self.consts[name].shape)
        value = self.values.get(name)
        if value is None or value.shape is None:
            raise ImportProblem("E0808", f"{self.here}: the shape of '{name}' is unknown after shape inference",
                                hint="give the input shapes with --input-shape")
        return value.shape

    def import_time_hint(self, fold: bool = True, involved: set[str] | None = None) -> str:
        """What fixes an E0808, to copy: an --input-shape for each input with dynamic dimensions (1 for each, the
        user's own value to be put in; with `involved`, only the dimensions named there are fixed, the others
        keep their names), and --fold-constants where it could help and was not given."""
        fixes = []
        for n in self.graph_inputs:
            value = self.values.get(n)
            if value is not None and value.shape is not None and any(not isinstance(d, int) for d in value.shape):
                if involved is not None and not any(self.symbols.get(d) in involved for d in value.shape):
                    continue
                dims = ",".join(str(d) if isinstance(d, int) else self.symbols[d] if involved is not None and
                                d in self.symbols and self.symbols[d] not in involved else "1" for d in value.shape)
                fixes.append(f"--input-shape {n}={dims}")
        hint = (f"fix the dynamic dimensions at import, e.g. {' '.join(fixes)} (each dynamic one as 1 here: give "
                "yours)") if fixes else "fix the input shapes with --input-shape NAME=d0,d1,..."
        if fold and not self.fold_constants:
            hint += ", or fold constant subgraphs with --fold-constants"
        return hint

    def origins(self, attribs: set[str]) -> list[str]:
        """Where graph attributes made of dimensions come from: "dimension 0 ('batch') of input 'x'"."""
        found = []
        for n in self.graph_inputs:
            value = self.values.get(n)
            for k, d in enumerate(value.shape or () if value is not None else ()):
                if isinstance(d, str) and self.symbols.get(d) in attribs:
                    found.append(f"dimension {k} ('{self.symbols[d]}') of input '{n}'")
        return found

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def static_shape(self, name: str, axes: Sequence[int] | None = None) -> tuple[int, ...]:
        """The extents of a tensor as numbers; with `axes`, only those must be numbers (the others are
        returned as the symbolic extents they are: a batch a pooling does not depend on)."""
        shape = self.shape(name)
        if axes is not None:
            dims = sym.dims_of(self, name)
            if dims is not None and all(isinstance(dims[a], int) for a in axes):
                return dims  # type: ignore[return-value]
        if any(not isinstance(d, int) for d in shape):
            dims = sym.dims_of(self, name) or shape
            texts = [self.symbols.get(d, d) if isinstance(d, str) else "?" if d is None else str(d) for d in dims]
            message = f"{self.here}: the shape of '{name}' [{', '.join(texts)}] must be known at import time"
            needed = [d for k, d in enumerate(dims) if axes is None or k in axes]  # what the caller needs
            involved = {s.name for d in needed if isinstance(d, sym.sympy.Basic) for s in d.free_symbols} | \
                {self.symbols[d] for d in needed if isinstance(d, str) and d in self.symbols}
            origins = self.origins(involved)
            if origins:
                message += " (it depends on " + ", ".join(origins) + ")"
            raise ImportProblem("E0808", message, hint=self.import_time_hint(fold=False, involved=involved or None))
        return tuple(int(d) for d in shape)  # type: ignore[arg-type]

    def dtype(self, name: str) -> str:
        if name in self.consts:
            return array_type(self.consts[name])
        value = self.values.get(name)
        if value is None or value.dtype is None:
            raise ImportProblem("E0810", f"{self.here}: the type of '{name}' is unknown or has no SkriptND type")
        return value.dtype

    def extent(self, d: Dim) -> int | Expr:
        """An extent for a declaration: an int, the graph attribute of a symbolic dim or an expression of
        graph attributes."""
        if isinstance(d, int):
            return d
        if isinstance(d, str) and d in self.symbols:
            return Expr(self.symbols[d])
        if isinstance(d, sym.sympy.Basic):
            try:
                return int(d) if d.is_Integer else Expr(sym.text(d))
            except ValueError as e:
                raise ImportProblem("E0808", f"{self.here}: {e}", hint=self.import_time_hint()) from None
        raise ImportProblem("E0808", f"{self.here}: a dimension is unknown", hint=self.import_time_hint())

    def dims(self, name: str) -> tuple[sym.SymDim, ...]:
        """A tensor's extents: ints, and sympy expressions of graph attributes for symbolic ones."""
        dims = sym.dims_of(self, name)
        if dims is None:
            self.static_shape(name)  # says which dimension is unknown
            raise AssertionError(name)
        return dims

    def shape_value(self, name: str, what: str) -> list[sym.SymDim]:
        """A 1-D shape operand (a Reshape's shape, an Expand's shape): ints, or expressions of graph
        attributes where it was computed from a symbolic dimension."""
        if name in self.symvals:
            return [sym.norm(v) for v in self.symvals[name].reshape(-1).tolist()]
        return [int(v) for v in self.need_const(name, what).reshape(-1)]

    def extents(self, dims: Sequence[sym.SymDim]) -> list[int | Expr]:
        return [self.extent(d) for d in dims]

    @property
    def here(self) -> str:
        return self.node.where if self.node else "the graph"

    # ------------------------------------------------------------------------- writing statements

    def arg(self, name: str) -> str | None:
        """The SkriptND tensor for an ONNX input ('' -> None, an omitted optional input)."""
        if not name:
            return None
        if name in self.bound:
            return self.bound[name]
        if name in self.consts:
            return self._declare(name, self.consts[name])
        if name in self.symvals:  # a shape value of symbolic extents, needed as a tensor
            array = self.symvals[name]
            out = self.names(name)
            self.body.append(Call([out], "layout.tensor", [], {"shape": list(array.shape), "value": self.extents(
                [sym.norm(v) for v in array.reshape(-1).tolist()])}, type_args=["int"]))
            self.bound[name] = out
            return out
        raise AssertionError(f"tensor {name!r} used before it is defined")

    def literal_arg(self, array: npt.ArrayLike, base: str = "c") -> str:
        """A fresh @constant (or variable, when large) holding `array`."""
        return self._declare(None, np.asarray(array), base)

    def _declare(self, onnx_name: str | None, array: np.ndarray, base: str = "c") -> str:
        array = as_sknd_array(array)
        name = self.names(onnx_name) if onnx_name else self.fresh(base)
        dtype = array_type(array)
        if (onnx_name in self.initializers and array.size > 1) or array.size > CONSTANT_LIMIT:
            self.variables.append(TensorDecl(name, dtype, list(array.shape)))
            self.weights[name] = array
        else:
            value = array.reshape(-1).tolist() if array.ndim else array.item()
            if dtype == "real" and not np.all(np.isfinite(array[~np.isinf(array)])):
                raise ImportProblem("E0807", f"{self.here}: a constant holds NaN, which SkriptND text cannot write")
            self.constants.append(TensorDecl(name, dtype, list(array.shape), value))
        if onnx_name:
            self.bound[onnx_name] = name
        return name

    def fresh(self, base: str = "t") -> str:
        stem = self.names.clean(self.node.name or self.node.op_type.lower()) if self.node else "t"
        return self.names(f"{stem}_{base}_tmp{len(self.names._used)}")

    def out(self, i: int = 0) -> str:
        """The SkriptND name of the current node's output i (defined by the statement that uses it)."""
        assert self.node is not None
        onnx_name = self.node.outputs[i] if i < len(self.node.outputs) else ""
        if not onnx_name:
            return self.fresh(f"unused{i}")
        if onnx_name in self.bound:
            return self.bound[onnx_name]
        name = self.names(onnx_name)
        self.bound[onnx_name] = name
        return name

    def emit(self, op: str, args: Sequence[Any], attribs: Mapping[str, Any] | None = None,
             outputs: Sequence[str] | str | None = None, types: Sequence[str] = (), label: bool = True) -> str:
        """Append `outputs = label: op<types>{attribs}(args);` and return the first output name.
        The node's label goes to the first statement that writes one of the node's outputs."""
        if outputs is None:
            outputs = [self.out(0)]
        elif isinstance(outputs, str):
            outputs = [outputs]
        node_outputs = set(self.bound.get(o, "") for o in (self.node.outputs if self.node else []))
        flat = [x for o in outputs for x in ([o] if isinstance(o, str) else o)]
        tag = None
        if label and self.node is not None and self.node.name and not self._label_used \
                and any(o in node_outputs for o in flat):
            tag = self.labels.fresh(self.node.name)  # ONNX does not enforce unique node names; labels are
            self._label_used = True
        args = list(args)
        while args and args[-1] is None:  # omitted trailing optional inputs need no `~`
            args.pop()
        self.body.append(Call(list(outputs), op, args, dict(attribs or {}), label=tag, type_args=list(types)))
        return flat[0]

    def define_module(self, path: str, module: str, text: str) -> None:
        """An extra module of operators (ops/<family>.sknd), written once, imported by main."""
        self.modules.setdefault(path, text)
        self.imports[module] = None

    def attrib_decls(self) -> list[Attrib]:
        return [Attrib(name, "int", 1) for name in self.symbols.values()] + \
            [Attrib(p.name, p.type) for p in self.params.values()]


def value_of(vi: ValueInfoProto) -> Value:
    t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if t is None:
        return Value(None, None)
    shape = None
    if t.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)
    return Value(sknd_type(t.elem_type), shape, t.elem_type)
