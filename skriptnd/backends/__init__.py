"""The backends: one registry of the ways to run a composed graph, one module per backend.

=============  ======================================================================================
numpy          (default; ``tosa`` is an alias) TOSA programs on numpy, native kernels / @lower for the rest
kernels        native numpy kernels, @lower where there is none
lower          the operators' @lower formulas (the reference semantics)
iree           the whole graph as TOSA MLIR, compiled by iree-compile (llvm-cpu), run by the IREE runtime
onnxruntime    the graph's ONNX export (skriptnd.interop.onnx_export) on onnxruntime
=============  ======================================================================================

This package sits above the IR, the executor and the exporters (it imports them, never the reverse: a graph
does not run itself, :func:`run` runs it, ``skriptnd.run`` on the package face) and below the CLI.
The registry (skriptnd.backends.registry) imports none of the backends; this package imports them, in the
order ``--via`` lists them. :func:`prepare` keeps the prepared :class:`~skriptnd.backends.base.Runner` on the
graph, so a graph compiles / plans once per backend and options.
"""

from __future__ import annotations

from skriptnd.backends.base import Backend, CompileStatus, Options, Progress, Runner, reporting_compiles
from skriptnd.backends.registry import (
    ALIASES,
    BACKENDS,
    DEFAULT,
    canonical,
    forget,
    get,
    names,
    prepare,
    register,
    run,
    unavailable,
)

# The registry first, then its families: each via_* module registers its backend when imported, in the
# order --via lists them (so not sorted).
# isort: off
from skriptnd.backends import via_numpy, via_kernels, via_lower, via_iree, via_onnxruntime  # noqa: F401
# isort: on
from skriptnd.backends.kernel_maps import kernels_for

__all__ = ["ALIASES", "BACKENDS", "DEFAULT", "Backend", "CompileStatus", "Options", "Progress", "Runner", "canonical",
           "forget", "get", "kernels_for", "names", "prepare", "register", "reporting_compiles", "run", "unavailable"]
