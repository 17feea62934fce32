"""Reading sources and writing outputs without ever leaving a half-written file behind."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import SourceFile, Span
from skriptnd.untrusted import UnsafeFile, read_regular

#: The largest source file read (a .sknd file this big is not source text someone wrote).
MAX_SOURCE_BYTES = 64 << 20


def _file_span(path: str, line: int = 1, col: int = 1) -> Span:
    return Span(path, line, col, line, col + 1)


def read_source(path: Path | str) -> tuple[SourceFile | None, list[Diagnostic]]:
    """The text of a .sknd file, or a located diagnostic saying why it cannot be had."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        return None, [Diagnostic(code="E0001", message=f"no such file: {name}", span=_file_span(name))]
    if p.is_dir():
        return None, [Diagnostic(code="E0003", message=f"'{name}' is a folder without main.sknd",
                                 span=_file_span(name), hint="pass a .sknd file or a model folder with main.sknd")]
    try:
        data = read_regular(p, MAX_SOURCE_BYTES)  # never a FIFO that blocks or a device that never ends
    except UnsafeFile as err:
        return None, [Diagnostic(code="E0002", message=f"cannot read {name}: it {err.reason}", span=_file_span(name),
                                 hint="SkriptND sources are regular text files")]
    except OSError as err:
        return None, [Diagnostic(code="E0002", message=f"cannot read {name}: {err.strerror or err}",
                                 span=_file_span(name))]
    return decode_source(data, name)


def decode_source(data: bytes, name: str) -> tuple[SourceFile | None, list[Diagnostic]]:
    if b"\x00" in data:
        offset = data.index(b"\x00")
        line = data.count(b"\n", 0, offset) + 1
        col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        return None, [Diagnostic(code="E0004", message="this is a binary file, not SkriptND source (it contains NUL bytes)",
                                 span=_file_span(name, line, col))]
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = len(data[data.rfind(b"\n", 0, err.start) + 1:err.start].decode("utf-8", "replace")) + 1
        return None, [Diagnostic(code="E0107", message=f"invalid UTF-8 byte 0x{data[err.start]:02x}; "
                                 "SkriptND sources must be UTF-8 text", span=_file_span(name, line, col),
                                 hint="re-save the file as UTF-8")]
    return SourceFile(name, text.replace("\r\n", "\n")), []


def output_target(path: Path | str) -> tuple[str, Path]:
    """Where writing an output named `path` goes: ("stream", path) for a character device or a FIFO (written
    through: replacing `/dev/null` or a FIFO someone reads would break them), ("replace", real path) for a
    regular file or a new name, symlinks followed (the link's target is replaced, the link stays). Anything
    else (a folder, a block device, a socket) is refused with an OSError saying what it is."""
    target = Path(path)
    try:
        info = os.stat(target)  # follows symlinks
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise OSError(err.errno, err.strerror or str(err), str(target)) from None
    if info is not None:
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            return "stream", target
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "it is a folder", str(target))
        if not stat.S_ISREG(info.st_mode):
            what = "a block device" if stat.S_ISBLK(info.st_mode) else "a socket or other special file"
            raise OSError(errno.EINVAL, f"it is {what}, not a file sknd writes to", str(target))
    if target.is_symlink():  # to a regular file, or dangling: write where it points
        return "replace", Path(os.path.realpath(target))
    return "replace", target


def _write_through(target: Path, payload: bytes) -> None:
    """Write into a character device or FIFO as it is (no temporary file, no rename). A FIFO nobody reads
    is an error (ENXIO from the non-blocking open) rather than a wait for ever."""
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO that no process is reading", str(target)) from None
        raise
    try:
        os.set_blocking(fd, True)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes | str) -> None:
    """Write through a temporary file in the same folder, then rename over the target (the target of a
    symlink; a character device or FIFO is written through instead: see `output_target`)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    kind, target = output_target(path)
    if kind == "stream":
        _write_through(target, payload)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        else:  # mkstemp makes the file private; a new file gets what open() would give it
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

