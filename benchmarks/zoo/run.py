"""Run the real-model zoo (benchmarks/zoo/build.py's ONNX files) through skriptnd's backends.

    python benchmarks/zoo/run.py [--cache DIR] [--only NAME ...] [--via numpy,iree,onnxruntime]
                                 [--json FILE] [--markdown FILE] [--timeout S] [--max-memory 8G]

For every ``NAME.onnx`` of the cache folder (default ``~/.cache/skriptnd/zoo``; smallest file first):

1. the reference: onnxruntime (CPU, one thread) on the ORIGINAL .onnx, fed ``NAME.inputs.npz``; it is
   also compared with PyTorch's outputs (``NAME.torch_outputs.npz``) as a sanity check of the export;
2. ``skriptnd.import_model`` into a model folder (timed);
3. for each backend of ``--via``: compose the imported folder, prepare the backend (for iree: write the
   TOSA MLIR and compile it, into a fresh IREE cache, so the time is a cold compile), run it twice (the
   second run is the "run" time) and compare with the reference: the largest |difference| over the
   largest |reference| of each output, worst output counts; ``ok`` at most 1e-3, else ``wrong``.

Each step runs in its own subprocess with a time limit and an address-space limit, so a crash, a hang
or a model that exhausts memory is a result (``timeout``, ``killed``, ``error``) and the rest go on. An
error keeps the first lines of its diagnostic. Prints a table and writes the results as JSON and, with
``--markdown``, as a markdown table (``docs``-ready). Uses no torch: any python with skriptnd's dev
extra (onnx, onnxruntime, iree) runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
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
TOLERANCE = 1e-3
BACKENDS = ("numpy", "iree", "onnxruntime")
DIAGNOSTIC_LINES = 6


# ----------------------------------------------------------------------------- comparison


def relative_error(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> tuple[float, str]:
    """max |actual - expected| / max |expected| over the outputs (the worst one), paired by position
    when the names differ (an importer may rename them); (inf, why) on a shape or count mismatch."""
    a_items, e_items = list(actual.items()), list(expected.items())
    if len(a_items) != len(e_items):
        return float("inf"), f"{len(a_items)} outputs, expected {len(e_items)}"
    worst, where = 0.0, ""
    for (_, a), (e_name, e) in zip(a_items, e_items, strict=True):
        a = actual.get(e_name, a)
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return float("inf"), f"output {e_name}: shape {list(a.shape)}, expected {list(e.shape)}"
        if e.dtype.kind in "biu" or a.dtype.kind in "biu":
            err = float(np.any(a.astype(np.int64) != e.astype(np.int64)))
        else:
            scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-30)
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            err = float("inf") if not np.all(np.isfinite(diff)) else float(np.max(diff, initial=0.0)) / scale
        if err > worst or not where:
            worst, where = err, e_name
    return worst, where


# ----------------------------------------------------------------------------- workers (subprocesses)


def _diagnostic_text(error: BaseException) -> str:
    from skriptnd.diagnostics import DiagnosticError, render_text

    if isinstance(error, DiagnosticError):
        return render_text(error.diagnostics, None, color=False)
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    inner = [f for f in frames if "skriptnd" in f.filename]
    origin = f" (skriptnd: {Path(inner[-1].filename).name}:{inner[-1].lineno})" if inner else ""
    return f"internal error {type(error).__name__}{where}{origin}: {error}"


def _worker_reference(onnx_path: str, inputs_path: str, out_path: str) -> dict[str, Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    start = time.perf_counter()
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    feeds = dict(np.load(inputs_path))
    names = [o.name for o in session.get_outputs()]
    session.run(None, feeds)
    t = time.perf_counter()
    outputs = dict(zip(names, session.run(None, feeds), strict=True))
    run_s = time.perf_counter() - t
    np.savez(out_path, **outputs)
    return {"load_s": t - start - run_s, "run_s": run_s}


def _worker_import(onnx_path: str, folder: str) -> dict[str, Any]:
    import skriptnd

    start = time.perf_counter()
    skriptnd.import_model(onnx_path, folder)
    return {"import_s": time.perf_counter() - start}


def _worker_backend(folder: str, backend: str, inputs_path: str, out_path: str, cache_dir: str) -> dict[str, Any]:
    import skriptnd
    from skriptnd.backends import Options, prepare

    start = time.perf_counter()
    graph = skriptnd.load(folder).compose()
    compose_s = time.perf_counter() - start
    feeds = dict(np.load(inputs_path))
    names = [t.name for t in graph.inputs]
    if set(names) != set(feeds) and len(names) == len(feeds):  # renamed by the importer: by position
        feeds = dict(zip(names, feeds.values(), strict=True))
    options = Options(threads=1, cache_dir=cache_dir if backend == "iree" else None)
    start = time.perf_counter()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    runner = prepare(graph, backend, options)
    prepare_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # iree-compile's CPU seconds (a waited-for child): on a shared machine the wall time mostly says how
    # busy the other processes kept the cores, this says what the compile itself costs
    compiler_cpu_s = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    start = time.perf_counter()
    runner.run(feeds)
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    outputs = runner.run(feeds)
    run_s = time.perf_counter() - start
    np.savez(out_path, **{k: np.asarray(v) for k, v in outputs.items()})
    return {"compose_s": compose_s, "prepare_s": prepare_s, "first_run_s": first_s, "run_s": run_s,
            "compiler_cpu_s": compiler_cpu_s,
            "plan": list(getattr(runner, "plan", []) or [])[:20]}


def worker_main(argv: list[str]) -> int:
    """``run.py --worker KIND ARGS... RESULT.json``: one step, its result (or error) as JSON."""
    kind, *args, result_path = argv
    try:
        fn = {"reference": _worker_reference, "import": _worker_import, "backend": _worker_backend}[kind]
        result = {"status": "ok", **fn(*args)}
    except BaseException as e:  # noqa: BLE001  (every failure is a result of the zoo)
        if isinstance(e, KeyboardInterrupt):
            raise
        result = {"status": "error", "message": _diagnostic_text(e)}
    Path(result_path).write_text(json.dumps(result))
    return 0


def run_step(args: list[str], timeout: float, memory: int) -> dict[str, Any]:
    """A worker of this script in a subprocess (benchmarks/zoo/steps.py), one BLAS thread."""
    return steps.run_step(__file__, args, timeout, memory, 1, DIAGNOSTIC_LINES)


# ----------------------------------------------------------------------------- the zoo


@dataclass
class Cell:
    """One model x backend: ``ok`` / ``wrong`` / ``error`` / ``timeout`` / ``killed`` / ``skipped``."""

    status: str
    error: float | None = None
    where: str = ""
    message: str = ""
    compile_s: float | None = None
    #: CPU seconds of the compiler processes during prepare (iree-compile; none for the other backends)
    compiler_cpu_s: float | None = None
    run_s: float | None = None
    #: the backend's plan in short: "all N compiled" or "split: K module(s), M op(s) on numpy" (iree)
    plan: str = ""


@dataclass
class Row:
    model: str
    onnx_mb: float
    reference: str = ""
    torch_vs_ort: float | None = None
    ort_run_s: float | None = None
    import_status: str = ""
    import_s: float | None = None
    import_message: str = ""
    backends: dict[str, Cell] = field(default_factory=dict)


def _first_lines(text: str, n: int = DIAGNOSTIC_LINES) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    # keep an `error:` line of a compiler dump if it is not among the first ones
    head = [line[:400] for line in lines[:n]]
    errors = [line[:400] for line in lines[n:] if "error:" in line][:2]
    # an iree-compile dump cut to its end: name the dispatches it shows (e.g. an i1 encoding)
    import re

    dispatches = sorted(set(re.findall(r'sym_name = "([\w.]+)"', text)))[:4]
    if dispatches:
        errors.append("dispatches in the compiler's dump: " + ", ".join(dispatches))
    return "\n".join(head + errors)


def run_model(onnx_path: Path, work: Path, via: list[str], timeout: float, memory: int) -> Row:
    name = onnx_path.name[:-len(".onnx")]
    inputs = onnx_path.with_name(f"{name}.inputs.npz")
    row = Row(name, round(onnx_path.stat().st_size / 1e6, 2))
    folder = work / name
    if folder.exists():
        shutil.rmtree(folder)
    reference_path = work / f"{name}.ort.npz"
    ref = run_step(["reference", str(onnx_path), str(inputs), str(reference_path)], timeout, memory)
    row.reference = ref["status"]
    if ref["status"] != "ok":
        row.import_status, row.import_message = "skipped", "onnxruntime failed on the original: " + ref.get(
            "message", "")
        return row
    row.ort_run_s = ref["run_s"]
    expected = dict(np.load(reference_path))
    torch_path = onnx_path.with_name(f"{name}.torch_outputs.npz")
    if torch_path.exists():
        row.torch_vs_ort = relative_error(expected, dict(np.load(torch_path)))[0]
    imp = run_step(["import", str(onnx_path), str(folder)], timeout, memory)
    row.import_status, row.import_s = imp["status"], imp.get("import_s")
    row.import_message = _first_lines(imp.get("message", ""))
    if imp["status"] != "ok":
        return row
    for backend in via:
        out_path = work / f"{name}.{backend}.npz"
        cache = work / "iree-cache" / name
        if cache.exists():
            shutil.rmtree(cache)
        res = run_step(["backend", str(folder), backend, str(inputs), str(out_path), str(cache)], timeout, memory)
        if res["status"] != "ok":
            row.backends[backend] = Cell(res["status"], message=_first_lines(res.get("message", "")))
            continue
        err, where = relative_error(dict(np.load(out_path)), expected)
        row.backends[backend] = Cell("ok" if err <= TOLERANCE else "wrong", err, where,
                                     compile_s=res["prepare_s"] + res["first_run_s"] - res["run_s"],
                                     run_s=res["run_s"], plan=short_plan(res.get("plan", [])),
                                     compiler_cpu_s=res.get("compiler_cpu_s"))
    return row


def short_plan(plan: list[str]) -> str:
    """The first line of an iree plan in a few words: how much of the graph IREE compiled."""
    import re

    first = plan[0] if plan else ""
    if m := re.search(r"all (\d+) operations compiled", first):
        return f"all {m.group(1)} compiled"
    if m := re.search(r"split: (\d+) IREE module\(s\).*?, (\d+) operation\(s\) on numpy", first):
        return f"split: {m.group(1)} module(s), {m.group(2)} op(s) on numpy"
    return ""


# ----------------------------------------------------------------------------- reporting


def _fmt_time(t: float | None) -> str:
    return "–" if t is None else (f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.1f} s")


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "–"
    if cell.status in ("ok", "wrong"):
        return f"{cell.status} {cell.error:.1e}" if np.isfinite(cell.error) else f"{cell.status} ({cell.where})"
    return cell.status


def _compile_text(cell: Cell | None) -> str:
    """The cold compile's wall time, and the CPU time iree-compile took where known."""
    if cell is None or cell.compile_s is None:
        return "–"
    cpu = f" ({_fmt_time(cell.compiler_cpu_s)})" if cell.compiler_cpu_s else ""
    return _fmt_time(cell.compile_s) + cpu


def table(rows: list[Row], via: list[str]) -> str:
    """The markdown table: per model, import and each backend (verdict and relative error), then the
    times (iree: cold compile / run; onnxruntime on the original: run)."""
    head = ["model", "MB", "import", *via, "iree plan", "iree compile (iree-compile CPU)", *(f"{b} run" for b in via),
            "ort original run",
            "torch vs ort"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.model, f"{r.onnx_mb:g}",
                 r.import_status + (f" {_fmt_time(r.import_s)}" if r.import_s is not None else ""),
                 *(_cell_text(r.backends.get(b)) for b in via),
                 r.backends["iree"].plan or "–" if "iree" in r.backends else "–",
                 _compile_text(r.backends.get("iree")),
                 *(_fmt_time(r.backends[b].run_s) if b in r.backends else "–" for b in via),
                 _fmt_time(r.ort_run_s), "–" if r.torch_vs_ort is None else f"{r.torch_vs_ort:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failures(rows: list[Row]) -> str:
    """Each failure with the first lines of its diagnostic."""
    out = []
    for r in rows:
        if r.import_status not in ("ok", ""):
            out.append(f"### {r.model}: import {r.import_status}\n```\n{r.import_message}\n```")
        for b, c in r.backends.items():
            if c.status == "wrong":
                out.append(f"### {r.model} --via {b}: wrong, max rel. error {c.error:.2e} (output {c.where})")
            elif c.status != "ok":
                out.append(f"### {r.model} --via {b}: {c.status}\n```\n{c.message}\n```")
    return "\n\n".join(out)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for module, attribute in (("onnxruntime", "__version__"), ("iree.compiler.version", "VERSION"),
                              ("numpy", "__version__")):
        try:
            versions.append(f"{module.split('.')[0]} {getattr(__import__(module, fromlist=['_']), attribute)}")
        except (ImportError, AttributeError):
            pass
    return f"{cpu}, {os.cpu_count()} CPUs; " + ", ".join(versions)


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"zoo folder (default {DEFAULT_CACHE})")
    parser.add_argument("--only", nargs="*", default=None, help="model names (file stems)")
    parser.add_argument("--exporter", choices=["classic", "dynamo", "both"], default="both",
                        help="which exports of build.py to run (default both, classic first)")
    parser.add_argument("--skip", nargs="*", default=[], help="model names to leave out")
    parser.add_argument("--via", default=",".join(BACKENDS), help="backends, comma-separated")
    parser.add_argument("--work", type=Path, default=None, help="folder for imports and outputs (default: temp)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per step (default 900)")
    parser.add_argument("--max-memory", default="10G", help="address-space limit per step (0: none)")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, default=None, help="write the table and failures as markdown")
    parser.add_argument("--doc", action="store_true",
                        help="also write the table between <!-- zoo --> and <!-- /zoo --> in docs/performance.md")
    parser.add_argument("--merge", nargs="*", type=Path, default=None,
                        help="combine earlier --json results (later files win per model) instead of running; "
                             "iree cells without a plan are re-prepared from --work's IREE cache to get it")
    args = parser.parse_args(argv)
    via = [b.strip() for b in args.via.split(",") if b.strip()]
    if args.merge is not None:
        return merge(args, via)
    # classic exports first, then the dynamo variants; the smallest file first within each
    models = sorted(args.cache.glob("*.onnx"), key=lambda p: (p.name.endswith("_dynamo.onnx"), p.stat().st_size))
    if args.exporter != "both":
        models = [p for p in models if p.name.endswith("_dynamo.onnx") == (args.exporter == "dynamo")]
    if args.only:
        models = [p for p in models if p.name[:-5] in args.only]
    models = [p for p in models if p.name[:-5] not in args.skip]
    if not models:
        print(f"no models in {args.cache}; build them with benchmarks/zoo/build.py", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="skriptnd-zoo-"))
    work.mkdir(parents=True, exist_ok=True)
    memory = _parse_size(args.max_memory)
    rows: list[Row] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for path in models:
        row = run_model(path, work, via, args.timeout, memory)
        rows.append(row)
        print(f"{row.model:36s} import {row.import_status:8s} "
              + "  ".join(f"{b}: {_cell_text(row.backends.get(b)):14s}" for b in via), flush=True)
        report = {"started": started, "machine": machine(), "tolerance": TOLERANCE, "via": via,
                  "rows": [asdict(r) for r in rows]}
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))
        if args.markdown:
            args.markdown.write_text(markdown(started, len(rows), len(models), rows, via))
    print()
    print(table(rows, via))
    if args.doc:
        write_doc(f"Measured {started} on {machine()}; one thread per step, under the load of other processes.",
                  table(rows, via))
    return 0


def _row(data: dict[str, Any]) -> Row:
    backends = {b: Cell(**c) for b, c in data.pop("backends").items()}
    return Row(**data, backends=backends)


def merge(args: argparse.Namespace, via: list[str]) -> int:
    rows: dict[str, Row] = {}
    started = ""
    for path in args.merge:
        report = json.loads(path.read_text())
        started = started or report["started"]
        for data in report["rows"]:
            rows[data["model"]] = _row(data)
    memory = _parse_size(args.max_memory)
    for row in rows.values():
        cell = row.backends.get("iree")
        if cell is None or cell.plan or cell.status not in ("ok", "wrong") or args.work is None:
            continue
        cache = args.work / "iree-cache" / row.model
        res = run_step(["backend", str(args.work / row.model), "iree",
                        str(args.cache / f"{row.model}.inputs.npz"), str(args.work / f"{row.model}.replan.npz"),
                        str(cache)], args.timeout, memory)
        cell.plan = short_plan(res.get("plan", []))
    ordered = sorted(rows.values(), key=lambda r: (r.model.endswith("_dynamo"), r.onnx_mb))
    if args.json:
        args.json.write_text(json.dumps({"started": started, "machine": machine(), "tolerance": TOLERANCE,
                                         "via": via, "rows": [asdict(r) for r in ordered]}, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(started, len(ordered), len(ordered), ordered, via))
    print(table(ordered, via))
    if args.doc:
        write_doc(f"Measured from {started} on {machine()}; one thread per step, under the load of other "
                  "processes.", table(ordered, via))
    return 0


def markdown(started: str, done: int, total: int, rows: list[Row], via: list[str]) -> str:
    return (f"# Zoo results ({started}, {done} of {total} models)\n\n"
            f"Machine: {machine()}. Pass: max |skriptnd - onnxruntime on the original .onnx| <= "
            f"{TOLERANCE:g} x max |reference| (worst output). Times: one thread; iree compile is cold; "
            "iree plan: how much of the graph IREE compiled (the rest ran on numpy).\n\n"
            f"{table(rows, via)}\n\n## Failures\n\n{failures(rows)}\n")


def write_doc(header: str, body: str) -> None:
    """Replace the zoo section of docs/performance.md (between its markers), atomically."""
    from skriptnd.fileio import write_atomic

    doc = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
    text = doc.read_text(encoding="utf-8")
    section = f"<!-- zoo -->\n{header}\n\n{body}\n<!-- /zoo -->"
    if "<!-- zoo -->" in text:
        head, _, rest = text.partition("<!-- zoo -->")
        _, _, tail = rest.partition("<!-- /zoo -->")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    write_atomic(doc, text)


if __name__ == "__main__":
    sys.exit(main())
