"""Reading and writing tensor data files (NNEF tensor binary files, `.dat`)."""

from __future__ import annotations

from skriptnd.io import tensor_file
from skriptnd.io.tensor_file import *  # noqa: F403  (the public names are tensor_file's __all__)

__all__ = tensor_file.__all__
