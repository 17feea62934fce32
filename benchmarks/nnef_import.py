"""NNEF 1.x import of a ResNet-18-sized network (written here as graph.nnef with random weights, 46.8 MB):
import time, then the imported model's output against the nnef package's reference executor.

    python benchmarks/nnef_import.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from nnef_oracle import reference, write_graph  # noqa: E402

import skriptnd  # noqa: E402
from skriptnd.interop.nnef_import import import_nnef  # noqa: E402


def resnet18_text(rng: np.random.Generator) -> tuple[str, dict[str, np.ndarray]]:
    lines: list[str] = []
    weights: dict[str, np.ndarray] = {}

    def var(label: str, shape: tuple[int, ...], positive: bool = False) -> str:
        w = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 1)
        weights[label] = (np.abs(w) + 0.5 if positive else w).astype(np.float32)
        name = label.replace("/", "_")
        lines.append(f"    {name} = variable(shape = {list(shape)}, label = '{label}');")
        return name

    def conv_bn(x: str, cin: int, cout: int, k: int, s: int, name: str, relu: bool = True) -> str:
        w = var(f"{name}/w", (cout, cin, k, k))
        m, v = var(f"{name}/mean", (1, cout)), var(f"{name}/var", (1, cout), positive=True)
        b, g = var(f"{name}/beta", (1, cout)), var(f"{name}/gamma", (1, cout))
        p = k // 2
        lines.append(f"    {name}_c = conv({x}, {w}, 0.0, stride = [{s}, {s}], padding = [({p}, {p}), ({p}, {p})]);")
        lines.append(f"    {name}_b = batch_normalization({name}_c, {m}, {v}, {b}, {g}, epsilon = 1e-5);")
        if not relu:
            return f"{name}_b"
        lines.append(f"    {name} = relu({name}_b);")
        return name

    x = conv_bn("image", 3, 64, 7, 2, "stem")
    lines.append(f"    pool = max_pool({x}, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], "
                 "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');")
    x, cin = "pool", 64
    for stage, (cout, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
        for block in range(2):
            s = stride if block == 0 else 1
            n = f"l{stage}b{block}"
            a = conv_bn(x, cin, cout, 3, s, n + "_1")
            b = conv_bn(a, cout, cout, 3, 1, n + "_2", relu=False)
            shortcut = conv_bn(x, cin, cout, 1, s, n + "_d", relu=False) if (s != 1 or cin != cout) else x
            lines.append(f"    {n} = relu(add({b}, {shortcut}));")
            x, cin = n, cout
    lines.append(f"    g = mean_reduce({x}, axes = [2, 3]);")
    fw, fb = var("fc/w", (1000, 512)), var("fc/b", (1, 1000))
    lines.append(f"    logits = linear(reshape(g, shape = [1, 512]), {fw}, {fb});")
    text = ("graph ResNet18( image ) -> ( logits )\n{\n    image = external(shape = [1, 3, 224, 224]);\n"
            + "\n".join(lines) + "\n}\n")
    return text, weights


def main() -> None:
    rng = np.random.default_rng(0)
    text, weights = resnet18_text(rng)
    with tempfile.TemporaryDirectory() as tmp:
        src = write_graph(Path(tmp) / "nnef", text, weights)
        start = time.perf_counter()
        out = import_nnef(src, Path(tmp) / "sknd")
        print(f"import: {time.perf_counter() - start:.2f} s "
              f"({sum(w.nbytes for w in weights.values()) / 1e6:.1f} MB of weights copied)")
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        y = skriptnd.run(skriptnd.load(out).compose(), {"image_": x})["logits"]
        ref = reference(src, [x])[0]
        print(f"max |skriptnd - nnef| / max |nnef| = {np.abs(y - ref).max() / np.abs(ref).max():.2e}")


if __name__ == "__main__":
    main()
