"""docs/targets.md is generated (`python -m skriptnd.targets.doc > docs/targets.md`) from the target tables
and the conformance runs: it must be current."""

from __future__ import annotations

from conformance_data import ROOT, mli_cases, mli_results, nnapi_results, nnapi_vectors  # noqa: F401

from skriptnd.targets import get
from skriptnd.targets.doc import render


def test_targets_doc_is_current(nnapi_results, mli_results, nnapi_vectors, mli_cases) -> None:  # noqa: F811
    text = render(nnapi_results, mli_results, nnapi_vectors, mli_cases)
    current = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    assert current == text, "docs/targets.md is stale: run python -m skriptnd.targets.doc > docs/targets.md"
    for target in ("nnapi", "mli"):
        for op in get(target).spec_ops():
            assert f"| {op.name} | {op.status} |" in current
