"""Check the dynamic zoo exports (``build.py --dynamic``): import each WITHOUT fixed shapes, then compose and
run it with the numpy backend at two shapes, against onnxruntime on the original file (issue 25).

    python benchmarks/zoo/dynamic.py ~/.cache/skriptnd/zoo/NAME_dyn.onnx ...

The symbolic dimensions are the graph attributes ``batch`` and ``seq``; the two shapes are batch 1 /
sequence 7 and batch 3 / sequence 16. Inputs are seeded: images N(0, 1), token ids below 100, attention
masks with the last two positions padded, token types 0. Prints one line per model and shape: the output
shapes and the largest |difference| over the largest |reference| (``ok`` at most 1e-4).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPES = [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 16}]
TOLERANCE = 1e-4


def feeds(model, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:  # noqa: ANN001 (onnx is optional)
    rng = np.random.default_rng(seed)
    out = {}
    init = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in t.shape.dim]
        if t.elem_type == 1:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in vi.name:
            mask = np.ones(shape, np.int64)
            mask[..., -2:] = 0
            out[vi.name] = mask
        elif "type" in vi.name:
            out[vi.name] = np.zeros(shape, np.int64)
        else:
            out[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
    return out


def check(path: Path) -> bool:
    import onnx
    import onnxruntime as ort

    import skriptnd
    from skriptnd.backends import Options, prepare

    model = onnx.load(str(path))
    folder = Path(tempfile.mkdtemp()) / "m"
    start = time.perf_counter()
    result = skriptnd.import_model(str(path), str(folder))
    print(f"{path.name}: imported in {time.perf_counter() - start:.1f} s", flush=True)
    loaded = skriptnd.load(result.path if hasattr(result, "path") else folder)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ok = True
    for seed, sizes in enumerate(SHAPES):
        fed = feeds(model, sizes, seed)
        reference = session.run(None, fed)
        graph = loaded.compose(attribs={d.name: sizes[d.name] for d in loaded.attrib_decls() if d.name in sizes})
        outputs = prepare(graph, "numpy", Options(threads=1)).run(
            {t.name: fed[n] for t, n in zip(graph.inputs, fed, strict=True)})
        for actual, expected in zip(outputs.values(), reference, strict=True):
            same = actual.shape == expected.shape
            error = float(np.max(np.abs(actual - expected)) / max(float(np.max(np.abs(expected))), 1e-30)) \
                if same else float("inf")
            good = same and error <= TOLERANCE
            ok &= good
            print(f"  {sizes}: {actual.shape} vs {expected.shape}, relative error {error:.2e} "
                  f"{'ok' if good else 'WRONG'}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    args = parser.parse_args(argv)
    failed = 0
    for path in args.models:
        try:
            failed += not check(path)
        except Exception as e:  # noqa: BLE001 (a model that does not import is a result; the rest go on)
            failed += 1
            print(f"{path.name}: {type(e).__name__}: {str(e).splitlines()[0][:400]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
