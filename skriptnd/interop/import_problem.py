"""What every importer raises for a problem in the file it reads (ImportProblem) and how that becomes a
diagnostic: located at the model file, which has no source line to point at. Each importer keeps its own
codes (onnx_import.errors, tflite_import.errors) and re-exports these."""

from __future__ import annotations

from pathlib import Path

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import Span


class ImportProblem(Exception):
    """A problem with the file or one of its operators/nodes; becomes a diagnostic located at the model file."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def diagnostic(code: str, message: str, source: str | Path, hint: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, message=message, span=Span(str(source), 1, 1, 1, 2), hint=hint)
