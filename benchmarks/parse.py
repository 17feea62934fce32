"""Parsing throughput: the standard library and the spec's code blocks, cold and warm.

Cold = a fresh interpreter (import, grammar tables loaded from Lark's cache, lexer regexps
compiled on first use); warm = the same sources parsed again in the same process. As a
machine-independent reference, CPython's own parser (ast.parse) is timed on a Python module
of the standard library in the same process, and the ratio is printed.

    python benchmarks/parse.py
"""

from __future__ import annotations

import ast as py_ast
import inspect
import json
import subprocess
import sys
import time
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> list[tuple[str, str, str]]:
    items = [(str(p), p.read_text(), "module") for p in sorted((ROOT / "stdlib").glob("*.sknd"))]
    index = json.loads((ROOT / "tests/data/spec_blocks/index.json").read_text())
    start = {"module": "module", "blocks": "blocks", "compose_body": "compose_body", "other": "stmt"}
    for entry in index:
        if not entry.get("elided"):
            path = ROOT / "tests/data/spec_blocks" / entry["file"]
            items.append((str(path), path.read_text(), start[entry["kind"]]))
    return items


def run(items: list[tuple[str, str, str]]) -> float:
    from skriptnd.syntax import parse

    t0 = time.perf_counter()
    for path, text, start in items:
        parse(text, path, start)
    return time.perf_counter() - t0


def cold(stdlib_only: bool) -> None:
    t0 = time.perf_counter()
    items = [i for i in corpus() if not stdlib_only or "/stdlib/" in i[0]]
    parse_time = run(items)
    print(json.dumps({"total": time.perf_counter() - t0, "parse": parse_time}))


def cold_run(*flags: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--cold", *flags], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(out.stdout)


def main() -> None:
    if sys.argv[1:2] == ["--cold"]:
        cold("--stdlib" in sys.argv)
        return
    items = corpus()
    lines = sum(text.count("\n") + 1 for _, text, _ in items)
    stdlib_lines = sum(text.count("\n") + 1 for p, text, _ in items if "/stdlib/" in p)
    cold_wall, cold_stats = cold_run()
    _, stdlib_stats = cold_run("--stdlib")
    run(items)
    warm = min(run(items) for _ in range(3))
    stdlib = [i for i in items if "/stdlib/" in i[0]]
    warm_stdlib = min(run(stdlib) for _ in range(3))
    py_src = inspect.getsource(typing)
    py_lines = py_src.count("\n") + 1
    t0 = time.perf_counter()
    for _ in range(3):
        py_ast.parse(py_src)
    py_rate = 3 * py_lines / (time.perf_counter() - t0)
    rate = lines / warm
    print(f"corpus: {len(items)} sources, {lines} lines ({stdlib_lines} in the stdlib)")
    print(f"cold process (import + all sources): {cold_wall:.3f} s wall, {cold_stats['parse']:.3f} s parsing")
    print(f"stdlib cold (fresh process, first parse after import): {stdlib_stats['parse']:.3f} s "
          f"(target < 0.5 s: {stdlib_stats['parse'] / 0.5:.2f} of it)")
    print(f"warm: {warm:.3f} s = {rate:,.0f} lines/s; stdlib alone {warm_stdlib:.3f} s")
    print(f"reference ast.parse (CPython, C parser): {py_rate:,.0f} lines/s; ratio skriptnd/CPython = {rate / py_rate:.3f}")


if __name__ == "__main__":
    main()
