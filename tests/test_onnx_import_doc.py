"""docs/import.md's ONNX part is generated from the converter registry and must be current."""

from __future__ import annotations

from pathlib import Path

from skriptnd.interop.onnx_import import doc
from skriptnd.interop.onnx_import.registry import registry

DOC = Path(__file__).resolve().parents[1] / "docs" / "import.md"


def test_import_doc_is_current() -> None:
    assert doc.current(DOC) == doc.render(), \
        "docs/import.md is stale: run python -m skriptnd.interop.onnx_import.doc docs/import.md"


def test_every_converter_is_documented() -> None:
    text = doc.current(DOC)
    for op, entry in registry().items():
        assert f"| {op} | {entry.target} |" in text


def test_the_ops_package_imports_every_documented_family() -> None:
    """registry.FAMILIES orders the table; ops/__init__.py imports the families: each listed family has
    converters registered (a family left out of ops/__init__.py would leave its op types unsupported) and
    no converter comes from an unlisted family."""
    from skriptnd.interop.onnx_import.registry import FAMILIES

    families = {entry.family for entry in registry().values()}
    assert families == set(FAMILIES)
    assert {"If", "Loop", "Conv", "LSTM", "QuantizeLinear"} <= set(registry())
