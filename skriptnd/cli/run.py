"""`sknd run`: a model's graph run on inputs, its outputs shown, written or compared.

`command` reads top-down as the steps it takes, each one call: the options (every usage error before any
work), the model folder loaded and checked (skriptnd.model), the graph composed, its inputs checked and
gathered, the graph run on the backend (skriptnd.backends), the outputs written, shown and compared.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skriptnd import backends
from skriptnd.backends.base import Runner
from skriptnd.backends.bind import awaiting_error
from skriptnd.cli.backend import CompileLine, check_device
from skriptnd.cli.inputs import (
    Inputs,
    attribs_from_inputs,
    check_input_names,
    check_memory,
    default_max_memory,
    file_shape,
    parse_size,
    random_input,
)
from skriptnd.cli.io import check_output_dir, read_array, save_arrays
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
    RandomInputsOpt,
    RandomWeightsOpt,
    SeedOpt,
    colour,
    parse_attribs,
)
from skriptnd.cli.profile_report import print_profile
from skriptnd.cli.report import fail
from skriptnd.compose.input_shapes import check_shapes, infer_attribs
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.io.npy import NpyError, read_npy
from skriptnd.profiling import Profile, profiling
from skriptnd.source import Span

#: Operators whose result reads as class probabilities (a row per sample, a column per class).
SOFTMAX_OPS = frozenset({"nn.softmax"})


def command(path: ModelArg, graph: GraphOpt = None, attrib: AttribOpt = None,
            input: InputOpt = None,
            random_inputs: RandomInputsOpt = False,
            random_weights: RandomWeightsOpt = False,
            seed: SeedOpt = 0,
            save_inputs: Annotated[Path | None, typer.Option("--save-inputs", help="Write the inputs used "
                                                             "as DIR/<name>.npy.")] = None,
            output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="Write each output "
                                                            "as DIR/<name>.npy.")] = None,
            expect: Annotated[Path | None, typer.Option("--expect", help="Compare with DIR/<name>.npy.")] = None,
            rtol: Annotated[float, typer.Option("--rtol", help="--expect: the relative tolerance.")] = 1e-4,
            atol: Annotated[float, typer.Option("--atol", help="--expect: the absolute tolerance.")] = 1e-5,
            decompose_all: Annotated[bool, typer.Option("--decompose-all", help="Compose every standard "
                                                        "operator down to its @lower primitives (the reference "
                                                        "semantics) instead of keeping it atomic.")] = False,
            via: Annotated[str, typer.Option("--via", help="The backend (skriptnd.backends): numpy (default: "
                                             "TOSA programs on numpy, native kernels or @lower for the rest; "
                                             "'tosa' is its former name), kernels, lower, iree (compiled by "
                                             "IREE) or onnxruntime (the ONNX export)")] = "numpy",
            threads: Annotated[int | None, typer.Option("--threads", min=1, help="Worker threads of the "
                                                        "backend (numpy: its kernels' threads and "
                                                        "OpenBLAS's; iree: its task workers, but a module "
                                                        "under 32 M MACs runs on the calling thread; "
                                                        "default: the usable CPUs).")] = None,
            target: Annotated[str | None, typer.Option("--target", help="iree: the CPU to compile for (default "
                                                       "host; e.g. generic, znver4, or a target triple to "
                                                       "cross-compile).")] = None,
            iree_flag: IreeFlagOpt = None,
            no_verify: NoVerifyOpt = False,
            device: DeviceOpt = None,
            verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the backend's plan: what runs "
                                                  "where and why, compiled or cached, the self-check.")] = False,
            max_memory: Annotated[str | None, typer.Option("--max-memory", help="Refuse runs whose inputs, "
                                                           "variables or any tensor need more (e.g. 512M, "
                                                           "4G; default: 80% of physical memory).")] = None,
            top_k: Annotated[int | None, typer.Option("--top-k", min=1, help="Show the K largest entries of "
                                                      "each row of 2-D outputs as a class table (shown "
                                                      "by default for outputs computed by a softmax).")]
            = None,
            profile: Annotated[int, typer.Option("--profile", min=0, help="After the run, N more runs timed per "
                                                 "operation: tables of time by operator, the slowest "
                                                 "operations (with their source line) and TOSA operators. A "
                                                 "graph with @update profiles its one run.")] = 0,
            color: ColorOpt = Color.auto) -> None:
    """Run a model's graph on inputs and write or show its outputs.

    Example: sknd run models/digits --input image=models/digits/samples/3.npy"""
    # 1. the options: every usage error (exit 2) before any work
    via = _backend_name(via)
    device = check_device(device, [via], target)
    options = backends.Options(threads=threads, target=target, flags=tuple(iree_flag or ()),
                               verify=not no_verify, device=device)
    limit = parse_size(max_memory) if max_memory is not None else default_max_memory()
    check_output_dir(save_inputs, "--save-inputs")
    check_output_dir(output_dir, "--output-dir")
    files = Inputs.parse(input)
    attribs = parse_attribs(attrib)
    colours = colour(color)
    # 2. the model folder, read and checked; 3. its graph, composed for the attributes
    model = load_model(path, colours)
    attribs, files = attribs_from_inputs(model, graph, files, attribs, read_array)  # --input axes=a.npy
    composed = compose_graph(model, graph, attribs, colours, decompose=decompose_all,
                             random_weights=random_weights, seed=seed, defer=True)
    if composed.awaiting:  # an attribute with no default and no value: say to give it with --input
        fail(awaiting_error(composed, list(composed.awaiting)).diagnostics, model, colours)
    inferred = infer_attribs(composed, {n: s for n, spec in files.files.items() if (s := file_shape(spec))}, attribs)
    if inferred:  # e.g. batch from the input's first dimension: composed again for it, said once
        typer.echo(f"composed for {', '.join(f'{k}={v}' for k, v in inferred.items())} (read from the input "
                   f"shapes; --attrib sets them)", err=True)
        composed = compose_graph(model, graph, {**attribs, **inferred}, colours, decompose=decompose_all,
                                 random_weights=random_weights, seed=seed)
    # 4. the inputs, checked against the graph, then read or drawn
    given = _gather_inputs(composed, files, random_inputs, limit, seed, colours)
    # 5. the graph run on the backend
    outputs = _execute(composed, via, options, given, verbose, colours, profile)
    # 6. the outputs: written, shown, compared
    if save_inputs is not None:
        save_arrays(save_inputs, given, "--save-inputs")
        typer.echo(f"wrote {_count(given, 'input')} to {save_inputs}", err=True)
    if output_dir is not None:
        save_arrays(output_dir, outputs, "--output-dir")
        typer.echo(f"wrote {_count(outputs, 'output')} to {output_dir}", err=True)
    _show(outputs, _class_outputs(composed), top_k)
    if expect is not None:
        try:
            _compare(outputs, expect, rtol, atol)
        except DiagnosticError as err:
            fail(err.diagnostics, None, colours)


def _count(arrays: dict[str, np.ndarray], what: str) -> str:
    """"3 outputs", "1 input": the line that says what a run wrote, like the other writers' "wrote FILE"."""
    return f"{len(arrays)} {what}{'' if len(arrays) == 1 else 's'}"


def _backend_name(via: str) -> str:
    """`--via` by its canonical name (a usage error listing the backends for an unknown one)."""
    try:
        return backends.canonical(via)
    except ValueError:
        raise typer.BadParameter(f"choose one of {', '.join(backends.names())} (tosa: numpy)",
                                 param_hint="--via") from None


def _gather_inputs(composed: Graph, files: Inputs, random_inputs: bool, limit: int, seed: int,
                   color: bool | None) -> dict[str, np.ndarray]:
    """Every input of the graph: read from its file, else (--random-inputs) drawn with the seed; names the
    graph does not have (exit 1) or inputs missing (a usage error, exit 2) and sizes beyond the memory
    limit are refused, located at the graph, before any file is read."""
    try:
        check_input_names(composed, list(files.files), random_inputs)
    except DiagnosticError as err:
        fail(err.diagnostics, None, color, exit_code=1 if any(d.code == "E0792" for d in err.diagnostics) else 2)
    try:
        check_memory(composed, limit, random=[t.name for t in composed.inputs if t.name not in files.files])
    except DiagnosticError as err:
        fail(err.diagnostics, None, color)
    rng = np.random.default_rng(seed)
    given = {name: read_array(spec, name) for name, spec in files.files.items()}
    try:  # before any backend prepares (an IREE compile) or onnxruntime sees a wrong batch
        check_shapes(composed, given)
    except DiagnosticError as err:
        fail(err.diagnostics, None, color)
    for t in composed.inputs:
        if t.name not in given:
            given[t.name] = random_input(rng, t)
    return given


def _execute(composed: Graph, via: str, options: backends.Options, inputs: dict[str, np.ndarray], verbose: bool,
             color: bool | None, profile: int = 0) -> dict[str, np.ndarray]:
    """The graph prepared by the backend (a compile shown as a status line) and run; its plan shown with -v
    (and always for @quantize); a split plan is never silent. ``profile``: that many more runs, timed per
    operation (the first run builds plans and warms caches, so it is not among them; a graph with @update
    changes its variables at every run, so its one run is the profiled one)."""
    try:
        with backends.reporting_compiles(CompileLine()):
            runner = backends.prepare(composed, via, options)
        for line in runner.plan if verbose or has_quantization(composed) else []:
            typer.echo(line, err=True)
        if getattr(runner, "split", False) and not verbose:  # never a silent fallback
            typer.echo(f"{runner.plan[0]}; -v lists them", err=True)
        if profile and composed.updates:
            return _profiled(runner, inputs, 1)
        outputs = _run_with_progress(composed, runner, inputs)
        if profile:
            _profiled(runner, inputs, profile)
        return outputs
    except DiagnosticError as err:
        fail(err.diagnostics, None, color)


def _profiled(runner: Runner, inputs: dict[str, np.ndarray], runs: int) -> dict[str, np.ndarray]:
    """``runs`` runs timed per operation, their tables printed on stderr; the last run's outputs."""
    prof = Profile()
    outputs: dict[str, np.ndarray] = {}
    with profiling(prof):
        for _ in range(runs):
            started = time.perf_counter()
            outputs = runner.run(inputs)
            prof.wall += time.perf_counter() - started
            prof.runs += 1
    # piped (no terminal width): wide enough for labels and source lines
    print_profile(prof, Console(stderr=True, width=None if sys.stderr.isatty() else 150))
    return outputs


def _run_with_progress(graph: Graph, runner: Runner, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the prepared graph; on a terminal, a progress bar over its operations (rich)."""
    if not sys.stderr.isatty() or len(graph.operations) < 2:
        return runner.run(inputs)
    columns = (TextColumn("running {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(graph.name, total=len(graph.operations))
        return runner.run(inputs, lambda done, total: progress.update(task, completed=done, total=total))


def _class_outputs(graph: Graph) -> set[str]:
    """Names of the outputs declared as class probabilities: computed by a softmax."""
    made_by = {id(v): op.op for op in graph.operations for v in op.outputs if v is not None}
    return {graph.output_name(i) for i, t in enumerate(graph.outputs) if made_by.get(id(t)) in SOFTMAX_OPS}


def _show(outputs: dict[str, np.ndarray], classes: set[str] = frozenset(), top_k: int | None = None) -> None:
    """A table of each output's statistics; for class probabilities (or with --top-k) the best classes."""
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


def _as_reference_type(arr: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The output in the reference's type, as the model it came from declares it (an imported float16 or int8
    output runs as SkriptND's real / int, float32 / int64 here): a float reference rounds the output to its
    precision first; an integer one takes it only when every value fits (else it is compared as it is, and a
    value out of the reference type's range shows as a mismatch rather than wrapping around)."""
    if ref.dtype == arr.dtype or ref.shape != arr.shape or arr.dtype.kind not in "fiub":
        return arr
    if ref.dtype.kind == "f" and arr.dtype.kind == "f" and ref.dtype.itemsize < arr.dtype.itemsize:
        return arr.astype(ref.dtype)
    if ref.dtype.kind in "iu" and arr.dtype.kind in "iu" and arr.size:
        info = np.iinfo(ref.dtype)
        if info.min <= int(arr.min()) and int(arr.max()) <= info.max:
            return arr.astype(ref.dtype)
    return arr


def _compare(outputs: dict[str, np.ndarray], folder: Path, rtol: float, atol: float) -> None:
    """Each output against folder/<name>.npy (exit 1 on a mismatch or a missing reference)."""
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
        arr = _as_reference_type(np.asarray(value), ref)
        if ref.shape != arr.shape or not np.allclose(arr, ref, rtol=rtol, atol=atol):
            diff = float(np.max(np.abs(arr.astype(np.float64) - ref))) if ref.shape == arr.shape else float("nan")
            typer.echo(f"{name}: MISMATCH (shape {list(arr.shape)} vs {list(ref.shape)}, max |diff| {diff:.3g})",
                       err=True)
            failed = True
        else:
            typer.echo(f"{name}: matches {ref_path} (rtol={rtol}, atol={atol})", err=True)
    if failed:
        raise typer.Exit(1)
