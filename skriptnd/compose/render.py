"""Printing a composed graph: readable text, JSON for tools, Graphviz DOT for pictures."""

from __future__ import annotations

import json
from typing import Any

from skriptnd.compose.ir import Graph, Operation, Tensor, Value
from skriptnd.semantics.evaluate import format_value


def tensor_type(t: Tensor) -> str:
    """`real[1, 64, ~]`: dims, a dynamic one by its symbolic expression (with `|bound` when bounded)."""
    dims = []
    for i, d in enumerate(t.shape):
        bound = t.bounds[i] if t.bounds and i < len(t.bounds) else None
        expr = t.symbolic[i] if t.symbolic and i < len(t.symbolic) else None
        name = "~" if expr is None else str(expr).replace(" ", "")
        dims.append(str(d) if d is not None else name if bound is None else f"{name}|{bound}")
    return f"{t.dtype}[{', '.join(dims)}]"


def _name(v: Value) -> str:
    if v is None:
        return "~"
    if isinstance(v, list):
        return "[" + ", ".join(t.name for t in v) + "]"
    return v.name


def _attrs(op: Operation) -> str:
    shown = {k: v for k, v in op.attribs.items() if v is not None}
    return "{" + ", ".join(f"{k}={format_value(v)}" for k, v in shown.items()) + "}" if shown else ""


def _result_decl(v: Value) -> str:
    if v is None:
        return "~"
    if isinstance(v, list):
        return "[" + ", ".join(f"{t.name}: {tensor_type(t)}" for t in v) + "]"
    return f"{v.name}: {tensor_type(v)}"


def to_text(graph: Graph, indent: str = "") -> str:
    lines = [f"{indent}graph {graph.name}(" + ", ".join(f"{t.name}: {tensor_type(t)}" for t in graph.inputs)
             + ") -> (" + ", ".join(f"{graph.output_name(i)}: {tensor_type(t)}" + ("" if graph.output_name(i) == t.name
                                                                             else f" = {t.name}")
                                    for i, t in enumerate(graph.outputs)) + ")"]
    for t in graph.tensors:
        if t.kind == "variable":
            lines.append(f"{indent}    variable {t.name}: {tensor_type(t)}")
        elif t.kind == "constant" and not t.name.startswith("%"):
            lines.append(f"{indent}    constant {t.name}: {tensor_type(t)}")
    for op in graph.operations:
        dtypes = "<" + ", ".join(op.dtypes.values()) + ">" if op.dtypes else ""
        head = ", ".join(_result_decl(v) for v in op.outputs)
        call = f"{op.op}{dtypes}{_attrs(op)}(" + ", ".join(_name(v) for v in op.inputs) + ")"
        label = f"    # {op.label}" if op.label else ""
        lines.append(f"{indent}    {head} = {call}{label}")
        for key, sub in op.subgraphs.items():
            lines.append(f"{indent}      {key}:")
            lines.append(to_text(sub, indent + "        ").rstrip("\n"))
    for var, new in graph.updates.items():
        lines.append(f"{indent}    update {var} <- {new.name}")
    return "\n".join(lines) + "\n"


def _json_value(v: object) -> Any:
    if isinstance(v, tuple):
        return [_json_value(x) for x in v]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v if isinstance(v, int | float | str | bool) or v is None else str(v)


def to_json(graph: Graph) -> dict[str, Any]:
    def tensor(t: Tensor) -> dict[str, Any]:
        out: dict[str, Any] = {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "kind": t.kind}
        if t.bounds:
            out["bounds"] = list(t.bounds)
        if t.quant:
            out["quant"] = {k: _json_value(v) if k != "attribs" else {a: _json_value(x) for a, x in v.items()}
                            for k, v in t.quant.items()}
        return out

    def ref(v: Value) -> Any:
        if v is None:
            return None
        return [t.name for t in v] if isinstance(v, list) else v.name

    return {
        "name": graph.name,
        "inputs": [t.name for t in graph.inputs],
        "outputs": [graph.output_name(i) for i in range(len(graph.outputs))],
        "output_tensors": [t.name for t in graph.outputs],
        "tensors": [tensor(t) for t in graph.tensors],
        "operations": [{
            "op": op.op, "label": op.label,
            "attribs": {k: _json_value(v) for k, v in op.attribs.items()},
            "dtypes": op.dtypes, "inputs": [ref(v) for v in op.inputs], "outputs": [ref(v) for v in op.outputs],
            **({"subgraphs": {k: to_json(g) for k, g in op.subgraphs.items()}} if op.subgraphs else {}),
        } for op in graph.operations],
        "updates": {k: v.name for k, v in graph.updates.items()},
    }


def to_json_text(graph: Graph) -> str:
    return json.dumps(to_json(graph), indent=2) + "\n"


def to_dot(graph: Graph) -> str:
    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    producer: dict[int, str] = {}
    for t in graph.inputs:
        lines.append(f'  "t_{t.name}" [shape=ellipse, label="{t.name}\\n{tensor_type(t)}"];')
        producer[id(t)] = f"t_{t.name}"
    for i, op in enumerate(graph.operations):
        node = f"op{i}"
        lines.append(f'  {node} [shape=box, style=rounded, label="{op.op}\\n{op.label}"];')
        for v in op.inputs:
            for t in v if isinstance(v, list) else [v] if v is not None else []:
                src = producer.get(id(t))
                if src is None and t.kind == "variable":
                    src = f"t_{t.name}"
                    lines.append(f'  "{src}" [shape=note, label="{t.name}\\n{tensor_type(t)}"];')
                    producer[id(t)] = src
                if src is not None:
                    lines.append(f'  "{src}" -> {node} [label="{tensor_type(t)}"];')
        for v in op.outputs:
            for t in v if isinstance(v, list) else [v] if v is not None else []:
                producer[id(t)] = node
    for t in graph.outputs:
        lines.append(f'  "out_{t.name}" [shape=ellipse, label="{t.name}\\n{tensor_type(t)}"];')
        if id(t) in producer:
            lines.append(f'  {producer[id(t)]} -> "out_{t.name}";')
    lines.append("}")
    return "\n".join(lines) + "\n"
