"""One short GPU check for a session that has a GPU: `--via iree --device cuda` on the shipped models and the zoo.

    python benchmarks/gpu_check.py [--device cuda[:ARCH]] [--zoo /work/zoo/onnx] [--models NAME ...]
                                   [--rounds 5] [--json OUT.json] [--budget SECONDS]
                                   [--cache DIR] [--work DIR] [--compile-only] [--iree-flag=--FLAG ...]

A lent GPU machine may have no IREE compiler (its wheel is several hundred MB) and a small upload: then
compile on the CPU host first, ``--compile-only --cache DIR --work DIR`` (the modules for the device, the
zoo's model folders imported), carry DIR (and the IREE runtime) to the GPU machine, and run there with the
same ``--cache`` and ``--work``: every module is found in the cache, nothing is compiled there.

For each model it compiles the graph for the device (a cold compile into a temporary cache, timed), runs it,
compares its outputs with a CPU result and times the median of ``--rounds`` runs (after one untimed run),
beside PyTorch eager on the same GPU when torch with CUDA is importable:

* the shipped models (benchmarks/models.py's cases, same weights and inputs): ResNet-18, MobileNetV2 at
  batch 1 and 32, the Transformer; the CPU result is skriptnd's numpy backend, the torch column
  benchmarks/models.py's functional PyTorch implementations with weights and inputs moved to the GPU;
* every ``NAME.onnx`` in ``--zoo`` (or those ``--models`` names) with its ``NAME.inputs.npz`` and
  ``NAME.torch_outputs.npz`` (tests' zoo builder): imported with ``sknd import``, the CPU result is the
  stored PyTorch CPU output (no torch column: the builder's models are not rebuilt here).

The table (markdown, on stdout) gives per model: compile seconds, max |GPU - CPU| / max |CPU|, the median
ms on the GPU and torch eager's. A model that fails says why in its row; nothing stops the rest. ``--budget``
stops starting new models after that many seconds, so the whole check fits a lent GPU's time.
Not measured in the session that wrote it (no GPU lent): docs/performance.md, "GPUs".
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import skriptnd  # noqa: E402
from skriptnd.backends import Options, prepare  # noqa: E402
from skriptnd.diagnostics import DiagnosticError  # noqa: E402

Outputs = dict[str, np.ndarray]
#: extra iree-compile flags (--iree-flag), given to every Options this script makes
FLAGS: tuple[str, ...] = ()


def deviation(got: Outputs, expected: Outputs) -> float:
    """max |got - expected| / max |expected| over the outputs, matched by name, else by order."""
    names = list(expected)
    values = [got[n] for n in names] if all(n in got for n in names) else list(got.values())
    worst = 0.0
    for g, e in zip(values, expected.values(), strict=True):
        e = np.asarray(e, np.float64)
        worst = max(worst, float(np.abs(np.asarray(g, np.float64) - e).max() / max(np.abs(e).max(), 1e-30)))
    return worst


def median_ms(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # untimed: first-run allocations, the driver's PTX JIT
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def torch_on(device: str) -> Any:
    """torch when it imports and has ``device`` (cuda, hip through torch.cuda), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if device in ("cuda", "hip") and torch.cuda.is_available() else None


def torch_runner(torch: Any, name: str, params: dict[str, np.ndarray], inputs: Outputs) -> Callable[[], Any] | None:
    """benchmarks/models.py's PyTorch implementation of a shipped model, on the GPU: its weight and input
    tensors are made on the CPU by models._tensors / _torch_runner, so those two are redirected to the GPU."""
    import models

    def tensors(t: Any, w: dict[str, np.ndarray]) -> dict[str, Any]:
        return {k: t.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in w.items()}

    def runner(t: Any, forward: Callable[..., Any], arrays: Outputs, names: list[str]) -> Callable[[], Outputs]:
        args = [t.from_numpy(np.ascontiguousarray(v)).cuda() for v in arrays.values()]

        def run() -> Outputs:
            with t.inference_mode():
                out = forward(*args)
            t.cuda.synchronize()
            out = out if isinstance(out, tuple) else (out,)
            return {n: o.cpu().numpy() for n, o in zip(names, out, strict=True)}

        return run

    models._tensors, models._torch_runner = tensors, runner
    return models.TORCH[name](params, inputs, None)


def shipped_cases(folder: Path, names: list[str] | None) -> list[dict[str, Any]]:
    """benchmarks/models.py's cases (weights from each make_weights.py, seeded inputs), MobileNetV2 also at
    batch 32, without the LSTMs (their loops run on the host: not a GPU measurement)."""
    import models

    cases = [c for c in models._cases(folder) if c["name"] in ("resnet18", "mobilenetv2", "transformer")]
    for c in list(cases):
        if c["name"] == "mobilenetv2":
            big = dict(c, name="mobilenetv2-b32", attribs={**c["attribs"], "batch": 32},
                       inputs={"input": np.random.default_rng(1).standard_normal((32, 3, 224, 224)).astype(np.float32)},
                       torch_name="mobilenetv2")
            cases.append(big)
    return [c for c in cases if not names or c["name"] in names]


def compile_only(graph: Any, device: str, cache: Path) -> dict[str, Any]:
    """Compile ``graph``'s modules for ``device`` into ``cache`` without opening the device."""
    from skriptnd.backends.via_iree import IreeGraphRunner

    start = time.perf_counter()
    runner = IreeGraphRunner(graph, Options(device=device, cache_dir=str(cache), flags=FLAGS), load=False)
    return {"compile s": time.perf_counter() - start, "split": bool(runner.split), "error": "compiled only"}


def resident_ms(runner: Any, inputs: Outputs, rounds: int) -> float | None:
    """The median ms of the graph's one module called on inputs already on the device (outputs still copied
    back), as torch eager is timed: what the host-to-device copy of the inputs costs is the difference to
    "GPU ms". None when the graph did not compile as one module."""
    modules = getattr(runner, "modules", [])
    if getattr(runner, "split", True) or len(modules) != 1:
        return None
    import iree.runtime as rt

    module = modules[0]
    device = module.context.config.device
    kinds = [dt for _, dt in getattr(module.source, "inputs", [])] or [a.dtype for a in inputs.values()]
    args = [rt.asdevicearray(device, np.ascontiguousarray(a, np.int8 if dt == np.bool_ else dt))  # bool: as i8
            for a, dt in zip(inputs.values(), kinds, strict=True)]

    def call() -> None:
        result = module.main(*args)
        for r in result if isinstance(result, list | tuple) else [result]:
            r.to_host()

    return median_ms(call, rounds)


def check_shipped(case: dict[str, Any], device: str, rounds: int, cache: Path, only_compile: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {"model": case["name"], "cpu result": "skriptnd numpy"}
    graph = skriptnd.load(case["path"]).compose(case["graph"], attribs=case["attribs"])
    if only_compile:
        return row | compile_only(graph, device, cache)
    expected = skriptnd.run(graph, case["inputs"])
    start = time.perf_counter()
    runner = prepare(graph, "iree", Options(device=device, cache_dir=str(cache), flags=FLAGS))
    row["compile s"] = time.perf_counter() - start
    row["split"] = bool(getattr(runner, "split", False))
    row["deviation"] = deviation(runner.run(case["inputs"]), expected)
    row["gpu ms"] = median_ms(lambda: runner.run(case["inputs"]), rounds)
    row["resident ms"] = resident_ms(runner, case["inputs"], rounds)
    torch = torch_on(device.partition(":")[0])
    if torch is not None:
        run = torch_runner(torch, case.get("torch_name", case["name"]), case["params"], case["inputs"])
        if run is not None:
            row["torch deviation"] = deviation(run(), expected)
            row["torch eager ms"] = median_ms(run, rounds)
    return row


def check_zoo(onnx: Path, device: str, rounds: int, cache: Path, work: Path, only_compile: bool = False) -> dict[str, Any]:
    name = onnx.name.removesuffix(".onnx")
    row: dict[str, Any] = {"model": name, "cpu result": "PyTorch CPU (zoo)"}
    folder = work / name
    if not (folder / "main.sknd").is_file():
        work.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(onnx), "-o", str(folder)],
                              capture_output=True, text=True, cwd=ROOT, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"sknd import failed: {(done.stdout + done.stderr).strip()[-300:]}")
    graph = skriptnd.load(folder).compose()
    if only_compile:
        return row | compile_only(graph, device, cache)
    given = dict(np.load(onnx.with_name(f"{name}.inputs.npz")))
    expected = dict(np.load(onnx.with_name(f"{name}.torch_outputs.npz")))
    inputs = {t.name: given[t.name] if t.name in given else v for t, v in zip(graph.inputs, given.values(),
                                                                                strict=False)}
    start = time.perf_counter()
    runner = prepare(graph, "iree", Options(device=device, cache_dir=str(cache), flags=FLAGS))
    row["compile s"] = time.perf_counter() - start
    row["split"] = bool(getattr(runner, "split", False))
    row["deviation"] = deviation(runner.run(inputs), expected)
    row["gpu ms"] = median_ms(lambda: runner.run(inputs), rounds)
    row["resident ms"] = resident_ms(runner, inputs, rounds)
    return row


def show(rows: list[dict[str, Any]], device: str) -> str:
    def f(v: Any, spec: str) -> str:
        return "–" if v is None else format(v, spec)

    lines = [f"GPU check, --via iree --device {device} {' '.join(FLAGS)}".rstrip(), "",
             "| model | compile (s) | split | max rel. diff vs CPU | GPU (ms) | inputs on GPU (ms) | torch eager (ms) "
             "| GPU / torch | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["gpu ms"] / r["torch eager ms"] if r.get("gpu ms") and r.get("torch eager ms") else None
        lines.append(f"| {r['model']} | {f(r.get('compile s'), '.1f')} | {'yes' if r.get('split') else 'no'} | "
                     f"{f(r.get('deviation'), '.1e')} | {f(r.get('gpu ms'), '.2f')} | {f(r.get('resident ms'), '.2f')} | "
                     f"{f(r.get('torch eager ms'), '.2f')} | {f(ratio, '.2f')} | {r.get('error', '')} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--zoo", type=Path, default=None, help="a folder of zoo NAME.onnx files (none: skip)")
    parser.add_argument("--models", nargs="*", default=None, help="only these (shipped case or zoo names)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=480.0, help="seconds after which no model starts")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="the module cache to use and keep (default: a temporary one)")
    parser.add_argument("--work", type=Path, default=None, help="where the zoo's imported folders go and are found")
    parser.add_argument("--compile-only", action="store_true", help="compile for --device into --cache, run nothing")
    parser.add_argument("--iree-flag", action="append", default=[], help="an extra iree-compile flag (repeatable)")
    args = parser.parse_args()
    global FLAGS
    FLAGS = tuple(args.iree_flag)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        cache = args.cache.resolve() if args.cache else tmp_path / "cache"
        work = args.work.resolve() if args.work else tmp_path / "zoo"
        if args.cache:
            cache.mkdir(parents=True, exist_ok=True, mode=0o700)
            cache.chmod(0o700)  # the module cache is used only when it is this user's private folder
        jobs: list[tuple[str, Callable[[], dict[str, Any]]]] = []
        for case in shipped_cases(tmp_path / "models", args.models):
            jobs.append((case["name"], lambda c=case: check_shipped(c, args.device, args.rounds, cache, args.compile_only)))
        for found in sorted(args.zoo.glob("*.inputs.npz")) if args.zoo else []:  # the folder of NAME.onnx or
            name = found.name.removesuffix(".inputs.npz")  # of NAME's npz files beside an imported --work
            onnx = found.with_name(f"{name}.onnx")
            if args.models and name not in args.models:
                continue
            jobs.append((name, lambda o=onnx: check_zoo(o, args.device, args.rounds, cache, work,
                                                         args.compile_only)))
        for name, job in jobs:
            if time.perf_counter() - start > args.budget:
                rows.append({"model": name, "error": f"not started: --budget {args.budget:.0f} s spent"})
                continue
            try:
                rows.append(job())
            except DiagnosticError as err:
                d = err.diagnostics[0]
                rows.append({"model": name, "error": f"{d.code}: {' '.join(d.message.split())[:200]}"})
            except Exception as err:  # one model's failure is its row, the others still run
                rows.append({"model": name, "error": f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"})
            print(show(rows[-1:], args.device).splitlines()[-1], file=sys.stderr, flush=True)
    print(show(rows, args.device))
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "rows": rows}, indent=2))
    return 0 if all(r.get("error", "compiled only") == "compiled only" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
