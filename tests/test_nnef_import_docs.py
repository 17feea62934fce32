"""docs/import-nnef.md is generated from the NNEF converter registry and must match it; every NNEF 1.x
standard operation the nnef package knows has a row, and the registry names only real SkriptND operators."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skriptnd.interop.nnef_import import docs, registry
from skriptnd.interop.nnef_import import ops as _families  # noqa: F401 - the package that fills the registry

ROOT = Path(__file__).resolve().parents[1]


def test_docs_match_the_registry() -> None:
    pytest.importorskip("nnef")
    text = (ROOT / "docs" / "import-nnef.md").read_text(encoding="utf-8")
    assert text == docs.render(), "regenerate: python -m skriptnd.interop.nnef_import.docs > docs/import-nnef.md"


def test_every_standard_operation_has_a_row() -> None:
    nnef = pytest.importorskip("nnef")
    text = docs.render()
    rows = set(re.findall(r"^\| `([a-z_0-9]+)` \|", text, re.M))
    assert rows == set(nnef.StandardOperations)


def test_registry_targets_are_standard_library_operators() -> None:
    for op, entry in registry.CONVERTERS.items():
        for target in re.findall(r"\b(?:math|nn|layout|linalg|image|quant)\.[a-z_0-9]+", entry.target):
            module, name = target.split(".")
            assert (ROOT / "stdlib" / f"{module}.sknd").read_text().count(f"operator {name} {{") == 1, (op, target)
