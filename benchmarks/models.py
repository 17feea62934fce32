"""Model-zoo latency: skriptnd vs onnxruntime (and PyTorch eager for ResNet-18).

    python benchmarks/models.py [--threads 1 2] [--repeat 20] [--no-write] [--baseline]

For ResNet-18 (224x224, batch 1), MobileNetV2 (224x224, batch 1), the LSTM and the Transformer
(the shapes of tests/test_model_zoo.py), and the LSTM of issue #7 (models/lstm's graph LSTM with
seq 128, batch 8, input and hidden 256: two stacked nn.lstm layers against two stacked ONNX LSTM
operators): weights from each model's make_weights.py in a temporary folder; the ONNX reference
graphs are the test's builders (tests/test_model_zoo.py), with the same weights. The LSTMs and the
Transformer are timed interleaved (skriptnd and onnxruntime alternate, run by run, so load changes
on a shared machine hit both alike) after checking that their outputs agree. Both run with the same thread count: threadpoolctl limits numpy's BLAS, onnxruntime gets
intra_op_num_threads. `--baseline` also times skriptnd without the fast kernels of
skriptnd/execute/kernels.py (the @lower plans). When torch is installed, ResNet-18 also runs in
PyTorch eager mode (a functional torchvision-style ResNet-18 on the same weights, batch norm unfused,
`torch.inference_mode()`, `torch.set_num_threads`). "peak run MB" is the largest amount of memory
numpy allocated during one skriptnd run (tracemalloc), on top of the weights the executor holds.
Writes a markdown table (one row per model and thread count) to docs/performance.md.
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
import tracemalloc
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
from skriptnd.execute.pointwise import POINTWISE_KERNELS  # noqa: E402
from skriptnd.execute.recurrent import RECURRENT_KERNELS  # noqa: E402

#: The LSTM configuration of issue #7 (target: within 2x of onnxruntime's LSTM operator)
LSTM_LARGE = {"seq": 128, "batch": 8, "input": 256, "hidden": 256}


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up (plans, ORT allocations)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def _interleaved_ms(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Median latency of each function, timed alternately (one run of each per round)."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, t in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            t.append(time.perf_counter() - start)
    return [1000.0 * statistics.median(t) for t in times]


def _lstm_large(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """models/lstm copied to `folder` with make_weights.py's weights for input = hidden = 256."""
    path, _ = zoo._copy_with_weights("lstm", folder)
    make = zoo._make_weights("lstm")
    params = make.weights(input=LSTM_LARGE["input"], hidden=LSTM_LARGE["hidden"])
    make.save(params, path)
    return path, params


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


def _torch_resnet18(w: dict[str, np.ndarray], threads: int) -> Callable[[np.ndarray], Any] | None:
    """torchvision's resnet18 in PyTorch eager (functional, BatchNorm in eval mode), or None without torch."""
    try:
        import torch
        import torch.nn.functional as F  # noqa: N812
    except ImportError:
        return None
    torch.set_num_threads(threads)
    p = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}

    def conv_bn(x: Any, name: str, stride: int, relu: bool = False) -> Any:
        f = p[f"{name}.filter"]
        x = F.conv2d(x, f, stride=stride, padding=f.shape[-1] // 2)
        x = F.batch_norm(x, p[f"{name}.mean"], p[f"{name}.variance"], p[f"{name}.scale"], p[f"{name}.bias"],
                         training=False, eps=1e-5)
        return F.relu(x, inplace=True) if relu else x

    def forward(x: Any) -> Any:
        x = conv_bn(x, "conv1", 2, relu=True)
        x = F.max_pool2d(x, 3, 2, 1)
        for stage, stride in [(1, 1), (2, 2), (3, 2), (4, 2)]:
            for block in range(2):
                name, s = f"layer{stage}_{block}", stride if block == 0 else 1
                y = conv_bn(conv_bn(x, f"{name}.conv1", s, relu=True), f"{name}.conv2", 1)
                shortcut = conv_bn(x, f"{name}.downsample", s) if f"{name}.downsample.filter" in p else x
                x = F.relu(y + shortcut, inplace=True)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return F.linear(x, p["fc_filter"], p["fc_bias"])

    def run(x: np.ndarray) -> Any:
        with torch.inference_mode():
            return forward(torch.from_numpy(x)).numpy()

    return run


def _peak_mb(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


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
        ("lstm-large", LSTM_LARGE, "LSTM", {"X": (LSTM_LARGE["seq"], LSTM_LARGE["batch"], LSTM_LARGE["input"])},
         lambda w: zoo.lstm_onnx(w, with_steps=False), lambda b: {"Y": b.Y, "hN": b.hN, "cN": b.cN}),
    ]:
        if name == "lstm-large":
            path, params = _lstm_large(folder / name)
        else:
            path, params = zoo._copy_with_weights(name, folder / name)
        arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in inputs.items()}
        cases.append({"name": name, "path": path, "params": params, "attribs": attribs, "graph": graph_name,
                      "inputs": arrays, "build": build, "outputs": outputs,
                      "interleave": name in ("lstm", "lstm-large", "transformer")})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--baseline", action="store_true", help="also time the @lower plans (no fast kernels)")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/performance.md")
    parser.add_argument("--models", nargs="*", default=None)
    args = parser.parse_args()
    import onnxruntime as ort

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = _cases(Path(tmp))
        for threads in args.threads:
            with threadpool_limits(threads):
                for case in cases:
                    if args.models and case["name"] not in args.models:
                        continue
                    rows.append(_measure(case, threads, args, ort))
    if not args.no_write:
        _write(rows, args.threads)


def _measure(case: dict[str, Any], threads: int, args: Any, ort: Any) -> dict[str, Any]:
    start = time.perf_counter()
    graph = skriptnd.load(case["path"]).compose(case["graph"], attribs=case["attribs"])
    result = graph.run(case["inputs"])  # builds the execution plan (and the plans of operations without a kernel)
    setup = time.perf_counter() - start
    builder = case["build"](case["params"])
    session = _session(ort, builder, case["inputs"], case["outputs"](builder), threads)
    if case.get("interleave"):
        expected = dict(zip(case["outputs"](builder), session(), strict=True))
        error = max(float(np.abs(result[k] - v).max() / max(np.abs(v).max(), 1e-12)) for k, v in expected.items())
        print(f"  {case['name']}: skriptnd vs onnxruntime, max relative difference {error:.1e}", flush=True)
        sknd, onnx = _interleaved_ms([lambda g=graph, c=case: g.run(c["inputs"]), session], args.repeat)
    else:
        sknd = _median_ms(lambda g=graph, c=case: g.run(c["inputs"]), args.repeat)
    peak = _peak_mb(lambda g=graph, c=case: g.run(c["inputs"]))
    weights = sum(np.asarray(v).nbytes for v in case["params"].values()) / 1e6
    base = None
    if args.baseline:
        variables = {t.name: graph.variable_source(t) for t in graph.variables}
        plain = Executor(graph, variables, kernels={k: v for k, v in KERNELS.items()
                                                    if k not in FAST_KERNELS + RECURRENT_KERNELS + POINTWISE_KERNELS},
                         optimize=False)
        base = _median_ms(lambda e=plain, c=case: e.run(c["inputs"]), max(3, args.repeat // 4))
    torch_ms = None
    if case["name"] == "resnet18":
        forward = _torch_resnet18(case["params"], threads)
        if forward is not None:
            x = case["inputs"]["input"]
            expected = next(iter(result.values()))
            got = forward(x)
            error = float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-12))
            print(f"  torch vs skriptnd: max relative difference {error:.1e}", flush=True)
            torch_ms = _median_ms(lambda f=forward, v=x: f(v), args.repeat)
    if not case.get("interleave"):
        onnx = _median_ms(session, args.repeat)
    r = {"model": case["name"], "threads": threads,
         "shape": " ".join("x".join(map(str, v.shape)) for v in case["inputs"].values()),
         "sknd": sknd, "base": base, "ort": onnx, "torch": torch_ms, "setup": setup, "peak": peak,
         "weights": weights}
    print(f"{r['model']:12s} threads {threads}  skriptnd {sknd:8.2f} ms   onnxruntime {onnx:8.2f} ms   "
          f"ratio {sknd / onnx:5.2f}x" + (f"   torch {torch_ms:8.2f} ms" if torch_ms is not None else "")
          + (f"   @lower plans {base:8.2f} ms" if base is not None else "")
          + f"   compose+plans {setup:5.2f} s   peak run {peak:6.1f} MB (weights {weights:.1f} MB)", flush=True)
    return r


def _write(rows: list[dict[str, Any]], threads: list[int]) -> None:
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
        f"{' and '.join(map(str, threads))} threads (the same for numpy's BLAS via threadpoolctl, onnxruntime "
        f"{ort.__version__}'s `intra_op_num_threads` and `torch.set_num_threads`); numpy {np.__version__}"
        f"{_torch_version()}. Median latency of repeated runs, batch 1 unless the shape says otherwise; "
        "'peak run MB': memory numpy allocates during one skriptnd run (tracemalloc), besides the weights.",
        "",
        "Targets (from the issue): ResNet-18 at most 1.25x onnxruntime and faster than PyTorch eager; "
        "composition + plan build under 0.5 s. Issue #7: the LSTM with seq 128, batch 8, input and hidden 256 "
        "(`lstm-large`, two layers) at most 2x onnxruntime's LSTM operator.",
        "",
        "| model | input | threads | skriptnd (ms) | @lower plans only (ms) | onnxruntime (ms) | "
        "PyTorch eager (ms) | skriptnd / ORT | compose + plans (s) | peak run MB (weights MB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['shape']} | {r['threads']} | {ms(r['sknd'])} | {ms(r['base'])} | "
                     f"{ms(r['ort'])} | {ms(r['torch'])} | {r['sknd'] / r['ort']:.2f}x | {r['setup']:.2f} | "
                     f"{r['peak']:.1f} ({r['weights']:.1f}) |")
    lines.append("")
    path = ROOT / "docs" / "performance.md"
    notes = path.read_text().split("<!-- notes -->", 1)[1] if path.exists() and "<!-- notes -->" in \
        path.read_text() else "\n"
    path.write_text("\n".join(lines) + "\n<!-- notes -->" + notes)
    print(f"wrote {path}")


def _torch_version() -> str:
    try:
        import torch
    except ImportError:
        return "; PyTorch not installed (no eager column)"
    return f", PyTorch {torch.__version__}"


if __name__ == "__main__":
    main()
