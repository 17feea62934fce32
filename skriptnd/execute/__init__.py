"""Execution of composed graphs."""

from . import intrinsics, kernels, recurrent  # noqa: F401  (register the native and the fast stdlib kernels)
from .executor import KERNELS, Executor, kernel, run

__all__ = ["KERNELS", "Executor", "kernel", "run"]
