"""Real-model blocks exported by PyTorch, imported and run through every backend (issue 30, item 7).

tests/data/zoo/ holds five small ONNX files written by ``python benchmarks/zoo/build.py --ci`` from
torchvision and Hugging Face code with seeded random weights (the classic exporter, opset 17), with
their inputs (``NAME.inputs.npz``) and PyTorch's outputs (``NAME.torch_outputs.npz``):

* ``ci_mobilenet_v3_se``: MobileNetV3-Small at width 0.25 (squeeze-excitation, hardswish, hardsigmoid);
* ``ci_convnext_block``: the ConvNeXt stem and two CNBlocks (depthwise 7x7, LayerNorm -> Linear, GELU);
* ``ci_vit_block``: a one-block torchvision ViT (patch embedding, class token, MultiheadAttention);
* ``ci_bert_block``: a one-layer BERT with int64 token ids and an int64 padding attention mask;
* ``ci_gpt2_block``: a one-layer GPT-2 (causal mask, int64 token ids and padding mask).

Each is imported with ``skriptnd.import_model`` and run by the numpy, iree and onnxruntime backends;
the oracle is onnxruntime on the ORIGINAL .onnx file. Pass: max |difference| <= 1e-3 x max |reference|,
and for iree every operation compiled (its plan: no part of the graph quietly left on numpy).
Cases that fail today are strict xfails naming the issue, so that a fix flips them (and must remove
the mark). Without onnxruntime or IREE the tests skip locally and fail in CI (``CI`` set).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from onnx_oracle import require_ort

import skriptnd
from skriptnd.backends import Options, prepare

ZOO = Path(__file__).resolve().parent / "data" / "zoo"
BLOCKS = ["ci_mobilenet_v3_se", "ci_convnext_block", "ci_vit_block", "ci_bert_block", "ci_gpt2_block"]
BACKENDS = ["numpy", "iree", "onnxruntime"]
TOLERANCE = 1e-3

#: (block, backend) -> why it fails today; strict: a case that starts passing fails until the mark goes.
XFAIL: dict[tuple[str, str], str] = {}


def _require_iree() -> None:
    import importlib.util

    missing = [m for m in ("iree.compiler", "iree.runtime")
               if importlib.util.find_spec("iree") is None or importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} not installed in CI; the dev extra installs them")
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert np.all(np.isfinite(actual))
    scale = max(float(np.max(np.abs(expected))), 1e-30)
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale


def _inputs(block: str) -> dict[str, np.ndarray]:
    with np.load(ZOO / f"{block}.inputs.npz") as data:
        return dict(data)


def _reference(block: str) -> dict[str, np.ndarray]:
    """onnxruntime on the original file (CPU, one thread), by ONNX output name."""
    ort = require_ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(ZOO / f"{block}.onnx"), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, _inputs(block)), strict=True))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, skriptnd.compose.ir.Graph]:
    """block -> its imported, composed graph (imported once per module)."""
    require_ort()
    graphs = {}
    for block in BLOCKS:
        folder = tmp_path_factory.mktemp(block)
        skriptnd.import_model(str(ZOO / f"{block}.onnx"), str(folder))
        graphs[block] = skriptnd.load(str(folder)).compose()
    return graphs


@pytest.fixture(scope="module")
def iree_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("iree-cache"))


def test_committed_blocks_are_small_and_complete() -> None:
    """Each block has its three files, each ONNX file well under 1 MB, all together under 3 MB."""
    total = 0
    for block in BLOCKS:
        for suffix in (".onnx", ".inputs.npz", ".torch_outputs.npz"):
            path = ZOO / f"{block}{suffix}"
            assert path.is_file(), path
            total += path.stat().st_size
        assert (ZOO / f"{block}.onnx").stat().st_size < 800_000
    assert total < 3_000_000


@pytest.mark.parametrize("block", BLOCKS)
def test_original_matches_pytorch(block: str) -> None:
    """The committed export is faithful: onnxruntime on it gives PyTorch's outputs (so the oracle of
    the backend tests below is PyTorch's model, not only its export)."""
    reference = _reference(block)
    with np.load(ZOO / f"{block}.torch_outputs.npz") as data:
        torch_outputs = dict(data)
    assert list(reference) == list(torch_outputs)
    for name, expected in torch_outputs.items():
        assert _relative_error(reference[name], expected) <= 1e-5, name


def _cases() -> list:
    cases = []
    for block in BLOCKS:
        for backend in BACKENDS:
            marks = [pytest.mark.xfail(strict=True, reason=XFAIL[block, backend])] if (block, backend) in XFAIL else []
            cases.append(pytest.param(block, backend, id=f"{block}-{backend}", marks=marks))
    return cases


@pytest.mark.parametrize(("block", "backend"), _cases())
def test_block_through_backend(block: str, backend: str, imported: dict, iree_cache: str) -> None:
    if backend == "iree":
        _require_iree()
    graph = imported[block]
    feeds = _inputs(block)
    assert [t.name for t in graph.inputs] == list(feeds)
    options = Options(threads=1, cache_dir=iree_cache if backend == "iree" else None)
    runner = prepare(graph, backend, options)
    if backend == "iree":  # every operation compiled: no quiet fallback of a part of the graph to numpy
        assert "operations compiled by IREE" in runner.plan[0], [p for p in runner.plan if p.startswith("numpy")]
    outputs = runner.run(feeds)
    reference = _reference(block)
    assert len(outputs) == len(reference)
    for (name, actual), expected in zip(outputs.items(), reference.values(), strict=True):
        error = _relative_error(actual, expected)
        assert error <= TOLERANCE, f"{block} --via {backend}: output {name} off by {error:.2e} of its max"


@pytest.mark.parametrize("block", ["ci_bert_block", "ci_gpt2_block"])
def test_text_block_is_one_compiled_module(block: str, imported: dict, iree_cache: str) -> None:
    """The Hugging Face text blocks compile whole under --via iree: one IREE module holding every
    operation, int64 token ids and masks included (the importer's wrap of negative gather indices is an
    int add whose range fits int32, GPT-2's QKV split a pack-output operation, its causal mask a bool
    constant), and nothing left on numpy."""
    _require_iree()
    graph = imported[block]
    runner = prepare(graph, "iree", Options(threads=1, cache_dir=iree_cache))
    count = len(graph.operations)
    assert runner.plan[0].startswith(f"{graph.name}: all {count} operations compiled by IREE"), runner.plan[:3]
    assert len(runner.modules) == 1 and not runner.split
    assert not [line for line in runner.plan if line.startswith("numpy:")], runner.plan
    assert any(op.op == "math.add" and op.outputs[0].dtype == "int" for op in graph.operations)
