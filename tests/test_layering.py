"""Data flows one way: source → AST → checked definitions → composed graph → backends/exporters → CLI.

One rule, no exception: a module imports only its own part of the package and the parts in LAYERS below
it. Every ``import`` counts (module level and inside functions alike: a lazy import is still a
dependency), except those under ``if TYPE_CHECKING:``, which only name types. The layers, bottom up:

- the base, which imports nothing above it: source text and spans, diagnostics, file access, untrusted
  input, resources, the version, the worker pool, the host's CPU, tensor files;
- ``syntax`` (the grammar, parser and AST), ``semantics`` (binding, types, evaluation; ``api``'s
  ``infer``), ``lower`` (the scalar plans of ``@lower``), ``compose`` (the graph IR and the composer),
  ``check`` (checking programs and graphs), ``model`` (loading a model folder and composing it);
- ``tosa`` (the operator set, legalization, programs, serializers), ``execute`` (the executor and the
  native kernels), ``interop`` (ONNX / NNEF import and export), ``backends`` (running a graph),
  ``targets`` (target tables and conformance runners), ``render`` (pictures of a graph: they colour by the
  legalization, the kernels and the targets);
- the faces: ``lsp``, ``cli``, ``__main__``, and the package ``__init__`` on top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skriptnd"

#: bottom up; a part may import its own part and the parts of the layers before its own
LAYERS: list[set[str]] = [
    {"source", "version", "hostcpu", "deepstack", "extras"},
    {"untrusted", "resources", "parallel", "profiling"},
    {"diagnostics"},
    {"fileio"},
    {"io"},
    {"syntax"},
    {"semantics", "api"},
    {"lower"},
    {"compose"},
    {"check"},
    {"model"},
    {"tosa"},
    {"execute"},
    {"interop"},
    {"backends"},
    {"targets"},
    {"quantize"},
    {"render"},
    {"lsp"},
    {"cli"},
    {"__main__"},
    {"__init__"},
]
LEVEL = {part: i for i, layer in enumerate(LAYERS) for part in layer}

#: (importing file, imported part): imports that still break the rule, to be removed (issue 24); empty when done
KNOWN: set[tuple[str, str]] = set()


def _imports(path: Path, root: Path = PACKAGE, within: str = "skriptnd") -> list[tuple[str, int]]:
    """(top-level part of ``within`` imported, line) for every import in one file of the package ``within``
    found at root (the package itself, or one of its parts: ``skriptnd.tosa`` at ``PACKAGE / "tosa"``)."""
    depth = within.count(".") + 1
    package = list(path.relative_to(root).parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(c) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
                   for c in ast.walk(n)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                parts = base + (node.module.split(".") if node.module else [])
                names = parts[:1] if parts else [a.name for a in node.names]
            elif node.module and node.module.split(".")[:depth] == within.split("."):
                names = node.module.split(".")[depth:depth + 1] or [a.name for a in node.names]
            else:
                continue
            found += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[depth], node.lineno) for a in node.names
                      if a.name.startswith(within + ".")]
    return found


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_part(p) for p in FILES}
    assert parts == set(LEVEL), (parts - set(LEVEL), set(LEVEL) - parts)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_layer_above_it(path: Path) -> None:
    me = _part(path)
    rel = str(path.relative_to(PACKAGE))
    wrong = [f"{rel}:{line} imports skriptnd.{name}" for name, line in _imports(path)
             if name in LEVEL and LEVEL[name] > LEVEL[me] and (rel, name) not in KNOWN]
    assert not wrong, wrong


def test_the_known_exceptions_are_still_exceptions() -> None:
    """An entry of KNOWN that no longer breaks the rule must go (the list only shrinks)."""
    still = {(str(p.relative_to(PACKAGE)), name) for p in FILES for name, _ in _imports(p)
             if name in LEVEL and LEVEL[name] > LEVEL[_part(p)]}
    assert KNOWN <= still, KNOWN - still


def test_the_architecture_doc_names_every_part_in_order() -> None:
    """docs/architecture.md's table of layers lists every part, in the order of LAYERS."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = "".join(line.split("|")[2] for line in doc.splitlines()
                    if line.startswith("| ") and line.count("|") >= 4 and "`" in line.split("|")[2])
    named = [n for n in re.findall(r"`([a-z_]+)`", table) if n in LEVEL]
    assert set(named) == set(LEVEL), set(LEVEL) ^ set(named)
    assert [LEVEL[n] for n in named] == sorted(LEVEL[n] for n in named), named


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    """The reader itself: an import inside a function counts, relative and absolute alike."""
    fake = tmp_path / "skriptnd" / "compose" / "probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from .ir import Graph\n\ndef f():\n    from ..execute import Executor\n"
                    "    import skriptnd.cli.app\n    from skriptnd import tosa\n", encoding="utf-8")
    assert [name for name, _ in _imports(fake, tmp_path / "skriptnd")] == ["compose", "execute", "cli", "tosa"]


# -- inside tosa: the same rule for its folders ------------------------------------------------------------

TOSA = PACKAGE / "tosa"
#: bottom up: the operator set, legalization onto it, programs of legalized runs, the MLIR writers, the
#: integer lowering (which writes MLIR with their text pieces), SPIR-V (which reads programs of every kind);
#: the package's own ``__init__`` on top
TOSA_LAYERS = ["ops", "legalize", "program", "mlir", "integer", "spirv", "__init__"]
TOSA_FILES = sorted(TOSA.rglob("*.py"))


def test_every_folder_of_tosa_has_a_layer() -> None:
    parts = {str(p.relative_to(TOSA).parts[0]).removesuffix(".py") for p in TOSA_FILES}
    assert parts == set(TOSA_LAYERS), (parts - set(TOSA_LAYERS), set(TOSA_LAYERS) - parts)


@pytest.mark.parametrize("path", TOSA_FILES, ids=lambda p: str(p.relative_to(TOSA)))
def test_no_tosa_module_imports_a_folder_above_it(path: Path) -> None:
    me = str(path.relative_to(TOSA).parts[0]).removesuffix(".py")
    wrong = [f"tosa/{path.relative_to(TOSA)}:{line} imports skriptnd.tosa.{name}"
             for name, line in _imports(path, TOSA, "skriptnd.tosa")
             if name in TOSA_LAYERS and TOSA_LAYERS.index(name) > TOSA_LAYERS.index(me)]
    assert not wrong, wrong


def test_the_checker_sees_a_folder_of_tosa(tmp_path: Path) -> None:
    """The reader inside a part: ``skriptnd.tosa.X`` names folder X, whatever the import's form."""
    fake = tmp_path / "tosa" / "ops" / "probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from skriptnd.tosa.legalize.core import Builder\n\ndef f():\n    import skriptnd.tosa.spirv.writer\n"
                    "    from skriptnd.tosa import mlir\n    from skriptnd.compose import ir\n", encoding="utf-8")
    assert [name for name, _ in _imports(fake, tmp_path / "tosa", "skriptnd.tosa")] == ["legalize", "spirv", "mlir"]


# -- file by file: no import cycle (a layer's own modules may import each other, but never in a circle) ----

def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = ["skriptnd", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth; TYPE_CHECKING aside), as Python resolves them."""
    modules = {_module(p): p for p in FILES}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(c) for n in ast.walk(tree) if isinstance(n, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(n.test) for c in ast.walk(n)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_cycle_between_modules() -> None:
    """Within a layer the layer rule allows any import; file by file there is still no cycle."""
    assert not _cycles(_module_graph())


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"]]
