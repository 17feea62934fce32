"""How fast a cached `sknd run MODEL --via iree` starts: process start to outputs printed, wall clock, like
hyperfine (one warm-up run that compiles into the cache, then N timed runs of a fresh process).

    python benchmarks/cli_start.py [--model resnet18] [--runs 10] [--via iree] [--cache DIR]

The model is models/<model> with its make_weights.py weights written to a temporary folder (224x224 for the
image models). Python's bytecode is cached under the temporary folder (PYTHONPYCACHEPREFIX) even when the
environment sets PYTHONDONTWRITEBYTECODE: an installed skriptnd has its .pyc files, and compiling ~100
modules from source on every start would be timed instead of skriptnd. The machine is shared: the load
average before and after is printed with the figures, which are only meaningful beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--via", default="iree")
    parser.add_argument("--cache", default=None, help="the compile cache (default: a temporary folder)")
    args = parser.parse_args()
    import test_model_zoo as zoo

    with tempfile.TemporaryDirectory(prefix="sknd_start_") as tmp:
        folder = Path(tmp)
        model, _ = zoo._copy_with_weights(args.model, folder / args.model)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), SKRIPTND_CACHE_DIR=args.cache or str(folder / "cache"),
                   PYTHONPYCACHEPREFIX=str(folder / "pycache"))
        command = [sys.executable, "-m", "skriptnd", "run", str(model), "--random-inputs", "--via", args.via]
        if args.model in ("resnet18", "mobilenetv2", "alexnet"):
            command += ["-a", "height=224", "-a", "width=224"]
        t0 = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True, check=True)  # compiles, writes the .pyc files
        cold = time.perf_counter() - t0
        load_before = os.getloadavg()
        times, outputs = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
                assert proc.stdout is not None
                proc.stdout.read(1)  # the outputs table's first byte: the outputs are there
                outputs.append(time.perf_counter() - t0)
                proc.stdout.read()
            times.append(time.perf_counter() - t0)
            if proc.returncode:
                raise SystemExit(f"{' '.join(command)} failed ({proc.returncode})")
        load_after = os.getloadavg()
        python = []
        for _ in range(min(args.runs, 5)):  # the floor: the interpreter alone
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            python.append(time.perf_counter() - t0)
    print(f"sknd run {args.model} --via {args.via} (cached), {args.runs} runs: process start to outputs: "
          f"min {min(outputs):.3f} s, median {statistics.median(outputs):.3f} s; to exit: min {min(times):.3f} s, "
          f"median {statistics.median(times):.3f} s, max {max(times):.3f} s; first run (cold cache) {cold:.1f} s; "
          f"python -c pass {min(python):.3f} s; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
