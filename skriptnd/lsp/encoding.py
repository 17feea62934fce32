"""Positions between the editor's units and skriptnd's code points.

skriptnd's spans count Unicode code points; LSP positions count UTF-16 code units unless client
and server agree on another encoding at initialize (pygls negotiates it: UTF-32 when the client
offers it, which is code points). A character outside the Basic Multilingual Plane (an emoji in
a comment, say) is one code point but two UTF-16 units, so every position is converted at the
server's edge: requests' positions in, results' ranges out, with the text of the document each
range belongs to (an open buffer, else the file on disk, e.g. a standard module).
"""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types
from pygls.workspace import PositionCodec


class Positions:
    """Converts with ``codec`` (pygls' PositionCodec for the negotiated encoding); ``lines_of(uri)``
    gives a document's lines, or None when it cannot be read (then positions pass unchanged)."""

    def __init__(self, codec: PositionCodec, lines_of: Callable[[str], list[str] | None]) -> None:
        self.codec = codec
        self.lines_of = lines_of

    def incoming(self, uri: str, position: types.Position) -> types.Position:
        lines = self.lines_of(uri)
        if lines is None:
            return position
        converted = self.codec.position_from_client_units(lines, types.Position(position.line, position.character))
        return types.Position(converted.line, converted.character)

    def outgoing(self, uri: str, result: object) -> object:
        """``result`` (any LSP result: a list, a location, a symbol, an edit...) with its ranges (and those of
        nested locations, symbols, edits) in client units."""
        cache: dict[str, list[str] | None] = {}

        def lines(u: str) -> list[str] | None:
            if u not in cache:
                cache[u] = self.lines_of(u)
            return cache[u]

        def convert(obj: object, u: str) -> object:
            if isinstance(obj, list):
                return [convert(item, u) for item in obj]
            if isinstance(obj, types.Range):
                text = lines(u)
                return obj if text is None else self.codec.range_to_client_units(text, obj)
            if isinstance(obj, types.Location):
                return types.Location(obj.uri, convert(obj.range, obj.uri))
            for name in ("range", "selection_range", "children", "location", "related_information"):
                value = getattr(obj, name, None)
                if value is not None:
                    setattr(obj, name, convert(value, u))
            return obj

        return None if result is None else convert(result, uri)
