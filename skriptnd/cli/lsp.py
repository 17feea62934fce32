"""`sknd lsp`: the language server (skriptnd.lsp) on stdin/stdout, for editors."""

from __future__ import annotations

from skriptnd.lsp.server import main as serve


def command() -> None:
    """Run the SkriptND language server over stdin/stdout (for editors).

    Example: configure your editor's LSP client to start the command: sknd lsp"""
    serve()
