"""`-o` never replaces what it should write into: a character device or a FIFO is written through, a
symlink is followed (its target replaced atomically, the link kept), a socket or block device is refused
with a usage error; nothing is left behind (no `.NAME.*.tmp` or `.NAME.*.old`), no user file clobbered.

The real /dev/null is only ever checked to still be a character device after a run: the character-device
case itself is tested on a clone made with mknod in a temporary folder (skipped where that is not allowed).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skriptnd.fileio import output_target, write_atomic

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits"
SCALE = max(1, int(os.environ.get("SKRIPTND_FUZZ", "1") or 1))


def _sknd(*args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=timeout)


def _leftovers(*folders: Path) -> list[str]:
    return [p.name for f in folders for p in f.iterdir() if p.name.endswith((".tmp", ".old"))]


@pytest.fixture(scope="module")
def composed_text() -> str:
    res = _sknd("compose", str(DIGITS))
    assert res.returncode == 0, res.stderr
    return res.stdout


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def run() -> None:
        with open(path, "rb") as fh:
            into.append(fh.read())
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_compose_into_a_fifo_writes_through_it(tmp_path: Path, composed_text: str) -> None:
    fifo = tmp_path / "graph.txt"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _read_fifo(fifo, got)
    res = _sknd("compose", str(DIGITS), "-o", str(fifo))
    reader.join(30)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced by a file"
    assert got == [composed_text.encode()]
    assert _leftovers(tmp_path) == []


def test_a_fifo_nobody_reads_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "graph.txt"
    os.mkfifo(fifo)
    res = _sknd("compose", str(DIGITS), "-o", str(fifo), timeout=120)
    assert res.returncode == 2 and "no process is reading" in res.stderr, res.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and _leftovers(tmp_path) == []


def test_a_character_device_is_written_through(tmp_path: Path) -> None:
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
        null.write_bytes(b"probe")  # a nodev mount refuses to open it
    except (PermissionError, OSError) as err:
        pytest.skip(f"cannot make a character device here: {err}")
    assert output_target(null) == ("stream", null)
    res = _sknd("compose", str(DIGITS), "-o", str(null))
    assert res.returncode == 0, res.stderr
    assert stat.S_ISCHR(null.lstat().st_mode), "the character device was replaced by a file"
    assert _leftovers(tmp_path) == []


def test_dev_null_stays_a_character_device() -> None:
    assert output_target("/dev/null") == ("stream", Path("/dev/null"))  # checked before /dev/null is named
    res = _sknd("compose", str(DIGITS), "-o", "/dev/null")
    assert res.returncode == 0, res.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        res = _sknd("compose", str(DIGITS), "-o", str(path))
    finally:
        sock.close()
    assert res.returncode == 2 and "socket" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert stat.S_ISSOCK(path.lstat().st_mode)


def test_fmt_writes_through_a_symlinked_source(tmp_path: Path) -> None:
    real = tmp_path / "real" / "main.sknd"
    real.parent.mkdir()
    messy = "graph G{@input{x:real[2];}@output{y:real[2];}@compose{y=x+x;}}\n"
    real.write_text(messy, encoding="utf-8")
    expected = tmp_path / "copy.sknd"
    expected.write_text(messy, encoding="utf-8")
    assert _sknd("fmt", str(expected)).returncode == 0
    link = tmp_path / "link.sknd"
    link.symlink_to(real)
    res = _sknd("fmt", str(link))
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8") != messy
    assert _leftovers(tmp_path, real.parent) == []


def test_export_onnx_through_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    target = tmp_path / "out" / "model.onnx"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    res = _sknd("export", str(DIGITS), "--onnx", str(link))
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert onnx.load(str(target)).graph.name
    assert _leftovers(tmp_path, target.parent) == []


def test_import_into_a_symlink_to_an_empty_folder_leaves_no_old_link(tmp_path: Path) -> None:
    nnef_graph = tmp_path / "m" / "graph.nnef"
    nnef_graph.parent.mkdir()
    nnef_graph.write_text("version 1.0;\ngraph G( x ) -> ( y ) { x = external(shape = [2]); y = relu(x); }\n",
                          encoding="utf-8")
    folder = tmp_path / "real"
    folder.mkdir()
    link = tmp_path / "out"
    link.symlink_to(folder)
    res = _sknd("import", str(nnef_graph.parent), "-o", str(link))
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and (folder / "main.sknd").is_file()
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        res = _sknd("compose", str(DIGITS), "-o", str(folder / "g.txt"))
    finally:
        folder.chmod(0o755)
    assert res.returncode == 2 and "not writable" in res.stderr
    assert list(folder.iterdir()) == []


# ---------------------------------------------------------------- property-based: write_atomic itself

KINDS = st.sampled_from(["missing", "file", "link-file", "link-dangling", "link-link", "fifo-read", "fifo-idle",
                         "folder", "link-folder", "socket"])


@settings(max_examples=60 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=KINDS, data=st.binary(max_size=3000))
def test_write_atomic_on_every_kind_of_path(tmp_path_factory: pytest.TempPathFactory, kind: str, data: bytes) -> None:
    """Each kind of path gets what it should: regular files (through links) the new bytes, a FIFO with a
    reader the bytes in its stream, the rest an OSError, and in every case the link stays a link, the
    special file stays what it was, and no temporary file is left."""
    root = tmp_path_factory.mktemp("w")
    (root / "d").mkdir()
    path = root / "p"
    real = root / "d" / "real"
    sock = None
    reader = None
    if kind == "file":
        path.write_bytes(b"old")
    elif kind in ("link-file", "link-link"):
        real.write_bytes(b"old")
        if kind == "link-file":
            path.symlink_to(real)
        else:
            (root / "d" / "mid").symlink_to(real)
            path.symlink_to(root / "d" / "mid")
    elif kind == "link-dangling":
        path.symlink_to(real)
    elif kind.startswith("fifo"):
        os.mkfifo(path)
        if kind == "fifo-read":  # a reader already there (a non-blocking open: no thread racing the writer)
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link-folder":
        path.symlink_to(root / "d")
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    before = path.lstat().st_mode if os.path.lexists(path) else None
    try:
        write_atomic(path, data)
        failed = None
    except OSError as err:
        failed = err
    finally:
        if sock is not None:
            sock.close()
    got = b""
    if reader is not None:
        while chunk := os.read(reader, 1 << 16):
            got += chunk
        os.close(reader)
    if kind in ("missing", "file"):
        assert failed is None and path.read_bytes() == data and stat.S_ISREG(path.lstat().st_mode)
    elif kind.startswith("link-") and kind != "link-folder":
        assert failed is None and path.is_symlink() and real.read_bytes() == data
    elif kind == "fifo-read":
        assert failed is None and got == data
    else:
        assert failed is not None and failed.strerror
    if before is not None:
        assert stat.S_IFMT(path.lstat().st_mode) == stat.S_IFMT(before)
    assert _leftovers(root, root / "d") == []
    shutil.rmtree(root)
