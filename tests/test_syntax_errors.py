"""Golden syntax-error cases (tests/data/syntax_errors/*.sknd) and the `sknd check` command line.

Each case lists every diagnostic the file must produce, as (line, col, code, message, hint):
exact 1-based line and column, exact code, `message` a substring of the message (most are the
whole message) and `hint` a substring of the hint, or None when there must be no hint. All of
them must be reported (multi-error files check recovery) and nothing else (no cascades).

Cases that show a parser problem are marked xfail(strict=True) with the reason, and list the
diagnostics the parser should produce.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from skriptnd.check.program import check_paths
from skriptnd.diagnostics import Diagnostic
from skriptnd.syntax.parser import lark_parser, parse

DATA = Path(__file__).resolve().parent / "data" / "syntax_errors"

SEMI = "insert ';'"
BLOCK_LIST = ("blocks are @dtype, @attrib, @input, @using, @constant, @variable, @output, @assert, @lower, "
              "@compose, @update, @quantize")

Expected = tuple[int, int, str, str, str | None]

ANY = "<any hint, or none>"  # only in XFAIL_CASES: the hint is not part of the expectation

CASES: dict[str, list[Expected]] = {
    # ---- a missing ';' is reported right after the construct, naming it
    "semi_attrib.sknd": [(3, 19, "E0102", "expected ';' after attribute declaration", SEMI)],
    "semi_input.sknd": [(3, 19, "E0102", "expected ';' after input declaration", SEMI)],
    "semi_output.sknd": [(6, 19, "E0102", "expected ';' after output declaration", SEMI)],
    "semi_assert.sknd": [(6, 14, "E0102", "expected ';' after assertion", SEMI)],
    "semi_using.sknd": [(6, 18, "E0102", "expected ';' after @using definition", SEMI)],
    "semi_lower.sknd": [(9, 27, "E0102", "expected ';' after @lower formula", SEMI)],
    "semi_compose.sknd": [(9, 20, "E0102", "expected ';' after statement", SEMI)],
    "semi_import.sknd": [(1, 12, "E0102", "expected ';' after import or version line", SEMI)],
    "semi_dtype.sknd": [(3, 16, "E0102", "expected ';' after generic type declaration", SEMI)],
    "semi_quantize.sknd": [(3, 25, "E0102", "expected ';' after quantization entry", SEMI)],
    # ---- lexical errors
    "unknown_block.sknd": [(5, 5, "E0101", "unknown block '@lowering'; " + BLOCK_LIST, "did you mean '@lower'?")],
    "unterminated_string.sknd": [(6, 16, "E0104", "unterminated string literal", 'close the string with "')],
    "bad_escape.sknd": [(6, 19, "E0105", "unknown escape sequence '\\q'; write '\\\\' for a backslash", None)],
    "format_unclosed.sknd": [(6, 21, "E0105", "unclosed '{' in string; write '\\{' for a literal brace", None)],
    "bad_char.sknd": [(3, 18, "E0101", "unexpected '$'", None)],
    "missing_brace_eof.sknd": [(5, 1, "E0103", "unexpected end of file; expected a block such as '@input' or '}'",
                                "a '{' may be missing its closing '}'")],
    # ---- grammar errors with a hint
    "attr_colon.sknd": [(6, 22, "E0102", "expected '=' in statement, found ':'",
                         "attribute values in an invocation are assigned with '='")],
    # a Python keyword argument: the invocation rewritten with attributes in braces (issue 29)
    "keyword_argument.sknd": [(11, 24, "E0102", "'alpha=' inside '(...)': an invocation's inputs are not named",
                               "attributes go in braces before the inputs: nn.relu{alpha=0.1}(x)")],
    "keyword_arguments_merge.sknd": [(12, 16, "E0102", "'name=' inside '(...)'", "attributes go in braces before "
                                      "the inputs: nn.relu{alpha=0.2, name=\"a=(\", beta=[1, 2]}(x)")],
    # documented (docs/grammar.md, shift/reduce 2): `[` continues the previous statement
    # `y = relu(x)` + newline + `[a, b] = ...` would read as `relu(x)[a, b]`: the ';' is missing
    "statement_continues_on_next_line.sknd": [(3, 20, "E0102", "expected ';' after statement", "insert ';'")],
    # ---- constructs the grammar accepts and the AST transform rejects
    "yield_not_last.sknd": [
        (9, 13, "E0109", "a block must end with 'yield' naming its results, e.g. 'yield y;'", None),
        (10, 13, "E0109", "'yield' must be the last statement of a block", None),
    ],
    "no_yield.sknd": [(9, 13, "E0109", "a block must end with 'yield' naming its results, e.g. 'yield y;'", None)],
    "loop_no_count.sknd": [(9, 13, "E0109", "a loop needs a 'for' clause, a 'while' condition or an iteration "
                                            "count '..(n)'", None)],
    "unroll_while.sknd": [(9, 13, "E0109", "'unroll' needs a compile-time iteration count; it cannot be used with "
                                           "a 'while' condition", "use 'do' for a condition-based loop")],
    "range_no_end.sknd": [(3, 14, "E0109", "a range in a list needs both a begin and an end, as in '[b:e]' or "
                                           "'[b:e:s]'", None)],
    "zip_outside_list.sknd": [(9, 18, "E0109", "a zip '(a, b)..' can only appear in a list", None)],
    "cast_abstract.sknd": [(6, 13, "E0109", "cannot cast to the abstract type 'num'; cast to int, real, bool or a "
                                            "generic type", None)],
    "dtype_concrete.sknd": [(3, 12, "E0109", "generic type 'T' must be restricted to 'type', 'arith' or 'num', "
                                             "not 'int'", None)],
    # ---- files that are not text, or too deep
    "non_utf8.sknd": [(3, 22, "E0107", "invalid UTF-8 byte 0xe9; SkriptND sources must be UTF-8 text",
                       "re-save the file as UTF-8")],
    "binary.sknd": [(2, 14, "E0004", "this is a binary file, not SkriptND source (it contains NUL bytes)", None)],
    # depth counts the two block braces too: the 255th '(' (column 13 + 254) is the 257th bracket
    "nesting_too_deep.sknd": [(3, 267, "E0108", "brackets nested more than 256 deep", "split the expression")],
    # ---- no errors at all
    "empty.sknd": [],
    "comments_only.sknd": [],
    # ---- several errors in one file: all reported, nothing more
    "multi_declarations.sknd": [
        (3, 19, "E0102", "expected ';' after attribute declaration", SEMI),
        (5, 19, "E0101", "unexpected '$'", None),
        (8, 17, "E0102", "expected an expression, '..' or '...' in @using definition, found ';'", None),
    ],
    "multi_checks.sknd": [
        (2, 5, "E0101", "unknown block '@lowering'", "did you mean '@lower'?"),
        (12, 21, "E0105", "unknown escape sequence '\\q'", None),
        (13, 27, "E0105", "unclosed '{' in string", None),
        (19, 12, "E0109", "generic type 'T' must be restricted to 'type', 'arith' or 'num', not 'real'", None),
        (22, 14, "E0109", "a range in a list needs both a begin and an end", None),
        (23, 13, "E0109", "cannot cast to the abstract type 'num'", None),
    ],
    "multi_semicolons.sknd": [
        (3, 19, "E0102", "expected ';' after input declaration", SEMI),
        (6, 19, "E0102", "expected ';' after output declaration", SEMI),
        (9, 27, "E0102", "expected ';' after @lower formula", SEMI),
    ],
    "multi_compose.sknd": [
        (6, 24, "E0102", "expected '}', a name, '(', '[' or '~' in statement, found ';'", None),
        (7, 13, "E0102", "unmatched ']'", "remove it or add the opening '['"),
        (8, 16, "E0102", "expected an expression, '..' or '...' in statement, found '*'", None),
    ],
}

# Cases showing parser problems: the diagnostics the parser SHOULD produce (code None: any code).
XFAIL_CASES: dict[str, tuple[str, list[tuple[int, int, str | None, str, str | None]]]] = {
    "semi_assert_message.sknd": (
        "missing ';' after a construct ending in a string is placed before the string (masked text is used "
        "to find the end of the construct): reported at 6:15, right after ':'",
        [(6, 36, "E0102", "expected ';' after assertion", SEMI)],
    ),
    "semi_attrib_string.sknd": (
        "missing ';' after a string default is reported at 3:20, right after '=', not after the string",
        [(3, 31, "E0102", "expected ';' after attribute declaration", SEMI)],
    ),
    "semi_quantize_type_args.sknd": (
        "'<' opens type arguments only before '(', '{' or ';' (LT_TARGS lookahead), so a missing ';' after "
        "'quant<real>' is reported at the '<' (3:17) as \"expected ';', ',', ':', '.', a name, '{' or ...\"",
        [(3, 23, "E0102", "expected ';' after quantization entry", SEMI)],
    ),
    "yield_missing_semi.sknd": (
        "cascade: after the missing ';' of 'yield t' (11:20) the yield is blanked, so the block is also reported "
        "as not ending with 'yield' (9:13)",
        [(11, 20, "E0102", "expected ';' after", SEMI)],
    ),
    "true_caps.sknd": (
        "'True' parses as a name: no diagnostic, so the \"booleans are written 'true'\" hint never shows",
        [(3, 19, None, "True", "booleans are written 'true'")],
    ),
    "shift_operator.sknd": (
        "'<<' is lexed as '<' '<', and the '<<' hint (errors._hint_for) never fires; message says found '<'",
        [(6, 16, "E0102", "'<<'", "'<?'")],
    ),
    "format_field_error.sknd": (
        "cascade inside a format field: a second 'unexpected end of file' at 6:28 after the field is blanked",
        [(6, 25, "E0105", "in format field: expected an expression, '..' or '...', found '*'", None)],
    ),
    "unclosed_paren.sknd": (
        "cascade: resync blanks through the '}' closing @compose, giving 'unexpected end of file' at 7:1",
        [(3, 19, "E0102", "expected ',' or ')' in statement, found ';'", None)],
    ),
    "stray_paren.sknd": (
        "a stray ')' is reported as a missing ';' with hint \"insert ';'\", which would not fix it",
        [(3, 23, "E0102", "')'", ANY)],
    ),
    "keyword_inside_expression.sknd": (
        "keywords are not reserved: 'if' is read as the name starting the next statement, so the error is at "
        "'b' (3:18) with \"expected ',', ']', ':', '=' or '..'\" instead of at 'if' (3:15)",
        [(3, 15, "E0102", "found 'if'", ANY)],
    ),
    "select_then_colon.sknd": (
        "inside a block the expected list contains 'end of file' (\"expected ';', '}', end of file, a name, ...\")",
        [(3, 21, "E0102", "found ':'", ANY)],
    ),
    "multi_missing_semi_then_error.sknd": (
        "recovery misses an error: resync blanks from the '{' of @compose through the ':' error, swallowing "
        "the statement with the missing ';' (9:20), which is never reported",
        [(9, 20, "E0102", "expected ';' after statement", SEMI),
         (10, 17, "E0102", "expected '=' in statement, found ':'", "'='")],
    ),
    "multi_unclosed_paren.sknd": (
        "cascade: after 'relu(x' the resync region runs through the '}' of @compose, giving spurious errors "
        "at 8:1 (found 'operator') and 13:1 (end of file), and the real error at 10:20 is never reported",
        [(3, 13, "E0102", "expected an expression or '{' in statement, found ';'", None),
         (5, 9, "E0102", "in statement, found 'w'", None),
         (10, 20, "E0102", "found '3'", ANY)],
    ),
}

TERMINAL_NAMES = sorted({t.name for t in lark_parser().terminals} | {"$END", "__ANON"})
TERMINAL_RE = re.compile(r"(?<![A-Za-z0-9_'])(" + "|".join(re.escape(n) for n in TERMINAL_NAMES) + r")(?![A-Za-z0-9_])")


def diagnose(name: str) -> list[Diagnostic]:
    """What `sknd check` reports for the file, in source order."""
    result = check_paths([str(DATA / name)])
    return sorted(result.diagnostics, key=lambda d: (d.span.line, d.span.col))


def assert_matches(diags: list[Diagnostic], expected: list, name: str) -> None:
    got = [(d.span.line, d.span.col, d.code, d.message, d.hint) for d in diags]
    shown = "\n".join(map(repr, got))
    assert len(got) == len(expected), f"{name}: expected {len(expected)} diagnostics, got:\n{shown}"
    for (line, col, code, message, hint), (eline, ecol, ecode, emsg, ehint) in zip(got, sorted(expected),
                                                                                   strict=True):
        assert (line, col) == (eline, ecol), f"{name}: position\n{shown}"
        if ecode is not None:
            assert code == ecode, f"{name}: code\n{shown}"
        assert emsg in message, f"{name}: message\n{shown}"
        if ehint is ANY:
            continue
        if ehint is None:
            assert hint is None, f"{name}: unexpected hint\n{shown}"
        else:
            assert hint is not None and ehint in hint, f"{name}: hint\n{shown}"


def assert_worded(diags: list[Diagnostic], name: str) -> None:
    """No Lark terminal names, no placeholder wording, and 'end of file' only when it was found."""
    for d in diags:
        for text in (d.message, d.hint or ""):
            m = TERMINAL_RE.search(text)
            assert m is None, f"{name}: terminal name {m.group(0)!r} in {text!r}"
            assert "something else" not in text, f"{name}: {text!r}"
        if d.code == "E0102" and "found" in d.message:
            expected_part = d.message.split(", found")[0]
            assert "end of file" not in expected_part, f"{name}: end of file expected mid-file: {d.message!r}"


def test_golden_files_exist() -> None:
    names = {p.name for p in DATA.glob("*.sknd")}
    assert set(CASES) | set(XFAIL_CASES) == names
    assert not set(CASES) & set(XFAIL_CASES)
    assert len(CASES) + len(XFAIL_CASES) >= 20
    assert sum(len(v) >= 3 for v in CASES.values()) >= 3


# Parser problems found while writing these tests and since fixed: their expectations hold now.
for _name in ("format_field_error.sknd", "multi_missing_semi_then_error.sknd", "select_then_colon.sknd",
              "semi_assert_message.sknd", "semi_attrib_string.sknd", "stray_paren.sknd", "true_caps.sknd",
              "unclosed_paren.sknd", "yield_missing_semi.sknd"):
    CASES[_name] = XFAIL_CASES.pop(_name)[1]
del XFAIL_CASES["keyword_inside_expression.sknd"], XFAIL_CASES["multi_unclosed_paren.sknd"]
del XFAIL_CASES["shift_operator.sknd"]
CASES["keyword_inside_expression.sknd"] = [(3, 15, "E0102", "unexpected keyword 'if'", None)]
CASES["multi_unclosed_paren.sknd"] = [
    (3, 13, "E0102", "expected an expression or '{' in statement, found ';'", None),
    (4, 17, "E0102", "'(' is never closed", "add the closing ')'"),
    (10, 20, "E0102", "in attribute declaration, found '3'", None),
]
CASES["shift_operator.sknd"] = [(6, 15, "E0102", "'<<' is not a SkriptND operator",
                                 "use '<?' for the minimum or '>?' for the maximum")]

@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    diags = diagnose(name)
    assert_matches(diags, CASES[name], name)
    assert_worded(diags, name)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=r)) for n, (r, _) in sorted(XFAIL_CASES.items())]
)
def test_golden_parser_problem(name: str) -> None:
    diags = diagnose(name)
    assert_matches(diags, XFAIL_CASES[name][1], name)
    assert_worded(diags, name)


@pytest.mark.parametrize("name", sorted(set(CASES) | set(XFAIL_CASES)))
def test_messages_never_name_terminals(name: str) -> None:
    for d in diagnose(name):
        for text in (d.message, d.hint or ""):
            m = TERMINAL_RE.search(text)
            assert m is None, f"{name}: terminal name {m.group(0)!r} in {text!r}"


@pytest.mark.parametrize(("text", "start"), [("b )", "expr"), ("~", "expr"), ("y = x; z", "stmt"),
                                             ("@lowering { }", "blocks"), ("{ yield x; } }", "block_stmt")])
def test_fragment_start_rules_report_one_error(text: str, start: str) -> None:
    _, diags = parse(text, "<test>", start)
    assert len(diags) == 1, [str(d) for d in diags]
    assert "something else" not in diags[0].message


def test_golden_positions_are_in_the_file() -> None:
    for name in sorted(set(CASES) | set(XFAIL_CASES)):
        lines = (DATA / name).read_bytes().split(b"\n")
        for d in diagnose(name):
            assert 1 <= d.span.line <= len(lines)
            assert 1 <= d.span.col <= len(lines[d.span.line - 1]) + 1
            assert (d.span.end_line, d.span.end_col) >= (d.span.line, d.span.col)


def test_parse_returns_partial_ast_after_recovery() -> None:
    text = (DATA / "multi_declarations.sknd").read_text(encoding="utf-8")
    module, diags = parse(text, "m.sknd")
    assert len(diags) == 3
    assert module is not None
    assert [d.name for d in module.definitions] == ["op"]


def test_no_errors_for_a_valid_module_with_everything() -> None:
    text = (Path(__file__).resolve().parent / "data" / "spec_blocks" / "ch2_1_03.sknd").read_text(encoding="utf-8")
    _, diags = parse(text, "conv.sknd")
    assert diags == []


# ---------------------------------------------------------------- command line

ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}


def sknd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=60)


def test_cli_text_output() -> None:
    path = DATA / "semi_attrib.sknd"
    proc = sknd("check", str(path), "--color", "never")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    assert f"{path}:3:19: error[E0102]: expected ';' after attribute declaration" in out
    assert "\x1b[" not in out
    lines = out.splitlines()
    quoted = next(i for i, ln in enumerate(lines) if ln.rstrip().endswith("a: int = 1"))
    caret_line = lines[quoted + 1]
    assert caret_line.strip("| ") == "^"
    # the caret is under column 19 of the quoted line (after the gutter)
    gutter = lines[quoted].index("|") + 2
    assert caret_line.index("^") - gutter == 18
    assert "hint: insert ';'" in out
    assert "1 error in 1 file" in out


def test_cli_multiple_errors_text() -> None:
    path = DATA / "multi_checks.sknd"
    proc = sknd("check", str(path), "--color", "never")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "Traceback" not in out
    headers = re.findall(rf"^{re.escape(str(path))}:(\d+):(\d+): error\[(E\d{{4}})\]:", out, re.M)
    assert [(int(a), int(b), c) for a, b, c in headers] == [(e[0], e[1], e[2]) for e in CASES["multi_checks.sknd"]]
    assert "6 errors in 1 file" in out


@pytest.mark.parametrize("name", ["multi_declarations.sknd", "multi_compose.sknd", "non_utf8.sknd"])
def test_cli_json_output(name: str) -> None:
    path = DATA / name
    proc = sknd("check", str(path), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, list)
    expected = CASES[name]
    assert len(data) == len(expected)
    for item, (line, col, code, message, hint) in zip(data, sorted(expected), strict=True):
        assert item["code"] == code
        assert message in item["message"]
        assert item["severity"] == "error"
        assert item["file"] == str(path)
        start = item["range"]["start"]
        assert (start["line"], start["character"]) == (line - 1, col - 1)
        end = item["range"]["end"]
        assert (end["line"], end["character"]) >= (start["line"], start["character"])
        assert (item["hint"] is None) == (hint is None)


def test_cli_ok_file_and_model_folder(tmp_path: Path) -> None:
    proc = sknd("check", str(DATA / "empty.sknd"), "--color", "never")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problems found" in proc.stderr
    model = tmp_path / "model"
    model.mkdir()
    (model / "main.sknd").write_text("graph G {\n    @input { x: real[4]; }\n}\n", encoding="utf-8")
    proc = sknd("check", str(model), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []


def test_cli_usage_errors() -> None:
    proc = sknd("check", "--no-such-option", str(DATA / "empty.sknd"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    proc = sknd()
    assert proc.returncode == 2


def test_cli_missing_path_and_folder_without_main(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sknd"
    proc = sknd("check", str(missing), "--format", "json")
    assert proc.returncode == 1
    (item,) = json.loads(proc.stdout)
    assert item["code"] == "E0001"
    assert str(missing) in item["message"]
    folder = tmp_path / "folder"
    folder.mkdir()
    proc = sknd("check", str(folder), "--color", "never")  # a folder with no .sknd file at all
    assert proc.returncode == 1
    assert "error[E0003]" in proc.stderr and "holds no .sknd file" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


KEYWORD_CALLS = [
    ("nn.relu(x, alpha=0.1)", "nn.relu{alpha=0.1}(x)"),
    ("nn.conv(x, w, stride = [2, 2], padding=0)", "nn.conv{stride=[2, 2], padding=0}(x, w)"),
    ("nn.conv{groups=1}(x, w, padding=(1 + 1) * 2)", "nn.conv{groups=1, padding=(1 + 1) * 2}(x, w)"),
    ("layout.reshape(x, shape=[n, -1], axis=0,)", "layout.reshape{shape=[n, -1], axis=0}(x)"),
    ('nn.relu("a)b=", name="c,d")', 'nn.relu{name="c,d"}("a)b=")'),  # brackets and '=' in strings do not count
]


@pytest.mark.parametrize(("written", "rewritten"), KEYWORD_CALLS)
def test_keyword_arguments_are_rewritten_into_a_statement_that_parses(written: str, rewritten: str) -> None:
    """The hint's invocation is exactly the braces form, and it parses where the keyword form did not."""
    body = "graph G {{\n    @compose {{\n        y = {};\n    }}\n}}\n"
    _, diags = parse(body.format(written), "k.sknd")
    (d,) = diags
    assert d.code == "E0102" and d.hint == f"attributes go in braces before the inputs: {rewritten}"
    assert parse(body.format(rewritten), "k.sknd")[1] == []
