"""One step of a zoo benchmark (run.py, speed.py) in a subprocess with a time and an address-space limit.

Why a subprocess: a model that crashes the interpreter, hangs or exhausts memory on some backend must be a
row of the table, not the end of the run. The worker is the calling script itself, started with
``--worker ARGS... RESULT_PATH``; it writes its result as JSON to RESULT_PATH. A timeout, or a worker that dies
before writing, becomes a result here (``timeout`` / ``killed``, with the last lines it printed).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _limit_memory(limit: int) -> None:
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_step(script: str, args: list[str], timeout: float, memory: int, threads: int = 1,
             lines: int = 6) -> dict[str, Any]:
    """``script --worker *args RESULT_PATH`` with BLAS and OpenMP pools sized to ``threads``, at most ``timeout``
    seconds and ``memory`` bytes of address space (0: no limit): its JSON result with ``wall_s`` added, or a
    ``timeout`` / ``killed`` result keeping the last ``lines`` lines of its output."""
    with tempfile.TemporaryDirectory(prefix="zoo-step-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        n = str(threads)
        env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, script, "--worker", *args, result_path],
                                  capture_output=True, text=True, timeout=timeout, env=env,
                                  preexec_fn=lambda: _limit_memory(memory))
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "message": f"did not finish in {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if os.path.exists(result_path):
            result = json.loads(Path(result_path).read_text())
            result["wall_s"] = wall
            return result
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-lines:]
        why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        if "MemoryError" in "\n".join(tail) or done.returncode == -9:
            why += " (out of memory?)"
        return {"status": "killed", "message": "\n".join([f"worker died: {why}", *tail]), "wall_s": wall}
