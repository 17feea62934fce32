"""The TOSA operator set: numpy implementations of TOSA operators with exact integer semantics.

``OPS`` maps TOSA 1.0 operator names to functions. Inputs are positional, in TOSA 1.0 operand order
(constant operands such as MUL ``shift``, NEGATE zero points, TABLE ``table``, RESCALE
``multiplier``/``shift``/zero points, PAD ``padding``/``pad_const`` included); attributes are keywords;
every operator takes ``version="1.0"`` (default) or ``"0.30"``. ERROR_IF conditions raise
:class:`TosaError`, failed REQUIREs raise :class:`TosaUnpredictable`.

Covered: the 66 operators of the TOSA 1.0 SPIR-V instruction set (element-wise, reduction, data-layout,
gather/scatter, type-conversion, the tensor operators MATMUL, CONV2D, DEPTHWISE_CONV2D, CONV3D,
TRANSPOSE_CONV2D, AVG_POOL2D, MAX_POOL2D, FFT2D, RFFT2D, and RESIZE, whose TOSA 0.30 form with
``output_size``/``stride``/``offset``/``border``/``shift`` attributes is taken with ``version="0.30"``),
the data nodes CONST and IDENTITY, the TOSA 0.30 FULLY_CONNECTED (``version="0.30"``), the control flow
operators COND_IF and WHILE_LOOP (regions are :class:`control_flow.Graph` objects: declared signatures
plus a callable or a list of :class:`control_flow.Node` s), the TOSA 1.0 variable operators VARIABLE,
VARIABLE_WRITE, VARIABLE_READ (persistent state in a :class:`variable.VariableStore` passed as ``store=``)
and CUSTOM (no defined semantics: a :class:`TosaError` unless an ``implementation`` callable is given).
The table is built here from the operator families (one module each); no family imports it, and control
flow gets it handed in (:func:`control_flow.bind`). Consumers inside ``tosa`` use :mod:`.invoke`.
Not covered: fp8 types, TOSA 1.0 levels other than MAX_NESTING (no MAX_RANK/MAX_KERNEL limits), the
shape operators of later TOSA versions.
"""

from __future__ import annotations

from collections.abc import Callable

from skriptnd.tosa.ops import (
    control_flow,
    data_layout,
    elementwise,
    quantization,
    reduction,
    resize_fft,
    tensor_ops,
    variable,
)
from skriptnd.tosa.ops.dtypes import BF16Array, bf16
from skriptnd.tosa.ops.errors import TosaError, TosaUnpredictable

__all__ = ["OPS", "TosaError", "TosaUnpredictable", "BF16Array", "bf16", "run"]

OPS: dict[str, Callable[..., object]] = {
    # activation functions
    "CLAMP": elementwise.clamp,
    "ERF": elementwise.erf,
    "SIGMOID": elementwise.sigmoid,
    "TANH": elementwise.tanh,
    # elementwise binary
    "ADD": elementwise.add,
    "ARITHMETIC_RIGHT_SHIFT": elementwise.arithmetic_right_shift,
    "BITWISE_AND": elementwise.bitwise_and,
    "BITWISE_OR": elementwise.bitwise_or,
    "BITWISE_XOR": elementwise.bitwise_xor,
    "INTDIV": elementwise.intdiv,
    "LOGICAL_AND": elementwise.logical_and,
    "LOGICAL_LEFT_SHIFT": elementwise.logical_left_shift,
    "LOGICAL_RIGHT_SHIFT": elementwise.logical_right_shift,
    "LOGICAL_OR": elementwise.logical_or,
    "LOGICAL_XOR": elementwise.logical_xor,
    "MAXIMUM": elementwise.maximum,
    "MINIMUM": elementwise.minimum,
    "MUL": elementwise.mul,
    "POW": elementwise.pow,
    "SUB": elementwise.sub,
    "TABLE": elementwise.table,
    # elementwise unary
    "ABS": elementwise.abs,
    "BITWISE_NOT": elementwise.bitwise_not,
    "CEIL": elementwise.ceil,
    "CLZ": elementwise.clz,
    "COS": elementwise.cos,
    "EXP": elementwise.exp,
    "FLOOR": elementwise.floor,
    "LOG": elementwise.log,
    "LOGICAL_NOT": elementwise.logical_not,
    "NEGATE": elementwise.negate,
    "RECIPROCAL": elementwise.reciprocal,
    "RSQRT": elementwise.rsqrt,
    "SIN": elementwise.sin,
    # ternary, comparison
    "SELECT": elementwise.select,
    "EQUAL": elementwise.equal,
    "GREATER": elementwise.greater,
    "GREATER_EQUAL": elementwise.greater_equal,
    # reductions and ARGMAX
    "ARGMAX": reduction.argmax,
    "REDUCE_ALL": reduction.reduce_all,
    "REDUCE_ANY": reduction.reduce_any,
    "REDUCE_MAX": reduction.reduce_max,
    "REDUCE_MIN": reduction.reduce_min,
    "REDUCE_PRODUCT": reduction.reduce_product,
    "REDUCE_SUM": reduction.reduce_sum,
    # data layout, scatter/gather, data nodes
    "CONCAT": data_layout.concat,
    "PAD": data_layout.pad,
    "RESHAPE": data_layout.reshape,
    "REVERSE": data_layout.reverse,
    "SLICE": data_layout.slice,
    "TILE": data_layout.tile,
    "TRANSPOSE": data_layout.transpose,
    "GATHER": data_layout.gather,
    "SCATTER": data_layout.scatter,
    "IDENTITY": data_layout.identity,
    "CONST": data_layout.const,
    # type conversion
    "CAST": quantization.cast,
    "RESCALE": quantization.rescale,
    # tensor operators
    "MATMUL": tensor_ops.matmul,
    "CONV2D": tensor_ops.conv2d,
    "DEPTHWISE_CONV2D": tensor_ops.depthwise_conv2d,
    "CONV3D": tensor_ops.conv3d,
    "TRANSPOSE_CONV2D": tensor_ops.transpose_conv2d,
    "AVG_POOL2D": tensor_ops.avg_pool2d,
    "MAX_POOL2D": tensor_ops.max_pool2d,
    "FFT2D": resize_fft.fft2d,
    "RFFT2D": resize_fft.rfft2d,
    "FULLY_CONNECTED": resize_fft.fully_connected,  # TOSA 0.30 only (version="0.30")
    # image
    "RESIZE": resize_fft.resize,
    # control flow, custom
    "CUSTOM": control_flow.custom,
    # variables (TOSA 1.0 EXT-VARIABLE; state in a variable.VariableStore passed as store=)
    "VARIABLE": variable.variable,
    "VARIABLE_WRITE": variable.variable_write,
    "VARIABLE_READ": variable.variable_read,
}
# COND_IF and WHILE_LOOP run their regions on this very table: handed in, not imported by control_flow
OPS.update(control_flow.bind(OPS))


def run(op_name: str, *inputs: object, **attributes: object) -> object:
    """Run the operator named ``op_name`` (a TOSA 1.0 name) on ``inputs`` with ``attributes``."""
    try:
        fn = OPS[op_name]
    except KeyError:
        raise KeyError(f"unknown or unimplemented TOSA operator {op_name!r}") from None
    return fn(*inputs, **attributes)
