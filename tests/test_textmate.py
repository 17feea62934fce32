"""The VS Code extension's TextMate grammar (editors/vscode/syntaxes/skriptnd.tmLanguage.json).

Its regexes are written in the common subset of Oniguruma (what VS Code runs) and Python's `re`,
so they are compiled here with `re`. A small tokenizer applies the grammar TextMate-style, line
by line: in the current context (the top-level patterns, or the patterns of the open begin/end
rule), every pattern is searched from the current position, the earliest match wins and, on a
tie, the one listed first (an open rule's end pattern before its patterns); `match` rules give
their scope (and capture scopes) to the matched text, `begin` rules open a context until their
`end` matches, across lines. No `while` rules, back-references or nested captures: the grammar
uses none. The scopes it gives to sample lines of stdlib/*.sknd, models/ and the spec's code
blocks (tests/data/spec_blocks) are then checked.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((EXTENSION / "syntaxes" / "skriptnd.tmLanguage.json").read_text(encoding="utf-8"))
BASE = GRAMMAR["scopeName"]

Token = tuple[str, tuple[str, ...]]


@cache
def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def expand(patterns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Patterns with `include`s (of the repository, `$self`) and pattern groups flattened."""
    out: list[dict[str, Any]] = []
    for p in patterns:
        if "include" in p:
            ref = p["include"]
            target = {"patterns": GRAMMAR["patterns"]} if ref == "$self" else GRAMMAR["repository"][ref[1:]]
            out.extend(expand([target]))
        elif "match" in p or "begin" in p:
            out.append(p)
        else:
            out.extend(expand(p["patterns"]))
    return out


def _emit(tokens: list[Token], text: str, scopes: tuple[str, ...]) -> None:
    if text:
        tokens.append((text, scopes))


def _emit_match(tokens: list[Token], m: re.Match[str], scopes: tuple[str, ...], name: str | None,
                captures: dict[str, dict[str, str]] | None) -> None:
    outer = scopes + ((name,) if name else ())
    if not captures:
        _emit(tokens, m.group(0), outer)
        return
    pos = m.start()
    for group in sorted(captures, key=int):
        g = int(group)
        if g == 0:
            _emit(tokens, m.group(0), outer + (captures[group]["name"],))
            return
        if m.group(g) is None:
            continue
        _emit(tokens, m.string[pos:m.start(g)], outer)
        _emit(tokens, m.group(g), outer + (captures[group]["name"],))
        pos = m.end(g)
    _emit(tokens, m.string[pos:m.end()], outer)


def tokenize(text: str) -> list[Token]:
    """(text, scopes) for every token of every line (newlines are not tokens)."""
    tokens: list[Token] = []
    stack: list[dict[str, Any]] = []
    for line in text.split("\n"):
        pos = 0
        while pos < len(line):
            scopes = (BASE,) + tuple(s for r in stack for s in (r.get("name"), r.get("contentName")) if s)
            rule = stack[-1] if stack else None
            candidates: list[tuple[int, int, str, re.Match[str], dict[str, Any] | None]] = []
            if rule is not None:
                m = compiled(rule["end"]).search(line, pos)
                if m is not None:
                    candidates.append((m.start(), -1, "end", m, None))
            for order, p in enumerate(expand(rule["patterns"] if rule else GRAMMAR["patterns"])):
                m = compiled(p.get("match") or p["begin"]).search(line, pos)
                if m is not None and m.end() > m.start():
                    candidates.append((m.start(), order, "match" if "match" in p else "begin", m, p))
            if not candidates:
                _emit(tokens, line[pos:], scopes)
                break
            start, _, kind, m, p = min(candidates, key=lambda c: (c[0], c[1]))
            _emit(tokens, line[pos:start], scopes)
            if kind == "end":
                outer = scopes[:-1] if rule.get("contentName") else scopes
                _emit_match(tokens, m, outer, None, rule.get("endCaptures"))
                stack.pop()
            elif kind == "match":
                _emit_match(tokens, m, scopes, p.get("name"), p.get("captures"))
            else:
                _emit_match(tokens, m, scopes + ((p["name"],) if p.get("name") else ()), None, p.get("beginCaptures"))
                stack.append(p)
            pos = m.end()
    return tokens


def scopes_of(tokens: list[Token], text: str, nth: int = 0) -> tuple[str, ...]:
    """The scopes of the nth token that is exactly `text`."""
    found = [scopes for t, scopes in tokens if t == text]
    assert len(found) > nth, f"no token {text!r} in {tokens}"
    return found[nth]


def has(tokens: list[Token], text: str, scope: str, nth: int = 0) -> bool:
    return any(s == scope or s.startswith(scope + ".") for s in scopes_of(tokens, text, nth))


def sample(path: str, needle: str) -> str:
    """The first line of a corpus file that contains needle (the test's sample lines are real)."""
    for line in (ROOT / path).read_text(encoding="utf-8").split("\n"):
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not in {path}")


# ---------------------------------------------------------------------------- the grammar itself


def test_every_regex_compiles_with_python_re() -> None:
    def regexes(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node[k] for k in ("match", "begin", "end") if isinstance(node.get(k), str)]
            return found + [r for v in node.values() for r in regexes(v)]
        if isinstance(node, list):
            return [r for v in node for r in regexes(v)]
        return []

    patterns = regexes(GRAMMAR)
    assert len(patterns) > 25
    for pattern in patterns:
        re.compile(pattern)


def test_extension_manifest_matches_grammar_and_language() -> None:
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    contributes = package["contributes"]
    assert contributes["languages"][0]["id"] == "skriptnd" and ".sknd" in contributes["languages"][0]["extensions"]
    grammar = contributes["grammars"][0]
    assert grammar["scopeName"] == BASE and (EXTENSION / grammar["path"]).is_file()
    settings = contributes["configuration"]["properties"]
    assert settings["skriptnd.server.command"]["default"] == "sknd"
    assert settings["skriptnd.server.args"]["default"] == ["lsp"]
    assert "onLanguage:skriptnd" in package["activationEvents"]
    assert (EXTENSION / package["main"]).is_file()
    config = json.loads((EXTENSION / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"]["lineComment"] == "#"
    assert ["{", "}"] in config["brackets"]


# ---------------------------------------------------------------------------- scopes of sample lines


def test_definition_and_block_names() -> None:
    tokens = tokenize(sample("stdlib/nn.sknd", "operator conv {"))
    assert has(tokens, "operator", "storage.type") and has(tokens, "conv", "entity.name.function")
    for block in ("@attrib", "@input", "@using", "@assert", "@lower", "@compose"):
        tokens = tokenize(f"    {block} {{")
        assert has(tokens, block, "keyword.other.block"), block
    tokens = tokenize(sample("models/alexnet/main.sknd", "graph AlexNet"))
    assert has(tokens, "graph", "storage.type") and has(tokens, "AlexNet", "entity.name.function")
    assert has(tokenize("    @lowering {"), "@lowering", "invalid.illegal")


def test_keywords_types_and_constants() -> None:
    tokens = tokenize(sample("stdlib/layout.sknd", "flattened = if rank == 1 then input else flatten"))
    for kw in ("if", "then", "else"):
        assert has(tokens, kw, "keyword.control"), kw
    assert has(tokens, "flatten", "entity.name.function.call")
    tokens = tokenize(sample("stdlib/nn.sknd", "bias: optional real[n];"))
    assert has(tokens, "optional", "storage.modifier") and has(tokens, "real", "storage.type.primitive")
    tokens = tokenize(sample("stdlib/nn.sknd", "ceil_mode: bool = false;"))
    assert has(tokens, "bool", "storage.type.primitive") and has(tokens, "false", "constant.language.boolean")
    tokens = tokenize(sample("stdlib/nn.sknd", "import layout;"))
    assert has(tokens, "import", "keyword.control.import") and has(tokens, "layout", "entity.name.namespace")


def test_numbers() -> None:
    tokens = tokenize(sample("stdlib/nn.sknd", "epsilon: real = 1e-5;"))
    assert has(tokens, "1e-5", "constant.numeric.float")
    tokens = tokenize(sample("stdlib/nn.sknd", "output[bi, ni] = bias[ni,] ?? 0.0,"))
    assert has(tokens, "0.0", "constant.numeric.float") and has(tokens, "??", "keyword.operator.coalesce")
    tokens = tokenize(sample("stdlib/nn.sknd", "groups: int = 1;"))
    assert has(tokens, "1", "constant.numeric.integer")
    tokens = tokenize("        s: int..(d) = 1 ..(2);")  # `1 ..` is an int then a pack operator
    assert has(tokens, "1", "constant.numeric.integer") and has(tokens, "..", "keyword.operator.pack")


def test_strings_escapes_and_format_fields() -> None:
    tokens = tokenize(sample("tests/data/spec_blocks/ch4_4_1_02.sknd", "padding_align: str = 'UPPER';"))
    assert has(tokens, "UPPER", "string.quoted.single")
    assert has(tokens, "'", "punctuation.definition.string.begin")
    line = sample("tests/data/spec_blocks/ch2_1_03.sknd", "got {stride}")
    tokens = tokenize(line)
    assert has(tokens, "'stride' must be positive; got ", "string.quoted.double")
    assert has(tokens, "{", "punctuation.section.interpolation.begin")
    assert not has(tokens, "stride", "string.quoted.double", nth=0)  # the condition
    assert has(tokens, "stride", "meta.interpolation", nth=1)  # the field, inside the string
    assert has(tokens, "stride", "string.quoted.double", nth=1)
    assert has(tokens, "stride", "variable.other", nth=1)
    tokens = tokenize(sample("tests/data/spec_blocks/ch4_1_5_02.sknd", "must be one of {data_formats}"))
    assert has(tokens, "data_formats", "meta.interpolation")
    tokens = tokenize(r"        message = 'a\tb \{not a field\} {n + 1}\q';")
    assert has(tokens, r"\t", "constant.character.escape") and has(tokens, r"\{", "constant.character.escape")
    assert has(tokens, r"\q", "invalid.illegal.escape")
    assert has(tokens, "+", "keyword.operator.arithmetic") and has(tokens, "+", "meta.interpolation")
    tokens = tokenize('x = "first line\n  still {x} the string";\ny = 1;')
    assert has(tokens, "  still ", "string.quoted.double") and has(tokens, "y", "variable.other")


def test_comments() -> None:
    tokens = tokenize(sample("stdlib/nn.sknd", "# spec §4.4.1: Convolution"))
    assert tokens == [("# spec §4.4.1: Convolution", (BASE, "comment.line.number-sign.skriptnd"))]
    tokens = tokenize(sample("stdlib/layout.sknd", "axis: int = 0;  # dimension where"))
    assert has(tokens, "int", "storage.type.primitive")
    assert any(t.startswith("# dimension") and "comment.line.number-sign.skriptnd" in s for t, s in tokens)
    tokens = tokenize("    s = '# not a comment';")
    assert has(tokens, "# not a comment", "string.quoted.single")


@pytest.mark.parametrize(("path", "needle", "operators"), [
    ("stdlib/nn.sknd", "output[i..] >?= input", [">?=", "..", "<-", "*", "-", "|"]),
    ("stdlib/nn.sknd", "y[i..] = (x[i..] <? max ?? x[i..]) >? (alpha", ["<?", "??", ">?", "="]),
    ("stdlib/layout.sknd", "stride > T(0) => last >= first;", ["=>", ">=", ">"]),
    ("stdlib/layout.sknd", "prods = [1, shape[::-1]..] * ...;", ["...", "..", ":", "-"]),
])
def test_operators(path: str, needle: str, operators: list[str]) -> None:
    tokens = tokenize(sample(path, needle))
    for op in operators:
        assert any(s.startswith("keyword.operator") for s in scopes_of(tokens, op)), (op, tokens)


def test_invocations_properties_and_builtins() -> None:
    tokens = tokenize(sample("models/alexnet/main.sknd", "conv1 = nn.conv{padding=0, stride=4}"))
    assert has(tokens, "nn.conv", "entity.name.function.call") and has(tokens, "conv1", "variable.other")
    tokens = tokenize(sample("stdlib/layout.sknd", "output[i] = input.shape[i], i < d;"))
    assert has(tokens, "shape", "support.variable.property")
    tokens = tokenize("        y[i..] = sqrt(x[i..]) + T(1),")
    assert has(tokens, "sqrt", "support.function.builtin")


def test_every_spec_block_tokenizes_without_leftovers() -> None:
    """On real code, every non-blank character gets a scope beyond the base one."""
    for path in sorted((ROOT / "tests" / "data" / "spec_blocks").glob("*.sknd")):
        for text, scopes in tokenize(path.read_text(encoding="utf-8")):
            assert not text.strip() or len(scopes) > 1, (path.name, text)
