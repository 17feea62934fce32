"""`sknd import SOURCE -o OUT_DIR`: a foreign model (ONNX, TFLite; NNEF 1.x when its importer is installed) written
as a SkriptND model folder.

The command picks the importer from a small registry (a predicate on the source path -> a function that
imports it); a new format is one entry in `IMPORTERS`. The importers load their third-party readers (onnx,
nnef) only when they run, so a missing optional package is their clear message, not an import error here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from skriptnd.cli.options import Color, ColorOpt, colour
from skriptnd.diagnostics import DiagnosticError, print_diagnostics
from skriptnd.interop.nnef_import import import_nnef
from skriptnd.interop.onnx_import import import_onnx
from skriptnd.interop.tflite_import.importer import import_tflite, is_tflite
from skriptnd.interop.writer import output_folder_problem


@dataclass(frozen=True)
class ImportOptions:
    """The command's options that shape an import (ONNX only: NNEF 1.x has static shapes); ``progress``
    is told each step as it starts (the status line on a terminal)."""
    input_shapes: dict[str, list[int | str]]
    fold_constants: bool
    opset_upgrade: bool
    progress: Callable[[str], None] | None = None
    reference_kernels: bool = False  # TFLite dynamic-range operators as LiteRT's reference kernels compute


#: What an importer returns: the model folder written, the names it changed, the graph attributes it made of
#: symbolic dimensions and those it made of inputs that feed only parameters (given at run time with --input).
Imported = tuple[Path, dict[str, str], list[str], list[str]]


def _import_onnx(src: Path, out: Path, options: ImportOptions) -> Imported:
    if options.reference_kernels:
        raise typer.BadParameter("--reference-kernels applies to TFLite models only")
    result = import_onnx(src, out, input_shapes=options.input_shapes, fold_constants=options.fold_constants,
                         opset_upgrade=options.opset_upgrade, progress=options.progress)
    return result.path, result.renamed, result.attribs, result.params


def _import_nnef(src: Path, out: Path, options: ImportOptions) -> Imported:
    if options.reference_kernels:
        raise typer.BadParameter("--reference-kernels applies to TFLite models only")
    if options.input_shapes or options.fold_constants:
        raise typer.BadParameter("--input-shape and --fold-constants apply to ONNX models only")
    return import_nnef(src, out), {}, [], []


def _import_tflite(src: Path, out: Path, options: ImportOptions) -> Imported:
    if options.input_shapes or options.fold_constants:
        raise typer.BadParameter("--input-shape and --fold-constants apply to ONNX models only (a TFLite model's "
                                 "dynamic batch becomes the graph attribute 'batch')")
    result = import_tflite(src, out, progress=options.progress, reference_kernels=options.reference_kernels)
    return result.path, result.renamed, result.attribs, []


def _is_nnef(path: Path) -> bool:
    return path.suffix == ".nnef" or (path.is_dir() and (path / "graph.nnef").is_file())


@dataclass(frozen=True)
class Importer:
    name: str
    accepts: Callable[[Path], bool]
    run: Callable[[Path, Path, ImportOptions], Imported]


#: The formats `sknd import` reads, tried in order.
IMPORTERS = [
    Importer("TFLite", is_tflite, _import_tflite),
    Importer("ONNX", lambda p: p.suffix.lower() == ".onnx", _import_onnx),
    Importer("NNEF 1.x", _is_nnef, _import_nnef),
]


_DIM = r"\s*(\d+|[A-Za-z_]\w*)\s*"


def parse_input_shapes(items: list[str] | None) -> dict[str, list[int | str]]:
    """NAME=d0,d1,...: each extent a number (fixed) or a name (kept symbolic: a graph attribute, issue 25)."""
    shapes: dict[str, list[int | str]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        if not sep or not name or not re.fullmatch(f"{_DIM}(,{_DIM})*", dims):
            raise typer.BadParameter(f"'{item}' is not NAME=d0,d1,... (non-negative integers, or names for "
                                     "dimensions kept symbolic, e.g. x=batch,3,224,224)", param_hint="--input-shape")
        shapes[name] = [int(d) if d.strip().isdigit() else d.strip() for d in dims.split(",")]
    return shapes


def _output_error(message: str) -> typer.BadParameter:
    """E0790 as what it is: a usage error (exit 2) of the -o option naming the path and the fix, not a
    diagnostic at a made-up line of a folder."""
    return typer.BadParameter(f"{message} [E0790]", param_hint="'-o' / '--output'")


def command(
    source: Annotated[Path, typer.Argument(help="MODEL.onnx, MODEL.tflite, GRAPH.nnef or an NNEF "
                                                         "1.x folder.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The model folder to write (must not exist "
                                         "or be empty).")],
    input_shape: Annotated[list[str] | None, typer.Option("--input-shape", help="Fix an input's shape: "
                                                          "NAME=1,3,224,224; a name keeps that dimension "
                                                          "symbolic: NAME=batch,3,224,224 (repeatable).")] = None,
    opset_upgrade: Annotated[bool, typer.Option("--opset-upgrade/--no-opset-upgrade", help="Convert models "
                                                "older than opset 13 up to it (default: on).")] = True,
    fold_constants: Annotated[bool, typer.Option("--fold-constants", help="Evaluate every constant subgraph "
                                                 "at import time.")] = False,
    reference_kernels: Annotated[bool, typer.Option("--reference-kernels", help="TFLite dynamic-range "
                                                    "operators as LiteRT's reference kernels (BUILTIN_REF) "
                                                    "compute, not its default ones.")] = False,
    color: ColorOpt = Color.auto,
) -> None:
    """Import an ONNX, TFLite or NNEF 1.x model as a SkriptND model folder.

    Writes main.sknd (one standard-library operation per ONNX node where
    one exists, node names as labels, explicit paddings) and the weights as
    NNEF tensor files. Nothing is written when the model cannot be imported;
    an unsupported model gets one diagnostic listing every missing operator.

    Example: sknd import tests/data/zoo/ci_convnext_block.onnx -o convnext_block   (then: sknd run convnext_block --random-inputs)"""
    colours = colour(color)
    importer = next((i for i in IMPORTERS if i.accepts(source)), None)
    if importer is None:
        raise typer.BadParameter(f"cannot tell the format of '{source}': give a .onnx file, a .tflite file, a .nnef "
                                 "file or a folder with graph.nnef", param_hint="SOURCE")
    problem = output_folder_problem(output)  # before reading the model: a usage error of -o, not of the model
    if problem is not None:
        raise _output_error(problem)
    # a status line while it works (reading, shape inference, converting, checking: seconds to minutes for a
    # large model); rich shows it only on a terminal, so a pipe or a log gets none
    status = Console(stderr=True).status(f"importing {source.name}…")
    options = ImportOptions(parse_input_shapes(input_shape), fold_constants, opset_upgrade,
                            lambda step: status.update(f"importing {source.name}: {step}…"), reference_kernels)
    try:
        with status:
            path, renamed, attribs, params = importer.run(source, output, options)
    except DiagnosticError as err:
        if all(d.code == "E0790" for d in err.diagnostics):  # the folder refused the write: still about -o
            raise _output_error(err.diagnostics[0].message) from None
        print_diagnostics(err.diagnostics, lambda _path: None, color=colours)
        raise typer.Exit(1) from None
    for foreign, name in renamed.items():
        typer.echo(f"renamed {foreign!r} -> {name}", err=True)
    if attribs:
        typer.echo(f"dynamic dimensions became graph attributes: {', '.join(attribs)} (set them with "
                   "--attrib NAME=VALUE)", err=True)
    if params:
        typer.echo(f"inputs that feed only parameters became graph attributes: {', '.join(params)} (sknd run takes "
                   f"them as inputs: --input {params[0]}=FILE.npy; the graph is composed for each value)", err=True)
    typer.echo(f"wrote {path} (from {importer.name})", err=True)
