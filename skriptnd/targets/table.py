"""Rendering a target mapping (``sknd compose MODEL --target NAME``): a rich table, or JSON for tools."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skriptnd.compose.ir import Graph
from skriptnd.targets.registry import Mapping, get


def rows(graph: Graph, target: str) -> list[Mapping]:
    return get(target).map_graph(graph)


def to_json(graph: Graph, target: str) -> str:
    t = get(target)
    mapped = t.map_graph(graph)
    data = {
        "graph": graph.name, "target": t.name, "title": t.title,
        "supported": sum(r.supported for r in mapped), "total": len(mapped),
        "operations": [{"operation": r.op.op, "label": r.op.label or None,
                        "outputs": [o.name for o in r.op.outputs if o is not None],
                        "target_op": r.target_op, "supported": r.supported, "how": r.how,
                        "params": r.params} for r in mapped],
    }
    return json.dumps(data, indent=2) + "\n"


def print_table(graph: Graph, target: str) -> None:
    t = get(target)
    mapped = t.map_graph(graph)
    table = Table(title=f"{t.title} mapping of graph {graph.name}")
    for col in ("operation", "output", "target operation", "parameters, or why not"):
        table.add_column(col, overflow="fold")
    for r in mapped:
        outs = ", ".join(o.name for o in r.op.outputs if o is not None)
        target_op = escape(r.target_op) if r.target_op else "[red]none[/red]"
        table.add_row(escape(r.op.op), escape(outs), target_op, escape(r.how))
    console = Console(width=200)
    console.print(table)
    ops = sorted({r.target_op for r in mapped if r.target_op and not r.target_op.startswith("(")})
    missing = [r for r in mapped if not r.supported]
    console.print(f"{sum(r.supported for r in mapped)} of {len(mapped)} operations map to {t.title}"
                  + (f"; {t.title} operations used: {', '.join(ops)}" if ops else ""))
    if missing:
        console.print(f"not mapped: {', '.join(sorted({r.op.op for r in missing}))}")

