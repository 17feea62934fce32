"""Which implementation runs the standard operators: `sknd run --via tosa|kernels|lower`.

- tosa (default): runs of operations that legalize (skriptnd.tosa.legalize) compile into TOSA
  programs run on the numpy TOSA kernels (skriptnd.execute.tosa_backend); any other operation runs
  its native kernel when it has one (skriptnd.execute.kernels), else its @lower plan;
- kernels: the native numpy kernels, else the @lower plans (no TOSA);
- lower: the operators' own @lower formulas (the reference semantics), kernels only for intrinsics.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..semantics.intrinsics import STDLIB_INTRINSICS
from .executor import KERNELS, Kernel
from .tosa_backend import TosaKernels

VIAS = ("tosa", "kernels", "lower")
DEFAULT_VIA = "tosa"


def _intrinsics() -> dict[str, Kernel]:
    return {name: fn for name, fn in KERNELS.items() if name in STDLIB_INTRINSICS}


def kernels_for(via: str) -> tuple[Mapping[str, Kernel], bool]:
    """(kernel mapping, whether plan-time optimisations apply) for a --via choice."""
    if via == "kernels":
        return KERNELS, True
    if via == "lower":
        return _intrinsics(), False
    if via == "tosa":
        return TosaKernels(KERNELS), True
    raise ValueError(f"unknown backend {via!r}; choose one of {', '.join(VIAS)}")
