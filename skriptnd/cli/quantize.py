"""`sknd quantize MODEL -o OUT --calibration DATA`: post-training static quantization (skriptnd.quantize).

Calibrates the float graph on DATA, writes OUT (the model folder with a @quantize block), says whether OUT
runs as an integer TOSA graph, and prints the SQNR of every output against float on the calibration data."""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skriptnd import backends
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import AttribOpt, Color, ColorOpt, GraphOpt, ModelArg, colour, parse_attribs
from skriptnd.cli.report import fail
from skriptnd.diagnostics import DiagnosticError
from skriptnd.quantize import Method, Result, Settings, Target, load_calibration, quantize_model


class QuantizeFormat(StrEnum):
    text = "text"
    json = "json"


def _print(result: Result, settings: Settings, color: bool | None) -> None:
    console = Console(no_color=not color if color is not None else None, highlight=False)
    roles: dict[str, int] = {}
    for e in result.entries:
        roles[e.role] = roles.get(e.role, 0) + 1
    console.print(f"wrote {escape(str(result.path))} ({len(result.entries)} @quantize entries: "
                  f"{', '.join(f'{n} {r}' for r, n in roles.items())}; {settings.method} calibration on "
                  f"{result.samples} samples, target {settings.target})", soft_wrap=True)
    for label, why in result.floats.items():
        console.print(f"kept in float: {escape(label)}: {escape(why)}", soft_wrap=True)
    if result.integer:
        console.print(f"runs as {escape(result.integer)}", soft_wrap=True)
    else:
        console.print(f"[yellow]no integer TOSA graph[/yellow]: {escape(result.integer_error or '')}; measured "
                      "with fake quantization (--via kernels)", soft_wrap=True)
    console.print(f"SQNR against float on the {result.samples} calibration samples ({result.backend} backend):",
                  soft_wrap=True)
    table = Table("output", "SQNR")
    for name, db in result.sqnr.items():
        table.add_row(escape(name), "exact" if math.isinf(db) and db > 0 else f"{db:.2f} dB")
    console.print(table)


def command(path: ModelArg,
            output: Annotated[Path, typer.Option("--output", "-o", help="The model folder to write (must not "
                                                 "exist or be empty, unless --overwrite).")],
            calibration: Annotated[Path, typer.Option("--calibration", help="A folder with one <input>.npy per "
                                                      "graph input, or an .npz with those names; the first axis "
                                                      "counts samples.", metavar="DATA")],
            method: Annotated[Method, typer.Option("--method", help="How activation ranges are chosen: minmax, "
                                                   "percentile (99.99 %) or mse.")] = Method.minmax,
            per_tensor: Annotated[bool, typer.Option("--per-tensor", help="One scale per weight tensor instead of "
                                                     "one per output channel.")] = False,
            target: Annotated[Target, typer.Option("--target", help="tosa (int8), nnapi (NNAPI 1.0 uint8 per "
                                                   "tensor) or mli (embARC MLI sa8).")] = Target.tosa,
            exclude: Annotated[str | None, typer.Option("--exclude", help="Operation labels to keep in float, "
                                                        "comma-separated.", metavar="LABEL,...")] = None,
            via: Annotated[str, typer.Option("--via", help="The backend of the float calibration runs and of the "
                                             "quantized measuring runs: one for both, or two comma-separated "
                                             "(numpy,iree: iree compiles the integer graph once, much faster on "
                                             "large models).", metavar="BACKEND[,BACKEND]")] = "numpy",
            graph: GraphOpt = None, attrib: AttribOpt = None,
            overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace OUT if it exists.")] = False,
            format: Annotated[QuantizeFormat, typer.Option("--format", help="text or json")] = QuantizeFormat.text,
            color: ColorOpt = Color.auto) -> None:
    """Quantize a float model to int8 with calibration data (post-training, static).

    Weights per output channel (symmetric int8), activations int8 per tensor, biases int32 at the
    accumulator's scale, chosen so that the result runs as an integer TOSA graph (sknd compose OUT --tosa)
    and exports (sknd export OUT --tosa-mlir). Prints each output's SQNR against float.

    Example: sknd quantize models/digits -o digits_q --calibration models/digits/calibration.npz   (then: sknd compose digits_q --tosa)"""
    colours = colour(color)
    model = load_model(path, colours)
    attribs = parse_attribs(attrib)
    composed = compose_graph(model, graph, attribs, colours)
    labels = {op.label for op in composed.operations if op.label}
    excluded = frozenset(x.strip() for x in (exclude or "").split(",") if x.strip())
    unknown = sorted(excluded - labels)
    if unknown:
        some = ", ".join(sorted(labels)[:8]) + (", ..." if len(labels) > 8 else "")
        raise typer.BadParameter(f"no operation labelled {', '.join(unknown)} in graph '{composed.name}' (labels: "
                                 f"{some or 'none'})", param_hint="--exclude")
    try:
        chosen = [backends.canonical(b.strip()) for b in via.split(",")]
    except ValueError:
        raise typer.BadParameter(f"choose from {', '.join(backends.names())}", param_hint="--via") from None
    if len(chosen) > 2:
        raise typer.BadParameter("one backend, or two (calibration,measurement)", param_hint="--via")
    settings = Settings(method=method, per_channel=not per_tensor, target=target, exclude=excluded,
                        backend=chosen[0], measure_backend=chosen[-1])
    status = Console(stderr=True).status("calibrating…")

    def progress(what: str, i: int, n: int) -> None:
        status.update(f"{what}: sample {i} of {n}")

    try:
        data = load_calibration(calibration, composed)
        with status:
            result = quantize_model(model, composed, data, output, settings, attribs, overwrite=overwrite,
                                    progress=progress)
    except DiagnosticError as err:
        fail(err.diagnostics, model, colours)
    if format is QuantizeFormat.json:
        typer.echo(json.dumps(result.as_json(), indent=2))
    else:
        _print(result, settings, colours)
