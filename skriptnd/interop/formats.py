"""`skriptnd.import_model`: one entry for every foreign format, picked by the file's content where it says.

A TFLite file carries the FlatBuffer identifier 'TFL3' at byte 4 (whatever its name); anything else is read
as ONNX (a path, or an onnx.ModelProto), whose importer gives its own diagnostics for a file that is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skriptnd.interop.onnx_import import import_model as import_onnx_model
from skriptnd.interop.tflite_import.importer import import_tflite, is_tflite

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import ModelProto


def import_model(src: str | Path | ModelProto, out_dir: str | Path, *,
                 input_shapes: Mapping[str, Sequence[int]] | None = None, fold_constants: bool = False) -> Path:
    """Import an ONNX model (a path or an onnx.ModelProto) or a TFLite model (a path) into the model folder
    `out_dir`; `input_shapes` and `fold_constants` apply to ONNX only (TFLite shapes are static).

    Raises skriptnd.diagnostics.DiagnosticError (nothing written) when the model cannot be imported."""
    if isinstance(src, str | Path) and is_tflite(Path(src)):
        if input_shapes or fold_constants:
            raise ValueError("input_shapes and fold_constants apply to ONNX models only")
        return import_tflite(src, out_dir).path
    return import_onnx_model(src, out_dir, input_shapes=input_shapes, fold_constants=fold_constants)
