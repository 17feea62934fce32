"""A graph with @quantize entries lowered to its integer TOSA graph for a backend to run, and what to do when
it has none.

The integer lowering (skriptnd.tosa.integer.lower) refuses what it cannot compute in integers (E0761: an
operand without a @quantize entry, per-channel activations, ...). Running such a graph is still possible: the
default ``numpy`` backend runs the operations that do not lower with fake quantization and the others as
integer TOSA (skriptnd.backends.quantized_split), the ``kernels`` backend all of it with fake quantization.
The lowering itself cannot say so (it also serves the exporters, where no backend choice exists), so the
backends that run the integer graph add it to the hint here.
"""

from __future__ import annotations

from dataclasses import replace

from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import DiagnosticError
from skriptnd.tosa.integer import lower as quantized

__all__ = ["KERNELS_HINT", "lower_for_running", "with_kernels_hint"]

#: How to run a quantized graph that has no integer TOSA graph.
KERNELS_HINT = ("run it with --via numpy (the default: integer TOSA for the operations that lower, fake "
                "quantization for the others) or --via kernels (backend 'kernels'): fake quantization, real "
                "arithmetic rounded to each @quantize entry's steps")


def with_kernels_hint(err: DiagnosticError) -> DiagnosticError:
    """`err` with each E0761's hint ending in :data:`KERNELS_HINT`."""
    return DiagnosticError([replace(d, hint=f"{d.hint}; or {KERNELS_HINT}" if d.hint else KERNELS_HINT)
                            if d.code == "E0761" else d for d in err.diagnostics])


def lower_for_running(graph: Graph) -> quantized.IntegerGraph:
    """The integer TOSA graph of `graph`; E0761 says that ``--via kernels`` runs it anyway."""
    try:
        return quantized.lower_quantized(graph)  # through the module, so a test can watch it being called
    except DiagnosticError as err:
        raise with_kernels_hint(err) from None
