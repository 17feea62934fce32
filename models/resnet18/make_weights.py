"""Deterministic random weights for ResNet-18 (models/resnet18/main.sknd).

    python models/resnet18/make_weights.py                 # into models/resnet18/
    python models/resnet18/make_weights.py --output DIR    # into DIR (with a copy of the .sknd files)

The network is untrained: every variable is drawn from a seeded numpy generator
(`default_rng([SEED, crc32(name)])`, so a variable's values depend only on its name and the seed,
not on the order in which they are made):

* convolution filters `[out,in,k,k]`: He normal, standard deviation sqrt(2 / (in * k * k));
* batch-norm running means: normal, standard deviation 0.1;
* batch-norm running variances and scales (gamma): uniform in [0.5, 1.5];
* batch-norm biases (beta): normal, standard deviation 0.1;
* the classifier `fc_filter [1000,512]`: normal, standard deviation 1 / sqrt(512); `fc_bias`: normal, 0.01.

The files are float32 NNEF tensor files `main.ResNet18.<scoped variable>.dat`, the names
skriptnd.load looks for (`conv1.filter`, `layer2_0.downsample.mean`, `fc_filter`, ...). They take
about 45 MB and are not committed (see .gitignore).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPH = "main", "ResNet18"
SEED = 18
CLASSES = 1000

#: (stage, channels, stride of its first block), torchvision's layer1..layer4
STAGES = [(1, 64, 1), (2, 128, 2), (3, 256, 2), (4, 512, 2)]
BN_PARTS = ("mean", "variance", "bias", "scale")


def shapes(classes: int = CLASSES) -> dict[str, tuple[int, ...]]:
    """Every variable of the graph (scoped name -> shape), in torchvision's order."""
    out: dict[str, tuple[int, ...]] = {}

    def conv_bn(name: str, channels: int, inputs: int, size: int) -> None:
        out[f"{name}.filter"] = (channels, inputs, size, size)
        for part in BN_PARTS:
            out[f"{name}.{part}"] = (channels,)

    conv_bn("conv1", 64, 3, 7)
    inputs = 64
    for stage, channels, stride in STAGES:
        for block in range(2):
            name = f"layer{stage}_{block}"
            conv_bn(f"{name}.conv1", channels, inputs, 3)
            conv_bn(f"{name}.conv2", channels, channels, 3)
            if block == 0 and (stride != 1 or inputs != channels):
                conv_bn(f"{name}.downsample", channels, inputs, 1)
            inputs = channels
    out["fc_filter"] = (classes, 512)
    out["fc_bias"] = (classes,)
    return out


def make(name: str, shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    part = name.rsplit(".", 1)[-1]
    if name == "fc_filter":
        values = rng.standard_normal(shape) / np.sqrt(shape[1])
    elif name == "fc_bias":
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
