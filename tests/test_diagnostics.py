"""Tests for skriptnd.diagnostics: exact text rendering, JSON shape, sink behaviour."""

from __future__ import annotations

import io
import json
import pickle
import re

import pytest

from skriptnd.diagnostics import (
    CODES,
    Diagnostic,
    DiagnosticError,
    DiagnosticSink,
    Note,
    Severity,
    print_diagnostics,
    render_json,
    render_summary,
    render_text,
    to_json,
)
from skriptnd.source import SourceFile, Span

PATH = "models/m.sknd"
TEXT = "graph G {\n\tx:\tint = 4\n        a: int = 42\n}\n"
SOURCES = {PATH: SourceFile(PATH, TEXT)}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def span(line: int, col: int, end_line: int, end_col: int, file: str = PATH) -> Span:
    return Span(file, line, col, end_line, end_col)


def render(*diags: Diagnostic, sources=SOURCES) -> str:
    return render_text(list(diags), sources, color=False)


# --------------------------------------------------------------------------------------------
# Plain-text rendering (exact)
# --------------------------------------------------------------------------------------------


def test_example_with_hint_and_notes() -> None:
    # '        a: int = 42' is 19 characters long, so column 20 is just past '42'.
    d = Diagnostic(
        "E0102",
        "expected ';' after attribute declaration",
        span(3, 20, 3, 21),
        hint="insert ';'",
        notes=(Note("graph starts here", span(1, 1, 1, 6)), Note("no location")),
    )
    assert render(d) == (
        "models/m.sknd:3:20: error[E0102]: expected ';' after attribute declaration\n"
        "   |\n"
        " 3 |         a: int = 42\n"
        "   |                    ^\n"
        "   = hint: insert ';'\n"
        "   = note: graph starts here (at models/m.sknd:1:1)\n"
        "   = note: no location\n"
    )


def test_underline_covers_span_width() -> None:
    d = Diagnostic("E0106", "bad number", span(3, 18, 3, 20))  # '42'
    out = render(d).splitlines()
    assert out[2] == " 3 |         a: int = 42"
    assert out[3] == "   |                  ^^"


def test_empty_span_gets_one_caret() -> None:
    d = Diagnostic("E0102", "x", span(1, 7, 1, 7))
    assert render(d).splitlines()[3] == "   |       ^"


def test_tabs_are_expanded_consistently_with_carets() -> None:
    # Line 2 is '\tx:\tint = 4': the tab stops (width 4) put 'x' at display column 4 and 'int' at 8.
    d = Diagnostic("E0102", "unexpected token", span(2, 5, 2, 8), Severity.WARNING)
    assert render(d) == (
        "models/m.sknd:2:5: warning[E0102]: unexpected token\n"
        "   |\n"
        " 2 |     x:  int = 4\n"
        "   |         ^^^\n"
    )


def test_multiline_span_underlines_to_end_of_first_line() -> None:
    d = Diagnostic("E0109", "misplaced", span(2, 2, 3, 5))
    lines = render(d).splitlines()
    assert lines[2] == " 2 |     x:  int = 4"
    assert lines[3] == "   |     " + "^" * 11  # from 'x' (display col 4) to the end (col 15)


def test_span_past_end_of_line_and_after_final_newline() -> None:
    past = Diagnostic("E0103", "eof", span(4, 2, 4, 2))  # line 4 is '}'
    assert render(past).splitlines()[3] == "   |  ^"
    eof = Diagnostic("E0103", "unexpected end of input", span(5, 1, 5, 1))
    assert render(eof) == (
        "models/m.sknd:5:1: error[E0103]: unexpected end of input\n"
        "   |\n"
        " 5 |\n"
        "   | ^\n"
    )


def test_missing_source_prints_only_header() -> None:
    d = Diagnostic("E0002", "cannot read file", span(1, 1, 1, 1, file="gone.sknd"), hint="check permissions")
    header = "gone.sknd:1:1: error[E0002]: cannot read file\n"
    hint = "   = hint: check permissions\n"
    assert render(d) == header + hint
    assert render(d, sources=None) == header + hint

    def unreadable(path: str) -> SourceFile | None:
        raise OSError("permission denied")

    assert render(d, sources=unreadable) == header + hint


def test_line_beyond_file_prints_only_header() -> None:
    d = Diagnostic("E0100", "oops", span(9, 1, 9, 2))
    assert render(d) == "models/m.sknd:9:1: error[E0100]: oops\n"
    # A file without a final newline has no line after its last one.
    src = {"a.sknd": SourceFile("a.sknd", "x")}
    assert render(Diagnostic("E0100", "oops", span(2, 1, 2, 1, "a.sknd")), sources=src) == (
        "a.sknd:2:1: error[E0100]: oops\n"
    )


def test_callable_source_lookup_and_wide_gutter() -> None:
    text = "\n" * 11 + "ab cd\n"
    calls: list[str] = []

    def lookup(path: str) -> SourceFile | None:
        calls.append(path)
        return SourceFile(path, text)

    d1 = Diagnostic("E0101", "first", span(12, 4, 12, 6, "b.sknd"))
    d2 = Diagnostic("E0101", "second", span(12, 1, 12, 2, "b.sknd"), Severity.NOTE)
    assert render(d1, d2, sources=lookup) == (
        "b.sknd:12:4: error[E0101]: first\n"
        "    |\n"
        " 12 | ab cd\n"
        "    |    ^^\n"
        "\n"
        "b.sknd:12:1: note[E0101]: second\n"
        "    |\n"
        " 12 | ab cd\n"
        "    | ^\n"
    )
    assert calls == ["b.sknd"]  # looked up once per render


def test_control_characters_are_neutralised_and_wide_chars_counted() -> None:
    src = {"c.sknd": SourceFile("c.sknd", "a\x1b[31mb 中x\n")}
    d = Diagnostic("E0101", "unexpected character", span(1, 2, 1, 3, "c.sknd"))
    lines = render(d, sources=src).splitlines()
    assert "\x1b" not in lines[2]
    assert lines[2] == " 1 | a\ufffd[31mb 中x"
    # '中' occupies two terminal cells, so a caret under 'x' must be shifted by two.
    d2 = Diagnostic("E0101", "x", span(1, 10, 1, 11, "c.sknd"))
    assert render(d2, sources=src).splitlines()[3] == "   | " + " " * 10 + "^"


def test_empty_input_renders_nothing() -> None:
    assert render_text([], SOURCES, color=False) == ""


# --------------------------------------------------------------------------------------------
# Colour
# --------------------------------------------------------------------------------------------


def test_colour_output_matches_plain_text_once_escapes_are_stripped() -> None:
    d = Diagnostic("E0102", "msg", span(3, 18, 3, 20), hint="h", notes=(Note("n"),))
    w = Diagnostic("E0102", "warn", span(2, 2, 2, 3), Severity.WARNING)
    coloured = render_text([d, w], SOURCES, color=True)
    assert "\x1b[" in coloured
    assert "\x1b[1;31merror[E0102]" in coloured
    assert ANSI.sub("", coloured) == render_text([d, w], SOURCES, color=False)


def test_print_diagnostics_plain_and_auto() -> None:
    d = Diagnostic("E0102", "msg", span(3, 18, 3, 20))
    expected = render_text([d], SOURCES, color=False)
    for color in (False, None):  # a StringIO is not a terminal, so auto means no colour
        buf = io.StringIO()
        print_diagnostics([d], SOURCES, file=buf, color=color)
        assert buf.getvalue() == expected
    buf = io.StringIO()
    print_diagnostics([d], SOURCES, file=buf, color=True)
    assert "\x1b[" in buf.getvalue()
    assert ANSI.sub("", buf.getvalue()) == expected


def test_print_diagnostics_defaults_to_current_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    d = Diagnostic("E0100", "oops", span(1, 1, 1, 2))
    print_diagnostics([d], SOURCES, color=False)
    assert capsys.readouterr().err.startswith("models/m.sknd:1:1: error[E0100]: oops\n")


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def test_json_is_lsp_shaped_with_zero_based_ranges() -> None:
    d = Diagnostic(
        "E0104",
        "unterminated string",
        span(3, 14, 4, 2),
        notes=(Note("opened here", span(1, 1, 1, 2, "other.sknd")), Note("bare")),
        hint="close it",
    )
    w = Diagnostic("E0100", "w", span(1, 1, 1, 1), Severity.WARNING)
    n = Diagnostic("E0100", "n", span(1, 1, 1, 1), Severity.NOTE)
    data = to_json([d, w, n])
    assert data[0] == {
        "code": "E0104",
        "severity": "error",
        "severityLevel": 1,
        "message": "unterminated string",
        "source": "sknd",
        "file": PATH,
        "range": {"start": {"line": 2, "character": 13}, "end": {"line": 3, "character": 1}},
        "hint": "close it",
        "notes": [
            {
                "message": "opened here",
                "file": "other.sknd",
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
            },
            {"message": "bare", "file": None, "range": None},
        ],
    }
    assert [(x["severity"], x["severityLevel"], x["hint"]) for x in data[1:]] == [
        ("warning", 2, None),
        ("note", 3, None),
    ]
    text = render_json([d, w, n])
    assert json.loads(text) == data
    assert text.startswith("[\n  {")


# --------------------------------------------------------------------------------------------
# Sink, summary, codes, exception
# --------------------------------------------------------------------------------------------


def test_sink_sorts_and_deduplicates() -> None:
    sink = DiagnosticSink()
    late = sink.error("E0102", "late", span(3, 5, 3, 6))
    early = sink.warning("E0102", "early", span(1, 2, 1, 3))
    same_pos_1 = sink.error("E0101", "tie first", span(2, 1, 2, 2))
    same_pos_2 = sink.error("E0101", "tie second", span(2, 1, 2, 2))
    other_file = sink.error("E0100", "a file", span(9, 9, 9, 9, file="a.sknd"))
    assert len(sink) == 5
    # exact duplicates are dropped; near-duplicates (different hint) are kept
    assert not sink.add(Diagnostic("E0102", "late", span(3, 5, 3, 6)))
    sink.extend([early, late])
    sink.error("E0102", "late", span(3, 5, 3, 6), hint="different")
    assert len(sink) == 6
    assert list(sink)[:2] == [late, early]  # iteration keeps report order
    order = sink.sorted()
    assert order[:5] == [other_file, early, same_pos_1, same_pos_2, late]
    assert order[5].hint == "different"


def test_sink_errors_and_raise() -> None:
    sink = DiagnosticSink()
    assert not sink.has_errors and len(sink) == 0
    sink.raise_if_errors()  # nothing to raise
    w = sink.warning("E0100", "meh", span(2, 1, 2, 2), notes=[Note("n")])
    assert w.severity is Severity.WARNING and w.notes == (Note("n"),)
    assert not sink.has_errors
    sink.raise_if_errors()
    e = sink.error("E0100", "bad", span(1, 1, 1, 2), hint="fix")
    assert sink.has_errors
    with pytest.raises(DiagnosticError) as info:
        sink.raise_if_errors()
    assert info.value.diagnostics == [e, w]
    assert str(info.value) == "models/m.sknd:1:1: error[E0100]: bad (and 1 more)"


def test_diagnostic_error_accepts_single_and_pickles() -> None:
    d = Diagnostic("E0001", "file not found", span(1, 1, 1, 1, file="x.sknd"))
    err = DiagnosticError(d)
    assert err.diagnostics == [d]
    assert str(err) == "x.sknd:1:1: error[E0001]: file not found"
    again = pickle.loads(pickle.dumps(err))
    assert again.diagnostics == [d]


@pytest.mark.parametrize(
    ("severities", "expected"),
    [
        ([], "no problems found"),
        ([Severity.ERROR], "1 error"),
        ([Severity.ERROR, Severity.ERROR, Severity.WARNING], "2 errors, 1 warning"),
        ([Severity.WARNING, Severity.WARNING], "2 warnings"),
        ([Severity.NOTE, Severity.ERROR], "1 error, 1 note"),
    ],
)
def test_summary_pluralisation(severities: list[Severity], expected: str) -> None:
    diags = [Diagnostic("E0100", "m", span(1, i + 1, 1, i + 2), s) for i, s in enumerate(severities)]
    assert render_summary(diags) == expected


def test_unknown_code_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="E9999"):
        Diagnostic("E9999", "nope", span(1, 1, 1, 1))
    with pytest.raises(ValueError):
        DiagnosticSink().error("bogus", "nope", span(1, 1, 1, 1))


def test_code_registry() -> None:
    assert CODES["E0102"] == "unexpected token"
    assert CODES["E0003"] == "not a model folder (no main.sknd)"
    assert {f"E010{i}" for i in range(10)} <= CODES.keys()
    assert {"E0001", "E0002", "E0004"} <= CODES.keys()
    for code, title in CODES.items():
        assert re.fullmatch(r"E\d{4}", code) and title
    assert Diagnostic("E0104", "m", span(1, 1, 1, 1)).title == "unterminated string"


def test_severity_is_str_and_coerced() -> None:
    assert Severity.ERROR == "error"
    d = Diagnostic("E0100", "m", span(1, 1, 1, 1), "warning")  # type: ignore[arg-type]
    assert d.severity is Severity.WARNING
    assert hash(d) == hash(Diagnostic("E0100", "m", span(1, 1, 1, 1), Severity.WARNING))


def test_long_source_lines_are_cut_around_the_caret() -> None:
    text = "x = " + "a + " * 100 + "$ + " + "b + " * 100 + "c;"
    col = text.index("$") + 1
    d = Diagnostic(code="E0101", message="unexpected '$'", span=Span("f.sknd", 1, col, 1, col + 1))
    out = render_text([d], {"f.sknd": SourceFile("f.sknd", text)}, color=False).splitlines()
    quoted, carets = out[2], out[3]
    assert quoted.startswith(" 1 | ...") and quoted.endswith("...")
    assert len(quoted) < 140
    assert quoted[carets.index("^")] == "$"
