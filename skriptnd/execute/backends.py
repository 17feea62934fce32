"""Which implementation runs the standard operators: `sknd run --via kernels|lower|tosa`.

- kernels (default): the fast numpy kernels (skriptnd.execute.kernels), else the @lower plans;
- lower: the operators' own @lower formulas (the reference semantics), kernels only for intrinsics;
- tosa: each operation's TOSA subgraph (skriptnd.tosa.legalize) run on the TOSA numpy kernels;
  an operation without a mapping falls back to its @lower plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..semantics.intrinsics import STDLIB_INTRINSICS
from .executor import KERNELS, Kernel

VIAS = ("kernels", "lower", "tosa")


def _intrinsics() -> dict[str, Kernel]:
    return {name: fn for name, fn in KERNELS.items() if name in STDLIB_INTRINSICS}


def _tosa_kernel(cache: dict[int, Any]) -> Kernel:
    def run(op: Any, args: list[Any]) -> Any:
        from ..tosa.legalize import legalize, run_subgraph

        entry = cache.get(id(op))
        if entry is None or entry[0] is not op:
            entry = (op, legalize(op)[0])
            cache[id(op)] = entry
        subgraph = entry[1]
        return NotImplemented if subgraph is None else run_subgraph(subgraph, args)

    return run


class _TosaKernels(Mapping[str, Kernel]):
    """Every operator maps to the TOSA runner, except intrinsics (native kernels)."""

    def __init__(self) -> None:
        self._intrinsics = _intrinsics()
        self._runner = _tosa_kernel({})

    def __getitem__(self, name: str) -> Kernel:
        return self._intrinsics.get(name) or self._runner

    def get(self, name: str, default: Any = None) -> Any:
        return self[name]

    def __iter__(self) -> Any:
        return iter(self._intrinsics)

    def __len__(self) -> int:
        return len(self._intrinsics)


def kernels_for(via: str) -> tuple[Mapping[str, Kernel], bool]:
    """(kernel mapping, whether plan-time optimisations apply) for a --via choice."""
    if via == "kernels":
        return KERNELS, True
    if via == "lower":
        return _intrinsics(), False
    if via == "tosa":
        return _TosaKernels(), False
    raise ValueError(f"unknown backend {via!r}; choose one of {', '.join(VIAS)}")
