"""docs/quantize.md, the "from float model to int8 on a target" walk-through, runs as a test: block by block
in order, in a fresh folder holding the repository's models/ and docs/examples/, with the rules of
docs/guide.md's test (tests/test_guide.py: ```sh blocks of `$ command` lines and their expected output,
```python blocks as doctests; no other kind of block)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_guide import BLOCK, ROOT, run_python, run_sh

DOC = ROOT / "docs" / "quantize.md"


def test_every_block_of_the_quantize_walkthrough_runs(tmp_path: Path) -> None:
    (tmp_path / "models").symlink_to(ROOT / "models")
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    text = DOC.read_text(encoding="utf-8")
    found = [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]
    assert len(found) >= 8
    fences = [k for k, line in enumerate(text.splitlines(), 1) if line.startswith("```")]
    assert len(fences) == 2 * len(found), f"quantize.md: a fence is not a block of its own (lines {fences})"
    globs: dict = {}
    for lang, block, line in found:
        if lang == "sh":
            run_sh(tmp_path, block, line)
        elif lang == "python":
            run_python(tmp_path, block, line + 1, globs)
        else:
            pytest.fail(f"quantize.md:{line}: a ```{lang} block is not tested; use sh or python")
