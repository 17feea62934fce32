"""TOSA control flow in MLIR (generic form): ``tosa.while_loop`` with its cond and body regions.

A WHILE_LOOP of a program (skriptnd.tosa.program.build) or a legalized subgraph holds its regions as
:class:`skriptnd.tosa.ops.control_flow.Graph` s of :class:`~skriptnd.tosa.ops.control_flow.Node` s; its value is
the output list, read by ``ITEM {index}`` (skriptnd.tosa.ops.invoke), which is written as the result
``%loop#index``. The form iree-compile (TOSA → linalg/scf) and tosa-opt (``--tosa-serialize``) accept::

    %5:3 = "tosa.while_loop"(%a, %b, %c) ({
    ^bb0(%6: tensor<1x1xi32>, ...):          // cond: one tensor<i1> (rank 0: IREE extracts the element)
      ...
      "tosa.yield"(%9) : (tensor<i1>) -> ()
    }, {
    ^bb0(%10: tensor<1x1xi32>, ...):         // body: the next loop state
      ...
      "tosa.yield"(%11, ...) : (...) -> ()
    }) : (types) -> (types)

Every region value gets a fresh SSA name from the writer's counter (no shadowing across regions); a
region's constants are written by the writer's own constant writer (large ones as ``dense_resource``
blobs). Types come from running each node once on placeholders of the declared input types (ones; int
zeros, so that loop counters index in range), as the writers do for the main graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skriptnd.tosa.mlir.text import attributes, tensor_type
from skriptnd.tosa.ops.control_flow import Graph, TensorType
from skriptnd.tosa.ops.invoke import ITEM, apply

#: ``fresh() -> "%N"``; ``const(ssa, array, hint) -> the MLIR line defining ssa`` (no indent)
Fresh = Callable[[], str]
Const = Callable[[str, np.ndarray, str], str]

_NUMPY = {"bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "fp32": np.float32}


def _types(values: Sequence[np.ndarray]) -> str:
    return ", ".join(tensor_type(a) for a in values)


def _operand_type(a: np.ndarray) -> str:
    return f"!tosa.shape<{a.size}>" if a.dtype == np.int64 else tensor_type(a)


def placeholder(t: TensorType) -> np.ndarray:
    """A value of ``t``'s type: ones (int zeros); ValueError for a type MLIR is not written for here."""
    if t.dtype not in _NUMPY:
        raise ValueError(f"a region value of type {t.dtype} has no MLIR form here")
    dtype = _NUMPY[t.dtype]
    return np.zeros(t.shape, dtype) if np.issubdtype(dtype, np.integer) else np.ones(t.shape, dtype)


def op_line(v: str, name: str, ins: Sequence[str], operands: Sequence[np.ndarray], attrs: dict[str, Any],
            result: np.ndarray) -> str:
    """One ordinary TOSA operator (no indent)."""
    return (f'{v} = "tosa.{name.lower()}"({", ".join(ins)}){attributes(name, attrs)} : '
            f"({', '.join(_operand_type(a) for a in operands)}) -> {tensor_type(result)}")


def while_loop(v: str, ins: Sequence[str], operands: Sequence[np.ndarray], attrs: dict[str, Any], fresh: Fresh,
               const: Const, indent: str) -> list[str]:
    """The lines of ``v:N = tosa.while_loop(ins)`` (its results ``v#i`` have the operands' types)."""
    cond, body = attrs["cond_graph"], attrs["body_graph"]
    if set(attrs) - {"cond_graph", "body_graph", "version", "max_nesting"}:
        raise ValueError(f"no MLIR form for WHILE_LOOP attributes {sorted(attrs)}")
    types = _types(operands)
    lines = [f'{indent}{v}:{len(ins)} = "tosa.while_loop"({", ".join(ins)}) ({{']
    lines += _region(cond, fresh, const, indent + "  ")
    lines.append(f"{indent}}}, {{")
    lines += _region(body, fresh, const, indent + "  ")
    lines.append(f"{indent}}}) : ({types}) -> ({types})")
    return lines


def _region(g: Graph, fresh: Fresh, const: Const, indent: str) -> list[str]:
    if callable(g.body):
        raise ValueError("a region given as a Python callable has no MLIR form")
    ssa: dict[str, str] = {}
    vals: dict[str, Any] = {}
    args = []
    for n, t in zip(g.input_names, g.inputs, strict=True):
        ssa[n], vals[n] = fresh(), placeholder(t)
        args.append(f"{ssa[n]}: {tensor_type(vals[n])}")
    lines = [f"{indent}^bb0({', '.join(args)}):"]
    inner = indent + "  "
    for n, a in g.constants.items():
        a = np.asarray(a)
        ssa[n], vals[n] = fresh(), a
        lines.append(inner + const(ssa[n], a, n))
    for node in g.body:  # type: ignore[union-attr]
        names = [x for i in node.inputs for x in (i if isinstance(i, list) else [i])]
        operands = [vals[i] for i in names]
        ins = [ssa[i] for i in names]
        v = fresh()
        if node.op == "WHILE_LOOP":
            lines += while_loop(v, ins, operands, node.attrs, fresh, const, inner)
            for k, out in enumerate(node.outputs):
                ssa[out], vals[out] = f"{v}#{k}", operands[k]
            continue
        if node.op == ITEM or len(node.outputs) != 1:
            raise ValueError(f"no MLIR form for {node.op} with {len(node.outputs)} outputs in a region")
        with np.errstate(all="ignore"):
            result = np.asarray(apply(node.op, operands, node.attrs))
        lines.append(inner + op_line(v, node.op, ins, operands, node.attrs, result))
        ssa[node.outputs[0]], vals[node.outputs[0]] = v, result
    outs = [vals[n] for n in g.output_names]
    lines.append(f'{inner}"tosa.yield"({", ".join(ssa[n] for n in g.output_names)}) : ({_types(outs)}) -> ()')
    return lines
