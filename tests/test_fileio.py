"""Atomic writes: the target is replaced whole, new files get ordinary permissions, existing ones keep theirs."""

from __future__ import annotations

import os
from pathlib import Path

from skriptnd.fileio import write_atomic


def test_new_file_gets_the_permissions_open_would_give(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.txt", "hello")
    finally:
        os.umask(umask)
    assert (tmp_path / "new.txt").read_text() == "hello"
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["new.txt"]


def test_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new" and target.stat().st_mode & 0o777 == 0o600
