"""The kernel mappings of the numpy backends: which implementation runs each standard operator on
skriptnd's Executor (skriptnd.execute), which runs whatever mapping it is handed.

- numpy (alias tosa): runs of operations that legalize (skriptnd.tosa.legalize) compile into TOSA
  programs run on the numpy TOSA kernels (skriptnd.backends.tosa_programs); any other operation runs its
  native kernel when it has one (skriptnd.execute.kernels), else its @lower plan;
- kernels: the native numpy kernels, else the @lower plans (no TOSA);
- lower: the operators' own @lower formulas (the reference semantics), kernels only for intrinsics.
"""

from __future__ import annotations

from collections.abc import Mapping

from skriptnd.backends.tosa_programs import TosaKernels
from skriptnd.execute import KERNELS
from skriptnd.execute.executor import Kernel
from skriptnd.semantics.intrinsics import STDLIB_INTRINSICS


def kernels_for(name: str) -> tuple[Mapping[str, Kernel], bool]:
    """(kernel mapping, whether plan-time optimisations apply) of a numpy backend (or its alias)."""
    if name == "kernels":
        return KERNELS, True
    if name == "lower":
        return {n: fn for n, fn in KERNELS.items() if n in STDLIB_INTRINSICS}, False
    if name in ("numpy", "tosa"):
        return TosaKernels(KERNELS), True
    raise ValueError(f"'{name}' is not a numpy backend; choose numpy, kernels or lower")
