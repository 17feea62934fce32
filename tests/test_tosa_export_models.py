"""`sknd export --tosa-mlir` beyond digits: AlexNet in the TOSA reference model, the dense_resource form of
the weights, and IREE (``iree-compile --iree-input-type=tosa`` to llvm-cpu, run by iree-base-runtime).

AlexNet (models/alexnet, spec 2.1) has no weight files: ``sknd run`` and ``sknd export`` both take
``--random-weights --seed S``, which draw the same values, and ``sknd run --random-inputs --save-inputs``
writes the input it used. The exported MLIR (weights as ``dense_resource`` blobs) is checked with tosa-opt
directly (parse, ``--tosa-validate`` for pro_fp, ``--tosa-serialize``), the flatbuffer runs in the reference
model (subprocess) and IREE runs the compiled module; both must match ``sknd run``'s probabilities with
rtol 1e-4 / atol 1e-7 (the softmax of 1000 random-weight logits is near 1e-3 everywhere, so this is about
1e-4 absolute on the logit differences; the measured gap is ~3e-6 relative for both).

The IREE tests need ``iree-compile`` and ``iree.runtime`` (the dev extra installs iree-base-compiler and
iree-base-runtime); like the reference-model tests they skip when those are missing locally and fail in CI.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.tosa.mlir.text import RESOURCE_MIN_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tosa_oracle import require_oracle, run_flatbuffer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"
ALEXNET = ROOT / "models" / "alexnet"
SEED = 7

IREE_FLAGS = ["--iree-input-type=tosa", "--iree-hal-target-device=local",
              "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=generic"]

def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def tosa_opt_serialize(mlir: Path, fb: Path) -> None:
    """The MLIR file as written, through tosa-opt: parse, validate (TOSA 1.0 pro_fp), serialize."""
    proc = subprocess.run([tool("tosa-opt") or "tosa-opt", str(mlir), "--tosa-attach-target=profiles=pro_fp",
                           "--tosa-validate", "--tosa-serialize", f"--tosa-flatbuffer-filename={fb}",
                           "-o", os.devnull], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and fb.is_file(), proc.stderr[-3000:]


def require_iree() -> None:
    """Skip when iree-base-compiler/-runtime are missing locally; in CI (``CI`` set) fail instead."""
    missing = []
    if tool("iree-compile") is None:
        missing.append("iree-compile (iree-base-compiler)")
    try:
        import iree.runtime  # noqa: F401
    except ImportError:
        missing.append("iree.runtime (iree-base-runtime)")
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed; the dev extra installs them")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")


def iree_compile(mlir: Path, vmfb: Path) -> None:
    proc = subprocess.run([tool("iree-compile") or "iree-compile", *IREE_FLAGS, str(mlir), "-o", str(vmfb)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and vmfb.is_file(), proc.stderr[-3000:]


def iree_run(vmfb: Path, inputs: list[np.ndarray]) -> np.ndarray:
    import iree.runtime as ireert

    module = ireert.load_vm_flatbuffer_file(str(vmfb), driver="local-sync")
    result = module.main(*inputs)
    out = np.array(result.to_host(), copy=True)  # the host view lives only as long as the module and result
    del result, module
    return out


def resources(text: str) -> dict[str, bytes]:
    """The builtin dialect resources of an MLIR file: key -> blob (alignment header included)."""
    section = text[text.index("{-#"):text.index("#-}")]
    return {k: bytes.fromhex(v) for k, v in re.findall(r'(\w+): "0x([0-9A-Fa-f]*)"', section)}


# -- AlexNet --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, np.ndarray, np.ndarray]]:
    """(exported MLIR, the input, sknd run's output) for AlexNet with random weights of seed SEED. The
    folder (~800 MB with the flatbuffer and the IREE module the tests put beside the MLIR) is removed after."""
    tmp = tmp_path_factory.mktemp("alexnet")
    sknd("run", str(ALEXNET), "--random-weights", "--random-inputs", "--seed", str(SEED),
         "--save-inputs", str(tmp / "in"), "--output-dir", str(tmp / "out"))
    mlir = tmp / "alexnet.mlir"
    sknd("export", str(ALEXNET), "--random-weights", "--seed", str(SEED), "--tosa-mlir", str(mlir))
    x, expected = np.load(tmp / "in" / "input.npy"), np.load(tmp / "out" / "output.npy")
    assert x.shape == (1, 3, 224, 224) and expected.shape == (1, 1000)
    yield mlir, x, expected
    shutil.rmtree(tmp, ignore_errors=True)


def test_alexnet_mlir_runs_in_the_reference_model(alexnet: tuple[Path, np.ndarray, np.ndarray],
                                                  tmp_path: Path) -> None:
    require_oracle()
    mlir, x, expected = alexnet
    with mlir.open(encoding="utf-8") as fh:
        head = fh.read(4000)
    assert "(tensor<1x3x224x224xf32>) -> (tensor<1x1000xf32>)" in head
    assert "dense_resource<kernel1> : tensor<64x11x11x3xf32>" in head  # OIHW re-laid out once as CONV2D's OHWI
    fb = mlir.with_suffix(".tosa")
    tosa_opt_serialize(mlir, fb)
    got = run_flatbuffer(fb, [x], tmp_path, timeout=600)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-4, atol=1e-7)


def test_alexnet_compiles_and_runs_with_iree(alexnet: tuple[Path, np.ndarray, np.ndarray]) -> None:
    require_iree()
    mlir, x, expected = alexnet
    vmfb = mlir.with_suffix(".vmfb")
    iree_compile(mlir, vmfb)
    np.testing.assert_allclose(iree_run(vmfb, [x]).reshape(expected.shape), expected, rtol=1e-4, atol=1e-7)


# -- dense_resource blobs --------------------------------------------------------------------------


def test_weights_are_resource_blobs_with_the_exact_bytes(tmp_path: Path) -> None:
    out = tmp_path / "digits.mlir"
    sknd("export", str(DIGITS), "--tosa-mlir", str(out))
    text = out.read_text()
    assert text.rstrip().endswith("#-}") and "dialect_resources: {\n    builtin: {" in text
    blobs = resources(text)
    graph = skriptnd.load(DIGITS).compose()
    large = set()
    for t in graph.variables:
        w = np.asarray(graph.variable_source(t), np.float32)
        if w.nbytes < RESOURCE_MIN_BYTES:  # conv1_bias (8 floats) stays an inline literal
            assert t.name not in blobs
            # (maybe reshaped for its operator, e.g. fc_bias as [1, 10]: the same bytes)
            assert f'dense<"0x{w.astype("<f4").tobytes().hex().upper()}"> : tensor<' in text
            continue
        large.add(t.name)
        blob = blobs[t.name]
        assert blob[:4] == (4).to_bytes(4, "little")  # alignment header
        # the export writes the simplified program (skriptnd.tosa.program.build.graph_program): filters re-laid out
        # once (OIHW -> OHWI), matrices as MATMUL's batch of one; the blob holds the weights in that layout,
        # i.e. exactly the values of some axis permutation of the tensor (unit axes aside)
        typed = re.search(rf"dense_resource<{t.name}> : tensor<([0-9x]+)xf32>", text)
        assert typed is not None, t.name
        assert math.prod(int(d) for d in typed.group(1).split("x")) == w.size
        values = np.frombuffer(blob[4:], "<f4")
        squeezed = w.squeeze()
        assert any(np.array_equal(np.transpose(squeezed, perm).ravel(), values)
                   for perm in itertools.permutations(range(squeezed.ndim))), t.name
    assert large == {"conv1_filter", "conv2_filter", "conv2_bias", "fc_filter"} == set(blobs)
    inline = tmp_path / "inline.mlir"
    sknd("export", str(DIGITS), "--tosa-mlir", str(inline), "--inline-constants")
    assert "dense_resource" not in inline.read_text() and "{-#" not in inline.read_text()


def test_resource_and_inline_forms_compute_the_same(tmp_path: Path) -> None:
    require_oracle()
    x = np.load(DIGITS / "samples" / "5.npy").astype(np.float32).reshape(1, 1, 8, 8)
    expected = np.asarray(skriptnd.run(skriptnd.load(DIGITS).compose(), {"image": x})["probabilities"])
    for form in ([], ["--inline-constants"]):
        mlir, fb = tmp_path / "d.mlir", tmp_path / "d.tosa"
        sknd("export", str(DIGITS), "--tosa-mlir", str(mlir), *form)
        tosa_opt_serialize(mlir, fb)
        got = run_flatbuffer(fb, [x], tmp_path, timeout=600)
        np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-4, atol=1e-7)


def test_resource_keys_are_identifiers_and_unique() -> None:
    from skriptnd.tosa.mlir.text import _resource_key

    taken: set[str] = set()
    keys = [_resource_key(h, taken) for h in ("block1.fc.filter", "block1.fc.filter", "0w", "", "a-b")]
    assert keys == ["block1_fc_filter", "block1_fc_filter_1", "_0w", "const", "a_b"]


# -- IREE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 2])
def test_digits_compiles_and_runs_with_iree(batch: int, tmp_path: Path) -> None:
    require_iree()
    mlir, vmfb = tmp_path / "digits.mlir", tmp_path / "digits.vmfb"
    sknd("export", str(DIGITS), "--attrib", f"batch={batch}", "--tosa-mlir", str(mlir))
    iree_compile(mlir, vmfb)
    graph = skriptnd.load(DIGITS).compose(attribs={"batch": batch})
    samples = sorted((DIGITS / "samples").glob("*.npy"))
    for i in range(0, 4, batch):
        x = np.stack([np.load(p).astype(np.float32).reshape(1, 8, 8) for p in samples[i:i + batch]])
        expected = np.asarray(skriptnd.run(graph, {"image": x})["probabilities"])
        np.testing.assert_allclose(iree_run(vmfb, [x]).reshape(expected.shape), expected, rtol=1e-4, atol=1e-7)
