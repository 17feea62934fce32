"""Readable `--help`: value placeholders that say what to type instead of typer's Python types.

Typer labels every option with its annotation (`<bool>` on a flag, `<list[str]>` on `--input`). The
command group (skriptnd.cli.app.Commands) relabels each command's parameters once, when the command is
looked up, so the command modules keep plain annotations: a flag gets no placeholder, known options a
meaningful one (NAME=FILE, DIR, ...), others the upper-cased type.
"""

from __future__ import annotations

from typer import _click as click  # typer vendors click (0.29+); these are the types its groups hand us
from typer.core import TyperArgument, TyperGroup

#: Placeholders by parameter name (the Python name of the option or argument).
PLACEHOLDERS = {
    "input": "NAME=FILE", "attrib": "NAME=VALUE", "seed": "N", "rtol": "R", "atol": "A", "graph": "NAME",
    "save_inputs": "DIR", "output_dir": "DIR", "expect": "DIR", "output": "FILE", "tosa_mlir": "FILE",
    "tosa_flatbuffer": "FILE", "max_memory": "SIZE", "via": "BACKEND", "color": "auto|always|never",
    "paths": "PATH", "path": "MODEL", "target": "CPU", "iree_flag": "=--FLAG", "threads": "N", "top_k": "K",
    "rounds": "N", "device": "DEVICE", "compare": "onnxruntime", "onnx": "FILE", "onnx_opset": "17..21",
    "spirv": "FILE", "spirv_asm": "FILE", "input_shape": "NAME=D0,D1,...",
}
#: Placeholders of a parameter whose meaning depends on the command: (command, parameter name) -> placeholder
COMMAND_PLACEHOLDERS = {
    ("bench", "via"): "BACKEND,...", ("import", "output"): "DIR", ("compose", "target"): "nnapi|mli|tosa", ("doc", "target"): "[MODULE | MODULE.OPERATOR]",
}
_BY_TYPE = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH", "list[str]": "TEXT"}


def _placeholder(param: click.Parameter, ctx: click.Context, command: str = "") -> str:
    if (command, param.name) in COMMAND_PLACEHOLDERS:
        return COMMAND_PLACEHOLDERS[command, param.name]
    if param.name in PLACEHOLDERS:
        return PLACEHOLDERS[param.name]
    label = getattr(param, "display_type", lambda ctx: param.type.name)(ctx).strip("<>")
    return _BY_TYPE.get(label, label)


def tidy(command: click.Command, ctx: click.Context) -> None:
    """Give every parameter of command a placeholder (none for flags); idempotent."""
    if getattr(command, "_sknd_tidy", False):
        return
    for param in command.get_params(ctx):  # --help included
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = _placeholder(param, ctx, command.name or "")
            param.display_type_rich = lambda ctx: None  # the name says it: no type column
        elif getattr(param, "metavar", 0) is None:
            param.metavar = "" if getattr(param, "is_flag", False) else _placeholder(param, ctx, command.name or "")
    command._sknd_tidy = True


class TidyGroup(TyperGroup):
    """A command group whose commands' help shows placeholders, not Python types."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            tidy(command, ctx)
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        tidy(self, ctx)
        super().format_help(ctx, formatter)
