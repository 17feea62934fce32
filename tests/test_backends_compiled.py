"""The backends registry (skriptnd.backends) and its compiled backends: every backend runs the models of
models/ it applies to and matches the `lower` reference (the operators' own @lower formulas: rtol 1e-4;
integer results exactly); the iree backend compiles through iree-compile and caches the module on disk.

IREE is an optional oracle like in test_tosa_export_models.py: these tests skip when iree-base-compiler /
-runtime are missing locally and fail in CI (CI=1). Compiled modules go to one session-wide temporary
cache, so each model compiles once per test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd import backends
from skriptnd.backends import Options
from skriptnd.diagnostics import DiagnosticError

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def require(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed; the dev extra installs them")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("iree-cache"))


def _inputs(graph: skriptnd.compose.ir.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.standard_normal([int(d) for d in t.shape]).astype(np.float32) for t in graph.inputs}


def _compose(model: str, **attribs: int) -> skriptnd.compose.ir.Graph:
    return skriptnd.load(MODELS / model).compose(attribs=attribs or None, random_weights=True, seed=1)


# -- the registry -----------------------------------------------------------------------------------


def test_registry_names_aliases_and_unknown_names() -> None:
    assert backends.names() == ["numpy", "kernels", "lower", "iree", "onnxruntime"]
    assert backends.canonical("tosa") == "numpy" and backends.get("tosa") is backends.get("numpy")
    with pytest.raises(ValueError, match="choose one of numpy, kernels, lower, iree, onnxruntime"):
        backends.canonical("gpu")


def test_graph_run_keeps_one_prepared_runner_per_backend() -> None:
    graph = _compose("digits")
    x = _inputs(graph)
    first = backends.prepare(graph, "kernels")
    skriptnd.run(graph, x, backend="kernels")
    assert backends.prepare(graph, "kernels") is first  # no second plan
    assert backends.prepare(graph, "lower") is not first


def test_a_missing_package_is_a_diagnostic_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = backends.get("iree")
    monkeypatch.setattr(backend, "requires", ("no_such_package_for_sknd",))
    with pytest.raises(DiagnosticError) as err:
        backends.prepare(_compose("digits"), "iree")
    (diag,) = err.value.diagnostics
    assert diag.code == "E0780" and "no_such_package_for_sknd" in diag.message and "pip install" in diag.message


#: every model shipped in models/ (a new one is covered without editing this file)
ALL_MODELS = sorted(p.name for p in MODELS.iterdir() if (p / "main.sknd").is_file())
#: what keeps a backend from a model (none today: every backend runs every shipped model)
NOT_APPLICABLE: dict[tuple[str, str], str] = {}
_REFERENCE: dict[str, tuple[skriptnd.compose.ir.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]] = {}


def _reference(model: str) -> tuple[skriptnd.compose.ir.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(graph, inputs, the `lower` backend's outputs) of a model at its declared defaults, computed once per
    session (AlexNet's @lower formulas take seconds)."""
    if model not in _REFERENCE:
        graph = _compose(model)
        x = _inputs(graph)
        _REFERENCE[model] = graph, x, skriptnd.run(graph, x, backend="lower")
    return _REFERENCE[model]


def test_the_model_list_is_the_models_folder() -> None:
    assert {"alexnet", "digits", "digits_int8", "lstm", "mobilenetv2", "resnet18", "transformer",
            "yolo_head"} <= set(ALL_MODELS)


@pytest.mark.parametrize("model", ALL_MODELS)
@pytest.mark.parametrize("backend", ["numpy", "kernels", "iree", "onnxruntime"])
def test_every_backend_runs_every_model_like_lower(model: str, backend: str, cache: str) -> None:
    """Each backend on each shipped model matches the operators' own @lower formulas (rtol 1e-4; integer
    outputs exactly), output names, shapes and dtypes included."""
    if (model, backend) in NOT_APPLICABLE:
        pytest.skip(NOT_APPLICABLE[model, backend])
    if backend == "iree":
        require("iree.compiler", "iree.runtime")
    if backend == "onnxruntime":
        require("onnx", "onnxruntime")
    graph, x, expected = _reference(model)
    got = skriptnd.run(graph, x, backend=backend, **({"cache_dir": cache} if backend == "iree" else {"threads": 1}))
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape and got[name].dtype == value.dtype, name
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


# -- iree -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["digits", "transformer", "mobilenetv2", "resnet18", "lstm", "alexnet"])
def test_iree_compiles_a_legalizing_graph_as_one_module(model: str, cache: str) -> None:
    require("iree.compiler", "iree.runtime")
    graph, _, _ = _reference(model)
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    # the whole graph, one module (models/lstm: its two nn.lstm layers, skriptnd.tosa.legalize.recurrent)
    assert not runner.split and len(runner.modules) == 1  # type: ignore[attr-defined]
    if model == "resnet18":  # 47 MB of weights: those IREE packs for its micro-kernels at compile time (data
        # tiling) are in the module, the others in the parameter archive, none twice (with every 3x3 layer a
        # patch product, via_iree.DATA_TILED_POSITIONS, the module holds nearly all of them)
        entry = runner.entry  # type: ignore[attr-defined]
        weights = sum(graph.variable_source(t).nbytes for t in graph.variables)
        assert entry.params is not None
        assert weights < entry.module.stat().st_size + entry.params.stat().st_size < 1.1 * weights


def test_iree_runs_the_int8_graph_bit_exactly(cache: str, tmp_path: Path) -> None:
    """digits_int8 under iree: the same int8 logits as the TOSA reference model (tosa-tools) running the
    same integer TOSA graph, bit for bit, and as our integer TOSA graph on the numpy TOSA operators."""
    require("iree.compiler", "iree.runtime")
    from tosa_oracle import require_tosa_opt, run_flatbuffer

    from skriptnd.tosa.integer.lower import lower_quantized
    from skriptnd.tosa.integer.mlir import to_mlir
    from skriptnd.tosa.mlir.export import to_flatbuffer

    require_tosa_opt()

    graph = skriptnd.load(MODELS / "digits_int8").compose(attribs={"batch": 10})
    images = np.concatenate([np.load(MODELS / "digits" / "samples" / f"{n}.npy") for n in range(10)])
    integer = lower_quantized(graph)
    logits = integer.values["logits"].name
    # the compiled integer graph: its logits are int8 TOSA values, compared exactly
    from skriptnd.backends.via_iree import IntegerRunner

    probabilities = skriptnd.run(graph, {"image": images}, backend="iree", cache_dir=cache)["probabilities"]
    expected = integer.run({"image": images})["probabilities"]
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-7)  # fp32 softmax after the int8 graph
    assert probabilities.argmax(axis=1).tolist() == list(range(10))
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    assert isinstance(runner, IntegerRunner) and runner.integer is not None
    exact = _iree_int8_logits(integer, logits, images, cache)
    reference = run_flatbuffer(to_flatbuffer(to_mlir(integer, outputs=[logits]), profile="pro_int"),
                               integer.quantize_inputs({"image": images}), tmp_path)
    assert reference.dtype == np.int8 and len(np.unique(reference)) > 10  # logits, not a saturated constant
    np.testing.assert_array_equal(exact, reference)
    np.testing.assert_array_equal(exact, integer.run({"image": images}, outputs=[logits])[logits])


def _iree_int8_logits(integer: object, logits: str, images: np.ndarray, cache: str) -> np.ndarray:
    """The int8 logits of the integer graph compiled and loaded the backend's way (IreeModule)."""
    from skriptnd.backends.via_iree import IreeModule
    from skriptnd.tosa.integer.mlir import to_mlir

    module = IreeModule(to_mlir(integer, outputs=[logits]), Options(cache_dir=cache))  # type: ignore[arg-type]
    (out,) = module(integer.quantize_inputs({"image": images}))  # type: ignore[attr-defined]
    assert out.dtype == np.int8
    return out


def test_iree_cache_reuses_recompiles_and_repairs(tmp_path: Path) -> None:
    require("iree.compiler", "iree.runtime")
    cache = str(tmp_path / "cache")
    x = _inputs(_compose("digits"))
    first = backends.prepare(_compose("digits"), "iree", Options(cache_dir=cache))
    assert first.entry.compiled
    again = backends.prepare(_compose("digits"), "iree", Options(cache_dir=cache))  # a new graph object
    assert not again.entry.compiled and again.entry.folder == first.entry.folder
    expected = again.run(x)["probabilities"]
    # another flag, another graph (batch 2): compiled anew, in their own entries
    flagged = backends.prepare(_compose("digits"), "iree", Options(cache_dir=cache, flags=("--iree-opt-level=O1",)))
    batch2 = backends.prepare(_compose("digits", batch=2), "iree", Options(cache_dir=cache))
    assert flagged.entry.compiled and batch2.entry.compiled
    assert len({first.entry.folder, flagged.entry.folder, batch2.entry.folder}) == 3
    # a corrupt module: a warning, recompiled, the same results
    module = first.entry.module
    truncated = module.with_suffix(".tmp")  # a new file in its place: loaded modules keep mapping the old one
    truncated.write_bytes(module.read_bytes()[:100])
    os.replace(truncated, module)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        repaired = backends.prepare(_compose("digits"), "iree", Options(cache_dir=cache))
    assert repaired.entry.compiled
    np.testing.assert_array_equal(repaired.run(x)["probabilities"], expected)
    # a missing manifest is as corrupt as a bad file
    (repaired.entry.folder / "manifest.json").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert backends.prepare(_compose("digits"), "iree", Options(cache_dir=cache)).entry.compiled
    assert any("corrupt" in str(w.message) for w in caught)


@pytest.mark.parametrize(("model", "numpy_ops", "compiled_ops"),
                         [("yolo_head", {"algo.nonmax_suppress"}, {"layout.split"})])
def test_iree_splits_what_does_not_legalize_and_says_so(model: str, numpy_ops: set[str], compiled_ops: set[str],
                                                        cache: str) -> None:
    """Operations without a TOSA form run on numpy between IREE modules; the plan names each one. An
    operation with a pack output (yolo_head's layout.split into four parts) compiles with the others: it
    used to run on numpy, which cut a dynamo-exported ShuffleNetV2 into 14 IREE modules (issue 30)."""
    require("iree.compiler", "iree.runtime")
    graph = _compose(model)
    x = _inputs(graph)
    if model == "yolo_head":
        x = {k: v * 4 for k, v in x.items()}  # confident detections, so that some boxes survive
    expected = skriptnd.run(graph, x, backend="lower")
    got = skriptnd.run(graph, x, backend="iree", cache_dir=cache)
    for name, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(got[name], value)
    runner = backends.prepare(graph, "iree", Options(cache_dir=cache))
    assert runner.split and runner.modules  # type: ignore[attr-defined]
    assert "split" in runner.plan[0]
    on_numpy = {line.split()[1] for line in runner.plan if line.startswith("numpy: ")}
    assert numpy_ops <= on_numpy and not compiled_ops & on_numpy
    assert any(line.startswith("IREE: ") for line in runner.plan)


def test_iree_refuses_a_quantized_graph_without_an_integer_form(monkeypatch: pytest.MonkeyPatch,
                                                               cache: str) -> None:
    """A @quantize graph compiles whole as its integer TOSA graph; what keeps it from lowering is E0781,
    located where the lowering failed."""
    require("iree.compiler", "iree.runtime")
    from skriptnd.tosa.integer import lower as quantized

    graph = skriptnd.load(MODELS / "digits_int8").compose()
    bad = graph.operations[3]

    def refuse(g: object, *a: object, **k: object) -> None:
        raise quantized._fail(bad, "cannot lower this operation in integer arithmetic")

    monkeypatch.setattr(quantized, "lower_quantized", refuse)
    with pytest.raises(DiagnosticError) as err:
        skriptnd.run(graph, {"image": np.load(MODELS / "digits" / "samples" / "3.npy")}, backend="iree", cache_dir=cache)
    (diag,) = err.value.diagnostics
    assert diag.code == "E0781" and "cannot lower this operation" in diag.message and diag.span == bad.span
    # numpy runs the operations that do not lower with fake quantization (issue 26), kernels all of them
    assert "--via numpy (the default" in (diag.hint or "") and "--via kernels" in (diag.hint or "")


def sknd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_cli_run_via_iree_shows_its_plan_and_caches(tmp_path: Path) -> None:
    require("iree.compiler", "iree.runtime")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "SKRIPTND_CACHE_DIR": ""}
    args = ("run", str(MODELS / "digits"), "--input", f"image={MODELS / 'digits' / 'samples' / '7.npy'}",
            "--via", "iree", "-v", "--threads", "2", "--output-dir", str(tmp_path / "out"))
    cold = sknd(*args, env=env)
    assert cold.returncode == 0, cold.stderr
    # digits' weights are all packed for IREE's micro-kernels at compile time (data tiling): in the module
    assert "module compiled" in cold.stderr and "weights inside the module" in cold.stderr
    assert str(tmp_path / "xdg" / "skriptnd" / "iree") in cold.stderr
    warm = sknd(*args, env=env)
    assert warm.returncode == 0 and "module loaded from the cache" in warm.stderr
    assert int(np.load(tmp_path / "out" / "probabilities.npy").argmax()) == 7
    split = sknd("run", str(MODELS / "yolo_head"), "--random-inputs", "--random-weights", "--via", "iree", env=env)
    # the NMS stays on numpy (dynamic output length); everything before it, its layout.split included, compiles
    assert split.returncode == 0 and "split: 1 IREE module(s)" in split.stderr and "-v lists them" in split.stderr


# -- onnxruntime ------------------------------------------------------------------------------------


def test_lstm_legalizes_only_for_a_static_length_and_not_for_numpy() -> None:
    """nn.lstm without `steps` legalizes to TOSA (a second layer reading the first's Y too; 5 steps are fewer
    than two loop iterations: unrolled); with `steps` (LSTMSteps: the length is data) it does not; the TABLE
    (the numpy backend) keeps the native kernel. tests/test_tosa_recurrent.py tests the loop form."""
    from skriptnd.tosa.legalize import TABLE, legalize
    from skriptnd.tosa.legalize.core import run_subgraph
    from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer

    graph = _compose("lstm", seq=5, batch=2)
    layer1, layer2 = (op for op in graph.operations if op.op == "nn.lstm")
    assert legalize(layer1)[0] is None and "nn.lstm" not in TABLE
    unroll = RecurrentLegalizer()
    sg1, sg2 = unroll(layer1), unroll(layer2)
    assert sg1 is not None and sg2 is not None  # layer 2's input has a declared dynamic extent
    assert sum(o.name == "MATMUL" for o in sg1.ops) == 1 + 5  # the input projection, then one per step
    x = _inputs(graph)["X"]
    weights = {t.name: graph.variable_source(t) for t in graph.variables}
    args = [x, weights["layer1_W"], weights["layer1_R"], weights["layer1_B"], None, None, None]
    y, h, c = run_subgraph(sg1, args[:len(layer1.inputs)])
    expected = skriptnd.run(graph, {"X": x}, backend="lower")
    np.testing.assert_allclose(h, expected["hN"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, expected["cN"][0], rtol=1e-5, atol=1e-6)
    steps_graph = skriptnd.load(MODELS / "lstm").compose("LSTMSteps", random_weights=True)
    assert all(RecurrentLegalizer()(op) is None for op in steps_graph.operations if op.op == "nn.lstm")


def test_onnxruntime_session_is_built_once_per_graph_and_threads() -> None:
    require("onnx", "onnxruntime")
    graph = _compose("digits")
    x = _inputs(graph)
    runner = backends.prepare(graph, "onnxruntime", Options(threads=1))
    skriptnd.run(graph, x, backend="onnxruntime", threads=1)
    assert backends.prepare(graph, "onnxruntime", Options(threads=1)) is runner
    assert runner.session.get_session_options().intra_op_num_threads == 1  # type: ignore[attr-defined]


def test_iree_target_flags() -> None:
    """--target: a CPU name (also with a dash) or a target triple to cross-compile for."""
    from skriptnd.backends.via_iree import compile_flags

    assert "--iree-llvmcpu-target-cpu=host" in compile_flags(Options())
    assert "--iree-llvmcpu-target-cpu=skylake-avx512" in compile_flags(Options(target="skylake-avx512"))
    cross = compile_flags(Options(target="aarch64-unknown-linux-gnu"))
    assert "--iree-llvmcpu-target-triple=aarch64-unknown-linux-gnu" in cross
    assert "--iree-llvmcpu-target-cpu=generic" in cross


def test_iree_data_tiling_is_off_where_it_miscompiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Data tiling (fast on AVX2) is off for AVX-512 targets, where IREE 3.13 miscompiles LayerNorm -> MatMul
    with it (issue 30): a named AVX-512 CPU, or `host` on a CPU whose /proc/cpuinfo lists avx512 flags; a
    user's own --iree-opt-data-tiling still comes last (the last occurrence wins)."""
    from skriptnd.backends import iree_defaults
    from skriptnd.backends.via_iree import compile_flags, flags_reason

    def tiling(options: Options) -> bool:
        flags = compile_flags(options)
        return "--iree-opt-data-tiling" in flags and "--iree-opt-data-tiling=false" not in flags

    assert not tiling(Options(target="emeraldrapids")) and not tiling(Options(target="znver4"))
    assert "AVX-512" in flags_reason(Options(target="skylake-avx512"))
    assert tiling(Options(target="haswell")) and tiling(Options(target="znver3"))
    assert tiling(Options(target="aarch64-unknown-linux-gnu")) and tiling(Options(target="generic"))
    monkeypatch.setattr(iree_defaults.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(iree_defaults, "host_cpu_flags", lambda: {"sse2", "avx2", "avx512f", "avx512bw", "amx_tile"})
    assert not tiling(Options()) and "avx512bw, avx512f" in flags_reason(Options())
    assert compile_flags(Options(flags=("--iree-opt-data-tiling",)))[-1] == "--iree-opt-data-tiling"
    monkeypatch.setattr(iree_defaults, "host_cpu_flags", lambda: {"sse2", "avx", "avx2", "fma"})
    assert tiling(Options()) and "data tiling on" in flags_reason(Options())


def test_iree_compiles_a_pointwise_conv_with_hardswish_before_a_global_average_pool(tmp_path: Path) -> None:
    """MobileNetV3's last stage: a 1x1 convolution (160 -> 960 channels over 7x7), HardSwish and a global
    average pool. With data tiling IREE fuses HardSwish's product into the pool's reduction, so the
    convolution's dispatch returns two results and unpacks a 56 x 192 f32 tile (43 KiB) on the stack:
    over iree-compile's default 32 KiB limit ("exceeded stack allocation limit", issue 30), so the default
    flags raise it (skriptnd.backends.iree_defaults.STACK_LIMIT). Checked against onnxruntime on the ONNX
    graph the model is imported from; data tiling is forced on, as on the AVX2 hosts where it failed."""
    require("iree.compiler", "iree.runtime", "onnx", "onnxruntime")
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((960, 160, 1, 1)) * 0.1).astype(np.float32)
    b = rng.standard_normal(960).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("HardSwish", ["c"], ["h"]),
         helper.make_node("GlobalAveragePool", ["h"], ["y"])], "hardswish_pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 160, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 960, 1, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "hardswish_pool.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    skriptnd.import_model(path, tmp_path / "model")
    x = rng.standard_normal((1, 160, 7, 7)).astype(np.float32)
    (expected,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    options = Options(threads=1, cache_dir=str(tmp_path / "cache"), flags=("--iree-opt-data-tiling",))
    runner = backends.prepare(skriptnd.load(tmp_path / "model").compose(), "iree", options)
    assert not runner.split  # type: ignore[attr-defined]
    (got,) = runner.run({"x": x}).values()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_iree_runs_a_quantized_resnet18_bit_exactly_like_the_tosa_reference_model(tmp_path: Path,
                                                                                  cache: str) -> None:
    """ResNet-18 quantized by onnxruntime's own quantizer (QDQ, int8, per-channel weights), imported with
    `sknd import`, runs under iree as its whole integer TOSA graph: the outputs equal the TOSA reference
    model's on the same integer graph bit for bit, and the top class is onnxruntime's on the QDQ model."""
    require("iree.compiler", "iree.runtime")
    require("onnx", "onnxruntime")
    import onnx
    from onnx import TensorProto, helper
    from onnx_models import resnet18_onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from test_model_zoo import _copy_with_weights
    from tosa_oracle import require_tosa_opt, run_flatbuffer

    from skriptnd.backends.via_onnxruntime import keep_qdq_unfused, session
    from skriptnd.tosa.integer.lower import lower_quantized
    from skriptnd.tosa.integer.mlir import to_mlir
    from skriptnd.tosa.mlir.export import to_flatbuffer

    require_tosa_opt()
    _, params = _copy_with_weights("resnet18", tmp_path / "float")
    b = resnet18_onnx(params)
    graph = helper.make_graph([*b.nodes, helper.make_node("Identity", [b.logits], ["output"])], "resnet18",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.OPSET)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "resnet18.onnx"))
    rng = np.random.default_rng(3)
    calibration = iter([{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(3)])

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(calibration, None)

    qdq = tmp_path / "resnet18_int8.onnx"
    quantize_static(str(tmp_path / "resnet18.onnx"), str(qdq), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
    proc = sknd("import", str(qdq), "-o", str(tmp_path / "imported"))
    assert proc.returncode == 0, proc.stderr
    sknd_graph = skriptnd.load(tmp_path / "imported").compose()
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    got = skriptnd.run(sknd_graph, {"input": x}, backend="iree", cache_dir=cache)["output"]
    integer = lower_quantized(sknd_graph)
    reference = run_flatbuffer(to_flatbuffer(to_mlir(integer), profile="pro_int"),
                               integer.quantize_inputs({"input": x}), tmp_path, timeout=600)
    np.testing.assert_array_equal(got, reference)
    assert len(np.unique(reference)) > 100  # 1000 logits on the int8 grid, not a saturated constant
    # unfused where onnxruntime's fused u8s8 kernels saturate (x86 without VNNI): skriptnd.hostcpu
    expected = session(str(qdq), unfused_qdq=keep_qdq_unfused()).run(None, {"input": x})[0]
    assert int(got.argmax()) == int(expected.argmax())
    step = float(np.abs(np.diff(np.unique(reference))).min())  # the output's quantization step
    assert float(np.abs(got - expected).max()) <= 2 * step  # onnxruntime requantizes its own way: ≤ 2 steps
