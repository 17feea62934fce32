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
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skriptnd.diagnostics import Diagnostic
from skriptnd.syntax.parser import parse

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
