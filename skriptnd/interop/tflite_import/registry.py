"""The converter registry: TFLite builtin operator name -> the function that writes its SkriptND statements.

One module per operator family in `ops/` registers its converters with `@converter(...)`; the importer
looks operators up here by their builtin name (`CONV_2D`), and `docs/import-tflite.md` is generated from
the same entries, so the documentation cannot drift from the code.

This module imports none of its entries: `ops/__init__.py` imports the families (each registers itself on
import), and whoever reads the table imports that package first (the importer, the docs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from skriptnd.interop.tflite_import.context import Context
    from skriptnd.interop.tflite_import.reader import Operator

#: The operator-family modules under ops/, in the order of the documentation's table (a test checks that
#: ops/__init__.py imports the same list).
FAMILIES = ["elementwise", "activation", "conv", "pool", "linalg", "reduce", "shape", "image", "recurrent", "control", "misc"]

#: A converter: writes the SkriptND statements of the context's current operator.
Converter = Callable[["Context", "Operator"], None]


@dataclass(frozen=True)
class Entry:
    name: str  # the builtin operator's name, as in schema.fbs
    convert: Converter
    target: str  # the SkriptND operator(s) it becomes, for the documentation
    caveats: str
    family: str


REGISTRY: dict[str, Entry] = {}


def converter(*names: str, target: str, caveats: str = "") -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        family = fn.__module__.rpartition(".")[2]
        for name in names:
            assert name not in REGISTRY, f"two converters for {name}"
            REGISTRY[name] = Entry(name, fn, target.replace("{op}", name), caveats, family)
        return fn
    return register


def registry() -> dict[str, Entry]:
    """All converters (complete once `skriptnd.interop.tflite_import.ops` is imported, as the importer does)."""
    return REGISTRY
