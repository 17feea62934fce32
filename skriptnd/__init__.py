"""skriptnd: a toolchain for SkriptND, the language of NNEF 2.0.

    >>> import skriptnd
    >>> skriptnd.infer("linalg.matmul", {}, [[2, 3], [3, 4]]).outputs[0].shape
    (2, 4)

The face of the package: ``load`` a model folder, ``compose`` it (``Model.compose``), ``run`` the graph on a
backend (``skriptnd.run(graph, inputs, backend="numpy")``), ``infer`` an operator's output types,
``import_model`` an ONNX or TFLite model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from skriptnd.version import __version__

__all__ = ["infer", "InferResult", "TensorType", "load", "Model", "run", "import_model", "__version__"]

if TYPE_CHECKING:
    from skriptnd.api import InferResult, TensorType, infer
    from skriptnd.backends.registry import run
    from skriptnd.interop.formats import import_model
    from skriptnd.model import Model, load

#: Where each name of the face lives. Resolved on first use (PEP 562), not at import: every
#: ``import skriptnd.x`` runs this module first, and importing the backends here would cost the CLI and the
#: language server seconds at every start.
_LAZY = {"infer": "skriptnd.api", "InferResult": "skriptnd.api", "TensorType": "skriptnd.api",
         "load": "skriptnd.model", "Model": "skriptnd.model", "run": "skriptnd.backends",
         "import_model": "skriptnd.interop.formats"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module), name)
