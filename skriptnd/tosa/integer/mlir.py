"""The MLIR writer of the integer TOSA graph (:class:`skriptnd.tosa.integer.lower.IntegerGraph`): TOSA 1.0
generic form with integer element types (int48 constants in decimal), RESCALE and integer CLAMP attributes,
and the tosa-opt target a graph needs (``sknd export`` of a graph with @quantize entries).

Apart from the lowering, which builds the integer graph and runs it in numpy without writing any text; the
pieces shared with the float writers come from :mod:`skriptnd.tosa.mlir.text`.
"""

from __future__ import annotations

import numpy as np

from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import NUMPY_INT
from skriptnd.tosa.integer.lower import IntegerGraph, lower_quantized
from skriptnd.tosa.legalize import TosaOp
from skriptnd.tosa.mlir.text import Constants, attributes
from skriptnd.tosa.ops.invoke import apply

_INT_ELEM = {np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
             np.dtype(np.int64): "i48", np.dtype(np.float32): "f32", np.dtype(np.bool_): "i1"}


def _type(a: np.ndarray) -> str:
    dims = "".join(f"{int(d)}x" for d in a.shape)
    return f"tensor<{dims}{_INT_ELEM[a.dtype]}>"


def _attrs(o: TosaOp, operands: list[np.ndarray]) -> str:
    attrs = {k: v for k, v in o.attrs.items() if k != "output_dtype"}
    if o.name == "CLAMP" and operands[0].dtype.kind == "i":
        elem = _INT_ELEM[operands[0].dtype]
        extra = [f"max_val = {int(attrs.pop('max_val'))} : {elem}", f"min_val = {int(attrs.pop('min_val'))} : {elem}"]
    elif o.name == "RESCALE":
        extra = [f"input_unsigned = {str(bool(attrs.pop('input_unsigned'))).lower()}",
                 f"output_unsigned = {str(bool(attrs.pop('output_unsigned'))).lower()}",
                 f"per_channel = {str(bool(attrs.pop('per_channel'))).lower()}",
                 f"rounding_mode = #tosa.rounding_mode<{attrs.pop('rounding_mode')}>",
                 f"scale32 = {str(bool(attrs.pop('scale32'))).lower()}"]
    else:
        extra = []
    if attrs.get("acc_type") in ("int32", "int48"):
        extra.append(f"acc_type = {'i32' if attrs.pop('acc_type') == 'int32' else 'i48'}")
    text = attributes(o.name, attrs)
    if not extra:
        return text
    inner = [text[3:-2]] if text else []
    return " <{" + ", ".join(inner + extra) + "}>"


def to_mlir(ig: IntegerGraph, outputs: list[str] | None = None) -> str:
    """TOSA 1.0 MLIR (generic form) of the integer graph, like :func:`skriptnd.tosa.mlir.export.to_mlir`:
    one ``func.func @main`` whose arguments are the TOSA graph's inputs (int8 for quantized graph inputs)
    and whose results are its outputs (the graph outputs, or the TOSA values ``outputs``)."""
    sg = ig.subgraph(outputs)
    lines: list[str] = []
    ssa: dict[str, str] = {}
    vals: dict[str, np.ndarray] = {}
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"%{counter[0] - 1}"

    args = []
    for i, (name, t, qp) in enumerate(ig.inputs):
        ssa[name] = f"%arg{i}"
        vals[name] = np.zeros([int(d) for d in t.shape], np.float32 if qp is None else NUMPY_INT[qp.dtype])
        args.append(f"%arg{i}: {_type(vals[name])}")
    constants = Constants(inline=True)
    for n, a in sg.constants.items():
        name = fresh()
        if a.dtype == np.int64 and n not in ig.shapes:  # int48: decimal (MLIR stores i48 in 6 bytes)
            body = np.array2string(a, separator=", ", threshold=a.size + 1, max_line_width=1 << 30)
            lines.append(f'    {name} = "tosa.const"() <{{values = dense<{body}> : {_type(a)}}}> : () -> {_type(a)}')
        else:  # shape operands, and inline dense literals (the integer graph is small)
            lines.append("    " + constants.line(name, a, n))
        ssa[n], vals[n] = name, a
    for o in sg.ops:
        operands = [vals[i] for i in o.inputs]
        with np.errstate(all="ignore"):
            result = np.asarray(apply(o.name, operands, o.attrs))
        in_types = ", ".join(f"!tosa.shape<{a.size}>" if i in ig.shapes else _type(a)
                             for i, a in zip(o.inputs, operands, strict=True))
        name = fresh()
        lines.append(f'    {name} = "tosa.{o.name.lower()}"({", ".join(ssa[i] for i in o.inputs)})'
                     f"{_attrs(o, operands)} : ({in_types}) -> {_type(result)}")
        ssa[o.output], vals[o.output] = name, result
    results = [(ssa[n], vals[n]) for n in sg.outputs]
    res_types = ", ".join(_type(a) for _, a in results)
    in_types = ", ".join(_type(vals[n]) for n, _, _ in ig.inputs)
    head = (f'  "func.func"() <{{function_type = ({in_types}) -> ({res_types}), sym_name = "main"}}> ({{\n'
            f'  ^bb0({", ".join(args)}):')
    ret = f'    "func.return"({", ".join(n for n, _ in results)}) : ({res_types}) -> ()'
    return "\n".join([f"// TOSA 1.0 integer export of graph {ig.name} (skriptnd, @quantize)", '"builtin.module"() ({',
                      head, *lines, ret, "  }) : () -> ()", "}) : () -> ()", ""])


def export_mlir(graph: Graph) -> tuple[str, str]:
    """``(MLIR, tosa-opt target)`` of ``graph``'s integer TOSA graph (``sknd export`` for a graph with
    @quantize entries): the profile ``pro_int``, plus ``pro_fp`` when fp32 operations remain (e.g. a final
    softmax), and ``extensions=int16`` for int16 activations (the ``profile`` of
    :func:`skriptnd.tosa.mlir.export.to_flatbuffer`, which passes it to ``--tosa-attach-target``)."""
    ig = lower_quantized(graph)
    mlir = to_mlir(ig)
    target = "pro_int,pro_fp" if "f32>" in mlir else "pro_int"
    if "i16>" in mlir:  # int16 x int8 convolutions are TOSA's EXT-INT16
        target += " extensions=int16"
    return mlir, target
