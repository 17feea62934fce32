"""The on-disk cache of compiled IREE modules: one folder per content hash of (MLIR, compiler flags, IREE
version, host CPU when compiling for ``host``), under the user cache folder (``$XDG_CACHE_HOME/skriptnd``
or ``~/.cache/skriptnd``; ``SKRIPTND_CACHE_DIR`` overrides it).

The key is the MLIR's hash or, for a TOSA program, the hash of what its MLIR is a function of (the
program's operators and attributes, its constants' bytes, its input types and the exporter's source), so
that a cache hit does not even write the MLIR (the 47 MB of hex of ResNet-18's weights).

An entry is ``module.vmfb`` (the compiled program), ``params.irpa`` (the weights as an IREE parameter
archive, when the compiler exported any), ``manifest.json`` (the SHA-256 of both) and, once the module has
been compared with the numpy backend, ``verdict.json`` (skriptnd.backends.iree_check: pass or fail, with the
figures and the first diverging operator, so that the check runs once per module) and, for a TOSA program,
``work.json`` (its multiply-accumulates, which choose its CPU driver: skriptnd.backends.iree_threads). An entry is
published by renaming a finished temporary folder, so a crash mid-compile leaves no half entry; an entry
whose files no longer match its manifest (a truncated or overwritten file) is removed with a warning and
rebuilt, never loaded. (A file with the size, modification time and inode recorded at publication is
taken as unchanged without re-hashing it, so that a cached start does not read the weights twice.)

A cached module is compiled code that the runtime executes, so the cache folder must be this user's
alone: it is created 0700, and a folder that is a link, someone else's or writable by others is not
used (skriptnd.untrusted.private_dir): the module is then compiled into a private temporary folder,
removed at exit, with a warning saying why.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from skriptnd.fileio import write_atomic
from skriptnd.untrusted import private_dir, user_cache_root

MANIFEST = "manifest.json"
MODULE = "module.vmfb"
PARAMS = "params.irpa"


def cache_root(override: str | None = None) -> Path:
    """The folder of compiled modules: ``override``, else $SKRIPTND_CACHE_DIR, else the XDG user cache."""
    if override:
        return Path(override)
    if os.environ.get("SKRIPTND_CACHE_DIR"):
        return Path(os.environ["SKRIPTND_CACHE_DIR"])
    return user_cache_root() / "iree"


def host_identity() -> str:
    """What ``--iree-llvmcpu-target-cpu=host`` resolves against: the machine and its CPU features."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    cpu += line
                if line.strip() == "":
                    break
    except OSError:
        cpu = platform.processor()
    return f"{platform.machine()}|{cpu}"


def content_key(content: Iterable[bytes], flags: Iterable[str], version: str) -> str:
    """The entry name: SHA-256 of what determines the module (the MLIR, or what the MLIR is a function of),
    the compiler flags, the IREE version and, for ``target-cpu=host``, this machine's CPU."""
    flags = list(flags)
    h = hashlib.sha256()
    for part in content:
        h.update(part)
    for part in (*flags, version, host_identity() if any(f.endswith("=host") for f in flags) else ""):
        h.update(b"\0" + part.encode("utf-8"))
    return h.hexdigest()


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Entry:
    folder: Path
    compiled: bool  # compiled now (False: found in the cache)

    @property
    def module(self) -> Path:
        return self.folder / MODULE

    @property
    def params(self) -> Path | None:
        p = self.folder / PARAMS
        return p if p.is_file() else None


def _stat(path: Path) -> list[int]:
    """What changes when a file is rewritten, truncated or replaced: size, modification time, inode."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _valid(folder: Path) -> str | None:
    """Why the entry cannot be used (None: it can). A file whose size, modification time and inode are those
    recorded when the entry was published is not hashed again (hashing ResNet-18's 47 MB of parameters would
    be a fifth of a cached start); any other file is checked against its SHA-256."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        stats = manifest.get("stats", {})
        if MODULE not in files:
            return "no compiled module"
        hashed = False
        for name, digest in files.items():
            if stats.get(name) == _stat(folder / name):
                continue
            if _digest(folder / name) != digest:
                return f"{name} does not match its checksum"
            hashed = True
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"unreadable manifest ({err})"
    if hashed:  # an entry from before the stats were recorded, or copied: record them for the next start
        try:
            _write_manifest(folder, files)
        except OSError:  # a read-only cache still works: it is only hashed at every start
            pass
    return None


def _write_manifest(folder: Path, files: dict[str, str]) -> None:
    stats = {name: _stat(folder / name) for name in files}
    write_atomic(folder / MANIFEST, json.dumps({"files": files, "stats": stats}))


def lookup_or_build(root: Path, key: str, build: Callable[[Path], None]) -> Entry:
    """The cache entry ``key``; when missing (or corrupt: removed with a warning), ``build(folder)`` writes
    ``module.vmfb`` (and maybe ``params.irpa``) into a fresh folder, which is then published. A ``root``
    that is not this user's private folder is not used (see the module docstring)."""
    if private_dir(root) is None:
        warnings.warn(f"the IREE module cache {root} is not used: it is not a folder of this user's that only "
                      "this user can write (a compiled module there could be someone else's code); compiling "
                      "into a temporary folder", RuntimeWarning, stacklevel=3)
        scratch = Path(tempfile.mkdtemp(prefix="sknd-iree-"))
        atexit.register(shutil.rmtree, scratch, True)
        build(scratch)
        return Entry(scratch, compiled=True)
    folder = root / key
    if folder.is_dir():
        problem = _valid(folder)
        if problem is None:
            return Entry(folder, compiled=False)
        warnings.warn(f"the cached IREE module {folder} is corrupt ({problem}); recompiling", RuntimeWarning,
                      stacklevel=3)
        shutil.rmtree(folder, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=root))
    try:
        build(tmp)
        files = {name: _digest(tmp / name) for name in (MODULE, PARAMS) if (tmp / name).is_file()}
        _write_manifest(tmp, files)  # renaming the folder keeps the files' stats
        try:
            os.replace(tmp, folder)
        except OSError:  # another process published it first: use theirs
            if _valid(folder) is not None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Entry(folder, compiled=True)
