"""The on-disk parse cache (skriptnd.syntax.cache): same trees as parsing, never stale, never fatal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skriptnd.syntax import cache, parse_module

SOURCE = """operator twice {
    @input { x: real[s..]; }
    @output { y: real[s..]; }
    @lower { y[i..] = 2.0 * x[i..], i < s; }
}
"""


class Counting(list):
    """The paths parsed so far; ``parse`` is parse_module, counted."""

    def parse(self, text: str, path: str) -> tuple[Any, list[Any]]:
        self.append(path)
        return parse_module(text, path)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Counting:
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SKRIPTND_NO_CACHE", raising=False)
    return Counting()


def test_a_second_parse_reads_the_same_tree_from_the_cache(counting: Counting) -> None:
    first = cache.cached_parse(SOURCE, "m.sknd", counting.parse)
    second = cache.cached_parse(SOURCE, "m.sknd", counting.parse)
    assert counting == ["m.sknd"]
    assert second == first and second[0] == parse_module(SOURCE, "m.sknd")[0]
    # spans name the file: another path is another entry
    cache.cached_parse(SOURCE, "other.sknd", counting.parse)
    assert counting == ["m.sknd", "other.sknd"]


def test_changed_text_misses_and_errors_are_not_stored(counting: Counting) -> None:
    parse = counting.parse
    cache.cached_parse(SOURCE, "m.sknd", parse)
    cache.cached_parse(SOURCE.replace("2.0", "3.0"), "m.sknd", parse)
    broken = SOURCE.replace("@output", "@output {")
    tree, diags = cache.cached_parse(broken, "m.sknd", parse)
    again = cache.cached_parse(broken, "m.sknd", parse)
    assert len(counting) == 4 and diags and again[1] == diags  # the diagnostics come back every time


def test_a_corrupt_entry_falls_back_to_parsing(counting: Counting, tmp_path: Path) -> None:
    parse = counting.parse
    cache.cached_parse(SOURCE, "m.sknd", parse)
    (entry,) = (tmp_path / "cache").rglob("*.pickle")
    entry.write_bytes(b"not a pickle")
    tree, diags = cache.cached_parse(SOURCE, "m.sknd", parse)
    assert tree == parse_module(SOURCE, "m.sknd")[0] and not diags and len(counting) == 2


def test_the_cache_can_be_turned_off_or_unwritable(counting: Counting, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    parse = counting.parse
    monkeypatch.setenv("SKRIPTND_NO_CACHE", "1")
    cache.cached_parse(SOURCE, "m.sknd", parse)
    cache.cached_parse(SOURCE, "m.sknd", parse)
    assert len(counting) == 2 and not (tmp_path / "cache").exists()
    monkeypatch.delenv("SKRIPTND_NO_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(blocker / "below-a-file"))
    tree, diags = cache.cached_parse(SOURCE, "m.sknd", parse)
    assert tree is not None and not diags


def test_loading_a_model_uses_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import skriptnd
    from skriptnd.semantics import modules

    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SKRIPTND_NO_CACHE", raising=False)
    monkeypatch.setattr(modules, "_STDLIB_CACHE", {})
    (tmp_path / "main.sknd").write_text("import math;\n" + SOURCE + """graph G {
    @input { x: real[3]; }
    @output { y: real[3]; }
    @compose { y = math.exp(twice(x)); }
}
""")
    skriptnd.load(tmp_path)
    stored = len(list((tmp_path / "cache").rglob("*.pickle")))
    assert stored >= 2  # the model's module and the standard modules it imports
    monkeypatch.setattr(modules, "_STDLIB_CACHE", {})
    monkeypatch.setattr(cache, "_store", lambda *a: pytest.fail("parsed again"))
    skriptnd.load(tmp_path)
