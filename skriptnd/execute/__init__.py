"""Execution of composed graphs."""

from skriptnd.execute import intrinsics, kernels, pointwise, recurrent  # noqa: F401  (register the native and fast kernels)
from skriptnd.execute.executor import KERNELS, Executor, kernel, run

__all__ = ["KERNELS", "Executor", "kernel", "run"]
