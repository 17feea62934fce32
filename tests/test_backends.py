"""`sknd run --via numpy|kernels|lower` (and `tosa`, numpy's former name) give the same results; `sknd compose
--tosa` reports coverage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.execute import Executor

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"
VIAS = ("tosa", "numpy", "kernels", "lower")


@pytest.fixture(scope="module")
def digits_run() -> dict[str, np.ndarray]:
    graph = skriptnd.load(DIGITS).compose(attribs={"batch": 4})
    images = np.stack([np.load(DIGITS / "samples" / f"{n}.npy")[0] for n in (0, 3, 7, 9)])
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    out = {}
    for via in VIAS:
        kernels, optimize = kernels_for(via)
        out[via] = Executor(graph, dict(variables), kernels=kernels, optimize=optimize).run({"image": images})[
            "probabilities"]
    return out


@pytest.mark.parametrize("via", ["lower", "kernels"])
def test_backends_agree_with_the_default(digits_run: dict[str, np.ndarray], via: str) -> None:
    np.testing.assert_allclose(digits_run[via], digits_run["tosa"], rtol=1e-4, atol=1e-6)
    assert digits_run[via].argmax(axis=1).tolist() == [0, 3, 7, 9]


def test_tosa_backend_really_runs_tosa_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    from skriptnd.tosa import ops as tosa

    ran: list[str] = []
    for name in ("CONV2D", "MAX_POOL2D", "MATMUL"):
        original = tosa.OPS[name]
        monkeypatch.setitem(tosa.OPS, name, lambda *a, _f=original, _n=name, **k: ran.append(_n) or _f(*a, **k))
    monkeypatch.setattr("skriptnd.tosa.program.build.specialise", lambda *a, **k: None)  # generic kernels only
    graph = skriptnd.load(DIGITS).compose()
    kernels, optimize = kernels_for("tosa")
    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    executor = Executor(graph, variables, kernels=kernels, optimize=optimize)
    out = executor.run({"image": np.load(DIGITS / "samples" / "1.npy")})
    assert int(out["probabilities"].argmax()) == 1
    assert sorted(ran) == ["CONV2D", "CONV2D", "MATMUL", "MAX_POOL2D", "MAX_POOL2D"]
    (step,) = executor._program or []  # all nine operations are one TOSA program (the relus fused)
    assert step[1].op == "tosa.program"
    assert [op.op for op in step[1].attribs["operations"]] == [op.op for op in graph.operations
                                                               if op.op != "nn.relu"]
    assert [op.attribs.get("fused_relu") for op in step[1].attribs["operations"]][:4] == [True, None, True, None]


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_cli_via_and_tosa_coverage(tmp_path: Path) -> None:
    for via in VIAS:
        run = sknd("run", str(DIGITS), "--input", f"image={DIGITS / 'samples' / '6.npy'}", "--via", via,
                   "--output-dir", str(tmp_path / via))
        assert run.returncode == 0, run.stderr
        assert int(np.load(tmp_path / via / "probabilities.npy").argmax()) == 6
    assert sknd("run", str(DIGITS), "--random-inputs", "--via", "gpu").returncode == 2
    report = sknd("compose", str(DIGITS), "--tosa")
    assert report.returncode == 0 and "9 of 9 operations map to TOSA; 0 fall back" in report.stdout
    lstm = sknd("compose", str(ROOT / "models" / "lstm"), "--tosa")  # static length: skriptnd.tosa.legalize.recurrent
    assert lstm.returncode == 0 and "4 of 4 operations map to TOSA; 0 fall back" in lstm.stdout
    assert "WHILE_LOOP" in lstm.stdout
    lstm = sknd("compose", str(ROOT / "models" / "lstm"), "--graph", "LSTMSteps", "--tosa")  # dynamic length
    assert lstm.returncode == 0 and "2 of 4 operations map to TOSA; 2 fall back" in lstm.stdout
    assert "no: native kernel" in lstm.stdout  # nn.lstm runs skriptnd/execute/recurrent.py
    quantized = sknd("compose", str(ROOT / "models" / "digits_int8"), "--tosa")
    assert quantized.returncode == 0 and "@quantize: runs as an integer TOSA graph of" in quantized.stdout
    assert "RESCALE" in quantized.stdout and "CONV2D" in quantized.stdout


def test_iree_cache_trusts_unchanged_files_and_hashes_changed_ones(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached start does not re-hash an entry's files whose size, mtime and inode are those recorded when
    it was published; a changed or pre-stats entry is checked by its SHA-256 (and then gains the stats)."""
    import hashlib
    import json
    import os

    from skriptnd.backends import iree_cache

    def build(folder: Path) -> None:
        (folder / iree_cache.MODULE).write_bytes(b"module" * 100)
        (folder / iree_cache.PARAMS).write_bytes(b"weights" * 1000)

    entry = iree_cache.lookup_or_build(tmp_path, "k", build)
    assert entry.compiled
    manifest = json.loads((entry.folder / iree_cache.MANIFEST).read_text())
    assert manifest["files"][iree_cache.PARAMS] == hashlib.sha256(b"weights" * 1000).hexdigest()
    real_digest = iree_cache._digest
    hashed: list[str] = []
    monkeypatch.setattr(iree_cache, "_digest", lambda p: hashed.append(p.name) or real_digest(p))
    assert not iree_cache.lookup_or_build(tmp_path, "k", build).compiled
    assert hashed == []  # unchanged files: trusted by their stats
    # an entry written before the stats were recorded: hashed once, then trusted
    manifest.pop("stats")
    (entry.folder / iree_cache.MANIFEST).write_text(json.dumps(manifest))
    assert not iree_cache.lookup_or_build(tmp_path, "k", build).compiled
    assert sorted(hashed) == [iree_cache.MODULE, iree_cache.PARAMS]
    hashed.clear()
    assert not iree_cache.lookup_or_build(tmp_path, "k", build).compiled and hashed == []
    # the weights overwritten in place with as many bytes: the new mtime makes it hashed, and corrupt
    params = entry.folder / iree_cache.PARAMS
    before = params.stat().st_mtime_ns
    params.write_bytes(b"WEIGHTS" * 1000)
    os.utime(params, ns=(before + 10**9, before + 10**9))  # whatever the file system's clock resolution
    with pytest.warns(RuntimeWarning, match="params.irpa does not match its checksum"):
        assert iree_cache.lookup_or_build(tmp_path, "k", build).compiled
    assert params.read_bytes() == b"weights" * 1000
