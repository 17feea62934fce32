"""docs/guide.md runs as a test, block by block in order, in a fresh folder (as a reader would):

* a ```sknd block starts with `# file: PATH`: it is written there, and must be in house style
  (what `sknd fmt` writes) and, unless that line says "(broken on purpose)", pass `sknd check`;
* a ```sh block holds `$ command` lines, each followed by lines of its expected output: the command
  runs (`sknd` is this checkout's CLI), must exit 0 (or N, written `# exit N` after it) and print
  every expected line, in order, each within one line of its output (`...` skips lines, or
  any text within a line);
* a ```python block is a doctest, all blocks sharing one namespace.
No other kind of block is allowed, so nothing in the guide goes untested. The folder holds what a
clone's root has for the reader: `models/` and `docs/examples/` (the PyTorch chapter's ONNX file).
The one block that needs torch skips its examples (`# doctest: +SKIP`); the script that made the
shipped ONNX file holds the same model class, which the last test keeps identical.
"""

from __future__ import annotations

import ast
import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skriptnd.check.program import check_paths
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"
EXAMPLES = ROOT / "docs" / "examples"
BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "PYTHONPATH": str(ROOT)}


def blocks() -> list[tuple[str, str, int]]:
    text = GUIDE.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]


def run_sknd(folder: Path, block: str, line: int) -> None:
    first, _, _ = block.partition("\n")
    m = re.fullmatch(r"# file: (\S+)( \(broken on purpose\))?", first)
    assert m, f"guide.md:{line}: a sknd block starts with '# file: PATH'"
    path = folder / m.group(1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block, encoding="utf-8")
    tree, diags = parse_module(block, str(path))
    if m.group(2):
        return
    assert not diags and tree is not None, f"guide.md:{line}: {diags[:1]}"
    assert format_module(tree) == block, f"guide.md:{line}: not in house style (sknd fmt)"
    result = check_paths([str(path.parent if path.name == "main.sknd" else path)])  # as `sknd check` does
    assert not result.diagnostics, f"guide.md:{line}: {[str(d) for d in result.diagnostics]}"


def run_sh(folder: Path, block: str, line: int) -> None:
    commands: list[tuple[str, list[str], int]] = []
    for text in block.splitlines():
        if text.startswith("$ "):
            commands.append((text[2:], [], line))
        elif text.strip():
            assert commands, f"guide.md:{line}: output before any '$ command'"
            commands[-1][1].append(text.strip())
        line += 1
    for command, expected, at in commands:
        command, _, status = command.partition("  # exit ")
        argv = shlex.split(command)
        argv = {"sknd": [sys.executable, "-m", "skriptnd"], "python": [sys.executable]}.get(argv[0], argv[:1]) + argv[1:]
        proc = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=folder, timeout=300)
        out = (proc.stdout + proc.stderr).splitlines()
        assert proc.returncode == int(status or 0), f"guide.md:{at}: {command}\n{proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stderr
        pos = 0
        for want in (w for w in expected if w != "..."):
            pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
            while pos < len(out) and not pattern.search(out[pos]):
                pos += 1
            assert pos < len(out), f"guide.md:{at}: {command}: no line with {want!r} (in order) in\n" + "\n".join(out)
            pos += 1


def run_python(folder: Path, block: str, line: int, globs: dict) -> None:
    test = doctest.DocTestParser().get_doctest(block, globs, f"guide.md:{line}", str(GUIDE), line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        runner.run(test, clear_globs=False)
        globs.update(test.globs)  # DocTest copies the namespace: carry it to the next block
    finally:
        os.chdir(cwd)
    assert test.examples, f"guide.md:{line}: a python block without examples"
    assert runner.failures == 0, f"guide.md:{line}: a doctest failed (see the output above)"


def test_every_block_of_the_guide_runs(tmp_path: Path) -> None:
    (tmp_path / "models").symlink_to(ROOT / "models")  # the shipped models, as in a checkout
    shutil.copytree(EXAMPLES, tmp_path / "docs" / "examples")  # a copy: the reader may write beside them
    globs: dict = {}
    found = blocks()
    assert len(found) > 20
    fences = [k for k, text in enumerate(GUIDE.read_text(encoding="utf-8").splitlines(), 1) if text.startswith("```")]
    assert len(fences) == 2 * len(found), f"guide.md: a fence is not a block of its own (lines {fences})"
    for lang, block, line in found:
        if lang == "sknd":
            run_sknd(tmp_path, block, line)
        elif lang == "sh":
            run_sh(tmp_path, block, line)
        elif lang == "python":
            run_python(tmp_path, block, line + 1, globs)
        else:
            pytest.fail(f"guide.md:{line}: a ```{lang} block is not tested; use sknd, sh or python")


def test_the_readme_links_the_guide_first() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)]+)\)", readme)
    assert links and links[0] == "docs/guide.md"


def _class_source(source: str, name: str) -> str:
    tree = ast.parse(source)
    found = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    assert len(found) == 1, f"one class {name} expected"
    return ast.get_source_segment(source, found[0]) or ""


def test_the_guides_pytorch_model_is_the_one_shipped() -> None:
    """The guide cannot run torch, so it relies on docs/examples/tiny_cnn.onnx, written by
    make_tiny_cnn.py: the class of the guide's torch block must be that script's, text for text."""
    torch_blocks = [block for lang, block, _ in blocks() if lang == "python" and "class TinyCNN(" in block]
    assert len(torch_blocks) == 1
    examples = doctest.DocTestParser().get_examples(torch_blocks[0])
    assert examples and all(ex.options.get(doctest.SKIP) for ex in examples), "every torch line is skipped"
    source = "".join(re.sub(r"  # doctest: \+SKIP$", "", ex.source, flags=re.M) for ex in examples)
    script = (EXAMPLES / "make_tiny_cnn.py").read_text(encoding="utf-8")
    assert _class_source(source, "TinyCNN") == _class_source(script, "TinyCNN")
    assert (EXAMPLES / "tiny_cnn.onnx").stat().st_size < 100_000
