"""A compiled TOSA :class:`~skriptnd.tosa.program.Program` as TOSA 1.0 MLIR (generic form), for compilers
that take TOSA (the iree backend).

A program is the simplified TOSA graph of a run of legalized operations (skriptnd.tosa.program): batch
norms folded, filters re-laid out once, and the NCHW ↔ NHWC transpose pairs between layers cancelled.
Written as MLIR it gives the compiler that graph rather than one subgraph per operation, each framed by
its own layout transposes (what :func:`skriptnd.tosa.export.to_mlir` writes, operation by operation).

Intermediate types come from evaluating the operators once on placeholder inputs (ones), as the
exporter does; a WHILE_LOOP's results have its operands' types (it is not run), and its regions are
written by skriptnd.tosa.mlir_regions. :func:`program_to_mlir` raises :class:`NotCompilable` for what
MLIR TOSA cannot type: an int64 value (SkriptND ``int``: the program's NARROW / WIDEN edges) or a dtype
without a TOSA element type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import mlir_regions
from .export import _ELEM, Constants, _attrs, _type
from .invoke import ITEM
from .program import BOUNDARY, Program, placeholder_value


class NotCompilable(Exception):
    """Why a program cannot be written as TOSA MLIR (the reason is the message)."""


def _check(a: np.ndarray, what: str) -> None:
    if a.dtype not in _ELEM:
        raise NotCompilable(f"{what} is {a.dtype} (no TOSA element type)")


def check_compilable(program: Program) -> None:
    """:class:`NotCompilable` for what is certain to have no MLIR form without writing the MLIR (int64
    values); the rest (an attribute or dtype without a form) :func:`program_to_mlir` finds."""
    if any(o.name in BOUNDARY for o in program.ops):
        raise NotCompilable("it computes SkriptND int (int64) values, which TOSA has no type for")


def program_to_mlir(program: Program, inputs: Sequence[tuple[tuple[int, ...], np.dtype]], name: str = "main",
                    comment: str = "", *, inline_constants: bool = False, header: str | None = None) -> str:
    """MLIR of ``program`` whose inputs have the ``(shape, dtype)`` of ``inputs``; one ``func.func @main``.
    Large constants are ``dense_resource`` blobs (named after the graph tensor they hold, ``Program.hints``)
    unless ``inline_constants``; ``header``: the first line's comment (default: names the program)."""
    lines: list[str] = []
    ssa: dict[str, str] = {}
    vals: dict[str, np.ndarray] = {}
    constants = Constants(inline_constants)
    counter = [0]
    scratch: dict[str, np.ndarray] = {}

    def fresh() -> str:
        counter[0] += 1
        return f"%{counter[0] - 1}"

    args = []
    for i, (n, (shape, dtype)) in enumerate(zip(program.inputs, inputs, strict=True)):
        a = np.ones(shape, dtype)
        _check(a, f"input {i}")
        ssa[n], vals[n] = f"%arg{i}", a
        args.append(f"%arg{i}: {_type(a)}")

    def const(v: str, a: np.ndarray, hint: str) -> str:
        if a.dtype != np.int64:
            _check(a, f"constant {hint}")
        return constants.line(v, a, hint)

    for n, a in program.constants.items():
        a = np.asarray(a)
        v = fresh()
        lines.append("    " + const(v, a, program.hints.get(n, n)))
        ssa[n], vals[n] = v, a
    for o in program.ops:
        if o.name in BOUNDARY:
            raise NotCompilable("it computes SkriptND int (int64) values, which TOSA has no type for")
        operands = [vals[i] for i in o.inputs]
        if o.name == ITEM:  # a result of the WHILE_LOOP whose output list it reads
            ssa[o.output] = f"{ssa[o.inputs[0]]}#{int(o.attrs['index'])}"
            vals[o.output] = placeholder_value(o, operands, program.constants, scratch)
            continue
        if o.name == "WHILE_LOOP":  # its results have its operands' types
            v = fresh()
            try:
                lines += mlir_regions.while_loop(v, [ssa[i] for i in o.inputs], operands, o.attrs, fresh, const, "    ")
            except ValueError as err:
                raise NotCompilable(str(err)) from None
            ssa[o.output], vals[o.output] = v, placeholder_value(o, operands, program.constants, scratch)
            continue
        result = placeholder_value(o, operands, program.constants, scratch)  # only its type matters
        _check(result, f"the result of {o.name}")
        in_types = ", ".join(f"!tosa.shape<{a.size}>" if a.dtype == np.int64 else _type(a) for a in operands)
        v = fresh()
        try:
            attrs = _attrs(o.name, o.attrs)
        except ValueError as err:
            raise NotCompilable(str(err)) from None
        lines.append(f'    {v} = "tosa.{o.name.lower()}"({", ".join(ssa[i] for i in o.inputs)}){attrs} : '
                     f"({in_types}) -> {_type(result)}")
        ssa[o.output], vals[o.output] = v, result
    results = []
    for o in program.outputs:
        if vals[o].dtype == np.int64:
            raise NotCompilable("an output is a shape value")
        if o in program.constants or o in program.inputs:  # a function result must be an operation's value
            v = fresh()
            lines.append(f'    {v} = "tosa.identity"({ssa[o]}) : ({_type(vals[o])}) -> {_type(vals[o])}')
            results.append(v)
        else:
            results.append(ssa[o])
    res_types = ", ".join(_type(vals[o]) for o in program.outputs)
    in_types = ", ".join(_type(vals[n]) for n in program.inputs)
    head = (f'  "func.func"() <{{function_type = ({in_types}) -> ({res_types}), sym_name = "{name}"}}> ({{\n'
            f'  ^bb0({", ".join(args)}):')
    ret = f'    "func.return"({", ".join(results)}) : ({res_types}) -> ()'
    text = "\n".join([header or f"// TOSA 1.0 program {comment} (skriptnd)", '"builtin.module"() ({', head, *lines,
                      ret, "  }) : () -> ()", "}) : () -> ()", ""])
    return constants.module(text)
