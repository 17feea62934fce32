"""The backends: one registry of the ways to run a composed graph, one module per backend.

=============  ======================================================================================
numpy          (default; ``tosa`` is an alias) TOSA programs on numpy, native kernels / @lower for the rest
kernels        native numpy kernels, @lower where there is none
lower          the operators' @lower formulas (the reference semantics)
iree           the whole graph as TOSA MLIR, compiled by iree-compile (llvm-cpu), run by the IREE runtime
onnxruntime    the graph's ONNX export (skriptnd.interop.onnx_export) on onnxruntime
=============  ======================================================================================

This package sits above the IR, the executor and the exporters (it imports them, never the reverse;
``Graph.run`` imports it lazily) and below the CLI and the API. :func:`prepare` keeps the prepared
:class:`~skriptnd.backends.base.Runner` on the graph, so a graph compiles / plans once per backend and options.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from skriptnd.backends.base import Backend, CompileStatus, Options, Progress, Runner, reporting_compiles
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import NO_SPAN

register_codes({
    "E0780": "backend not available",
    "E0781": "graph cannot be compiled by the backend",
    "E0782": "backend compiler failed",
    "E0783": "backend runtime failed",
    "E0784": "benchmark problem",
    "E0789": "input value outside what a compiled module takes",
})

BACKENDS: dict[str, Backend] = {}
#: Former names still accepted (``--via tosa`` was the numpy backend's name).
ALIASES = {"tosa": "numpy"}
DEFAULT = "numpy"


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator of a backend module: registers one instance under its name."""
    backend = cls()  # type: ignore[call-arg]
    BACKENDS[backend.name] = backend
    return cls


def names() -> list[str]:
    return list(BACKENDS)


def canonical(name: str) -> str:
    """The registered name for ``name`` (aliases resolved); ValueError naming the choices if unknown."""
    name = ALIASES.get(name, name)
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}'; choose one of {', '.join(BACKENDS)}")
    return name


def get(name: str) -> Backend:
    return BACKENDS[canonical(name)]


def unavailable(backend: Backend, reason: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code="E0780", message=reason, span=NO_SPAN,
                                       hint=f"or choose another backend: {', '.join(BACKENDS)}")])


def prepare(graph: Any, backend: str = DEFAULT, options: Options | None = None) -> Runner:
    """The graph prepared by ``backend`` (kept on the graph: prepared once per backend and options)."""
    b = get(backend)
    options = options or Options()
    if options.device:
        from skriptnd.backends.iree_devices import parse

        device = parse(options.device)  # ValueError for a device no backend knows
        if device.kind.name not in b.devices:
            raise ValueError(f"the {b.name} backend runs on {', '.join(b.devices)}, not on {device.kind.name}; "
                             f"--device {device.kind.name} is for --via iree")
    runners: dict[tuple[str, Options], Runner] = graph.__dict__.setdefault("_runners", {})
    key = (b.name, options)
    runner = runners.get(key)
    if runner is None:
        reason = b.missing()
        if reason is not None:
            raise unavailable(b, reason)
        runner = runners[key] = b.prepare(graph, options)
    return runner


def run(graph: Any, inputs: Mapping[str, Any], backend: str = DEFAULT, options: Options | None = None,
        progress: Progress | None = None) -> dict[str, Any]:
    """Run ``graph`` on numpy ``inputs`` (by input name) with ``backend``; outputs by name."""
    return prepare(graph, backend, options).run(inputs, progress)


def forget(graph: Any) -> None:
    """Drop the runners kept on ``graph`` (their compiled modules, sessions and weights)."""
    graph.__dict__.pop("_runners", None)


#: The backend modules, in the order --via lists them (each registers its backend when imported).
MODULES = ("via_numpy", "via_kernels", "via_lower", "via_iree", "via_onnxruntime")
for _module in MODULES:
    importlib.import_module(f"{__name__}.{_module}")

from skriptnd.backends.kernel_maps import kernels_for  # noqa: E402

__all__ = ["ALIASES", "BACKENDS", "DEFAULT", "Backend", "CompileStatus", "Options", "Progress", "Runner", "canonical",
           "forget", "get", "kernels_for", "names", "prepare", "reporting_compiles", "run"]
