"""`sknd compose MODEL --target NAME`: the CLI side of the target mappings (skriptnd.targets.table renders)."""

from __future__ import annotations

import sys
from typing import Any

import typer

from skriptnd.cli.io import write_output


def known_target(name: str) -> None:
    """A usage error (exit 2) for an unknown target name, before anything is composed."""
    from skriptnd.targets import targets

    if name not in targets():
        raise typer.BadParameter(f"choose one of {', '.join(sorted(targets()))}", param_hint="--target")


def render_command(graph: Any, target: str, fmt: str, output: Any = None) -> None:
    """The mapping table on stdout, or JSON (``--format json``, or to ``output``, written atomically)."""
    from skriptnd.targets.table import print_table, to_json

    if fmt == "dot":
        raise typer.BadParameter("--target prints a table (text) or JSON", param_hint="--format")
    if fmt == "json" or output is not None:
        text = to_json(graph, target)
        if output is None:
            sys.stdout.write(text)
        else:
            write_output(output, text, "--output")
            typer.echo(f"wrote {output}", err=True)
        return
    print_table(graph, target)
