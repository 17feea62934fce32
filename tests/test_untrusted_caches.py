"""Caches hold pickles and compiled code: none is ever loaded from a place another user could write.

Each test plants what another local user could plant (a pickle that creates a marker file when
loaded) where sknd used to look, or where it looks now but under the wrong owner or mode, and checks
that the marker never appears while sknd still works.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from skriptnd.syntax import cache, parse_module
from skriptnd.untrusted import private_dir, trusted_file

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("import math;\ngraph G {\n    @input { x: real[2]; }\n    @output { y: real[2]; }\n"
          "    @compose { y = math.exp(x); }\n}\n")


class Planted:
    """Unpickling this creates `marker`: the proof that a planted pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.marker), "w")


def _sknd(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("SKRIPTND_CACHE_DIR", "SKRIPTND_NO_CACHE")}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=full,
                          cwd=cwd, timeout=300)


def test_a_lark_cache_planted_in_the_shared_temp_folder_is_never_loaded(tmp_path: Path) -> None:
    """The old lark cache, `$TMPDIR/skriptnd-lark-<key>.cache`, was unpickled by every command that
    parsed: another user could run code as you. Now lark's cache lives in the private cache folder."""
    import lark

    from skriptnd.resources import grammar_path

    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    marker = tmp_path / "PWNED"
    grammar = grammar_path().read_text(encoding="utf-8")
    key = hashlib.sha256((lark.__version__ + grammar).encode()).hexdigest()[:16]
    payload = b"planted\n" + pickle.dumps(Planted(marker))
    (shared / f"skriptnd-lark-{key}.cache").write_bytes(payload)
    (tmp_path / "m.sknd").write_text(SOURCE)
    xdg = tmp_path / "xdg"
    proc = _sknd("check", "m.sknd", env={"TMPDIR": str(shared), "XDG_CACHE_HOME": str(xdg)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    # the cache folder is created private, and lark's tables are kept there
    assert stat.S_IMODE((xdg / "skriptnd").stat().st_mode) == 0o700
    assert list((xdg / "skriptnd").glob("lark-*.cache"))
    # a planted lark cache in a cache folder others can write is not loaded either
    (lark_file,) = (xdg / "skriptnd").glob("lark-*.cache")
    lark_file.write_bytes(payload)
    (xdg / "skriptnd").chmod(0o777)
    proc = _sknd("check", "m.sknd", env={"TMPDIR": str(shared), "XDG_CACHE_HOME": str(xdg)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    # nor one that others can write in a private folder
    (xdg / "skriptnd").chmod(0o700)
    lark_file.chmod(0o666)
    proc = _sknd("check", "m.sknd", env={"TMPDIR": str(shared), "XDG_CACHE_HOME": str(xdg)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


@pytest.fixture
def cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(folder))
    monkeypatch.delenv("SKRIPTND_NO_CACHE", raising=False)
    return folder


def _plant_over_entry(folder: Path, marker: Path) -> Path:
    cache.cached_parse(SOURCE, "m.sknd", parse_module)
    (entry,) = folder.rglob("*.pickle")
    entry.write_bytes(pickle.dumps(Planted(marker)))
    return entry


@pytest.mark.parametrize("where", ["folder writable by others", "entry writable by others", "entry is a link"])
def test_a_parse_cache_entry_others_could_write_is_not_loaded(cache_folder: Path, tmp_path: Path, where: str) -> None:
    marker = tmp_path / "PWNED"
    entry = _plant_over_entry(cache_folder, marker)
    if where == "folder writable by others":
        cache_folder.chmod(0o777)
    elif where == "entry writable by others":
        entry.chmod(0o666)
    else:
        elsewhere = tmp_path / "elsewhere.pickle"
        os.replace(entry, elsewhere)
        entry.symlink_to(elsewhere)
    tree, diags = cache.cached_parse(SOURCE, "m.sknd", parse_module)
    assert not marker.exists()
    assert tree == parse_module(SOURCE, "m.sknd")[0] and not diags


def test_the_users_own_entry_is_still_used(cache_folder: Path, tmp_path: Path) -> None:
    """The control: an entry of the user's own, private, is loaded (so the tests above test the rule)."""
    marker = tmp_path / "loaded"
    _plant_over_entry(cache_folder, marker)
    cache.cached_parse(SOURCE, "m.sknd", parse_module)
    assert marker.exists()


def test_the_check_cache_ignores_a_cache_folder_others_can_write(cache_folder: Path, tmp_path: Path) -> None:
    import skriptnd

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "main.sknd").write_text(SOURCE)
    cache_folder.mkdir()
    cache_folder.chmod(0o777)
    skriptnd.load(tmp_path / "model")
    assert not list(cache_folder.rglob("*.pickle"))  # nothing stored where others could swap it


def test_private_dir_and_trusted_file(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert made == tmp_path / "a" / "b"
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700  # missing parents too
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    assert private_dir(tmp_path / "open") is None
    (tmp_path / "link").symlink_to(made)
    assert private_dir(tmp_path / "link") is None
    (made / "f").write_bytes(b"x")
    with trusted_file(made / "f") as fh:  # type: ignore[union-attr]
        assert fh.read() == b"x"
    (made / "f").chmod(0o622)
    assert trusted_file(made / "f") is None
    os.mkfifo(made / "fifo", 0o600)
    assert trusted_file(made / "fifo") is None  # and it did not block


def test_the_iree_cache_refuses_a_folder_others_can_write(tmp_path: Path) -> None:
    """A compiled module found in a cache folder others can write would be their code: the cache is
    bypassed (the module compiled into a private temporary folder), with a warning."""
    from skriptnd.backends import iree_cache

    root = tmp_path / "iree"

    def build(folder: Path) -> None:
        (folder / iree_cache.MODULE).write_bytes(b"honest module")

    first = iree_cache.lookup_or_build(root, "k", build)
    assert first.compiled and stat.S_IMODE(root.stat().st_mode) == 0o700
    # someone swaps the module (and its manifest, so that it looks intact) in a root made world-writable
    (first.folder / iree_cache.MODULE).write_bytes(b"planted module")
    iree_cache._write_manifest(first.folder, {iree_cache.MODULE: iree_cache._digest(first.module)})
    root.chmod(0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entry = iree_cache.lookup_or_build(root, "k", build)
    assert entry.compiled and entry.folder != first.folder
    assert entry.module.read_bytes() == b"honest module"
    assert any("not used" in str(w.message) for w in caught)
    assert stat.S_IMODE(entry.folder.stat().st_mode) == 0o700


@pytest.mark.parametrize(("module", "folder"), [("skriptnd.compose.stdlib", "sknd_stdlib_program")])
def test_the_standard_library_program_never_imports_from_the_shared_temp_folder(
        module: str, folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Expanding a composite loads a program importing every standard module; its entry is named in the
    temporary folder, where another user could plant math.sknd: the standard one must be used."""
    import importlib
    import tempfile

    from skriptnd.resources import stdlib_dir

    owner = importlib.import_module(module)
    planted = tmp_path / folder / "math.sknd"
    planted.parent.mkdir()
    planted.write_text("operator exp { @input { x: real; } @output { y: real; } @lower { y = x; } }\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    owner.stdlib_program.cache_clear()
    try:
        program = owner.stdlib_program()
        assert program.modules["math"].path.resolve() == (stdlib_dir() / "math.sknd").resolve()
    finally:
        owner.stdlib_program.cache_clear()
