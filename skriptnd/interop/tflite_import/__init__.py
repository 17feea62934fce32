"""Import TFLite (LiteRT) models as SkriptND model folders (`sknd import MODEL.tflite -o OUT`).

`reader` parses the FlatBuffer (bounds-checked, no TensorFlow, no flatbuffers runtime needed), `importer`
walks the main subgraph's operators through the converter `registry` (one module per operator family in
`ops/`), and the folder is written by `skriptnd.interop.writer` like every other importer's.
"""

from skriptnd.interop.tflite_import import errors  # noqa: F401 - registers the E085x codes
from skriptnd.interop.tflite_import.importer import import_tflite

__all__ = ["import_tflite"]
