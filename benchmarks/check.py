"""`sknd check` wall time, each run a fresh process as a user types it, in a private cache folder.

Three states of the on-disk caches (syntax.cache for parsed modules, compose.check_cache for
what composing each definition reports):

- cold: both empty (a fresh install, or a changed toolchain);
- first check: modules parsed before, composition not checked before (what the first
  `sknd check` after editing a model costs, give or take the edited module's parse);
- repeat: nothing changed since the last check.

As a reference measured alongside (the machine may be shared): the start-up floor, a process
that only imports the CLI (`python -c "import skriptnd.cli.app"`). Targets: the ResNet-18 model
folder, stdlib/nn.sknd, and the 2,000-line module of benchmarks/lsp.py.

    python benchmarks/check.py [--runs N]
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


def _run(args: list[str], cache: Path) -> float:
    env = {**os.environ, "SKRIPTND_CACHE_DIR": str(cache)}
    env.pop("SKRIPTND_NO_CACHE", None)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return elapsed


def _forget_compositions(cache: Path) -> None:
    for entry in cache.rglob("*.compose.pickle"):
        entry.unlink()


def measure(target: str, runs: int) -> dict[str, float]:
    args = ["-m", "skriptnd", "check", target]
    times: dict[str, list[float]] = {"cold": [], "first check": [], "repeat": [], "start-up floor": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp)
            times["cold"].append(_run(args, cache))
            _forget_compositions(cache)
            times["first check"].append(_run(args, cache))
            times["repeat"].append(_run(args, cache))
            times["start-up floor"].append(_run(["-c", "import skriptnd.cli.app"], cache))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each state per target (median shown)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from lsp import generate

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.sknd"
        big.write_text(generate(), encoding="utf-8")
        targets = {"models/resnet18": str(ROOT / "models" / "resnet18"), "stdlib/nn.sknd": str(ROOT / "stdlib" / "nn.sknd"),
                   "2,000-line module": str(big)}
        print(f"{'target':<20} {'cold':>8} {'first check':>12} {'repeat':>8} {'start-up floor':>15}   (seconds, median of {args.runs})")
        for label, target in targets.items():
            m = measure(target, args.runs)
            print(f"{label:<20} {m['cold']:8.2f} {m['first check']:12.2f} {m['repeat']:8.2f} {m['start-up floor']:15.2f}"
                  f"   first check = {m['first check'] / m['start-up floor']:.1f}x the floor")


if __name__ == "__main__":
    main()
