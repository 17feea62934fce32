#!/usr/bin/env python3
"""Extract the SkriptND code blocks of the NNEF 2.0 spec as test data.

Reads the spec markdown and writes every fenced code block of

* chapter 2 ("## 2. SkriptND Syntax"), excluding section 2.16 (the EBNF grammar), and
* chapter 4 ("## 4. Standard Library Operators" up to the end of the file)

verbatim to ``tests/data/spec_blocks/ch<chapter>_<section>_<nn>.sknd``, where ``<section>`` is the
innermost numbered section without the chapter number (dots replaced by ``_``) and ``<nn>`` numbers
the blocks within that section, starting from 01.  ``index.json`` next to them lists one object per
block::

    {"file", "spec_line", "section", "heading", "kind", ["elided"], ["note"]}

``spec_line`` is the 1-based spec line of the first code line; ``heading`` is the nearest preceding
markdown heading (without its number) or bold ``**...**`` pseudo-heading; ``kind`` is the start rule
a parser should use (see :func:`classify`); ``elided`` is present (and true) if the block contains a
``...`` elision placeholder (see :func:`is_elided`).

Usage: ``extract_spec_blocks.py [SPEC]``; SPEC defaults to
``../shared/spec/nnef-2.0-skriptnd-rev8.md`` relative to the repository root.  The output is a pure
function of the spec text (stale ``ch*.sknd`` files are removed first).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SPEC = REPO_ROOT.parent / "shared" / "spec" / "nnef-2.0-skriptnd-rev8.md"
OUT_DIR = REPO_ROOT / "tests" / "data" / "spec_blocks"

FENCE = re.compile(r"^\s*```")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(.*)$")
BOLD = re.compile(r"^\*\*(.+?)\*\*\s*$")
MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|])")

# `extension` can also start a document (grammar of 2.16: version extension* import* op-definition*).
MODULE_TOKENS = {"import", "version", "extension", "operator", "public", "graph"}
# Binary operators that form a cumulative fold when followed by `...` (spec 2.4, "Cumulative Folding").
FOLD_OPERATORS = ("&&", "||", "<?", ">?", "+", "*")


@dataclass
class Block:
    """A fenced code block of the spec and where it was found."""

    chapter: int
    section: str  # innermost numbered section, e.g. "2.6.2"
    heading: str  # nearest heading or bold pseudo-heading
    spec_line: int  # 1-based line of the first code line
    text: str  # the code lines, verbatim, newline-terminated


def parse_blocks(spec: str) -> list[Block]:
    """Return all fenced code blocks of ``spec`` with their chapter, section and heading."""
    blocks: list[Block] = []
    chapter, section, heading = 0, "", ""
    code: list[str] | None = None
    start = 0
    for lineno, line in enumerate(spec.splitlines(), start=1):
        if FENCE.match(line):
            if code is None:
                code, start = [], lineno + 1
            else:
                text = "".join(f"{c}\n" for c in code)
                blocks.append(Block(chapter, section, heading, start, text))
                code = None
            continue
        if code is not None:
            code.append(line)
        elif m := HEADING.match(line):
            title = m.group(2)
            if n := NUMBERED.match(title):
                section, title = n.group(1), n.group(2)
                if len(m.group(1)) == 2:
                    chapter = int(section.split(".")[0])
            heading = MD_ESCAPE.sub(r"\1", title)
        elif m := BOLD.match(line):
            heading = MD_ESCAPE.sub(r"\1", m.group(1).strip())
    if code is not None:
        raise ValueError(f"unterminated code block starting at line {start}")
    return blocks


def in_scope(block: Block) -> bool:
    """Chapter 2 without the formal grammar of 2.16, and all of chapter 4."""
    if block.chapter == 2:
        return block.section != "2.16" and not block.section.startswith("2.16.")
    return block.chapter == 4


def strip_comments(text: str) -> str:
    """Remove ``#`` comments (outside of string literals) from SkriptND source."""
    out: list[str] = []
    for line in text.splitlines():
        quote = ""
        for i, ch in enumerate(line):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def first_token(text: str) -> str:
    """The first significant token (identifier, or else single character) of ``text``."""
    m = re.search(r"[A-Za-z_]\w*|\S", strip_comments(text))
    return m.group(0) if m else ""


def classify(text: str) -> tuple[str, str | None]:
    """Return (kind, note) for a block, based on its first significant token.

    ``module`` (import/version/operator/public/graph), ``blocks`` (``@``), ``compose_body`` (``{``),
    otherwise ``other`` with a note saying what the block looks like.
    """
    token = first_token(text)
    if token in MODULE_TOKENS:
        return "module", None
    if token == "@":
        return "blocks", None
    if token == "{":
        return "compose_body", None
    code = strip_comments(text).strip()
    if token == "if":
        return "other", "bare if-then-else expression (right-hand side of a compose statement)"
    if re.match(r"[\w\s,.~\[\]()]+=[^=]", code) and code.endswith(";"):
        return "other", "bare compose statement (assignment), not wrapped in a block"
    return "other", f"unrecognized; starts with {token!r}"


def is_elided(text: str) -> bool:
    """True if ``text`` contains ``...`` as an elision placeholder.

    Three dots directly after a binary fold operator (``x + ...``, ``x <? ...``) are the cumulative
    fold syntax and do not count; any other ``...`` (``= ...;``, ``op(...)``, ``{ ... }``, a line of
    its own) is an elision.  Comments are ignored.
    """
    code = strip_comments(text)
    for m in re.finditer(r"(?<!\.)\.\.\.(?!\.)", code):
        before = code[: m.start()].rstrip()
        if not before.endswith(FOLD_OPERATORS):
            return True
    return False


def block_files(blocks: list[Block]) -> list[str]:
    """File names ``ch<chapter>_<section>_<nn>.sknd``, numbered within each section."""
    counts: Counter[str] = Counter()
    names = []
    for b in blocks:
        counts[b.section] += 1
        parts = b.section.split(".")[1:]
        names.append("_".join([f"ch{b.chapter}", *parts, f"{counts[b.section]:02d}"]) + ".sknd")
    return names


def main(argv: list[str]) -> int:
    spec_path = Path(argv[1]) if len(argv) > 1 else DEFAULT_SPEC
    blocks = [b for b in parse_blocks(spec_path.read_text(encoding="utf-8")) if in_scope(b)]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for stale in OUT_DIR.glob("ch*.sknd"):
        stale.unlink()

    index = []
    for name, b in zip(block_files(blocks), blocks, strict=True):
        (OUT_DIR / name).write_text(b.text, encoding="utf-8")
        kind, note = classify(b.text)
        entry: dict[str, object] = {
            "file": name,
            "spec_line": b.spec_line,
            "section": b.section,
            "heading": b.heading,
            "kind": kind,
        }
        if is_elided(b.text):
            entry["elided"] = True
        if note:
            entry["note"] = note
        index.append(entry)
    (OUT_DIR / "index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")

    print(f"wrote {len(index)} blocks to {OUT_DIR}")
    for kind, count in sorted(Counter(e["kind"] for e in index).items()):
        print(f"  {kind:<13} {count:4d}")
    for e in index:
        if "elided" in e or "note" in e:
            elided = "elided" if "elided" in e else ""
            note = e.get("note", "")
            print(f"  {e['file']:<18} line {e['spec_line']:<5} {e['kind']:<13} {elided:<7} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
