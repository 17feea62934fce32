"""`sknd export`: a composed graph written in other formats (TOSA MLIR / flatbuffer, SPIR-V).

The command lives with the CLI, not in the exporters: an exporter is a function from a composed graph
to bytes or text (`skriptnd.tosa.mlir.export.to_mlir`, ...) and never imports the command line. Each format
is one option here and one entry in the list of files to produce; every file is produced in memory
first and written atomically only once all of them succeeded, so a failure writes nothing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeAlias

import typer

from skriptnd.cli.io import check_output_file, write_output
from skriptnd.cli.loading import compose_graph, load_model
from skriptnd.cli.options import (
    AttribOpt,
    Color,
    ColorOpt,
    GraphOpt,
    ModelArg,
    RandomWeightsOpt,
    SeedOpt,
    colour,
    parse_attribs,
)
from skriptnd.cli.report import fail
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.onnx_export import save_onnx, to_onnx
from skriptnd.tosa.integer.mlir import export_mlir
from skriptnd.tosa.mlir.export import ExportError, to_flatbuffer, to_mlir
from skriptnd.tosa.spirv import SpirvModule, asm_comments, disassemble
from skriptnd.tosa.spirv import export as to_spirv

if TYPE_CHECKING:  # onnx is imported only when exporting to it (skriptnd.interop.onnx_export)
    from onnx import ModelProto

#: What a format's producer returns: the file's text or bytes, or an onnx.ModelProto (saved by save_onnx,
#: with an external data file beside it when large).
Produced: TypeAlias = "str | bytes | ModelProto"


def _tosa_mlir(composed: Graph, inline_constants: bool) -> tuple[str, str]:
    """The TOSA MLIR text and its profile: the integer graph for @quantize, else the fp32 graph."""
    if has_quantization(composed):  # @quantize: the integer TOSA graph (skriptnd.tosa.integer.lower)
        return export_mlir(composed)
    return to_mlir(composed, inline_constants=inline_constants), "pro_fp"


def _onnx_model(composed: Graph, opset: int) -> ModelProto:
    """The ONNX model (an onnx.ModelProto) of the composed graph, checked by onnx.checker."""
    return to_onnx(composed, opset=opset)


def command(
    path: ModelArg,
    tosa_mlir: Annotated[Path | None, typer.Option("--tosa-mlir", help="Write TOSA 1.0 MLIR (generic form).")]
    = None,
    tosa_flatbuffer: Annotated[Path | None, typer.Option("--tosa-flatbuffer", help="Write a TOSA flatbuffer "
                                                         "(validated and serialized by tosa-opt).")] = None,
    graph: GraphOpt = None,
    attrib: AttribOpt = None,
    random_weights: RandomWeightsOpt = False,
    seed: SeedOpt = 0,
    inline_constants: Annotated[bool, typer.Option("--inline-constants", help="Write weights as dense<\"0x…\"> "
                                                   "literals instead of dense_resource blobs.")] = False,
    color: ColorOpt = Color.auto,
    onnx: Annotated[Path | None, typer.Option("--onnx", help="Write an ONNX model (weights as initializers; "
                                              "above 2 GB with an external data file OUT.data).")] = None,
    onnx_opset: Annotated[int, typer.Option("--onnx-opset", min=17, max=21,
                                            help="The ONNX opset to target (17 to 21).")] = 17,
    spirv: Annotated[Path | None, typer.Option("--spirv", help="Write a SPIR-V module (SPV_ARM_graph, TOSA.001000.1"
                                               " instructions); weights go to FILE.constants.npz.")] = None,
    spirv_asm: Annotated[Path | None, typer.Option("--spirv-asm", help="Write the SPIR-V module's disassembly "
                                                   "(spirv-as syntax).")] = None,
) -> None:
    """Export a model's graph to TOSA 1.0 (MLIR and/or flatbuffer) or ONNX.

    The MLIR is one func.func @main in the generic op form
    ("tosa.conv2d"(...) <{...}>); weights are dense_resource blobs in the
    file's dialect_resources section (--inline-constants: dense literals).
    tosa-opt (tosa-tools) validates and serializes it (--tosa-flatbuffer),
    the TOSA reference model runs the flatbuffer, and
    iree-compile --iree-input-type=tosa compiles the MLIR. --spirv writes
    the same TOSA program as a SPIR-V graph (SPV_ARM_graph, TOSA.001000.1
    instructions) and its graph constants as FILE.constants.npz.

    Only fully legalized graphs with static real/bool inputs and outputs
    export; anything else is a located E0750 diagnostic.

    --onnx writes the graph as an ONNX model checked by onnx.checker;
    what ONNX cannot express is a located E0840-E0846 diagnostic.

    Example: sknd export models/digits --tosa-mlir digits.mlir"""
    #: (option, target file, producer of its contents); producers run in order and may share work.
    wanted: list[tuple[str, Path, Callable[[], Produced]]] = []
    colours = colour(color)
    memo: dict[str, tuple[str, str] | SpirvModule] = {}

    def mlir() -> tuple[str, str]:
        if "tosa" not in memo:
            memo["tosa"] = _tosa_mlir(composed, inline_constants)
        text = memo["tosa"]
        assert isinstance(text, tuple)
        return text

    if tosa_mlir is not None:
        wanted.append(("--tosa-mlir", tosa_mlir, lambda: mlir()[0]))
    if tosa_flatbuffer is not None:
        wanted.append(("--tosa-flatbuffer", tosa_flatbuffer, lambda: to_flatbuffer(*mlir())))

    def spirv_module() -> SpirvModule:
        if "spirv" not in memo:
            memo["spirv"] = to_spirv(composed)
        module = memo["spirv"]
        assert isinstance(module, SpirvModule)
        return module

    if spirv is not None:
        wanted.append(("--spirv", spirv, lambda: spirv_module().to_bytes()))
        wanted.append(("--spirv", spirv.with_name(spirv.name + ".constants.npz"),
                       lambda: spirv_module().constants_npz()))
    if spirv_asm is not None:
        wanted.append(("--spirv-asm", spirv_asm,
                       lambda: disassemble(spirv_module().to_bytes(), asm_comments(spirv_module()))))
    if onnx is not None:  # an onnx.ModelProto; saved by skriptnd.interop.onnx_export.save_onnx (atomic)
        wanted.append(("--onnx", onnx, lambda: _onnx_model(composed, onnx_opset)))
    if not wanted:
        raise typer.BadParameter("give at least one output: --tosa-mlir FILE, --tosa-flatbuffer FILE, --onnx FILE, "
                                 "--spirv FILE, --spirv-asm FILE",
                                 param_hint="--tosa-mlir")
    for option, target, _produce in wanted:
        check_output_file(target, option)
    attribs = parse_attribs(attrib)
    model = load_model(path, colours)
    composed = compose_graph(model, graph, attribs, colours, random_weights=random_weights, seed=seed)
    produced: list[tuple[Path, Produced]] = []
    for _option, target, produce in wanted:
        try:
            produced.append((target, produce()))
        except DiagnosticError as err:
            fail(err.diagnostics, None, colours)
        except (ExportError, subprocess.TimeoutExpired, OSError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1) from None
    for (option, _, _), (target, data) in zip(wanted, produced, strict=True):
        if isinstance(data, str | bytes):
            write_output(target, data, option)
        else:  # an onnx.ModelProto: with an external data file beside it when large
            try:
                save_onnx(data, target)
            except OSError as err:
                raise typer.BadParameter(f"cannot write {target}: {err.strerror or err}",
                                         param_hint=f"'{option}'") from None
        typer.echo(f"wrote {target}", err=True)
