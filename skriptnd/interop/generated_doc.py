"""The generated part of an importer's documentation page (docs/import.md, docs/import-tflite.md): the text
between two markers, rewritten from the converter registry so that the page says what the code converts.
One implementation for every importer: each `doc` module passes its markers, its page title and its render."""

from __future__ import annotations

from pathlib import Path


def update(path: Path, rendered: str, begin: str, end: str, title: str) -> bool:
    """Rewrite the part of ``path`` between ``begin`` and ``end`` with ``rendered`` (a new page titled
    ``title`` when the file does not exist, the markers appended when it lacks them); True when it changed."""
    text = path.read_text(encoding="utf-8") if path.exists() else f"# {title}\n\n{begin}\n{end}\n"
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < 0:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
        start, stop = text.find(begin), text.find(end)
    new = text[:start] + rendered.rstrip("\n") + text[stop + len(end):]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def current(path: Path, begin: str, end: str) -> str:
    """The generated part of ``path`` as it is on disk (what a test compares with a fresh render)."""
    text = path.read_text(encoding="utf-8")
    start, stop = text.find(begin), text.find(end)
    return text[start:stop + len(end)] + "\n" if start >= 0 and stop >= 0 else ""
