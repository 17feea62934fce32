"""skriptnd: a toolchain for SkriptND, the language of NNEF 2.0.

    >>> import skriptnd
    >>> skriptnd.infer("linalg.matmul", {}, [[2, 3], [3, 4]]).outputs[0].shape
    (2, 4)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skriptnd.version import __version__

__all__ = ["infer", "InferResult", "TensorType", "load", "Model", "import_model", "__version__"]

if TYPE_CHECKING:
    from skriptnd.api import InferResult, TensorType, infer
    from skriptnd.interop.onnx_import import import_model
    from skriptnd.model import Model, load


def __getattr__(name: str) -> Any:
    """Lazy: `import skriptnd` stays cheap for the CLI."""
    if name in ("infer", "InferResult", "TensorType"):
        from skriptnd import api

        return getattr(api, name)
    if name in ("load", "Model"):
        from skriptnd import model

        return getattr(model, name)
    if name == "import_model":
        from skriptnd.interop.onnx_import import import_model

        return import_model
    raise AttributeError(name)
