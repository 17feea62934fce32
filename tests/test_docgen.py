"""`sknd doc` teaches: each operator's formula, its checks' messages with the values filled in, the
curated attribute meanings, and text a terminal shows without Markdown escapes (issue 29, item 3).
The notes for PyTorch / ONNX users are checked against onnxruntime in test_opnotes.py."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.docgen import (
    formula,
    load_module,
    operator_notes,
    render_module,
    render_operator,
    render_target,
)
from skriptnd.semantics.intrinsics import STDLIB_INTRINSICS
from skriptnd.syntax import ast

ROOT = Path(__file__).resolve().parents[1]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_formula_is_the_operators_own_code(module: str) -> None:
    """The formula shown is the @using and @lower / @compose text of stdlib/<module>.sknd (compared
    with the source sliced by the blocks' spans, up to line breaks), for every operator that has one."""
    lines = (stdlib_dir() / f"{module}.sknd").read_text(encoding="utf-8").splitlines()
    parsed = load_module(module)
    for defn in parsed.definitions:
        shown = [b for b in defn.blocks if isinstance(b, ast.UsingBlock | ast.LowerBlock | ast.ComposeBlock)]
        has_body = any(isinstance(b, ast.LowerBlock | ast.ComposeBlock) for b in shown)
        source = "\n".join(textwrap.dedent("\n".join(lines[b.span.line - 1:b.span.end_line])) for b in shown)
        text = formula(defn, parsed.comments)
        assert _words(text) == (_words(source) if has_body else ""), f"{module}.{defn.name}"
        if has_body:
            assert "Formula:\n\n```\n" + text + "\n```" in render_operator(module, defn, parsed.comments)


def test_conv_shows_its_lower_formula_and_intrinsics_none() -> None:
    conv = render_target("nn.conv")
    assert "output[oi..] += input[ii..] * filter[fi..]" in conv
    assert "offset = padding[:d] ?? padding_align == \"UPPER\" ? paddings / 2 : paddings \\ 2;" in conv
    softmax = render_target("nn.softmax")
    assert "@compose {\n    max = math.max_reduce{axes=axes}(input);" in softmax
    intrinsic = sorted(STDLIB_INTRINSICS)[0]
    assert "Formula:" not in render_target(intrinsic)


def _check_lines(markdown: str) -> list[str]:
    """The bullet lines of every "Checks:" list."""
    found, inside = [], False
    for line in markdown.splitlines():
        if line in ("Checks:", "For PyTorch / ONNX users:") or line.startswith("#"):
            inside = line == "Checks:"
        elif inside and line.startswith("- "):
            found.append(line)
    return found


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_no_placeholder_is_left_in_a_check_message(module: str) -> None:
    lines = _check_lines(render_module(module))
    assert lines
    left = [line for line in lines if re.search(r"\{[A-Za-z_]\w*\}", line)]
    assert left == []


def test_placeholders_show_the_declared_values() -> None:
    conv = render_target("nn.conv")
    assert "'padding_align' must be one of `[\"LOWER\", \"UPPER\"]`" in conv
    assert "'filter_format' must be one of `[\"NCX\", \"NXC\", \"XCN\", \"CXN\"]`" in conv
    # a field that depends on the call (a shape) shows as its expression
    assert "incompatible argument shapes for broadcasting (`ex` vs `ey` after alignment)" in render_target("math.add")


def test_pipes_are_escaped_only_in_tables() -> None:
    """GitHub and rich need `\\|` in a table cell, even in code; anywhere else it would show."""
    text = render_target("layout.reshape")
    assert "`input_volume != 0 => shape > 0 || shape is -1`" in text
    for line in render_module("layout").splitlines() + render_module("nn").splitlines():
        assert "\\|" not in line or line.startswith("|"), line


def test_meanings_are_shown_in_the_attribute_table() -> None:
    conv = render_target("nn.conv")
    assert "| attribute | type | default | meaning |" in conv
    row = next(line for line in conv.splitlines() if line.startswith("| `padding` |"))
    assert "`[h_before, w_before, h_after, w_after]`" in row
    for note in operator_notes()["nn.conv"].notes:
        assert f"- {note}" in conv
    assert "meaning" not in render_target("layout.tile")  # no curated words: the old table


def _on_a_terminal(*args: str) -> str:
    """`sknd doc ...` with its stdout on a pseudo-terminal, as a user sees it (rich, not Markdown)."""
    main, sub = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "skriptnd", "doc", *args], stdout=sub, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT)
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("target", ["layout.reshape", "nn.lstm"])
def test_terminal_output_has_no_markdown_escapes(target: str) -> None:
    """layout.reshape has `||` in a check, nn.lstm `~|s` in a table cell (written `~\\|s` in Markdown)."""
    shown = _on_a_terminal(target)
    assert "\\|" not in shown
    assert "shape > 0 || shape is -1" in shown if target == "layout.reshape" else "real[~|s, b, n]" in shown
    assert "```" not in shown and "| attribute |" not in shown  # rendered, not Markdown source
