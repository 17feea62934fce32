"""The converter registry: ONNX op type -> the function that writes its SkriptND statements.

One module per operator family in `ops/` registers its converters with `@converter(...)`; the
importer looks op types up here, and `docs/import.md` is generated from the same entries (the
`target` and `caveats` strings), so the documentation cannot drift from the code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The operator-family modules under ops/, in the order of the documentation's table.
FAMILIES = ["elementwise", "activation", "conv", "pool", "norm", "linalg", "reduce", "shape", "index",
            "recurrent", "image", "quant", "misc", "control"]


@dataclass(frozen=True)
class Entry:
    op_type: str
    convert: Callable[[Any, Any], None]
    target: str  # the SkriptND operator(s) it becomes, for the documentation
    caveats: str
    family: str


REGISTRY: dict[str, Entry] = {}


def converter(*op_types: str, target: str, caveats: str = "") -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        family = fn.__module__.rpartition(".")[2]
        for op_type in op_types:
            assert op_type not in REGISTRY, f"two converters for {op_type}"
            REGISTRY[op_type] = Entry(op_type, fn, target.replace("{op}", op_type), caveats, family)
        return fn
    return register


def registry() -> dict[str, Entry]:
    """All converters (the family modules are imported on first use)."""
    for family in FAMILIES:
        importlib.import_module(f"{__package__}.ops.{family}")
    return REGISTRY
