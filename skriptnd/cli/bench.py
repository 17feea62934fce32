"""`sknd bench MODEL --via A,B [--threads N] [--compare onnxruntime [--onnx FILE]] [--check] [--json]`: median
latency of a model's graph per backend, side by side in one process (skriptnd.backends.bench), with the machine
and BLAS settings that decide the numbers; each backend's deviation from the first (red above 1e-3, and
``--check`` exits 1 on it: a wrong result is not a benchmark)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skriptnd import backends
from skriptnd.backends import Options, reporting_compiles
from skriptnd.backends.bench import DEVIATION_LIMIT, REFERENCE, Report, bench
from skriptnd.cli.backend import CompileLine, check_device
from skriptnd.cli.inputs import Inputs, check_input_names, random_input
from skriptnd.cli.io import read_array
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import (
    AttribOpt,
    Color,
    ColorOpt,
    DeviceOpt,
    GraphOpt,
    InputOpt,
    IreeFlagOpt,
    ModelArg,
    NoVerifyOpt,
    RandomWeightsOpt,
    SeedOpt,
    colour,
    parse_attribs,
)
from skriptnd.cli.report import fail
from skriptnd.compose.input_shapes import check_shapes
from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import DiagnosticError


def command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None, input: InputOpt = None,
                  via: Annotated[str, typer.Option("--via", help="Comma-separated backends to time (skriptnd."
                                                   "backends: numpy, kernels, lower, iree, onnxruntime).")]
                  = "numpy,iree",
                  threads: Annotated[int | None, typer.Option("--threads", min=1, help="Threads of every backend "
                                                              "(numpy's BLAS via threadpoolctl, IREE, "
                                                              "onnxruntime); default: theirs.")] = None,
                  compare: Annotated[str | None, typer.Option("--compare", help="onnxruntime: time the model's "
                                                              "ONNX export (or --onnx FILE) too and give each "
                                                              "backend's ratio to it.")] = None,
                  onnx: Annotated[Path | None, typer.Option("--onnx", help="The original model as a .onnx file "
                                                            "with the same weights (inputs and outputs in the "
                                                            "graph's order): one more row, onnxruntime on it, "
                                                            "the reference of the ratios.")] = None,
                  rounds: Annotated[int, typer.Option("--rounds", min=1, help="Interleaved rounds (each: one "
                                                      "untimed and 3 timed runs per backend).")] = 10,
                  random_weights: RandomWeightsOpt = False,
                  seed: SeedOpt = 0,
                  target: Annotated[str | None, typer.Option("--target", help="iree: the CPU to compile for.")]
                  = None,
                  iree_flag: IreeFlagOpt = None,
                  no_verify: NoVerifyOpt = False,
                  check: Annotated[bool, typer.Option("--check", help="Exit 1 when a backend deviates from the "
                                                      "first by more than 1e-3 (max |difference| / max |value|) "
                                                      "or fails.")] = False,
                  device: DeviceOpt = None,
                  as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
                  color: ColorOpt = Color.auto) -> None:
    """Time a model on several backends (median latency, ratio to onnxruntime).

    Each backend runs the same inputs (--input files, random values for the
    rest: token ids need real ones), interleaved round by round in
    one process; the table gives each one's median latency, its deviation
    from the first backend and, with --compare onnxruntime, its ratio to
    onnxruntime on the model's ONNX export (or on --onnx FILE).

    Example: sknd bench models/digits --via numpy,kernels,onnxruntime --compare onnxruntime"""
    names = [v.strip() for v in via.split(",") if v.strip()]
    try:
        names = [backends.canonical(v) for v in names]
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--via") from None
    if compare not in (None, REFERENCE):
        raise typer.BadParameter(f"the only reference is {REFERENCE}", param_hint="--compare")
    if onnx is not None and not onnx.is_file():
        raise typer.BadParameter(f"no such file: {onnx}", param_hint="--onnx")
    if onnx is not None and compare is None:
        compare = REFERENCE
    device = check_device(device, names, target)
    attribs = parse_attribs(attrib)
    colours = colour(color)
    model = load_model(path, colours)
    composed = compose_graph(model, graph, attribs, colours, random_weights=random_weights, seed=seed)
    files = Inputs.parse(input).files
    try:
        check_input_names(composed, list(files), True)
        inputs = {name: read_array(spec, name) for name, spec in files.items()}
        check_shapes(composed, inputs)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colours)
    rng = np.random.default_rng(seed)
    for t in composed.inputs:
        inputs.setdefault(t.name, random_input(rng, t))
    try:
        report = _run(composed, names, inputs, threads, compare, onnx, rounds, Options(target=target,
                      flags=tuple(iree_flag or ()), verify=not no_verify, device=device), str(path), as_json)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colours)
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        _show(report)
    if all(r.median_ms is None for r in report.results) or (check and report.wrong()):
        raise typer.Exit(1)


def _run(graph: Graph, names: list[str], inputs: dict[str, np.ndarray], threads: int | None, compare: str | None,
         onnx: Path | None, rounds: int, options: Options, model: str, quiet: bool) -> Report:
    """The benchmark, with a progress bar (and the compile as its description) on a terminal."""
    kwargs = dict(threads=threads, reference=compare, onnx_file=str(onnx) if onnx else None, rounds=rounds,
                  options=options, model=model)
    if quiet or not sys.stderr.isatty():
        with reporting_compiles(None if quiet else CompileLine()):
            return bench(graph, names, inputs, **kwargs)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("preparing", total=1)

        def update(stage: str, done: int, total: int) -> None:
            progress.update(task, description=stage, completed=done, total=total)

        def compiling(what: str, seconds: float | None) -> None:  # the compile as the bar's description
            progress.update(task, description=f"compiling {what}… {seconds:.0f} s" if seconds is not None
                            else "preparing")

        with reporting_compiles(compiling):
            return bench(graph, names, inputs, progress=update, **kwargs)


def _show(report: Report) -> None:
    """The machine and BLAS settings that decide the numbers, then the latency table and what went wrong."""
    compare = report.reference
    env = report.environment
    console = Console(width=None if sys.stdout.isatty() else 140)  # files and pipes: no wrapped table
    pools = env.get("threadpools")
    pools_text = (", ".join(f"{p['internal_api']} {p['version']} ({p['num_threads']} threads, "
                            f"{p.get('architecture') or '?'})" for p in pools) if isinstance(pools, list) else pools)
    console.print(f"[bold]{escape(report.model)}[/]: {env['cpu']} ({env['cores']} cores; "
                  f"{' '.join(env['isa']) or 'no AVX2'}), threads {report.threads or 'default'}")
    console.print(f"numpy {env['numpy']} BLAS {escape(env['numpy_blas'])}; thread pools: {escape(str(pools_text))}")
    console.print("BLAS environment: " + (escape(" ".join(f"{k}={v}" for k, v in env["env"].items())) or "none set"))
    if env.get("blas_note"):
        console.print(f"[yellow]note[/]: {escape(env['blas_note'])}")
    table = Table(title="latency (median)")
    for col in ("backend", "prepare (s)", "median (ms)", "runs", f"/ {compare}" if compare else "", "max rel. diff"):
        if col:
            table.add_column(col, justify="left" if col == "backend" else "right")
    for r in report.results:
        cells = [r.backend, "-" if r.prepare_s is None else f"{r.prepare_s:.2f}",
                 "-" if r.median_ms is None else f"{r.median_ms:.2f}", str(r.runs)]
        if compare:
            cells.append("-" if r.ratio_vs_onnxruntime is None else f"{r.ratio_vs_onnxruntime:.2f}x")
        wrong = r.deviation is not None and not r.deviation <= DEVIATION_LIMIT
        cells.append("-" if r.deviation is None else f"[bold red]{r.deviation:.1e}[/]" if wrong
                     else f"{r.deviation:.1e}")
        table.add_row(*(escape(c) if i == 0 else c for i, c in enumerate(cells)),
                      style="red" if r.error or wrong else None)
    console.print(table)
    for r in report.results:
        if r.error:
            console.print(f"[red]{escape(r.backend)}[/]: {escape(r.error)}")
        elif r.deviation is not None and not r.deviation <= DEVIATION_LIMIT:
            console.print(f"[bold red]{escape(r.backend)}: wrong results[/]: it deviates from "
                          f"{escape(report.results[0].backend)} by {r.deviation:.1e} of the largest output value "
                          f"(limit {DEVIATION_LIMIT:g}); --check makes this exit 1")
