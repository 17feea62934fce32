"""A raw-text scanner that knows only strings and comments.

Used where the parser cannot help: locating comments for the formatter, and finding
statement boundaries to resynchronise after a syntax error.
"""

from __future__ import annotations

from collections.abc import Iterator


def _regions(text: str) -> Iterator[tuple[str, int, int]]:
    """('comment' | 'string', start, end) for each comment and string literal."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield "comment", i, end
            i = end
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            yield "string", i, end
            i = end
        else:
            i += 1


def mask(text: str) -> str:
    """text with string literals and comments replaced by spaces (newlines kept)."""
    out = list(text)
    for _, a, b in _regions(text):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def comments(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of every '#' comment."""
    return [(a, b) for kind, a, b in _regions(text) if kind == "comment"]


def mask_comments(text: str) -> str:
    """text with only comments replaced by spaces (strings kept, to find where code ends)."""
    out = list(text)
    for kind, a, b in _regions(text):
        if kind == "comment":
            for k in range(a, b):
                out[k] = " "
    return "".join(out)
