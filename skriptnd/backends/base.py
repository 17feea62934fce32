"""What a backend is: a named way to run a composed graph (`sknd run --via NAME`, `skriptnd.run(graph, inputs, backend=...)`).

A :class:`Backend` prepares a graph once into a :class:`Runner` (compiling, loading weights, building the
execution plan) and the runner then runs it on inputs any number of times; the registry
(skriptnd.backends) keeps the runner on the graph, so a second run does no preparation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from skriptnd.compose.ir import Graph
from skriptnd.extras import hint_for

#: Progress callback: (operations done, operations in all), for the CLI's progress bar.
Progress = Callable[[int, int], None]
#: Compile status callback: (what is being compiled, seconds so far) about once a second while a backend's
#: compiler runs, then (what, None) when it has ended; the CLI shows it as a status line (a compile of a
#: large model takes a while, and a silent terminal reads as a hang).
CompileStatus = Callable[[str, float | None], None]

_COMPILE_STATUS: ContextVar[CompileStatus | None] = ContextVar("compile_status", default=None)


@contextmanager
def reporting_compiles(callback: CompileStatus | None) -> Iterator[None]:
    """Within the block, backends report their compiler runs to ``callback`` (a context variable rather than
    an option: it is how the caller watches, not what is compiled, so it stays out of the runner's key)."""
    token = _COMPILE_STATUS.set(callback)
    try:
        yield
    finally:
        _COMPILE_STATUS.reset(token)


def compile_status() -> CompileStatus | None:
    """The callback the caller asked compiles to be reported to (None: report nothing)."""
    return _COMPILE_STATUS.get()


@dataclass(frozen=True)
class Options:
    """Backend options (hashable: a graph keeps one runner per backend and options).

    ``threads``: worker threads (None: the backend's default); ``target``: a compiler's target CPU
    (iree: ``host`` by default, or an LLVM CPU name / triple to cross-compile); ``flags``: extra compiler
    flags; ``cache_dir``: where compiled modules are kept (None: the user cache folder); ``verify``: check a
    newly compiled module against the numpy backend before its first result (iree; False: unchecked, e.g.
    to time a cold start); ``device``: where the iree backend runs the graph, ``cpu`` (None: the default),
    ``cuda[:ARCH]``, ``vulkan[:TARGET]`` or ``hip[:ARCH]`` (skriptnd.backends.iree_devices)."""

    threads: int | None = None
    target: str | None = None
    flags: tuple[str, ...] = ()
    cache_dir: str | None = None
    verify: bool = True
    device: str | None = None


class Runner(ABC):
    """A graph prepared by a backend; ``plan``: what runs where (``sknd run --verbose`` prints it)."""

    plan: list[str]

    @abstractmethod
    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        """The graph's outputs (by output name) for numpy ``inputs`` (by input name)."""


@dataclass
class Backend(ABC):
    """A registered backend: ``name`` (what --via takes), ``summary`` (one line for help texts)."""

    name: str
    summary: str
    #: Python packages the backend needs (imported lazily); skriptnd.extras names the pip extra of each
    requires: tuple[str, ...] = field(default=())
    #: The kinds of device it runs on (``Options.device``; skriptnd.backends.iree_devices.KINDS)
    devices: tuple[str, ...] = field(default=("cpu",))

    def missing(self) -> str | None:
        """Why the backend cannot run here (a missing package, named with how to install it), or None."""
        import importlib.util

        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                return f"the {self.name} backend needs the Python package '{module}' ({hint_for(module)})"
        return None

    @abstractmethod
    def prepare(self, graph: Graph, options: Options) -> Runner:
        """Prepare ``graph`` (compile, load weights); raises DiagnosticError for what it cannot run."""
