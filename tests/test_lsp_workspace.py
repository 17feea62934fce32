"""The language server's engine, in process: the incremental parser, the workspace's checks
(same diagnostics as `sknd check`, re-checking only what an edit touched), unsaved buffers in
the module loader, and cursor location."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from skriptnd.check.program import check_program
from skriptnd.lsp import features
from skriptnd.lsp.incremental import IncrementalParser, split_pieces
from skriptnd.lsp.locate import word_at
from skriptnd.lsp.workspace import Workspace, same_file
from skriptnd.semantics.modules import load_program
from skriptnd.syntax import ast, parse_module

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "stdlib").glob("*.sknd")) + sorted((ROOT / "tests/data/spec_blocks").glob("*.sknd")) + [
    ROOT / "models/alexnet/main.sknd"]


def spans(module: ast.Module) -> list[object]:
    return [n.span for n in module.walk()] + [d.name_span for d in module.definitions] + \
        [c.span for c in module.comments]


@pytest.mark.parametrize("path", [p for p in CORPUS if "stdlib" in p.parts or p.name.startswith("ch4")][:40],
                         ids=lambda p: p.name)
def test_incremental_parse_equals_full_parse(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    parser = IncrementalParser()
    full, full_diags = parse_module(text, str(path))
    inc, inc_diags = parser.parse(text, str(path))
    assert inc == full and inc_diags == full_diags
    if full is not None:
        assert spans(inc) == spans(full)
    # lines inserted above the second definition: pieces below come from the cache, moved
    pieces = split_pieces(text)
    if len(pieces) > 2:
        at = len(pieces[0][1]) + len(pieces[1][1])
        moved_text = text[:at] + "\n\n" + text[at:]
        before = parser.pieces_parsed
        inc2, _ = parser.parse(moved_text, str(path))
        full2, _ = parse_module(moved_text, str(path))
        assert inc2 == full2 and spans(inc2) == spans(full2)
        assert parser.pieces_parsed - before <= 1  # only the piece that got the blank lines


def test_incremental_parse_falls_back_on_syntax_errors() -> None:
    text = "operator a {\n    @input { x: real[]; }\n}\n\noperator b {\n    @input { x: real[] }\n}\n" \
           "operator c {\n    @output { y: real[]; }\n}\n"
    assert IncrementalParser().parse(text, "t.sknd") == parse_module(text, "t.sknd")
    recovered = IncrementalParser().recover(text, "t.sknd")
    assert [d.name for d in recovered.definitions][::2] == ["a", "c"]


@pytest.mark.parametrize("path", CORPUS[::3], ids=lambda p: p.name)
def test_workspace_check_matches_sknd_check(path: Path) -> None:
    ws = Workspace()
    uri = path.as_uri()
    ws.open(uri, path.read_text(encoding="utf-8"))
    expected = [d for d in check_program(load_program(path)) if same_file(d.span.file, path)]
    assert set(ws.check(uri)) == set(expected)


def test_an_edit_rechecks_only_the_edited_definition() -> None:
    path = ROOT / "stdlib" / "nn.sknd"
    text = path.read_text(encoding="utf-8")
    ws = Workspace()
    uri = path.as_uri()
    ws.open(uri, text, 1)
    assert ws.check(uri) == []
    count = ws.definitions_checked
    edited = text.replace("groups: int = 1;", "groups: int = 2;", 1)  # in nn.conv
    ws.update(uri, edited, 2)
    assert ws.check(uri) == []
    assert ws.definitions_checked == count + 1
    # blank lines before conv: the piece above (linear) changes, every definition below moves;
    # only linear and the definitions that invoke it are checked again
    moved = edited.replace("operator conv {", "\n\noperator conv {", 1)
    ws.update(uri, moved, 3)
    assert ws.check(uri) == []
    definitions = ws.analysis(uri).module.ast.definitions
    assert ws.definitions_checked - (count + 1) < 5 < len(definitions)
    broken = moved.replace("stride > 0:", "strides > 0:", 1)
    ws.update(uri, broken, 4)
    diags = ws.check(uri)
    assert [d.code for d in diags] == ["E0201"]
    assert set(diags) == {d for d in check_program(load_program(path, sources={path: broken}))
                          if same_file(d.span.file, path)}


def test_load_program_takes_unsaved_sources_and_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("import ops.act;\ngraph G {\n    @input { x: real[4]; }\n"
                                        "    @output { y: real[4]; }\n    @compose { y = ops.act.relu(x); }\n}\n")
    sub = tmp_path / "ops" / "act.sknd"  # not on disk: only an editor buffer
    buffer = "import nn;\noperator relu {\n    @input { x: real[s..]; }\n    @output { y: real[s..]; }\n" \
             "    @compose { y = nn.relu(x); }\n}\n"
    program = load_program(tmp_path, sources={sub: buffer})
    assert check_program(program) == []
    assert program.modules["ops.act"].source.text == buffer
    alone = load_program(sub, sources={sub: buffer}, model_dir=tmp_path)
    assert alone.main is not None and alone.main.name == "ops.act" and check_program(alone) == []


def test_word_at() -> None:
    line = "        c = nn.conv{padding=1}(x, w) + 1e-5;"
    assert word_at(line, 1, line.index("conv") + 2).text == "nn.conv"
    word = word_at(line, 1, line.index("nn") + 1)
    assert word.upto_cursor() == "nn" and word.segment == 0
    assert word_at(line, 1, line.index("e-5") + 1) is None
    assert word_at(line, 1, line.index("x") + 2).text == "x"  # just after the word


def test_hover_on_local_symbols_of_a_stdlib_operator() -> None:
    path = ROOT / "stdlib" / "nn.sknd"
    text = path.read_text(encoding="utf-8")
    ws = Workspace()
    uri = path.as_uri()
    ws.open(uri, text)
    lines = text.split("\n")

    def hover(needle: str, offset: int = 0) -> str:
        line = next(i for i, t in enumerate(lines) if needle in t)
        result = features.hover(ws, uri, types.Position(line, lines[line].index(needle) + offset))
        assert result is not None
        return result.contents.value

    assert hover("input: real[s..(d + 2)]", len("input: real[s..(")).startswith("pack-length symbol `d`: `int`")
    assert hover("input: real[s..(d + 2)]", len("input: real[")).startswith("shape symbol `s`: `int..`")
    assert hover("paddings = padding[:d]").startswith("@using `paddings` = `padding[:d] + padding[d:] ??")
    assert hover("bi < b, ni < n;").startswith("index symbol `bi` < `b`: `int`")


@pytest.mark.parametrize(("old", "new"), [
    ("groups: int = 1;", "groups: int = 1"),  # one definition broken: parsed alone
    ("stride > 0:", "stride > > 0:"),
    ("@using {", "@usin {"),
    ("groups: int = 1;", "groups: int = (1;"),  # brackets unbalanced: the whole text is parsed
    ("# spec §4.4.1: Convolution", "@spec"),  # between definitions: the whole text is parsed
])
def test_syntax_errors_match_sknd_check(old: str, new: str) -> None:
    """With syntax errors, the pieces are parsed alone only when that gives what a parse of the
    whole text gives; either way the diagnostics are those of `sknd check`."""
    path = ROOT / "stdlib" / "nn.sknd"
    text = path.read_text(encoding="utf-8")
    ws = Workspace()
    uri = path.as_uri()
    ws.open(uri, text, 1)
    ws.check(uri)
    broken = text.replace(old, new, 1)
    ws.update(uri, broken, 2)
    expected = [d for d in check_program(load_program(path, sources={path: broken})) if same_file(d.span.file, path)]
    assert expected and set(ws.check(uri)) == set(expected)
    assert features.document_symbols(ws, uri)  # the outline survives (recovered tree)


def test_hover_definition_name_import_and_attribute(tmp_path: Path) -> None:
    text = ("import nn;\n\noperator double {\n    @input { x: real[s..]; }\n    @output { y: real[s..]; }\n"
            "    @compose { y = nn.conv{padding=0}(x, x); }\n}\n")
    path = tmp_path / "m.sknd"
    ws = Workspace()
    uri = path.as_uri()
    ws.open(uri, text)
    lines = text.split("\n")

    def at(needle: str, offset: int = 0) -> types.Position:
        line = next(i for i, t in enumerate(lines) if needle in t)
        return types.Position(line, lines[line].index(needle) + offset)

    assert features.hover(ws, uri, at("double")).contents.value.startswith("### `m.double`")
    assert features.hover(ws, uri, at("nn;")).contents.value.startswith("module `nn` (standard library)")
    attr = features.hover(ws, uri, at("padding=")).contents.value
    assert attr.startswith("attribute `padding` of `nn.conv`: `optional int..(2 * d)`")
    (loc,) = features.definition(ws, uri, at("padding="))
    assert loc.uri.endswith("/nn.sknd")
    assert features.hover(ws, uri, at("@compose")) is None


HOVER_GRAPH = """import nn;

graph G {
    @attrib {
        batch: int = 2;
    }
    @input {
        x: real[batch, 3, 8, 8];
    }
    @output {
        y: real[batch, 4, 3, 3];
    }
    @variable {
        w: real[4, 3, 3, 3];
    }
    @compose {
        c = nn.conv{stride=[2, 2], padding=0}(x, w);
        y = nn.relu(c);
    }
}
"""


def _hover_text(text: str, needle: str, offset: int = 0) -> str:
    ws = Workspace()
    uri = (ROOT / "nowhere" / "main.sknd").as_uri()
    ws.open(uri, text)
    lines = text.split("\n")
    line = next(i for i, t in enumerate(lines) if needle in t)
    result = features.hover(ws, uri, types.Position(line, lines[line].index(needle) + offset))
    assert result is not None
    return result.contents.value


def test_hover_on_an_intermediate_tensor_shows_its_composed_shape() -> None:
    """`c` of a stride-2 3x3 convolution without padding on 8x8 at batch 2: (8 - 3) // 2 + 1 = 3, so
    real[2, 4, 3, 3] (the checker alone knows only `real[]`)."""
    assert _hover_text(HOVER_GRAPH, "c = ").startswith("intermediate tensor `c`: `real[2, 4, 3, 3]`")
    assert _hover_text(HOVER_GRAPH, "relu(c)", len("relu(")).startswith("intermediate tensor `c`: `real[2, 4, 3, 3]`")


@pytest.mark.parametrize("broken", [
    "        y = nn.relu(c)\n",  # a syntax error after the statement (the ';' missing)
    "        y = nn.relu(c); z = nn.no_such_op(c);\n",  # an unknown operator after it
    "        y = nn.relu(c); q = nn.relu(missing);\n",  # an unknown name after it
])
def test_hover_shows_the_statements_shape_when_the_file_has_another_error(broken: str) -> None:
    text = HOVER_GRAPH.replace("        y = nn.relu(c);\n", broken)
    assert _hover_text(text, "c = ").startswith("intermediate tensor `c`: `real[2, 4, 3, 3]`")


def test_hover_composes_only_what_the_statement_reads() -> None:
    """An error in an unrelated earlier statement does not hide the shape; a statement that reads the broken
    one has none to show, and hover keeps the checker's type."""
    text = HOVER_GRAPH.replace("        c = nn.conv", "        e = nn.no_such_op(x);\n        c = nn.conv") \
        .replace("        y = nn.relu(c);\n", "        d = nn.relu(e);\n        y = nn.relu(c);\n")
    assert _hover_text(text, "c = ").startswith("intermediate tensor `c`: `real[2, 4, 3, 3]`")
    assert "real[2" not in _hover_text(text, "d = ")


def test_hover_in_an_operator_shows_symbolic_shapes() -> None:
    """An operator is not composable with numbers: its tensors' shapes are expressions in its input extents.
    A stride-2 3x3 convolution without padding: floor((h - 3) / 2) + 1 rows, as sympy writes it."""
    text = ("import nn;\n\noperator f {\n    @input {\n        x: real[n, c, h, w];\n        k: real[m, c, 3, 3];\n"
            "    }\n    @output {\n        y: real[n, m, h, w];\n    }\n    @compose {\n"
            "        h2 = nn.conv{stride=[2, 2], padding=0}(x, k);\n        y = nn.relu(h2);\n    }\n}\n")
    assert _hover_text(text, "h2 = ").startswith(
        "intermediate tensor `h2`: `real[n, m, floor(h/2 - 3/2) + 1, floor(w/2 - 3/2) + 1]`")


def test_hover_in_a_graph_with_an_attribute_without_default_shows_it_as_a_symbol() -> None:
    text = HOVER_GRAPH.replace("batch: int = 2;", "batch: int;")
    assert _hover_text(text, "c = ").startswith("intermediate tensor `c`: `real[batch, 4, 3, 3]`")
