"""COND_IF and WHILE_LOOP (TOSA 1.0 / 0.30 §2.16 "Control flow operators") and CUSTOM (§2.15).

Regions. A ``tosa_graph_t`` attribute (then/else/cond/body graph) is a :class:`Graph`: its declared
signatures ``inputs`` / ``outputs`` (``tosa_input_shape`` / ``tosa_output_shape``: lists of
:class:`TensorType` = shape and TOSA type name) and a ``body``, which is either

* a callable taking the list of input arrays and returning a sequence of output arrays, or
* a list of :class:`Node` s (``Graph.of_nodes``): TOSA operators applied in order with
  the operator table the package hands in (:func:`bind`; :data:`skriptnd.tosa.ops.OPS`); values are named, ``constants`` supplies CONST values, a node input that
  is a list of names is passed as one list operand (CONCAT ``input1``, COND_IF / WHILE_LOOP
  ``input_list``), a node with several outputs unpacks the operator's tuple/list result. Nodes inherit
  the control-flow operator's ``version`` unless their ``attrs`` name one. Graphs nest (a node's
  attributes may hold graphs).

``tosa_execute_graph`` (§2.2 "Operator graphs") is :func:`execute_graph`: ERROR_IF the input list's
signature differs from ``graph.inputs``, run the body, ERROR_IF the produced list's signature differs from
``graph.outputs``. Signatures compare shapes *and* types (a list of ``(shape, type)``), since an operator
whose operands do not meet its argument types is an ERROR_IF of ``tosa_execute_graph`` as well.

Operands follow the TOSA 1.0 order in both versions: ``cond_if(condition, input_list, *, then_graph,
else_graph)`` and ``while_loop(input_list, *, cond_graph, body_graph)``; ``input_list`` is a list of
arrays and both return the output list (a list of arrays).

Checks (TOSA 1.0; 0.30 differences in brackets):

* COND_IF: input list = then/else inputs; then outputs = else outputs (both equal the output list);
  ``condition`` is bool with ``tensor_size == 1`` [0.30: a rank-0 bool tensor, as its argument table
  says]; exactly one branch is executed.
* WHILE_LOOP: input list = cond inputs = body inputs = body outputs; the cond graph has one output, bool,
  of ``tensor_size == 1`` [0.30: ``[bool_t]``, rank 0]. ``cond`` is run first; zero iterations return
  the inputs. No iteration limit (a non-terminating loop does not return, as in the spec).
* Nesting (1.0 only): ``ERROR_IF(tosa_nesting_depth >= MAX_NESTING)`` with ``MAX_NESTING = 6``, the
  8K level's value (``max_nesting`` keyword, passed on to nested control-flow nodes; ``None`` applies
  no limit). The depth counts the COND_IF / WHILE_LOOP operators executing around this one (a context
  variable), so the outermost operator is at depth 0 and ``MAX_NESTING`` levels can nest.

The operator table is handed in rather than imported (the table is built from this module, among the
other families, as onnx's ``op_if`` receives its evaluator): :func:`bind` returns COND_IF and WHILE_LOOP
bound to a table, which ``skriptnd.tosa.ops`` enters into ``OPS`` itself.

CUSTOM has no defined semantics: it raises :class:`TosaError` unless an ``implementation`` callable is
supplied (the "implementation-defined" operator the spec describes), which is then called with the inputs.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import tensor
from skriptnd.tosa.ops.errors import TosaError, check_version, error_if

__all__ = ["TensorType", "Node", "Graph", "OperatorTable", "execute_graph", "cond_if", "while_loop", "custom", "bind",
           "MAX_NESTING"]

MAX_NESTING = 6  # TOSA 1.0 level 8K
_TYPES = ("bool", "int8", "int16", "int32", "int48", "fp16", "bf16", "fp32")
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("tosa_nesting_depth", default=0)
#: TOSA operator name -> its numpy function (the package's ``OPS``, handed in by :func:`bind`)
OperatorTable = Mapping[str, Callable[..., object]]


@dataclass(frozen=True)
class TensorType:
    """One entry of a shape list: a tensor shape and its TOSA type name (``"int32"``, ``"bool"``, ...)."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.dtype not in _TYPES:
            raise ValueError(f"TensorType: {self.dtype!r} is not one of {_TYPES}")

    @classmethod
    def of(cls, x: ArrayLike, op: str = "") -> TensorType:
        a, t = tensor(x, op)
        return cls(a.shape, t)

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


def _types(values: Sequence[Any]) -> list[TensorType]:
    return [TensorType(*v) if isinstance(v, tuple) else v for v in values]


@dataclass
class Node:
    """``outputs = op(*inputs, **attrs)`` inside a :class:`Graph`; ``inputs`` name values (a list of
    names is one list operand)."""

    op: str
    inputs: list[Any]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(repr=False)
class Graph:
    """A ``tosa_graph_t``: declared input/output signatures and a body (a callable or a list of nodes)."""

    inputs: list[TensorType]
    outputs: list[TensorType]
    body: Callable[[list[Any]], Sequence[Any]] | list[Node]
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.inputs = _types(self.inputs)
        self.outputs = _types(self.outputs)
        if not callable(self.body):
            self.body = list(self.body)
            if len(self.input_names) != len(self.inputs) or len(self.output_names) != len(self.outputs):
                raise ValueError("Graph: a node body needs one name per declared input and output")

    def __repr__(self) -> str:
        """Signatures, nodes and a digest of each constant (a program's text and cache key include it)."""
        if callable(self.body):
            return f"Graph({_show(self.inputs)} -> {_show(self.outputs)}, {self.body!r})"
        consts = {n: (np.asarray(a).dtype.str, np.asarray(a).shape,
                      hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16])
                  for n, a in self.constants.items()}
        body: list[Node] = self.body  # type: ignore[assignment]
        nodes = "; ".join(f"{','.join(n.outputs)} = {n.op}({n.inputs}){n.attrs or ''}" for n in body)
        return (f"Graph({list(zip(self.input_names, map(str, self.inputs), strict=True))} -> "
                f"{self.output_names}: {nodes}; constants {consts})")

    @classmethod
    def of_nodes(cls, inputs: Sequence[tuple[str, Sequence[int], str]], outputs: Sequence[tuple[str, Sequence[int], str]],
                 nodes: Sequence[Node], constants: Mapping[str, Any] | None = None) -> Graph:
        """A graph of TOSA operators: ``inputs``/``outputs`` are ``(name, shape, type)`` triples."""
        return cls([TensorType(s, t) for _, s, t in inputs], [TensorType(s, t) for _, s, t in outputs],
                   list(nodes), [n for n, _, _ in inputs], [n for n, _, _ in outputs], dict(constants or {}))


def _signature(values: Sequence[Any], op: str) -> list[TensorType]:
    return [TensorType.of(v, op) for v in values]


def _show(sig: Sequence[TensorType]) -> str:
    return "[" + ", ".join(map(str, sig)) + "]"


def _require_same(a: Sequence[TensorType], b: Sequence[TensorType], condition: str, op: str) -> None:
    """ERROR_IF(``condition``) where the two tensor lists' shapes and types differ; the message shows both."""
    error_if(a != b, f"{condition}: {_show(a)} vs {_show(b)}", op)


def _run_nodes(graph: Graph, inputs: list[Any], version: str, max_nesting: int | None,
               table: OperatorTable) -> list[Any]:
    env: dict[str, Any] = dict(graph.constants)
    env.update(zip(graph.input_names, inputs, strict=True))
    for node in graph.body:  # type: ignore[union-attr]
        if node.op not in table:
            raise TosaError(f"unknown operator {node.op!r} in a graph", node.op)
        operands = [[env[n] for n in i] if isinstance(i, list) else env[i] for i in node.inputs]
        inherited: dict[str, Any] = {"version": version}
        if node.op in ("COND_IF", "WHILE_LOOP"):
            inherited["max_nesting"] = max_nesting
        attrs = {**inherited, **node.attrs}
        result = table[node.op](*operands, **attrs)
        if len(node.outputs) == 1 and not isinstance(result, (list, tuple)):
            result = [result]
        result = list(result)
        if len(result) != len(node.outputs):
            raise TosaError(f"{node.op} produced {len(result)} outputs, the node names {len(node.outputs)}", node.op)
        env.update(zip(node.outputs, result, strict=True))
    return [env[n] for n in graph.output_names]


def execute_graph(graph: Graph, input_list: Sequence[Any], *, table: OperatorTable, version: str = "1.0",
                  op: str = "", max_nesting: int | None = MAX_NESTING) -> list[Any]:
    """``tosa_execute_graph(graph, input_list, output_list)``: signature checks around the body. Node
    bodies run on ``table`` and pass ``version`` (and ``max_nesting`` to control-flow nodes) on unless a
    node sets them."""
    inputs = list(input_list)
    sig = _signature(inputs, op)
    _require_same(sig, graph.inputs, "tensor_list_shape(input_list) != tosa_input_shape(graph)", op)
    if callable(graph.body):
        outputs = list(graph.body(inputs))
    else:
        outputs = _run_nodes(graph, inputs, version, max_nesting, table)
    sig = _signature(outputs, op)
    _require_same(sig, graph.outputs, "tensor_list_shape(output_list) != tosa_output_shape(graph)", op)
    return outputs


def _copies(values: list[Any]) -> list[Any]:
    """The output list holds new tensors (a region may pass an input through; zero loop iterations)."""
    return [np.array(v, copy=True, subok=True) for v in values]


def _check_graph(g: object, name: str, op: str) -> Graph:
    if not isinstance(g, Graph):
        raise TosaError(f"{name} must be a tosa_graph_t (skriptnd.tosa.ops.control_flow.Graph), got {type(g).__name__}", op)
    return g


def _graphs_taking(input_list: Sequence[Any], op: str, version: str, **graphs: Any,
                   ) -> tuple[list[Any], list[TensorType], list[Graph]]:
    """A control-flow operator's common checks: ``version``; each of ``graphs`` (by argument name) a
    Graph whose inputs are tensor_list_shape(input_list). Returns (inputs, their signature, the graphs)."""
    check_version(version)
    checked = [_check_graph(g, name, op) for name, g in graphs.items()]
    inputs = list(input_list)
    sig = _signature(inputs, op)
    for name, g in zip(graphs, checked, strict=True):
        _require_same(sig, g.inputs, f"tensor_list_shape(input_list) != tosa_input_shape({name})", op)
    return inputs, sig, checked


def _enter(op: str, version: str, max_nesting: int | None) -> contextvars.Token[int]:
    depth = _DEPTH.get()
    if version == "1.0" and max_nesting is not None:
        error_if(depth >= max_nesting, f"tosa_nesting_depth >= MAX_NESTING ({depth} >= {max_nesting})", op)
    return _DEPTH.set(depth + 1)


def cond_if(condition: ArrayLike, input_list: Sequence[Any], *, then_graph: Graph, else_graph: Graph,
            table: OperatorTable, version: str = "1.0", max_nesting: int | None = MAX_NESTING) -> list[Any]:
    """COND_IF: run ``then_graph`` if the single element of ``condition`` is true, else ``else_graph``."""
    op = "COND_IF"
    inputs, _, (then_graph, else_graph) = _graphs_taking(input_list, op, version, then_graph=then_graph,
                                                         else_graph=else_graph)
    _require_same(then_graph.outputs, else_graph.outputs, "tensor_list_shape(output_list) != "
                  "tosa_output_shape(then_graph) || ... != tosa_output_shape(else_graph)", op)
    c, ct = tensor(condition, op, "condition")
    error_if(ct != "bool", f"condition has type {ct}, expected bool", op)
    if version == "0.30":
        error_if(c.ndim != 0, "condition is not a rank-0 tensor", op)
    else:
        error_if(c.size != 1, "tensor_size(shape) != 1", op)
    token = _enter(op, version, max_nesting)
    try:
        branch = then_graph if bool(c.reshape(-1)[0]) else else_graph
        return _copies(execute_graph(branch, inputs, table=table, version=version, op=op, max_nesting=max_nesting))
    finally:
        _DEPTH.reset(token)


def while_loop(input_list: Sequence[Any], *, cond_graph: Graph, body_graph: Graph, table: OperatorTable,
               version: str = "1.0", max_nesting: int | None = MAX_NESTING) -> list[Any]:
    """WHILE_LOOP: ``while cond_graph(list): list = body_graph(list)``; returns the final list."""
    op = "WHILE_LOOP"
    inputs, sig, (cond_graph, body_graph) = _graphs_taking(input_list, op, version, cond_graph=cond_graph,
                                                           body_graph=body_graph)
    _require_same(sig, body_graph.outputs, "tensor_list_shape(input_list) != tosa_output_shape(body_graph)", op)
    couts = cond_graph.outputs
    if version == "0.30":
        error_if(couts != [TensorType((), "bool")],
                 f"tosa_output_shape(cond_graph) != tosa_list_shape([bool_t]): {_show(couts)}", op)
    else:
        error_if(len(couts) != 1 or int(np.prod(couts[0].shape)) != 1,
                 f"tensor_size(tosa_output_shape(cond_graph)) != 1: {_show(couts)}", op)
        error_if(couts[0].dtype != "bool", f"tosa_output_type(cond_graph) != bool_t: {_show(couts)}", op)
    token = _enter(op, version, max_nesting)
    try:
        current = inputs
        while bool(np.asarray(execute_graph(cond_graph, current, table=table, version=version, op=op,
                                            max_nesting=max_nesting)[0]).reshape(-1)[0]):
            current = execute_graph(body_graph, current, table=table, version=version, op=op,
                                    max_nesting=max_nesting)
        return _copies(current)
    finally:
        _DEPTH.reset(token)


def custom(*inputs: Any, operator_name: str = "", domain_name: str = "", implementation_attrs: object = b"",
           implementation: Callable[..., Any] | None = None, version: str = "1.0") -> Any:
    """CUSTOM: implementation-defined. Without ``implementation`` it raises :class:`TosaError`."""
    op = "CUSTOM"
    check_version(version)
    if implementation is None:
        raise TosaError(f"CUSTOM operator {domain_name + '::' if domain_name else ''}{operator_name or '?'} has no "
                        "defined semantics in TOSA (pass implementation=callable to run it)", op)
    return implementation(*inputs)


def bind(table: OperatorTable) -> dict[str, Callable[..., object]]:
    """COND_IF and WHILE_LOOP running their regions' nodes on ``table`` (the package's ``OPS``, which holds
    these two as well, so regions nest)."""
    bound: dict[str, Callable[..., object]] = {}
    for name, fn in (("COND_IF", cond_if), ("WHILE_LOOP", while_loop)):
        bound[name] = functools.update_wrapper(functools.partial(fn, table=table), fn)
    return bound
