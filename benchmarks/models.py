"""Model-zoo latency: skriptnd vs onnxruntime .

    python benchmarks/models.py [--threads 2] [--repeat 20] [--no-write] [--baseline]

For ResNet-18 (224x224, batch 1), MobileNetV2 (224x224, batch 1), the LSTM and the Transformer
(the shapes of tests/test_model_zoo.py): weights from each model's make_weights.py in a temporary
folder; the ONNX reference graphs are the test's builders (tests/test_model_zoo.py), with the same
weights. Both run with the same thread count: threadpoolctl limits numpy's BLAS, onnxruntime gets
intra_op_num_threads. `--baseline` also times skriptnd without the fast kernels of
skriptnd/execute/kernels.py (the @lower plans). Writes a markdown table to docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_model_zoo as zoo  # noqa: E402  (the ONNX reference builders)
from threadpoolctl import threadpool_limits  # noqa: E402

import skriptnd  # noqa: E402
from skriptnd.execute import KERNELS, Executor  # noqa: E402
from skriptnd.execute.kernels import FAST_KERNELS  # noqa: E402


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up (plans, ORT allocations)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def _session(ort: Any, builder: zoo.Onnx, inputs: dict[str, np.ndarray], outputs: dict[str, str],
             threads: int) -> Callable[[], Any]:
    import onnx
    from onnx import TensorProto, helper

    graph_inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()]
    nodes = list(builder.nodes)
    graph_outputs = []
    for name, node_output in outputs.items():
        nodes.append(helper.make_node("Identity", [node_output], [name]))
        graph_outputs.append(helper.make_empty_tensor_value_info(name))
    graph = helper.make_graph(nodes, "reference", graph_inputs, graph_outputs, builder.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", builder.OPSET)])
    model.ir_version = 10
    model = onnx.shape_inference.infer_shapes(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = list(outputs)
    return lambda: session.run(names, inputs)


def _cases(folder: Path) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    cases = []
    for name, attribs, graph_name, inputs, build, outputs in [
        ("resnet18", {"height": 224, "width": 224}, None, {"input": (1, 3, 224, 224)},
         lambda w: zoo.resnet18_onnx(w), lambda b: {"logits": b.logits}),
        ("mobilenetv2", {"height": 224, "width": 224}, None, {"input": (1, 3, 224, 224)},
         lambda w: zoo.mobilenetv2_onnx(w, zoo._make_weights("mobilenetv2").blocks()), lambda b: {"logits": b.logits}),
        ("lstm", {"seq": zoo.SEQ, "batch": zoo.BATCH}, "LSTM", {"X": (zoo.SEQ, zoo.BATCH, 16)},
         lambda w: zoo.lstm_onnx(w, with_steps=False), lambda b: {"Y": b.Y, "hN": b.hN, "cN": b.cN}),
        ("transformer", {"batch": 2, "seq": 16}, None, {"tokens": (2, 16, 64)},
         lambda w: zoo.transformer_onnx(w, heads=4), lambda b: {"output": b.output}),
    ]:
        path, params = zoo._copy_with_weights(name, folder / name)
        arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in inputs.items()}
        cases.append({"name": name, "path": path, "params": params, "attribs": attribs, "graph": graph_name,
                      "inputs": arrays, "build": build, "outputs": outputs})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--baseline", action="store_true", help="also time the @lower plans (no fast kernels)")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/performance.md")
    parser.add_argument("--models", nargs="*", default=None)
    args = parser.parse_args()
    import onnxruntime as ort

    rows = []
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(args.threads):
        for case in _cases(Path(tmp)):
            if args.models and case["name"] not in args.models:
                continue
            start = time.perf_counter()
            graph = skriptnd.load(case["path"]).compose(case["graph"], attribs=case["attribs"])
            graph.run(case["inputs"])  # builds the plans of the operations without a kernel
            setup = time.perf_counter() - start
            sknd = _median_ms(lambda g=graph, c=case: g.run(c["inputs"]), args.repeat)
            base = None
            if args.baseline:
                variables = {t.name: graph.variable_source(t) for t in graph.variables}
                plain = Executor(graph, variables, kernels={k: v for k, v in KERNELS.items() if k not in FAST_KERNELS})
                base = _median_ms(lambda e=plain, c=case: e.run(c["inputs"]), max(3, args.repeat // 4))
            builder = case["build"](case["params"])
            onnx = _median_ms(_session(ort, builder, case["inputs"], case["outputs"](builder), args.threads),
                              args.repeat)
            rows.append({"model": case["name"], "shape": " ".join("x".join(map(str, v.shape))
                                                                  for v in case["inputs"].values()),
                         "sknd": sknd, "base": base, "ort": onnx, "setup": setup})
            r = rows[-1]
            print(f"{r['model']:12s} skriptnd {sknd:8.2f} ms   onnxruntime {onnx:8.2f} ms   ratio {sknd / onnx:5.2f}x"
                  + (f"   @lower plans {base:8.2f} ms" if base is not None else "")
                  + f"   compose+plans {setup:5.2f} s", flush=True)
    if not args.no_write:
        _write(rows, args.threads)


def _write(rows: list[dict[str, Any]], threads: int) -> None:
    import onnxruntime as ort

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:.1f}"

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        "# Performance",
        "",
        f"Measured {datetime.date.today().isoformat()} with `python benchmarks/models.py` on {cpu}, "
        f"{os.cpu_count()} logical CPUs (a shared VM; load average {load:.1f} at the end of the run), "
        f"{threads} threads for numpy's BLAS (threadpoolctl) and onnxruntime {ort.__version__} "
        f"(`intra_op_num_threads`); numpy {np.__version__}. Median latency of repeated runs, batch 1 "
        "unless the shape says otherwise. PyTorch eager is not installed here and has no column yet.",
        "",
        "Targets (from the issue): ResNet-18 at most 1.25x onnxruntime and faster than PyTorch eager; "
        "composition + plan build under 0.5 s.",
        "",
        "| model | input | skriptnd (ms) | @lower plans only (ms) | onnxruntime (ms) | skriptnd / ORT | compose + plans (s) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['shape']} | {ms(r['sknd'])} | {ms(r['base'])} | {ms(r['ort'])} | "
                     f"{r['sknd'] / r['ort']:.2f}x | {r['setup']:.2f} |")
    lines.append("")
    path = ROOT / "docs" / "performance.md"
    notes = path.read_text().split("<!-- notes -->", 1)[1] if path.exists() and "<!-- notes -->" in \
        path.read_text() else "\n"
    path.write_text("\n".join(lines) + "\n<!-- notes -->" + notes)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
