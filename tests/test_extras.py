"""Installs that work from a clone (issue 29): every missing-package hint names an extra that pyproject.toml
has, in the form that works from the checkout (`pip install -e '.[X]'`), and each extra lists the
distributions that provide the packages its backend or importer needs."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from skriptnd import backends
from skriptnd.extras import OPTIONAL, USER_EXTRAS, hint_for, install_hint

ROOT = Path(__file__).resolve().parents[1]
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"]
#: Where a user reads an install hint: the package's messages and generated docs, the handwritten docs.
HINTED = [*sorted((ROOT / "skriptnd").rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
#: The test suite's skip messages too (they point at the dev extra).
TESTS = [p for p in sorted((ROOT / "tests").glob("*.py")) if p.name != "test_extras.py"]


def _name(requirement: str) -> str:
    """The distribution a requirement names (PEP 508: the name before any version, extra or marker)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _names(extra: str) -> set[str]:
    return {_name(r) for r in EXTRAS[extra]}


def _hints() -> list[tuple[str, str]]:
    """(file, extra) for every `pip install -e '.[X]'` in the code and the docs."""
    found = []
    for path in HINTED + TESTS:
        text = path.read_text(encoding="utf-8")
        found += [(str(path.relative_to(ROOT)), m) for m in re.findall(r"pip install -e '\.\[(\w+)\]'", text)]
    return found


def test_every_hint_names_an_extra_of_pyproject() -> None:
    hints = _hints()
    assert {extra for _, extra in hints} >= {"onnx", "nnef", "dev", "zoo"}  # the reader finds them
    wrong = [(f, extra) for f, extra in hints if extra not in EXTRAS]
    assert not wrong, wrong


def test_no_hint_asks_a_package_index_for_skriptnd() -> None:
    """`pip install 'skriptnd[onnx]'` fails: skriptnd is installed from its checkout, not from an index."""
    stale = [str(p.relative_to(ROOT)) for p in HINTED if re.search(r"skriptnd\[\w+\]", p.read_text(encoding="utf-8"))]
    assert not stale, stale


@pytest.mark.parametrize("module", sorted(OPTIONAL))
def test_each_optional_package_is_in_its_extra_all_and_dev(module: str) -> None:
    optional = OPTIONAL[module]
    for extra in (optional.extra, "all", "dev"):
        assert optional.distribution in _names(extra), (module, extra)


@pytest.mark.parametrize("module", sorted(OPTIONAL))
def test_each_distribution_provides_its_module(module: str) -> None:
    """Independent of our table: the installed distribution's own file list holds the module."""
    optional = OPTIONAL[module]
    try:
        files = importlib.metadata.files(optional.distribution) or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{optional.distribution} is not installed here")
    package = module.replace(".", "/")
    assert any(str(f).startswith((package + "/", package + ".")) for f in files), (module, optional.distribution)


def test_all_is_the_union_of_the_user_extras_and_dev_holds_all() -> None:
    assert set(EXTRAS["all"]) == {r for extra in USER_EXTRAS for r in EXTRAS[extra]}
    assert set(EXTRAS["all"]) <= set(EXTRAS["dev"])
    assert set(USER_EXTRAS) == {o.extra for o in OPTIONAL.values()}
    assert "pytest" in _names("dev") and "pytest" not in _names("all")  # the test tools stay in dev


@pytest.mark.parametrize("name", backends.names())
def test_each_backend_missing_package_points_at_the_extra_that_installs_it(name: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    backend = backends.get(name)
    for module in backend.requires:
        assert module in OPTIONAL, f"{name} needs {module}: give it an extra in skriptnd/extras.py"
        optional = OPTIONAL[module]
        assert optional.distribution in _names(optional.extra)
        monkeypatch.setattr(backend, "requires", (module,))
        monkeypatch.setattr("importlib.util.find_spec", lambda _m: None)  # as if it were not installed
        message = backend.missing()
        monkeypatch.undo()
        assert message is not None and f"pip install -e '.[{optional.extra}]'" in message, message
        assert "from the skriptnd checkout" in message


def test_the_backends_name_their_extras() -> None:
    """--via iree needs the iree extra, --via onnxruntime the onnx extra (the brief of issue 29)."""
    assert {OPTIONAL[m].extra for m in backends.get("iree").requires} == {"iree"}
    assert {OPTIONAL[m].extra for m in backends.get("onnxruntime").requires} == {"onnx"}


def test_a_package_without_an_extra_is_named_itself() -> None:
    assert hint_for("threadpoolctl") == "pip install threadpoolctl"
    assert hint_for("iree.runtime") == install_hint("iree") == "from the skriptnd checkout: pip install -e '.[iree]'"


def test_onnx_export_without_onnx_points_at_the_onnx_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import skriptnd
    from skriptnd.diagnostics import DiagnosticError
    from skriptnd.interop.onnx_export import to_onnx

    graph = skriptnd.load(ROOT / "models" / "digits").compose(random_weights=True, seed=1)
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    with pytest.raises(DiagnosticError) as err:
        to_onnx(graph)
    (diag,) = err.value.diagnostics
    assert diag.code == "E0844" and diag.hint == install_hint("onnx")
