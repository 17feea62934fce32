"""Latency of a graph on several backends, side by side in one process (`sknd bench`, benchmarks/models.py).

Every backend is prepared first (compiling, planning: timed apart as ``prepare_s``), its outputs checked
against the first backend's, then all are timed **interleaved**, round by round (each backend's turn: one
untimed run, then ``per_turn`` timed runs), so that load changes on a shared machine hit all alike and
a thread pool still spinning after one backend's turn does not land in the next one's timings
unevenly (with several threads, each turn starts with a short sleep: see ``gap``). The result is the median per backend and, when an onnxruntime reference ran on the same
weights (the ``onnxruntime`` backend, i.e. the graph's ONNX export, or a supplied ``.onnx``), the ratio to
it. numpy's BLAS is limited to ``threads`` with threadpoolctl (when installed); IREE and onnxruntime
get ``threads`` as their own worker count.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from skriptnd.backends.base import Options, Progress, Runner
from skriptnd.backends.iree_devices import parse as parse_device
from skriptnd.backends.registry import canonical, get, prepare
from skriptnd.backends.via_onnxruntime import OnnxRuntimeRunner
from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import DiagnosticError

REFERENCE = "onnxruntime"


@dataclass
class Result:
    backend: str
    median_ms: float | None
    ratio_vs_onnxruntime: float | None = None
    prepare_s: float | None = None
    runs: int = 0
    #: max |difference| / max |first backend| over all outputs (None for the first backend)
    deviation: float | None = None
    error: str | None = None


#: A deviation above this (max |difference| / max |first backend's value|) is a wrong result, not rounding:
#: `sknd bench` shows it in red and `--check` fails on it.
DEVIATION_LIMIT = 1e-3


@dataclass
class Report:
    model: str
    threads: int | None
    results: list[Result] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    #: the row the ratios are to (the onnxruntime backend, or onnxruntime on a supplied .onnx file)
    reference: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "threads": self.threads, "reference": self.reference,
                "results": [asdict(r) for r in self.results], "environment": self.environment,
                "deviation_limit": DEVIATION_LIMIT, "wrong": self.wrong()}

    def wrong(self) -> list[str]:
        """The rows that are not right: a deviation above :data:`DEVIATION_LIMIT` (or not a number), or
        a backend that failed."""
        return [r.backend for r in self.results if r.error or (r.deviation is not None and not
                                                               r.deviation <= DEVIATION_LIMIT)]


def environment(threads: int | None) -> dict[str, Any]:
    """The machine and the BLAS settings that decide the numbers: CPU, cores, numpy's BLAS and its thread
    pools (threadpoolctl), the OPENBLAS_* / OMP_* / MKL_* variables, library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
            flags = ""
            f.seek(0)
            for line in f:
                if line.startswith("flags"):
                    flags = line
                    break
        isa = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f" {x}" in flags]
    except OSError:
        isa = []
    env: dict[str, Any] = {"cpu": cpu, "isa": isa, "cores": os.cpu_count(), "threads": threads,
                           "python": platform.python_version(), "numpy": np.__version__,
                           "env": {k: v for k, v in sorted(os.environ.items())
                                   if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "GOTO_"))}}
    try:
        config = np.show_config(mode="dicts")  # type: ignore[call-arg]
        blas = config.get("Build Dependencies", {}).get("blas", {})
        env["numpy_blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        env["numpy_blas"] = "?"
    try:
        from threadpoolctl import threadpool_info

        env["threadpools"] = [{k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture",
                                                     "threading_layer")} for p in threadpool_info()]
    except ImportError:
        env["threadpools"] = "threadpoolctl not installed"
    note = blas_note(env["env"].get("OPENBLAS_CORETYPE"), isa, env.get("threadpools"))
    if note:
        env["blas_note"] = note
    for module in ("onnxruntime", "iree.compiler.version"):
        try:
            import importlib

            m = importlib.import_module(module)
            env[module.split(".")[0]] = getattr(m, "__version__", None) or getattr(m, "VERSION", "?")
        except ImportError:
            pass
    return env


#: OpenBLAS core types whose kernels stop short of AVX-512 (OPENBLAS_CORETYPE names one of them)
PRE_AVX512_CORES = {"prescott", "core2", "penryn", "dunnington", "nehalem", "sandybridge", "haswell", "atom",
                    "barcelona", "bobcat", "bulldozer", "piledriver", "steamroller", "excavator", "zen"}


def blas_note(coretype: str | None, isa: list[str], pools: list[dict[str, object]] | None) -> str | None:
    """Why numpy may be slow here: ``OPENBLAS_CORETYPE`` forcing pre-AVX-512 kernels on an AVX-512 CPU.
    skriptnd cannot change it at run time (OpenBLAS reads it when numpy loads) and does not override a
    setting someone made on purpose (it also works around CPU-detection problems): it says so. Measured
    on this project's 2-vCPU AMD EPYC machine: unsetting ``Haswell`` made the numpy backend's ResNet-18
    1.4x faster at one thread, 2.3x at two (docs/performance.md)."""
    if not coretype or coretype.lower() not in PRE_AVX512_CORES or "avx512f" not in isa:
        return None
    arch = next((p.get("architecture") for p in pools if p.get("internal_api") == "openblas"), None) \
        if isinstance(pools, list) else None
    return (f"OPENBLAS_CORETYPE={coretype} keeps OpenBLAS on its {arch or coretype} code although this CPU has "
            "AVX-512; unset it (or set SkylakeX) for numpy's faster GEMMs")


def blas_limit(threads: int | None) -> AbstractContextManager[Any]:
    if not threads:
        return nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return nullcontext()
    return threadpool_limits(threads)


def _deviation(got: Mapping[str, Any], expected: Mapping[str, Any]) -> float:
    """max |got - expected| / max |expected| over the outputs; NaN where one side has a NaN the other has not
    (a wrong result: ``max`` alone would skip it), none where both have one."""
    worst = 0.0
    for name, e in expected.items():
        e = np.asarray(e, np.float64)
        g = np.asarray(got[name], np.float64).reshape(e.shape)
        if not e.size:
            continue
        diff = np.where(np.isnan(g) & np.isnan(e), 0.0, np.abs(g - e))
        if np.isnan(diff).any():
            return float("nan")
        finite = np.abs(e[np.isfinite(e)])
        scale = float(finite.max()) if finite.size else 0.0
        worst = max(worst, float(diff.max()) / (scale or 1.0))
    return worst


class OnnxFileRunner(Runner):
    """The onnxruntime reference from a supplied .onnx file (inputs and outputs matched by position)."""

    def __init__(self, graph: Graph, path: str, threads: int | None) -> None:
        self._runner = OnnxRuntimeRunner(graph, path, threads, [f"onnxruntime on {path}"])
        self.plan = self._runner.plan

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        return self._runner.run(inputs)


@dataclass
class _OnnxFile:
    """The supplied .onnx file's row, prepared (onnxruntime session) in turn like the others."""

    path: str


#: A backend to time: its registry name, or (row label, registry name, its options) to time variants of one
#: backend (e.g. IREE compiler flags) side by side, or (row label, a prepared Runner) to time something
#: outside the registry (benchmarks/models.py: PyTorch eager, onnxruntime on a hand-built ONNX graph) the
#: same way, interleaved with the rest.
Entry = str | tuple[str, str, Options] | tuple[str, Runner]


def bench(graph: Graph, backends: list[Entry], inputs: Mapping[str, Any], *, threads: int | None = None,
          reference: str | None = REFERENCE, onnx_file: str | None = None, rounds: int = 10, per_turn: int = 3,
          options: Options | None = None, model: str = "", gap: float | None = None,
          progress: Callable[[str, int, int], None] | None = None) -> Report:
    """Time ``graph`` on ``backends`` (registry names) and the onnxruntime ``reference``: the onnxruntime
    backend (our ONNX export), or with ``onnx_file`` one more row for onnxruntime on that file (the original
    model), which does not replace the backend (None: no reference). ``gap``: seconds of sleep before each backend's turn
    (default 0.3 with more than one thread, else 0): after a run, thread pools (OpenBLAS, onnxruntime,
    IREE's workers) keep spinning a while and, on few cores, slow down the next backend's threads many
    times over. ``progress(stage, done, total)`` reports the work."""
    if gap is None:
        gap = 0.0 if threads == 1 else 0.3
    def with_threads(o: Options, backend: str) -> Options:
        # --device applies to the backends that run there (iree); the others are timed on the CPU beside it
        device = o.device if o.device and parse_device(o.device).kind.name in get(backend).devices else None
        return replace(o, threads=threads, device=device)

    default = options or Options()
    entries: dict[str, tuple[str, Options] | Runner | _OnnxFile] = {}
    for b in backends:
        if isinstance(b, str):
            entries[canonical(b)] = (canonical(b), with_threads(default, canonical(b)))
        elif len(b) == 2:
            entries[b[0]] = b[1]  # type: ignore[misc]
        else:
            entries[b[0]] = (canonical(b[1]), with_threads(b[2], canonical(b[1])))  # type: ignore[misc]
    if reference and onnx_file:  # the original model: a row of its own, next to our export's
        reference = f"{REFERENCE}: {os.path.basename(onnx_file)}"
        entries[reference] = _OnnxFile(onnx_file)
    elif reference and reference not in entries:
        entries[reference] = (reference, with_threads(default, reference))
    names = list(entries)
    report = Report(model=model or graph.name, threads=threads, reference=reference)
    runners: dict[str, Runner] = {}
    results: dict[str, Result] = {}
    first: dict[str, Any] | None = None
    with blas_limit(threads):
        report.environment = environment(threads)
        for i, name in enumerate(names):
            if progress:
                progress(f"preparing {name}", i, len(names))
            start = time.perf_counter()
            try:
                entry = entries[name]
                if isinstance(entry, Runner):
                    runner: Runner = entry
                elif isinstance(entry, _OnnxFile):
                    runner = OnnxFileRunner(graph, entry.path, threads)
                else:
                    runner = prepare(graph, *entry)
                out = runner.run(inputs)
            except Exception as err:  # a backend that cannot run this graph is a row with its reason
                message = err.diagnostics[0].message if isinstance(err, DiagnosticError) else str(err)
                results[name] = Result(name, None, error=f"{type(err).__name__}: {message}"[:500])
                continue
            result = results[name] = Result(name, None, prepare_s=time.perf_counter() - start)
            if first is None:
                first = out
            else:
                result.deviation = _deviation(out, first)
            runners[name] = runner
        times: dict[str, list[float]] = {name: [] for name in runners}
        total = rounds * len(runners)
        for r in range(rounds):
            for k, (name, runner) in enumerate(runners.items()):
                if progress:
                    progress(f"timing {name}", r * len(runners) + k, total)
                if gap:
                    time.sleep(gap)
                runner.run(inputs)  # untimed: wakes this backend's thread pool
                for _ in range(per_turn):
                    t0 = time.perf_counter()
                    runner.run(inputs)
                    times[name].append((time.perf_counter() - t0) * 1e3)
        if progress:
            progress("done", total, total)
    for name, ts in times.items():
        results[name].median_ms = statistics.median(ts)
        results[name].runs = len(ts)
    ref = results.get(reference) if reference else None
    for name in names:
        res = results[name]
        if ref is not None and ref.median_ms and res.median_ms is not None:
            res.ratio_vs_onnxruntime = res.median_ms / ref.median_ms
        report.results.append(res)
    return report
