"""String literals: escapes and `{expr}` format fields (spec §2.4, string formatting).

The format-field expressions are parsed by the caller (it owns the parser); this module
only splits the literal into text pieces and field sources with their positions.
"""

from __future__ import annotations

from dataclasses import dataclass

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "{": "{", "}": "}"}


@dataclass(frozen=True, slots=True)
class FieldSource:
    """The text of one `{...}` field and where it starts (1-based line/col of its first char)."""

    text: str
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class StringError:
    message: str
    line: int
    col: int
    end_col: int


def split_literal(raw: str, line: int, col: int) -> tuple[list[str | FieldSource], list[StringError]]:
    """Split a quoted literal (quotes included, as lexed) starting at line:col."""
    parts: list[str | FieldSource] = []
    errors: list[StringError] = []
    text: list[str] = []
    body = raw[1:-1]
    cur_line, cur_col = line, col + 1  # position of body[0]
    i = 0

    def advance(s: str) -> None:
        nonlocal cur_line, cur_col
        for ch in s:
            if ch == "\n":
                cur_line, cur_col = cur_line + 1, 1
            else:
                cur_col += 1

    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1] if i + 1 < len(body) else ""
            if nxt in _ESCAPES:
                text.append(_ESCAPES[nxt])
            else:
                errors.append(StringError(f"unknown escape sequence '\\{nxt}'; write '\\\\' for a backslash",
                                          cur_line, cur_col, cur_col + 2))
                text.append(nxt)
            advance(body[i:i + 2])
            i += 2
        elif ch == "{":
            depth, j = 1, i + 1
            while j < len(body) and depth:
                if body[j] == "{":
                    depth += 1
                elif body[j] == "}":
                    depth -= 1
                j += 1
            if depth:
                errors.append(StringError("unclosed '{' in string; write '\\{' for a literal brace",
                                          cur_line, cur_col, cur_col + 1))
                text.append(body[i:])
                break
            if text:
                parts.append("".join(text))
                text = []
            advance("{")
            field = body[i + 1:j - 1]
            if not field.strip():
                errors.append(StringError("empty format field '{}'; write '\\{' for a literal brace",
                                          cur_line, cur_col - 1, cur_col + 1))
            else:
                parts.append(FieldSource(field, cur_line, cur_col))
            advance(body[i + 1:j])
            i = j
        elif ch == "}":
            errors.append(StringError("unmatched '}' in string; write '\\}' for a literal brace",
                                      cur_line, cur_col, cur_col + 1))
            text.append(ch)
            advance(ch)
            i += 1
        else:
            text.append(ch)
            advance(ch)
            i += 1
    if text:
        parts.append("".join(text))
    return parts, errors


def quote(parts: list[str]) -> str:
    """Escape literal text for printing back inside double quotes."""
    out = []
    for piece in parts:
        for ch in piece:
            if ch in '\\"{}':
                out.append("\\" + ch)
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\r":
                out.append("\\r")
            elif ch == "\0":
                out.append("\\0")
            else:
                out.append(ch)
    return "".join(out)
