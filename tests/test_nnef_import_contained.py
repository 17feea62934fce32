"""NNEF import: the `nnef` package's C++ parser runs in a child process (contained.py), so the segfault it
has on truncated text, a hang or a memory blow-up is a located E0831 diagnostic, never the death of `sknd`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nnef_oracle import nnef_module, write_graph

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import contained, import_nnef

ROOT = Path(__file__).resolve().parent.parent
SCALE = max(1, int(os.environ.get("SKRIPTND_FUZZ", "1") or 1))
TRUNCATED = "graph G( x ) -> ( y ) { f("
GRAPH = """graph G( x ) -> ( y, z )
{
    x = external(shape = [1, 2, 4, 4]);
    w = variable(shape = [3, 2, 1, 1], label = 'w');
    c = conv(x, w, 0.0, padding = [(0, 0), (0, 0)], stride = [1, 1]);
    y = relu(c);
    z = mean_reduce(c, axes = [2, 3]);
}
"""


def _sknd(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_truncated_graph_that_segfaults_the_parser_is_a_located_diagnostic(tmp_path: Path) -> None:
    """The nnef package itself dies of SIGSEGV on this text (checked first, so the test keeps meaning what
    it says); `sknd import` reports where the text is truncated and exits 1."""
    src = write_graph(tmp_path / "m", TRUNCATED)
    direct = subprocess.run([sys.executable, "-c", "import nnef, sys; nnef.parse_file(sys.argv[1])",
                             str(src / "graph.nnef")], capture_output=True, timeout=60)
    assert direct.returncode < 0, "the nnef parser no longer crashes on this text"
    res = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    # version line + blank line, then the graph: the text ends at line 3, column 27, inside 'f('
    assert "graph.nnef:3:27: error[E0831]: the nnef parser was killed by SIGSEGV" in res.stderr, res.stderr
    assert "'(' opened here is never closed (at " in res.stderr and "graph.nnef:3:26)" in res.stderr
    assert not (tmp_path / "out").exists()


def test_crash_in_process_api_is_a_diagnostic_error(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", TRUNCATED)
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    [diag] = err.value.diagnostics
    assert diag.code == "E0831" and (diag.span.line, diag.span.col) == (3, 27)
    # and the next import works: the dead child was replaced
    src = write_graph(tmp_path / "ok", "graph G( x ) -> ( y ) { x = external(shape = [2]); y = relu(x); }")
    assert (import_nnef(src, tmp_path / "out") / "main.sknd").is_file()


def test_contained_parse_gives_the_same_graph_as_the_parser_in_process(tmp_path: Path) -> None:
    """Identifiers, tuples, ordered attributes and quantization values survive the trip from the child."""
    nnef = nnef_module()
    src = write_graph(tmp_path / "m", GRAPH)
    (src / "graph.quant").write_text('"c": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n', encoding="utf-8")
    args = (str(src / "graph.nnef"), str(src / "graph.quant"))
    here = nnef.parse_file(*args, lowered=["relu"])
    there = contained.ContainedNnef(nnef).parse_file(*args, lowered=["relu"])
    assert there == here
    for a, b in zip(there.operations, here.operations, strict=True):
        assert type(a.attribs) is type(b.attribs)
        assert [type(v) for v in a.inputs.values()] == [type(v) for v in b.inputs.values()]
        assert [type(v) for v in a.attribs.values()] == [type(v) for v in b.attribs.values()]
    assert there.tensors["c"].quantization == here.tensors["c"].quantization


def test_parse_errors_keep_their_type(tmp_path: Path) -> None:
    nnef = nnef_module()
    with pytest.raises(nnef.Error, match=r"\[1:"):
        contained.ContainedNnef(nnef).parse_string("version 1.0; graph G( x ) -> ( y ) { y = relu(; }")


def _fake_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    script = tmp_path / "worker.py"
    script.write_text("import os, signal, sys, time\nsys.stdin.buffer.read(8)\n" + body, encoding="utf-8")
    contained._stop_worker()
    monkeypatch.setattr(contained, "WORKER", script)


def test_a_hanging_parser_is_killed_after_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_worker(tmp_path, monkeypatch, "time.sleep(600)\n")
    try:
        with pytest.raises(contained.ParserCrashed, match="did not finish within 1 s"):
            contained.ContainedNnef(nnef_module(), timeout=1).parse_string("version 1.0;")
        assert contained._worker is None
    finally:
        contained._stop_worker()


def test_a_killed_parser_names_its_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_worker(tmp_path, monkeypatch, "os.kill(os.getpid(), signal.SIGABRT)\n")
    try:
        with pytest.raises(contained.ParserCrashed, match="killed by SIGABRT"):
            contained.ContainedNnef(nnef_module()).parse_string("version 1.0;")
    finally:
        contained._stop_worker()


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="needs /proc")
def test_the_parser_process_runs_with_a_memory_and_cpu_limit() -> None:
    contained.ContainedNnef(nnef_module()).parse_string("version 1.0; graph G( x ) -> ( y ) "
                                                        "{ x = external(shape = [1]); y = copy(x); }")
    assert contained._worker is not None
    limits = Path(f"/proc/{contained._worker.proc.pid}/limits").read_text()
    address = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert address.split()[3] == str(4 << 30)
    cpu = next(line for line in limits.splitlines() if line.startswith("Max cpu time"))
    assert 301 <= int(cpu.split()[3]) <= 310  # per parse: 300 s more than the process has used


@settings(max_examples=25 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(GRAPH)))
def test_every_truncation_is_a_result_or_a_located_diagnostic(tmp_path: Path, cut: int) -> None:
    src = write_graph(tmp_path / f"m{cut}", GRAPH[:cut], {"w": [[[[1.0]], [[2.0]]]] * 3})
    out = tmp_path / f"out{cut}"
    try:
        import_nnef(src, out)
    except DiagnosticError as exc:
        lines = (src / "graph.nnef").read_text().count("\n") + 1
        assert all(d.code.startswith("E08") and 1 <= d.span.line <= lines for d in exc.diagnostics)
        assert not out.exists()
    else:
        assert (out / "main.sknd").is_file()
