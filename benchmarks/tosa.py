"""Throughput of skriptnd's numpy TOSA kernels against the TOSA reference model: `python benchmarks/tosa.py`.

Cases: CONV2D 1x56x56x64 input, 64x3x3x64 weights, stride 1, pad 1; MATMUL 1x256x256 by 1x256x256;
each for int8 (int32 accumulation, non-zero zero points) and fp32. Before timing, the outputs of
`skriptnd.tosa.ops.OPS[op]` and of the reference model must agree (int8 bit for bit, fp32 within allclose).

The reference model is driven as the tests drive it (`tests/tosa_oracle.py`, `run_reference`): every
call builds a one-operator graph, ships the operands as byte lists to a persistent worker process,
which serializes the graph (JSON -> flatbuffer) and runs it. The reference time per call therefore
includes that per-call overhead (IPC, graph building, serialization), not only the kernel; it is the
median of a few repetitions. The overhead grows with the operand bytes (they travel as JSON byte
lists), so it is estimated by an IDENTITY call through the same path on an int8 tensor holding as many
bytes as the operands ("ref I/O"); "ref-I/O" is the difference, a rough estimate of the reference
kernel alone. Times are medians of repeated runs in this process, numpy and reference alternating.

    python benchmarks/tosa.py [--runs N] [--ref-runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# One BLAS / OpenMP thread for both sides (the reference worker inherits the environment): on a shared
# machine threaded timings swing widely between runs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from skriptnd.tosa.ops import OPS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import tosa_oracle  # noqa: E402


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls of ``fn`` (after the caller's warm-up)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternate(ours: Callable[[], object], ref: Callable[[], object], runs: int, ref_runs: int) -> tuple[float, float]:
    """Median seconds of ``ours`` (``runs`` calls) and ``ref`` (``ref_runs`` calls), interleaved in rounds
    so that load drift affects both alike."""
    a, b = [], []
    for i in range(max(runs, ref_runs)):
        if i < runs:
            start = time.perf_counter()
            ours()
            a.append(time.perf_counter() - start)
        if i < ref_runs:
            start = time.perf_counter()
            ref()
            b.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def zp(v: int, t: str) -> np.ndarray:
    return np.array([v], np.int8 if t == "int8" else np.float32)


def conv_case(rng: np.random.Generator, t: str, n: int, hw: int, c: int, oc: int, k: int) -> tuple:
    if t == "int8":
        x = rng.integers(-128, 128, size=(n, hw, hw, c), dtype=np.int8)
        w = rng.integers(-128, 128, size=(oc, k, k, c), dtype=np.int8)
        b = rng.integers(-1000, 1000, size=(oc,), dtype=np.int32)
        zps = [zp(3, t), zp(-2, t)]
        acc = "int32"
    else:
        x = rng.uniform(-1, 1, size=(n, hw, hw, c)).astype(np.float32)
        w = rng.uniform(-1, 1, size=(oc, k, k, c)).astype(np.float32)
        b = rng.uniform(-1, 1, size=(oc,)).astype(np.float32)
        zps = [zp(0, t), zp(0, t)]
        acc = "fp32"
    p = k // 2
    attrs = {"pad": [p, p, p, p], "stride": [1, 1], "dilation": [1, 1], "acc_type": acc}
    ops = 2 * n * hw * hw * oc * k * k * c
    return [x, w, b, *zps], attrs, acc, (n, hw, hw, oc), ops


def matmul_case(rng: np.random.Generator, t: str, n: int, h: int, c: int, w: int) -> tuple:
    if t == "int8":
        a = rng.integers(-128, 128, size=(n, h, c), dtype=np.int8)
        b = rng.integers(-128, 128, size=(n, c, w), dtype=np.int8)
        zps = [zp(-5, t), zp(7, t)]
        out = "int32"
    else:
        a = rng.uniform(-1, 1, size=(n, h, c)).astype(np.float32)
        b = rng.uniform(-1, 1, size=(n, c, w)).astype(np.float32)
        zps = [zp(0, t), zp(0, t)]
        out = "fp32"
    return [a, b, *zps], {}, out, (n, h, w), 2 * n * h * c * w


def check(op: str, mine: np.ndarray, ref: object, out: str) -> str:
    if isinstance(ref, tosa_oracle.ReferenceError):
        raise SystemExit(f"{op} {out}: reference model failed: {ref}")
    ref = np.asarray(ref)
    if mine.shape != ref.shape:
        raise SystemExit(f"{op} {out}: shape {mine.shape} != reference {ref.shape}")
    if out.startswith("int"):
        if mine.dtype != ref.dtype or not np.array_equal(mine, ref):
            bad = int(np.count_nonzero(mine != ref))
            raise SystemExit(f"{op} {out}: {bad} elements differ from the reference (dtype {mine.dtype}/{ref.dtype})")
        return "bit-exact"
    scale = float(np.max(np.abs(ref))) or 1.0
    if not np.allclose(mine, ref, rtol=1e-5, atol=1e-5 * scale):
        raise SystemExit(f"{op} {out}: not allclose to the reference, max |diff| {np.max(np.abs(mine - ref)):.3g}")
    return f"allclose (max|d| {float(np.max(np.abs(mine.astype(np.float64) - ref))):.1e})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed calls of the numpy kernels")
    parser.add_argument("--ref-runs", type=int, default=5, help="timed calls of the reference model")
    args = parser.parse_args()
    if not tosa_oracle.available():
        raise SystemExit(f"tosa-tools is not installed (pip install --no-deps "
                         f"tosa-tools=={tosa_oracle.TOSA_TOOLS_VERSION})")

    rng = np.random.default_rng(20240601)
    cases = []
    for t in ("int8", "fp32"):
        cases.append(("CONV2D", t, conv_case(rng, t, 1, 56, 64, 64, 3)))
    for t in ("int8", "fp32"):
        cases.append(("MATMUL", t, matmul_case(rng, t, 1, 256, 256, 256)))

    print(f"numpy {np.__version__}, tosa-tools {tosa_oracle.TOSA_TOOLS_VERSION}, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; medians of {args.runs} numpy calls "
          f"and {args.ref_runs} reference calls per case")
    print("reference = tests/tosa_oracle.run_reference: per-call time INCLUDES the per-call overhead "
          "(operands to a worker process, graph build + JSON/flatbuffer serialization);")
    print("'ref I/O' = IDENTITY through the same path on as many operand bytes (estimate of that overhead), "
          "'ref-I/O' = the difference (rough reference kernel time).\n")
    header = (f"{'op':<7}{'type':<6}{'shape':<26}{'numpy ms':>10}{'GOP/s':>8}{'ref ms':>10}{'GOP/s':>8}"
              f"{'np/ref':>8}{'ref I/O':>9}{'ref-I/O':>9}  check")
    print(header)
    print("-" * len(header))
    for op, t, (inputs, attrs, out, shape, ops) in cases:
        kwargs = dict(attrs)
        if op == "MATMUL":
            kwargs["output_dtype"] = out

        def ours(inputs=inputs, kwargs=kwargs, op=op) -> np.ndarray:
            return OPS[op](*inputs, **kwargs)

        def ref(inputs=inputs, attrs=attrs, op=op, out=out, shape=shape) -> object:
            r = tosa_oracle.run_reference(op, inputs, attrs, out, output_shape=shape)
            if isinstance(r, tosa_oracle.ReferenceError):
                raise RuntimeError(f"{op} {out}: reference model failed: {r}")
            return r

        payload = np.concatenate([np.ascontiguousarray(x).view(np.int8).ravel() for x in inputs])

        def io(payload=payload) -> object:
            return tosa_oracle.run_reference("IDENTITY", [payload], {}, "int8")

        # correctness first (this is also the warm-up of both sides, worker start included)
        verdict = check(op, np.asarray(ours()), tosa_oracle.run_reference(op, inputs, attrs, out, output_shape=shape),
                        out)
        io()
        t_np, t_ref = alternate(ours, ref, args.runs, args.ref_runs)
        t_io = median_seconds(io, args.ref_runs)
        desc = ("x".join(map(str, inputs[0].shape)) + " * " + "x".join(map(str, inputs[1].shape)))
        print(f"{op:<7}{t:<6}{desc:<26}{t_np * 1e3:>10.1f}{ops / t_np / 1e9:>8.2f}{t_ref * 1e3:>10.1f}"
              f"{ops / t_ref / 1e9:>8.2f}{t_np / t_ref:>8.3f}{t_io * 1e3:>9.1f}{(t_ref - t_io) * 1e3:>9.1f}  {verdict}")
    print("\nGOP/s = 2 x multiply-accumulates / time; np/ref < 1 means the numpy kernel is faster.")


if __name__ == "__main__":
    main()
