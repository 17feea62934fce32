"""Deterministic random weights for the YOLO-style detection head (models/yolo_head/main.sknd).

    python models/yolo_head/make_weights.py                 # into models/yolo_head/ (the committed files)
    python models/yolo_head/make_weights.py --output DIR    # into DIR

Every variable is drawn from a seeded numpy generator (`default_rng([SEED, crc32(name)])`, so a
variable's values depend only on its name and the seed), for the default attributes (32 channels,
3 anchors, 4 classes):

* `conv1_filter [32,32,3,3]`: He normal, standard deviation sqrt(2 / (32 * 9)); `conv1_bias`: normal, 0.1;
* `conv2_filter [27,32,1,1]`: normal, standard deviation 1 / sqrt(32); `conv2_bias`: normal, 0.5.

Random features then give box centres spread over the cells, sizes around the anchors (up to a few
cells, so that neighbouring boxes overlap and NMS has work to do) and scores spread over (0, 1).
Files: `main.YoloHead.<variable>.dat`, float32, about 41 KB.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPH = "main", "YoloHead"
SEED = 3
CHANNELS, ANCHORS, CLASSES = 32, 3, 4


def shapes(channels: int = CHANNELS, anchors: int = ANCHORS, classes: int = CLASSES) -> dict[str, tuple[int, ...]]:
    """Every variable of the graph (name -> shape)."""
    outputs = anchors * (5 + classes)
    return {"conv1_filter": (channels, channels, 3, 3), "conv1_bias": (channels,),
            "conv2_filter": (outputs, channels, 1, 1), "conv2_bias": (outputs,)}


def weights(seed: int = SEED, channels: int = CHANNELS, anchors: int = ANCHORS, classes: int = CLASSES
            ) -> dict[str, np.ndarray]:
    scales = {"conv1_filter": np.sqrt(2.0 / (channels * 9)), "conv1_bias": 0.1,
              "conv2_filter": 1.0 / np.sqrt(channels), "conv2_bias": 0.5}
    return {name: (np.random.default_rng([seed, zlib.crc32(name.encode())]).standard_normal(shape)
                   * scales[name]).astype(np.float32)
            for name, shape in shapes(channels, anchors, classes).items()}


def save(params: dict[str, np.ndarray], folder: Path = HERE) -> None:
    from skriptnd.model import save_weights

    for graph in [GRAPH]:
        save_weights(folder, graph, params, module=MODULE)


def main() -> None:
    from skriptnd.model import weights_main

    weights_main(__doc__, weights, [GRAPH], HERE, SEED, MODULE)


if __name__ == "__main__":
    main()
