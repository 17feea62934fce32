"""What a backend is: a named way to run a composed graph (`sknd run --via NAME`, `Graph.run(backend=...)`).

A :class:`Backend` prepares a graph once into a :class:`Runner` (compiling, loading weights, building the
execution plan) and the runner then runs it on inputs any number of times; the registry
(skriptnd.backends) keeps the runner on the graph, so a second run does no preparation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Progress callback: (operations done, operations in all), for the CLI's progress bar.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Options:
    """Backend options (hashable: a graph keeps one runner per backend and options).

    ``threads``: worker threads (None: the backend's default); ``target``: a compiler's target CPU
    (iree: ``host`` by default, or an LLVM CPU name / triple to cross-compile); ``flags``: extra compiler
    flags; ``cache_dir``: where compiled modules are kept (None: the user cache folder); ``verify``: check a
    newly compiled module against the numpy backend before its first result (iree; False: unchecked, e.g.
    to time a cold start)."""

    threads: int | None = None
    target: str | None = None
    flags: tuple[str, ...] = ()
    cache_dir: str | None = None
    verify: bool = True


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
    #: Python packages the backend needs (imported lazily), with the pip extra that installs them
    requires: tuple[str, ...] = field(default=())

    def missing(self) -> str | None:
        """Why the backend cannot run here (a missing package, named with how to install it), or None."""
        import importlib.util

        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                return f"the {self.name} backend needs the Python package '{module}' (pip install 'skriptnd[dev]')"
        return None

    @abstractmethod
    def prepare(self, graph: Any, options: Options) -> Runner:
        """Prepare ``graph`` (compile, load weights); raises DiagnosticError for what it cannot run."""
