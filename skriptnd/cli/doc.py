"""`sknd doc`: the standard library's operator reference (skriptnd.semantics.docgen renders it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown

from skriptnd.cli.io import check_output_file, write_output
from skriptnd.semantics.docgen import render_target


def command(
    target: Annotated[str | None, typer.Argument(help="A standard module (nn) or operator (nn.conv); all if omitted.")]
    = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the Markdown to this file.")] = None,
    raw: Annotated[bool, typer.Option("--markdown", help="Print Markdown source even on a terminal.")] = False,
) -> None:
    """Print the operator reference of the standard library (as in docs/stdlib.md).

    Each operator's signature, attributes and their meaning, formula, checks, and notes for
    PyTorch / ONNX users.

    Example: sknd doc nn.conv   (or: sknd doc -o stdlib.md)"""
    check_output_file(output, "--output")
    try:
        text = render_target(target)
    except LookupError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if output is not None:
        write_output(output, text, "--output")
        typer.echo(f"wrote {output}", err=True)
        return
    if raw or not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    Console().print(Markdown(text))
