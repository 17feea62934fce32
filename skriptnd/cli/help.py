"""Readable `--help`: value placeholders that say what to type instead of typer's Python types.

Typer labels every option with its annotation (`<bool>` on a flag, `<list[str]>` on `--input`). The
command group here relabels each command's parameters once, when the command is looked up, so the
commands themselves (cli.py, cli_graph.py, cli_export.py) keep plain annotations: a flag gets no
placeholder, known options a meaningful one (NAME=FILE, DIR, ...), others the upper-cased type.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperGroup

#: Placeholders by parameter name (the Python name of the option or argument).
PLACEHOLDERS = {
    "input": "NAME=FILE", "attrib": "NAME=VALUE", "seed": "N", "rtol": "R", "atol": "A", "graph": "NAME",
    "save_inputs": "DIR", "output_dir": "DIR", "expect": "DIR", "output": "FILE", "tosa_mlir": "FILE",
    "tosa_flatbuffer": "FILE", "max_memory": "SIZE", "via": "BACKEND", "color": "auto|always|never",
    "paths": "PATH", "path": "MODEL", "target": "CPU", "iree_flag": "=--FLAG",
}
#: Placeholders of a parameter whose meaning depends on the command: (command, parameter name) -> placeholder
COMMAND_PLACEHOLDERS = {
    ("bench", "via"): "BACKEND,...", ("compose", "target"): "nnapi|mli|tosa", ("doc", "target"): "[MODULE | MODULE.OPERATOR]",
}
_BY_TYPE = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH", "list[str]": "TEXT"}


def _placeholder(param: Any, ctx: Any, command: str = "") -> str:
    if (command, param.name) in COMMAND_PLACEHOLDERS:
        return COMMAND_PLACEHOLDERS[command, param.name]
    if param.name in PLACEHOLDERS:
        return PLACEHOLDERS[param.name]
    label = param.display_type(ctx).strip("<>")
    return _BY_TYPE.get(label, label)


def tidy(command: Any, ctx: Any) -> None:
    """Give every parameter of command a placeholder (none for flags); idempotent."""
    if getattr(command, "_sknd_tidy", False):
        return
    for param in command.get_params(ctx):  # --help included
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = _placeholder(param, ctx, command.name)
            param.display_type_rich = lambda ctx: None  # the name says it: no type column
        elif getattr(param, "metavar", 0) is None:
            param.metavar = "" if getattr(param, "is_flag", False) else _placeholder(param, ctx, command.name)
    command._sknd_tidy = True


class TidyGroup(TyperGroup):
    """The `sknd` command group: its commands' help shows placeholders, not Python types."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            tidy(command, ctx)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        tidy(self, ctx)
        super().format_help(ctx, formatter)
