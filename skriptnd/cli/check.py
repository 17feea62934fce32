"""`sknd check`: every problem of some SkriptND modules, reported at once (skriptnd.check.program finds them)."""

from __future__ import annotations

from typing import Annotated

import typer

from skriptnd.check.program import check_paths, shown
from skriptnd.check.settings import project_excludes
from skriptnd.cli.options import (
    Color,
    ColorOpt,
    DiagnosticFormat,
    DiagnosticFormatOpt,
    ExcludeOpt,
    PathsArg,
    colour,
)
from skriptnd.cli.report import report


def command(paths: PathsArg = None, exclude: ExcludeOpt = None,
            format: DiagnosticFormatOpt = DiagnosticFormat.text, color: ColorOpt = Color.auto,
            strict: Annotated[bool, typer.Option("--strict", help="Also warn about assertions that hold only "
                                                 "under a condition on graph attributes; warnings fail the "
                                                 "check.")] = False,
            verbose: Annotated[bool, typer.Option("--verbose", help="Also note assertions that depend on dynamic "
                                                  "extents.")] = False) -> None:
    """Check SkriptND modules and report every problem found (graphs are composed for their defaults).

    Folders are walked for .sknd files; each folder with a main.sknd is checked as one model.
    Walks leave out what --exclude or `exclude` in pyproject.toml's tool.skriptnd table matches.

    Example: sknd check models/digits   (or: sknd check --format json models/digits/main.sknd)"""
    excludes, settings = project_excludes(exclude)
    result = check_paths(paths or [], excludes)
    if settings.source is not None:
        result.sources.setdefault(settings.source.path, settings.source)
    diags = shown([*settings.diagnostics, *result.diagnostics], strict=strict, verbose=verbose)
    report(diags, result.sources, format is DiagnosticFormat.json, colour(color), result.files)
    failing = ("error", "warning") if strict else ("error",)
    raise typer.Exit(1 if any(d.severity in failing for d in diags) else 0)
