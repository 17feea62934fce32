"""Model-zoo latency: skriptnd's backends (numpy, kernels, iree) vs onnxruntime vs PyTorch eager, timed by
`sknd bench`'s machinery (skriptnd.backends.bench).

    python benchmarks/models.py [--threads 1 2] [--rounds 5] [--per-turn 3] [--gap 0.3] [--iree-all]
                                [--models resnet18 ...] [--no-write] [--no-sgemm] [--baseline]

For ResNet-18 (224x224, batch 1), MobileNetV2 (224x224, batch 1), the LSTM and the Transformer
(the shapes of tests/test_model_zoo.py), and the LSTM of issue #7 (`lstm-large`: models/lstm's graph
LSTM with seq 128, batch 8, input and hidden 256), in one process, on the same weights (each
model's make_weights.py, written to a temporary folder) and with the same thread count:

* skriptnd numpy: the default backend (`--via numpy`: runs of legalizable operations compiled into TOSA
  programs on numpy, skriptnd.backends.tosa_programs);
* skriptnd kernels: the native numpy kernels (`--via kernels`), no TOSA;
* skriptnd iree: `--via iree`, the graph's TOSA programs compiled by IREE (compiled once per model into a
  temporary cache; `NO_IREE` models only with `--iree-all`);
* onnxruntime: the ONNX reference graph of tests/test_model_zoo.py's builders, CPU execution
  provider, `intra_op_num_threads` = threads;
* PyTorch eager, when torch imports: functional implementations in this file (`TORCH`: conv2d +
  unfused eval-mode batch_norm for the CNNs, `torch.nn.LSTM` for the LSTMs, `layer_norm` +
  `scaled_dot_product_attention` for the transformer), `torch.inference_mode()`,
  `torch.set_num_threads(threads)`; without torch its column shows "–".

skriptnd.backends.bench prepares every implementation, compares its outputs with the first's (skriptnd
numpy; max |difference| / max |numpy|; one that differs by more than 1e-4 is not shown), then times them
interleaved, round by round (each implementation's turn: `--gap` seconds of sleep with several threads,
since spinning thread pools slow down whatever runs next on the same cores, one untimed run, then
`--per-turn` timed runs); the table gives the medians. numpy's BLAS is limited with threadpoolctl. Each
row also records how many CPUs other processes kept busy meanwhile (/proc/stat): two-thread rows
measured while another process ran are not meaningful. `--baseline` also times skriptnd on the @lower
plans only (`--via lower`). "peak run MB" is the largest amount of memory numpy allocated during one
skriptnd run (tracemalloc), on top of the weights the executor holds.

Unless `--no-sgemm`, the ResNet-18 rows are followed by a measurement of numpy's sgemm (OpenBLAS)
on the im2col GEMM shapes of ResNet-18's 20 convolutions ([positions x in*k*k] @ [in*k*k x out],
as skriptnd.tosa.program.fast's CONV2D multiplies them), per thread count: the GFLOP/s range over the
shapes and the sum of the 20 GEMM times, against the convolution FLOP rate implied by each
framework's whole-network latency.

Writes docs/performance.md (a markdown table, one row per model and thread count, above the
hand-written notes that follow the `<!-- notes -->` marker) and, when matplotlib imports,
docs/performance.png (grouped bars per model, one panel per thread count, log scale).
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
from skriptnd.backends import Options  # noqa: E402
from skriptnd.backends.base import Runner  # noqa: E402
from skriptnd.backends.bench import bench  # noqa: E402

#: The LSTM configuration of issue #7 (target: within 2x of onnxruntime's LSTM operator)
LSTM_LARGE = {"seq": 128, "batch": 8, "input": 256, "hidden": 256}
#: Largest relative difference from skriptnd's outputs for an implementation to be timed
TOLERANCE = 1e-4
#: Implementations (row keys) and their column titles, in table and chart order
IMPLS = {"numpy": "skriptnd numpy", "kernels": "skriptnd kernels", "iree": "skriptnd iree", "ort": "onnxruntime",
         "torch": "PyTorch eager"}
CHART_LABELS = {"numpy": "skriptnd --via numpy (default: TOSA programs)", "kernels": "skriptnd --via kernels",
                "iree": "skriptnd --via iree", "ort": "onnxruntime", "torch": "PyTorch eager"}
#: row keys -> the labels skriptnd.backends.bench reports them under
BENCH_NAMES = {"numpy": "numpy", "kernels": "kernels", "iree": "iree", "ort": "onnxruntime", "torch": "torch"}
#: models the iree backend is not timed on by default (none since lstm-large's nn.lstm layers became TOSA
#: loops, skriptnd.tosa.legalize.recurrent: ~2 s of iree-compile instead of ~1 min for 128 unrolled steps)
NO_IREE: set[str] = set()
Outputs = dict[str, np.ndarray]


def _interleaved_ms(fns: list[Callable[[], Any]], repeat: int, budget: float = 0.0, gap: float = 0.0) -> list[float]:
    """Median latency of each function, timed alternately (only the sgemm measurement: the models are timed
    by skriptnd.backends.bench).

    gap 0 (one thread): one run of each per round, at least `repeat` rounds, more (up to 10x) while
    they fit in `budget` seconds. gap > 0 (several threads, where thread pools spin-wait after a
    run: OpenBLAS' workers for ~0.1 s, slowing whatever runs next on the shared cores): per round,
    each function in turn after `gap` seconds of sleep and one untimed run, then timed runs for
    at least 0.1 s (and 3 runs); at least 3 rounds and `repeat` timed runs of each."""
    start = time.perf_counter()
    for fn in fns:
        fn()  # warm-up
    first = time.perf_counter() - start
    times: list[list[float]] = [[] for _ in fns]
    if gap <= 0:
        for _ in range(max(repeat, min(10 * repeat, int(budget / max(first, 1e-9))))):
            for fn, t in zip(fns, times, strict=True):
                start = time.perf_counter()
                fn()
                t.append(time.perf_counter() - start)
        return [1000.0 * statistics.median(t) for t in times]
    rounds = 0
    while rounds < 3 or min(len(t) for t in times) < repeat:
        rounds += 1
        for fn, t in zip(fns, times, strict=True):
            time.sleep(gap)
            fn()
            block, count = time.perf_counter(), 0
            while count < 3 or time.perf_counter() - block < 0.1:
                start = time.perf_counter()
                fn()
                t.append(time.perf_counter() - start)
                count += 1
    return [1000.0 * statistics.median(t) for t in times]


def _cpu_snapshot() -> tuple[float, float, float] | None:
    """(CPU seconds of all processes, of this one, wall seconds) now; None where /proc/stat is missing."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    own = os.times()
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), own.user + own.system, time.perf_counter()


def _others_cpus(before: tuple[float, float, float] | None) -> float | None:
    """Average number of CPUs other processes kept busy since `before` (a shared machine's noise)."""
    after = _cpu_snapshot()
    if before is None or after is None:
        return None
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / (after[2] - before[2]))


def _relative_difference(got: Outputs, expected: Outputs) -> float:
    return max(float(np.abs(np.asarray(got[k], np.float64) - v).max() / max(float(np.abs(v).max()), 1e-12))
               for k, v in expected.items())


def _lstm_large(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """models/lstm copied to `folder` with make_weights.py's weights for input = hidden = 256."""
    path, _ = zoo._copy_with_weights("lstm", folder)
    make = zoo._make_weights("lstm")
    params = make.weights(input=LSTM_LARGE["input"], hidden=LSTM_LARGE["hidden"])
    make.save(params, path)
    return path, params


def _session(ort: Any, builder: zoo.Onnx, inputs: dict[str, np.ndarray], outputs: dict[str, str],
             threads: int) -> Callable[[], Outputs]:
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
    return lambda: dict(zip(names, session.run(names, inputs), strict=True))


# ------------------------------------------------------------------------------------ PyTorch eager
# Each builder takes the model's weights (make_weights.py names), the case's inputs and the thread
# count, and returns a function running the model on those inputs (outputs by skriptnd's names),
# or None when torch does not import.


def _torch(threads: int | None = None) -> Any:
    """torch (with ``threads`` intra-op threads when given), or None when it does not import."""
    try:
        import torch
    except ImportError:
        return None
    if threads is not None:
        torch.set_num_threads(threads)
    return torch


def _torch_runner(torch: Any, forward: Callable[..., Any], inputs: dict[str, np.ndarray],
                  names: list[str]) -> Callable[[], Outputs]:
    args = [torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values()]

    def run() -> Outputs:
        with torch.inference_mode():
            out = forward(*args)
        out = out if isinstance(out, tuple) else (out,)
        return {n: o.numpy() for n, o in zip(names, out, strict=True)}

    return run


def _tensors(torch: Any, w: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}


def _torch_resnet18(w: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                    threads: int) -> Callable[[], Outputs] | None:
    """torchvision's resnet18 (functional: conv2d, eval-mode batch_norm unfused)."""
    torch = _torch(threads)
    if torch is None:
        return None
    import torch.nn.functional as F  # noqa: N812

    p = _tensors(torch, w)

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

    return _torch_runner(torch, forward, inputs, ["output"])


def _torch_mobilenetv2(w: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                       threads: int) -> Callable[[], Outputs] | None:
    """torchvision's mobilenet_v2 (functional, eval mode, no dropout), as models/mobilenetv2/ops/blocks.sknd."""
    torch = _torch(threads)
    if torch is None:
        return None
    import torch.nn.functional as F  # noqa: N812

    p = _tensors(torch, w)
    blocks = zoo._make_weights("mobilenetv2").blocks()

    def conv_bn(x: Any, name: str, stride: int = 1, depthwise: bool = False, relu6: bool = True) -> Any:
        f = p[f"{name}.filter"]
        x = F.conv2d(x, f, stride=stride, padding=f.shape[-1] // 2, groups=f.shape[0] if depthwise else 1)
        x = F.batch_norm(x, p[f"{name}.mean"], p[f"{name}.variance"], p[f"{name}.scale"], p[f"{name}.bias"],
                         training=False, eps=1e-5)
        return F.hardtanh(x, 0.0, 6.0, inplace=True) if relu6 else x

    def forward(x: Any) -> Any:
        x = conv_bn(x, "conv0", stride=2)
        channels = p["conv0.filter"].shape[0]
        for k, (t, c, s) in enumerate(blocks, start=1):
            y = conv_bn(x, f"block{k}.expand") if t != 1 else x
            y = conv_bn(y, f"block{k}.depthwise", stride=s, depthwise=True)
            y = conv_bn(y, f"block{k}.project", relu6=False)
            x = x + y if s == 1 and channels == c else y
            channels = c
        x = conv_bn(x, "conv18")
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return F.linear(x, p["classifier_filter"], p["classifier_bias"])

    return _torch_runner(torch, forward, inputs, ["output"])


def _torch_lstm(w: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                threads: int) -> Callable[[], Outputs] | None:
    """models/lstm's graph LSTM as a two-layer torch.nn.LSTM: nn.lstm_step's gate order [i, f, g, o]
    is PyTorch's, so W, R and B are weight_ih, weight_hh and bias_ih of each layer (bias_hh = 0);
    zero initial states; outputs Y (the last layer's hidden states), hN and cN ([layers, batch, hidden])."""
    torch = _torch(threads)
    if torch is None:
        return None
    hidden, features = w["layer1_R"].shape[1], w["layer1_W"].shape[1]
    lstm = torch.nn.LSTM(features, hidden, num_layers=2).eval()
    with torch.no_grad():
        for k, layer in enumerate(("layer1", "layer2")):
            getattr(lstm, f"weight_ih_l{k}").copy_(torch.from_numpy(w[f"{layer}_W"]))
            getattr(lstm, f"weight_hh_l{k}").copy_(torch.from_numpy(w[f"{layer}_R"]))
            getattr(lstm, f"bias_ih_l{k}").copy_(torch.from_numpy(w[f"{layer}_B"]))
            getattr(lstm, f"bias_hh_l{k}").zero_()

    def forward(x: Any) -> Any:
        y, (h, c) = lstm(x)
        return y, h, c

    return _torch_runner(torch, forward, inputs, ["Y", "hN", "cN"])


def _torch_transformer(w: dict[str, np.ndarray], inputs: dict[str, np.ndarray], threads: int,
                       heads: int = 4) -> Callable[[], Outputs] | None:
    """models/transformer's two pre-norm encoder blocks: layer_norm (eps 1e-5), linear, multi-head
    scaled_dot_product_attention (softmax(q k^T / sqrt(dh)) v), exact-erf gelu, the two residuals."""
    torch = _torch(threads)
    if torch is None:
        return None
    import torch.nn.functional as F  # noqa: N812

    p = _tensors(torch, w)
    blocks = sorted({k.split(".", 1)[0] for k in w if k.startswith("block")})

    def dense(x: Any, name: str) -> Any:
        return F.linear(x, p[f"{name}.filter"], p[f"{name}.bias"])

    def norm(x: Any, name: str) -> Any:
        return F.layer_norm(x, x.shape[-1:], p[f"{name}.scale"], p[f"{name}.bias"], eps=1e-5)

    def forward(x: Any) -> Any:
        b, s, c = x.shape
        for block in blocks:
            n1 = norm(x, f"{block}.norm1")
            q, k, v = (dense(n1, f"{block}.attention.{m}").view(b, s, heads, c // heads).transpose(1, 2)
                       for m in ("query", "key", "value"))
            context = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, c)
            x = x + dense(context, f"{block}.attention.out")
            x = x + dense(F.gelu(dense(norm(x, f"{block}.norm2"), f"{block}.fc1")), f"{block}.fc2")
        return x

    return _torch_runner(torch, forward, inputs, ["output"])


TORCH: dict[str, Callable[..., Callable[[], Outputs] | None]] = {
    "resnet18": _torch_resnet18, "mobilenetv2": _torch_mobilenetv2, "lstm": _torch_lstm,
    "lstm-large": _torch_lstm, "transformer": _torch_transformer,
}


# ------------------------------------------------------------------------------------- measuring


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
         lambda w: zoo.resnet18_onnx(w), lambda b: {"output": b.logits}),
        ("mobilenetv2", {"height": 224, "width": 224}, None, {"input": (1, 3, 224, 224)},
         lambda w: zoo.mobilenetv2_onnx(w, zoo._make_weights("mobilenetv2").blocks()),
         lambda b: {"output": b.logits}),
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
                      "inputs": arrays, "build": build, "outputs": outputs})
    return cases


class _FnRunner(Runner):
    """A function of no arguments (its inputs bound) as a bench entry: PyTorch eager, an onnxruntime session."""

    def __init__(self, fn: Callable[[], Outputs], plan: str) -> None:
        self.fn, self.plan = fn, [plan]

    def run(self, inputs: Any, progress: Any = None) -> dict[str, Any]:
        return self.fn()


def _measure(case: dict[str, Any], threads: int, args: Any, ort: Any, cache: Path) -> dict[str, Any]:
    """One model at one thread count, timed by skriptnd.backends.bench (what `sknd bench` runs): skriptnd's
    backends, onnxruntime on the reference ONNX graph and PyTorch eager, interleaved round by round."""
    snapshot = _cpu_snapshot()
    start = time.perf_counter()
    model = skriptnd.load(case["path"])
    graph = model.compose(case["graph"], attribs=case["attribs"])
    skriptnd.run(graph, case["inputs"])  # builds the execution plan (TOSA programs, kernels, @lower plans)
    setup = time.perf_counter() - start
    builder = case["build"](case["params"])
    entries: list[Any] = ["numpy", "kernels"]
    if case["name"] not in NO_IREE or args.iree_all:
        entries.append("iree")
    if args.baseline:
        entries.append("lower")
    entries.append(("onnxruntime", _FnRunner(_session(ort, builder, case["inputs"], case["outputs"](builder), threads),
                                             "onnxruntime on tests/test_model_zoo.py's ONNX graph")))
    torch_run = TORCH[case["name"]](case["params"], case["inputs"], threads)
    if torch_run is not None:
        entries.append(("torch", _FnRunner(torch_run, "PyTorch eager")))
    report = bench(graph, entries, case["inputs"], threads=threads, rounds=args.rounds, per_turn=args.per_turn,
                   gap=args.gap if threads > 1 else 0.0, options=Options(cache_dir=str(cache)), model=case["name"])
    by = {r.backend: r for r in report.results}
    ms: dict[str, float | None] = {}
    errors: dict[str, float] = {}
    for key, name in BENCH_NAMES.items():
        r = by.get(name)
        if r is None or r.median_ms is None:
            if r is not None and r.error:
                print(f"  {case['name']}: {IMPLS[key]}: {r.error}", flush=True)
            ms[key] = None
            continue
        ms[key] = r.median_ms
        if r.deviation is not None:
            errors[key] = r.deviation
            if r.deviation > TOLERANCE:
                print(f"  {case['name']}: {IMPLS[key]} differs from skriptnd numpy by {r.deviation:.1e} > "
                      f"{TOLERANCE:g}: not shown", flush=True)
                ms[key] = None
    lower = by.get("lower")
    base = lower.median_ms if lower is not None else None
    peak = _peak_mb(lambda: skriptnd.run(graph, case["inputs"]))
    weights = sum(np.asarray(v).nbytes for v in case["params"].values()) / 1e6
    iree = by.get("iree")
    r = {"model": case["name"], "threads": threads,
         "shape": " ".join("x".join(map(str, v.shape)) for v in case["inputs"].values()),
         **ms, "base": base, "setup": setup, "peak": peak, "weights": weights, "errors": errors, "graph": graph,
         "iree_prepare": iree.prepare_s if iree is not None else None, "others": _others_cpus(snapshot),
         "environment": report.environment}
    print(f"{r['model']:12s} threads {threads}  "
          + "   ".join(f"{IMPLS[k]} {_ms(r[k])}" + (" ms" if r[k] is not None else "") for k in IMPLS)
          + f"   numpy/ORT {_ratio(r['numpy'], r['ort'])}   iree/ORT {_ratio(r['iree'], r['ort'])}"
          + (f"   @lower plans {base:8.2f} ms" if base is not None else "")
          + f"   compose+plans {setup:5.2f} s   peak run {peak:6.1f} MB (weights {weights:.1f} MB)"
          + ("" if r["others"] is None else f"   other processes {r['others']:.2f} CPUs"), flush=True)
    return r


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}" if v < 1 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}x"


# ------------------------------------------------------------------------- sgemm on ResNet-18's shapes


def _conv_gemms(graph: Any) -> list[tuple[int, int, int]]:
    """(positions, in*k*k, out) of each nn.conv of the composed graph: its im2col GEMM."""
    shapes = []
    for op in graph.operations:
        if op.op != "nn.conv":
            continue
        filt, out = op.inputs[1].shape, op.outputs[0].shape
        shapes.append((int(np.prod(out[:1]) * np.prod(out[2:])), int(np.prod(filt[1:])), int(filt[0])))
    return shapes


def _sgemm(graph: Any, threads: int, repeat: int) -> dict[str, Any]:
    """numpy sgemm on the im2col shapes (cols [P, K] @ filter [OC, K]^T, the fast CONV2D's product):
    per-shape GFLOP/s (median of interleaved rounds) and the sum over the network's convolutions."""
    rng = np.random.default_rng(1)
    gemms = _conv_gemms(graph)
    unique = sorted(set(gemms), key=gemms.index)
    operands = [(rng.standard_normal((p, k), np.float32), rng.standard_normal((oc, k), np.float32).T)
                for p, k, oc in unique]
    snapshot = _cpu_snapshot()
    with threadpool_limits(threads):
        times = _interleaved_ms([lambda a=a, b=b: a @ b for a, b in operands], max(repeat, 30))
    others = _others_cpus(snapshot)
    rate = {shape: 2e-6 * shape[0] * shape[1] * shape[2] / t for shape, t in zip(unique, times, strict=True)}
    by_shape = dict(zip(unique, times, strict=True))
    flops = sum(2.0 * p * k * oc for p, k, oc in gemms)
    total = sum(by_shape[s] for s in gemms)
    slowest = min(rate, key=rate.get)
    fastest = max(rate, key=rate.get)
    print(f"  sgemm on ResNet-18's {len(gemms)} im2col shapes, {threads} thread(s): "
          f"{min(rate.values()):.0f}-{max(rate.values()):.0f} GFLOP/s per shape "
          f"(slowest {slowest}, fastest {fastest}); all 20 GEMMs {total:.1f} ms = {flops / total / 1e6:.0f} GFLOP/s; "
          f"convolutions {flops / 1e9:.2f} GFLOP"
          + ("" if others is None else f"; other processes {others:.2f} CPUs"), flush=True)
    for s in unique:
        print(f"    [{s[0]} x {s[1]}] @ [{s[1]} x {s[2]}]  {by_shape[s]:.3f} ms  {rate[s]:.0f} GFLOP/s"
              f"  (x{gemms.count(s)})", flush=True)
    return {"threads": threads, "min": min(rate.values()), "max": max(rate.values()), "total_ms": total,
            "flops": flops, "rate": flops / total / 1e6, "others": others}


# ----------------------------------------------------------------------------------------- output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (skriptnd.backends.bench)")
    parser.add_argument("--per-turn", type=int, default=3, help="timed runs of each implementation per round")
    parser.add_argument("--gap", type=float, default=0.3,
                        help="with several threads: seconds of sleep before each implementation's turn in a "
                             "round (the previous one's thread pool stops spinning)")
    parser.add_argument("--iree-all", action="store_true", help="also iree on the NO_IREE models")
    parser.add_argument("--baseline", action="store_true", help="also time the @lower plans (no kernels, no TOSA)")
    parser.add_argument("--no-sgemm", action="store_true", help="skip the sgemm measurement on ResNet-18's shapes")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/performance.md (.png)")
    parser.add_argument("--models", nargs="*", default=None)
    args = parser.parse_args()
    import onnxruntime as ort

    rows, sgemm = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for c in _cases(Path(tmp)) if not args.models or c["name"] in args.models]
        for threads in args.threads:
            with threadpool_limits(threads):
                for case in cases:  # iree compiles each model once (a cache shared by the thread counts)
                    rows.append(_measure(case, threads, args, ort, Path(tmp) / "iree-cache"))
                    if case["name"] == "resnet18" and not args.no_sgemm:
                        sgemm.append(_sgemm(rows[-1]["graph"], threads, args.rounds * args.per_turn))
    if not args.no_write:  # rows by thread count (`--threads 2 1` measures the load-sensitive rows first)
        if rows:
            rows[0]["first"] = True
        rows.sort(key=lambda r: r["threads"])
        sgemm.sort(key=lambda s: s["threads"])
        threads = sorted(args.threads)
        chart = _chart(rows, threads, ROOT / "docs" / "performance.png")
        _write(rows, threads, sgemm, chart, args)


def _chart(rows: list[dict[str, Any]], threads: list[int], path: Path) -> Path | None:
    """Grouped bars (one group per model, one bar per implementation), one panel per thread count,
    log latency axis; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        print("matplotlib not installed: no chart", flush=True)
        return None
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(threads), figsize=(5.5 * len(threads), 4.2), sharey=True, squeeze=False)
    width = 0.8 / len(IMPLS)
    for ax, n in zip(axes[0], threads, strict=True):
        by_model = {r["model"]: r for r in rows if r["threads"] == n}
        for i, key in enumerate(IMPLS):
            xs = [m + (i - (len(IMPLS) - 1) / 2) * width for m in range(len(models))]
            ys = [by_model.get(m, {}).get(key) for m in models]
            ax.bar([x for x, y in zip(xs, ys, strict=True) if y is not None], [y for y in ys if y is not None],
                   width, label=CHART_LABELS[key], color=f"C{i}")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xticks(range(len(models)), models, rotation=20)
        ax.set_title(f"{n} thread{'s' if n > 1 else ''}")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0][0].set_ylabel("median latency (ms, log scale)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(IMPLS), fontsize="small", frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}", flush=True)
    return path


def _write(rows: list[dict[str, Any]], threads: list[int], sgemm: list[dict[str, Any]], chart: Path | None,
           args: Any) -> None:
    import onnxruntime as ort

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    base = any(r["base"] is not None for r in rows)
    env: dict[str, Any] = rows[0]["environment"] if rows else {}
    now = datetime.datetime.now(datetime.UTC)
    lines = [
        "# Performance",
        "",
        f"Measured {now:%Y-%m-%d %H:%M} UTC with `python benchmarks/models.py` on {cpu}, "
        f"{os.cpu_count()} logical CPUs (a shared VM; load average {load:.1f} at the end of the run), "
        f"{' and '.join(map(str, threads))} threads (the same for numpy's BLAS via threadpoolctl, IREE's workers, "
        f"onnxruntime {ort.__version__}'s `intra_op_num_threads` and `torch.set_num_threads`); numpy "
        f"{np.__version__} ({env.get('numpy_blas', '?')}; BLAS environment: "
        f"{' '.join(f'`{k}={v}`' for k, v in env.get('env', {}).items()) or 'none set'})"
        f"{_torch_version()}, IREE {env.get('iree', '–')}. Median latency of interleaved rounds "
        f"(skriptnd.backends.bench, what `sknd bench` runs: {args.rounds} rounds of {args.per_turn} timed runs "
        f"after an untimed one; with several threads each turn starts with {args.gap:g} s of sleep, since the "
        "thread pools of OpenBLAS, IREE, onnxruntime and PyTorch spin-wait after a run and slow down whatever "
        "runs next on the same cores); batch 1 unless the shape says otherwise; all on the same weights in one "
        "process.",
        "",
        "Columns: **numpy** is skriptnd's default backend (`--via numpy`: runs of legalizable operations "
        "compiled into TOSA programs on numpy); **kernels** the native numpy kernels (`--via kernels`, no "
        "TOSA); **iree** the TOSA programs compiled by IREE (`--via iree`; 'iree compile' is its prepare: iree-compile at the model's first thread count, a cache hit at the next); "
        "**onnxruntime** the ONNX reference graph of tests/test_model_zoo.py (CPU provider); **PyTorch eager** "
        "the functional implementations in benchmarks/models.py (`torch.inference_mode()`); "
        + ("**@lower plans only** the operators' own `@lower` formulas (`--via lower`); " if base else "")
        + "'compose + plans': load, compose and first run of the default backend"
        + "".join(f" (the {r['model']} row with {r['threads']} thread{'s' if r['threads'] > 1 else ''}, "
                  "measured first, includes parsing the standard library)" for r in rows if r.get("first"))
        + "; 'peak run MB': memory numpy allocates during one skriptnd run "
        "(tracemalloc), besides the weights; 'other processes': the average number of CPUs other "
        "processes kept busy while the row was measured (/proc/stat; rows above ~0.2 are suspect on 2 CPUs, "
        "two-thread rows most). Every implementation's outputs agree with skriptnd numpy's to "
        f"{max((e for r in rows for e in r['errors'].values()), default=0.0):.0e} relative or better "
        f"(checked before timing; above {TOLERANCE:.0e} a column would show '–').",
        "",
        "Targets (from the issues): ResNet-18 and MobileNetV2 at 2 threads: the fastest skriptnd backend at most 1.25x onnxruntime, the numpy default at most 2x (issue 14); "
        "composition + plan build under 0.5 s. Issue #7: the LSTM with seq 128, batch 8, input and hidden 256 "
        "(`lstm-large`, two layers) at most 2x onnxruntime's LSTM operator.",
        "",
        "| model | input | threads | numpy (ms) | kernels (ms) | iree (ms) | "
        + ("@lower plans only (ms) | " if base else "")
        + "onnxruntime (ms) | PyTorch eager (ms) | numpy / ORT | iree / ORT | numpy / PyTorch | "
        "compose + plans (s) | iree compile (s) | peak run MB (weights MB) | other processes (CPUs) |",
        "|---|---|---:|---:|---:|---:|" + ("---:|" if base else "") + "---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['model']} | {r['shape']} | {r['threads']} | {_ms(r['numpy'])} | {_ms(r['kernels'])} | "
                     f"{_ms(r['iree'])} | "
                     + (f"{_ms(r['base'])} | " if base else "")
                     + f"{_ms(r['ort'])} | {_ms(r['torch'])} | {_ratio(r['numpy'], r['ort'])} | "
                     f"{_ratio(r['iree'], r['ort'])} | {_ratio(r['numpy'], r['torch'])} | {r['setup']:.2f} | "
                     + (f"{r['iree_prepare']:.1f}" if r["iree_prepare"] is not None else "–")
                     + f" | {r['peak']:.1f} ({r['weights']:.1f}) | "
                     + ("–" if r["others"] is None else f"{r['others']:.2f}") + " |")
    lines.append("")
    if chart is not None:
        lines += [f"![Median latency per model, log scale]({chart.name})", ""]
    if sgemm:
        resnet = {r["threads"]: r for r in rows if r["model"] == "resnet18"}
        parts = []
        for s in sgemm:
            r = resnet[s["threads"]]
            implied = ", ".join(f"{IMPLS[k]} {s['flops'] / r[k] / 1e6:.0f}" for k in ("ort", "torch", "iree", "numpy")
                                if r[k] is not None)
            parts.append(f"{s['threads']} thread{'s' if s['threads'] > 1 else ''}: {s['min']:.0f}–{s['max']:.0f} "
                         f"GFLOP/s per shape, the 20 GEMMs alone {s['total_ms']:.1f} ms ({s['rate']:.0f} GFLOP/s); "
                         f"whole network, as GFLOP/s of convolution: {implied}"
                         + ("" if s["others"] is None else f" (other processes {s['others']:.2f} CPUs)"))
        lines += [f"numpy sgemm (OpenBLAS) on the im2col GEMMs of ResNet-18's 20 convolutions "
                  f"({sgemm[0]['flops'] / 1e9:.2f} GFLOP; `[positions x in*k*k] @ [in*k*k x out]`, measured in "
                  "the same run): " + "; ".join(parts) + ".", ""]
    path = ROOT / "docs" / "performance.md"
    text = path.read_text() if path.exists() else ""
    notes = text.split("<!-- notes -->", 1)[1] if "<!-- notes -->" in text else "\n"
    path.write_text("\n".join(lines) + "\n<!-- notes -->" + notes)
    print(f"wrote {path}", flush=True)


def _torch_version() -> str:
    torch = _torch()
    return "; PyTorch not installed (no eager column)" if torch is None else f", PyTorch {torch.__version__}"


if __name__ == "__main__":
    main()
