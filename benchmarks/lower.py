"""Speed of the @lower evaluator against plain numpy: `python benchmarks/lower.py`.

Runs a compiled plan (built once, as the executor does) and a plain numpy implementation of
the same operation, each several times, and prints the median times and their ratio (the
target is <= 3x).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

# One BLAS thread: on a shared 2-core machine threaded BLAS timings swing by 50x between runs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

from skriptnd.api import find_operator  # noqa: E402
from skriptnd.lower import compile_lowering  # noqa: E402
from skriptnd.semantics.binding import bind  # noqa: E402
from skriptnd.semantics.values import Pack, TensorValue  # noqa: E402


def median_times(ours: Callable[[], object], ref: Callable[[], object], runs: int = 21) -> tuple[float, float]:
    """Median seconds of each, measured alternately (this machine's load drifts)."""
    ours()
    ref()
    a, b = [], []
    for _ in range(runs):
        start = time.perf_counter()
        ours()
        a.append(time.perf_counter() - start)
        start = time.perf_counter()
        ref()
        b.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def plan_for(op: str, attrs: dict, inputs: list) -> object:
    definition, _ = find_operator(op)
    values = [None if x is None else TensorValue("real", x.shape) for x in inputs]
    binding = bind(definition, {k: Pack(v) if isinstance(v, list) else v for k, v in attrs.items()}, values)
    return compile_lowering(definition, binding)


def conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3 'same' convolution, NCHW: pad, sliding windows, tensordot."""
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    windows = sliding_window_view(xp, (3, 3), axis=(2, 3))  # N, C, H, W, 3, 3
    out = np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3]))  # N, H, W, O
    return out.transpose(0, 3, 1, 2)


def main() -> None:
    rng = np.random.default_rng(0)
    results = []

    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    plan = plan_for("linalg.matmul", {}, [a, b, None])
    np.testing.assert_allclose(plan.run([a, b, None])[0], a @ b, rtol=1e-3, atol=1e-3)
    results.append(("matmul 256^3", *median_times(lambda: plan.run([a, b, None]), lambda: a @ b)))

    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    plan = plan_for("nn.conv", {"padding": [1, 1, 1, 1]}, [x, w, None])
    np.testing.assert_allclose(plan.run([x, w, None])[0], conv_reference(x, w), rtol=1e-3, atol=1e-3)
    results.append(("conv 1x64x56x56 3x3", *median_times(lambda: plan.run([x, w, None]),
                                                          lambda: conv_reference(x, w))))

    print(f"{'case':<24}{'@lower (ms)':>14}{'numpy (ms)':>14}{'ratio':>9}")
    for name, ours, ref in results:
        print(f"{name:<24}{ours * 1e3:>14.2f}{ref * 1e3:>14.2f}{ours / ref:>9.2f}")


if __name__ == "__main__":
    main()
