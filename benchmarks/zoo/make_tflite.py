"""Make float TFLite (LiteRT) models from PyTorch with litert-torch, for the TFLite importer's tests.

    python benchmarks/zoo/make_tflite.py --ci          # the small CI models into tests/data/tflite/
    python benchmarks/zoo/make_tflite.py [--out DIR] [--only NAME ...]   # the big ones (default cache folder)
    python benchmarks/zoo/make_tflite.py --int8 [--ci] [--only NAME ...]   # also NAME_int8.tflite (static int8)
    python benchmarks/zoo/make_tflite.py [--ci] --dynamic-range   # only the *_dr8 variants of the models made

Run it in an environment with torch, torchvision, litert-torch and ai-edge-quantizer (not skriptnd's: CI never runs it, it reads
the files this writes). Nothing is downloaded: every model has seeded random weights, and the batch-norm
statistics a fresh model initializes to 0 / 1 are randomized too, so that a mis-folded normalization shows.
Each NAME.tflite is written with NAME.inputs.npz (the seeded inputs, by position) beside it; the expected
outputs are not stored: the tests run ai-edge-litert's interpreter on the file (the oracle).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skriptnd" / "zoo" / "tflite"


def _randomize(model):  # noqa: ANN001, ANN202 - torch types, torch is not ours
    import torch

    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        if isinstance(m, torch.nn.LayerNorm):
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    return model.eval()


def small_cnn():  # noqa: ANN201
    """Most float operators a PyTorch CNN brings: conv (plain, depthwise, strided), fused ReLU/ReLU6, pools,
    hard-swish, sigmoid, tanh, resizes, padding (constant, reflect), concatenation, mean, linear, softmax."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.c3 = nn.Conv2d(16, 16, 1)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):  # noqa: ANN001, ANN202
            y = F.relu(self.c1(x))
            y = F.relu6(self.dw(y))
            y = F.max_pool2d(y, 2)
            y = F.hardswish(self.c2(y))
            z = F.pad(y, (1, 1, 1, 1), mode="reflect")
            z = F.avg_pool2d(z, 3, stride=1)
            y = torch.cat([torch.sigmoid(self.c3(y)), torch.tanh(z)], dim=1)
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = F.interpolate(y, scale_factor=0.5, mode="nearest")
            y = F.pad(y, (0, 1, 0, 1))
            y = y.mean(dim=(2, 3))
            return F.softmax(self.fc(y), dim=-1)

    torch.manual_seed(0)
    return SmallCNN().eval(), (torch.randn(1, 3, 32, 32),)


def tiny_transformer():  # noqa: ANN201
    """One pre-norm transformer encoder layer with reduced widths (d_model 32, 4 heads, GELU feed-forward)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
    return _randomize(layer), (torch.randn(1, 8, 32),)


def ops_mix():  # noqa: ANN201
    """PyTorch operations that LiteRT lowers to less common builtins: count_include_pad and ceil-mode pools,
    adaptive pooling, an embedding lookup with LayerNorm, cumsum, align_corners resize, SiLU/ELU/leaky ReLU,
    clamp, max/argmax over channels, where; and an input given out unchanged."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class OpsMix(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.ln = nn.LayerNorm(8)

        def forward(self, x, ids):  # noqa: ANN001, ANN202
            e = self.ln(self.emb(ids))
            return (F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True),
                    F.max_pool2d(x, 3, stride=2, ceil_mode=True), F.adaptive_avg_pool2d(x, 1), x, e,
                    torch.cumsum(e, 1), F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
                    F.silu(x) + F.elu(x) + F.leaky_relu(x, 0.1), x.clamp(-0.5, 0.5), x.max(dim=1).values,
                    x.argmax(dim=1), torch.where(x > 0, x, x * 2))

    torch.manual_seed(0)
    return _randomize(OpsMix()), (torch.randn(1, 4, 8, 8), torch.tensor([[1, 3, 5]], dtype=torch.int32))


def pools():  # noqa: ANN201
    """Pools LiteRT cannot write as AVERAGE/MAX_POOL_2D: STABLEHLO_REDUCE_WINDOW with MAXIMUM and ADD bodies
    (dilated max pool, divisor override), a STABLEHLO_COMPOSITE whose decomposition subgraph is the pool (1-D
    average pool without the padding counted), ceil mode, an L2 pool."""
    import torch
    from torch.nn import functional as F

    class Pools(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN202
            return (F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), F.max_pool2d(x, 3, stride=1, dilation=2),
                    F.avg_pool2d(x, 2, divisor_override=3), F.lp_pool2d(x, 2, 2),
                    F.avg_pool1d(x[:, :, 0], 3, stride=2, padding=1, count_include_pad=False),
                    F.max_pool2d(x, 3, stride=2, padding=1))

    torch.manual_seed(0)
    return Pools().eval(), (torch.randn(1, 4, 9, 9),)


def lstm_cell():  # noqa: ANN201
    """One LSTM cell step (input 16, hidden 32) with its state as inputs: what LiteRT makes of nn.LSTMCell."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    cell = nn.LSTMCell(16, 32).eval()
    return cell, (torch.randn(1, 16), (torch.randn(1, 32), torch.randn(1, 32)))


def gru_cell():  # noqa: ANN201
    """One GRU cell step (input 16, hidden 32)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.GRUCell(16, 32).eval(), (torch.randn(1, 16), torch.randn(1, 32))


def lstm_sequence():  # noqa: ANN201
    """A one-layer LSTM over 8 steps (batch first, input 16, hidden 32)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.LSTM(16, 32, batch_first=True).eval(), (torch.randn(1, 8, 16),)


def transformer_encoder():  # noqa: ANN201
    """Two post-norm encoder layers at d_model 128 (4 heads, feed-forward 512, ReLU) over 16 tokens."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    return _randomize(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)), (torch.randn(1, 16, 128),)


def dynamic_cnn():  # noqa: ANN201
    """A CNN exported with a dynamic batch (torch.export.Dim): LiteRT writes -1 in the input's shape_signature
    and runs it at any batch after resize_tensor_input; the third item is make_tflite's dynamic_shapes."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class DynamicCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):  # noqa: ANN001, ANN202
            y = F.max_pool2d(F.relu(self.c1(x)), 2)
            y = F.relu6(self.dw(y)).mean(dim=(2, 3))
            return torch.softmax(self.fc(y), dim=-1)

    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=64)
    return DynamicCNN().eval(), (torch.randn(2, 3, 16, 16),), ({0: batch},)


def _vision(name: str) -> Callable:
    def make():  # noqa: ANN202
        import types

        import torch

        # torchvision's compiled ops may not match the installed torch (its import then fails registering
        # the fake kernel of torchvision::nms); the classification models need none of them
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None)
        return _randomize(model), (torch.randn(1, 3, 224, 224),)
    return make


CI = {"small_cnn": small_cnn, "tiny_transformer": tiny_transformer, "lstm_cell": lstm_cell, "gru_cell": gru_cell,
      "ops_mix": ops_mix, "pools": pools, "dynamic_cnn": dynamic_cnn}
BIG = {**{n: _vision(n) for n in ("mobilenet_v2", "resnet18", "mobilenet_v3_small", "efficientnet_b0")},
       "lstm_sequence": lstm_sequence, "transformer_encoder": transformer_encoder}


def build(name: str, make: Callable, out: Path) -> None:
    import litert_torch
    import torch

    model, args, *dynamic = make()
    with torch.no_grad():
        edge = litert_torch.convert(model, args, **({"dynamic_shapes": dynamic[0]} if dynamic else {}))
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{name}.tflite.tmp"
    edge.export(str(tmp))
    os.replace(tmp, out / f"{name}.tflite")
    flat = [t for a in args for t in (a if isinstance(a, tuple) else (a,))]
    np.savez(out / f"{name}.inputs.npz", *[t.numpy() for t in flat])
    print(f"{name}: {(out / f'{name}.tflite').stat().st_size / 1e6:.2f} MB", flush=True)


#: models also written weight-only quantized (int8 weights behind DEQUANTIZE, ai-edge-quantizer's recipe), as
#: NAME_wo8.tflite; the quantizer keeps large models' weights after the FlatBuffer (Buffer.offset/size)
WEIGHT_ONLY = {"small_cnn", "tiny_transformer", "mobilenet_v2"}


def weight_only(name: str, out: Path) -> None:
    _write_quantized(name, out, "wo8", "weight_only_wi8_afp32")


def _write_quantized(name: str, out: Path, suffix: str, recipe_name: str, calibrated: bool = False) -> None:
    """NAME_SUFFIX.tflite from NAME.tflite with one of ai-edge-quantizer's recipes (``calibrated``: on this
    script's calibration samples), written atomically, with a copy of the float model's inputs."""
    import shutil

    from ai_edge_quantizer import quantizer, recipe

    q = quantizer.Quantizer(str(out / f"{name}.tflite"))
    q.load_quantization_recipe(getattr(recipe, recipe_name)())
    model = (q.quantize(q.calibrate({"serving_default": calibration(name, out)})) if calibrated else q.quantize())
    tmp = out / f".{name}_{suffix}.tflite.tmp"
    model.export_model(str(tmp), overwrite=True)
    os.replace(tmp, out / f"{name}_{suffix}.tflite")
    shutil.copyfile(out / f"{name}.inputs.npz", out / f"{name}_{suffix}.inputs.npz")
    print(f"{name}_{suffix}: {(out / f'{name}_{suffix}.tflite').stat().st_size / 1e6:.2f} MB", flush=True)


#: models also written static int8 (ai-edge-quantizer's static_wi8_ai8 recipe: int8 activations, per-channel int8
#: weights, int32 biases, QUANTIZE / DEQUANTIZE at the float boundaries) as NAME_int8.tflite with --int8
INT8 = {"small_cnn", "tiny_transformer", "lstm_cell", "gru_cell", "mobilenet_v2", "resnet18", "mobilenet_v3_small",
        "efficientnet_b0", "transformer_encoder"}


def calibration(name: str, out: Path, count: int = 16) -> list[dict[str, np.ndarray]]:
    """Seeded calibration samples shaped as the model's saved inputs (normal noise, as the float inputs),
    by the signature's input names (args_0, args_1, ...)."""
    from ai_edge_litert.interpreter import Interpreter

    saved = np.load(out / f"{name}.inputs.npz")
    # the signature's names in the saved order: args_0, args_1_0, args_1_1 for a cell's (x, (h, c)) inputs
    names = sorted(Interpreter(model_path=str(out / f"{name}.tflite")).get_signature_list()["serving_default"]["inputs"])
    assert len(names) == len(saved.files), (names, saved.files)
    rng = np.random.default_rng(7)
    return [{names[i]: rng.standard_normal(saved[f"arr_{i}"].shape).astype(saved[f"arr_{i}"].dtype)
             for i in range(len(saved.files))} for _ in range(count)]


#: models also written with int16 activations and int8 weights (static_wi8_ai16) as NAME_a16.tflite with --int8
INT16 = {"small_cnn"}


def static_int8(name: str, out: Path, suffix: str = "int8") -> None:
    _write_quantized(name, out, suffix, "static_wi8_ai8" if suffix == "int8" else "static_wi8_ai16", calibrated=True)


#: models also written dynamic-range quantized (int8 weights read by LiteRT's hybrid kernels, which quantize the
#: float input on the fly: ai-edge-quantizer's dynamic_wi8_afp32 recipe), as NAME_dr8.tflite
DYNAMIC_RANGE = {"small_cnn", "tiny_transformer", "dynamic_cnn", "mobilenet_v2", "resnet18", "lstm_sequence",
                 "transformer_encoder"}


def dynamic_range(name: str, out: Path) -> None:
    _write_quantized(name, out, "dr8", "dynamic_wi8_afp32")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="the small models into tests/data/tflite")
    parser.add_argument("--out", type=Path, default=CACHE)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--int8", action="store_true", help="also (only, with --only and existing float files) the "
                        "static int8 versions")
    parser.add_argument("--dynamic-range", action="store_true", help="only the dynamic-range variants, from the "
                        "float models already written")
    a = parser.parse_args(argv)
    models, out = (CI, ROOT / "tests" / "data" / "tflite") if a.ci else (BIG, a.out)
    for name, make in models.items():
        if a.only and name not in a.only:
            continue
        if a.dynamic_range:
            if name in DYNAMIC_RANGE:
                dynamic_range(name, out)
            continue
        if not (a.int8 and (out / f"{name}.tflite").exists()):
            build(name, make, out)
            if name in WEIGHT_ONLY:
                weight_only(name, out)
            if name in DYNAMIC_RANGE:
                dynamic_range(name, out)
        if a.int8 and name in INT8:
            static_int8(name, out)
        if a.int8 and name in INT16:
            static_int8(name, out, "a16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
