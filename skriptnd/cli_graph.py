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

from .diagnostics import Diagnostic, DiagnosticError, print_diagnostics
from .fileio import write_atomic
from .source import SourceFile

if TYPE_CHECKING:  # numpy is imported by the commands that use it: `sknd --help` starts fast
    import numpy as np


class GraphFormat(StrEnum):
    text = "text"
    json = "json"
    dot = "dot"


ModelArg = Annotated[Path, typer.Argument(help="A model folder (with main.sknd) or a main .sknd file.")]
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
    from .semantics.evaluate import EvalError, evaluate
    from .syntax import parse_expr

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


def fail(diags: list[Diagnostic], model: Any, color: bool | None) -> None:
    def lookup(path: str) -> SourceFile | None:
        found = sources_of(model).get(path)
        if found is None and Path(path).is_file():
            found = SourceFile(path, Path(path).read_text(encoding="utf-8", errors="replace"))
        return found

    print_diagnostics(diags, lookup, color=color)
    raise typer.Exit(1)


def load_and_compose(path: Path, graph: str | None, attribs: dict[str, Any], decompose: bool,
                     random_weights: bool, seed: int, color: bool | None) -> Any:
    from .model import load

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
                    color: ColorOpt = "auto") -> None:
    """Compose a model's graph and print it."""
    from .compose.render import to_dot, to_json_text, to_text

    composed = load_and_compose(path, graph, parse_attribs(attrib), decompose_all, True, 0, _color(color))
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
            write_atomic(fallback, text)
            typer.echo(f"graphviz is not installed: wrote {fallback} instead of a picture", err=True)
            return
        rendered = subprocess.run([dot, f"-T{output.suffix[1:]}"], input=text.encode(), capture_output=True)
        if rendered.returncode != 0:
            typer.echo(f"graphviz failed: {rendered.stderr.decode(errors='replace').strip()}", err=True)
            raise typer.Exit(1)
        write_atomic(output, rendered.stdout)
    else:
        write_atomic(output, text)
    typer.echo(f"wrote {output}", err=True)


def _tosa_coverage(graph: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .execute import KERNELS
    from .execute.quantize import has_quantization
    from .tosa.legalize import coverage

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
        from .tosa.quantized import lower_quantized

        try:
            integer = lower_quantized(graph)
        except DiagnosticError as err:
            console.print(f"@quantize: no integer TOSA graph ({escape(err.diagnostics[0].message)}); "
                          "sknd run uses fake quantization")
            return
        console.print(f"@quantize: runs as an integer TOSA graph of {len(integer.ops)} operations "
                      f"({', '.join(sorted({o.name for o in integer.ops}))})")


def _load_array(spec: str, name: str) -> np.ndarray:
    import numpy as np

    path = Path(spec)
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {spec}", param_hint=f"--input {name}")
    try:
        if path.suffix == ".dat":
            from .io.tensor_file import read_tensor

            return read_tensor(path)
        return np.load(path, allow_pickle=False)
    except Exception as err:  # corrupt user files are a usage problem, reported in one line
        raise typer.BadParameter(f"cannot read {spec}: {err}", param_hint=f"--input {name}") from None


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
                                                            "iree / onnxruntime backends.")] = None,
                target: Annotated[str | None, typer.Option("--target", help="iree: the CPU to compile for (default "
                                                           "host; e.g. generic, znver4, or a target triple to "
                                                           "cross-compile).")] = None,
                verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the backend's plan: what runs "
                                                      "where, compiled or cached.")] = False,
                color: ColorOpt = "auto") -> None:
    """Run a model's graph on inputs and write or show its outputs."""
    import numpy as np

    from . import backends

    try:
        via = backends.canonical(via)
    except ValueError:
        raise typer.BadParameter(f"choose one of {', '.join(backends.names())} (tosa: numpy)",
                                 param_hint="--via") from None
    colour = _color(color)
    composed = load_and_compose(path, graph, parse_attribs(attrib), decompose_all, random_weights, seed, colour)
    rng = np.random.default_rng(seed)
    given: dict[str, np.ndarray] = {}
    for item in input or []:
        name, sep, spec = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"'{item}' is not name=file", param_hint="--input")
        given[name] = _load_array(spec, name)
    for t in composed.inputs:
        if t.name not in given:
            if not random_inputs:
                raise typer.BadParameter(f"no value for input '{t.name}'; give --input {t.name}=FILE.npy or "
                                         "--random-inputs", param_hint="--input")
            given[t.name] = _random_input(rng, t)
    try:
        runner = backends.prepare(composed, via, backends.Options(threads=threads, target=target))
        for line in runner.plan if verbose or _has_quantize(composed) else []:
            typer.echo(line, err=True)
        if getattr(runner, "split", False) and not verbose:  # never a silent fallback
            typer.echo(f"{runner.plan[0]}; -v lists them", err=True)
        outputs = _run_with_progress(composed, runner, given)
    except DiagnosticError as err:
        fail(err.diagnostics, None, colour)
    if save_inputs is not None:
        save_inputs.mkdir(parents=True, exist_ok=True)
        for name, array in given.items():
            _save(save_inputs / f"{name}.npy", array)
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name, array in outputs.items():
            _save(output_dir / f"{name}.npy", np.asarray(array))
    _show(outputs)
    if expect is not None:
        _compare(outputs, expect, rtol, atol)


def _run_with_progress(graph: Any, runner: Any, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """Run the prepared graph; on a terminal, a progress bar over its operations (rich)."""
    if not sys.stderr.isatty() or len(graph.operations) < 2:
        return runner.run(inputs)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("running {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(graph.name, total=len(graph.operations))
        return runner.run(inputs, lambda done, total: progress.update(task, completed=done, total=total))


def _has_quantize(graph: Any) -> bool:
    from .execute.quantize import has_quantization

    return has_quantization(graph)


def _save(path: Path, array: np.ndarray) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    write_atomic(path, buffer.getvalue())


def _show(outputs: dict[str, Any]) -> None:
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
        if arr.ndim == 2 and arr.shape[0] <= 4 and 1 < arr.shape[1] <= 20 and arr.dtype.kind == "f":
            for row, scores in enumerate(arr):
                best = int(np.argmax(scores))
                detail = Table(title=f"{name}[{row}]: class {best} ({float(scores[best]):.4g})")
                detail.add_column("class", justify="right")
                detail.add_column(name, justify="right")
                for k in np.argsort(-scores):
                    style = "bold green" if k == best else None
                    detail.add_row(str(int(k)), f"{float(scores[k]):.4f}", style=style)
                console.print(detail)


def _compare(outputs: dict[str, Any], folder: Path, rtol: float, atol: float) -> None:
    import numpy as np

    failed = False
    for name, value in outputs.items():
        ref_path = folder / f"{name}.npy"
        if not ref_path.is_file():
            typer.echo(f"{name}: no reference {ref_path}", err=True)
            failed = True
            continue
        ref = np.load(ref_path, allow_pickle=False)
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
