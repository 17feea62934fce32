"""Post-training int8 quantization of the digits CNN (models/digits): writes main.sknd and the weights.

    python models/digits_int8/calibrate.py

Deterministic: no training and no randomness. The float weights are models/digits' trained ones,
copied unchanged (as main.DigitsInt8.<variable>.dat); the quantization lives in main.sknd's
@quantize block, as quant.zero_point_linear_quantize parameters computed here from the float model's
values on the digits *training* split (the 1437 images of models/digits/train.py's split):

- ``image``: the input range [min, max] of the training images (0 and 1) over the 256 int8 levels:
  ``scale = (max - min) / 255``, ``zero_point = -128 - round(min / scale)``;
- ``conv1``, ``conv2`` (the convolution outputs): a relu follows each, so only [0, max] matters (the
  negative part would be clipped to 0 anyway): ``scale = max / 255``, ``zero_point = -128``; relu,
  max pooling and flattening keep that quantization (they are exact on the int8 grid);
- ``logits``: its full training range, asymmetric like the input;
- the filters: symmetric per output channel (``channel_axis = 0``): ``scale[c] = max|w[c]| / 127``,
  ``zero_point = 0``, values in [-127, 127];
- the biases: 32 bits, per output channel, ``scale[c] = input scale * filter scale[c]``, zero point 0 —
  the scale of the convolution's int32 accumulator, so an integer implementation adds them to the
  accumulator unchanged.

A quantized tensor's value is ``quantize(x)``: the operator's @lower formula (round to the int8 grid,
clamp, map back to real), so ``sknd run`` runs the float model with these values (fake quantization)
and ``sknd run --via tosa`` / ``sknd export --tosa-mlir`` run the integer TOSA graph
(skriptnd.tosa.integer.lower) with the integers the same formula gives.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
FLOAT_MODEL = HERE.parent / "digits"
GRAPH = "DigitsInt8"


def _train_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("digits_train", FLOAT_MODEL / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fmt(values: Any) -> str:
    """A SkriptND real literal, or a list of them (repr: the exact double round-trips)."""
    arr = np.atleast_1d(np.asarray(values, np.float64))
    items = [repr(float(v)) for v in arr]
    if np.ndim(values) == 0:
        return items[0]
    rows = [", ".join(items[i:i + 4]) for i in range(0, len(items), 4)]
    return "[" + ",\n                ".join(rows) + "]"


def activation(lo: float, hi: float) -> dict[str, Any]:
    """Asymmetric int8 over [lo, hi] (0 included, so real 0 is exact)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / 255.0
    zero_point = int(np.clip(-128 - round(lo / scale), -128, 127))
    return {"scale": scale, "zero_point": zero_point}


def calibrate(params: dict[str, np.ndarray], x_train: np.ndarray, train: ModuleType) -> dict[str, dict[str, Any]]:
    cache: dict[str, Any] = {}
    train.forward(params, x_train, cache)
    logits = cache["flat"] @ params["fc_filter"].T + params["fc_bias"]
    q: dict[str, dict[str, Any]] = {
        "image": activation(x_train.min(), x_train.max()),
        "conv1": activation(0.0, cache["c1"].max()),
        "conv2": activation(0.0, cache["c2"].max()),
        "logits": activation(logits.min(), logits.max()),
    }
    inputs = {"conv1": "image", "conv2": "conv1", "fc": "conv2"}  # whose scale each layer's input has
    for layer, source in inputs.items():
        w = params[f"{layer}_filter"].astype(np.float64)
        wmax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        wscale = np.where(wmax > 0, wmax / 127.0, 1.0)
        q[f"{layer}_filter"] = {"scale": wscale, "zero_point": 0, "symmetric": True, "channel_axis": 0}
        q[f"{layer}_bias"] = {"scale": q[source]["scale"] * wscale, "zero_point": 0, "bits": 32,
                              "channel_axis": 0}
    return q


def quantize_block(q: dict[str, dict[str, Any]]) -> str:
    order = ["image", "conv1_filter", "conv1_bias", "conv1", "conv2_filter", "conv2_bias", "conv2",
             "fc_filter", "fc_bias", "logits"]
    lines = []
    for name in order:
        p = q[name]
        attrs = [f"zero_point={p['zero_point']}", f"bits={p.get('bits', 8)}"]
        if p.get("symmetric"):
            attrs.append("symmetric=true")
        if "channel_axis" in p:
            attrs.append(f"channel_axis={p['channel_axis']}")
        if np.ndim(p["scale"]) == 0:
            lines.append(f"        {name}: quant.zero_point_linear_quantize{{{', '.join(attrs)}, "
                         f"scale={_fmt(p['scale'])}}};")
        else:
            lines.append(f"        {name}: quant.zero_point_linear_quantize{{{', '.join(attrs)},\n"
                         f"            scale={_fmt(p['scale'])}}};")
    return "\n".join(lines)


TEMPLATE = """\
# The digits CNN (models/digits) quantized to int8: the same graph and float weights, plus a @quantize
# block (spec §2.14) written by calibrate.py (see README.md). Weights: main.{graph}.<variable>.dat.
import nn;
import layout;
import quant;

graph {graph} {{
    @attrib {{
        batch: int = 1;
    }}
    @input {{
        image: real[batch,1,8,8];
    }}
    @output {{
        probabilities: real[batch,10];
    }}
    @variable {{
        conv1_filter: real[8,1,3,3];
        conv1_bias: real[8];
        conv2_filter: real[16,8,3,3];
        conv2_bias: real[16];
        fc_filter: real[10,64];
        fc_bias: real[10];
    }}
    @compose {{
        conv1 = nn.conv{{padding=[1,1,1,1]}}(image, conv1_filter, conv1_bias);      # [batch,8,8,8]
        relu1 = nn.relu(conv1);
        pool1 = nn.max_pool{{size=[2,2], stride=[2,2]}}(relu1);                     # [batch,8,4,4]
        conv2 = nn.conv{{padding=[1,1,1,1]}}(pool1, conv2_filter, conv2_bias);      # [batch,16,4,4]
        relu2 = nn.relu(conv2);
        pool2 = nn.max_pool{{size=[2,2], stride=[2,2]}}(relu2);                     # [batch,16,2,2]
        flat = layout.flatten{{axis=1}}(pool2);                                     # [batch,64]
        logits = nn.linear(flat, fc_filter, fc_bias);                             # [batch,10]
        probabilities = nn.softmax(logits);
    }}
    @quantize {{
{block}
    }}
}}
"""


def main() -> None:
    train = _train_module()
    params = train.load_weights(FLOAT_MODEL)
    x_train, _, _, _ = train.load_split()
    q = calibrate(params, x_train, train)
    (HERE / "main.sknd").write_text(TEMPLATE.format(graph=GRAPH, block=quantize_block(q)))
    for name in train.SHAPES:
        shutil.copyfile(train.weight_file(FLOAT_MODEL, name), HERE / f"main.{GRAPH}.{name}.dat")
    ranges = {name: {"scale": np.atleast_1d(p["scale"]).tolist(), "zero_point": p["zero_point"]}
              for name, p in q.items()}
    print(json.dumps({k: v for k, v in ranges.items() if "filter" not in k and "bias" not in k}, indent=1))
    print(f"wrote {HERE / 'main.sknd'} and the weights main.{GRAPH}.<variable>.dat")


if __name__ == "__main__":
    main()
