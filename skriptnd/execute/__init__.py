"""Execution of composed graphs."""

from . import intrinsics, kernels, pointwise, recurrent  # noqa: F401  (register the native and fast kernels)
from .executor import KERNELS, Executor, kernel, run

__all__ = ["KERNELS", "Executor", "kernel", "run"]
