"""Former home of the backend choice (``kernels_for``, ``VIAS``), kept so that code importing it keeps
working: the backends are the registry skriptnd.backends now (``skriptnd.backends.kernels_for``). Resolved
lazily (a module ``__getattr__``), so the executor package never imports the backends above it."""

from __future__ import annotations

from typing import Any

VIAS = ("tosa", "kernels", "lower")  # the numpy backends under their former names
DEFAULT_VIA = "tosa"


def __getattr__(name: str) -> Any:
    if name == "kernels_for":
        from ..backends.kernel_maps import kernels_for

        return kernels_for
    raise AttributeError(name)
