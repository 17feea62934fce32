"""Other operators: DEQUANTIZE of float16 constants (weights LiteRT stores in half precision) -> the constant
as a real; the int8 forms belong to the quantized import."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


@converter("DEQUANTIZE", target="a real constant (float16 weights)", caveats="only float16 inputs so far")
def _dequantize(ctx: Context, op: Operator) -> None:
    x = ctx.input(0)
    if ctx.tensor(x).type != 1:
        raise ImportProblem("E0854", f"{ctx.here}: DEQUANTIZE of {ctx.tensor(x).type_name} is not supported yet "
                            "(float16 only)")
    value = ctx.const(x)
    if value is None:
        ctx.emit("math.iden", [ctx.arg(x)])
        return
    ctx.alias(op.outputs[0], ctx._declare(op.outputs[0], value))
