"""TOSA graphs as SPIR-V modules: SPV_ARM_graph / SPV_ARM_tensors graphs of ``TOSA.001000.1`` instructions.

The operator set (:mod:`skriptnd.tosa`), the legalization (:mod:`skriptnd.tosa.legalize`,
:mod:`skriptnd.tosa.integer.lower`) and this serializer are separate: :func:`export` takes the same TOSA program
the MLIR export writes (:mod:`.program`) and encodes it (:mod:`.writer`); :func:`read` rebuilds that program
from a module (:mod:`.reader`) so that it runs in the numpy TOSA interpreter; :func:`disassemble` prints a
module in ``spirv-as`` syntax. Opcodes, operand order and enumerants of the core grammar and of the TOSA
instruction set come from the SPIR-V headers' grammar JSON, vendored as :mod:`.tables` by
:mod:`.generate_tables`; what the JSON does not say (attribute types, the TOSA enumerations) is in
:mod:`.encoding`, from ``tosa-1.0-spirv-extinst.txt``.

Weights larger than 64 bytes are ``OpGraphConstantARM`` (the module names them by GraphConstantID and the
API supplies the data): :class:`SpirvModule` holds them, and ``sknd export --spirv out.spv`` writes them
next to the module as ``out.spv.constants.npz`` (arrays named by GraphConstantID).
"""

from __future__ import annotations

import os

import numpy as np

from skriptnd.compose.ir import Graph
from skriptnd.io.npy import read_npz
from skriptnd.tosa.spirv.disassemble import disassemble
from skriptnd.tosa.spirv.program import TosaProgram, from_graph
from skriptnd.tosa.spirv.reader import SpirvReadError, read
from skriptnd.tosa.spirv.writer import SpirvModule, write

__all__ = ["SpirvModule", "SpirvReadError", "TosaProgram", "disassemble", "export", "from_graph", "load_constants",
           "read", "write"]


def export(graph: Graph, variables: dict[str, np.ndarray] | None = None) -> SpirvModule:
    """The SPIR-V module of a composed graph (fp32, or the integer graph for ``@quantize``); raises
    :class:`~skriptnd.diagnostics.DiagnosticError` (E0750/E0760/E0761 as the MLIR export, E0770/E0771)."""
    return write(from_graph(graph, variables))


def asm_comments(module: SpirvModule) -> list[str]:
    """Header comments for a disassembly: what each graph constant is."""
    return [f"GraphConstantARM {i}: {a.dtype}{list(a.shape)}" for i, a in enumerate(module.constants)]


def load_constants(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """The graph constants of an ``.npz`` written by ``sknd export --spirv`` (by GraphConstantID); numbers
    only, within what the file holds (skriptnd.io.npy: `NpyError` otherwise)."""
    arrays = read_npz(path)
    return [arrays[str(i)] for i in range(len(arrays))]
