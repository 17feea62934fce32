"""A project's own settings for `sknd check` and `sknd fmt`: `[tool.skriptnd]` in its pyproject.toml.

Found as ruff finds its own: the nearest pyproject.toml with a `[tool.skriptnd]` table, looking in the
current folder and then in each folder above it. One setting today:

    [tool.skriptnd]
    exclude = ["tests/data"]   # fnmatch patterns (skriptnd.check.paths.Pattern), added to DEFAULT_EXCLUDE

A pattern with `/` is relative to the pyproject.toml's folder. A file that cannot be read as TOML, an
`exclude` that is not a list of strings (errors) and an unknown key (a warning: a typo must not pass
unseen) are reported in the file, at their line.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from skriptnd.check.paths import Excludes
from skriptnd.diagnostics import Diagnostic, Severity, register_codes
from skriptnd.semantics.modules import did_you_mean_hint
from skriptnd.source import SourceFile, Span
from skriptnd.untrusted import UnsafeFile, read_regular

register_codes({"E0007": "invalid [tool.skriptnd] settings in pyproject.toml"})

#: The keys `[tool.skriptnd]` may hold.
KNOWN_KEYS = ("exclude",)
#: The largest pyproject.toml read.
MAX_PYPROJECT_BYTES = 1 << 20

_TABLE = re.compile(r"^\s*\[\s*tool\s*\.\s*skriptnd\s*\]", re.M)
_DECODE_PLACE = re.compile(r"\(at line (\d+), column (\d+)\)")
_DECODE_END = re.compile(r"\((?:at line \d+, column \d+|at end of document)\)")


@dataclass
class Settings:
    """What `[tool.skriptnd]` says; `source` is the pyproject.toml read (None: none has the table)."""

    source: SourceFile | None = None
    exclude: tuple[str, ...] = ()
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        """The folder patterns with `/` are relative to: the pyproject.toml's."""
        return Path(self.source.path).absolute().parent if self.source is not None else Path.cwd()


def _key_span(source: SourceFile, key: str) -> Span:
    """Where `key` is written under [tool.skriptnd] (the table's header when it cannot be found)."""
    header = _TABLE.search(source.text)
    start = header.start() if header else 0
    found = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=", re.M).search(source.text, start)
    at = found if found is not None else header
    if at is None:
        return Span(source.path, 1, 1, 1, 2)
    offset = at.start() + len(at.group(0)) - len(at.group(0).lstrip())
    line = source.text.count("\n", 0, offset) + 1
    col = offset - (source.text.rfind("\n", 0, offset) + 1) + 1
    return Span(source.path, line, col, line, col + len(key))


def _read(path: Path) -> Settings | None:
    """The settings of one pyproject.toml, or None when it has no [tool.skriptnd] table."""
    name = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    try:
        text = read_regular(path, MAX_PYPROJECT_BYTES).decode("utf-8", "replace")
    except (OSError, UnsafeFile):
        return None  # not ours to judge: a pyproject.toml we cannot read says nothing about skriptnd
    source = SourceFile(name, text.replace("\r\n", "\n"))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        if not _TABLE.search(text):
            return None  # someone else's broken file
        place = _DECODE_PLACE.search(str(err))
        if place is not None:
            line, col = int(place.group(1)), int(place.group(2))
        else:  # "(at end of document)"
            line, col = source.text.count("\n") + 1, len(source.text.rpartition("\n")[2]) + 1
        return Settings(source, diagnostics=[Diagnostic(
            "E0007", f"{name} is not valid TOML: {_DECODE_END.sub('', str(err)).strip()}",
            Span(name, line, col, line, col + 1), hint="its [tool.skriptnd] settings are ignored until it is fixed")])
    table = data.get("tool", {}).get("skriptnd") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return None
    settings = Settings(source)
    if not isinstance(table, dict):
        settings.diagnostics.append(Diagnostic("E0007", "tool.skriptnd must be a table", _key_span(source, "skriptnd"),
                                               hint="write [tool.skriptnd] and its keys below it"))
        return settings
    for key in table:
        if key not in KNOWN_KEYS:
            settings.diagnostics.append(Diagnostic(
                "E0007", f"unknown setting '{key}' in [tool.skriptnd]", _key_span(source, key), Severity.WARNING,
                hint=did_you_mean_hint(key, list(KNOWN_KEYS)) or f"the settings are: {', '.join(KNOWN_KEYS)}"))
    exclude = table.get("exclude", [])
    if isinstance(exclude, list) and all(isinstance(p, str) for p in exclude):
        settings.exclude = tuple(exclude)
    else:
        settings.diagnostics.append(Diagnostic(
            "E0007", "'exclude' must be a list of strings (glob patterns)", _key_span(source, "exclude"),
            hint='for example: exclude = ["tests/data", "*.generated.sknd"]'))
    return settings


def find_settings(start: Path | None = None) -> Settings:
    """The settings of the nearest pyproject.toml with a [tool.skriptnd] table, in `start` (default: the
    current folder) or above it; empty settings when there is none."""
    folder = (start or Path.cwd()).absolute()
    for candidate in [folder, *folder.parents]:
        path = candidate / "pyproject.toml"
        if path.is_file():
            found = _read(path)
            if found is not None:
                return found
    return Settings()


def project_excludes(patterns: list[str] | None, start: Path | None = None) -> tuple[Excludes, Settings]:
    """The exclude patterns of a `sknd check` or `sknd fmt` run: the defaults, the project's (find_settings)
    and the command line's `--exclude` (relative to the current folder), with the settings read."""
    settings = find_settings(start)
    excludes = Excludes().extended(settings.exclude, settings.folder).extended(tuple(patterns or ()), Path.cwd())
    return excludes, settings
