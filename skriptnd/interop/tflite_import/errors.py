"""Diagnostics of the TFLite importer (codes E0860–E0869).

A .tflite file is binary, so a diagnostic points at the file (line 1) and names the operator (its index,
builtin name and first output tensor) or the tensor in the message. Converters and the reader raise
`ImportProblem`; the importer turns it into a located diagnostic.
"""

from __future__ import annotations

from skriptnd.diagnostics import register_codes
from skriptnd.interop.import_problem import ImportProblem, diagnostic

CODES = {
    "E0860": "cannot read the TFLite model",
    "E0861": "corrupt TFLite file",
    "E0862": "unsupported TFLite operators",
    "E0863": "unsupported TFLite operator options or inputs",
    "E0864": "unsupported TFLite data type or quantization",
    "E0865": "unsupported TFLite model structure",
}
register_codes(CODES)

__all__ = ["CODES", "ImportProblem", "diagnostic"]
