"""`sknd compare MODEL --via A,B`: two or more backends run the graph and their results are compared
operation by operation (skriptnd.backends.compare); the first operation that diverges is named and located.
Exit 0 when every operation agrees within the tolerance, 1 when one does not."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skriptnd import backends
from skriptnd.backends.compare import Comparison, compare_backends, compare_with_onnx
from skriptnd.cli.inputs import Inputs, check_input_names, random_input
from skriptnd.cli.io import read_array
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import (
    AttribOpt,
    Color,
    ColorOpt,
    GraphOpt,
    InputOpt,
    ModelArg,
    RandomInputsOpt,
    RandomWeightsOpt,
    SeedOpt,
    colour,
    parse_attribs,
)
from skriptnd.cli.report import fail
from skriptnd.diagnostics import DiagnosticError


class CompareFormat(StrEnum):
    text = "text"
    json = "json"


def _where(r: object) -> str:
    file, line, col = getattr(r, "file", None), getattr(r, "line", None), getattr(r, "col", None)
    return f"{file}:{line}:{col}" if file and line else "-"


def _print(cmp: Comparison, color: bool | None) -> None:
    console = Console(no_color=not color if color is not None else None, highlight=False)
    table = Table("label", "operator", "where", "max abs", "max rel", "", title=f"{cmp.other} against "
                  f"{cmp.reference} (rtol {cmp.rtol:g}, atol {cmp.atol:g})")
    for r in cmp.rows:
        table.add_row(escape(r.label), escape(r.op), escape(_where(r)), f"{r.max_abs:.2e}", f"{r.max_rel:.2e}",
                      "ok" if r.agree else "[red]differs[/red]")
    console.print(table)
    first = cmp.first_divergence
    if first is None:
        console.print(f"{cmp.other} agrees with {cmp.reference} on every operation")
    else:
        console.print(f"[red]first divergence[/red]: {escape(first.label)} ({escape(first.op)}) at "
                      f"{escape(_where(first))}: max abs {first.max_abs:.3g}, max rel {first.max_rel:.3g}")


def command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
            input: InputOpt = None,
            random_inputs: RandomInputsOpt = False,
            random_weights: RandomWeightsOpt = False,
            seed: SeedOpt = 0,
            via: Annotated[str | None, typer.Option("--via", help="Backends to compare, comma-separated; the first "
                                                    "is the reference (default numpy,kernels; with --reference: "
                                                    "numpy).")] = None,
            reference: Annotated[str | None, typer.Option("--reference", help="The original ONNX model the folder "
                                                          "was imported from: each backend is compared with "
                                                          "onnxruntime on it, node by node.",
                                                          metavar="FILE")] = None,
            rtol: Annotated[float, typer.Option("--rtol", help="The relative tolerance.")] = 1e-4,
            atol: Annotated[float, typer.Option("--atol", help="The absolute tolerance.")] = 1e-5,
            format: Annotated[CompareFormat, typer.Option("--format", help="text or json")] = CompareFormat.text,
            color: ColorOpt = Color.auto) -> None:
    """Compare backends operation by operation and name the first operation that diverges.

    Every operation's results become outputs of a copy of the graph, so each backend returns them; they are
    compared in the graph's order. Exit 1 when an operation differs beyond --rtol/--atol.

    Example: sknd compare models/digits --via numpy,lower --random-inputs"""
    via = via or ("numpy" if reference else "numpy,kernels")
    names = [b.strip() for b in via.split(",") if b.strip()]
    try:
        names = [backends.canonical(b) for b in names]
    except ValueError:
        raise typer.BadParameter(f"choose from {', '.join(backends.names())}", param_hint="--via") from None
    if len(names) < (1 if reference else 2):
        raise typer.BadParameter("name two backends or more, e.g. --via numpy,kernels (or give --reference "
                                 "ORIGINAL.onnx)", param_hint="--via")
    files = Inputs.parse(input).files
    colours = colour(color)
    model = load_model(path, colours)
    composed = compose_graph(model, graph, parse_attribs(attrib), colours, random_weights=random_weights, seed=seed)
    try:
        check_input_names(composed, list(files), random_inputs)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colours, exit_code=1 if any(d.code == "E0792" for d in err.diagnostics) else 2)
    rng = np.random.default_rng(seed)
    given = {name: read_array(spec, name) for name, spec in files.items()}
    for t in composed.inputs:
        given.setdefault(t.name, random_input(rng, t))
    try:
        comparisons = ([compare_with_onnx(composed, given, reference, b, rtol=rtol, atol=atol) for b in names]
                       if reference else compare_backends(composed, given, names, rtol=rtol, atol=atol))
    except DiagnosticError as err:
        fail(err.diagnostics, None, colours)
    if format is CompareFormat.json:
        typer.echo(json.dumps([c.as_json() for c in comparisons], indent=2))
    else:
        for cmp in comparisons:
            _print(cmp, colours)
    raise typer.Exit(0 if all(c.first_divergence is None for c in comparisons) else 1)
