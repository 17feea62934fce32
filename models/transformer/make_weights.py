"""Deterministic random weights for the transformer encoder (models/transformer/main.sknd).

    python models/transformer/make_weights.py                 # into models/transformer/ (the committed files)
    python models/transformer/make_weights.py --output DIR    # into DIR

Every variable is drawn from a seeded numpy generator (`default_rng([SEED, crc32(name)])`, so a
variable's values depend only on its name and the seed), for the default attributes (dim 64, ffn 256):

* dense filters `[units,in]` (query, key, value, out, fc1, fc2): normal, standard deviation 1 / sqrt(in);
* dense biases: normal, standard deviation 0.02;
* layer-norm scales (gamma): uniform in [0.5, 1.5]; layer-norm biases (beta): normal, 0.1.

Files: float32 NNEF tensor files `main.Transformer.<scoped variable>.dat` (`block1.norm1.scale`,
`block2.attention.query.filter`, ...), 32 files, about 400 KB.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPH = "main", "Transformer"
SEED = 64
BLOCKS, DIM, FFN = 2, 64, 256


def shapes(dim: int = DIM, ffn: int = FFN, blocks: int = BLOCKS) -> dict[str, tuple[int, ...]]:
    """Every variable of the graph (scoped name -> shape)."""
    out: dict[str, tuple[int, ...]] = {}
    for k in range(1, blocks + 1):
        block = f"block{k}"
        dense = {f"{block}.attention.{p}": (dim, dim) for p in ("query", "key", "value", "out")}
        dense[f"{block}.fc1"] = (ffn, dim)
        dense[f"{block}.fc2"] = (dim, ffn)
        for norm in ("norm1", "norm2"):
            out[f"{block}.{norm}.scale"] = (dim,)
            out[f"{block}.{norm}.bias"] = (dim,)
        for name, shape in dense.items():
            out[f"{name}.filter"] = shape
            out[f"{name}.bias"] = shape[:1]
    return out


def make(name: str, shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    layer, part = name.rsplit(".", 1)
    norm = layer.rsplit(".", 1)[-1].startswith("norm")
    if part == "filter":
        values = rng.standard_normal(shape) / np.sqrt(shape[1])
    elif part == "scale":
        values = rng.uniform(0.5, 1.5, shape)
    else:  # bias
        values = rng.standard_normal(shape) * (0.1 if norm else 0.02)
    return values.astype(np.float32)


def weights(seed: int = SEED, dim: int = DIM, ffn: int = FFN) -> dict[str, np.ndarray]:
    return {name: make(name, shape, seed) for name, shape in shapes(dim, ffn).items()}


def save(params: dict[str, np.ndarray], folder: Path = HERE) -> None:
    from skriptnd.model import save_weights

    for graph in [GRAPH]:
        save_weights(folder, graph, params, module=MODULE)


def main() -> None:
    from skriptnd.model import weights_main

    weights_main(__doc__, weights, [GRAPH], HERE, SEED, MODULE)


if __name__ == "__main__":
    main()
