"""Batch, threads and peak memory of the zoo's models per backend, against onnxruntime on the original .onnx.

    python benchmarks/zoo/speed.py [--cache DIR] [--dynamic DIR ...] [--only NAME,...] [--batch 1,8]
                                   [--threads 1,2] [--via numpy,iree] [--rounds R] [--work DIR]
                                   [--json FILE] [--markdown FILE] [--no-memory]

Issue 28 asks, beside its batch-1 ratios, for the numbers that matter to users: batch 8, 2 threads against 1,
and peak memory per backend. `sknd bench` gives one (model, batch, threads) cell; this script walks the
matrix the same way for every model, so the table in docs/performance.md can be regenerated in one command.

Which .onnx: batch 1 runs the zoo's original export ``--cache/NAME.onnx`` (as the batch-1 table of
docs/performance.md does); a larger batch needs a dynamic-batch export ``NAME_dyn.onnx``, looked up in the
``--dynamic`` folders (``benchmarks/zoo/build.py --dynamic --only NAME --variants classic --out DIR`` makes one
with the torch venv; ``--batch1 dynamic`` uses it for batch 1 too). Each .onnx is imported once into
``--work/STEM`` (kept: a later run reuses it while the .onnx is unchanged); its ``batch`` (and ``seq``) stay
graph attributes, composed for the inputs' extents. Inputs: the zoo's batch-1 inputs ``NAME.inputs.npz``
(token ids and masks too) repeated to the batch, so every batch computes the same samples.

1. Timing: one subprocess per (model, batch, threads) runs ``skriptnd.backends.bench.bench`` on the ``--via``
   backends and onnxruntime on that same .onnx file, interleaved round by round (``--rounds``, 3 timed runs
   each), giving each backend's median, its ratio to onnxruntime and its deviation from the first backend.
   numpy's BLAS is limited to the threads by threadpoolctl, IREE and onnxruntime get them as their workers.
   Nothing else of this script runs meanwhile (the steps run one after the other), and the load average
   before and after each step is kept, so a loaded machine shows. Compiles (IREE) are not timed: they happen
   in prepare, into ``--work/iree-cache``.
2. Peak memory: after a batch's timings, one subprocess per (model, backend, batch) imports the libraries the
   backend needs (numpy, skriptnd's modules, iree.runtime; or onnxruntime) and loads the inputs, reads its resident set
   (``base``), then composes the graph, prepares the backend, runs it 3 times and reads ``ru_maxrss`` (``peak``);
   onnxruntime on the original .onnx is measured the same way (session creation in place of compose and
   prepare). ``peak`` is the process's whole high-water mark (interpreter, libraries, inputs included);
   ``peak - base`` is what the model costs on that backend: weights, plans, arenas, activations. IREE's
   module comes from the cache the timing step filled (``warm``), so the compile is not in it; iree-compile
   runs as a child process anyway, and if the module was not cached, its peak is reported apart
   (``compile_mb``, the children's ru_maxrss) and the row says ``cold``. The self-check against numpy is off
   in this step (``verify=False``), so numpy's run is not counted in IREE's memory. It uses the largest of
   ``--threads``.

Each step has a time limit and an address-space limit (``--timeout``, ``--max-memory``), so a model that fails
at some batch on some backend is a row with its error, and the rest goes on. Prints a table; ``--json``
writes everything (with ``bench.environment()``: CPU, numpy's BLAS, library versions), ``--markdown`` a
docs-ready table. Uses no torch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import steps  # benchmarks/zoo/steps.py: the script's folder is on sys.path

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skriptnd" / "zoo"
#: the eight architectures of issue 28
MODELS = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert", "gpt2", "llama")
MEMORY_RUNS = 3
ERROR_LINES = 8


# ----------------------------------------------------------------------------- workers (subprocesses)


def _error_text(error: BaseException) -> str:
    from skriptnd.diagnostics import DiagnosticError, render_text

    if isinstance(error, DiagnosticError):
        return render_text(error.diagnostics, None)
    inner = [f for f in traceback.extract_tb(error.__traceback__) if "skriptnd" in f.filename]
    where = f" ({Path(inner[-1].filename).name}:{inner[-1].lineno})" if inner else ""
    return f"{type(error).__name__}{where}: {error}"


def _rss_mb() -> float:
    """The resident set now (VmRSS), in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # kB on Linux


def _batched(inputs_path: str, batch: int) -> dict[str, np.ndarray]:
    """The zoo's batch-1 inputs (by their ONNX names), each repeated ``batch`` times along its first axis."""
    return {k: np.ascontiguousarray(np.concatenate([v] * batch, axis=0)) for k, v in np.load(inputs_path).items()}


def _by_name(feeds: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """The inputs by the graph's (or session's) input names: by position when the importer renamed them."""
    if set(names) != set(feeds) and len(names) == len(feeds):
        return dict(zip(names, feeds.values(), strict=True))
    return feeds


def _compose(folder: str, feeds: dict[str, np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    """The imported graph composed for the inputs' extents (``batch``, ``seq``: graph attributes), and the
    inputs by its input names."""
    import skriptnd
    from skriptnd.compose.input_shapes import check_shapes, infer_attribs

    model = skriptnd.load(folder)
    graph = model.compose()
    inputs = _by_name(feeds, [t.name for t in graph.inputs])
    attribs = infer_attribs(graph, {k: v.shape for k, v in inputs.items()}, ())
    if attribs:
        graph = model.compose(attribs=attribs)
    check_shapes(graph, inputs)
    return graph, inputs


def _worker_import(onnx_path: str, folder: str) -> dict[str, Any]:
    import skriptnd

    start = time.perf_counter()
    skriptnd.import_model(onnx_path, folder)
    return {"import_s": time.perf_counter() - start}


def _worker_time(spec: dict[str, Any]) -> dict[str, Any]:
    """One (model, batch, threads): bench() of the backends and onnxruntime on the .onnx file."""
    from skriptnd.backends import Options
    from skriptnd.backends.bench import bench

    graph, inputs = _compose(spec["folder"], _batched(spec["inputs"], spec["batch"]))
    report = bench(graph, spec["via"], inputs, threads=spec["threads"], onnx_file=spec["onnx"],
                   rounds=spec["rounds"], options=Options(cache_dir=spec["cache_dir"]), model=spec["model"])
    return report.to_json()


def _worker_memory(spec: dict[str, Any]) -> dict[str, Any]:
    """One (model, backend, batch): the process's resident set before composing, its peak after 3 runs."""
    threads = spec["threads"]
    backend = spec["backend"]
    if backend == "onnxruntime":
        import onnxruntime as ort

        feeds = _batched(spec["inputs"], spec["batch"])
        base, base_peak = _rss_mb(), _peak_mb()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        session = ort.InferenceSession(spec["onnx"], options, providers=["CPUExecutionProvider"])
        feeds = _by_name(feeds, [i.name for i in session.get_inputs()])
        for _ in range(MEMORY_RUNS):
            session.run(None, feeds)
        return {"base_mb": base, "base_peak_mb": base_peak, "peak_mb": _peak_mb(), "warm": None}
    import importlib

    from skriptnd.backends import Options, prepare
    from skriptnd.backends.bench import blas_limit

    # the code is part of the base, not of the model: skriptnd imports its modules lazily, on first use
    for module in ("skriptnd.model", "skriptnd.compose.input_shapes", "skriptnd.backends.registry",
                   f"skriptnd.backends.via_{backend}", "numpy.random", "threadpoolctl",
                   *(("iree.runtime",) if backend == "iree" else ())):
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    feeds = _batched(spec["inputs"], spec["batch"])
    with blas_limit(threads):
        base, base_peak = _rss_mb(), _peak_mb()
        graph, inputs = _compose(spec["folder"], feeds)
        runner = prepare(graph, backend, Options(threads=threads, cache_dir=spec["cache_dir"], verify=False))
        for _ in range(MEMORY_RUNS):
            runner.run(inputs)
    plan = " ".join(getattr(runner, "plan", []) or [])
    warm = None if backend != "iree" else "module compiled in" not in plan
    return {"base_mb": base, "base_peak_mb": base_peak, "peak_mb": _peak_mb(), "warm": warm,
            "compile_mb": _peak_mb(resource.RUSAGE_CHILDREN) or None}


def worker_main(argv: list[str]) -> int:
    """``speed.py --worker KIND ARG... RESULT.json``: one step, its result (or error) as JSON."""
    kind, *args, result_path = argv
    try:
        if kind == "import":
            result = {"status": "ok", **_worker_import(*args)}
        else:
            fn = {"time": _worker_time, "memory": _worker_memory}[kind]
            result = {"status": "ok", **fn(json.loads(args[0]))}
    except BaseException as e:  # noqa: BLE001  (every failure is a row of the table)
        if isinstance(e, KeyboardInterrupt):
            raise
        result = {"status": "error", "message": _error_text(e)}
    Path(result_path).write_text(json.dumps(result))
    return 0


def run_step(args: list[str], timeout: float, memory: int, threads: int = 1) -> dict[str, Any]:
    """A worker of this script in a subprocess (benchmarks/zoo/steps.py), BLAS and OpenMP pools sized to
    ``threads``."""
    return steps.run_step(__file__, args, timeout, memory, threads, ERROR_LINES)


# ----------------------------------------------------------------------------- the matrix


@dataclass
class Cell:
    """One (model, batch, threads, backend): median ms, ratio to onnxruntime, deviation; or an error."""

    model: str
    batch: int
    threads: int
    backend: str
    onnx: str
    median_ms: float | None = None
    ratio: float | None = None
    deviation: float | None = None
    runs: int = 0
    #: seconds to prepare (IREE: compile, or load from --work's cache) and run once, untimed
    prepare_s: float | None = None
    error: str = ""
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None


@dataclass
class Memory:
    """One (model, backend, batch): peak RSS and peak minus the RSS before composing, in MB."""

    model: str
    batch: int
    backend: str
    threads: int
    peak_mb: float | None = None
    base_mb: float | None = None
    model_mb: float | None = None
    warm: bool | None = None
    compile_mb: float | None = None
    error: str = ""


@dataclass
class Results:
    machine: dict[str, Any] = field(default_factory=dict)
    load_before: tuple[float, ...] = ()
    load_after: tuple[float, ...] = ()
    cells: list[Cell] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    imports: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: each timing step's bench.environment() (its thread pools, the *_NUM_THREADS it ran with)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the OPENBLAS_* / OMP_* / MKL_* variables this script was started with (each step sets *_NUM_THREADS)
    blas_env: dict[str, str] = field(default_factory=dict)
    #: every subprocess: what it did, its status and wall seconds (prepare and compiles included)
    steps: list[dict[str, Any]] = field(default_factory=list)


def _first_lines(text: str) -> str:
    return "\n".join(line[:300] for line in text.splitlines() if line.strip())[:2000]


def _short(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:160] if lines else ""


def imported(onnx_path: Path, work: Path, timeout: float, memory: int, results: Results) -> Path | None:
    """``work/STEM``, imported from ``onnx_path`` unless an import of the same file (size, mtime) is there."""
    stem = onnx_path.name[:-len(".onnx")]
    folder = work / stem
    marker = work / f"{stem}.source.json"
    source = {"onnx": str(onnx_path.resolve()), "size": onnx_path.stat().st_size,
              "mtime": onnx_path.stat().st_mtime}
    if folder.is_dir() and marker.exists() and json.loads(marker.read_text()) == source:
        results.imports[stem] = {"status": "ok", "reused": True}
        return folder
    if marker.exists():
        marker.unlink()
    res = run_step(["import", str(onnx_path), str(folder)], timeout, memory)
    results.imports[stem] = res
    if res["status"] != "ok":
        return None
    marker.write_text(json.dumps(source))
    return folder


def onnx_for(name: str, batch: int, args: argparse.Namespace) -> Path | None:
    """The .onnx of a batch: the original export at batch 1 (unless ``--batch1 dynamic``), else NAME_dyn.onnx."""
    if batch == 1 and args.batch1 == "static":
        path = args.cache / f"{name}.onnx"
        return path if path.exists() else None
    for folder in [*args.dynamic, args.cache]:
        path = folder / f"{name}_dyn.onnx"
        if path.exists():
            return path
    return None


def run_model(name: str, args: argparse.Namespace, results: Results) -> None:
    inputs = args.cache / f"{name}.inputs.npz"
    for batch in args.batch:
        onnx_path = onnx_for(name, batch, args)
        why = ""
        if onnx_path is None:
            why = (f"no {name}.onnx in {args.cache}" if batch == 1 and args.batch1 == "static" else
                   f"no {name}_dyn.onnx in {', '.join(map(str, [*args.dynamic, args.cache]))} (batch {batch} "
                   "needs a dynamic-batch export: build.py --dynamic)")
        elif not inputs.exists():
            why = f"no {inputs}"
        folder = None if why else imported(onnx_path, args.work, args.timeout, args.max_memory, results)
        if folder is None and not why:
            stem = onnx_path.name[:-len('.onnx')] if onnx_path else name
            why = "import failed: " + _short(results.imports.get(stem, {}).get("message", ""))
        rows = [*args.via, "onnxruntime"]
        if folder is None or onnx_path is None:
            for threads in args.threads:
                results.cells += [Cell(name, batch, threads, b, "", error=why) for b in rows]
            print(f"{name} batch {batch}: {why}", flush=True)
            continue
        for threads in args.threads:
            spec = {"model": name, "folder": str(folder), "onnx": str(onnx_path), "inputs": str(inputs),
                    "batch": batch, "threads": threads, "via": args.via, "rounds": args.rounds,
                    "cache_dir": str(args.work / "iree-cache")}
            before = os.getloadavg()
            res = run_step(["time", json.dumps(spec)], args.timeout, args.max_memory, threads)
            after = os.getloadavg()
            results.steps.append({"step": "time", "model": name, "batch": batch, "threads": threads,
                                  "status": res["status"], "wall_s": res.get("wall_s")})
            if res["status"] != "ok":
                message = _first_lines(res.get("message", ""))
                results.cells += [Cell(name, batch, threads, b, onnx_path.name, error=f"{res['status']}: {message}",
                                       load_before=before, load_after=after) for b in rows]
            else:
                results.machine = results.machine or res["environment"]
                results.environments[f"{name} batch {batch} threads {threads}"] = res["environment"]
                for r in res["results"]:
                    backend = "onnxruntime" if r["backend"] == res["reference"] else r["backend"]
                    results.cells.append(Cell(name, batch, threads, backend, onnx_path.name, r["median_ms"],
                                              r["ratio_vs_onnxruntime"], r["deviation"], r["runs"],
                                              r["prepare_s"], r["error"] or "", before, after))
            print_cells([c for c in results.cells if (c.model, c.batch, c.threads) == (name, batch, threads)])
        if args.no_memory:
            continue
        threads = max(args.threads)
        for backend in rows:
            spec = {"folder": str(folder), "onnx": str(onnx_path), "inputs": str(inputs), "batch": batch,
                    "threads": threads, "backend": backend, "cache_dir": str(args.work / "iree-cache")}
            res = run_step(["memory", json.dumps(spec)], args.timeout, args.max_memory, threads)
            results.steps.append({"step": "memory", "model": name, "batch": batch, "backend": backend,
                                  "status": res["status"], "wall_s": res.get("wall_s")})
            if res["status"] != "ok":
                m = Memory(name, batch, backend, threads,
                           error=f"{res['status']}: {_first_lines(res.get('message', ''))}")
            else:
                m = Memory(name, batch, backend, threads, res["peak_mb"], res["base_mb"],
                           res["peak_mb"] - res["base_mb"], res["warm"], res.get("compile_mb"))
            results.memory.append(m)
            print(f"  memory {name} batch {batch} {backend}: " + (m.error.splitlines()[0] if m.error else
                  f"peak {m.peak_mb:.0f} MB, +{m.model_mb:.0f} MB over {m.base_mb:.0f} MB"
                  + (" (cold: compiled)" if m.warm is False else "")), flush=True)


# ----------------------------------------------------------------------------- reporting


def _ms(t: float | None) -> str:
    return "–" if t is None else f"{t:.3g}" if t < 10 else f"{t:.1f}"


def print_cells(cells: list[Cell]) -> None:
    for c in cells:
        if c.error:
            text = f"error: {c.error.splitlines()[0][:120]}"
        else:
            ratio = f"{c.ratio:.2f}x" if c.ratio is not None else "–"
            dev = f", deviation {c.deviation:.1e}" if c.deviation is not None else ""
            text = f"{_ms(c.median_ms)} ms ({ratio}{dev})"
        print(f"{c.model} batch {c.batch} threads {c.threads} {c.backend}: {text}", flush=True)


def _load(load: tuple[float, ...] | None) -> str:
    return "–" if not load else " ".join(f"{x:.1f}" for x in load)


def describe_machine(results: Results) -> str:
    env = results.machine
    if not env:
        return f"load average before {_load(results.load_before)}, after {_load(results.load_after)}"
    pools = env.get("threadpools")
    blas = env.get("numpy_blas", "?")
    if isinstance(pools, list):
        blas += " (" + ", ".join(f"{p['internal_api']} {p['version']} {p.get('architecture') or ''}".strip()
                                 for p in pools) + ")"
    return (f"{env.get('cpu')} ({env.get('cores')} CPUs; {' '.join(env.get('isa', [])) or 'no AVX2'}); "
            f"python {env.get('python')}, numpy {env.get('numpy')} with {blas}; onnxruntime "
            f"{env.get('onnxruntime', '–')}; iree {env.get('iree', '–')}; BLAS environment: "
            f"{' '.join(f'{k}={v}' for k, v in results.blas_env.items()) or 'none set'} (each step sets "
            "OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to its threads); load average "
            f"(1, 5, 15 min) before {_load(results.load_before)}, after {_load(results.load_after)}")


def markdown(results: Results) -> str:
    """The docs-ready table: one row per (model, batch, threads, backend), with the backend's peak memory
    at that batch; then the errors."""
    peaks = {(m.model, m.batch, m.backend): m for m in results.memory}
    head = ["model", "batch", "threads", "backend", "ms", "ratio to ort", "deviation", "peak MB (model MB)"]
    lines = [f"Machine: {describe_machine(results)}.", "",
             "ms: median of the interleaved runs; ratio: to onnxruntime on the same .onnx, same threads; "
             "deviation: max |difference| / max |value| from the first backend's outputs; peak MB: the process's "
             f"peak resident set over compose, prepare and {MEMORY_RUNS} runs at that batch (threads "
             f"{max((m.threads for m in results.memory), default='–')}), and in brackets peak minus the "
             "resident set before composing (interpreter, libraries, inputs); cold: IREE compiled in that step.",
             "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    errors = []
    for c in results.cells:
        m = peaks.get((c.model, c.batch, c.backend))
        peak = "–" if m is None or m.peak_mb is None else f"{m.peak_mb:.0f} (+{m.model_mb:.0f})" + (
            ", cold" if m.warm is False else "")
        if c.error:
            errors.append(f"* {c.model} batch {c.batch} threads {c.threads} {c.backend}: {_short(c.error)}")
            if len(errors) > 1 and errors[-2].endswith(f": {_short(c.error)}") and errors[-2].startswith(
                    f"* {c.model} batch {c.batch} threads {c.threads} "):  # one step's error: once
                errors[-2] = errors[-2].replace(": ", f", {c.backend}: ", 1)
                errors.pop()
        lines.append("| " + " | ".join([
            c.model, str(c.batch), str(c.threads), c.backend, "error" if c.error else _ms(c.median_ms),
            "–" if c.ratio is None else f"{c.ratio:.2f}x",
            "–" if c.deviation is None else f"{c.deviation:.1e}", peak]) + " |")
    errors += [f"* memory {m.model} batch {m.batch} {m.backend}: {_short(m.error)}" for m in results.memory
               if m.error]
    if errors:
        lines += ["", "Errors:", "", *errors]
    return "\n".join(lines) + "\n"


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text or 0)


def _ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"positive integers, comma-separated: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"zoo folder with NAME.onnx and NAME.inputs.npz (default {DEFAULT_CACHE})")
    parser.add_argument("--dynamic", type=Path, nargs="*", default=[],
                        help="folders with dynamic-batch exports NAME_dyn.onnx (then --cache)")
    parser.add_argument("--only", default=",".join(MODELS), help="models, comma-separated (default: issue 28's)")
    parser.add_argument("--batch", type=_ints, default=[1, 8], help="batch sizes (default 1,8)")
    parser.add_argument("--threads", type=_ints, default=[1, 2], help="thread counts (default 1,2)")
    parser.add_argument("--via", default="numpy,iree", help="backends, comma-separated (default numpy,iree)")
    parser.add_argument("--batch1", choices=["static", "dynamic"], default="static",
                        help="batch 1 from the original NAME.onnx (default) or from NAME_dyn.onnx")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds of bench (default 10)")
    parser.add_argument("--work", type=Path, default=None,
                        help="imports and the IREE cache, kept for the next run (default: a temp folder)")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="seconds per step (default 3600: ViT-B/16 at batch 8, one thread, 10 rounds)")
    parser.add_argument("--max-memory", type=_parse_size, default=_parse_size("16G"),
                        help="address-space limit per step (default 16G; 0: none)")
    parser.add_argument("--no-memory", action="store_true", help="timings only")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, default=None, help="write the table as markdown")
    args = parser.parse_args(argv)
    args.via = [b.strip() for b in args.via.split(",") if b.strip()]
    if "onnxruntime" in args.via:
        parser.error("--via: onnxruntime on the original .onnx is always timed; leave it out")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="zoo-speed-work-") as tmp:
        args.work = (args.work or Path(tmp)).resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        results = Results(load_before=os.getloadavg(), blas_env={
            k: v for k, v in sorted(os.environ.items()) if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "GOTO_"))})
        for name in names:
            run_model(name, args, results)
        results.load_after = os.getloadavg()
    text = markdown(results)
    print("\n" + text)
    if args.json:
        args.json.write_text(json.dumps(asdict(results), indent=2))
    if args.markdown:
        args.markdown.write_text(text)
    return 0 if all(not c.error for c in results.cells) and all(not m.error for m in results.memory) else 1


if __name__ == "__main__":
    sys.exit(main())
