"""Loading and resolving modules (spec §2.15): the `Program` of one entry and its imports.

A `Program` is the set of modules reached from one entry (a model folder's main.sknd, or a
single file) through `import` statements. `import x.y;` names the file `x/y.sknd`, searched
first in the model folder (the folder of the entry module), then in the standard library
folder; one module name means one module per program, so a model-folder module that has the
name of a standard module replaces it everywhere (with a warning). Import cycles are allowed:
an import only names a module.

Operator names resolve as §2.15 says: an unqualified name refers to the module it is written
in; `mod.op` (or `a.b.op` for the nested module `a.b`) requires `mod` to be imported by the
module it is written in, or to be that module itself.

The module-level checks of a loaded program (duplicate definitions, misplaced graphs,
invocations and @quantize entries that do not fit) live in semantics.module_checks.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skriptnd.diagnostics import Diagnostic, Note, Severity, register_codes
from skriptnd.fileio import read_source
from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.builtins import BUILTIN_FUNCTIONS
from skriptnd.source import SourceFile, Span
from skriptnd.syntax import ast, parse_module
from skriptnd.syntax.cache import cached_parse
from skriptnd.syntax.scan import mask
from skriptnd.untrusted import UnsafeFile, contained

__all__ = [
    "BUILTIN_FUNCTIONS",
    "LoadedModule",
    "ModuleParser",
    "Program",
    "load_program",
]

register_codes({"E0214": "module shadows a standard module"})

#: Parses one module's text: (text, path) -> (AST or None, diagnostics), like `parse_module`.
ModuleParser = Callable[[str, str], tuple[ast.Module | None, list[Diagnostic]]]

#: At the top of a @compose right-hand side, `abs(x)` is an invocation of an operator named
#: `abs`; `(abs(x))` calls the built-in function (§2.4).
_TENSOR_BLOCKS = ("input", "output", "variable", "constant")
_WALK_LIMIT = 5000  # files looked at when suggesting model-folder module names
_WALK_DEPTH = 4


# ---------------------------------------------------------------------------- data model


@dataclass(eq=False)
class LoadedModule:
    """One module of a program: its source, its AST (None when it has syntax errors or could
    not be read) and its definitions by name (the first one wins on duplicates)."""

    name: str
    path: Path
    source: SourceFile | None
    ast: ast.Module | None
    is_stdlib: bool
    definitions: dict[str, ast.Definition] = field(default_factory=dict)
    syntax_diagnostics: list[Diagnostic] = field(default_factory=list, repr=False)
    _index: TextIndex | None = field(default=None, repr=False)

    @property
    def imports(self) -> tuple[ast.Import, ...]:
        return self.ast.imports if self.ast is not None else ()

    @property
    def imported_names(self) -> set[str]:
        return {imp.module for imp in self.imports}

    @property
    def ok(self) -> bool:
        """Read and parsed without errors."""
        return self.ast is not None

    def text_index(self) -> TextIndex | None:
        if self._index is None and self.source is not None:
            self._index = TextIndex(self.source.text)
        return self._index


@dataclass
class Lookup:
    """The outcome of looking an operator name up, with the reason when it failed."""

    status: str  # "ok", "unknown_operator", "not_imported", "unknown_module", "broken_module"
    module: LoadedModule | None = None
    definition: ast.Definition | None = None
    module_name: str | None = None
    op_name: str = ""


class Program:
    """The modules loaded for one check or composition, reached from one entry."""

    def __init__(self, entry: Path, model_dir: Path, *, entry_is_folder: bool,
                 sources: Mapping[Path | str, str] | None = None, parse: ModuleParser | None = None) -> None:
        self.entry = entry
        self.model_dir = model_dir
        self.entry_is_folder = entry_is_folder
        self.main: LoadedModule | None = None
        self.modules: dict[str, LoadedModule] = {}
        self.diagnostics: list[Diagnostic] = []
        self._by_path: dict[Path, LoadedModule] = {}
        self._missing: set[str] = set()  # module names that were searched for and not found
        self._folder_names: list[str] | None = None
        # in-memory texts (e.g. unsaved editor buffers) that replace files, by resolved path
        self.sources: dict[Path, str] = {Path(p).resolve(): t for p, t in (sources or {}).items()}
        self.parse = parse

    # ------------------------------------------------------------ queries

    @property
    def main_must_have_graph(self) -> bool:
        """§2.15: the main module of a model folder (main.sknd) must define a graph."""
        return self.main is not None and (self.entry_is_folder or self.main.path.name == "main.sknd")

    def graphs(self) -> list[ast.Definition]:
        """The graph definitions of the main module, in source order (the first is the primary one)."""
        if self.main is None or self.main.ast is None:
            return []
        return [d for d in self.main.ast.definitions if d.kind == "graph"]

    def checked_modules(self) -> list[LoadedModule]:
        """The modules whose definitions a check of this program reports on: every module that is
        not part of the standard library, and the entry module itself when it is one."""
        return [m for m in self.modules.values() if not m.is_stdlib or m is self.main]

    def resolve_operator(self, name: str, from_module: LoadedModule,
                         span: Span | None = None) -> tuple[LoadedModule, ast.Definition] | None:
        """The module and definition `name` refers to when written in `from_module`, or None.

        `span` is where the name is written; it is not used for reporting (the caller reports,
        with the wording its context needs)."""
        found = self.lookup(name, from_module)
        if found.status != "ok":
            return None
        assert found.module is not None and found.definition is not None
        return found.module, found.definition

    def visible_operator_names(self, from_module: LoadedModule) -> list[str]:
        """Every operator (or graph) name that resolves in `from_module`, as it would be written:
        its own definitions unqualified, those of the modules it imports qualified."""
        names = list(from_module.definitions)
        for imported in sorted(from_module.imported_names):
            mod = self.modules.get(imported)
            if mod is None or mod is from_module:
                continue
            names.extend(f"{imported}.{op}" for op in mod.definitions)
        return names

    def lookup(self, name: str, from_module: LoadedModule) -> Lookup:
        if "." not in name:
            definition = from_module.definitions.get(name)
            if definition is None:
                return Lookup("unknown_operator", from_module, module_name=None, op_name=name)
            return Lookup("ok", from_module, definition, op_name=name)
        module_name, op_name = name.rsplit(".", 1)
        if module_name == from_module.name:
            target: LoadedModule | None = from_module
        elif module_name in from_module.imported_names:
            target = self.modules.get(module_name)
            if target is None:  # the import itself failed; reported there
                return Lookup("broken_module", module_name=module_name, op_name=op_name)
        elif self.module_exists(module_name):
            return Lookup("not_imported", module_name=module_name, op_name=op_name)
        else:
            return Lookup("unknown_module", module_name=module_name, op_name=op_name)
        if not target.ok:
            return Lookup("broken_module", target, module_name=module_name, op_name=op_name)
        definition = target.definitions.get(op_name)
        if definition is None:
            return Lookup("unknown_operator", target, module_name=module_name, op_name=op_name)
        return Lookup("ok", target, definition, module_name=module_name, op_name=op_name)

    def module_exists(self, name: str) -> bool:
        """Whether `import name;` would find a file (whether or not it is loaded yet)."""
        return name in self.modules or self.find_module(name) is not None

    # ------------------------------------------------------------ finding files

    def find_module(self, name: str) -> tuple[Path, bool] | None:
        """(file, is_stdlib) for `import name;`: the model folder first, then the stdlib."""
        parts = name.split(".")
        rel = Path(*parts[:-1], parts[-1] + ".sknd")
        local = self.model_dir / rel
        if _is_file(local) or self._overridden(local):
            return local, _is_stdlib_path(local)
        std = stdlib_dir() / rel
        if _is_file(std) or self._overridden(std):
            return std, True
        return None

    def _overridden(self, path: Path) -> bool:
        if not self.sources:
            return False
        try:
            return path.resolve() in self.sources
        except OSError:
            return False

    def folder_module_names(self) -> list[str]:
        """Dotted names of the .sknd files under the model folder (for did-you-mean only)."""
        if self._folder_names is None:
            names: list[str] = []
            seen = 0
            root = self.model_dir
            for dirpath, dirnames, filenames in os.walk(root):
                rel = Path(dirpath).relative_to(root)
                depth = len(rel.parts)
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < _WALK_DEPTH else []
                for f in sorted(filenames):
                    seen += 1
                    if f.endswith(".sknd"):
                        names.append(".".join((*rel.parts, f[: -len(".sknd")])))
                if seen > _WALK_LIMIT:
                    break
            self._folder_names = names
        return self._folder_names

    # ------------------------------------------------------------ loading

    def _load(self, name: str, path: Path, is_stdlib: bool) -> LoadedModule:
        key = path.resolve()
        existing = self._by_path.get(key)
        if existing is not None:
            self.modules.setdefault(name, existing)
            return existing
        text = self.sources.get(key)
        if text is not None:
            source, tree, diags = _parse_text(SourceFile(str(path), text.replace("\r\n", "\n")),
                                              self.parse or parse_module)
        else:
            source, tree, diags = _parse_file(path, is_stdlib, self.parse)
        module = LoadedModule(name=name, path=path, source=source, ast=tree, is_stdlib=is_stdlib,
                              syntax_diagnostics=list(diags))
        if tree is not None:
            for d in tree.definitions:
                module.definitions.setdefault(d.name, d)
        self.modules[name] = module
        self._by_path[key] = module
        self.diagnostics.extend(diags)
        return module

    def _load_imports(self, first: LoadedModule) -> None:
        todo = [first]
        shadow_sites: dict[str, list[tuple[LoadedModule, ast.Import]]] = {}
        while todo:
            module = todo.pop(0)
            for imp in module.imports:
                name = imp.module
                if name in self.modules:
                    if name in shadow_sites:
                        shadow_sites[name].append((module, imp))
                    continue
                if name in self._missing:
                    self.diagnostics.append(self._unknown_module(imp))
                    continue
                found = self.find_module(name)
                if found is None:
                    self._missing.add(name)
                    self.diagnostics.append(self._unknown_module(imp))
                    continue
                path, is_std = found
                escape = None if is_std else self._escapes(path)
                if escape is not None:
                    self._missing.add(name)
                    self.diagnostics.append(Diagnostic(
                        "E0203", f"module '{name}' is {path}, which {escape}", imp.span,
                        hint="a model folder's modules must be files inside it; copy the module there"))
                    continue
                if not is_std and name in STDLIB_MODULES:
                    shadow_sites[name] = [(module, imp)]
                loaded = self._load(name, path, is_std)
                todo.append(loaded)
        for name, sites in shadow_sites.items():
            user_sites = [s for s in sites if not s[0].is_stdlib]
            for _, imp in user_sites or sites[:1]:
                where = self.modules[name].path
                self.diagnostics.append(Diagnostic(
                    "E0214", f"module '{name}' of the model folder shadows the standard module '{name}'",
                    imp.span, Severity.WARNING,
                    notes=(Note(f"'{name}' is loaded from {where}, for every module that imports it"),),
                    hint=f"rename it, or move it into a subfolder (e.g. ops/{name}.sknd, imported as "
                    f"'import ops.{name};')"))

    def _escapes(self, path: Path) -> str | None:
        """Why the module file `path` of the model folder may not be read (it, or a folder on its way, is a
        link leading outside the model folder), or None. Editor buffers never escape."""
        if self._overridden(path):
            return None
        try:
            contained(self.model_dir, os.path.relpath(path, self.model_dir))
        except UnsafeFile as err:
            return err.reason
        except ValueError:  # another drive (Windows)
            return "is outside the model folder"
        return None

    def _unknown_module(self, imp: ast.Import) -> Diagnostic:
        # only names an import can reach: dotted identifiers, not keywords, not the entry module
        folder = {n for n in self.folder_module_names() if _importable(n) and n != "main"}
        candidates = sorted(set(STDLIB_MODULES) | folder)
        if any(len(part) + len(".sknd") > _NAME_MAX for part in imp.module.split(".")):
            return Diagnostic("E0203", f"unknown module '{_shorten(imp.module)}': its name is longer than a file "
                              f"name can be ({_NAME_MAX} bytes)", imp.span, hint="import a module by its file name")
        return Diagnostic("E0203", f"unknown module '{imp.module}'", imp.span,
                          hint=did_you_mean_hint(imp.module, candidates)
                          or f"no {imp.module.replace('.', '/')}.sknd in the model folder or the standard library")


# ---------------------------------------------------------------------------- loading


_STDLIB_CACHE: dict[tuple[str, int, int], tuple[SourceFile | None, ast.Module | None, tuple[Diagnostic, ...]]] = {}


#: The longest file name most file systems allow (bytes); longer module names cannot be files.
_NAME_MAX = 255
_RESERVED_WORDS = frozenset("if then elif else with for while do unroll yield optional graph operator public "
                            "version extension import true false inf pi is in".split())


def _is_file(path: Path) -> bool:
    """Path.is_file, False for a path the OS refuses (a name too long, ...) instead of OSError."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _importable(name: str) -> bool:
    """Whether `import name;` can be written: dotted identifiers that are not keywords."""
    return all(part.isidentifier() and part not in _RESERVED_WORDS for part in name.split("."))


def _shorten(name: str, keep: int = 40) -> str:
    return name if len(name) <= keep else name[:keep] + "..."


def _is_stdlib_path(path: Path) -> bool:
    try:
        return path.resolve().parent == stdlib_dir().resolve()
    except OSError:
        return False


def _parse_text(source: SourceFile,
                parse: ModuleParser) -> tuple[SourceFile, ast.Module | None, tuple[Diagnostic, ...]]:
    if parse is parse_module:  # the standard parser: its trees are cached on disk (syntax.cache)
        tree, syntax = cached_parse(source.text, source.path, parse)
    else:
        tree, syntax = parse(source.text, source.path)
    errors = any(d.severity == Severity.ERROR for d in syntax)
    return source, None if errors else tree, tuple(syntax)


def _parse_file(path: Path, is_stdlib: bool,
                parse: ModuleParser | None = None) -> tuple[SourceFile | None, ast.Module | None, tuple[Diagnostic, ...]]:
    """Read and parse one module; stdlib modules are parsed once per process (per file version).
    `parse` replaces `parse_module` for the other modules (e.g. an editor's incremental parser)."""
    key = None
    if is_stdlib:
        try:
            st = path.stat()
            key = (str(path), st.st_mtime_ns, st.st_size)  # as written: spans name the file so
        except OSError:
            key = None
        if key is not None and key in _STDLIB_CACHE:
            return _STDLIB_CACHE[key]
    source, read_diags = read_source(path)
    if source is None:
        result: tuple[SourceFile | None, ast.Module | None, tuple[Diagnostic, ...]] = (None, None, tuple(read_diags))
    else:
        result = _parse_text(source, parse_module if is_stdlib or parse is None else parse)
    if key is not None:
        _STDLIB_CACHE[key] = result
    return result


def stdlib_module(name: str) -> ast.Module | None:
    """A standard module's AST: parsed once per process (shared with load_program) and read from
    the on-disk parse cache when possible."""
    return _parse_file(stdlib_dir() / f"{name}.sknd", True)[1]


def load_program(entry: Path | str, *, sources: Mapping[Path | str, str] | None = None,
                 parse: ModuleParser | None = None, model_dir: Path | str | None = None) -> Program:
    """Load the module at `entry` and, transitively, everything it imports.

    `entry` is a model folder (its main.sknd is the main module, named `main`) or a single
    .sknd file (the main module, named after its file stem; its folder is the model folder).
    Problems (unreadable files, syntax errors, unknown modules) end up in `program.diagnostics`.

    `sources` maps file paths to texts that replace (or stand in for missing) files, such as
    an editor's unsaved buffers; `parse` replaces `parse_module` for every module that is not
    a standard module read from disk (which stay cached per process). `model_dir` sets the
    model folder of a single-file entry (default: its folder); an entry in a subfolder of it is
    named by its dotted path (ops/pool.sknd is `ops.pool`), as an import of it would name it.
    """
    entry = Path(entry)
    if entry.is_dir():
        program = Program(entry, entry, entry_is_folder=True, sources=sources, parse=parse)
        main_path = entry / "main.sknd"
        if not main_path.is_file() and not program._overridden(main_path):
            raw = str(entry)
            program.diagnostics.append(Diagnostic(
                "E0003", f"'{raw}' is not a model folder: it has no main.sknd", Span(raw, 1, 1, 1, 2),
                hint="a model folder holds its main module in main.sknd"))
            return program
        name = "main"
    else:
        folder = Path(model_dir) if model_dir is not None else entry.parent
        program = Program(entry, folder, entry_is_folder=False, sources=sources, parse=parse)
        main_path = entry
        name = entry.stem if entry.suffix == ".sknd" else entry.name
        if model_dir is not None and entry.parent != folder and entry.is_relative_to(folder):
            name = ".".join(entry.relative_to(folder).with_suffix("").parts)
    program.main = program._load(name, main_path, _is_stdlib_path(main_path))
    program._load_imports(program.main)
    return program


# ---------------------------------------------------------------------------- source positions


class TextIndex:
    """Offsets of lines in a module's text, and the text with strings and comments masked."""

    def __init__(self, text: str) -> None:
        self.masked = mask(text)
        self.starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        if not 1 <= line <= len(self.starts):
            return -1
        return self.starts[line - 1] + col - 1

    def position(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo] + 1

    def char_before(self, span: Span) -> str:
        """The first character before span that is not blank (strings and comments are blank)."""
        i = self.offset(span.line, span.col) - 1
        while i >= 0 and self.masked[i].isspace():
            i -= 1
        return self.masked[i] if i >= 0 else ""

    def find_name(self, name: str, within: Span, skip: int = 0) -> Span | None:
        """The span of the first token `name` inside `within`, after `skip` characters."""
        start = self.offset(within.line, within.col)
        end = self.offset(within.end_line, within.end_col)
        if start < 0 or end < start:
            return None
        pattern = re.compile(r"(?<![\w.])" + r"\s*\.\s*".join(map(re.escape, name.split("."))) + r"(?![\w])")
        m = pattern.search(self.masked, start + skip, end)
        if m is None:
            return None
        line, col = self.position(m.start())
        end_line, end_col = self.position(m.end())
        return Span(within.file, line, col, end_line, end_col)


def did_you_mean_hint(name: str, candidates: list[str] | set[str]) -> str | None:
    """"did you mean 'x'?" for the closest candidate, as module and operator hints say it."""
    matches = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None
