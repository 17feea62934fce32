"""How the commands show diagnostics and end: one place decides the order, the colour and the exit code.

`report` is `sknd check`'s and `sknd fmt`'s way (every problem found, then a summary line); `fail` is the
model commands' way (the diagnostics that stop them, then exit 1, or 2 for a usage problem found late).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer

from skriptnd.diagnostics import Diagnostic, print_diagnostics, render_json, render_summary
from skriptnd.model import Model
from skriptnd.source import SourceFile


def report(diags: list[Diagnostic], sources: dict[str, SourceFile], as_json: bool, color: bool | None,
           files: int) -> None:
    """Every diagnostic, ordered by place, as text with a summary on stderr or as JSON on stdout."""
    ordered = sorted(diags, key=lambda d: (d.span.file, d.span.line, d.span.col))
    if as_json:
        sys.stdout.write(render_json(ordered) + "\n")
        return
    if ordered:
        print_diagnostics(ordered, sources, color=color)
    noun = "file" if files == 1 else "files"
    typer.echo(render_summary(ordered) + (f" in {files} {noun}" if files else ""), err=True)


def sources_of(model: Model | None) -> dict[str, SourceFile]:
    """The model's source files by path, to quote the lines its diagnostics point at."""
    if model is None:
        return {}
    return {str(m.source.path): m.source for m in model.program.modules.values() if m.source is not None}


def fail(diags: list[Diagnostic], model: Model | None, color: bool | None, exit_code: int = 1) -> NoReturn:
    """Print the diagnostics that stop a command (quoting the model's sources, or the files they name) and exit."""
    known = sources_of(model)

    def lookup(path: str) -> SourceFile | None:
        found = known.get(path)
        if found is None and Path(path).is_file():
            found = SourceFile(path, Path(path).read_text(encoding="utf-8", errors="replace"))
        return found

    print_diagnostics(diags, lookup, color=color)
    raise typer.Exit(exit_code)
