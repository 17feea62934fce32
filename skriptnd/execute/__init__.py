"""Execution of composed graphs."""

from . import intrinsics  # noqa: F401  (registers the native kernels)
from .executor import KERNELS, Executor, kernel, run

__all__ = ["KERNELS", "Executor", "kernel", "run"]
