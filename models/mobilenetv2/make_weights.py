"""Deterministic random weights for MobileNetV2 (models/mobilenetv2/main.sknd).

    python models/mobilenetv2/make_weights.py                 # into models/mobilenetv2/
    python models/mobilenetv2/make_weights.py --output DIR    # into DIR (with a copy of the .sknd files)

The network is untrained: every variable is drawn from a seeded numpy generator
(`default_rng([SEED, crc32(name)])`, so a variable's values depend only on its name and the seed):

* convolution filters `[out,in/groups,k,k]`: He normal, standard deviation sqrt(2 / (in/groups * k * k))
  (depthwise filters `[c,1,3,3]`: sqrt(2 / 9));
* batch-norm running means and biases (beta): normal, standard deviation 0.1;
* batch-norm running variances and scales (gamma): uniform in [0.5, 1.5];
* the classifier `classifier_filter [1000,1280]`: normal, 1 / sqrt(1280); `classifier_bias`: normal, 0.01.

The files are float32 NNEF tensor files `main.MobileNetV2.<scoped variable>.dat`, the names
skriptnd.load looks for (`conv0.filter`, `block2.depthwise.mean`, `classifier_bias`, ...). They take
about 14 MB and are not committed (see .gitignore).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPH = "main", "MobileNetV2"
SEED = 2
CLASSES = 1000
STEM, HEAD = 32, 1280

#: MobileNetV2's inverted residual settings: (expansion t, output channels c, repeats n, first stride s)
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1)]
BN_PARTS = ("mean", "variance", "bias", "scale")


def blocks() -> list[tuple[int, int, int]]:
    """(expansion, output channels, stride) of block1 .. block17."""
    return [(t, c, s if i == 0 else 1) for t, c, n, s in SETTINGS for i in range(n)]


def shapes(classes: int = CLASSES) -> dict[str, tuple[int, ...]]:
    """Every variable of the graph (scoped name -> shape)."""
    out: dict[str, tuple[int, ...]] = {}

    def conv_bn(name: str, channels: int, inputs: int, size: int) -> None:
        out[f"{name}.filter"] = (channels, inputs, size, size)
        for part in BN_PARTS:
            out[f"{name}.{part}"] = (channels,)

    conv_bn("conv0", STEM, 3, 3)
    inputs = STEM
    for k, (t, c, _) in enumerate(blocks(), start=1):
        hidden = inputs * t
        if t != 1:
            conv_bn(f"block{k}.expand", hidden, inputs, 1)
        conv_bn(f"block{k}.depthwise", hidden, 1, 3)
        conv_bn(f"block{k}.project", c, hidden, 1)
        inputs = c
    conv_bn("conv18", HEAD, inputs, 1)
    out["classifier_filter"] = (classes, HEAD)
    out["classifier_bias"] = (classes,)
    return out


def make(name: str, shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    part = name.rsplit(".", 1)[-1]
    if name == "classifier_filter":
        values = rng.standard_normal(shape) / np.sqrt(shape[1])
    elif name == "classifier_bias":
        values = rng.standard_normal(shape) * 0.01
    elif part == "filter":
        values = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
    elif part in ("variance", "scale"):
        values = rng.uniform(0.5, 1.5, shape)
    else:  # mean, bias
        values = rng.standard_normal(shape) * 0.1
    return values.astype(np.float32)


def weights(seed: int = SEED, classes: int = CLASSES) -> dict[str, np.ndarray]:
    return {name: make(name, shape, seed) for name, shape in shapes(classes).items()}


def save(params: dict[str, np.ndarray], folder: Path = HERE) -> None:
    from skriptnd.model import save_weights

    for graph in [GRAPH]:
        save_weights(folder, graph, params, module=MODULE)


def main() -> None:
    from skriptnd.model import weights_main

    weights_main(__doc__, weights, [GRAPH], HERE, SEED, MODULE)


if __name__ == "__main__":
    main()
