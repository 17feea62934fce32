"""Winograd F(2x2,3x3) / F(4x4,3x3) vs im2col for ResNet-18's 3x3 stride-1 convolutions (fp32).

    python benchmarks/winograd.py [--threads 1 2] [--repeat 30] [--points lavin] [--resnet18]

For each layer shape (batch 1, pad 1) and thread count: best-of-N (minimum) time of the im2col
CONV2D of the TOSA programs (``skriptnd.tosa.program.fast.specialise("CONV2D", ...)``), F(2,3) and F(4,3)
(skriptnd.tosa.program.winograd), timed interleaved (one call of each per round), and the maximum error of
each relative to the largest magnitude of a float64 reference, ``--points lavin`` times F(4,3) with the points
0, +-1, +-2 instead of the default 0, +-1, 1/2, -2. ``--resnet18``: also ResNet-18 end to end
(224x224, batch 1, models/resnet18 with make_weights.py's weights in a temporary folder): the TOSA
program with the fast CONV2D's Winograd choice (:func:`skriptnd.tosa.program.winograd.preferred`) against
the same program with im2col everywhere, interleaved, best and median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import skriptnd  # noqa: E402
from skriptnd.tosa.program import fast, winograd  # noqa: E402

#: (spatial size, channels) of ResNet-18's 3x3 stride-1 convolutions (in = out channels)
LAYERS = [(56, 64), (28, 128), (14, 256), (7, 512)]


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    n, h, wd, _ = x.shape
    y = np.zeros((n, h, wd, w.shape[0]))
    for ky in range(3):
        for kx in range(3):
            y += xp[:, ky:ky + h, kx:kx + wd] @ w[:, ky, kx, :].astype(np.float64).T
    return y + b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--points", choices=["half", "lavin"], default="half")
    ap.add_argument("--resnet18", action="store_true")
    args = ap.parse_args()
    if args.points == "lavin":
        winograd.POINTS[4] = tuple(Fraction(p) for p in (0, 1, -1, 2, -2))
    rng = np.random.default_rng(0)
    print(f"{'layer':>14} {'thr':>3} {'im2col ms':>9} {'F(2,3) ms':>9} {'F(4,3) ms':>9}"
          f" {'err im2col':>10} {'err F2':>9} {'err F4':>9}")
    for size, ch in LAYERS:
        x = rng.standard_normal((1, size, size, ch)).astype(np.float32)
        w = (rng.standard_normal((ch, 3, 3, ch)) / np.sqrt(9 * ch)).astype(np.float32)
        b = rng.standard_normal(ch).astype(np.float32)
        attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]}
        relu = fast.Clamp(0.0, 3e38, ignore_nan=True)
        im2col = fast.specialise("CONV2D", [None, w, b, None, None], attrs, relu)
        im2col(x, w, b)
        im2col.winograd_ok = (False, False)  # type: ignore[attr-defined]  # im2col always
        w2 = winograd.Winograd(w, b, [1, 1, 1, 1], m=2, clamp=relu)
        w4 = winograd.Winograd(w, b, [1, 1, 1, 1], m=4, clamp=relu)
        fns = {"im2col": partial(im2col, x, w, b), "F2": partial(w2, x), "F4": partial(w4, x)}
        ref = np.maximum(reference(x, w, b), 0)
        errs = {k: float(np.abs(f() - ref).max() / np.abs(ref).max()) for k, f in fns.items()}
        for threads in args.threads:
            with threadpool_limits(threads):
                best = {k: np.inf for k in fns}
                for _ in range(args.repeat):
                    for k, f in fns.items():
                        t0 = time.perf_counter()
                        f()
                        best[k] = min(best[k], time.perf_counter() - t0)
            print(f"{size:>3}x{size:<3}x{ch:<3}->{ch:<3} {threads:>3} {1000 * best['im2col']:9.3f}"
                  f" {1000 * best['F2']:9.3f} {1000 * best['F4']:9.3f} {errs['im2col']:10.2e}"
                  f" {errs['F2']:9.2e} {errs['F4']:9.2e}", flush=True)
    if args.resnet18:
        resnet18(args.threads, args.repeat)


def resnet18(thread_counts: list[int], repeat: int) -> None:
    import test_model_zoo as zoo  # the model zoo's weight maker

    x = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = zoo._copy_with_weights("resnet18", Path(tmp))
        for threads in thread_counts:
            with threadpool_limits(threads):
                graphs = {}
                real = winograd.preferred
                for name, rule in (("im2col", lambda *shape: (False, False)), ("winograd", real)):
                    winograd.preferred = rule  # read when each convolution first runs
                    try:
                        graphs[name] = skriptnd.load(path).compose(attribs={"height": 224, "width": 224})
                        skriptnd.run(graphs[name], x)
                    finally:
                        winograd.preferred = real
                times: dict[str, list[float]] = {k: [] for k in graphs}
                for _ in range(repeat):
                    for name, graph in graphs.items():
                        t0 = time.perf_counter()
                        skriptnd.run(graph, x)
                        times[name].append(time.perf_counter() - t0)
            print(f"ResNet-18, {threads} thread(s): " + "   ".join(
                f"{k} best {1000 * min(v):.2f} ms median {1000 * statistics.median(v):.2f} ms"
                for k, v in times.items()), flush=True)


if __name__ == "__main__":
    main()
