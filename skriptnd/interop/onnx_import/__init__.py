"""Import ONNX models as SkriptND model folders (`sknd import MODEL.onnx -o OUT`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skriptnd.interop.onnx_import import errors  # noqa: F401 - registers the E08xx codes
from skriptnd.interop.onnx_import.importer import import_onnx

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import ModelProto

__all__ = ["import_model", "import_onnx"]


def import_model(src: str | Path | ModelProto, out_dir: str | Path, *,
                 input_shapes: Mapping[str, Sequence[int]] | None = None, fold_constants: bool = False) -> Path:
    """Import an ONNX model (a path or an onnx.ModelProto) into the model folder `out_dir`.

    Raises skriptnd.diagnostics.DiagnosticError (nothing written) when the model cannot be imported."""
    return import_onnx(src, out_dir, input_shapes=input_shapes, fold_constants=fold_constants).path
