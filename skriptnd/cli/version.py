"""`sknd version`: the version, as `sknd --version` prints it (for scripts that prefer a command)."""

from __future__ import annotations

import typer

from skriptnd.version import __version__


def command() -> None:
    """Print the skriptnd version (as sknd --version does).

    Example: sknd version"""
    typer.echo(__version__)
