"""Export a composed graph to TOSA 1.0 MLIR (generic op form) and, through ``tosa-opt``, to a flatbuffer.

:func:`to_mlir` writes one ``func.func @main`` whose arguments are the graph inputs and whose results are
the graph outputs. Every operation must be legalized (:func:`skriptnd.tosa.legalize.legalize`); variables,
graph constants and the subgraphs' own constants become ``tosa.const``, shape operands ``tosa.const_shape``
(``!tosa.shape<N>``). Numeric constants of at least :data:`skriptnd.tosa.mlir.text.RESOURCE_MIN_BYTES` bytes are
``dense_resource<name>`` blobs in a trailing ``{-# dialect_resources: { builtin: { … } } #-}`` section
(little-endian hex after the 4-byte alignment header), which MLIR parses without building a literal;
``inline_constants=True`` (``--inline-constants``) writes every payload as an exact hex ``dense<"0x…">``
literal instead. Operand order is TOSA 1.0 (CONV2D: input, weight, bias, input_zp, weight_zp; MUL: shift;
PAD/RESHAPE/SLICE/TILE: shape values).
Intermediate types come from running the subgraphs once on the TOSA numpy operators (inputs set to 1),
so the exported graph is fully static. A non-legalized operation (or an unsupported input/output type,
state updates, control flow) is reported as a located ``E0750`` diagnostic. A static-length recurrent
layer (nn.lstm without ``steps``) legalizes to a ``tosa.while_loop`` (skriptnd.tosa.legalize.recurrent,
written by skriptnd.tosa.mlir.regions); with ``steps`` its length is data, and it is an E0750.

:func:`to_flatbuffer` turns the MLIR into a TOSA flatbuffer with the ``tosa-opt`` of the tosa-tools wheel
(``--tosa-attach-target``, ``--tosa-validate``, ``--tosa-serialize``); the flatbuffer's inputs are the
graph inputs in order, as ``tosa_reference_model.run(fb, inputs)`` expects.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from skriptnd.compose.extents import extent_symbols
from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import Span
from skriptnd.tosa.legalize import coverage, graph_constant, legalize
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.mlir import regions as mlir_regions
from skriptnd.tosa.mlir.program import NotCompilable, program_to_mlir
from skriptnd.tosa.mlir.text import Constants, attributes, tensor_type
from skriptnd.tosa.ops.invoke import ITEM, apply
from skriptnd.tosa.program.build import graph_program

register_codes({"E0750": "operation cannot be exported to TOSA"})

class ExportError(Exception):
    """tosa-opt is missing or rejected the MLIR."""


def _span(x: Operation | Tensor) -> Span | None:
    span = getattr(x, "span", None)
    return span if isinstance(span, Span) else None


def _fail(message: str, span: Span | None) -> Diagnostic:
    return Diagnostic(code="E0750", message=message, span=span or Span("<graph>", 1, 1, 1, 1))


def check_exportable(graph: Graph) -> list[Diagnostic]:
    """Located diagnostics for everything that keeps ``graph`` from being exported (empty: exportable)."""
    recurrent = RecurrentLegalizer()  # knows the static length of a legalized nn.lstm's Y
    for op in graph.operations:
        recurrent(op)
    diags = [_dynamic_input(t) for t in graph.inputs if t.dynamic]
    dynamic = bool(diags)  # then what reads the input is dynamic too: not reported once more per operation
    for t in list(graph.inputs) + list(graph.outputs):
        if dynamic and t.dynamic and t.dtype in ("real", "bool"):
            continue
        if t.dtype not in ("real", "bool") or recurrent.shape(t) is None:
            diags.append(_fail(f"graph {'input' if t in graph.inputs else 'output'} '{t.name}' is "
                               f"{t.dtype}{list(t.shape)} (only static real/bool tensors map to TOSA)", _span(t)))
    for name in getattr(graph, "updates", None) or {}:
        diags.append(_fail(f"the graph updates variable '{name}' (stateful graphs cannot be exported)",
                           _span(graph.tensor(name))))
    for op, ok, reason in coverage(graph):
        if not ok and not (dynamic and reason.startswith(("dynamic shape", "an attribute given by a dynamic"))):
            diags.append(_fail(f"operation '{op.op}' ({op.label}) is not legalized to TOSA: {reason}", _span(op)))
    return diags


def _dynamic_input(t: Tensor) -> Diagnostic:
    """E0750 at a graph input with dynamic extents (issue 25, item 5): the TOSA MLIR is written with static
    shapes (the operations are legalized for static shapes: transposes, reshape targets, paddings and
    constants are computed from them; TOSA 1.0's `?` dimensions are not written), so the fix is to give the
    extents sizes."""
    names = [str(sym) for _, sym in extent_symbols(t)]
    bounds = t.bounds or (None,) * t.rank
    sizes = {str(sym): bounds[k] for k, sym in extent_symbols(t)}
    fixed = ", ".join(str(bounds[k]) if d is None and bounds[k] is not None else "?" if d is None else str(d)
                      for k, d in enumerate(t.shape))
    listed = ", ".join(f"'{n}'" for n in names) or "dynamic extents"
    attribs = " ".join(f"--attrib {n}={sizes[n] if sizes.get(n) is not None else 'VALUE'}" for n in names)
    return Diagnostic(
        code="E0750", message=f"graph input '{t.name}' ({t.declared or t.dtype}) has the dynamic extent"
        f"{'s' if len(names) != 1 else ''} {listed}; TOSA MLIR is exported with static shapes",
        span=_span(t) or Span("<graph>", 1, 1, 1, 1),
        hint=f"give the sizes: declare it with fixed extents (`{t.dtype}[{fixed}]`), or make "
             f"{'them graph attributes' if len(names) != 1 else 'it a graph attribute'} (`@attrib`) and export "
             f"with {attribs}; the numpy and iree backends run it at any size")


def to_mlir(graph: Graph, variables: dict[str, np.ndarray] | None = None, *, inline_constants: bool = False) -> str:
    """TOSA 1.0 MLIR (generic form) of ``graph``; ``variables`` by name (default: the model's files).
    The graph is written as one simplified program (skriptnd.tosa.program.build.graph_program: constants folded,
    filters re-laid out, inverse transpose pairs cancelled), as the iree backend compiles it.
    Large constants are ``dense_resource`` blobs unless ``inline_constants``.
    Raises :class:`DiagnosticError` when the graph cannot be exported."""
    diags = check_exportable(graph)
    if diags:
        raise DiagnosticError(diags)
    if variables is None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    program = graph_program(graph, variables)  # the simplified program the iree backend compiles
    if program is not None:
        inputs = [(tuple(int(d) for d in t.shape), np.dtype(np.bool_ if t.dtype == "bool" else np.float32))
                  for t in graph.inputs]
        try:
            return program_to_mlir(program, inputs, inline_constants=inline_constants,
                                   header=f"// TOSA 1.0 export of graph {graph.name} (skriptnd)")
        except NotCompilable:
            pass
    return _to_mlir_by_operation(graph, variables, inline_constants)


def _to_mlir_by_operation(graph: Graph, variables: dict[str, np.ndarray], inline_constants: bool) -> str:
    """The graph written operation by operation, each legalized subgraph as it is (with its own layout
    transposes): for what :func:`skriptnd.tosa.program.build.graph_program` does not take."""
    lines: list[str] = []
    ssa: dict[int, str] = {}  # id(tensor) -> SSA name
    vals: dict[int, np.ndarray] = {}  # id(tensor) -> value (for types)
    counter = [0]
    constants = Constants(inline_constants)

    def fresh() -> str:
        counter[0] += 1
        return f"%{counter[0] - 1}"

    def emit_const(a: np.ndarray, hint: str = "const") -> str:
        name = fresh()
        lines.append("    " + constants.line(name, a, hint))
        return name

    def value_of(t: Tensor) -> str:
        if id(t) in ssa:
            return ssa[id(t)]
        a = graph_constant(t, variables)
        ssa[id(t)], vals[id(t)] = emit_const(a, t.name), a
        return ssa[id(t)]

    args = []
    for i, t in enumerate(graph.inputs):
        ssa[id(t)] = f"%arg{i}"
        vals[id(t)] = np.ones([int(d) for d in t.shape], np.bool_ if t.dtype == "bool" else np.float32)
        args.append(f"%arg{i}: {tensor_type(vals[id(t)])}")

    recurrent = RecurrentLegalizer()
    for op in graph.operations:
        sg = recurrent(op) or legalize(op)[0]
        assert sg is not None
        env: dict[str, str] = {}
        nv: dict[str, np.ndarray] = {}
        for names, t in zip(sg.inputs, op.inputs, strict=False):
            if names is None or t is None:
                continue
            for n, tt in zip(names, t, strict=True) if isinstance(names, list) else [(names, t)]:
                env[n] = value_of(tt)
                nv[n] = vals[id(tt)]
        for n, a in sg.constants.items():
            env[n], nv[n] = emit_const(a, n), a
        for o in sg.ops:
            operands = [nv[i] for i in o.inputs]
            if o.name == ITEM:  # a result of a WHILE_LOOP (its value: the operand list)
                index = int(o.attrs["index"])
                env[o.output], nv[o.output] = f"{env[o.inputs[0]]}#{index}", operands[0][index]
                continue
            if o.name == "WHILE_LOOP":
                name = fresh()
                lines.extend(mlir_regions.while_loop(name, [env[i] for i in o.inputs], operands, o.attrs, fresh,
                                                     constants.line, "    "))
                env[o.output], nv[o.output] = name, operands  # type: ignore[assignment]
                continue
            with np.errstate(all="ignore"):
                result = np.asarray(apply(o.name, operands, o.attrs))
            in_types = ", ".join(f"!tosa.shape<{nv[i].size}>" if nv[i].dtype == np.int64 else tensor_type(nv[i])
                                 for i in o.inputs)
            name = fresh()
            lines.append(f'    {name} = "tosa.{o.name.lower()}"({", ".join(env[i] for i in o.inputs)})'
                         f"{attributes(o.name, o.attrs)} : ({in_types}) -> {tensor_type(result)}")
            env[o.output], nv[o.output] = name, result
        for names, t in zip(sg.outputs, op.outputs, strict=True):  # a pack output: a list of names
            for n, tt in zip(names, t, strict=True) if isinstance(names, list) else [(names, t)]:
                ssa[id(tt)], vals[id(tt)] = env[n], nv[n]

    results = []
    for t in graph.outputs:
        if t.kind in ("input", "variable", "constant"):  # a function result must be an operation's value
            src = value_of(t)
            name = fresh()
            lines.append(f'    {name} = "tosa.identity"({src}) : ({tensor_type(vals[id(t)])}) -> {tensor_type(vals[id(t)])}')
            results.append((name, vals[id(t)]))
        else:
            results.append((ssa[id(t)], vals[id(t)]))
    res_types = ", ".join(tensor_type(a) for _, a in results)
    head = (f'  "func.func"() <{{function_type = ({", ".join(tensor_type(vals[id(t)]) for t in graph.inputs)}) -> '
            f'({res_types}), sym_name = "main"}}> ({{\n  ^bb0({", ".join(args)}):')
    ret = f'    "func.return"({", ".join(n for n, _ in results)}) : ({res_types}) -> ()'
    text = "\n".join([f'// TOSA 1.0 export of graph {graph.name} (skriptnd)', '"builtin.module"() ({', head,
                      *lines, ret, "  }) : () -> ()", "}) : () -> ()", ""])
    return constants.module(text)


def tosa_opt_path() -> str | None:
    """The tosa-tools ``tosa-opt`` (next to this interpreter first, then on PATH)."""
    here = Path(sys.executable).parent / "tosa-opt"
    return str(here) if here.is_file() else shutil.which("tosa-opt")


def to_flatbuffer(mlir: str, profile: str = "pro_fp", timeout: float = 300.0) -> bytes:
    """Validate ``mlir`` (TOSA 1.0, ``profile``) and serialize it with ``tosa-opt``; :class:`ExportError`
    carries tosa-opt's message when it is missing or refuses the module."""
    tool = tosa_opt_path()
    if tool is None:
        raise ExportError("tosa-opt not found (pip install --no-deps tosa-tools)")
    with tempfile.TemporaryDirectory(prefix="sknd_tosa_") as tmp:
        src, fb = os.path.join(tmp, "model.mlir"), os.path.join(tmp, "model.tosa")
        Path(src).write_text(mlir, encoding="utf-8")
        done = subprocess.run([tool, src, f"--tosa-attach-target=profiles={profile}", "--tosa-validate",
                               "--tosa-serialize", f"--tosa-flatbuffer-filename={fb}", "-o", os.devnull],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not os.path.isfile(fb):
            raise ExportError(f"tosa-opt rejected the module:\n{done.stderr.strip()}")
        return Path(fb).read_bytes()
