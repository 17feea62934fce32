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


def unsupported_message(found: dict[str, list[str]], unit: str) -> str:
    """One message for every unsupported operator type of a model: its count and the first few places
    (``found``: operator type -> the names of the ``unit``s, "node" or "operator", that use it), most used
    first, so a user sees at once how much of the model is missing."""
    parts = []
    for op, places in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(places[:5]) + (f", … ({len(places) - 5} more)" if len(places) > 5 else "")
        parts.append(f"{op} ×{len(places)} ({shown})")
    total = sum(len(v) for v in found.values())
    return (f"the model uses {len(found)} unsupported operator type{'s' if len(found) > 1 else ''} "
            f"({total} {unit}{'s' if total > 1 else ''}): " + "; ".join(parts))
