"""How TOSA attributes and values are encoded as SPIR-V operands (``tosa-1.0-spirv-extinst.txt``).

The grammar JSON (``tables.TOSA``) gives each instruction's operands in order; the spec text adds what the JSON
does not carry: attribute operands come first and are constants, of the types listed here, and the values of
the enumerated types (its "Enumerated types" section). ``shape_t`` operands are rank-1 tensors of 32-bit
integers; TOSA integer types are ``OpTypeInt N 0`` (i48_t is ``OpTypeInt 64 0``), so signed values are stored
as their two's complement bits.
"""

from __future__ import annotations

import numpy as np

#: attribute operand -> how its constant is typed: "u32" (OpTypeInt 32 0 scalar), "bool" (OpTypeBool),
#: "i32s" (rank-1 tensor of OpTypeInt 32 0), "elem" (a scalar of the input's element type, CLAMP's bounds),
#: or the name of an enumerated type (a u32 scalar holding its value).
ATTRIBUTES: dict[str, str] = {
    "axis": "u32", "nan_mode": "nan_propagation_mode_t", "acc_type": "acc_type_t", "mode": "resize_mode_t",
    "rounding_mode": "rounding_mode_t", "local_bound": "bool", "round": "bool", "inverse": "bool",
    "scale32": "bool", "per_channel": "bool", "input_unsigned": "bool", "output_unsigned": "bool",
    "kernel": "i32s", "stride": "i32s", "pad": "i32s", "dilation": "i32s", "out_pad": "i32s", "perms": "i32s",
    "min_val": "elem", "max_val": "elem",
}

#: the enumerated types of the instruction set (name -> value), as the interpreter spells the names
ENUMS: dict[str, dict[str, int]] = {
    "resize_mode_t": {"NEAREST_NEIGHBOR": 1, "BILINEAR": 2},
    "acc_type_t": {"int32": 1, "fp16": 2, "fp32": 3, "int48": 4},
    "nan_propagation_mode_t": {"PROPAGATE": 1, "IGNORE": 2},
    "rounding_mode_t": {"SINGLE_ROUND": 1, "INEXACT_ROUND": 2, "DOUBLE_ROUND": 3},
}

#: input operands of type shape_t (rank-1 32-bit integer tensors in SPIR-V, int64 arrays in the interpreter)
SHAPE_OPERANDS: dict[str, frozenset[str]] = {
    "PAD": frozenset({"padding"}), "RESHAPE": frozenset({"shape"}), "SLICE": frozenset({"start", "size"}),
    "TILE": frozenset({"multiples"}), "RESIZE": frozenset({"scale", "offset", "border"}),
}

#: attributes that the result type carries instead of an operand
RESULT_TYPED = {"CAST": "output_dtype", "RESCALE": "output_dtype"}

#: numpy element type -> (kind, bit width) of its SPIR-V scalar type; int64 is TOSA's i48_t
ELEMENTS: dict[np.dtype, tuple[str, int]] = {
    np.dtype(np.bool_): ("bool", 1), np.dtype(np.int8): ("int", 8), np.dtype(np.int16): ("int", 16),
    np.dtype(np.int32): ("int", 32), np.dtype(np.int64): ("int", 64), np.dtype(np.float32): ("float", 32),
}
NUMPY = {v: k for k, v in ELEMENTS.items()}
#: the interpreter's type names (CAST/RESCALE output_dtype) of each element type
TYPE_NAMES = {np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
              np.dtype(np.int32): "int32", np.dtype(np.int64): "int48", np.dtype(np.float32): "fp32"}


def default_attribute(op: str, name: str, input_dtype: np.dtype | None) -> object:
    """The value of an attribute the program leaves out (TOSA's default)."""
    if name == "nan_mode":
        return "PROPAGATE"
    if name in ("local_bound", "round", "inverse"):
        return False
    if name == "acc_type":
        return {np.dtype(np.int8): "int32", np.dtype(np.int16): "int48"}.get(np.dtype(input_dtype), "fp32")
    raise KeyError(f"{op} needs attribute {name}")
