"""Build the real-model zoo: torchvision and Hugging Face architectures exported to ONNX from PyTorch.

    python benchmarks/zoo/build.py [--out DIR] [--only NAME ...] [--variants classic,dynamo] [--force]
    python benchmarks/zoo/build.py --ci        # the five CI-sized blocks into tests/data/zoo/
    python benchmarks/zoo/build.py --list
    python benchmarks/zoo/build.py --dynamic [--only NAME ...]   # dynamic batch (and sequence) exports
    python benchmarks/zoo/build.py --ci --dynamic                 # CI_DYNAMIC's blocks into tests/data/zoo/

Needs torch, torchvision and transformers (the ``zoo`` extra); skriptnd itself never imports them.
Nothing is downloaded: every model is built from its architecture or a small config with seeded random
weights (torchvision ``weights=None``; transformers ``XxxConfig(...)``: 2 layers, hidden 128, sequence
16). Normalization statistics and scales that a fresh model initializes to constants (batch-norm
running mean 0 / variance 1, LayerNorm weight 1 / bias 0, ConvNeXt's layer scale 1e-6) are randomized
too, so that a backend that drops or mis-folds them gives visibly different numbers instead of an
identity that hides the bug.

For each model NAME the cache folder (default ``~/.cache/skriptnd/zoo``) receives

* ``NAME.onnx``: the classic TorchScript exporter (``torch.onnx.export(dynamo=False)``, opset 17);
* ``NAME_dynamo.onnx``: the dynamo exporter (opset 18) where it works, a second variant;
* ``NAME.inputs.npz`` (and ``NAME_dynamo.inputs.npz``): the seeded inputs, by ONNX input name, with
  their real dtypes (int64 token ids, int64 attention masks);
* ``NAME.torch_outputs.npz``: PyTorch's outputs on those inputs, by ONNX output name.

With ``--dynamic`` the same models are exported with symbolic dimensions (issue 25): ``NAME_dyn.onnx``
(classic exporter, ``dynamic_axes``) and ``NAME_dynamo_dyn.onnx`` (dynamo exporter, ``dynamic_shapes`` with
``torch.export.Dim``): images get a dynamic batch (``batch``), token inputs a dynamic batch and sequence
(``batch``, ``seq``). They are traced at batch 2 (the dynamo exporter specializes a dimension traced at 1).

Each file is written to a temporary name and renamed, so ``run.py`` never sees a half-written model.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CI_DIR = ROOT / "tests" / "data" / "zoo"
DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skriptnd" / "zoo"


def _import_torch():  # noqa: ANN202  (torch types are optional)
    """torch, torchvision and transformers; torchvision's meta registrations are skipped when its C
    extension does not load against this torch (a CPU wheel of another build): the models do not
    need its detection operators."""
    import torch

    try:
        import torchvision  # noqa: F401
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision  # noqa: F401
    return torch


torch = None  # set by main(): the builders below use the module global


@dataclass
class Spec:
    """One zoo entry: ``make()`` returns the eval-mode module, its inputs (name -> tensor) and the
    names of its outputs."""

    name: str
    family: str
    make: Callable[[], tuple[object, dict[str, object], list[str]]]
    ci: bool = False


# ----------------------------------------------------------------------------- randomization


def _randomize_constants(model) -> None:  # noqa: ANN001
    """Seeded random values for parameters and normalization buffers that are initialized to one
    constant (see the module docstring)."""
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        named = list(model.named_parameters()) + [
            (n, b) for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var"))]
        for name, p in named:
            if not p.is_floating_point() or p.numel() < 2:
                continue
            flat = p.reshape(-1)
            if not bool(torch.all(flat == flat[0])):
                continue
            c = float(flat[0])
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("running_var"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif c == 0.0:
                p.copy_(0.1 * noise)
            elif abs(c) < 1e-3:  # layer scale
                p.copy_(0.1 + 0.05 * noise)
            else:
                p.copy_(c * (1.0 + 0.1 * noise))


def _image(batch: int = 1, size: int = 224, seed: int = 0):  # noqa: ANN202
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _tokens(vocab: int, seq: int = 16, seed: int = 0):  # noqa: ANN202
    return torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(seed), dtype=torch.int64)


def _padding_mask(seq: int = 16, pad: int = 4):  # noqa: ANN202
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - pad:] = 0
    return mask


def _hf_wrapper(model, keys: list[str], names: list[str]):  # noqa: ANN001, ANN202
    """The Hugging Face model called with keyword arguments ``names`` (the ONNX inputs, in order),
    returning plain tensors (the ONNX outputs) instead of a ModelOutput."""

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):  # noqa: ANN002, ANN202
            out = self.model(**dict(zip(names, args, strict=True)))
            return tuple(out[k] for k in keys)

    return Wrapped().eval()


# ----------------------------------------------------------------------------- torchvision


def _tv(builder: str, size: int = 224, **kwargs) -> Callable:  # noqa: ANN003
    def make():  # noqa: ANN202
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, builder)(weights=None, **kwargs).eval()
        _randomize_constants(model)
        return model, {"image": _image(size=size)}, ["logits"]

    return make


def _tv_segmentation(builder: str, size: int = 224) -> Callable:
    def make():  # noqa: ANN202
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models.segmentation, builder)(
            weights=None, weights_backbone=None, aux_loss=False, num_classes=21).eval()
        _randomize_constants(model)

        class Out(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, x):  # noqa: ANN001, ANN202
                return self.model(x)["out"]

        return Out().eval(), {"image": _image(size=size)}, ["masks"]

    return make


# ----------------------------------------------------------------------------- transformers

SEQ = 16
VOCAB = 1000


def _bert(layers: int = 2, hidden: int = 128, heads: int = 4, vocab: int = VOCAB) -> Callable:
    def make():  # noqa: ANN202
        from transformers import BertConfig, BertModel

        torch.manual_seed(0)
        config = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=64)
        model = BertModel(config, add_pooling_layer=False).eval()
        _randomize_constants(model)
        inputs = {"input_ids": _tokens(vocab), "attention_mask": _padding_mask(),
                  "token_type_ids": torch.zeros(1, SEQ, dtype=torch.int64)}
        return _hf_wrapper(model, ["last_hidden_state"], list(inputs)), inputs, ["last_hidden_state"]

    return make


def _distilbert() -> tuple:
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=VOCAB, dim=128, n_layers=2, n_heads=4, hidden_dim=256,
                              max_position_embeddings=64)
    model = DistilBertModel(config).eval()
    _randomize_constants(model)
    inputs = {"input_ids": _tokens(VOCAB), "attention_mask": _padding_mask()}
    return _hf_wrapper(model, ["last_hidden_state"], list(inputs)), inputs, ["last_hidden_state"]


def _gpt2(layers: int = 2, hidden: int = 128, heads: int = 4, vocab: int = VOCAB) -> Callable:
    def make():  # noqa: ANN202
        from transformers import GPT2Config, GPT2Model

        torch.manual_seed(0)
        config = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads, n_positions=64,
                            use_cache=False)
        model = GPT2Model(config).eval()
        _randomize_constants(model)
        inputs = {"input_ids": _tokens(vocab), "attention_mask": _padding_mask()}
        return _hf_wrapper(model, ["last_hidden_state"], list(inputs)), inputs, ["last_hidden_state"]

    return make


def _llama() -> tuple:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         use_cache=False)
    model = LlamaModel(config).eval()
    _randomize_constants(model)
    inputs = {"input_ids": _tokens(VOCAB), "attention_mask": _padding_mask()}
    return _hf_wrapper(model, ["last_hidden_state"], list(inputs)), inputs, ["last_hidden_state"]


def _t5_encoder() -> tuple:
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    config = T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4,
                      use_cache=False)
    model = T5EncoderModel(config).eval()
    _randomize_constants(model)
    inputs = {"input_ids": _tokens(VOCAB), "attention_mask": _padding_mask()}
    return _hf_wrapper(model, ["last_hidden_state"], list(inputs)), inputs, ["last_hidden_state"]


def _hf_vit() -> tuple:
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                       image_size=64, patch_size=16)
    model = ViTModel(config, add_pooling_layer=False).eval()
    _randomize_constants(model)
    return (_hf_wrapper(model, ["last_hidden_state"], ["pixel_values"]), {"pixel_values": _image(size=64)},
            ["last_hidden_state"])


def _clip_text() -> tuple:
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    config = CLIPTextConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                            num_attention_heads=4, max_position_embeddings=SEQ, eos_token_id=2)
    model = CLIPTextModel(config).eval()
    _randomize_constants(model)
    ids = _tokens(VOCAB)
    ids[0, -1] = 2  # an end-of-text token: the pooled output is taken there
    return (_hf_wrapper(model, ["last_hidden_state", "pooler_output"], ["input_ids"]), {"input_ids": ids},
            ["last_hidden_state", "pooler_output"])


def _whisper_encoder() -> tuple:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    config = WhisperConfig(d_model=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=256,
                           num_mel_bins=80, max_source_positions=50)
    model = WhisperEncoder(config).eval()
    _randomize_constants(model)
    features = torch.randn(1, 80, 100, generator=torch.Generator().manual_seed(0))
    return (_hf_wrapper(model, ["last_hidden_state"], ["input_features"]), {"input_features": features},
            ["last_hidden_state"])


# ----------------------------------------------------------------------------- CI-sized blocks


def _ci_mobilenet_v3() -> tuple:
    """(a) a CNN with squeeze-excitation and hardswish: MobileNetV3-Small at width 0.25, 10 classes."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10).eval()
    _randomize_constants(model)
    return model, {"image": _image(size=64)}, ["logits"]


def _ci_convnext_block() -> tuple:
    """(b) a ConvNeXt stage: the patchify stem, LayerNorm2d and two CNBlocks (depthwise 7x7,
    channels-last LayerNorm -> Linear -> GELU -> Linear, layer scale)."""
    from torchvision.models.convnext import CNBlock, LayerNorm2d

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, kernel_size=4, stride=4), LayerNorm2d(32),
        CNBlock(32, layer_scale=1e-6, stochastic_depth_prob=0.0),
        CNBlock(32, layer_scale=1e-6, stochastic_depth_prob=0.0)).eval()
    _randomize_constants(model)
    return model, {"image": _image(size=32)}, ["features"]


def _ci_vit_block() -> tuple:
    """(c) a ViT: patch embedding, class token, one encoder block (MultiheadAttention), head."""
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=1, num_heads=4, hidden_dim=64,
                              mlp_dim=128, num_classes=10).eval()
    _randomize_constants(model)
    return model, {"image": _image(size=32)}, ["logits"]


def _ci_resnet_block() -> tuple:
    """(f) a ResNet stem and stage: 7x7 stride-2 convolution, batch norm, ReLU, 3x3 MaxPool, one
    BasicBlock, global average pool, flatten, Linear (the MaxPool and flatten that a dynamic batch must
    pass through, issue 25)."""
    from torchvision.models.resnet import BasicBlock

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1), BasicBlock(16, 16), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(1),
        torch.nn.Linear(16, 10)).eval()
    _randomize_constants(model)
    return model, {"image": _image(size=32)}, ["logits"]


#: The CI blocks also committed as dynamic exports (``--ci --dynamic``): a CNN with a MaxPool, a ViT, BERT, GPT-2.
CI_DYNAMIC = ["ci_resnet_block", "ci_vit_block", "ci_bert_block", "ci_gpt2_block"]

SPECS: list[Spec] = [
    # CI-sized blocks (also part of the full zoo)
    Spec("ci_mobilenet_v3_se", "ci", _ci_mobilenet_v3, ci=True),
    Spec("ci_convnext_block", "ci", _ci_convnext_block, ci=True),
    Spec("ci_vit_block", "ci", _ci_vit_block, ci=True),
    Spec("ci_bert_block", "ci", _bert(layers=1, hidden=64, heads=4, vocab=100), ci=True),
    Spec("ci_gpt2_block", "ci", _gpt2(layers=1, hidden=64, heads=4, vocab=100), ci=True),
    Spec("ci_resnet_block", "ci", _ci_resnet_block),
    # torchvision classification (224 x 224, batch 1)
    Spec("resnet18", "torchvision", _tv("resnet18")),
    Spec("mobilenet_v2", "torchvision", _tv("mobilenet_v2")),
    Spec("mobilenet_v3_large", "torchvision", _tv("mobilenet_v3_large")),
    Spec("efficientnet_b0", "torchvision", _tv("efficientnet_b0")),
    Spec("shufflenet_v2", "torchvision", _tv("shufflenet_v2_x1_0")),
    Spec("squeezenet", "torchvision", _tv("squeezenet1_1")),
    Spec("regnet_y_400mf", "torchvision", _tv("regnet_y_400mf")),
    Spec("densenet121", "torchvision", _tv("densenet121")),
    Spec("resnet50", "torchvision", _tv("resnet50")),
    Spec("resnext50_32x4d", "torchvision", _tv("resnext50_32x4d")),
    Spec("convnext_tiny", "torchvision", _tv("convnext_tiny")),
    Spec("swin_t", "torchvision", _tv("swin_t")),
    Spec("vit_b_16", "torchvision", _tv("vit_b_16")),
    Spec("deeplabv3_mobilenet_v3_large", "torchvision", _tv_segmentation("deeplabv3_mobilenet_v3_large")),
    # Hugging Face transformers, small configs, sequence 16
    Spec("bert", "transformers", _bert()),
    Spec("distilbert", "transformers", _distilbert),
    Spec("gpt2", "transformers", _gpt2()),
    Spec("llama", "transformers", _llama),
    Spec("t5_encoder", "transformers", _t5_encoder),
    Spec("hf_vit", "transformers", _hf_vit),
    Spec("clip_text", "transformers", _clip_text),
    Spec("whisper_encoder", "transformers", _whisper_encoder),
]


# ----------------------------------------------------------------------------- export


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    _atomic(path, write)


def _numpy(value) -> np.ndarray:  # noqa: ANN001
    return value.detach().cpu().numpy()


def _dynamic_axes(inputs: dict[str, object]) -> dict[str, dict[int, str]]:
    """The symbolic dimensions of each input: the batch, and the sequence of a token input (2-D integer)."""
    axes: dict[str, dict[int, str]] = {}
    for name, value in inputs.items():
        axes[name] = {0: "batch", 1: "seq"} if value.dim() == 2 and not value.is_floating_point() else {0: "batch"}
    return axes


def _batch2(inputs: dict[str, object]) -> dict[str, object]:
    """The inputs at batch 2 (the second row a different, seeded sample) for tracing a dynamic batch."""
    g = torch.Generator().manual_seed(7)
    out = {}
    for name, value in inputs.items():
        if value.is_floating_point():
            other = torch.randn(value.shape, generator=g)
        else:
            other = value[torch.randperm(value.shape[0], generator=g)].clone()
            if value.dim() == 2:
                other = value[:, torch.randperm(value.shape[1], generator=g)] if name == "input_ids" else value
        out[name] = torch.cat([value, other], 0)
    return out


def _stem(name: str, variant: str, dynamic: bool) -> str:
    return name + ("" if variant == "classic" else "_" + variant) + ("_dyn" if dynamic else "")


def export(spec: Spec, out: Path, variants: list[str], force: bool, dynamic: bool = False) -> dict[str, str]:
    """Export one model; returns variant -> "ok" / "cached" / the error's first line."""
    status: dict[str, str] = {}
    todo = [v for v in variants if force or not (out / f"{_stem(spec.name, v, dynamic)}.onnx").exists()]
    for v in variants:
        if v not in todo:
            status[v] = "cached"
    if not todo:
        return status
    model, inputs, output_names = spec.make()
    if dynamic:
        inputs = _batch2(inputs)
    args = tuple(inputs.values())
    with torch.no_grad():
        outputs = model(*args)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    feeds = {k: _numpy(v) for k, v in inputs.items()}
    expected = {k: _numpy(v) for k, v in zip(output_names, outputs, strict=True)}
    for variant in todo:
        stem = _stem(spec.name, variant, dynamic)
        start = time.perf_counter()
        try:
            def write(tmp: Path, variant: str = variant) -> None:
                axes = _dynamic_axes(inputs) if dynamic else None
                if variant == "classic":
                    torch.onnx.export(model, args, str(tmp), dynamo=False, opset_version=17,
                                      input_names=list(inputs), output_names=output_names,
                                      do_constant_folding=True, dynamic_axes=axes)
                else:
                    shapes = None
                    if axes:
                        dims = {"batch": torch.export.Dim("batch", min=1, max=64),
                                "seq": torch.export.Dim("seq", min=2, max=64)}
                        shapes = tuple({k: dims[v] for k, v in axes[n].items()} for n in inputs)
                        if any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(model.forward).parameters.values()):
                            shapes = (shapes,)  # forward(*args) (the Hugging Face wrapper): one entry for args
                    torch.onnx.export(model, args, str(tmp), dynamo=True, opset_version=18,
                                      input_names=list(inputs), output_names=output_names,
                                      external_data=False, verbose=False, dynamic_shapes=shapes)

            tmp = out / f".{stem}.onnx.tmp{os.getpid()}"
            try:
                write(tmp)
                _save_npz(out / f"{stem}.inputs.npz", feeds)
                _save_npz(out / f"{stem}.torch_outputs.npz", expected)
                os.replace(tmp, out / f"{stem}.onnx")
            finally:
                if tmp.exists():
                    tmp.unlink()
            status[variant] = f"ok ({time.perf_counter() - start:.1f} s)"
        except Exception as e:  # noqa: BLE001  (an exporter failure is a result of the zoo, not a crash)
            lines = [line for line in str(e).splitlines() if line.strip()]
            status[variant] = f"error: {type(e).__name__}: {lines[0][:300] if lines else ''}"
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help=f"cache folder (default {DEFAULT_OUT})")
    parser.add_argument("--only", nargs="*", default=None, help="model names (default: all)")
    parser.add_argument("--variants", default="classic,dynamo", help="exporters: classic, dynamo")
    parser.add_argument("--ci", action="store_true",
                        help=f"build only the CI-sized blocks (classic exporter) into {CI_DIR.relative_to(ROOT)}")
    parser.add_argument("--force", action="store_true", help="re-export models already in the cache")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--dynamic", action="store_true",
                        help="export with a dynamic batch (and sequence for token inputs): NAME_dyn.onnx")
    args = parser.parse_args(argv)
    if args.list:
        for s in SPECS:
            print(f"{s.name:32s} {s.family}{' (ci)' if s.ci else ''}")
        return 0
    global torch
    torch = _import_torch()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    specs = [s for s in SPECS if s.ci] if args.ci else SPECS
    if args.ci and args.dynamic:
        specs = [s for s in SPECS if s.name in CI_DYNAMIC]
    if args.only:
        unknown = set(args.only) - {s.name for s in SPECS}
        if unknown:
            parser.error(f"unknown models: {', '.join(sorted(unknown))}")
        specs = [s for s in SPECS if s.name in args.only]
    variants = ["classic"] if args.ci else [v.strip() for v in args.variants.split(",") if v.strip()]
    out = args.out or (CI_DIR if args.ci else DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    # classic exports of every model first (the fast ones), then the dynamo variants
    failed = 0
    for variant in variants:
        for spec in specs:
            try:
                status = export(spec, out, [variant], args.force or args.ci, args.dynamic)
            except Exception as e:  # noqa: BLE001  (a model that does not build is reported, the rest go on)
                status = {variant: f"error building: {type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            failed += any(s.startswith("error") for s in status.values())
            print(f"{spec.name:32s} {variant:8s} {status[variant]}", flush=True)
    print(f"wrote {out}")
    return 1 if failed and args.ci else 0


if __name__ == "__main__":
    sys.exit(main())
