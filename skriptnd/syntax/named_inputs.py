"""`nn.relu(x, alpha=0.1)`: an attribute written as a Python keyword argument.

The parser only sees an '=' where it expects ',' or ')'. Users coming from PyTorch or ONNX write attributes
this way, so the syntax error says what SkriptND wants instead, with the user's invocation rewritten:
`nn.relu{alpha=0.1}(x)` (attributes in braces after the operator name, inputs in parentheses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NamedInput", "named_input"]

_CALLEE = re.compile(r"[A-Za-z_][A-Za-z_0-9.]*$")
_KEYWORDS = frozenset("if then elif else with for while do unroll yield".split())
_KEYWORD = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*=(?![=>]).*", re.S)


@dataclass(frozen=True)
class NamedInput:
    """The first named argument (`alpha=0.1`: where it starts and ends in the text) and the invocation
    rewritten with every named argument as an attribute."""

    name: str
    start: int
    end: int
    rewritten: str


def named_input(code: str, text: str, offset: int) -> NamedInput | None:
    """The named argument whose '=' is at `offset`, or None where that '=' is not one.

    `code` is `text` with strings and comments masked (same length), so brackets inside them do not count."""
    if code[offset:offset + 1] != "=" or code[offset + 1:offset + 2] in ("=", ">"):
        return None
    open_at = _innermost_paren(code, offset)
    if open_at is None:
        return None
    close_at = _matching_close(code, open_at)
    if close_at is None:
        return None
    callee_end = open_at
    attrs = ""
    if code[:callee_end].rstrip().endswith("}"):  # an attribute block already: `op{a=1}(x, b=2)`
        brace_close = len(code[:callee_end].rstrip()) - 1
        brace_open = _matching_open(code, brace_close)
        if brace_open is None:
            return None
        attrs = text[brace_open + 1:brace_close].strip()
        callee_end = brace_open
    m = _CALLEE.search(code[:callee_end].rstrip())
    if m is None:
        return None
    callee = text[m.start():m.end()]
    if callee in _KEYWORDS:  # `if (a = 1)`: not an invocation
        return None
    inputs, named = [], [attrs] if attrs else []
    first: tuple[str, int, int] | None = None
    for start, end in _split_args(code, open_at + 1, close_at):
        piece = text[start:end]
        if not piece.strip():  # a trailing comma
            continue
        k = _KEYWORD.fullmatch(code[start:end])  # matched on the masked text: no '=' inside a string counts
        if k is None:
            inputs.append(" ".join(piece.split()))
            continue
        value = piece[k.end(1):].strip()[1:]  # after the '=' (in `text`: a masked string is blank in `code`)
        named.append(f"{k.group(1)}={' '.join(value.split())}")
        if first is None or start <= offset < end:
            first = (k.group(1), start + k.start(1), start + len(piece.rstrip()))
    if first is None:
        return None
    return NamedInput(first[0], first[1], first[2], f"{callee}{{{', '.join(named)}}}({', '.join(inputs)})")


def _innermost_paren(code: str, offset: int) -> int | None:
    stack: list[int] = []
    for i, ch in enumerate(code[:offset]):
        if ch in "([{":
            stack.append(i)
        elif ch in ")]}" and stack:
            stack.pop()
    return stack[-1] if stack and code[stack[-1]] == "(" else None


def _matching_close(code: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] in "([{":
            depth += 1
        elif code[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i if code[i] == ")" else None
        elif code[i] == ";":
            return None
    return None


def _matching_open(code: str, close_at: int) -> int | None:
    depth = 0
    for i in range(close_at, -1, -1):
        if code[i] in ")]}":
            depth += 1
        elif code[i] in "([{":
            depth -= 1
            if depth == 0:
                return i if code[i] == "{" else None
    return None


def _split_args(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """The comma-separated arguments between start and end (top-level commas only), as text ranges."""
    pieces, depth, begin = [], 0, start
    for i in range(start, end):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append((begin, i))
            begin = i + 1
    pieces.append((begin, end))
    return pieces
