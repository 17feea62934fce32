"""Which `.sknd` files `sknd check` and `sknd fmt` take from their command line, and as part of which model.

Paths are taken as ruff and black take them. A file named on the command line is always taken. A folder
is walked recursively for `.sknd` files, leaving out what an exclude pattern matches (hidden entries,
`.venv`, `__pycache__`, `build`, `dist`, `node_modules`, and the project's own list: skriptnd.check.settings);
a path named on the command line is never excluded.

A folder holding a `main.sknd` is a *model root*: its modules are checked as one program whose imports
resolve from the root (`models/resnet18/main.sknd`'s `import ops.blocks` is `models/resnet18/ops/blocks.sknd`,
whatever folder was named). A file below a model root is a module of the nearest one (found in the walk, or
above a named path as the language server finds it: the file's folder and up to three above it); any
other file is a module on its own, named after its file, its imports resolved from its own folder.

A walk never leaves the folder it was asked to walk: a symbolic link leading outside it is not followed
(a warning says so), a link back into it is walked once, and the walk stops with an error after
`MAX_ENTRIES` entries, so a folder named by mistake (a home folder, a mount of millions of files) costs
a bounded time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from skriptnd.diagnostics import Diagnostic, Severity, register_codes
from skriptnd.source import Span

register_codes({
    "E0005": "link leading outside the folder walked (not followed)",
    "E0006": "too many entries under the folders named",
})

#: Left out of every walk: hidden files and folders, virtual environments, caches and build outputs.
DEFAULT_EXCLUDE: tuple[str, ...] = (".*", ".venv", "__pycache__", "build", "dist", "node_modules")
#: The most folder entries one command looks at, all walks together.
MAX_ENTRIES = 100_000
#: Folders searched for the main.sknd of a model root: a file's own and up to three above (as `sknd lsp`).
ROOT_SEARCH_DEPTH = 4


@dataclass(frozen=True)
class Pattern:
    """An exclude pattern (fnmatch syntax). One without `/` matches any file or folder name; one with `/`
    matches a path relative to `base` (the folder of the pyproject.toml that lists it, or the current
    folder for `--exclude`), and so everything below it."""

    text: str
    base: Path

    def matches(self, path: Path) -> bool:
        glob = self.text.removeprefix("./").strip("/")
        if not glob:
            return False
        if "/" not in glob:
            return fnmatchcase(path.name, glob)
        try:
            rel = Path(os.path.abspath(path)).relative_to(self.base)  # `..` folded: `sknd check ..` from below
        except ValueError:
            return False
        return fnmatchcase(rel.as_posix(), glob)


@dataclass(frozen=True)
class Excludes:
    """The patterns a walk leaves out (DEFAULT_EXCLUDE first)."""

    patterns: tuple[Pattern, ...] = tuple(Pattern(p, Path("/")) for p in DEFAULT_EXCLUDE)

    def extended(self, texts: list[str] | tuple[str, ...], base: Path) -> Excludes:
        return Excludes(self.patterns + tuple(Pattern(t, Path(os.path.abspath(base))) for t in texts))

    def matches(self, path: Path) -> bool:
        return any(p.matches(path) for p in self.patterns)


@dataclass
class Found:
    """The `.sknd` files a command line names, each once, grouped by how they are checked."""

    #: model roots found by a walk -> their files (main.sknd first): checked as one program, then each file
    #: the program did not load as a module of the root
    models: dict[Path, list[Path]] = field(default_factory=dict)
    #: (file, model folder): a module checked with imports resolved from that folder
    modules: list[tuple[Path, Path]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def files(self) -> list[Path]:
        """Every file found (what `sknd fmt` formats): the model roots' files, then the other modules."""
        return [f for files in self.models.values() for f in files] + [f for f, _ in self.modules]


def _inside(real: str, base: str) -> bool:
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _main_inside(folder: Path, base: str | None) -> bool:
    """`folder` holds a main.sknd that is a file (or a link to one) staying inside `base` (when given)."""
    main = folder / "main.sknd"
    if not main.is_file():
        return False
    return base is None or _inside(os.path.realpath(main), base)


def model_root(folder: Path) -> Path | None:
    """The model root a file in `folder` belongs to: the nearest of `folder` and the folders above it
    (ROOT_SEARCH_DEPTH in all) holding a main.sknd; None when there is none."""
    folder = folder.absolute()
    for candidate in [folder, *list(folder.parents)[: ROOT_SEARCH_DEPTH - 1]]:
        if _main_inside(candidate, None):
            return candidate
    return None


def _as_named(root: Path, named: Path) -> Path:
    """`root` (absolute) written the way the user wrote `named` (relative stays relative), for messages."""
    if named.is_absolute():
        return root
    try:
        return Path(os.path.relpath(root))
    except ValueError:  # another drive (Windows)
        return root


class _Collector:
    def __init__(self, excludes: Excludes) -> None:
        self.excludes = excludes
        self.found = Found()
        self.claimed: set[str] = set()  # real paths of the files taken
        self.entries = 0
        self.stopped = False

    def claim(self, path: Path) -> bool:
        real = os.path.realpath(path)
        if real in self.claimed:
            return False
        self.claimed.add(real)
        return True

    def file(self, path: Path) -> None:
        """A file named on the command line: taken whatever its name, a module of the model root above it."""
        if not self.claim(path):
            return
        root = model_root(path.parent)
        self.found.modules.append((path, path.parent if root is None else _as_named(root, path)))

    def entries_of(self, folder: Path, raw: str) -> list[os.DirEntry[str]] | None:
        """The entries of `folder` by name, counted against MAX_ENTRIES as they are read (a folder of millions
        is not listed whole); None when it cannot be read or the count is spent (a diagnostic says which)."""
        entries: list[os.DirEntry[str]] = []
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    self.entries += 1
                    if self.entries > MAX_ENTRIES:
                        self.stopped = True
                        self.found.diagnostics.append(Diagnostic(
                            "E0006", f"stopped looking for .sknd files after {MAX_ENTRIES:,} folder entries under "
                            f"'{raw}'", Span(raw, 1, 1, 1, 2), hint="name the folders to check, or leave some out "
                            "(--exclude PATTERN, or `exclude` under [tool.skriptnd] in pyproject.toml)"))
                        return None
                    entries.append(entry)
        except OSError as err:
            self.found.diagnostics.append(Diagnostic(
                "E0002", f"cannot read the folder {folder}: {err.strerror or err}", Span(str(folder), 1, 1, 1, 2)))
            return None
        return sorted(entries, key=lambda e: e.name)

    def folder(self, raw: str) -> None:
        named = Path(raw)
        base = os.path.realpath(named)
        sknd = excluded = 0
        above = None if _main_inside(named, base) else model_root(named.parent)
        owner = _as_named(above, named) if above is not None else None  # a model root above the named folder
        stack: list[tuple[Path, Path | None]] = [(named, owner)]
        visited = {base}
        while stack and not self.stopped:
            current, owner = stack.pop()
            if _main_inside(current, base):
                owner = current
                self.found.models.setdefault(current, [])
            entries = self.entries_of(current, raw)
            if entries is None:
                continue
            folders: list[Path] = []
            for entry in entries:
                path = current / entry.name
                if self.excludes.matches(path):
                    excluded += 1
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if entry.is_symlink():
                    real = os.path.realpath(path)
                    if not _inside(real, base):
                        self.found.diagnostics.append(Diagnostic(
                            "E0005", f"'{path}' is a link leading outside '{raw}' (to {real}): not followed",
                            Span(str(path), 1, 1, 1, 2), Severity.WARNING,
                            hint=f"name {real} on the command line to check it"))
                        continue
                    is_dir = os.path.isdir(real)
                if is_dir:
                    real = os.path.realpath(path)
                    if real not in visited:  # a link back into the folder is walked once
                        visited.add(real)
                        folders.append(path)
                elif entry.name.endswith(".sknd"):
                    sknd += 1
                    if not self.claim(path):
                        continue
                    if owner is not None and owner in self.found.models:
                        self.found.models[owner].append(path)
                    else:
                        self.found.modules.append((path, owner if owner is not None else current))
            stack.extend((f, owner) for f in reversed(folders))
        for root, files in self.found.models.items():  # main.sknd first, then the rest as found
            files.sort(key=lambda f: f != root / "main.sknd")
        if not sknd and not self.stopped:  # an error, unless what is there was left out on purpose (as ruff)
            left = f" ({excluded} left out by exclude patterns)" if excluded else ""
            self.found.diagnostics.append(Diagnostic(
                "E0003", f"'{raw}' holds no .sknd file to check{left}", Span(raw, 1, 1, 1, 2),
                Severity.WARNING if excluded else Severity.ERROR, hint="name .sknd files, or a folder that holds some"))


def collect(paths: list[str], excludes: Excludes | None = None) -> Found:
    """The `.sknd` files `paths` name (default: the current folder), each once: see the module's docstring."""
    collector = _Collector(excludes if excludes is not None else Excludes())
    for raw in dict.fromkeys(paths or ["."]):
        if Path(raw).is_dir():  # a named link to a folder is followed: the user named it
            collector.folder(raw)
        else:  # a missing or unreadable file is reported when it is read
            collector.file(Path(raw))
    return collector.found
