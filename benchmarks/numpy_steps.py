"""Where the numpy backend's time goes: every step of ResNet-18's / MobileNetV2's TOSA programs timed one
by one (batch 1, 224x224, fp32), grouped by operator and shape, at a given thread count.

    python benchmarks/numpy_steps.py [--models resnet18 mobilenetv2] [--threads 1 2] [--runs 20] [--top 25]
                                     [--stat median|min]

Each step's time is the median (or, on a machine other processes keep busy, the minimum: the run in
which the step had the cores to itself) over ``--runs`` whole-network runs (so caches hold what they
hold in a real run); BLAS is limited to the thread count with threadpoolctl, the backend's worker pool
(skriptnd.parallel) gets the same count.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import test_model_zoo as zoo  # noqa: E402

import skriptnd  # noqa: E402
from skriptnd.backends import Options, prepare  # noqa: E402
from skriptnd.backends.bench import blas_limit  # noqa: E402


def _label(step: Any, values: list[Any]) -> str:
    o = step.op
    shape = next((tuple(v.shape) for v in values if isinstance(v, np.ndarray)), ())
    extra = ""
    if o.name in ("CONV2D", "DEPTHWISE_CONV2D"):
        w = next(v for is_slot, v in step.operands[1:2] if not is_slot)
        extra = f" w{tuple(w.shape)} s{tuple(o.attrs['stride'])}"
        extra += " wino" if getattr(step.fn, "winograd", None) is not None else ""
    return f"{o.name} {shape}{extra}"


def profile(name: str, threads: int, runs: int, top: int, folder: Path, stat: str = "median") -> None:
    path, _ = zoo._copy_with_weights(name, folder / name)
    graph = skriptnd.load(path).compose(attribs={"height": 224, "width": 224})
    x = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    with blas_limit(threads):
        runner = prepare(graph, "numpy", Options(threads=threads))
        runner.run(x)
        times: dict[int, list[float]] = defaultdict(list)
        labels: dict[int, str] = {}
        programs = [op.attribs["program"] for _, op, *_ in runner.executor._program if op.op == "tosa.program"]
        for p in programs:
            for step in p._steps:
                fn = step.fn

                def timed(*args: Any, _fn: Any = fn, _step: Any = step) -> Any:
                    t0 = time.perf_counter()
                    out = _fn(*args)
                    times[id(_step)].append(time.perf_counter() - t0)
                    labels.setdefault(id(_step), _label(_step, list(args)))
                    return out

                timed.winograd = getattr(fn, "winograd", None)  # type: ignore[attr-defined]
                step.fn = timed
        totals = []
        for _ in range(runs):
            t0 = time.perf_counter()
            runner.run(x)
            totals.append(time.perf_counter() - t0)
    pick = min if stat == "min" else statistics.median
    med = {k: pick(v) * 1e3 for k, v in times.items()}
    groups: dict[str, list[float]] = defaultdict(list)
    for k, ms in med.items():
        groups[labels[k]].append(ms)
    total = pick(totals) * 1e3
    print(f"\n{name}, {threads} thread(s), {stat}s: whole run {total:.2f} ms, program steps {sum(med.values()):.2f} ms")
    rows = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    for label, ms in rows[:top]:
        print(f"  {sum(ms):7.2f} ms  {len(ms):3d} x  {label}")
    by_op: dict[str, float] = defaultdict(float)
    for label, ms in groups.items():
        by_op[label.split()[0]] += sum(ms)
    print("  by operator: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "mobilenetv2"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--stat", choices=["median", "min"], default="median")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sknd_steps_") as tmp:
        for name in args.models:
            for threads in args.threads:
                profile(name, threads, args.runs, args.top, Path(tmp), args.stat)


if __name__ == "__main__":
    main()
