"""A compiled TOSA :class:`~skriptnd.tosa.program.build.Program` as TOSA 1.0 MLIR (generic form), for compilers
that take TOSA (the iree backend).

A program is the simplified TOSA graph of a run of legalized operations (skriptnd.tosa.program.build): batch
norms folded, filters re-laid out once, and the NCHW ↔ NHWC transpose pairs between layers cancelled.
Written as MLIR it gives the compiler that graph rather than one subgraph per operation, each framed by
its own layout transposes (what :func:`skriptnd.tosa.mlir.export.to_mlir` writes, operation by operation).

Intermediate types come from evaluating the operators once on placeholder inputs (ones), as the
exporter does; a WHILE_LOOP's results have its operands' types (it is not run), and its regions are
written by skriptnd.tosa.mlir.regions. :func:`program_to_mlir` raises :class:`NotCompilable` for what
MLIR TOSA cannot type: an int64 value between operators or a dtype without a TOSA element type.

SkriptND ``int`` (int64) inputs and outputs are int32 at the function's boundary: a program NARROWs an int
input before using it and WIDENs an int result, so the NARROW of an input and the WIDEN of an output are
the caller's (it checks that the values fit, skriptnd.backends.via_iree); only an int64 value *between*
operators is not compilable. With ``bool_as_i8``, bool inputs and outputs are i8 at the boundary and CAST
to/from i1 inside: IREE's data tiling cannot load an ``i1`` function argument ("'iree_codegen.load_from_buffer'
op buffer and tensor shapes must be compatible and element types must match"; every Hugging Face attention
mask), while i1 values computed inside a module compile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from skriptnd.tosa.mlir import regions as mlir_regions
from skriptnd.tosa.mlir.text import ELEM, Constants, attributes, tensor_type
from skriptnd.tosa.ops.invoke import ITEM
from skriptnd.tosa.program.build import BOUNDARY, NARROW, WIDEN, Op, Program, placeholder_value


class NotCompilable(Exception):
    """Why a program cannot be written as TOSA MLIR (the reason is the message)."""


def _check(a: np.ndarray, what: str) -> None:
    if a.dtype not in ELEM:
        raise NotCompilable(f"{what} is {a.dtype} (no TOSA element type)")


def _edge(program: Program, o: Op) -> bool:
    """Whether ``o`` is a NARROW of a program input or a WIDEN of a program output: int32 at the boundary."""
    return (o.name == NARROW and o.inputs[0] in program.inputs) or (o.name == WIDEN and o.output in program.outputs)


def check_compilable(program: Program) -> None:
    """:class:`NotCompilable` for what is certain to have no MLIR form without writing the MLIR (int64
    values between operators); the rest (an attribute or dtype without a form) :func:`program_to_mlir` finds."""
    if any(o.name in BOUNDARY and not _edge(program, o) for o in program.ops):
        raise NotCompilable("it computes SkriptND int (int64) values between operators, which TOSA has no type for")


def program_to_mlir(program: Program, inputs: Sequence[tuple[tuple[int, ...], np.dtype]], name: str = "main",
                    comment: str = "", *, inline_constants: bool = False, header: str | None = None,
                    bool_as_i8: bool = False) -> str:
    """MLIR of ``program`` whose inputs have the ``(shape, dtype)`` of ``inputs`` (int32 for SkriptND int
    inputs); one ``func.func @main``. Large constants are ``dense_resource`` blobs (named after the graph
    tensor they hold, ``Program.hints``) unless ``inline_constants``; ``header``: the first line's comment
    (default: names the program); ``bool_as_i8``: bool inputs and outputs are i8 (see the module doc)."""
    lines: list[str] = []
    ssa: dict[str, str] = {}
    vals: dict[str, np.ndarray] = {}
    constants = Constants(inline_constants)
    counter = [0]
    scratch: dict[str, np.ndarray] = {}

    def fresh() -> str:
        counter[0] += 1
        return f"%{counter[0] - 1}"

    args, arg_types, casts = [], [], []
    for i, (n, (shape, dtype)) in enumerate(zip(program.inputs, inputs, strict=True)):
        a = np.ones(shape, dtype)
        _check(a, f"input {i}")
        ssa[n], vals[n] = f"%arg{i}", a
        if bool_as_i8 and a.dtype == np.bool_:
            wide = a.astype(np.int8)
            ssa[n] = f"%arg{i}_i1"
            casts.append(f'    %arg{i}_i1 = "tosa.cast"(%arg{i}) : ({tensor_type(wide)}) -> {tensor_type(a)}')
            a = wide
        args.append(f"%arg{i}: {tensor_type(a)}")
        arg_types.append(tensor_type(a))

    def const(v: str, a: np.ndarray, hint: str) -> str:
        if a.dtype != np.int64:
            _check(a, f"constant {hint}")
        elif a.ndim != 1:  # int64 is a shape operand's type (int data is int32 here): an int64 tensor is not one
            raise NotCompilable(f"constant {hint} holds SkriptND int (int64) values, which TOSA has no type for")
        return constants.line(v, a, hint)

    used = {i for o in program.ops for i in o.inputs} | set(program.outputs)
    for n, a in program.constants.items():
        if n not in used:  # left by the program's simplifications: nothing reads it
            continue
        a = np.asarray(a)
        v = fresh()
        if bool_as_i8 and a.dtype == np.bool_ and a.size > 1:  # loaded from a buffer like an argument
            wide = a.astype(np.int8)
            lines.append("    " + const(v, wide, program.hints.get(n, n)))
            v, narrow = fresh(), v
            lines.append(f'    {v} = "tosa.cast"({narrow}) : ({tensor_type(wide)}) -> {tensor_type(a)}')
        else:
            lines.append("    " + const(v, a, program.hints.get(n, n)))
        ssa[n], vals[n] = v, a
    for o in program.ops:
        if o.name in BOUNDARY:
            if not _edge(program, o) or vals[o.inputs[0]].dtype != np.int32:
                raise NotCompilable("it computes SkriptND int (int64) values between operators, which TOSA has "
                                    "no type for")
            ssa[o.output], vals[o.output] = ssa[o.inputs[0]], vals[o.inputs[0]]  # int32 at the boundary
            continue
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
        in_types = ", ".join(f"!tosa.shape<{a.size}>" if a.dtype == np.int64 else tensor_type(a) for a in operands)
        v = fresh()
        try:
            attrs = attributes(o.name, o.attrs)
        except ValueError as err:
            raise NotCompilable(str(err)) from None
        lines.append(f'    {v} = "tosa.{o.name.lower()}"({", ".join(ssa[i] for i in o.inputs)}){attrs} : '
                     f"({in_types}) -> {tensor_type(result)}")
        ssa[o.output], vals[o.output] = v, result
    results, res_types_list = [], []
    for o in program.outputs:
        if vals[o].dtype == np.int64:
            raise NotCompilable("an output is a shape value")
        t = tensor_type(vals[o])
        if bool_as_i8 and vals[o].dtype == np.bool_:
            v, t = fresh(), tensor_type(vals[o].astype(np.int8))
            lines.append(f'    {v} = "tosa.cast"({ssa[o]}) : ({tensor_type(vals[o])}) -> {t}')
            results.append(v)
        elif o in program.constants or o in program.inputs:  # a function result must be an operation's value
            v = fresh()
            lines.append(f'    {v} = "tosa.identity"({ssa[o]}) : ({t}) -> {t}')
            results.append(v)
        else:
            results.append(ssa[o])
        res_types_list.append(t)
    res_types = ", ".join(res_types_list)
    in_types = ", ".join(arg_types)
    head = (f'  "func.func"() <{{function_type = ({in_types}) -> ({res_types}), sym_name = "{name}"}}> ({{\n'
            f'  ^bb0({", ".join(args)}):')
    ret = f'    "func.return"({", ".join(results)}) : ({res_types}) -> ()'
    text = "\n".join([header or f"// TOSA 1.0 program {comment} (skriptnd)", '"builtin.module"() ({', head, *casts, *lines,
                      ret, "  }) : () -> ()", "}) : () -> ()", ""])
    return constants.module(text)
