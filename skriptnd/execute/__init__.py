"""Execution of composed graphs."""

from .executor import KERNELS, Executor, kernel, run

__all__ = ["KERNELS", "Executor", "kernel", "run"]
