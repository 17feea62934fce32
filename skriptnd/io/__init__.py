"""Reading and writing tensor data files (NNEF tensor binary files, `.dat`)."""

from __future__ import annotations

from . import tensor_file
from .tensor_file import *  # noqa: F403  (the public names are tensor_file's __all__)

__all__ = tensor_file.__all__
