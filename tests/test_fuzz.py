"""Robustness: mutated spec blocks and stdlib sources never crash the parser or the CLI.

The corpus is every spec block (parsed with the start rule of its kind) and every definition of
the stdlib modules. Mutations work on a rough token list: delete, duplicate or swap tokens,
insert odd characters (quotes, braces, '@', '#', non-ASCII, NUL, ...), truncate. `parse` must
return (node, diagnostics) with only Diagnostic objects whose spans lie in the text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skriptnd.diagnostics import Diagnostic
from skriptnd.syntax.parser import MAX_ERRORS, parse

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = ROOT / "tests" / "data" / "spec_blocks"
START_RULE = {"module": "module", "blocks": "blocks", "compose_body": "compose_body"}


def _corpus() -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    for entry in json.loads((BLOCKS / "index.json").read_text(encoding="utf-8")):
        text = (BLOCKS / entry["file"]).read_text(encoding="utf-8")
        items.append((text, START_RULE.get(entry["kind"], "stmt")))
    for path in sorted((ROOT / "stdlib").glob("*.sknd")):
        text = path.read_text(encoding="utf-8")
        # one source per top-level definition keeps each parse small
        starts = [m.start() for m in re.finditer(r"^(?:public\s+)?(?:operator|graph)\b", text, re.M)]
        for a, b in zip(starts, starts[1:] + [len(text)], strict=True):
            items.append((text[a:b], "module"))
    return items


CORPUS = _corpus()

TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#[^\n]*|[A-Za-z_]\w*|\d+(?:\.\d+)?|\.\.\.|'
                   r'<\?=|>\?=|\.\.|<-|->|<>|<\?|>\?|\?\?|=>|\|\||&&|:=|<=|>=|==|!=|\*\*|[+*&|]=|\s+|.', re.S)

ODD = ['"', "'", "{", "}", "(", ")", "[", "]", "@", "#", ";", ",", ":", "..", "...", "\\", "\x00", "\t", "\r",
       "\n", "é", "→", "𝔸", "\ufeff", "\u200b", "$", "`", "<<", "<-", "?", "|", "~", "@lower", "@lowering",
       "yield", "if", "then", "else", "do", "unroll", "for", "while", "with", "graph", "operator", "{a", '"{',
       "\\q", "True", "1e", "1.", ".5", "0x1", "\x7f", "\ud7ff"]

POS = st.integers(0, 9999).map(lambda i: i / 10000)  # relative position in the text

mutation = st.one_of(
    st.tuples(st.just("delete"), POS),
    st.tuples(st.just("duplicate"), POS),
    st.tuples(st.just("swap"), POS),
    st.tuples(st.just("insert"), POS, st.sampled_from(ODD)),
    st.tuples(st.just("insert_text"), POS, st.text(max_size=4)),
    st.tuples(st.just("truncate"), POS),
)


def mutate(text: str, mutations: list[tuple]) -> str:
    tokens = TOKEN.findall(text)
    for m in mutations:
        kind, where = m[0], m[1]
        if kind == "truncate":
            joined = "".join(tokens)
            cut = int(where * (len(joined) + 1))
            tokens = TOKEN.findall(joined[:cut])
            continue
        if not tokens:
            tokens = [""]
        i = int(where * len(tokens))
        if kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap" and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif kind in ("insert", "insert_text"):
            tokens.insert(i, m[2])
    return "".join(tokens)


def assert_valid(text: str, start: str) -> None:
    node, diags = parse(text, "fuzz.sknd", start)
    assert isinstance(diags, list)
    n_lines = text.count("\n") + 1
    for d in diags:
        assert isinstance(d, Diagnostic), d
        s = d.span
        assert s.file == "fuzz.sknd"
        assert 1 <= s.line <= n_lines + 1, (str(d), n_lines)
        assert s.col >= 1, str(d)
        assert 1 <= s.end_line <= n_lines + 1, str(d)
        assert (s.end_line, s.end_col) >= (s.line, s.col), str(d)
        assert d.message and "Traceback" not in d.message
    if not diags:
        assert node is not None


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(source=st.sampled_from(CORPUS), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_sources_parse_without_crashing(source: tuple[str, str], mutations: list[tuple]) -> None:
    text, start = source
    assert_valid(mutate(text, mutations), start)


@FUZZ
@given(source=st.sampled_from(CORPUS), mutations=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_sources_as_modules(source: tuple[str, str], mutations: list[tuple]) -> None:
    # fragments parsed as whole modules exercise the top-level recovery paths
    assert_valid(mutate(source[0], mutations), "module")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(text=st.lists(st.sampled_from(ODD + list("abxyz0129=+-*/<>!?.&^% ")), max_size=30).map("".join),
       start=st.sampled_from(["module", "blocks", "compose_body", "block_stmt", "stmt", "expr"]))
def test_random_text_any_start_rule(text: str, start: str) -> None:
    assert_valid(text, start)


def test_unmutated_corpus_is_clean_enough() -> None:
    # sanity check of the corpus itself: the stdlib definitions parse on their own
    stdlib = [t for t, s in CORPUS if s == "module" and t.lstrip().startswith(("operator", "public"))]
    assert len(stdlib) > 50
    for text in stdlib[:20]:
        assert parse(text, "x.sknd")[1] == []


# ---------------------------------------------------------------- the CLI on random bytes

ENV = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}

random_bytes = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda src, muts: mutate(src[0], muts).encode("utf-8", "surrogatepass"),
              st.sampled_from(CORPUS), st.lists(mutation, min_size=1, max_size=4)),
)


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=random_bytes, json_output=st.booleans())
def test_cli_never_crashes_on_random_bytes(data: bytes, json_output: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.sknd"
        path.write_bytes(data)
        args = ["check", str(path)] + (["--format", "json"] if json_output else ["--color", "never"])
        proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, env=ENV, timeout=60)
    out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 1), out
    assert "Traceback" not in out
    assert "internal error" not in out
    if json_output:
        assert isinstance(json.loads(proc.stdout), list)


# ---------------------------------------------------------------- whole models and the CLI, in process
#
# Bounded for CI; `pytest tests/test_fuzz.py --fuzz 50` (or SKRIPTND_FUZZ=50) runs 50 times as many
# examples by hand. Every run asserts: an exit code in {0, 1, 2}, no exception escaping, every
# diagnostic at a real place (an existing file, a line and column inside it), and time bounded
# linearly in the size of the input.

SCALE = max(1, int(os.environ.get("SKRIPTND_FUZZ", "1") or 1))
DIAGNOSTIC_LINE = re.compile(r"^(\S.*?):(\d+):(\d+): (?:error|warning|note)\[(E\d{4})\]", re.M)
MODELS = sorted(p.parent for p in (ROOT / "models").glob("*/main.sknd"))
MODEL_SOURCES = [(m / "main.sknd").read_text(encoding="utf-8") for m in MODELS]


#: Codes about a path given on the command line (not found, unreadable, a folder without main.sknd):
#: they point at the path itself, 1:1.
FILE_LEVEL = {"E0001", "E0002", "E0003"}


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples * SCALE, deadline=None, derandomize=SCALE == 1,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def assert_located(span_file: str, line: int, col: int, texts: dict[str, str]) -> None:
    """A diagnostic's place exists: the file (or an in-memory source), the line, the column."""
    text = texts.get(span_file)
    if text is None:
        path = Path(span_file)
        assert path.is_file(), f"diagnostic in a file that does not exist: {span_file}"
        text = path.read_bytes().decode("utf-8", "replace").replace("\r\n", "\n")  # as read_source; a lone \r is no break
    lines = text.split("\n")
    assert 1 <= line <= len(lines) + 1, (span_file, line, len(lines))
    assert col >= 1, (span_file, line, col)
    if line <= len(lines):
        assert col <= len(lines[line - 1]) + 2, (span_file, line, col, lines[line - 1][:80])


def time_budget(size: int) -> float:
    """Seconds allowed to diagnose an input of `size` characters: linear, with room for a loaded machine."""
    return 5.0 + size * 2e-3


@fuzz_settings(12)
@given(source=st.sampled_from(MODEL_SOURCES), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_models_check_with_located_diagnostics(tmp_path_factory, source: str,
                                                       mutations: list[tuple]) -> None:
    from skriptnd.check.program import check_paths

    text = mutate(source, mutations)
    folder = tmp_path_factory.mktemp("model")
    (folder / "main.sknd").write_text(text, encoding="utf-8", errors="surrogatepass")
    start = time.perf_counter()
    result = check_paths([str(folder)])
    elapsed = time.perf_counter() - start
    assert elapsed < time_budget(len(text)), (elapsed, len(text))
    for d in result.diagnostics:
        assert isinstance(d, Diagnostic) and d.message
        assert_located(d.span.file, d.span.line, d.span.col, {})


def _cli_args(data: st.DataObject, folder: Path) -> list[str]:
    """A command line: a subcommand, a target (good, missing, of the wrong kind) and options drawn
    from the ones the CLI has, with good and bad values."""
    digits = str(ROOT / "models" / "digits")
    a_file = folder / "a_file"
    a_file.write_text("not a folder")
    targets = [digits, str(folder / "missing"), str(a_file), str(folder), str(ROOT / "models" / "lstm")]
    paths = [str(folder / "out"), str(a_file), str(a_file / "x"), str(folder / "no" / "such" / "x"),
             "/proc/x", str(folder)]
    values = ["2", "-1", "0", "x", "1e9", "[1, 2]", "'s'", "", "99999999999999999999"]
    command = data.draw(st.sampled_from(["check", "fmt", "compose", "run", "export", "doc"]))
    args = [command]
    if command == "doc":
        args.append(data.draw(st.sampled_from(["nn", "nn.conv", "nn.cnov", "nope", "math.add"])))
    else:
        args.append(data.draw(st.sampled_from(targets)))
    options = {
        "check": [["--format", "json"], ["--format", "xml"], ["--color", "never"]],
        "fmt": [["--check"], ["--stdout"]],
        "compose": [["--format", data.draw(st.sampled_from(["json", "dot", "svg", "html"]))], ["--tosa"],
                    ["--decompose-all"], ["--target", data.draw(st.sampled_from(["nnapi", "mli", "x"]))],
                    ["-o", data.draw(st.sampled_from([*paths, *(str(folder / f"g.{s}") for s in ("svg", "html",
                                                                                               "png"))]))],
                    ["--graph", "Nope"],
                    ["--attrib", "batch=" + data.draw(st.sampled_from(values))]],
        "run": [["--random-inputs"], ["--random-weights"], ["--seed", data.draw(st.sampled_from(values))],
                ["--input", "image=" + data.draw(st.sampled_from([*paths, str(ROOT / "models/digits/samples/3.npy")]))],
                ["--input", "nope=" + str(ROOT / "models/digits/samples/3.npy")],
                ["--output-dir", data.draw(st.sampled_from(paths))],
                ["--save-inputs", data.draw(st.sampled_from(paths))],
                ["--via", data.draw(st.sampled_from(["tosa", "kernels", "lower", "gpu"]))],
                ["--max-memory", data.draw(st.sampled_from(["1K", "1G", "lots", "0"]))],
                ["--top-k", data.draw(st.sampled_from(["1", "3", "0", "x"]))],
                ["--attrib", "batch=" + data.draw(st.sampled_from(values))], ["--expect", str(folder)]],
        "export": [["--tosa-mlir", data.draw(st.sampled_from(paths))], ["--inline-constants"],
                   ["--random-weights"], ["--attrib", "batch=" + data.draw(st.sampled_from(values))]],
        "doc": [["-o", data.draw(st.sampled_from(paths))], ["--markdown"]],
    }[command]
    for option in data.draw(st.lists(st.sampled_from(options), max_size=4, unique_by=lambda o: o[0])):
        args.extend(option)
    return args


@fuzz_settings(12)
@given(data=st.data())
def test_cli_argument_combinations(tmp_path_factory, data: st.DataObject) -> None:
    from typer.testing import CliRunner

    from skriptnd.cli.app import app

    folder = tmp_path_factory.mktemp("cli")
    args = _cli_args(data, folder)
    start = time.perf_counter()
    result = CliRunner().invoke(app, args, env={"NO_COLOR": "1", "COLUMNS": "200"})
    elapsed = time.perf_counter() - start
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in (0, 1, 2), (args, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, (args, output[-2000:])
    assert elapsed < 120, (args, elapsed)
    for m in DIAGNOSTIC_LINE.finditer(output):
        if m.group(4) in FILE_LEVEL:  # about a path on the command line itself (no such file, a folder)
            assert m.group(1) in args and (m.group(2), m.group(3)) == ("1", "1"), m.group(0)
            continue
        assert_located(m.group(1), int(m.group(2)), int(m.group(3)), {})
    assert not re.search(r"^<(?:unknown|graph|string)>:", output, re.M), (args, output[-2000:])  # unlocated


@fuzz_settings(4)
@given(source=st.sampled_from(CORPUS), mutations=st.lists(mutation, min_size=1, max_size=3))
def test_diagnosing_time_is_linear_in_the_size(source: tuple[str, str], mutations: list[tuple]) -> None:
    """The same mutated text repeated 2x and 16x: 8x the input takes at most ~24x the time per parse
    attempt (n log n gives ~10x, quadratic 64x; 32x allowed). The parser re-parses once per syntax error it
    recovers from (at most MAX_ERRORS), so the larger text may take more attempts: time is divided by
    them. Tiny inputs are padded, and the best of three runs is taken, so timer noise does not decide."""
    text = mutate(source[0], mutations) + "\n"
    reps = max(1, 2000 // max(1, len(text)))

    def timed(n: int) -> float:
        big = text * (reps * n)
        best = float("inf")
        for _ in range(3):
            begin = time.perf_counter()
            _, diags = parse(big, "fuzz.sknd", "module")
            best = min(best, (time.perf_counter() - begin) / (min(len(diags), MAX_ERRORS) + 1))
        return best

    ratios = []
    for _ in range(3):  # a loaded machine can slow one measurement; a quadratic parser fails every time
        small, large = timed(2), timed(16)
        ratios.append(large / max(small, 0.003))
        if ratios[-1] <= 32:
            break
    assert min(ratios) <= 32, (ratios, len(text) * reps)
