"""The editor's view of SkriptND sources: open documents, their analyses and cached checks.

Independent of the LSP transport (server.py wires it to pygls), so it can be driven directly.

An *analysis* of an open document is the `Program` loaded with that document as its entry:
the model folder is the nearest folder above it that holds a main.sknd (else its own folder),
and every open document's text replaces the file on disk (unsaved buffers). Parsing goes
through one `IncrementalParser`, so only edited definitions are parsed again; standard modules
stay cached per process by the loader.

Checking an analysis gives the diagnostics `sknd check` reports for that document: loading
diagnostics, the module-level checks and every `DEFINITION_CHECKS` hook on each definition.
The hooks' results are cached per definition: a definition is checked again only when its AST
object changed (it was edited, or moved to other lines) or when one of the operator names it
looked up (through `Program.resolve_operator`) now resolves to another definition.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from skriptnd.check.paths import model_root as find_model_root
from skriptnd.check.program import DEFINITION_CHECKS, check_composition, one_per_location
from skriptnd.diagnostics import Diagnostic
from skriptnd.lsp.incremental import IncrementalParser, shift_diagnostic
from skriptnd.semantics.module_checks import check_modules
from skriptnd.semantics.modules import LoadedModule, Program, load_program
from skriptnd.semantics.scope import Scope
from skriptnd.semantics.typecheck import build_scope
from skriptnd.syntax import ast
from skriptnd.syntax.scan import mask

__all__ = ["MAX_FILE_BYTES", "Analysis", "Document", "Workspace", "model_root", "path_to_uri", "same_file", "uri_to_path"]

#: The largest file the server reads from disk for a request (documents the client opens come with their text).
MAX_FILE_BYTES = 16 << 20


def uri_to_path(uri: str) -> Path:
    """The file a `file:` URI names; other schemes (untitled buffers) get a made-up path."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        path = unquote(parsed.path)
        if os.name == "nt" and path.startswith("/") and len(path) > 2 and path[2] == ":":
            path = path[1:]
        return Path(path)
    name = Path(unquote(parsed.path)).name or "untitled"
    if not name.endswith(".sknd"):
        name += ".sknd"
    return Path.cwd() / name


def path_to_uri(path: str | Path) -> str:
    return Path(path).resolve().as_uri()


@lru_cache(maxsize=4096)
def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve()
    except OSError:
        return Path(path)


def same_file(a: str | Path, b: str | Path) -> bool:
    return _resolved(str(a)) == _resolved(str(b))


def model_root(path: Path) -> Path:
    """The model folder a module belongs to: the nearest folder above it with a main.sknd, found as `sknd
    check` finds it (skriptnd.check.paths.model_root), else its own folder."""
    return find_model_root(path.parent) or path.parent


@dataclass
class Document:
    uri: str
    path: Path
    text: str
    version: int | None = None


@dataclass(eq=False)
class Analysis:
    """One open document loaded as the entry of a program (see the module docstring).

    `program` and `module` are what `sknd check` sees: with syntax errors the module has no AST
    and its imports are not loaded. The features (hover, completion, ...) look at `view` and
    `view_module` instead: the same program, except that a document with syntax errors is
    loaded from the parser's recovered tree (the offending statements left out)."""

    document: Document
    program: Program
    module: LoadedModule | None
    view: Program
    view_module: LoadedModule | None
    diagnostics: list[Diagnostic] | None = None  # set by Workspace.check
    moved: dict[int, tuple[ast.Definition, int]] = field(default_factory=dict, repr=False)  # see IncrementalParser
    _scopes: dict[int, tuple[ast.Definition, Scope]] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        return self.document.text

    @property
    def tree(self) -> ast.Module | None:
        """The document's AST (the recovered one when it has syntax errors), or None."""
        return self.view_module.ast if self.view_module is not None else None

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def line(self, number: int) -> str:
        lines = self.lines
        return lines[number - 1] if 1 <= number <= len(lines) else ""

    @property
    def masked(self) -> str:
        """The text with strings and comments blanked out."""
        module = self.view_module
        index = module.text_index() if module is not None and module.source is not None else None
        if index is not None and len(index.masked) == len(self.text):
            return index.masked
        return mask(self.text)

    def lookup(self, name: str) -> ast.Definition | None:
        found = self.resolve(name)
        return found[1] if found is not None else None

    def resolve(self, name: str) -> tuple[LoadedModule, ast.Definition] | None:
        """The module and definition an operator name written in this document refers to."""
        if self.view_module is None:
            return None
        return self.view.resolve_operator(name, self.view_module)

    def scope(self, definition: ast.Definition) -> Scope:
        """The declaration table of a definition of this document (built once)."""
        cached = self._scopes.get(id(definition))
        if cached is not None and cached[0] is definition:
            return cached[1]
        name = self.view_module.name if self.view_module is not None else self.document.path.stem
        scope = build_scope(definition, self.lookup, name)
        self._scopes[id(definition)] = (definition, scope)
        return scope


@dataclass(eq=False)
class _Checked:
    """The DEFINITION_CHECKS diagnostics of one definition, and what they depended on."""

    definition: ast.Definition
    module_name: str
    imports: frozenset[str]
    resolved: dict[str, ast.Definition | None]
    diagnostics: list[Diagnostic]
    #: What composing it reports (checking.check_composition), when its other checks found no error
    composed: list[Diagnostic] = field(default_factory=list)
    #: Every operator lookup composing made, from any module: (module, name) -> definition found
    deep: dict[tuple[str, str], ast.Definition | None] = field(default_factory=dict)


class Workspace:
    """Open documents, with their analyses and checks kept up to date lazily."""

    def __init__(self) -> None:
        self.documents: dict[str, Document] = {}
        self.parser = IncrementalParser()
        self._analyses: dict[str, Analysis] = {}
        self._checked: dict[Path, dict[int, _Checked]] = {}
        self._loads: dict[str, set[Path]] = {}  # uri -> files its last analysis loaded
        self.definitions_checked = 0  # DEFINITION_CHECKS runs (for tests and benchmarks)

    # ------------------------------------------------------------ documents

    def open(self, uri: str, text: str, version: int | None = None) -> Document:
        doc = Document(uri, uri_to_path(uri), text, version)
        self.documents[uri] = doc
        self._analyses.clear()
        return doc

    def update(self, uri: str, text: str, version: int | None = None) -> Document:
        doc = self.documents.get(uri)
        if doc is None:
            return self.open(uri, text, version)
        if doc.text != text:
            doc.text = text
            self._analyses.clear()  # any analysis may have loaded this document
        doc.version = version
        return doc

    def close(self, uri: str) -> None:
        doc = self.documents.pop(uri, None)
        self._analyses.clear()
        self._loads.pop(uri, None)
        if doc is not None:
            self._checked.pop(_resolved(str(doc.path)), None)

    def invalidate(self) -> None:
        """Forget every analysis (files on disk changed); caches keyed by text stay valid."""
        self._analyses.clear()

    def document_at(self, path: str | Path) -> Document | None:
        """The open document of a file, if it is open."""
        target = _resolved(str(path))
        for doc in self.documents.values():
            if _resolved(str(doc.path)) == target:
                return doc
        return None

    def uri_of(self, path: str | Path) -> str:
        """The URI to report a file under: the client's own URI when the file is open."""
        doc = self.document_at(path)
        return doc.uri if doc is not None else path_to_uri(path)

    def sources(self) -> dict[Path, str]:
        return {doc.path: doc.text for doc in self.documents.values()}

    # ------------------------------------------------------------ analyses

    def analysis(self, uri: str) -> Analysis | None:
        """The analysis of an open document, for its current text."""
        cached = self._analyses.get(uri)
        if cached is not None:
            return cached
        doc = self.documents.get(uri)
        if doc is None:
            return None
        root = model_root(doc.path)
        sources = self.sources()
        program = load_program(doc.path, sources=sources, parse=self.parser, model_dir=root)
        moved = dict(self.parser.moved.get(str(doc.path), {}))
        view = program
        main = program.main
        if main is not None and main.ast is None and main.source is not None:
            target = doc.path

            def lenient(text: str, path: str) -> tuple[ast.Module | None, list[Diagnostic]]:
                if same_file(path, target):
                    return self.parser.recover(text, path), []
                return self.parser(text, path)

            view = load_program(doc.path, sources=sources, parse=lenient, model_dir=root)
        result = Analysis(doc, program, main, view, view.main, moved=moved)
        self._analyses[uri] = result
        self._loads[uri] = {_resolved(str(m.path)) for m in program.modules.values()}
        return result

    def dependents(self, uri: str) -> list[str]:
        """The other open documents whose programs load this document's module (as of their
        last analysis, so that a keystroke does not re-analyse every open document)."""
        doc = self.documents.get(uri)
        if doc is None:
            return []
        target = _resolved(str(doc.path))
        out = []
        for other in list(self.documents.values()):
            if other.uri == uri:
                continue
            if other.uri not in self._loads:
                self.analysis(other.uri)
            if target in self._loads.get(other.uri, set()):
                out.append(other.uri)
        return out

    # ------------------------------------------------------------ checks

    def check(self, uri: str) -> list[Diagnostic]:
        """What `sknd check` reports for one open document (its own diagnostics only)."""
        analysis = self.analysis(uri)
        if analysis is None:
            return []
        if analysis.diagnostics is not None:
            return analysis.diagnostics
        program, module = analysis.program, analysis.module
        diags = list(program.diagnostics)
        composed: list[Diagnostic] = []
        graphs: list[Diagnostic] = []
        if module is not None:
            diags.extend(check_modules(program, [module]))
            if module.ast is not None:
                key = _resolved(str(module.path))
                previous = self._checked.get(key, {})
                current: dict[int, _Checked] = {}
                moved = analysis.moved
                for definition in module.ast.definitions:
                    entry = previous.get(id(definition))
                    if entry is None and id(definition) in moved:
                        entry = self._moved(previous, moved[id(definition)], definition)
                    if entry is None or not self._still_valid(entry, program, module, definition, moved):
                        entry = self._check_definition(program, module, definition)
                    current[id(definition)] = entry
                    diags.extend(entry.diagnostics)
                    composed.extend(entry.composed) if definition.kind != "graph" else graphs.extend(entry.composed)
                self._checked[key] = current
            if not any(d.severity == "error" for d in diags):  # as check_program: only a clean program
                diags.extend(one_per_location([*composed, *graphs]))
        path = analysis.document.path
        mine = [d for d in _unique(diags) if same_file(d.span.file, path)]
        mine.sort(key=lambda d: (d.span.line, d.span.col, d.code))
        analysis.diagnostics = mine
        return mine

    def _check_definition(self, program: Program, module: LoadedModule, definition: ast.Definition) -> _Checked:
        resolved: dict[str, ast.Definition | None] = {}
        original: Callable = program.resolve_operator

        deep: dict[tuple[str, str], ast.Definition | None] = {}

        def recording(name: str, from_module: LoadedModule, span: object = None):  # type: ignore[no-untyped-def]
            found = original(name, from_module, span)
            if from_module is module:
                resolved[name] = found[1] if found is not None else None
            deep[from_module.name, name] = found[1] if found is not None else None
            return found

        program.resolve_operator = recording  # type: ignore[method-assign]
        diags: list[Diagnostic] = []
        composed: list[Diagnostic] = []
        try:
            for check in DEFINITION_CHECKS:
                diags.extend(check(program, module, definition))
            if not any(d.severity == "error" for d in diags):
                composed = check_composition(program, module, definition)
        finally:
            del program.resolve_operator
        self.definitions_checked += 1
        return _Checked(definition, module.name, frozenset(module.imported_names), resolved, diags, composed, deep)

    @staticmethod
    def _moved(previous: dict[int, _Checked], move: tuple[ast.Definition, int],
               definition: ast.Definition) -> _Checked | None:
        """The cached checks of a definition that only moved to other lines, moved with it.
        Messages that quote line numbers ("declared at line 12") are not reused."""
        old, delta = move
        entry = previous.get(id(old))
        if entry is None or entry.definition is not old:
            return None
        texts = [t for d in [*entry.diagnostics, *entry.composed]
                 for t in (d.message, d.hint or "", *(n.message for n in d.notes))]
        if any("line" in t for t in texts):
            return None
        diags = [shift_diagnostic(d, delta, old.span) for d in entry.diagnostics]
        composed = [shift_diagnostic(d, delta, old.span) for d in entry.composed]
        return _Checked(definition, entry.module_name, entry.imports, entry.resolved, diags, composed, entry.deep)

    @staticmethod
    def _still_valid(entry: _Checked, program: Program, module: LoadedModule, definition: ast.Definition,
                     moved: dict[int, tuple[ast.Definition, int]]) -> bool:
        """Whether the cached checks still hold: same definition, module and imports, and every
        operator name it looked up resolves to the same definition (or to a moved copy of it,
        when no diagnostic points outside the definition). Refreshes the recorded lookups."""
        if entry.definition is not definition or entry.module_name != module.name:
            return False
        if entry.imports != frozenset(module.imported_names):
            return False
        current: dict[str, ast.Definition | None] = {}
        for name, target in entry.resolved.items():
            found = program.resolve_operator(name, module)
            now = found[1] if found is not None else None
            if now is not target:
                if now is None or moved.get(id(now), (None, 0))[0] is not target or \
                        _points_outside(entry.diagnostics, definition):
                    return False
            current[name] = now
        deep: dict[tuple[str, str], ast.Definition | None] = {}
        for (module_name, name), target in entry.deep.items():  # lookups made while composing
            owner = program.modules.get(module_name)
            if owner is None:
                return False
            found = program.resolve_operator(name, owner)
            now = found[1] if found is not None else None
            if now is not target and (now is None or moved.get(id(now), (None, 0))[0] is not target
                                      or _points_outside(entry.composed, definition)):
                return False
            deep[module_name, name] = now
        entry.resolved = current
        entry.deep = deep
        return True


def _points_outside(diags: list[Diagnostic], definition: ast.Definition) -> bool:
    span = definition.span
    for d in diags:
        for s in (d.span, *(n.span for n in d.notes if n.span is not None)):
            if not same_file(s.file, span.file) or not span.line <= s.line <= span.end_line:
                return True
    return False


def _unique(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """As check_program: a problem found by two checks is reported once."""
    seen: set[tuple] = set()
    out = []
    for d in diags:
        key = (d.code, d.span.file, d.span.line, d.span.col, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
