"""The commands say what they are doing while a step takes a while (issue 29, item 6): `sknd import` shows
the importer's steps, the model commands their loading and composing, on a terminal's status line (rich);
a pipe or a log gets none of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from onnx_models import require_onnx

from skriptnd.interop.onnx_import import import_onnx

ROOT = Path(__file__).resolve().parents[1]


def _relu_model(path: Path) -> Path:
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_the_importer_tells_each_step_in_order(tmp_path: Path) -> None:
    steps: list[str] = []
    import_onnx(_relu_model(tmp_path / "m.onnx"), tmp_path / "out", progress=steps.append)
    assert [s.split()[0] for s in steps] == ["reading", "normalizing", "converting", "writing"], steps
    assert steps[0] == "reading m.onnx" and steps[2] == "converting 2 nodes"


def test_a_pipe_gets_no_status_line(tmp_path: Path) -> None:
    model = _relu_model(tmp_path / "m.onnx")
    done = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(model), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "importing" not in done.stderr and "\r" not in done.stderr, done.stderr
    assert "wrote" in done.stderr


def _on_terminal(args: list[str]) -> str:
    """What a command writes to stderr when stderr is a terminal (a pseudo-terminal here)."""
    import os
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "skriptnd", *args], stdout=subprocess.DEVNULL, stderr=follower,
                            cwd=ROOT, env=env)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=300) == 0
    os.close(leader)
    return seen.decode("utf-8", "replace")


def test_a_terminal_gets_the_import_status_line(tmp_path: Path) -> None:
    text = _on_terminal(["import", str(_relu_model(tmp_path / "m.onnx")), "-o", str(tmp_path / "out")])
    assert "importing m.onnx" in text and "wrote" in text, text


def test_run_shows_loading_and_composing_on_a_terminal_only() -> None:
    args = ["run", "models/digits", "--input", "image=models/digits/samples/3.npy"]
    text = _on_terminal(args)
    assert "loading and checking digits" in text and "composing the main graph" in text, text
    piped = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert piped.returncode == 0 and "loading" not in piped.stderr and "composing" not in piped.stderr
