"""`sknd run` reads a graph attribute such as `batch` from the inputs' shapes when they determine it
(issue 25, item 6); an explicit --attrib wins, and disagreeing inputs infer nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import skriptnd
from skriptnd.compose.input_shapes import infer_attribs

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "models" / "digits" / "samples"


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_batch_is_read_from_the_input_and_each_row_is_its_own_run(tmp_path: Path) -> None:
    images = np.concatenate([np.load(SAMPLES / "3.npy"), np.load(SAMPLES / "7.npy")])
    np.save(tmp_path / "two.npy", images)
    done = sknd("run", "models/digits", "--input", f"image={tmp_path / 'two.npy'}", "--output-dir", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "composed for batch=2" in done.stderr
    got = np.load(tmp_path / "o" / "probabilities.npy")
    single = skriptnd.load(ROOT / "models" / "digits").compose()
    expected = np.concatenate([skriptnd.run(single, {"image": images[i:i + 1]})["probabilities"] for i in range(2)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_an_explicit_attrib_is_not_overridden(tmp_path: Path) -> None:
    np.save(tmp_path / "two.npy", np.concatenate([np.load(SAMPLES / "3.npy")] * 2))
    done = sknd("run", "models/digits", "--attrib", "batch=1", "--input", f"image={tmp_path / 'two.npy'}")
    assert done.returncode == 1 and "E0711" in done.stderr and "read from the input shapes" not in done.stderr
    assert "compose for it: --attrib batch=2" in done.stderr  # the hint of the mismatch


def test_disagreeing_inputs_infer_nothing(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import math;

graph G {
    @attrib {
        n: int = 1;
    }
    @input {
        a: real[n, 3];
        b: real[n, 3];
    }
    @output {
        c: real[n, 3];
    }
    @compose {
        c = math.add(a, b);
    }
}
""", encoding="utf-8")
    graph = skriptnd.load(tmp_path).compose()
    assert infer_attribs(graph, {"a": (4, 3), "b": (4, 3)}, []) == {"n": 4}
    assert infer_attribs(graph, {"a": (4, 3), "b": (5, 3)}, []) == {}
    assert infer_attribs(graph, {"a": (4, 3)}, ["n"]) == {}
    assert infer_attribs(graph, {"a": (1, 3)}, []) == {}  # what it was composed for already


def test_skriptnd_run_reads_batch_from_the_array_once_per_value() -> None:
    """The Python API as `sknd run`: a graph composed for batch=1 runs a batch of 2 (composed for batch=2,
    kept on the graph: the same composition for the next batch of 2), each row as its own batch-1 run."""
    images = np.concatenate([np.load(SAMPLES / "3.npy"), np.load(SAMPLES / "7.npy")])
    single = skriptnd.load(ROOT / "models" / "digits").compose()
    expected = np.concatenate([skriptnd.run(single, {"image": images[i:i + 1]})["probabilities"] for i in range(2)])
    got = skriptnd.run(single, {"image": images})["probabilities"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    rebound = single.__dict__["_rebound"]
    assert len(rebound) == 1 and next(iter(rebound.values())).attribs["batch"] == 2
    skriptnd.run(single, {"image": images[::-1]})
    assert len(single.__dict__["_rebound"]) == 1  # not composed again
    assert single.attribs["batch"] == 1  # the graph itself is unchanged
