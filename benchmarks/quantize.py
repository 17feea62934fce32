"""`sknd quantize` against onnxruntime's quantize_static on an ONNX classifier (issue 26; docs/quantize.md).

    python benchmarks/quantize.py MODEL.onnx [--samples 200] [--work DIR]

Calibration images: 224x224 crops (random position, random horizontal flip, seeded) of scikit-learn's two
sample photographs (`sklearn.datasets.load_sample_images`), ImageNet-normalized, as [N, 3, 224, 224].
onnxruntime: `quant_pre_process`, then `quantize_static` (QDQ, per channel, MinMax, QInt8 activations and
weights) on those images, the quantized model run by onnxruntime. Ours: `sknd import`, then
`skriptnd.quantize.quantize_model` (minmax, per channel, target tosa) on the same images, the float graph
on numpy and the integer TOSA graph compiled by IREE (checked against the numpy integer graph on its first
run). Both SQNRs are of the logits against the float model on the calibration images.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np


def images(n: int, size: int = 224, seed: int = 0) -> np.ndarray:
    from sklearn.datasets import load_sample_images

    photos = [i.astype(np.float32) / 255 for i in load_sample_images().images]
    rng = np.random.default_rng(seed)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    out = np.empty((n, 3, size, size), np.float32)
    for k in range(n):
        im = photos[k % len(photos)]
        y, x = rng.integers(0, im.shape[0] - size + 1), rng.integers(0, im.shape[1] - size + 1)
        crop = im[y:y + size, x:x + size]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        out[k] = ((crop - mean) / std).transpose(2, 0, 1)
    return out


def sqnr(ref: np.ndarray, act: np.ndarray) -> float:
    ref = ref.astype(np.float64)
    return 10 * math.log10(float(np.sum(ref ** 2)) / float(np.sum((act.astype(np.float64) - ref) ** 2)))


def onnxruntime_sqnr(model: Path, x: np.ndarray, work: Path) -> float:
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter([{name: x[i:i + 1]} for i in range(len(x))])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    pre, out = work / "pre.onnx", work / "ort_int8.onnx"
    quant_pre_process(str(model), str(pre), skip_symbolic_shape=True)
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    quantized = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    ref = np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])
    got = np.concatenate([quantized.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])
    return sqnr(ref, got)


def ours(model: Path, x: np.ndarray, work: Path) -> tuple[float, str]:
    import skriptnd
    from skriptnd.quantize import Settings, load_calibration, quantize_model

    folder = skriptnd.import_model(str(model), work / "float")
    loaded = skriptnd.load(folder)
    graph = loaded.compose()
    np.savez(work / "calibration.npz", **{graph.inputs[0].name: x})
    data = load_calibration(work / "calibration.npz", graph)
    result = quantize_model(loaded, graph, data, work / "int8", Settings(measure_backend="iree"))
    return next(iter(result.sqnr.values())), result.integer or result.integer_error or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="sknd-quantize-"))
    work.mkdir(parents=True, exist_ok=True)
    x = images(args.samples)
    t = time.time()
    theirs = onnxruntime_sqnr(args.model, x, work)
    print(f"onnxruntime quantize_static: SQNR {theirs:.2f} dB ({time.time() - t:.0f} s)")
    t = time.time()
    mine, how = ours(args.model, x, work)
    print(f"sknd quantize: SQNR {mine:.2f} dB ({time.time() - t:.0f} s), {how}")


if __name__ == "__main__":
    main()
