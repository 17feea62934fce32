"""The registry of backends and the one way to run a graph on one: :func:`run` (``skriptnd.run``).

As in ONNX, where a model does not run itself and a session runs it, the composed graph (skriptnd.compose.ir)
knows nothing of running: :func:`prepare` turns a graph into a :class:`~skriptnd.backends.base.Runner` with a
registered backend, keeps it on the graph (a graph compiles / plans once per backend and options), and
:func:`run` runs it. This module imports none of the backends: each ``via_*`` module registers itself with
:func:`register`, and the package (skriptnd.backends) imports them all, in the order ``--via`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from skriptnd.backends.base import Backend, Options, Progress, Runner
from skriptnd.backends.bind import awaiting_error, bind_attributes
from skriptnd.backends.iree_devices import parse as parse_device
from skriptnd.compose.input_shapes import check_shapes
from skriptnd.compose.ir import Graph
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


def unavailable(backend: Backend, reason: str, graph: Graph | None = None) -> DiagnosticError:
    """E0780 at the declaration of the graph that was to run (as E0786 for a device), not `<unknown>:1:1`."""
    return DiagnosticError([Diagnostic(code="E0780", message=reason,
                                       span=graph.declared_at() if graph is not None else NO_SPAN,
                                       hint=f"or choose another backend: {', '.join(BACKENDS)}")])


def prepare(graph: Graph, backend: str = DEFAULT, options: Options | None = None) -> Runner:
    """The graph prepared by ``backend`` (kept on the graph: prepared once per backend and options)."""
    if graph.awaiting:  # composed with defer=True: nothing to prepare until its attributes are given
        raise awaiting_error(graph, list(graph.awaiting))
    b = get(backend)
    options = options or Options()
    if options.device:
        device = parse_device(options.device)  # ValueError for a device no backend knows
        if device.kind.name not in b.devices:
            raise ValueError(f"the {b.name} backend runs on {', '.join(b.devices)}, not on {device.kind.name}; "
                             f"--device {device.kind.name} is for --via iree")
    runners: dict[tuple[str, Options], Runner] = graph.__dict__.setdefault("_runners", {})
    key = (b.name, options)
    runner = runners.get(key)
    if runner is None:
        reason = b.missing()
        if reason is not None:
            raise unavailable(b, reason, graph)
        runner = runners[key] = b.prepare(graph, options)
    return runner


def run(graph: Graph, inputs: Mapping[str, np.ndarray], backend: str = DEFAULT, options: Options | None = None,
        progress: Progress | None = None, **settings: object) -> dict[str, np.ndarray]:
    """Run ``graph`` on numpy ``inputs`` (by input name) with ``backend``; its outputs by name.

    ``backend``: a registered name (numpy, the default; kernels, lower, iree, onnxruntime); the backend's
    :class:`~skriptnd.backends.base.Options` either as ``options`` or as keywords (``threads=``, ``target=``,
    ``device=``, ``cache_dir=``, ...: ``skriptnd.run(graph, inputs, "iree", device="cuda")``). The prepared
    backend is kept on the graph, so later runs do no planning or compiling."""
    if settings:
        options = replace(options or Options(), **settings)  # type: ignore[arg-type]
    graph, inputs = bind_attributes(graph, inputs)  # graph attributes given as inputs: composed for them
    check_shapes(graph, inputs)  # E0711 naming the fix (`--attrib batch=2`) before any backend compiles
    return prepare(graph, backend, options).run(inputs, progress)


def forget(graph: Graph) -> None:
    """Drop the runners kept on ``graph`` (their compiled modules, sessions and weights)."""
    graph.__dict__.pop("_runners", None)
