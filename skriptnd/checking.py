"""`sknd check`: find every module named on the command line and report its diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic
from .fileio import module_files, read_source
from .source import SourceFile, Span
from .syntax import parse_module


@dataclass
class CheckResult:
    sources: dict[str, SourceFile] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0


def expand_paths(paths: list[str]) -> tuple[list[Path], list[Diagnostic]]:
    """Files stay files; a model folder contributes all its modules; anything else is an error."""
    files: list[Path] = []
    diags: list[Diagnostic] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            if (p / "main.sknd").is_file():
                files.extend(module_files(p))
            else:
                diags.append(Diagnostic(code="E0003", message=f"'{raw}' is not a model folder: it has no main.sknd",
                                        span=Span(raw, 1, 1, 1, 2),
                                        hint="a model folder holds its main module in main.sknd"))
        else:
            files.append(p)
    return files, diags


def check_paths(paths: list[str]) -> CheckResult:
    result = CheckResult()
    files, diags = expand_paths(paths)
    result.diagnostics.extend(diags)
    for path in dict.fromkeys(files):
        source, read_diags = read_source(path)
        result.diagnostics.extend(read_diags)
        if source is None:
            continue
        result.files += 1
        result.sources[source.path] = source
        _, syntax = parse_module(source.text, source.path)
        result.diagnostics.extend(syntax)
    return result
