"""The composed graph (spec chapter 3): tensors, operations, graphs.

Plain dataclasses compared by identity: a Tensor is one value in the graph, however many
names refer to it. Operations keep their Binding (attributes, symbols, output shapes) so the
executor can build the @lower plan or pick a kernel without redoing the semantic work.

A graph does not run itself (as an ONNX model does not: a session runs it): the backends, above the IR, run
it (``skriptnd.run(graph, inputs)``, skriptnd.backends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skriptnd.semantics.binding import Binding
from skriptnd.semantics.signature import Signature
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast

TensorKind = Literal["input", "output", "variable", "constant", "intermediate"]


@dataclass(eq=False)
class Tensor:
    name: str
    dtype: str  # 'real', 'int', 'bool' or 'str'
    shape: tuple[int | None, ...]  # None: a dynamic extent (see bounds)
    kind: TensorKind = "intermediate"
    bounds: tuple[int | None, ...] | None = None  # upper bounds of dynamic extents (§2.6.1, §3.1)
    value: Any = None  # a numpy array for constants
    quant: dict[str, Any] | None = None  # @quantize: operator and attributes
    span: Any = None  # the declaration, for graph inputs, outputs, variables and constants
    #: For dynamic extents: their sympy expressions in the graph's dynamic input extents (§3.1)
    symbolic: tuple[Any, ...] | None = None
    declared: str | None = None  # the declared type of a graph input, e.g. 'real[batch, 1, 8, 8]'
    #: int tensors: an interval holding every value @lower can compute (skriptnd.compose.int_ranges), or None
    value_range: tuple[int, int] | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dynamic(self) -> bool:
        return any(d is None for d in self.shape)

    def __repr__(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"Tensor({self.name}: {self.dtype}[{dims}])"


#: An operation argument or result: a tensor, a pack of tensors, or null (an omitted optional).
Value = Tensor | list[Tensor] | None


def flat_tensors(values: Sequence[Value]) -> list[Tensor]:
    """An operation's inputs or outputs as one list of tensors: packs spread, omitted optionals left out."""
    return [t for v in values if v is not None for t in (v if isinstance(v, list) else [v]) if t is not None]


@dataclass(eq=False)
class Operation:
    op: str  # qualified operator name: 'nn.conv', 'main.block' ...
    definition: ast.Definition | None
    inputs: list[Value]
    outputs: list[Value]
    attribs: dict[str, Any] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    label: str = ""  # scoped label path (§2.10), '' at the graph's top level
    binding: Binding | None = None
    #: Control flow (§2.10.1): 'if' has 'cond', 'then', 'else' (and more for elif);
    #: 'loop' has 'body' and optionally 'cond'.
    subgraphs: dict[str, Graph] = field(default_factory=dict)
    span: Any = None
    module: Any = None  # the LoadedModule defining the operator (to expand it, see Composer.expand)

    def __repr__(self) -> str:
        return f"Operation({self.op} @ {self.label or '<top>'})"


@dataclass(eq=False)
class RunAsserts:
    """A graph's asserts on its dynamic extents (§2.6.1), judged when it runs (skriptnd.execute): the graph's
    signature, its compile-time symbols (in which the extents are SymInts, made concrete per run) and types."""

    signature: Signature
    env: dict[str, Any]
    dtypes: dict[str, str]
    asserts: list[ast.Assertion]


@dataclass(eq=False)
class Graph:
    name: str
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    #: @update: variable -> its new value after a run
    updates: dict[str, Tensor] = field(default_factory=dict)
    attribs: dict[str, Any] = field(default_factory=dict)
    #: Where variable values come from (set by skriptnd.model.Model.compose): tensor -> array
    variable_source: Any = field(default=None, repr=False)
    program: Any = field(default=None, repr=False)  # the Program it was composed from
    #: The declared output names (an output may be another tensor, as in `z = a`); default: tensor names
    output_names: list[str] = field(default_factory=list)
    #: The same graph composed for other attribute values (set by skriptnd.model.Model.compose): a graph
    #: attribute given with the inputs of a run (an ONNX input fed at run time, issue 25) composes it again
    rebind: Any = field(default=None, repr=False)
    #: Graph attributes without a default that the composition still waits for (Model.compose(defer=True)):
    #: such a graph holds no operations until a run gives their values
    awaiting: tuple[str, ...] = ()
    #: Output packs (§2.6): name -> (index of the first item in outputs, items composed); a pack whose length
    #: is a dynamic extent has at most that many items at run time (the results leave out the others)
    output_packs: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Asserts that depend on dynamic extents, judged per run; None when there are none
    run_asserts: RunAsserts | None = None

    def output_name(self, i: int) -> str:
        return self.output_names[i] if i < len(self.output_names) else self.outputs[i].name

    def declared_at(self) -> Span:
        """Where the graph is declared (its name in `graph Name {`), for diagnostics about the graph as a whole
        (its inputs, the device it runs on); NO_SPAN for a graph composed from no source."""
        for d in self.program.graphs() if self.program is not None else []:
            if d.name == self.name:
                return d.name_span if d.name_span is not NO_SPAN else d.span
        return NO_SPAN

    @property
    def variables(self) -> list[Tensor]:
        return [t for t in self.tensors if t.kind == "variable"]

    @property
    def constants(self) -> list[Tensor]:
        return [t for t in self.tensors if t.kind == "constant"]

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)
