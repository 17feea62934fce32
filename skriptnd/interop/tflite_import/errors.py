"""Diagnostics of the TFLite importer (codes E0860–E0869).

A .tflite file is binary, so a diagnostic points at the file (line 1) and names the operator (its index,
builtin name and first output tensor) or the tensor in the message. Converters and the reader raise
`ImportProblem`; the importer turns it into a located diagnostic.
"""

from __future__ import annotations

from pathlib import Path

from skriptnd.diagnostics import Diagnostic, register_codes
from skriptnd.source import Span

CODES = {
    "E0860": "cannot read the TFLite model",
    "E0861": "corrupt TFLite file",
    "E0862": "unsupported TFLite operators",
    "E0863": "unsupported TFLite operator options or inputs",
    "E0864": "unsupported TFLite data type",
    "E0865": "unsupported TFLite model structure",
}
register_codes(CODES)


class ImportProblem(Exception):
    """A problem with the file or one operator; becomes a diagnostic located at the model file."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def diagnostic(code: str, message: str, source: str | Path, hint: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, message=message, span=Span(str(source), 1, 1, 1, 2), hint=hint)
