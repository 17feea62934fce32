"""The on-disk cache of composition checks (skriptnd.check.cache): a second check of an
unchanged program reads what the first found, without composing again; a change anywhere in the
program (here: only in an imported module, the definition checked is untouched) is checked
afresh, so the cache can never hide an error."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from skriptnd.check import cache as check_cache
from skriptnd.check.graph import check_operator
from skriptnd.check.program import check_paths, check_program, shown
from skriptnd.semantics.modules import load_program

OPS = """import nn;

operator block {
    @attrib {
        k: int = FILTER_CHANNELS;
    }
    @input {
        x: real[b, c, h, w];
    }
    @variable {
        f: real[4, k, 1, 1];
    }
    @output {
        y: real[b, 4, h, w];
    }
    @compose {
        y = nn.conv(x, f);
    }
}
"""

MAIN = """import ops;

graph G {
    @input {
        x: real[1, 8, 6, 6];
    }
    @output {
        y: real[1, 4, 6, 6];
    }
    @compose {
        y = ops.block(x);
    }
}
"""


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKRIPTND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SKRIPTND_NO_CACHE", raising=False)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "main.sknd").write_text(MAIN, encoding="utf-8")
    (folder / "ops.sknd").write_text(OPS.replace("FILTER_CHANNELS", "8"), encoding="utf-8")
    return folder


class Counting:
    """check_operator, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, *args: object) -> list:
        self.runs += 1
        return check_operator(*args)  # type: ignore[arg-type]


def _block(folder: Path):  # noqa: ANN202
    program = load_program(folder)
    ops = program.modules["ops"]
    return program, ops, ops.ast.definitions[0]


def test_unchanged_program_is_read_from_the_cache(model: Path) -> None:
    counting = Counting()
    first = check_cache.cached_check(*_block(model), counting)
    second = check_cache.cached_check(*_block(model), counting)
    # the body alone: nn.conv's channel assertion holds only if the input has k = 8 channels
    assert [(d.code, d.message) for d in first] == [
        ("E0611", "the assertion of operator 'conv' holds only if c == 8")]
    assert counting.runs == 1 and second == first


def test_a_hit_replays_the_lookups_composing_made(model: Path) -> None:
    found = check_cache.cached_check(*_block(model), check_operator)
    program, ops, block = _block(model)
    seen: list[tuple[str, str]] = []
    original = program.resolve_operator

    def watching(name, from_module, span=None):  # noqa: ANN001, ANN202
        seen.append((from_module.name, name))
        return original(name, from_module, span)

    program.resolve_operator = watching
    assert check_cache.cached_check(program, ops, block, lambda *a: pytest.fail("checked again")) == found
    assert ("ops", "nn.conv") in seen  # the language server validates its own cache with these


def test_a_change_in_an_imported_module_is_checked_again(model: Path) -> None:
    assert shown(check_paths([str(model)]).diagnostics) == []
    assert shown(check_paths([str(model)]).diagnostics) == []  # from the cache
    # the filter now has 2 channels by default against the graph's 8: composing G (main.sknd, whose
    # text did not change) fails at the invocation inside ops.block, with the graph's concrete
    # extents; the operator on its own only warns (its assertion holds if c == 2)
    (model / "ops.sknd").write_text(OPS.replace("FILTER_CHANNELS", "2"), encoding="utf-8")
    errors = [d for d in check_program(load_program(model)) if d.severity == "error"]
    assert [(d.code, Path(d.span.file).name, d.span.line, d.span.col) for d in errors] == [
        ("E0501", "ops.sknd", 17, 13)]
    assert "input-channels = 8, filter-channels = 2" in errors[0].message


def test_no_cache_switch(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKRIPTND_NO_CACHE", "1")
    counting = Counting()
    check_cache.cached_check(*_block(model), counting)
    check_cache.cached_check(*_block(model), counting)
    assert counting.runs == 2
    assert not (model.parent / "cache").exists()


def test_unsaved_buffers_are_not_stored(model: Path) -> None:
    """An editor buffer that differs from its file is checked each time (an entry per keystroke
    would only fill the disk); one that says what the file says is stored."""
    counting = Counting()
    ops = model / "ops.sknd"
    edited = ops.read_text(encoding="utf-8").replace("y = nn.conv(x, f);", "y = nn.conv(x, f);  # edited")
    for text, runs in ((edited, 2), (ops.read_text(encoding="utf-8"), 1)):
        counting.runs = 0
        for _ in range(2):
            program = load_program(model, sources={ops: text})
            module = program.modules["ops"]
            check_cache.cached_check(program, module, module.ast.definitions[0], counting)
        assert counting.runs == runs


def test_reopened_file_is_not_parsed_again_and_edits_are_not_stored(model: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The language server's first parse of a file goes through the parse cache, piece by piece:
    a new server opening the unchanged file parses nothing; edits after the open store nothing."""
    from skriptnd.lsp import incremental

    text = "import nn;\n\n" + "\n".join(
        OPS.split("\n", 2)[2].replace("block", f"block{k}").replace("FILTER_CHANNELS", "8") for k in range(3))
    path = str(model / "many.sknd")
    first, _ = incremental.IncrementalParser().parse(text, path)
    entries = set((model.parent / "cache").rglob("*.pickle"))
    assert first is not None and len(first.definitions) == 3 and len(entries) >= 3

    def no_parse(*args: object) -> None:
        pytest.fail("parsed again")

    with monkeypatch.context() as patched:
        patched.setattr(incremental, "parse_module", no_parse)
        again, diags = incremental.IncrementalParser().parse(text, path)
    assert again == first and diags == []
    parser = incremental.IncrementalParser()
    parser.parse(text, path)
    parser.parse(text.replace("y = nn.conv(x, f);", "y = nn.conv(x, f); # edited", 1), path)
    assert parser.pieces_parsed == len(incremental.split_pieces(text)) + 1
    assert set((model.parent / "cache").rglob("*.pickle")) == entries


def test_a_reopened_file_reads_back_the_spans_a_parse_gives(model: Path) -> None:
    """Trees read from the cache are the trees a parse gives, spans included: NO_SPAN (a module
    without definitions has it) must come back as the very object `span is NO_SPAN` looks for."""
    from skriptnd.lsp.incremental import IncrementalParser
    from skriptnd.source import NO_SPAN
    from skriptnd.syntax import parse_module

    assert pickle.loads(pickle.dumps(NO_SPAN)) is NO_SPAN
    text = "# a header comment\n\n" + OPS.split("\n", 2)[2].replace("FILTER_CHANNELS", "8") * 2
    text = text.replace("operator block", "operator other", 1)
    path = str(model / "reopened.sknd")
    full, _ = parse_module(text, path)
    for _ in range(2):  # the second parser reads every piece from the cache
        again, _ = IncrementalParser().parse(text, path)
        assert [n.span for n in again.walk()] == [n.span for n in full.walk()]
