"""`sknd fmt`: SkriptND modules rewritten in the canonical layout (skriptnd.syntax.printer), comments kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from skriptnd.check.program import expand_paths
from skriptnd.cli.io import write_output
from skriptnd.cli.options import Color, ColorOpt, PathsArg, colour
from skriptnd.diagnostics import print_diagnostics
from skriptnd.fileio import read_source
from skriptnd.source import SourceFile
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module


def command(
    paths: PathsArg,
    check_only: Annotated[bool, typer.Option("--check", help="Only report files that would change.")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the formatted text instead of rewriting.")] = False,
    color: ColorOpt = Color.auto,
) -> None:
    """Format SkriptND modules in place (comments are kept).

    Example: sknd fmt --check models/digits/main.sknd"""
    files, diags = expand_paths(paths)
    sources: dict[str, SourceFile] = {}
    changed: list[str] = []
    for path in dict.fromkeys(files):
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
    failed = bool(diags) or (check_only and bool(changed))
    raise typer.Exit(1 if failed else 0)
