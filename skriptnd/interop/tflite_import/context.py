"""What a TFLite converter sees while it writes one operator: the model, the subgraph's tensors (all with
static shapes, as the converter wrote them), their constant data, and the statements written so far.

Converters call `arg` for an input tensor as a SkriptND argument (a constant is declared on first use: a
large one becomes a variable with a tensor file, a small one an @constant), `const` for an input that must
be known at import time (a RESHAPE's shape, a PAD's paddings), `emit` for each statement (the statement
writing the operator's first output carries a label naming the operator), and `activate` for the fused
activation most TFLite operators end with.

TRANSPOSE is written lazily: a transpose of a transpose becomes one transpose of the first's input (none
when the permutations cancel, as LiteRT's NCHW->NHWC boundary pairs do), and a transpose is only written
when something reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.quantized import is_quantized, real_value
from skriptnd.interop.tflite_import.reader import Model, Operator, Subgraph, Tensor
from skriptnd.interop.writer import Call, Names, Quantize, TensorDecl

#: The most operators decompositions may add in all (a crafted file could nest bodies that name the same bodies)
INLINE_LIMIT = 20_000
#: A constant up to this many items is written as an @constant literal; larger ones as a variable.
CONSTANT_LIMIT = 64
#: TensorType codes by SkriptND type
REAL = {0, 1, 10}  # FLOAT32, FLOAT16, FLOAT64
INT = {2, 3, 4, 7, 9, 12, 15, 16}  # INT32, UINT8, INT64, INT16, INT8, UINT64, UINT32, UINT16
BOOL = {6}
#: ActivationFunctionType
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def sknd_type(tensor: Tensor) -> str:
    if tensor.type in REAL or is_quantized(tensor):  # codes of a real value (skriptnd.interop.tflite_import.quantized)
        return "real"
    if tensor.type in INT:
        return "int"
    if tensor.type in BOOL:
        return "bool"
    raise ImportProblem("E0864", f"tensor '{tensor.name}' has type {tensor.type_name}, which SkriptND does not support")


def short_name(name: str) -> str:
    """A readable stem of a converter's tensor name: LiteRT joins the PyTorch scopes of fused operators
    with ';' and numbers repeats (`__main__.Net/torch.nn.modules.conv.Conv2d_c1;1`): the last scope's
    last component (`Conv2d_c1`), made unique by `Names` (the full name stays in the .tflite file)."""
    parts = [p for p in name.split(";") if p and not p.isdigit()]
    stem = (parts[-1] if parts else name).rsplit("/", 1)[-1]
    last = stem.rsplit(".", 1)[-1]
    return last if any(c.isalpha() for c in last) else stem or name


@dataclass
class Pending:
    """A TRANSPOSE not written yet: `source` (a SkriptND name) permuted by `perm`."""

    source: str
    perm: list[int]


@dataclass
class Context:
    model: Model
    subgraph: Subgraph
    names: Names = field(default_factory=Names)
    labels: Names = field(default_factory=Names)
    body: list[Call | str] = field(default_factory=list)
    constants: list[TensorDecl] = field(default_factory=list)
    variables: list[TensorDecl] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    bound: dict[int, str] = field(default_factory=dict)  # tensor index -> SkriptND name already defined
    pending: dict[int, Pending] = field(default_factory=dict)  # tensor index -> transpose not yet written
    op: Operator | None = None
    #: tensor index -> the name to give it (graph inputs and outputs: their signature names)
    display: dict[int, str] = field(default_factory=dict)
    #: The importer's walker for one operator (check it, convert it through the registry), handed in by the
    #: importer so that the converters of operators with bodies (STABLEHLO_COMPOSITE) need not import it.
    walk: Callable[[Context, Operator], None] | None = None
    #: the subgraphs being inlined, outermost first (a decomposition that names itself is a corrupt file)
    inlining: list[int] = field(default_factory=list)
    inlined: int = 0  # operators converted from bodies so far
    #: a static int8/int16 model: its quantized tensors get @quantize entries (skriptnd.interop.tflite_import.quantized)
    static: bool = False
    #: SkriptND name -> the TFLite output of the operator whose conversion wrote it
    origin: dict[str, int] = field(default_factory=dict)
    #: @quantize entries converters write themselves (a constant they rearranged), by SkriptND name
    quantize: dict[str, Quantize] = field(default_factory=dict)
    #: dynamic-range operators quantize their input as LiteRT's reference kernels (BUILTIN_REF) do, not as its
    #: default optimized ones (ops/_hybrid.py)
    reference_kernels: bool = False
    #: axis 0 is a dynamic batch (dynamic.py): converters write -1 rather than the file's extent where they reshape
    dynamic: bool = False
    #: modules the statements inside control-flow blocks (verbatim text) call, for the graph's imports
    imports: dict[str, None] = field(default_factory=dict)
    _label_used: bool = False
    _consts: dict[int, np.ndarray | None] = field(default_factory=dict)  # constants (buffers, and folded values)
    _named: dict[int, str] = field(default_factory=dict)
    _stems: dict[tuple[int, str], int] = field(default_factory=dict)

    # ------------------------------------------------------------------ what is known of a tensor

    def tensor(self, index: int) -> Tensor:
        if index < 0:  # an omitted input (-1) where the operator needs one
            raise ImportProblem("E0863", f"{self.here}: a required input is omitted (-1)")
        return self.subgraph.tensors[index]

    def const(self, index: int) -> np.ndarray | None:
        """The tensor's constant value, None when it is computed (or an omitted input, -1)."""
        if index < 0:
            return None
        if index not in self._consts:
            self._consts[index] = self.model.data(self.tensor(index))
        return self._consts[index]

    def fold(self, index: int, value: np.ndarray) -> None:
        """Tensor `index` is known at import time (SHAPE of a static shape, ...): a constant from now on, declared
        only where something reads it."""
        self._consts[index] = np.asarray(value)

    def need_const(self, index: int, what: str) -> np.ndarray:
        value = self.const(index)
        if value is None:
            raise ImportProblem("E0863", f"{self.here}: its {what} is computed at run time; SkriptND needs it at "
                                "import time")
        return value

    def shape(self, index: int) -> tuple[int, ...]:
        return self.tensor(index).shape

    def rank(self, index: int) -> int:
        return len(self.shape(index))

    def dtype(self, index: int) -> str:
        return sknd_type(self.tensor(index))

    def input(self, i: int) -> int:
        """The tensor index of the current operator's input i (-1 when omitted)."""
        assert self.op is not None
        return self.op.inputs[i] if i < len(self.op.inputs) else -1

    @property
    def here(self) -> str:
        if self.op is None:
            return "the graph"
        first = self.op.outputs[0] if self.op.outputs else -1
        out = f" writing '{self.tensor(first).name}'" if first >= 0 else ""
        return f"operator {self.op.index} ({self.op.name}){out}"

    def options(self) -> Any:
        """The operator's builtin options table (None when the file leaves them all at their defaults)."""
        assert self.op is not None
        return self.op.options

    def option(self, slot: int, default: int = 0, fmt: str = "i") -> int:
        table = self.options()
        return default if table is None else table.int(slot, default, fmt)

    def flag(self, slot: int, default: bool = False) -> bool:
        table = self.options()
        return default if table is None else table.bool(slot, default)

    def real_option(self, slot: int, default: float = 0.0) -> float:
        table = self.options()
        return default if table is None else table.float(slot, default)

    # ------------------------------------------------------------------------- writing statements

    def arg(self, index: int) -> str | None:
        """The SkriptND tensor for a TFLite input (-1 -> None, an omitted optional input)."""
        if index < 0:
            return None
        if index in self.bound:
            return self.bound[index]
        if index in self.pending:
            pending = self.pending.pop(index)
            saved, self.op = self.op, None
            name = self.name_of(index)
            self.body.append(Call([name], "layout.transpose", [pending.source], {"perm": pending.perm}))
            self.op = saved
            self.bound[index] = name
            return name
        value = self.const(index)
        if value is not None:
            return self._declare(index, value)
        raise ImportProblem("E0861", f"corrupt TFLite file: {self.here} reads tensor "
                            f"'{self.tensor(index).name}' before any operator writes it")

    def literal_arg(self, array: npt.ArrayLike, base: str = "c") -> str:
        """A fresh @constant (or variable, when large) holding `array`."""
        return self._declare(None, np.asarray(array), base)

    def _declare(self, index: int | None, array: np.ndarray, base: str = "c") -> str:
        if index is not None and is_quantized(self.tensor(index)) and np.issubdtype(array.dtype, np.integer):
            array = real_value(self.tensor(index), array)  # codes -> their real values
        if array.dtype == np.bool_:
            dtype, array = "bool", array.astype(np.bool_)
        elif np.issubdtype(array.dtype, np.integer):
            dtype, array = "int", array.astype(np.int64)
        else:
            dtype, array = "real", array.astype(np.float32)
        name = self.name_of(index) if index is not None else self.fresh(base)
        if array.size > CONSTANT_LIMIT:
            self.variables.append(TensorDecl(name, dtype, list(array.shape)))
            self.weights[name] = array
        else:
            if dtype == "real" and np.isnan(array).any():
                raise ImportProblem("E0863", f"{self.here}: a constant holds NaN, which SkriptND text cannot write")
            value = array.reshape(-1).tolist() if array.ndim else array.item()
            self.constants.append(TensorDecl(name, dtype, list(array.shape), value))
        if index is not None:
            self.bound[index] = name
        return name

    def unique(self, names: Names, stem: str) -> str:
        """A new identifier from `stem` without `Names` counting up through every earlier use of the same stem
        (a file whose 100 000 tensors share one name must not take quadratic time): the n-th use of a stem is
        tried as `stem_n` first."""
        n = self._stems.get((id(names), stem), 0) + 1
        self._stems[(id(names), stem)] = n
        return names.fresh(stem if n == 1 else f"{stem}_{n}")

    def fresh(self, base: str = "t") -> str:
        stem = self.names.clean(self.op.name.lower()) if self.op else "t"
        return self.names(f"{stem}_{base}_tmp{len(self.names._used)}")

    def out(self, i: int = 0) -> str:
        """The SkriptND name of the current operator's output i (defined by the statement that uses it)."""
        assert self.op is not None
        index = self.op.outputs[i] if i < len(self.op.outputs) else -1
        if index < 0:
            return self.fresh(f"unused{i}")
        if index in self.bound:
            return self.bound[index]
        name = self.name_of(index)
        self.bound[index] = name
        return name

    def name_of(self, index: int) -> str:
        """The SkriptND identifier for tensor `index` (its signature name, else its tensor name)."""
        if index not in self._named:  # by index: two TFLite tensors may share a name
            self._named[index] = self.unique(self.names, self.display.get(index) or short_name(self.tensor(index).name))
        return self._named[index]

    def alias(self, index: int, name: str) -> None:
        """Output `index` is the SkriptND tensor `name` itself (nothing written)."""
        self.bound[index] = name

    def emit(self, op: str, args: Sequence[Any], attribs: Mapping[str, Any] | None = None,
             outputs: Sequence[str] | str | None = None, types: Sequence[str] = (), label: bool = True) -> str:
        """Append `outputs = label: op<types>{attribs}(args);` and return the first output name."""
        if outputs is None:
            outputs = [self.out(0)]
        elif isinstance(outputs, str):
            outputs = [outputs]
        mine = {self.bound.get(o, "") for o in (self.op.outputs if self.op else [])}
        flat = [x for o in outputs for x in ([o] if isinstance(o, str) else o)]
        tag = None
        if label and self.op is not None and not self._label_used and any(o in mine for o in flat):
            tag = self.unique(self.labels, f"{self.op.name.lower()}_{self.op.index}")
            self._label_used = True
        if self.op is not None and self.op.outputs:
            self.origin.setdefault(flat[0], self.op.outputs[0])
        args = list(args)
        while args and args[-1] is None:
            args.pop()
        self.body.append(Call(list(outputs), op, args, dict(attribs or {}), label=tag, type_args=list(types)))
        return flat[0]

    def activate(self, op: str, args: Sequence[Any], attribs: Mapping[str, Any] | None = None,
                 activation: int = 0) -> str:
        """Emit `op` into the operator's output, through its fused activation when it has one."""
        if activation == 0:
            return self.emit(op, args, attribs)
        if activation not in (1, 2, 3, 4):
            raise ImportProblem("E0863", f"{self.here}: fused activation "
                                f"{ACTIVATIONS.get(activation, str(activation))} is not supported")
        raw = self.emit(op, args, attribs, outputs=self.fresh("raw"), label=False)
        if activation == 1:
            return self.emit("nn.relu", [raw])
        if activation == 3:
            return self.emit("nn.relu", [raw], {"max": 6.0})
        if activation == 4:
            return self.emit("math.tanh", [raw])
        lo, hi = self.literal_arg(np.float32(-1.0), "lo"), self.literal_arg(np.float32(1.0), "hi")
        return self.emit("math.clamp", [raw, lo, hi])

    def inline(self, index: int, args: Sequence[str]) -> list[str]:
        """Convert subgraph `index` in place with its inputs bound to the SkriptND tensors `args`; the SkriptND
        names of its outputs. The subgraph's tensors get their own bindings (indices are per subgraph); names
        and labels stay unique across the whole graph."""
        if len(self.inlining) >= 32:
            raise ImportProblem("E0861", f"corrupt TFLite file: {self.here} nests bodies more than 32 deep")
        if not 0 <= index < len(self.model.subgraphs) or index in self.inlining or index == self.subgraph.index:
            raise ImportProblem("E0861", f"corrupt TFLite file: {self.here} names subgraph {index} as its body "
                                f"({len(self.model.subgraphs)} subgraphs; a body may not contain itself)")
        sub = self.model.subgraphs[index]
        self.inlined += len(sub.operators)
        if self.inlined > INLINE_LIMIT:  # bodies naming the same bodies, level after level: exponential work
            raise ImportProblem("E0861", f"corrupt TFLite file: its decompositions inline more than {INLINE_LIMIT} "
                                "operators")
        if len(sub.inputs) != len(args):
            raise ImportProblem("E0863", f"{self.here}: its body takes {len(sub.inputs)} inputs, not {len(args)}")
        assert self.walk is not None
        saved = (self.subgraph, self.bound, self.pending, self._consts, self._named, self.display, self.op)
        self.inlining.append(index)
        self.subgraph, self.bound, self.pending, self._consts, self._named, self.display = \
            sub, dict(zip(sub.inputs, args, strict=True)), {}, {}, {}, {}
        try:
            for op in sub.operators:
                self.op, self._label_used = op, False
                self.walk(self, op)
            self.op = None
            return [self.arg(o) or "" for o in sub.outputs]
        finally:
            self.inlining.pop()
            self.subgraph, self.bound, self.pending, self._consts, self._named, self.display, self.op = saved
            self._label_used = True
