"""Diagnostics of the ONNX importer (codes E0800–E0829).

An ONNX file is binary, so a diagnostic cannot point at a line: it points at the .onnx file (line 1) and
names the node (its name and op type) in the message. Converters raise `ImportProblem`; the importer
turns it into a located diagnostic.
"""

from __future__ import annotations

from skriptnd.diagnostics import register_codes
from skriptnd.interop.import_problem import ImportProblem, diagnostic

CODES = {
    "E0800": "the ONNX importer needs the onnx package",
    "E0801": "cannot read the ONNX model",
    "E0802": "missing external data of an ONNX model",
    "E0803": "invalid ONNX model",
    "E0804": "unsupported ONNX opset",
    "E0805": "ONNX shape inference failed",
    "E0806": "unsupported ONNX operators",
    "E0807": "unsupported ONNX attribute or input combination",
    "E0808": "a shape or value must be known at import time",
    "E0809": "bad --input-shape",
    "E0810": "unsupported ONNX data type",
}
register_codes(CODES)

__all__ = ["CODES", "ImportProblem", "diagnostic"]
