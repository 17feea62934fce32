"""`sknd bench` (skriptnd/cli/bench.py over skriptnd.backends.bench): every backend is checked against the
others before it is timed, and the onnxruntime reference is a supplied ONNX model on the same weights
(tests/test_model_zoo.py's two-layer ONNX LSTM of models/lstm). No timing is asserted, only that each
number is there and consistent (a ratio is a median over onnxruntime's median)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_model_zoo as zoo  # noqa: E402

import skriptnd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ATTRIBS = ("-a", f"seq={zoo.SEQ}", "-a", f"batch={zoo.BATCH}", "--graph", "LSTM")


def require_onnxruntime() -> None:
    import importlib.util

    if importlib.util.find_spec("onnx") and importlib.util.find_spec("onnxruntime"):
        return
    if os.environ.get("CI"):
        pytest.fail("onnx / onnxruntime not installed; the dev extra installs them")
    pytest.skip("onnx / onnxruntime not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def lstm_onnx(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """models/lstm with make_weights.py's weights, and the ONNX LSTM on the same weights (outputs in the
    graph's order)."""
    require_onnxruntime()
    import onnx
    from onnx import TensorProto, helper

    folder, params = zoo._copy_with_weights("lstm", tmp_path_factory.mktemp("lstm"))
    graph = skriptnd.load(folder).compose("LSTM", attribs={"seq": zoo.SEQ, "batch": zoo.BATCH})
    order = [graph.output_name(i) for i in range(len(graph.outputs))]
    b = zoo.lstm_onnx(params, with_steps=False)
    nodes = [*b.nodes, *(helper.make_node("Identity", [getattr(b, n)], [n]) for n in order)]
    model = helper.make_model(helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [zoo.SEQ, zoo.BATCH, 16])],
        [helper.make_empty_tensor_value_info(n) for n in order], b.initializers),
        opset_imports=[helper.make_opsetid("", b.OPSET)])
    model.ir_version = 10
    path = folder / "lstm.onnx"
    onnx.save(model, str(path))
    return folder, path


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_bench_json_times_each_backend_against_onnxruntime(lstm_onnx: tuple[Path, Path]) -> None:
    folder, onnx_path = lstm_onnx
    proc = sknd("bench", str(folder), *ATTRIBS, "--via", "numpy,kernels", "--onnx", str(onnx_path), "--threads", "1",
                "--rounds", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    assert report["model"] == str(folder) and report["threads"] == 1
    rows = {r["backend"]: r for r in report["results"]}
    original = "onnxruntime: lstm.onnx"  # the supplied file: a row of its own, the reference
    assert list(rows) == ["numpy", "kernels", original] and report["reference"] == original
    for row in rows.values():
        assert row["median_ms"] > 0 and row["runs"] == 6 and row["error"] is None
    assert rows[original]["ratio_vs_onnxruntime"] == pytest.approx(1.0)
    assert rows["numpy"]["ratio_vs_onnxruntime"] == pytest.approx(
        rows["numpy"]["median_ms"] / rows[original]["median_ms"])
    # the same weights: onnxruntime's LSTM computes what skriptnd does (a different file would not)
    assert rows[original]["deviation"] < 1e-4 and rows["kernels"]["deviation"] < 1e-4
    assert report["wrong"] == []
    env = report["environment"]
    assert env["cores"] == os.cpu_count() and "numpy_blas" in env and isinstance(env["env"], dict)
    blas = [p for p in env["threadpools"] if p["internal_api"] in ("openblas", "mkl", "blis")]
    assert all(p["num_threads"] == 1 for p in blas)  # --threads 1 reached numpy's BLAS


def test_bench_table_shows_the_machine_and_the_ratios(lstm_onnx: tuple[Path, Path]) -> None:
    folder, onnx_path = lstm_onnx
    proc = sknd("bench", str(folder), *ATTRIBS, "--via", "kernels", "--onnx", str(onnx_path), "--rounds", "1")
    assert proc.returncode == 0, proc.stderr
    assert "BLAS" in proc.stdout and "median (ms)" in proc.stdout and "/ onnxruntime: lstm.onnx" in proc.stdout
    assert "kernels" in proc.stdout and "x" in proc.stdout.split("kernels", 1)[1].splitlines()[0]


def test_bench_usage_errors(lstm_onnx: tuple[Path, Path], tmp_path: Path) -> None:
    folder, _ = lstm_onnx
    assert sknd("bench", str(folder), *ATTRIBS, "--via", "numpy,gpu").returncode == 2
    assert sknd("bench", str(folder), *ATTRIBS, "--onnx", str(tmp_path / "missing.onnx")).returncode == 2
    assert sknd("bench", str(folder), *ATTRIBS, "--compare", "tensorflow").returncode == 2


def test_a_wrong_onnx_reference_is_reported_not_timed(lstm_onnx: tuple[Path, Path], tmp_path: Path) -> None:
    """A file onnxruntime refuses is a row with its reason; the other backends are still timed."""
    folder, _ = lstm_onnx
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    proc = sknd("bench", str(folder), *ATTRIBS, "--via", "kernels", "--onnx", str(bad), "--rounds", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["backend"]: r for r in json.loads(proc.stdout)["results"]}
    assert rows["kernels"]["median_ms"] > 0 and rows["kernels"]["ratio_vs_onnxruntime"] is None
    bad_row = rows["onnxruntime: bad.onnx"]
    assert bad_row["median_ms"] is None and "onnxruntime refuses" in bad_row["error"]
    assert np.isfinite(rows["kernels"]["median_ms"])


def test_bench_compares_with_the_models_own_onnx_export() -> None:
    """Without --onnx, --compare onnxruntime times the model's ONNX export (skriptnd.interop.onnx_export)."""
    require_onnxruntime()
    proc = sknd("bench", str(ROOT / "models" / "digits"), "--via", "numpy", "--compare", "onnxruntime",
                "--rounds", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["backend"]: r for r in json.loads(proc.stdout)["results"]}
    assert list(rows) == ["numpy", "onnxruntime"] and rows["onnxruntime"]["error"] is None
    assert rows["onnxruntime"]["deviation"] < 1e-4 and rows["numpy"]["ratio_vs_onnxruntime"] > 0


def test_a_prepared_runner_is_timed_beside_the_backends() -> None:
    """A (label, Runner) entry (benchmarks/models.py: PyTorch eager, a hand-built onnxruntime session) is
    checked against the first backend and timed with the rest; here it doubles the numpy backend's
    outputs, so its deviation is max|2y - y| / max|y| = 1 exactly."""
    from skriptnd import backends
    from skriptnd.backends.base import Runner
    from skriptnd.backends.bench import bench

    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    x = {"image": np.random.default_rng(0).random((1, 1, 8, 8)).astype(np.float32)}
    numpy_runner = backends.prepare(graph, "numpy")
    calls = []

    class Doubled(Runner):
        plan = ["twice the numpy backend"]

        def run(self, inputs: Any, progress: Any = None) -> dict[str, Any]:
            calls.append(1)
            return {k: 2 * np.asarray(v) for k, v in numpy_runner.run(inputs).items()}

    report = bench(graph, ["numpy", ("doubled", Doubled())], x, reference=None, rounds=2, per_turn=2)
    by = {r.backend: r for r in report.results}
    assert list(by) == ["numpy", "doubled"]
    assert by["doubled"].deviation == pytest.approx(1.0)
    assert by["doubled"].runs == 4 and len(calls) == 1 + 2 * (1 + 2)  # the check, then per round 1 + 2
    assert by["doubled"].median_ms is not None and by["doubled"].median_ms > 0
    assert by["doubled"].ratio_vs_onnxruntime is None  # no reference


def test_blas_note_names_a_coretype_that_holds_openblas_below_the_cpu() -> None:
    from skriptnd.backends.bench import blas_note

    pools = [{"internal_api": "openblas", "architecture": "Haswell"}]
    note = blas_note("Haswell", ["avx2", "avx512f"], pools)
    assert note is not None and "OPENBLAS_CORETYPE=Haswell" in note and "AVX-512" in note
    assert blas_note("SkylakeX", ["avx2", "avx512f"], pools) is None  # already the AVX-512 kernels
    assert blas_note("Haswell", ["avx2"], pools) is None  # the CPU has nothing better
    assert blas_note(None, ["avx2", "avx512f"], pools) is None  # OpenBLAS picks by itself


# -- issue 30: --onnx adds a row, inputs keep their dtype, a deviation is red and --check fails ---------------


def _token_model(path: Path, seed: int) -> None:
    """An ONNX model reading int64 token ids: Gather of an embedding table [10, 8], MatMul by [8, 4]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    tables = [numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "emb"),
              numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0), helper.make_node("MatMul", ["e", "w"], ["y"])]
    graph = helper.make_graph(nodes, "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 4])], tables)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the imported model, its original .onnx, an .onnx of the same architecture with other weights)."""
    require_onnxruntime()
    folder = tmp_path_factory.mktemp("tokens")
    _token_model(folder / "tokens.onnx", 0)
    _token_model(folder / "other.onnx", 1)
    proc = sknd("import", str(folder / "tokens.onnx"), "-o", str(folder / "imported"))
    assert proc.returncode == 0, proc.stderr
    return folder / "imported", folder / "tokens.onnx", folder / "other.onnx"


def test_onnx_file_adds_a_row_and_int64_inputs_stay_int64(tokens: tuple[Path, Path, Path]) -> None:
    """--onnx FILE is one more row (onnxruntime on the original model), not a replacement for the
    onnxruntime backend named in --via (our export, timed too); both get the int64 token ids as int64 (fed as
    float32, onnxruntime refuses them) and compute what numpy does."""
    imported, original, _ = tokens
    proc = sknd("bench", str(imported), "--via", "numpy,onnxruntime", "--onnx", str(original), "--rounds", "1",
                "--threads", "1", "--json", "--check")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = {r["backend"]: r for r in report["results"]}
    assert list(rows) == ["numpy", "onnxruntime", "onnxruntime: tokens.onnx"]
    assert report["reference"] == "onnxruntime: tokens.onnx" and report["wrong"] == []
    for name in ("onnxruntime", "onnxruntime: tokens.onnx"):
        assert rows[name]["error"] is None and rows[name]["median_ms"] > 0, rows[name]
        assert rows[name]["deviation"] < 1e-6
    assert rows["onnxruntime: tokens.onnx"]["ratio_vs_onnxruntime"] == pytest.approx(1.0)


def test_onnxruntime_runner_feeds_the_dtype_the_model_declares(tokens: tuple[Path, Path, Path]) -> None:
    from skriptnd import backends

    imported, _, _ = tokens
    graph = skriptnd.load(imported).compose()
    ids = np.array([[0, 1, 2, 3, 4], [9, 8, 7, 6, 5]], dtype=np.int64)
    runner = backends.prepare(graph, "onnxruntime", backends.Options(threads=1))
    assert [dtype for _, _, dtype in runner.inputs] == [np.int64]  # type: ignore[attr-defined]
    np.testing.assert_allclose(runner.run({"ids": ids})["y"], skriptnd.run(graph, {"ids": ids})["y"], rtol=1e-5)


def test_a_deviation_is_red_and_check_exits_1(tokens: tuple[Path, Path, Path]) -> None:
    """An original with other weights deviates by far more than 1e-3: its cell and a line naming it are red;
    without --check the exit code is 0, with --check 1 (also with --json, which lists it under "wrong")."""
    imported, _, other = tokens
    args = ("bench", str(imported), "--via", "numpy", "--onnx", str(other), "--rounds", "1", "--threads", "1")
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "200"}
    shown = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                           env=env, timeout=600)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b[1;31m" in shown.stdout and "wrong results" in shown.stdout
    line = next(ln for ln in shown.stdout.splitlines() if "wrong results" in ln)
    assert "other.onnx" in line and "\x1b[1;31m" in line
    checked = sknd(*args, "--check")
    assert checked.returncode == 1 and "wrong results" in checked.stdout
    report = json.loads(sknd(*args, "--check", "--json").stdout)
    assert report["wrong"] == ["onnxruntime: other.onnx"]
    assert report["results"][1]["deviation"] > 1e-3
    # the same original: right, nothing red, --check passes
    _, original, _ = tokens
    same = subprocess.run([sys.executable, "-m", "skriptnd", "bench", str(imported), "--via", "numpy", "--onnx",
                           str(original), "--rounds", "1", "--check"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)
    assert same.returncode == 0 and "wrong results" not in same.stdout and "\x1b[1;31m" not in same.stdout


def test_bench_runs_the_inputs_it_is_given(lstm_onnx: tuple[Path, Path], tmp_path: Path) -> None:
    """--input NAME=FILE replaces the random values (a model of token ids needs real ones): the file is read
    and checked against the graph's input, a wrong name or shape refused with a diagnostic."""
    folder, _ = lstm_onnx
    graph = skriptnd.load(folder).compose("LSTM", attribs={"seq": zoo.SEQ, "batch": zoo.BATCH})
    (x,) = graph.inputs
    shape = [int(d) for d in x.shape]
    np.save(tmp_path / "ones.npy", np.ones(shape, np.float32))
    np.save(tmp_path / "short.npy", np.ones([shape[0] + 1, *shape[1:]], np.float32))
    run = ("bench", str(folder), *ATTRIBS, "--via", "numpy,kernels", "--rounds", "1", "--check", "--json")
    assert sknd(*run, "--input", f"{x.name}={tmp_path / 'ones.npy'}").returncode == 0
    assert sknd(*run).returncode == 0  # random inputs
    wrong_name = sknd(*run, "--input", f"nosuch={tmp_path / 'ones.npy'}")
    assert wrong_name.returncode == 1 and "nosuch" in wrong_name.stderr
    short = sknd(*run, "--input", f"{x.name}={tmp_path / 'short.npy'}")
    assert short.returncode == 1 and "shape" in short.stderr.lower()


def test_a_nan_on_one_side_is_a_deviation_not_a_match() -> None:
    """A backend that gives NaN where the first gives a number is wrong (Python's max skipped the NaN)."""
    from skriptnd.backends.bench import DEVIATION_LIMIT, Report, Result, _deviation

    first = {"y": np.array([1.0, 2.0, np.nan, 4.0])}
    assert _deviation({"y": np.array([1.0, 2.0, np.nan, 4.0])}, first) == 0.0  # NaN where the first has NaN
    assert _deviation({"y": np.array([1.0, 2.0, np.nan, 3.0])}, first) == 0.25  # 1 / max |value| 4
    nan = _deviation({"y": np.array([np.nan, 2.0, np.nan, 4.0])}, first)
    assert np.isnan(nan)
    report = Report("m", 1, [Result("a", 1.0), Result("b", 1.0, deviation=nan), Result("c", 1.0, deviation=0.0)])
    assert report.wrong() == ["b"] and DEVIATION_LIMIT > 0
