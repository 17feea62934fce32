"""Converters, one module per NNEF 1.x operation family; each registers itself in `..registry` on import.

This package is the list of families (as onnx's `reference/ops/_op_list.py`): importing it fills the registry.
"""

from skriptnd.interop.nnef_import.ops import (  # noqa: F401 - each family registers its converters
    activation,
    conv,
    elementwise,
    image,
    io,
    layout,
    linalg,
    norm,
    pool,
    quant,
    reduce,
)
