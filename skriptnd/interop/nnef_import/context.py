"""The state of one conversion: shapes and types from `nnef.infer_shapes`, the SkriptND names given to NNEF
tensors, and the statements emitted so far. Converters talk only to this object."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from skriptnd.interop.nnef_import.errors import ImportProblem
from skriptnd.interop.writer import Call, Expr, Names, TensorDecl, literal

#: An argument or attribute as the nnef parser gives it: a tensor identifier (str) or a literal (a list for an
#: array of tensors or values).
Arg = str | bool | int | float | list["Arg"] | tuple["Arg", ...] | None


# The parser's objects (named tuples of the optional `nnef` package), described by what the importer reads
# so that these modules need not import `nnef` (its named tuples satisfy these protocols).
class Operation(Protocol):
    """An `nnef.Operation`: name, attribs, inputs, outputs (by parameter name), dtype."""

    @property
    def name(self) -> str: ...
    @property
    def attribs(self) -> Mapping[str, Any]: ...
    @property
    def inputs(self) -> Mapping[str, Arg]: ...
    @property
    def outputs(self) -> Mapping[str, Arg]: ...
    @property
    def dtype(self) -> str | None: ...


class TensorInfo(Protocol):
    """An `nnef.Tensor`: its type, inferred shape, data (constants) and graph.quant entry."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def data(self) -> Any: ...
    @property
    def quantization(self) -> Mapping[str, Any] | None: ...


class NnefGraph(Protocol):
    """An `nnef.Graph`: tensors by name, operations in order, the input and output tensor names."""

    @property
    def name(self) -> str: ...
    @property
    def tensors(self) -> Mapping[str, TensorInfo]: ...
    @property
    def operations(self) -> Sequence[Operation]: ...
    @property
    def inputs(self) -> Sequence[str]: ...
    @property
    def outputs(self) -> Sequence[str]: ...


#: NNEF 1.x tensor types -> SkriptND types.
DTYPES = {"scalar": "real", "integer": "int", "logical": "bool"}


@dataclass
class Context:
    graph: NnefGraph  # shapes inferred
    names: Names
    body: list[Call | str] = field(default_factory=list)
    constants: list[TensorDecl] = field(default_factory=list)
    op: Operation | None = None  # the operation being converted
    imports: set[str] = field(default_factory=set)
    #: NNEF tensors declared under another SkriptND name (a variable/constant that is also a graph output)
    aliases: dict[str, str] = field(default_factory=dict)
    _count: int = 0

    # -- tensors ---------------------------------------------------------------------------------
    @staticmethod
    def is_tensor(value: Arg) -> bool:
        return isinstance(value, str)

    def name(self, nnef_name: str) -> str:
        """The SkriptND name of an NNEF tensor (sanitized once, stable)."""
        return self.aliases.get(str(nnef_name)) or self.names(str(nnef_name))

    def arg(self, value: Arg) -> str | Expr:
        """An operation input as a call argument: a tensor name, or a scalar literal."""
        if self.is_tensor(value):
            return self.name(value)
        if isinstance(value, list | tuple):
            raise self.problem(f"a list literal {value!r} cannot be a tensor argument here")
        return Expr(literal(tidy(value)))

    def shape(self, value: Arg) -> list[int]:
        if self.is_tensor(value):
            return list(self.graph.tensors[value].shape)
        return []

    def rank(self, value: Arg) -> int:
        return len(self.shape(value))

    def dtype(self, value: Arg) -> str:
        if self.is_tensor(value):
            return DTYPES.get(self.graph.tensors[value].dtype, "real")
        if isinstance(value, bool):
            return "bool"
        return "int" if isinstance(value, int) else "real"

    def tmp(self, hint: str) -> str:
        """A fresh SkriptND name for an intermediate result (the '.' keeps the key apart from NNEF names)."""
        self._count += 1
        return self.names(f"{hint}.{self._count}")

    # -- emission ---------------------------------------------------------------------------------
    def emit(self, outputs: list[str | list[str]] | str, op: str, args: list[Any] = (), attribs: dict[str, Any] | None = None,
             *, type_args: list[str] = ()) -> None:
        outs = [outputs] if isinstance(outputs, str) else list(outputs)
        attribs = {k: tidy(v) for k, v in (attribs or {}).items()}
        self.body.append(Call(outs, op, list(args), attribs, type_args=list(type_args)))

    def input(self, key: str) -> Any:
        return self.op.inputs[key]

    def output(self, key: str | None = None) -> str:
        """The SkriptND name of the current operation's (single or named) output."""
        outs = self.op.outputs
        value = outs[key] if key else next(iter(outs.values()))
        return self.name(value)

    def attr(self, key: str) -> Any:
        return self.op.attribs[key]

    def problem(self, message: str, attribute: str | None = None) -> ImportProblem:
        """A diagnostic about the current operation (located by the importer)."""
        first = next(iter(self.op.outputs.values()))
        first = first[0] if isinstance(first, list) and first else first
        return ImportProblem(f"operation '{self.op.name}'" + (f", attribute '{attribute}'" if attribute else "")
                             + f": {message}", op=self.op.name, tensor=str(first))

    # -- helpers shared by several families -------------------------------------------------------
    def broadcast_args(self, values: list[Arg], keys: list[str]) -> tuple[list[str | Expr], dict[str, int]]:
        """NNEF broadcasting pads the shorter shape with trailing singletons (numpy pads leading ones):
        a lower-rank tensor operand gets `<key>=0` so that SkriptND aligns it at the first axis."""
        rank = max(self.rank(v) for v in values)
        attribs = {key: 0 for v, key in zip(values, keys, strict=True)
                   if self.is_tensor(v) and 0 < self.rank(v) < rank}
        return [self.arg(v) for v in values], attribs

    def squeeze_to(self, value: Arg, rank: int, hint: str) -> str | Expr:
        """`value` reshaped to rank `rank` by dropping its leading singleton axes (NNEF [1, C] -> [C])."""
        if not self.is_tensor(value):
            return self.arg(value)
        shape = self.shape(value)
        extra = len(shape) - rank
        if extra <= 0:
            return self.arg(value)
        drop = [i for i, d in enumerate(shape) if d == 1][:extra]
        if len(drop) < extra:
            raise self.problem(f"tensor '{value}' of shape {shape} cannot be squeezed to rank {rank}")
        out = self.tmp(hint)
        self.emit(out, "layout.squeeze", [self.arg(value)], {"axes": drop})
        return out


def tidy(value: Arg) -> Arg:
    """NNEF scalars are float32: write the shortest decimal of the float32 value (1e-3, not
    0.0010000000474974513), which denotes the same float32."""
    if isinstance(value, float) and math.isfinite(value):
        return float(str(np.float32(value)))
    if isinstance(value, list):
        return [tidy(v) for v in value]
    return value


_LINE = re.compile(r"^\s*(.*?)=\s*([A-Za-z_][A-Za-z0-9_]*)\s*[<(]")


def locate(text: str, tensor: str | None, op: str | None) -> tuple[int, int, int]:
    """The (line, column, end column) of the statement of graph.nnef that defines `tensor` with `op`."""
    if tensor:
        word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(tensor)}(?![A-Za-z0-9_])")
        for number, line in enumerate(text.splitlines(), 1):
            match = _LINE.match(line)
            if match and word.search(match.group(1)) and (op is None or match.group(2) == op):
                col = match.start(2) + 1
                return number, col, col + len(match.group(2))
    return 1, 1, 2
