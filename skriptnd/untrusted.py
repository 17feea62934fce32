"""Reading files that came with an untrusted model, and keeping caches no one else can write.

A model folder downloaded from the internet names files (an NNEF variable's label, an ONNX
initializer's external `location`, a SkriptND variable's tensor file, a module import): each
must stay inside the folder once links are resolved, and be a regular file, so that a model never
makes us read `/etc/...`, block on a FIFO or grow `/dev/zero` into memory. Reading goes through
`open_regular`, which opens without blocking, refuses anything but a regular file and reports its
size from the open descriptor (no race between the check and the read).

Caches (parsed modules, checker results, lark's tables, compiled IREE modules) hold pickles or
compiled code: loading one runs what it says. `private_dir` only hands out a folder this user owns,
that nobody else can write, and `trusted_file` only a file of that kind; anything else is ignored.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


class UnsafeFile(Exception):
    """A file a model names that must not be read; `reason` says why in words for a diagnostic."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def contained(folder: str | os.PathLike[str], relative: str) -> Path:
    """`folder / relative`, checked to stay inside `folder` once `..` and symbolic links are resolved.

    An absolute `relative`, a `..` that climbs out, or a link leading outside raise `UnsafeFile`;
    the path returned is the resolved one (what will really be read)."""
    base = Path(folder).resolve()
    if "\0" in relative:
        raise UnsafeFile(relative, "contains a NUL character")
    if os.path.isabs(relative):
        raise UnsafeFile(relative, f"is an absolute path; a model may only name files inside its folder {base}")
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise UnsafeFile(relative, f"leads outside the model folder {base} (to {target}); a model may only "
                                   "name files inside its folder")
    return target


def open_regular(path: str | os.PathLike[str]) -> tuple[BinaryIO, int]:
    """The open file and its size, when `path` is a regular file; `UnsafeFile` for a FIFO, a device or a
    socket (opened with O_NONBLOCK, so a FIFO without a writer never blocks), `IsADirectoryError` for a
    folder, `OSError` when it cannot be opened at all."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(path, f"is not a regular file ({_kind(info.st_mode)}); only regular files are read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (see `open_regular`), refused with `UnsafeFile` when it is larger than
    `limit` bytes, before anything is read."""
    fh, size = open_regular(path)
    with fh:
        if limit is not None and size > limit:
            raise UnsafeFile(path, f"holds {size:,} bytes, more than the {limit:,} allowed")
        return fh.read(size)


# ---------------------------------------------------------------------------- caches


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/skriptnd``, else ``~/.cache/skriptnd`` (an XDG value that is not absolute is
    ignored, as the XDG specification says)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "skriptnd"


def _owned_private(info: os.stat_result) -> bool:
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    return (uid is None or info.st_uid == uid) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def private_dir(folder: str | os.PathLike[str]) -> Path | None:
    """`folder`, created (with its missing parents) mode 0700 when missing, when it is a real folder (not a
    link) that this user owns and that neither group nor others can write; None otherwise: a cache there
    could be planted by someone else, so it is not used."""
    path = Path(folder)
    missing = []
    probe = path.absolute()
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    try:
        for step in reversed(missing):  # each folder this creates is private, as `mkdir -m 700 -p` would not
            step.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not _owned_private(info):
        return None
    return path


def trusted_file(path: str | os.PathLike[str]) -> BinaryIO | None:
    """`path` opened for reading when it is a regular file (not a link) this user owns and nobody else
    can write, inside a folder of the same kind; None otherwise (missing, or possibly someone else's)."""
    try:
        parent = os.lstat(os.path.dirname(os.path.abspath(path)))
        if not stat.S_ISDIR(parent.st_mode) or not _owned_private(parent):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _owned_private(info):
            os.close(fd)
            return None
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
