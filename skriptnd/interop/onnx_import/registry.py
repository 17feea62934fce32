"""The converter registry: ONNX op type -> the function that writes its SkriptND statements.

One module per operator family in `ops/` registers its converters with `@converter(...)`; the
importer looks op types up here, and `docs/import.md` is generated from the same entries (the
`target` and `caveats` strings), so the documentation cannot drift from the code.

This module imports none of its entries: `ops/__init__.py` imports the families (each registers itself on
import), and whoever reads the table imports that package first (the importer, the docs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from skriptnd.interop.onnx_import.context import Context, Node

#: The operator-family modules under ops/, in the order of the documentation's table (ops/__init__.py imports
#: them; a test checks that the two lists agree).
FAMILIES = ["elementwise", "activation", "conv", "pool", "norm", "linalg", "reduce", "shape", "index",
            "recurrent", "image", "quant", "misc", "control"]


#: A converter: writes the SkriptND statements of the context's current node.
Converter = Callable[["Context", "Node"], None]


@dataclass(frozen=True)
class Entry:
    op_type: str
    convert: Converter
    target: str  # the SkriptND operator(s) it becomes, for the documentation
    caveats: str
    family: str
    #: Input positions the converter takes as graph attributes when a graph input feeds them (issue 25): a
    #: graph input read only at such positions is imported as an attribute, bound when a run gives its value
    params: tuple[int, ...] = ()


REGISTRY: dict[str, Entry] = {}


def converter(*op_types: str, target: str, caveats: str = "", params: tuple[int, ...] = ()
              ) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        family = fn.__module__.rpartition(".")[2]
        for op_type in op_types:
            assert op_type not in REGISTRY, f"two converters for {op_type}"
            REGISTRY[op_type] = Entry(op_type, fn, target.replace("{op}", op_type), caveats, family, params)
        return fn
    return register


def registry() -> dict[str, Entry]:
    """All converters (complete once `skriptnd.interop.onnx_import.ops` is imported, as the package does)."""
    return REGISTRY
