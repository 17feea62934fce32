"""The options several `sknd` commands share, defined once so that they read and behave alike.

A command module takes these `Annotated` types as parameter annotations (typer reads the option
name and help from them); what an option's value means is decided here once too: `colour` maps
`--color` to rich's setting, `parse_attribs` reads `--attrib name=value` as a SkriptND expression.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from skriptnd.semantics.evaluate import EvalError, evaluate
from skriptnd.syntax import parse_expr


class Color(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


class DiagnosticFormat(StrEnum):
    text = "text"
    json = "json"


def colour(choice: Color) -> bool | None:
    """`--color` as rich takes it: None lets rich decide (a terminal gets colour)."""
    return {Color.auto: None, Color.always: True, Color.never: False}[Color(choice)]


ColorOpt = Annotated[Color, typer.Option("--color", help="Colour the diagnostics: auto, always or never.")]
DiagnosticFormatOpt = Annotated[DiagnosticFormat, typer.Option("--format", help="Diagnostics as text or "
                                                               "LSP-shaped JSON.")]
PathsArg = Annotated[list[str] | None, typer.Argument(
    help="SkriptND files and folders (walked for .sknd files; a folder with main.sknd is a model); default: '.'",
    show_default=False)]
ExcludeOpt = Annotated[list[str] | None, typer.Option(
    "--exclude", metavar="PATTERN", help="Leave out of folder walks what this glob matches: a name, or with '/' a "
    "path from the current folder (repeatable; added to the defaults and to `exclude` in pyproject.toml's "
    "tool.skriptnd table).")]
ModelArg = Annotated[Path, typer.Argument(help="A model folder (with main.sknd) or a main .sknd file.")]
GraphOpt = Annotated[str | None, typer.Option("--graph", help="The graph to compose (default: the first).")]
AttribOpt = Annotated[list[str] | None, typer.Option("--attrib", "-a", help="A graph attribute, name=value "
                                                     "(a SkriptND expression: 4, 0.5, true, [1, 2], 'x').")]
SeedOpt = Annotated[int, typer.Option("--seed", help="The seed of random weights and inputs.")]
RandomWeightsOpt = Annotated[bool, typer.Option("--random-weights", help="Random values for variables without "
                                                "tensor files.")]
#: The iree backend's options, shared by `sknd run` and `sknd bench`.
IreeFlagOpt = Annotated[list[str] | None, typer.Option("--iree-flag", help="iree: one more iree-compile flag "
                                                       "(repeatable), e.g. --iree-flag=--iree-opt-data-tiling=false")]
NoVerifyOpt = Annotated[bool, typer.Option("--no-verify", help="iree: do not compare a newly compiled module with "
                                           "the numpy backend before its first result (unchecked results).")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="iree: where to run, cpu (default), cuda[:ARCH] "
                                               "(default sm_80), vulkan[:TARGET] or hip[:ARCH] (default gfx942); "
                                               "sknd bench runs the other backends on the CPU.")]

_INT = re.compile(r"-?(0|[1-9][0-9]*)")


def parse_attribs(items: list[str] | None) -> dict[str, object]:
    """`name=value` pairs; the value is a SkriptND compile-time expression (a usage error if not), evaluated
    to a compile-time value (int, float, bool, str, a pack: skriptnd.semantics.values)."""
    out: dict[str, object] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise typer.BadParameter(f"'{item}' is not name=value", param_hint="--attrib")
        if _INT.fullmatch(text.strip()):  # the common case (-a height=224) without building the parser
            out[name.strip()] = int(text)
            continue
        expr, diags = parse_expr(text, f"--attrib {name}")
        if expr is None or diags:
            raise typer.BadParameter(f"cannot read the value of '{name}': {diags[0].message if diags else text}",
                                     param_hint="--attrib")
        try:
            out[name.strip()] = evaluate(expr, {})
        except EvalError as err:
            raise typer.BadParameter(f"'{name}': {err.message}", param_hint="--attrib") from None
    return out
InputOpt = Annotated[list[str] | None, typer.Option("--input", "-i", help="name=file.npy or name=file.dat "
                                                    "(repeatable).")]
RandomInputsOpt = Annotated[bool, typer.Option("--random-inputs", help="Random values for inputs not given.")]
