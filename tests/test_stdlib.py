"""The standard library: complete against the spec, generated faithfully, checked and documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_data import shared_dir

from skriptnd.check.program import check_paths
from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.docgen import render_stdlib
from skriptnd.semantics.intrinsics import STDLIB_INTRINSICS, operator_kind
from skriptnd.syntax import parse_module

ROOT = Path(__file__).resolve().parents[1]
#: The spec: SKRIPTND_SPEC, else in the shared folder the conformance tests use (SKRIPTND_SHARED, or ../shared
#: beside the checkout or its parent: tests/conformance_data.py), so that one variable runs every skipped test.
SPEC = Path(os.environ.get("SKRIPTND_SPEC") or (shared_dir() or ROOT.parent / "shared") / "spec"
            / "nnef-2.0-skriptnd-rev8.md")
sys.path.insert(0, str(ROOT / "tests" / "tools"))
import build_stdlib  # noqa: E402


def spec_text() -> str:
    """The spec's text. A bare clone has no ../shared beside it: the tests needing it skip there, saying
    why; in CI (``CI`` set) its absence is a failure, since CI must run them."""
    if not SPEC.is_file():
        reason = (f"the NNEF 2.0 spec is not at {SPEC} (a clone without ../shared/spec beside it; "
                  "set SKRIPTND_SPEC to the spec's .md file, or SKRIPTND_SHARED to the folder holding spec/, to run this test)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return SPEC.read_text(encoding="utf-8")


def modules() -> dict[str, list]:
    out = {}
    for name in STDLIB_MODULES:
        module, diags = parse_module((stdlib_dir() / f"{name}.sknd").read_text(), name)
        assert not diags
        out[name] = list(module.definitions)
    return out


def spec_operators() -> dict[str, set[str]]:
    """Operator names per module, read from the spec text itself (independently of build_stdlib)."""
    text = spec_text()
    chapter = text[text.index("## 4. Standard Library Operators"):]
    found: dict[str, set[str]] = {}
    for section in re.split(r"\n### 4\.\d+\. ", chapter)[1:]:
        module = re.search(r"operators are defined in the `(\w+)` module", section).group(1)
        code = "\n".join(re.findall(r"```\n(.*?)```", section, flags=re.S))
        found[module] = set(re.findall(r"^\s*(?:public\s+)?operator\s+(\w+)", code, flags=re.M))
    return found


def test_every_spec_operator_is_defined() -> None:
    defined = {m: {d.name for d in defs} for m, defs in modules().items()}
    expected = spec_operators()
    assert set(expected) == set(STDLIB_MODULES)
    for module, names in expected.items():
        missing = names - defined[module]
        assert not missing, f"{module}: {sorted(missing)}"
    assert sum(len(v) for v in expected.values()) == 151


def test_stdlib_files_are_generated_from_the_spec() -> None:
    generated = build_stdlib.generate(spec_text())
    for module, text in generated.items():
        assert (stdlib_dir() / f"{module}.sknd").read_text(encoding="utf-8") == text, (
            f"stdlib/{module}.sknd is stale: run tests/tools/build_stdlib.py")


def test_every_erratum_is_documented() -> None:
    errata = (ROOT / "docs" / "spec-errata.md").read_text(encoding="utf-8")
    for e in build_stdlib.ERRATA:
        assert f".{e.operator}`" in errata, e.operator
        if "\n" not in e.old:
            assert e.old in errata and e.new in errata, e.operator


def test_intrinsics_are_exactly_the_operators_without_implementation() -> None:
    found = {f"{m}.{d.name}" for m, defs in modules().items() for d in defs if operator_kind(d) == "intrinsic"}
    assert found == STDLIB_INTRINSICS


def test_stdlib_checks_clean() -> None:
    result = check_paths([str(stdlib_dir() / f"{m}.sknd") for m in STDLIB_MODULES])
    assert result.diagnostics == []


def test_docs_stdlib_md_is_in_sync() -> None:
    assert (ROOT / "docs" / "stdlib.md").read_text(encoding="utf-8") == render_stdlib(), (
        "docs/stdlib.md is stale: run 'sknd doc --output docs/stdlib.md'")


@pytest.mark.parametrize("target", ["nn.conv", "algo", "layout.reshape"])
def test_sknd_doc_prints_the_reference(target: str) -> None:
    out = subprocess.run([sys.executable, "-m", "skriptnd", "doc", target], capture_output=True, text=True, check=True)
    assert f"`{target if '.' in target else target + '.top_k'}`" in out.stdout


def test_sknd_doc_unknown_operator_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "skriptnd", "doc", "nn.rellu"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "did you mean 'nn.relu'" in out.stderr


def test_without_the_spec_the_spec_tests_skip_locally_and_fail_in_ci(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(sys.modules[__name__], "SPEC", tmp_path / "absent" / "spec.md")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not at .*absent"):
        test_every_spec_operator_is_defined()
    with pytest.raises(pytest.skip.Exception, match="SKRIPTND_SPEC"):
        test_stdlib_files_are_generated_from_the_spec()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="not at .*absent"):
        test_every_spec_operator_is_defined()
