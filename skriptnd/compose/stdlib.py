"""The standard library as one program, for the stages that expand standard operations by themselves.

The TOSA legalization and the ONNX exporter both reach many composite standard operators (rms_pool,
l2_norm, lstm_step, ...) through their own @compose: they need a program importing every standard module
and each operator's kind. Both come from here, loaded once per process (a model's own program is used
instead when the operation has one).
"""

from __future__ import annotations

import tempfile
from functools import cache, lru_cache
from pathlib import Path

from skriptnd.compose.composer import Composer
from skriptnd.compose.ir import Graph, Operation
from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.intrinsics import operator_kind
from skriptnd.semantics.modules import Program, load_program, stdlib_module

#: The name of the program's entry (it is never written; its imports resolve in the standard library's folder)
ENTRY_FOLDER = "sknd_stdlib_program"


@lru_cache(maxsize=1)
def stdlib_program() -> Program:
    """A program importing every standard module (what expanding a standard composite needs)."""
    # the imports resolve in the standard library's own folder: a model folder in the shared temporary
    # folder would let another user's sknd_stdlib_program/math.sknd stand in for the standard one
    entry = Path(tempfile.gettempdir()) / ENTRY_FOLDER / "main.sknd"
    text = "".join(f"import {m};\n" for m in STDLIB_MODULES)
    return load_program(entry, sources={entry: text}, model_dir=stdlib_dir())


@cache
def stdlib_kinds() -> dict[str, str]:
    """Every standard operator's kind ('atomic', 'composite', 'intrinsic', ...) by qualified name."""
    kinds = {}
    for name in STDLIB_MODULES:
        module = stdlib_module(name)  # shared with skriptnd.load: no second parse
        assert module is not None, f"the standard module {name} does not parse"
        for d in module.definitions:
            kinds[f"{name}.{d.name}"] = operator_kind(d)
    return kinds


def expand(op: Operation, program: Program | None = None) -> Graph:
    """The composed graph of ``op``'s own @compose (its components as operations), in ``program`` (default:
    the standard library's)."""
    return Composer(program or stdlib_program()).expand(op)
