"""`sknd compose`: a model's graph composed and printed (text, JSON, dot) or drawn (SVG, a self-contained HTML
page: skriptnd.render, no graphviz), its TOSA coverage (`--tosa`), or the operation each of its operations
becomes on a target (`--target nnapi|mli|tosa`, rendered by skriptnd.targets.table; with `--format svg|html`
the picture is coloured by that target's support instead)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skriptnd.cli.io import check_output_file, write_output
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import AttribOpt, Color, ColorOpt, GraphOpt, ModelArg, colour, parse_attribs
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization
from skriptnd.compose.render import to_dot, to_json_text, to_text
from skriptnd.diagnostics import DiagnosticError
from skriptnd.render import Colouring, by_backend, by_target, to_html, to_svg
from skriptnd.render.colours import fallback
from skriptnd.targets import targets
from skriptnd.targets.table import print_table, to_json
from skriptnd.tosa.integer.lower import lower_quantized, partition
from skriptnd.tosa.legalize import coverage


class GraphFormat(StrEnum):
    text = "text"
    json = "json"
    dot = "dot"
    svg = "svg"
    html = "html"


#: the format an output file's suffix asks for when --format is not given
SUFFIXES = {".json": GraphFormat.json, ".dot": GraphFormat.dot, ".gv": GraphFormat.dot, ".svg": GraphFormat.svg,
            ".html": GraphFormat.html, ".htm": GraphFormat.html}
#: pictures only graphviz draws (from --format dot)
GRAPHVIZ = (".png", ".pdf")
PICTURES = (GraphFormat.svg, GraphFormat.html)


def pick_format(given: GraphFormat | None, output: Path | None) -> GraphFormat:
    """--format, else the one the output's suffix names (`-o g.svg` is SVG), else text. A .png/.pdf needs
    graphviz, which only --format dot uses: without it, a usage error that names the formats we draw."""
    suffix = output.suffix.lower() if output is not None else ""
    fmt = given or SUFFIXES.get(suffix, GraphFormat.text)
    if suffix in GRAPHVIZ and (fmt is not GraphFormat.dot or shutil.which("dot") is None):
        why = "needs graphviz's dot (not installed)" if shutil.which("dot") is None else \
            "is drawn by graphviz: add --format dot"
        raise typer.BadParameter(f"a {suffix} picture {why}; or write -o {output.with_suffix('.svg')} or "
                                 f"-o {output.with_suffix('.html')} (drawn without graphviz)", param_hint="'--output'")
    return fmt


def command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
            format: Annotated[GraphFormat | None, typer.Option(
                "--format", help="text, json, dot, svg or html (a picture: no graphviz needed); default: from "
                "the -o suffix (.json .dot .svg .html), else text", show_default=False)] = None,
            decompose_all: Annotated[bool, typer.Option("--decompose-all",
                                                        help="Decompose down to @lower primitives.")] = False,
            output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (atomically); "
                                                        "with --format dot a .png/.pdf/.svg is rendered by "
                                                        "graphviz (a .svg without it: our own drawing).")] = None,
            tosa: Annotated[bool, typer.Option("--tosa", help="Report which operations map to TOSA and which "
                                               "run a native kernel or @lower.")] = False,
            target: Annotated[str | None, typer.Option("--target", help="nnapi, mli or tosa: the target "
                                                       "operation of each operation, or why none (with "
                                                       "--format json for tools; with svg or html a picture "
                                                       "coloured by the target's support).")] = None,
            color: ColorOpt = Color.auto) -> None:
    """Compose a model's graph and print it.

    Without graphviz: -o FILE.svg draws an SVG, -o FILE.html a page with search, zoom and collapsible operator
    bodies; boxes are coloured by where each operation runs (TOSA, native kernel, @lower).

    Example: sknd compose models/resnet18 -o resnet18.html"""
    check_output_file(output, "--output")
    format = pick_format(format, output)
    if target is not None:
        _known_target(target)
    if target is not None and format is GraphFormat.dot:
        raise typer.BadParameter("--target prints a table (text), JSON, or a picture (svg, html)",
                                 param_hint="--format")
    attribs = parse_attribs(attrib)
    colours = colour(color)
    model = load_model(path, colours)
    composed = compose_graph(model, graph, attribs, colours, decompose=decompose_all, random_weights=True)
    if format in PICTURES:
        _write_picture(composed, format, output, by_target(composed, target) if target else by_backend(composed))
    elif target is not None:
        _target_table(composed, target, format, output)
    elif tosa:
        _tosa_coverage(composed)
    else:
        _write_graph(composed, format, output)


def _known_target(name: str) -> None:
    """A usage error (exit 2) for an unknown target name, before anything is composed."""
    if name not in targets():
        raise typer.BadParameter(f"choose one of {', '.join(sorted(targets()))}", param_hint="--target")


def _target_table(graph: Graph, target: str, fmt: GraphFormat, output: Path | None) -> None:
    """The mapping table on stdout, or JSON (``--format json``, or to ``output``, written atomically)."""
    if fmt is GraphFormat.json or output is not None:
        text = to_json(graph, target)
        if output is None:
            sys.stdout.write(text)
        else:
            write_output(output, text, "--output")
            typer.echo(f"wrote {output}", err=True)
        return
    print_table(graph, target)


def _write_picture(composed: Graph, format: GraphFormat, output: Path | None, colouring: Colouring) -> None:
    """Our own drawing (skriptnd.render): an SVG file or a self-contained HTML page."""
    text = (to_svg if format is GraphFormat.svg else to_html)(composed, colouring)
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, "--output")
    typer.echo(f"wrote {output} ({len(composed.operations)} operations, coloured by {colouring.title})", err=True)


def _write_graph(composed: Graph, format: GraphFormat, output: Path | None) -> None:
    """The graph as text, JSON or dot on stdout or to output; with dot, a .png/.svg/.pdf through graphviz's
    `dot` (pick_format has checked it is installed for .png/.pdf; a .svg without it is our own drawing)."""
    text = {GraphFormat.text: to_text, GraphFormat.json: to_json_text, GraphFormat.dot: to_dot}[format](composed)
    if output is None:
        sys.stdout.write(text)
        return
    if format is GraphFormat.dot and output.suffix.lower() in (".png", ".svg", ".pdf"):
        dot = shutil.which("dot")
        if dot is None:  # only a .svg gets here: drawn without graphviz rather than DOT text in a .svg
            _write_picture(composed, GraphFormat.svg, output, by_backend(composed))
            typer.echo("graphviz is not installed: drew the SVG with skriptnd's own layout", err=True)
            return
        rendered = subprocess.run([dot, f"-T{output.suffix[1:].lower()}"], input=text.encode(), capture_output=True)
        if rendered.returncode != 0:
            typer.echo(f"graphviz failed: {rendered.stderr.decode(errors='replace').strip()}", err=True)
            raise typer.Exit(1)
        write_output(output, rendered.stdout, "--output")
    else:
        write_output(output, text, "--output")
    typer.echo(f"wrote {output}", err=True)


def _tosa_coverage(graph: Graph) -> None:
    """Which operations map to TOSA and which fall back (a native kernel or @lower), and for @quantize
    whether the integer TOSA graph that `sknd run` prefers can be built."""
    rows = coverage(graph)
    table = Table(title=f"TOSA coverage of graph {graph.name}")
    for col in ("operation", "label", "TOSA", "rule or reason"):
        table.add_column(col)
    for op, ok, reason in rows:
        where = "native kernel" if fallback(op) == "kernel" else "@lower"
        table.add_row(op.op, escape(op.label), "yes" if ok else f"no: {where}", escape(reason),
                      style=None if ok else "yellow")
    console = Console()
    console.print(table)
    done = sum(ok for _, ok, _ in rows)
    console.print(f"{done} of {len(rows)} operations map to TOSA; {len(rows) - done} fall back to a native "
                  "kernel or @lower")
    if has_quantization(graph):  # what `sknd run` runs by default for it: the integer graph
        try:
            integer = lower_quantized(graph)
        except DiagnosticError as err:
            try:
                refused = partition(graph).refused
            except DiagnosticError:  # the graph as a whole: no operation lowers on its own
                refused = []
            if not refused:
                console.print(f"@quantize: no integer TOSA graph ({escape(err.diagnostics[0].message)}); "
                              "sknd run uses fake quantization for the whole graph")
                return
            console.print(f"@quantize: {len(refused)} operations do not lower to integer TOSA; sknd run runs "
                          "them with fake quantization and the others as integer TOSA:")
            for op, d in refused:
                console.print(f"  {escape(op.label or op.op)} ({op.op}): {escape(d.message)}")
            return
        console.print(f"@quantize: runs as an integer TOSA graph of {len(integer.ops)} operations "
                      f"({', '.join(sorted({o.name for o in integer.ops}))})")
