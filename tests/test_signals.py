"""Ctrl-C and SIGTERM during a write: the CLI works on a daemon thread (deepstack.py), so the signal is raised
in that thread too and waited for; the writers' cleanup removes their temporary files, nothing half-written
stays, and the exit status is 130 (SIGINT) or 143 (SIGTERM).

A real `sknd import` of an NNEF model with large weights is signalled the moment its temporary output
folder (`.out.*.tmp`) appears, i.e. during the write; another run is signalled at a random moment. The
command's TMPDIR is a private folder, so that its scratch folders can be checked too.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import write_graph

ROOT = Path(__file__).resolve().parent.parent
COUNT, SIZE = 6, 4 << 20  # six variables of 4 Mi floats: 96 MiB of tensor files to validate and copy


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    names = [f"w{i}" for i in range(COUNT)]
    body = "\n".join(f"    {n} = variable(shape = [1, {SIZE}], label = '{n}');" for n in names)
    sums = "\n".join(f"    {'y' if i == COUNT - 1 else f's{i}'} = add({'x' if i == 0 else f's{i - 1}'}, {n});"
                     for i, n in enumerate(names))
    text = f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [1, {SIZE}]);\n{body}\n{sums}\n}}\n"
    rng = np.random.default_rng(8)
    return write_graph(tmp_path_factory.mktemp("big") / "m", text,
                       {n: rng.standard_normal((1, SIZE), dtype=np.float32) for n in names})


def _start(big_model: Path, work: Path) -> subprocess.Popen:
    scratch = work / "scratch"
    scratch.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(scratch))
    # Ctrl-C as a user's terminal sends it: a suite started as a background job of a non-interactive shell
    # (`bash .ci/run &`) hands its children SIGINT ignored, and Python keeps an ignored SIGINT ignored, so the
    # import would run to the end and exit 0 (right for such a process, and not what is tested here)
    return subprocess.Popen([sys.executable, "-m", "skriptnd", "import", str(big_model), "-o", str(work / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_tmp(proc: subprocess.Popen, work: Path, timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".out.") and p.name.endswith(".tmp") for p in work.iterdir()):
            return True
        time.sleep(0.005)
    return False


def _nothing_left(work: Path) -> None:
    leftovers = [p.name for p in work.iterdir() if p.name.startswith(".out.")]
    assert leftovers == [], f"left behind: {leftovers}"
    assert [p.name for p in (work / "scratch").iterdir() if p.name.startswith("sknd-")] == [], "scratch left behind"
    assert (work / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_write_leaves_nothing_half_written(big_model: Path, tmp_path: Path, sig: int,
                                                                status: int) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = _start(big_model, tmp_path)
    if not _wait_for_tmp(proc, tmp_path):
        proc.kill()
        pytest.fail(f"the import finished or failed before writing: {proc.communicate()}")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists(), "a half-written output folder"
    _nothing_left(tmp_path)


def test_a_signal_at_any_moment_leaves_a_complete_output_or_none(big_model: Path, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = _start(big_model, tmp_path)
    time.sleep(random.Random(os.getpid()).uniform(0.5, 6.0))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err
    out = tmp_path / "out"
    if out.exists():  # finished before the signal: complete
        assert (out / "main.sknd").is_file() and len(list(out.glob("*.dat"))) == COUNT
    _nothing_left(tmp_path)
