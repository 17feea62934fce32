"""`sknd compose` and `sknd run`: the model-level commands (graph composition and execution)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from skriptnd.diagnostics import Diagnostic, DiagnosticError, print_diagnostics
from skriptnd.source import SourceFile

if TYPE_CHECKING:  # numpy is imported by the commands that use it: `sknd --help` starts fast
    import numpy as np


class GraphFormat(StrEnum):
    text = "text"
    json = "json"
    dot = "dot"


ModelArg = Annotated[Path, typer.Argument(help="A model folder (with main.sknd) or a main .sknd file.")]
#: The iree backend's options, shared by `sknd run` and `sknd bench`.
IreeFlagOpt = Annotated[list[str] | None, typer.Option("--iree-flag", help="iree: one more iree-compile flag "
                                                       "(repeatable), e.g. --iree-flag=--iree-opt-data-tiling=false")]
NoVerifyOpt = Annotated[bool, typer.Option("--no-verify", help="iree: do not compare a newly compiled module with "
                                           "the numpy backend before its first result (unchecked results).")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="iree: where to run, cpu (default), cuda[:ARCH] "
                                               "(default sm_80), vulkan[:TARGET] or hip[:ARCH] (default gfx942); "
                                               "sknd bench runs the other backends on the CPU.")]
GraphOpt = Annotated[str | None, typer.Option("--graph", help="The graph to compose (default: the first).")]
ColorOpt = Annotated[str, typer.Option("--color", help="auto, always or never: colour diagnostics.")]
AttribOpt = Annotated[list[str] | None, typer.Option("--attrib", "-a", help="A graph attribute, name=value "
                                                     "(a SkriptND expression: 4, 0.5, true, [1, 2], 'x').")]


def _color(choice: str) -> bool | None:
    if choice not in ("auto", "always", "never"):
        raise typer.BadParameter("use auto, always or never", param_hint="--color")
    return {"auto": None, "always": True, "never": False}[choice]


_INT = re.compile(r"-?(0|[1-9][0-9]*)")


def parse_attribs(items: list[str] | None) -> dict[str, Any]:
    """`name=value` pairs; the value is a SkriptND compile-time expression."""
    from skriptnd.semantics.evaluate import EvalError, evaluate
    from skriptnd.syntax import parse_expr

    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise typer.BadParameter(f"'{item}' is not name=value", param_hint="--attrib")
        if _INT.fullmatch(text.strip()):  # the common case (-a height=224) without building the parser
            out[name.strip()] = int(text)
            continue
        expr, diags = parse_expr(text, f"--attrib {name}")
        if expr is None or diags:
            raise typer.BadParameter(f"cannot read the value of '{name}': {diags[0].message if diags else text}",
                                     param_hint="--attrib")
        try:
            out[name.strip()] = evaluate(expr, {})
        except EvalError as err:
            raise typer.BadParameter(f"'{name}': {err.message}", param_hint="--attrib") from None
    return out


def sources_of(model: Any) -> dict[str, SourceFile]:
    if model is None:
        return {}
    return {str(m.source.path): m.source for m in model.program.modules.values() if m.source is not None}


def fail(diags: list[Diagnostic], model: Any, color: bool | None, exit_code: int = 1) -> None:
    def lookup(path: str) -> SourceFile | None:
        found = sources_of(model).get(path)
        if found is None and Path(path).is_file():
            found = SourceFile(path, Path(path).read_text(encoding="utf-8", errors="replace"))
        return found

    print_diagnostics(diags, lookup, color=color)
    raise typer.Exit(exit_code)


def load_and_compose(path: Path, graph: str | None, attribs: dict[str, Any], decompose: bool,
                     random_weights: bool, seed: int, color: bool | None) -> Any:
    from skriptnd.model import load

    model = None
    try:
        model = load(path)
        return model.compose(graph, attribs, decompose=decompose, random_weights=random_weights, seed=seed)
    except DiagnosticError as err:
        fail(err.diagnostics, model, color)


def compose_command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
                    format: Annotated[GraphFormat, typer.Option("--format", help="text, json or dot")]
                    = GraphFormat.text,
                    decompose_all: Annotated[bool, typer.Option("--decompose-all",
                                                                help="Decompose down to @lower primitives.")]
                    = False,
                    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file; "
                                                                "a .png/.svg/.pdf with --format dot is rendered "
                                                                "by graphviz when installed.")] = None,
                    tosa: Annotated[bool, typer.Option("--tosa", help="Report which operations map to TOSA "
                                                       "and which run a native kernel or @lower.")] = False,
                    target: Annotated[str | None, typer.Option("--target", help="nnapi, mli or tosa: the target "
                                                               "operation of each operation, or why none (with "
                                                               "--format json for tools).")] = None,
                    color: ColorOpt = "auto") -> None:
    """Compose a model's graph and print it.

    Example: sknd compose models/digits --attrib batch=4 --format dot -o digits.svg"""
    from skriptnd.cli.io import check_output_file, write_output
    from skriptnd.compose.render import to_dot, to_json_text, to_text

    check_output_file(output, "--output")
    if target is not None:
        from skriptnd.cli.targets import known_target

        known_target(target)
    composed = load_and_compose(path, graph, parse_attribs(attrib), decompose_all, True, 0, _color(color))
    if target is not None:
        from skriptnd.cli.targets import render_command

        render_command(composed, target, format.value, output)
        return
    if tosa:
        _tosa_coverage(composed)
        return
    text = {GraphFormat.text: to_text, GraphFormat.json: to_json_text, GraphFormat.dot: to_dot}[format](composed)
    if output is None:
        sys.stdout.write(text)
        return
    if format is GraphFormat.dot and output.suffix in (".png", ".svg", ".pdf"):
        dot = shutil.which("dot")
        if dot is None:
            fallback = output.with_suffix(".dot")
            write_output(fallback, text, "--output")
            typer.echo(f"graphviz is not installed: wrote {fallback} instead of a picture", err=True)
            return
        rendered = subprocess.run([dot, f"-T{output.suffix[1:]}"], input=text.encode(), capture_output=True)
        if rendered.returncode != 0:
            typer.echo(f"graphviz failed: {rendered.stderr.decode(errors='replace').strip()}", err=True)
            raise typer.Exit(1)
        write_output(output, rendered.stdout, "--output")
    else:
        write_output(output, text, "--output")
    typer.echo(f"wrote {output}", err=True)


def _tosa_coverage(graph: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from skriptnd.compose.quantization import has_quantization
    from skriptnd.execute import KERNELS
    from skriptnd.tosa.legalize import coverage

    rows = coverage(graph)
    table = Table(title=f"TOSA coverage of graph {graph.name}")
    for col in ("operation", "label", "TOSA", "rule or reason"):
        table.add_column(col)
    for op, ok, reason in rows:
        fallback = "native kernel" if op.op in KERNELS else "@lower"
        table.add_row(op.op, escape(op.label), "yes" if ok else f"no: {fallback}", escape(reason),
                      style=None if ok else "yellow")
    console = Console()
    console.print(table)
    done = sum(ok for _, ok, _ in rows)
    console.print(f"{done} of {len(rows)} operations map to TOSA; {len(rows) - done} fall back to a native "
                  "kernel or @lower")
    if has_quantization(graph):  # what `sknd run` runs by default for it: the integer graph
        from skriptnd.tosa.integer.lower import lower_quantized

        try:
            integer = lower_quantized(graph)
        except DiagnosticError as err:
            console.print(f"@quantize: no integer TOSA graph ({escape(err.diagnostics[0].message)}); "
                          "sknd run uses fake quantization")
            return
        console.print(f"@quantize: runs as an integer TOSA graph of {len(integer.ops)} operations "
                      f"({', '.join(sorted({o.name for o in integer.ops}))})")


def _random_input(rng: np.random.Generator, t: Any) -> np.ndarray:
    import numpy as np

    shape = tuple(d if d is not None else (b or 1) for d, b in zip(t.shape, t.bounds or (None,) * t.rank,
                                                                  strict=False))
    if t.dtype == "real":
        return rng.standard_normal(shape).astype(np.float32)
    if t.dtype == "int":
        return rng.integers(0, 10, size=shape, dtype=np.int64)
    return rng.integers(0, 2, size=shape).astype(np.bool_)


def run_command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
                input: Annotated[list[str] | None, typer.Option("--input", "-i", help="name=file.npy or "
                                                                 "name=file.dat")] = None,
                random_inputs: Annotated[bool, typer.Option("--random-inputs", help="Random values for inputs "
                                                            "not given.")] = False,
                random_weights: Annotated[bool, typer.Option("--random-weights", help="Random values for "
                                                             "variables without tensor files.")] = False,
                seed: Annotated[int, typer.Option("--seed")] = 0,
                save_inputs: Annotated[Path | None, typer.Option("--save-inputs", help="Write the inputs used "
                                                                 "as DIR/<name>.npy.")] = None,
                output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="Write each output "
                                                                "as DIR/<name>.npy.")] = None,
                expect: Annotated[Path | None, typer.Option("--expect", help="Compare with DIR/<name>.npy.")]
                = None,
                rtol: Annotated[float, typer.Option("--rtol")] = 1e-4,
                atol: Annotated[float, typer.Option("--atol")] = 1e-5,
                decompose_all: Annotated[bool, typer.Option("--decompose-all")] = False,
                via: Annotated[str, typer.Option("--via", help="The backend (skriptnd.backends): numpy (default: "
                                                 "TOSA programs on numpy, native kernels or @lower for the rest; "
                                                 "'tosa' is its former name), kernels, lower, iree (compiled by "
                                                 "IREE) or onnxruntime (the ONNX export)")] = "numpy",
                threads: Annotated[int | None, typer.Option("--threads", min=1, help="Worker threads of the "
                                                            "backend (numpy: its kernels' threads and "
                                                            "OpenBLAS's; default: the usable CPUs).")] = None,
                target: Annotated[str | None, typer.Option("--target", help="iree: the CPU to compile for (default "
                                                           "host; e.g. generic, znver4, or a target triple to "
                                                           "cross-compile).")] = None,
                iree_flag: IreeFlagOpt = None,
                no_verify: NoVerifyOpt = False,
                device: DeviceOpt = None,
                verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the backend's plan: what runs "
                                                      "where and why, compiled or cached, the self-check.")]
                = False,
                max_memory: Annotated[str | None, typer.Option("--max-memory", help="Refuse runs whose inputs, "
                                                                "variables or any tensor need more (e.g. 512M, "
                                                                "4G; default: 80% of physical memory).")]
                = None,
                top_k: Annotated[int | None, typer.Option("--top-k", min=1, help="Show the K largest entries of "
                                                          "each row of 2-D outputs as a class table (shown "
                                                          "by default for outputs computed by a softmax).")]
                = None,
                color: ColorOpt = "auto") -> None:
    """Run a model's graph on inputs and write or show its outputs.

    Example: sknd run models/digits --input image=models/digits/samples/3.npy"""
    import numpy as np

    from skriptnd import backends
    from skriptnd.cli import io as cli_io
    from skriptnd.compose.quantization import has_quantization

    try:
        via = backends.canonical(via)
    except ValueError:
        raise typer.BadParameter(f"choose one of {', '.join(backends.names())} (tosa: numpy)",
                                 param_hint="--via") from None
    colour = _color(color)
    device = cli_io.check_device(device, [via], target)
    limit = cli_io.parse_size(max_memory) if max_memory is not None else cli_io.default_max_memory()
    cli_io.check_output_dir(save_inputs, "--save-inputs")
    cli_io.check_output_dir(output_dir, "--output-dir")
    items = [(*item.partition("=")[::2], item) for item in input or []]
    for name, _spec, item in items:
        if "=" not in item or not name:
            raise typer.BadParameter(f"'{item}' is not name=file", param_hint="'--input'")
    composed = load_and_compose(path, graph, parse_attribs(attrib), decompose_all, random_weights, seed, colour)
    try:  # located at the graph: an --input it does not have (exit 1), or inputs missing (usage, exit 2)
        cli_io.check_input_names(composed, [name for name, _, _ in items], random_inputs)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colour, exit_code=1 if any(d.code == "E0792" for d in err.diagnostics) else 2)
    try:
        cli_io.check_memory(composed, limit, random=[t.name for t in composed.inputs
                                                     if t.name not in {n for n, _, _ in items}])
    except DiagnosticError as err:
        fail(err.diagnostics, None, colour)
    rng = np.random.default_rng(seed)
    given: dict[str, np.ndarray] = {name: cli_io.read_array(spec, name) for name, spec, _ in items}
    for t in composed.inputs:
        if t.name not in given:
            given[t.name] = _random_input(rng, t)
    try:
        with backends.reporting_compiles(cli_io.CompileLine()):
            runner = backends.prepare(composed, via, backends.Options(threads=threads, target=target,
                                                                      flags=tuple(iree_flag or ()),
                                                                      verify=not no_verify, device=device))
        for line in runner.plan if verbose or has_quantization(composed) else []:
            typer.echo(line, err=True)
        if getattr(runner, "split", False) and not verbose:  # never a silent fallback
            typer.echo(f"{runner.plan[0]}; -v lists them", err=True)
        outputs = _run_with_progress(composed, runner, given)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colour)
    if save_inputs is not None:
        cli_io.save_arrays(save_inputs, given, "--save-inputs")
    if output_dir is not None:
        cli_io.save_arrays(output_dir, outputs, "--output-dir")
    _show(outputs, _class_outputs(composed), top_k)
    if expect is not None:
        try:
            _compare(outputs, expect, rtol, atol)
        except DiagnosticError as err:
            fail(err.diagnostics, None, colour)


def _run_with_progress(graph: Any, runner: Any, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """Run the prepared graph; on a terminal, a progress bar over its operations (rich)."""
    if not sys.stderr.isatty() or len(graph.operations) < 2:
        return runner.run(inputs)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("running {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(graph.name, total=len(graph.operations))
        return runner.run(inputs, lambda done, total: progress.update(task, completed=done, total=total))


def _class_outputs(graph: Any) -> set[str]:
    """Names of the outputs declared as class probabilities: computed by a softmax."""
    made_by = {id(v): op.op for op in graph.operations for v in op.outputs if v is not None}
    return {graph.output_name(i) for i, t in enumerate(graph.outputs) if made_by.get(id(t)) in SOFTMAX_OPS}


#: Operators whose result reads as class probabilities (a row per sample, a column per class).
SOFTMAX_OPS = frozenset({"nn.softmax"})


def _show(outputs: dict[str, Any], classes: set[str] = frozenset(), top_k: int | None = None) -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    table = Table(title="outputs")
    for col in ("name", "dtype", "shape", "min", "max", "mean", "argmax"):
        table.add_column(col)
    for name, value in outputs.items():
        arr = np.asarray(value)
        numeric = arr.size and arr.dtype.kind in "fiub"
        table.add_row(name, str(arr.dtype), str(list(arr.shape)),
                      *(f"{float(f(arr)):.6g}" if numeric else "-" for f in (np.min, np.max, np.mean)),
                      str(int(np.argmax(arr))) if numeric else "-")
    console = Console(stderr=False)
    console.print(table)
    for name, value in outputs.items():
        arr = np.asarray(value)
        if arr.ndim != 2 or arr.dtype.kind not in "fiu" or arr.shape[1] < 2:
            continue
        if top_k is None and not (name in classes and arr.shape[0] <= 4 and arr.shape[1] <= 20):
            continue  # other 2-D outputs: their statistics above
        keep = top_k or arr.shape[1]
        for row, scores in enumerate(arr[:4]):
            best = int(np.argmax(scores))
            detail = Table(title=f"{name}[{row}]: class {best} ({float(scores[best]):.4g})")
            detail.add_column("class", justify="right")
            detail.add_column(name, justify="right")
            for k in np.argsort(-scores, kind="stable")[:keep]:
                style = "bold green" if k == best else None
                detail.add_row(str(int(k)), f"{float(scores[k]):.4f}", style=style)
            console.print(detail)


def _compare(outputs: dict[str, Any], folder: Path, rtol: float, atol: float) -> None:
    import numpy as np

    from skriptnd.io.npy import NpyError, read_npy
    from skriptnd.source import Span

    failed = False
    for name, value in outputs.items():
        ref_path = folder / f"{name}.npy"
        if not ref_path.is_file():
            typer.echo(f"{name}: no reference {ref_path}", err=True)
            failed = True
            continue
        try:
            ref = read_npy(ref_path)
        except NpyError as err:  # a pickle, a truncated or lying header: located at the file
            raise DiagnosticError([err.to_diagnostic()]) from None
        except OSError as err:
            raise DiagnosticError([Diagnostic(code="E0704", message=f"cannot read {ref_path}: {err.strerror or err}",
                                              span=Span(str(ref_path), 1, 1, 1, 2))]) from None
        arr = np.asarray(value)
        if ref.shape != arr.shape or not np.allclose(arr, ref, rtol=rtol, atol=atol):
            diff = float(np.max(np.abs(arr.astype(np.float64) - ref))) if ref.shape == arr.shape else float("nan")
            typer.echo(f"{name}: MISMATCH (shape {list(arr.shape)} vs {list(ref.shape)}, max |diff| {diff:.3g})",
                       err=True)
            failed = True
        else:
            typer.echo(f"{name}: matches {ref_path} (rtol={rtol}, atol={atol})", err=True)
    if failed:
        raise typer.Exit(1)
