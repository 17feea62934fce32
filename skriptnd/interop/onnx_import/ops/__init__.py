"""Converters, one module per ONNX operator family; each registers itself in `..registry` on import.

This package is the list of families (as onnx's `reference/ops/_op_list.py`): importing it fills the registry.
"""

from skriptnd.interop.onnx_import.ops import (  # noqa: F401 - each family registers its converters
    activation,
    control,
    conv,
    elementwise,
    image,
    index,
    linalg,
    misc,
    norm,
    pool,
    quant,
    recurrent,
    reduce,
    shape,
)
