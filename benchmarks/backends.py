"""The backends side by side (issue 14): `sknd bench`'s machinery (skriptnd.backends.bench) on ResNet-18 and
MobileNetV2, batch 1, 224x224, fp32, against onnxruntime on the same weights, plus the IREE compile and
cached-start times and a small IREE flag sweep.

    python benchmarks/backends.py [--threads 1 2] [--rounds 10] [--models resnet18 mobilenetv2] [--lstm]
                                  [--openblas - Haswell SkylakeX]
                                  [--sweep] [--no-write]

The weights are each model's make_weights.py (written to a temporary folder); the onnxruntime reference is
tests/test_model_zoo.py's ONNX graph of the model on those weights, written to a .onnx file and given to
the bench as `--onnx` would be. Every backend's outputs are checked against the first one's before it is
timed (the "max rel. diff" column). IREE modules compile into a fresh temporary cache: "prepare (s)" of the
iree row is the cold compile (MLIR export + iree-compile); the cached start is `sknd run --via iree` in a
new process against the warm cache, wall-clock from invocation to exit.

Writes the section between `<!-- backends -->` and `<!-- /backends -->` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import test_model_zoo as zoo  # noqa: E402  (the ONNX reference builders)

import skriptnd  # noqa: E402
from skriptnd.backends import Options  # noqa: E402
from skriptnd.backends.bench import Report, bench  # noqa: E402

CASES = {
    "resnet18": (lambda w: zoo.resnet18_onnx(w), "input"),
    "mobilenetv2": (lambda w: zoo.mobilenetv2_onnx(w, zoo._make_weights("mobilenetv2").blocks()), "input"),
}
#: The IREE flag sweep: name -> extra iree-compile flags
SWEEP = {
    "default (data tiling + micro-kernels)": (),
    "no data tiling, no micro-kernels": ("--iree-opt-data-tiling=false", "--iree-llvmcpu-enable-ukernels=none"),
    "aggressive fusion": ("--iree-dispatch-creation-enable-aggressive-fusion",),
    "O3": ("--iree-opt-level=O3",),
    "no const-eval": ("--iree-opt-const-eval=false",),
}


def _onnx_file(name: str, params: dict[str, np.ndarray], folder: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    build, input_name = CASES[name]
    b = build(params)
    nodes = [*b.nodes, helper.make_node("Identity", [b.logits], ["output"])]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                                                          [1, 3, 224, 224])],
                              [helper.make_empty_tensor_value_info("output")], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.OPSET)])
    model.ir_version = 10
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _cached_start(model: Path, cache: str, threads: int) -> float:
    env = {**os.environ, "SKRIPTND_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "skriptnd", "run", str(model), "--random-inputs", "--via", "iree",
            "--threads", str(threads), "-a", "height=224", "-a", "width=224"]
    subprocess.run(args, env=env, capture_output=True, check=True)  # make sure it is cached
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(args, env=env, capture_output=True, check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def _openblas(model: Path, onnx_path: Path, threads: int, coretype: str | None, rounds: int) -> dict[str, Any]:
    """`sknd bench --via numpy --json` in a new process with OPENBLAS_CORETYPE set (or unset): OpenBLAS reads
    it when it loads, so it cannot change inside one process."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env["PYTHONPATH"] = str(ROOT)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    done = subprocess.run([sys.executable, "-m", "skriptnd", "bench", str(model), "-a", "height=224", "-a",
                           "width=224", "--via", "numpy", "--threads", str(threads), "--onnx", str(onnx_path),
                           "--rounds", str(rounds), "--json"], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _lstm_large(folder: Path, threads: list[int], rounds: int) -> list[Report]:
    """Issue 7's LSTM (models/lstm's graph LSTM, seq 128, batch 8, input = hidden = 256) on numpy and iree
    (a TOSA WHILE_LOOP of 16-step iterations: skriptnd.tosa.legalize.recurrent) against two stacked ONNX LSTM
    operators, same weights."""
    import onnx
    from onnx import TensorProto, helper

    path, _ = zoo._copy_with_weights("lstm", folder / "lstm-large")
    make = zoo._make_weights("lstm")
    params = make.weights(input=256, hidden=256)
    make.save(params, path)
    attribs = {"seq": 128, "batch": 8, "input": 256, "hidden": 256}
    graph = skriptnd.load(path).compose("LSTM", attribs=attribs)
    order = [graph.output_name(i) for i in range(len(graph.outputs))]
    b = zoo.lstm_onnx(params, with_steps=False)
    nodes = [*b.nodes, *(helper.make_node("Identity", [getattr(b, n)], [n]) for n in order)]
    model = helper.make_model(helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [128, 8, 256])],
        [helper.make_empty_tensor_value_info(n) for n in order], b.initializers),
        opset_imports=[helper.make_opsetid("", b.OPSET)])
    model.ir_version = 10
    onnx_path = folder / "lstm-large.onnx"
    onnx.save(model, str(onnx_path))
    x = {"X": np.random.default_rng(0).standard_normal((128, 8, 256)).astype(np.float32)}
    reports = []
    for t in threads:
        graph = skriptnd.load(path).compose("LSTM", attribs=attribs)
        reports.append(bench(graph, ["numpy", "kernels", "iree"], x, threads=t, onnx_file=str(onnx_path),
                             rounds=rounds, options=Options(cache_dir=str(folder / "cache-lstm")), model="lstm-large"))
        print(_line(reports[-1]), flush=True)
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--models", nargs="+", default=list(CASES))
    parser.add_argument("--sweep", action="store_true", help="also the IREE flag sweep (ResNet-18, most threads)")
    parser.add_argument("--openblas", nargs="*", default=None,
                        help="also numpy with these OPENBLAS_CORETYPE values ('-': unset), ResNet-18")
    parser.add_argument("--lstm", action="store_true", help="also issue 7's LSTM (seq 128, batch 8, hidden 256)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    reports: list[Report] = []
    extra: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sknd_bench_") as tmp:
        folder = Path(tmp)
        for name in args.models:
            path, params = zoo._copy_with_weights(name, folder / name)
            onnx_path = _onnx_file(name, params, folder)
            rng = np.random.default_rng(0)
            for threads in args.threads:
                cache = str(folder / f"cache-{name}-{threads}")
                graph = skriptnd.load(path).compose(attribs={"height": 224, "width": 224})
                inputs = {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                entries: list[Any] = ["numpy", "kernels", "iree"]
                sweep = args.sweep and name == "resnet18" and threads == max(args.threads)
                if sweep:  # the variants, timed interleaved with the rest
                    entries += [(f"iree: {label}", "iree", Options(cache_dir=cache, flags=flags))
                                for label, flags in SWEEP.items() if flags]
                report = bench(graph, entries, inputs, threads=threads, onnx_file=str(onnx_path), rounds=args.rounds,
                               options=Options(cache_dir=cache), model=name)
                reports.append(report)
                print(_line(report), flush=True)
                if sweep:
                    for r in report.results:
                        if r.backend == "iree" or r.backend.startswith("iree: "):
                            label = r.backend[6:] if r.backend.startswith("iree: ") else next(iter(SWEEP))
                            flags = SWEEP.get(label, ())
                            extra.append(f"* IREE flag sweep, {name}, {threads} threads, {label} "
                                         f"(`{' '.join(flags) or 'no extra flag'}`): "
                                         + (f"{r.median_ms:.2f} ms, {r.ratio_vs_onnxruntime:.2f}x onnxruntime; "
                                            f"prepare (cold compile) {r.prepare_s:.1f} s"
                                            if r.median_ms else f"failed: {r.error}"))
                            print(extra[-1], flush=True)
                if threads == max(args.threads):
                    start = _cached_start(path, cache, threads)
                    iree = next(r for r in report.results if r.backend == "iree")
                    extra.append(f"* {name}: IREE cold prepare (plan + TOSA MLIR + iree-compile) "
                                 f"{iree.prepare_s:.1f} s; `sknd run --via iree` on the warm cache, "
                                 f"invocation to exit: {start:.2f} s")
                    print(extra[-1], flush=True)
            if args.openblas is not None and name == "resnet18":
                for coretype in args.openblas or ["-"]:
                    for threads in args.threads:
                        rep = _openblas(path, onnx_path, threads, None if coretype == "-" else coretype, args.rounds)
                        rows = {r["backend"]: r for r in rep["results"]}
                        extra.append(f"* numpy, {name}, OPENBLAS_CORETYPE={coretype if coretype != '-' else '(unset)'}, "
                                     f"{threads} thread(s): {rows['numpy']['median_ms']:.2f} ms, "
                                     f"{rows['numpy']['ratio_vs_onnxruntime']:.2f}x onnxruntime "
                                     f"({rows['onnxruntime']['median_ms']:.2f} ms)")
                        print(extra[-1], flush=True)
        if args.lstm:
            lstm = _lstm_large(folder, args.threads, args.rounds)
            reports += lstm
            iree = next(r for r in lstm[0].results if r.backend == "iree")  # the first compiles, later ones hit
            extra.append(f"* lstm-large: IREE cold prepare (two layers of 128 steps, unrolled within the budget) {iree.prepare_s:.1f} s")
    if not args.no_write:
        _write(reports, extra)


def _line(report: Report) -> str:
    cells = [f"{r.backend} {r.median_ms:.2f} ms" + (f" ({r.ratio_vs_onnxruntime:.2f}x)" if r.ratio_vs_onnxruntime
                                                    else "") if r.median_ms else f"{r.backend} failed: {r.error}"
             for r in report.results]
    return f"{report.model} threads={report.threads}: " + "; ".join(cells)


def _write(reports: list[Report], extra: list[str]) -> None:
    env: dict[str, Any] = reports[0].environment
    pools = env.get("threadpools")
    pools_text = (", ".join(f"{p['internal_api']} {p['version']} ({p.get('architecture')})" for p in pools)
                  if isinstance(pools, list) else str(pools))
    lines = ["<!-- backends -->", "", "## Backends side by side (issue 14; `python benchmarks/backends.py`)", "",
             f"{env['cpu']}, {env['cores']} cores ({' '.join(env['isa'])}); numpy {env['numpy']} with "
             f"{env['numpy_blas']}; thread pools: {pools_text}; BLAS environment: "
             f"{' '.join(f'`{k}={v}`' for k, v in env['env'].items()) or 'none set'}; onnxruntime "
             f"{env.get('onnxruntime', '?')}, IREE {env.get('iree', '?')}; load average at the end "
             f"{os.getloadavg()[0]:.1f} (other processes: see the notes). Medians of interleaved rounds "
             "(`skriptnd.backends.bench`, what `sknd bench` runs); the ratio is to onnxruntime on the same "
             "weights in the same process.", "",
             "| model | threads | numpy (ms) | kernels (ms) | iree (ms) | onnxruntime (ms) | numpy / ORT | "
             "iree / ORT |", "|---|---|---|---|---|---|---|---|"]
    for rep in reports:
        by = {r.backend: r for r in rep.results}

        def ms(name: str, by: dict[str, Any] = by) -> str:
            r = by.get(name)
            return f"{r.median_ms:.2f}" if r and r.median_ms else "–"

        def ratio(name: str, by: dict[str, Any] = by) -> str:
            r = by.get(name)
            return f"{r.ratio_vs_onnxruntime:.2f}x" if r and r.ratio_vs_onnxruntime else "–"

        lines.append(f"| {rep.model} | {rep.threads} | {ms('numpy')} | {ms('kernels')} | {ms('iree')} | "
                     f"{ms('onnxruntime')} | {ratio('numpy')} | {ratio('iree')} |")
    lines += ["", *extra, "", "<!-- /backends -->"]
    doc = ROOT / "docs" / "performance.md"
    text = doc.read_text(encoding="utf-8")
    section = "\n".join(lines)
    if "<!-- backends -->" in text:
        head, _, rest = text.partition("<!-- backends -->")
        _, _, tail = rest.partition("<!-- /backends -->")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    from skriptnd.fileio import write_atomic

    write_atomic(doc, text)
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
