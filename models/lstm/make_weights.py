"""Deterministic random weights for the two-layer LSTM (models/lstm/main.sknd).

    python models/lstm/make_weights.py                 # into models/lstm/ (the committed files)
    python models/lstm/make_weights.py --output DIR    # into DIR

Every variable is drawn from a seeded numpy generator (`default_rng([SEED, crc32(name)])`, so a
variable's values depend only on its name and the seed): uniform in [-k, k] with
k = 1 / sqrt(hidden), PyTorch's LSTM initialisation. Gates are packed [i, f, g, o] along the first
axis, as nn.lstm_step splits them. The same values are written for both graphs, LSTM and LSTMSteps
(`main.<graph>.<variable>.dat`), for the default attributes input = 16, hidden = 32: 2 x 6 float32
files, about 120 KB.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPHS = "main", ("LSTM", "LSTMSteps")
SEED = 7
INPUT, HIDDEN = 16, 32


def shapes(input: int = INPUT, hidden: int = HIDDEN) -> dict[str, tuple[int, ...]]:
    """Every variable of the graphs (name -> shape)."""
    return {
        "layer1_W": (4 * hidden, input), "layer1_R": (4 * hidden, hidden), "layer1_B": (4 * hidden,),
        "layer2_W": (4 * hidden, hidden), "layer2_R": (4 * hidden, hidden), "layer2_B": (4 * hidden,),
    }


def weights(seed: int = SEED, input: int = INPUT, hidden: int = HIDDEN) -> dict[str, np.ndarray]:
    k = 1.0 / np.sqrt(hidden)
    return {name: np.random.default_rng([seed, zlib.crc32(name.encode())]).uniform(-k, k, shape).astype(np.float32)
            for name, shape in shapes(input, hidden).items()}


def save(params: dict[str, np.ndarray], folder: Path = HERE) -> None:
    from skriptnd.model import save_weights

    for graph in GRAPHS:
        save_weights(folder, graph, params, module=MODULE)


def main() -> None:
    from skriptnd.model import weights_main

    weights_main(__doc__, weights, GRAPHS, HERE, SEED, MODULE)


if __name__ == "__main__":
    main()
