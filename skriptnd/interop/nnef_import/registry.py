"""The converter registry: NNEF 1.x operation name -> function that emits SkriptND calls.

A converter gets the conversion context and the parsed `nnef.Operation`. Operations that NNEF defines as
compound fragments in its own standard library and that have no direct SkriptND counterpart are listed in
`EXPANDED`: the `nnef` parser expands them into their defining primitives (the spec's own definition, so the
result is exact), which are then converted one by one. `docs/import-nnef.md` is generated from this module.

This module imports none of its entries: `ops/__init__.py` imports the families (each registers itself on
import), and whoever reads the tables imports that package first (the importer, the docs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from skriptnd.interop.nnef_import.context import Context, Operation

Converter = Callable[["Context", "Operation"], None]


@dataclass(frozen=True)
class Entry:
    """One mapped operation: its converter and the SkriptND operator(s) it becomes, for the table."""

    convert: Converter
    target: str
    note: str = ""


CONVERTERS: dict[str, Entry] = {}

#: Declarations the importer writes itself (op -> what it becomes).
DECLARED: dict[str, str] = {}

#: NNEF standard compound operations imported through their NNEF definition (op -> why / what it uses).
EXPANDED: dict[str, str] = {}

#: NNEF standard operations that cannot be imported, with the reason (shown in the diagnostic and the docs).
UNSUPPORTED: dict[str, str] = {}


def converter(*names: str, target: str, note: str = "") -> Callable[[Converter], Converter]:
    """Register `fn` as the converter of the NNEF operations `names`."""

    def register(fn: Converter) -> Converter:
        for name in names:
            assert name not in CONVERTERS, f"duplicate converter for {name}"
            CONVERTERS[name] = Entry(fn, target.replace("{op}", name), note)
        return fn

    return register


def expanded(note: str, *names: str) -> None:
    for name in names:
        EXPANDED[name] = note


def unsupported(note: str, *names: str) -> None:
    for name in names:
        UNSUPPORTED[name] = note

