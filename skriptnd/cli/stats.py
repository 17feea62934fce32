"""`sknd stats MODEL`: what a model's graph costs (skriptnd.compose.stats): parameters by dtype, MACs per
operator and in total, counted from the operators' @lower formulas, and the peak activation memory of a run."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skriptnd.cli.inputs import format_bytes
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import AttribOpt, Color, ColorOpt, GraphOpt, ModelArg, colour, parse_attribs
from skriptnd.compose.stats import GraphStats, graph_stats


class StatsFormat(StrEnum):
    text = "text"
    json = "json"


def _si(n: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def _print(stats: GraphStats, color: bool | None) -> None:
    console = Console(no_color=not color if color is not None else None, highlight=False)
    console.print(f"[bold]{escape(stats.graph)}[/bold]: {stats.parameter_count:,} parameters "
                  f"({format_bytes(stats.parameter_bytes)}), {stats.macs:,} MACs ({_si(stats.macs, 'MAC')}), "
                  f"peak activations {format_bytes(stats.peak_activation_bytes)}")
    if stats.parameters:
        table = Table("parameters", "count", "bytes", title="parameters by type")
        for dtype, (n, b) in stats.parameters.items():
            table.add_row(dtype, f"{n:,}", format_bytes(b))
        console.print(table)
    table = Table("operator", "operations", "MACs", "share", title="MACs by operator")
    total = stats.macs or 1
    for op, (n, macs) in stats.by_operator().items():
        table.add_row(escape(op), str(n), f"{macs:,}", f"{100 * macs / total:.1f} %")
    console.print(table)
    for note in stats.not_counted:
        console.print(f"not counted: {escape(note)}")


def command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
            format: Annotated[StatsFormat, typer.Option("--format", help="text or json (keys parameters, macs, "
                                                        "peak_activation_bytes)")] = StatsFormat.text,
            color: ColorOpt = Color.auto) -> None:
    """Count a model's parameters, MACs and peak activation memory.

    MACs come from the operators' @lower formulas (a multiply inside an accumulation counts once per point
    of its index space), so custom operators count as the standard ones do.

    Example: sknd stats models/resnet18 --attrib batch=2"""
    colours = colour(color)
    model = load_model(path, colours)
    composed = compose_graph(model, graph, parse_attribs(attrib), colours)  # shapes only: no weights read
    stats = graph_stats(composed)
    if format is StatsFormat.json:
        typer.echo(json.dumps(stats.as_json(), indent=2))
    else:
        _print(stats, colours)
