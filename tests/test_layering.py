"""Data flows one way: source → AST → checked definitions → composed graph → backends/exporters → CLI.

Every ``import`` in the package (module level and inside functions alike: a lazy import is still a
dependency) is read with :mod:`ast` and checked against the layers below, so that a module never reaches
up to what sits above it: the IR and the TOSA operator set never import an executor, exporters and
backends never import the CLI. The one sanctioned exception is listed with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skriptnd"

#: What each part of the package must never import (its own subpackage or module names, top level).
CLI = {"cli", "__main__", "deepstack", "lsp"}
RUNNERS = {"execute", "backends", "interop", "targets"}
FORBIDDEN: dict[str, set[str]] = {
    **{low: {"compose", "tosa", "model", "api", "check", *RUNNERS, *CLI}
       for low in ("source", "diagnostics", "syntax", "semantics", "lower", "resources", "fileio", "io",
                   "untrusted", "parallel", "hostcpu")},
    "compose": {"tosa", "model", "api", *RUNNERS, *CLI},
    "tosa": {"model", "api", *RUNNERS, *CLI},
    "execute": {"backends", "interop", "targets", *CLI},
    "backends": CLI,
    "interop": CLI,
    "targets": CLI,
    "model": CLI,
    "check": CLI,
}
#: (importing file, imported part) -> why it is allowed
EXCEPTIONS = {
    ("compose/ir.py", "backends"): "Graph.run(inputs, backend=...) looks the backend up at call time (issue 14's API)",
}


def _imports(path: Path, root: Path = PACKAGE) -> list[tuple[str, int]]:
    """(top-level part of skriptnd imported, line) for every import in one file of the package at root."""
    package = list(path.relative_to(root).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                parts = base + (node.module.split(".") if node.module else [])
                names = parts[:1] if parts else [a.name for a in node.names]
            elif node.module and node.module.split(".")[0] == "skriptnd":
                names = node.module.split(".")[1:2] or [a.name for a in node.names]
            else:
                continue
            found += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[1], node.lineno) for a in node.names
                      if a.name.startswith("skriptnd.")]
    return found


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


FILES = sorted(PACKAGE.rglob("*.py"))


def test_the_rules_name_real_parts_of_the_package() -> None:
    parts = {_part(p) for p in FILES}
    assert set(FORBIDDEN) <= parts
    assert {name for names in FORBIDDEN.values() for name in names} - {"__main__"} <= parts


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_layer_above_it(path: Path) -> None:
    me = _part(path)
    rel = str(path.relative_to(PACKAGE))
    wrong = [f"{rel}:{line} imports skriptnd.{name}" for name, line in _imports(path)
             if name in FORBIDDEN.get(me, set()) and (rel, name) not in EXCEPTIONS]
    assert not wrong, wrong


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    """The reader itself: an import inside a function counts, relative and absolute alike."""
    fake = tmp_path / "skriptnd" / "compose" / "probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from .ir import Graph\n\ndef f():\n    from ..execute import Executor\n"
                    "    import skriptnd.cli.app\n    from skriptnd import tosa\n", encoding="utf-8")
    assert [name for name, _ in _imports(fake, tmp_path / "skriptnd")] == ["compose", "execute", "cli", "tosa"]
