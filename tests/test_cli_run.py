"""`sknd run`: inputs from .npy/.dat, random inputs/weights, outputs written atomically, reference
comparison, and located diagnostics for every user error (never a traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skriptnd.io import write_tensor

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"
SAMPLES = DIGITS / "samples"
LABELS = json.loads((SAMPLES / "labels.json").read_text())


def sknd(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=cwd)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_outputs_inputs_and_expectations(tmp_path: Path) -> None:
    out, saved = tmp_path / "out", tmp_path / "inputs"
    run = sknd("run", str(DIGITS), "--input", f"image={SAMPLES / '5.npy'}", "--output-dir", str(out),
               "--save-inputs", str(saved))
    assert run.returncode == 0, run.stderr
    probs = np.load(out / "probabilities.npy")
    assert probs.shape == (1, 10) and int(probs.argmax()) == LABELS["5.npy"]
    assert np.array_equal(np.load(saved / "image.npy"), np.load(SAMPLES / "5.npy"))
    assert "class 5" in run.stdout
    assert sorted(p.name for p in out.iterdir()) == ["probabilities.npy"]  # no temporary files left
    # what was written is said, like every writer's "wrote FILE" (issue 29)
    assert f"wrote 1 output to {out}\n" in run.stderr and f"wrote 1 input to {saved}\n" in run.stderr
    same = sknd("run", str(DIGITS), "--input", f"image={SAMPLES / '5.npy'}", "--expect", str(out))
    assert same.returncode == 0 and "matches" in same.stderr
    other = sknd("run", str(DIGITS), "--input", f"image={SAMPLES / '6.npy'}", "--expect", str(out))
    assert other.returncode == 1 and "MISMATCH" in other.stderr


def test_dat_inputs_and_random_inputs(tmp_path: Path) -> None:
    write_tensor(tmp_path / "img.dat", np.load(SAMPLES / "3.npy"))
    run = sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'img.dat'}", "--output-dir", str(tmp_path))
    assert run.returncode == 0 and int(np.load(tmp_path / "probabilities.npy").argmax()) == 3
    rand = sknd("run", str(DIGITS), "--random-inputs", "--seed", "4", "--attrib", "batch=3", "--output-dir",
                str(tmp_path / "r"))
    assert rand.returncode == 0, rand.stderr
    probs = np.load(tmp_path / "r" / "probabilities.npy")
    assert probs.shape == (3, 10) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_wrong_input_shape_and_dtype_name_the_declaration(tmp_path: Path) -> None:
    np.save(tmp_path / "flat.npy", np.zeros((1, 8, 8), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((1, 1, 8, 8), np.int64))
    shape = sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'flat.npy'}", "--color", "never")
    assert shape.returncode == 1
    assert "error[E0711]: input 'image' must have shape real[batch, 1, 8, 8], here real[1, 1, 8, 8], " \
           "got [1, 8, 8]" in shape.stderr
    assert "main.sknd:11:9" in shape.stderr
    dtype = sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'ints.npy'}")
    assert dtype.returncode == 1 and "must be real" in dtype.stderr and "int64" in dtype.stderr


@pytest.mark.parametrize("via", ["numpy", "onnxruntime"])
def test_a_batch_the_graph_was_not_composed_for_names_the_attribute(tmp_path: Path, via: str) -> None:
    """A batch-2 array on a graph composed for batch=1 (given explicitly: without it, sknd run reads batch=2
    from the array): E0711 at the input's declaration, and the hint is the command-line fix (onnxruntime used
    to refuse it itself: an internal error, exit 3)."""
    np.save(tmp_path / "two.npy", np.zeros((2, 1, 8, 8), np.float32))
    run = sknd("run", str(DIGITS), "--attrib", "batch=1", "--input", f"image={tmp_path / 'two.npy'}", "--via", via,
               "--color", "never")
    assert run.returncode == 1, run.stderr
    assert "main.sknd:11:9: error[E0711]: input 'image' must have shape real[batch, 1, 8, 8]" in run.stderr
    assert "hint: the graph was composed for batch=1; compose for it: --attrib batch=2" in run.stderr
    fixed = sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'two.npy'}", "--via", via,
                 "--attrib", "batch=2", "--output-dir", str(tmp_path / "out"))
    assert fixed.returncode == 0, fixed.stderr
    assert np.load(tmp_path / "out" / "probabilities.npy").shape == (2, 10)


def test_missing_and_corrupt_weights_are_located(tmp_path: Path) -> None:
    model = tmp_path / "digits"
    model.mkdir()
    for f in DIGITS.glob("*.sknd"):
        (model / f.name).write_text(f.read_text())
    for f in DIGITS.glob("*.dat"):
        (model / f.name).write_bytes(f.read_bytes())
    (model / "main.Digits.fc_bias.dat").unlink()
    missing = sknd("run", str(model), "--input", f"image={SAMPLES / '1.npy'}")
    assert missing.returncode == 1
    assert "E0701" in missing.stderr and "fc_bias" in missing.stderr and "--random-weights" in missing.stderr
    assert sknd("run", str(model), "--input", f"image={SAMPLES / '1.npy'}", "--random-weights").returncode == 0
    (model / "main.Digits.fc_bias.dat").write_bytes((DIGITS / "main.Digits.fc_bias.dat").read_bytes()[:100])
    corrupt = sknd("run", str(model), "--input", f"image={SAMPLES / '1.npy'}")
    assert corrupt.returncode == 1 and "E0702" in corrupt.stderr
    write_tensor(model / "main.Digits.fc_bias.dat", np.zeros(11, np.float32))
    wrong = sknd("run", str(model), "--input", f"image={SAMPLES / '1.npy'}")
    assert wrong.returncode == 1 and "E0703" in wrong.stderr


def test_usage_errors(tmp_path: Path) -> None:
    assert sknd("run", str(DIGITS)).returncode == 2  # no input and no --random-inputs
    assert sknd("run", str(DIGITS), "--input", "image").returncode == 2
    assert sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'none.npy'}").returncode == 2
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    assert sknd("run", str(DIGITS), "--input", f"image={tmp_path / 'junk.npy'}").returncode == 2
    unknown = sknd("run", str(DIGITS), "--input", f"image={SAMPLES / '1.npy'}", "--input",
                   f"other={SAMPLES / '1.npy'}")
    assert unknown.returncode == 1 and "no input 'other'" in unknown.stderr


def test_random_weights_keep_normalisation_variances_positive() -> None:
    # batch-norm variances drawn like other weights would be negative half the time (NaN outputs)
    import skriptnd

    graph = skriptnd.load(ROOT / "models" / "resnet18").compose(random_weights=True, seed=3)
    variances = [graph.variable_source(t) for t in graph.variables if t.name.endswith(".variance")]
    assert len(variances) == 20 and all((v > 0).all() for v in variances)
