"""Shared by the kernel tests (test_pointwise.py, test_recurrent.py): a graph run with the default
kernels, counting the calls of some of them that did not decline, and the same graph run on the
operators' own definitions (`kernels_for("lower")`) as the reference."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

import skriptnd
from skriptnd.backends import kernels_for
from skriptnd.compose.ir import Graph
from skriptnd.execute import KERNELS, Executor


def load_source(folder: Path, source: str) -> skriptnd.Model:
    """The model of one main.sknd holding ``source``, written to ``folder``."""
    (folder / "main.sknd").write_text(source)
    return skriptnd.load(folder)


class CountingKernels(dict):
    """The default kernels, counting the calls of the ``names``d kernels that did not decline."""

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__(KERNELS)
        self.calls: dict[str, int] = {}
        for name in names:
            self[name] = self._counted(name, KERNELS[name])

    def _counted(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(op: Any, args: list[Any]) -> Any:
            result = fn(op, args)
            if result is not NotImplemented:
                self.calls[name] = self.calls.get(name, 0) + 1
            return result

        return run


def run_both(graph: Graph, inputs: dict[str, np.ndarray], names: Iterable[str],
             variables: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]]:
    """(outputs with the default kernels, outputs of the @compose / @lower reference, the calls of the
    ``names``d kernels that did not decline)."""
    counting = CountingKernels(names)
    fast = Executor(graph, variables or {}, kernels=counting).run(inputs)
    reference = Executor(graph, variables or {}, kernels=kernels_for("lower")[0], optimize=False).run(inputs)
    return fast, reference, counting.calls
