"""Converters, one module per TFLite operator family; each registers itself in `..registry` on import.

This package is the list of families: importing it fills the registry.
"""

from skriptnd.interop.tflite_import.ops import (  # noqa: F401 - each family registers its converters
    activation,
    control,
    conv,
    elementwise,
    image,
    linalg,
    misc,
    pool,
    recurrent,
    reduce,
    shape,
)
