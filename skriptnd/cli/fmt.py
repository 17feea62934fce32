"""`sknd fmt`: SkriptND modules rewritten in the canonical layout (skriptnd.syntax.printer), comments kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from skriptnd.check.paths import collect
from skriptnd.check.settings import project_excludes
from skriptnd.cli.io import write_output
from skriptnd.cli.options import Color, ColorOpt, ExcludeOpt, PathsArg, colour
from skriptnd.diagnostics import Severity, print_diagnostics
from skriptnd.fileio import read_source
from skriptnd.source import SourceFile
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module


def command(
    paths: PathsArg = None,
    exclude: ExcludeOpt = None,
    check_only: Annotated[bool, typer.Option("--check", help="Only report files that would change.")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the formatted text instead of rewriting.")] = False,
    color: ColorOpt = Color.auto,
) -> None:
    """Format SkriptND modules in place (comments are kept).

    Folders are walked for .sknd files as by sknd check, with the same exclude patterns.

    Example: sknd fmt --check stdlib models"""
    excludes, settings = project_excludes(exclude)
    found = collect(paths or [], excludes)
    diags = [*settings.diagnostics, *found.diagnostics]
    sources: dict[str, SourceFile] = {} if settings.source is None else {settings.source.path: settings.source}
    changed: list[str] = []
    for path in found.files():
        source, read_diags = read_source(path)
        diags.extend(read_diags)
        if source is None:
            continue
        sources[source.path] = source
        module, syntax = parse_module(source.text, source.path)
        if syntax or module is None:
            diags.extend(syntax)
            continue
        formatted = format_module(module)
        if stdout:
            sys.stdout.write(formatted)
        elif formatted != source.text:
            changed.append(source.path)
            if not check_only:
                write_output(Path(source.path), formatted, "PATHS")
    if diags:
        print_diagnostics(diags, sources, color=colour(color))
    for name in changed:
        typer.echo(f"{'would reformat' if check_only else 'reformatted'} {name}", err=True)
    failed = any(d.severity is Severity.ERROR for d in diags) or (check_only and bool(changed))
    raise typer.Exit(1 if failed else 0)
