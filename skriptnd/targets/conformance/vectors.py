"""Reading conformance vector files (NNAPI CTS, MLI user tests) with located diagnostics.

A vector file is JSON; a problem in it (not JSON, a field missing or of the wrong kind) is a diagnostic
at the field's place in the file, naming the field, so a user who hand-edits a vector sees where it went
wrong. The dicts themselves carry no positions, so :class:`Locator` finds a field again in the text by
walking the JSON path (object keys and list indices) with Python's own JSON scanner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import Span

register_codes({
    "E0900": "conformance vector file is not readable JSON",
    "E0901": "conformance vector field missing or malformed",
    "E0902": "conformance vector operation not expressible in the standard library",
})

Key = str | int
#: a value of a vector file, as json.loads gives it
Json = dict[str, "Json"] | list["Json"] | str | int | float | bool | None


@dataclass
class Locator:
    """Positions of JSON paths in a vector file's text (``path`` is only used to name the file)."""

    path: str
    text: str = ""

    def span(self, keys: Sequence[Key] = ()) -> Span:
        """The span of the value at ``keys`` (its key, for an object member), or the deepest prefix found."""
        offset = _find(self.text, list(keys)) if self.text else 0
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return Span(self.path, line, col, line, col + 1)

    def error(self, keys: Sequence[Key], message: str, code: str = "E0901", hint: str | None = None
              ) -> DiagnosticError:
        field = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".") or "<file>"
        return DiagnosticError([Diagnostic(code=code, message=f"{field}: {message}", span=self.span(keys),
                                           hint=hint)])


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value_end(text: str, i: int) -> int:
    """The end of the JSON value starting at ``i``."""
    _, end = json.JSONDecoder().raw_decode(text, i)
    return end


def _find(text: str, keys: list[Key]) -> int:
    """Offset of the value at ``keys`` (for an object key: of the key itself); the deepest prefix found."""
    i = _skip_ws(text, 0)
    found = i
    for n, key in enumerate(keys):
        if i >= len(text):
            return found
        if isinstance(key, str) and text[i] == "{":
            i = _skip_ws(text, i + 1)
            while i < len(text) and text[i] == '"':
                name, j = json.decoder.scanstring(text, i + 1)
                j = _skip_ws(text, j)
                j = _skip_ws(text, j + 1)  # ':'
                if name == key:
                    found = i if n == len(keys) - 1 else j
                    i = j
                    break
                j = _skip_ws(text, _value_end(text, j))
                if j < len(text) and text[j] == ",":
                    j = _skip_ws(text, j + 1)
                i = j
            else:
                return found
        elif isinstance(key, int) and text[i] == "[":
            i = _skip_ws(text, i + 1)
            for _ in range(key):
                if text[i] == "]":
                    return found
                i = _skip_ws(text, _value_end(text, i))
                if text[i] == ",":
                    i = _skip_ws(text, i + 1)
            found = i
        else:
            return found
    return found


def read_vector(path: Path | str) -> tuple[dict[str, Any], Locator]:
    """The vector file's JSON object and a locator for its fields; E0900 when it is not a JSON object."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DiagnosticError([Diagnostic(code="E0900", message=f"cannot read {p}: {err}",
                                          span=Span(str(p), 1, 1, 1, 2))]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DiagnosticError([Diagnostic(code="E0900", message=f"not valid JSON: {err.msg}",
                                          span=Span(str(p), err.lineno, err.colno, err.lineno, err.colno + 1))]
                              ) from None
    loc = Locator(str(p), text)
    if not isinstance(data, dict):
        raise loc.error([], "a vector file must hold one JSON object", code="E0900")
    return data, loc


def field(obj: Json, keys: Sequence[Key], loc: Locator, kind: type | tuple[type, ...], what: str) -> Any:
    """``obj[keys[-1]]`` (``obj`` is the value at ``keys[:-1]``), checked to be of ``kind``."""
    key = keys[-1]
    if isinstance(key, str):
        if not isinstance(obj, dict) or key not in obj:
            raise loc.error(list(keys[:-1]), f"missing field '{key}' ({what})")
        value = obj[key]
    else:
        if not isinstance(obj, list) or not 0 <= key < len(obj):
            raise loc.error(list(keys[:-1]), f"has no item {key} ({what})")
        value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise loc.error(list(keys), f"must be {what}, got {type(value).__name__}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
