"""Diagnostic codes of the NNEF 1.x importer (E0830-E0839) and the exception converters raise."""

from __future__ import annotations

from skriptnd.diagnostics import register_codes

register_codes({
    "E0830": "NNEF import needs the 'nnef' package",
    "E0831": "NNEF graph syntax error",
    "E0832": "unsupported NNEF operations",
    "E0833": "NNEF tensor file missing or corrupt",
    "E0834": "NNEF graph shapes cannot be inferred",
    "E0835": "NNEF attribute not expressible in SkriptND",
    "E0836": "NNEF model not found",
})


class ImportProblem(Exception):
    """Raised by a converter: `message` says what cannot be imported; the importer locates it in graph.nnef."""

    def __init__(self, message: str, *, op: str | None = None, tensor: str | None = None, code: str = "E0835"):
        super().__init__(message)
        self.message = message
        self.op = op
        self.tensor = tensor
        self.code = code
