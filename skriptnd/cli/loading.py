"""The model commands' first two steps, each a function a command calls in order: load the model folder
(read and checked by skriptnd.model), then compose one graph of it. A failure of either prints its located
diagnostics and exits 1, so a command's body reads as a straight line of steps."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.status import Status

from skriptnd.cli.report import fail
from skriptnd.compose.ir import Graph
from skriptnd.diagnostics import DiagnosticError
from skriptnd.model import Model, load


def _status(what: str) -> Status:
    """A status line on stderr while a step runs (a large model takes seconds to check and compose); rich
    shows it only on a terminal, so a pipe or a log gets none."""
    return Console(stderr=True).status(what)


def load_model(path: Path, color: bool | None) -> Model:
    """The model folder (or main .sknd file) at path, parsed, resolved and checked."""
    try:
        with _status(f"loading and checking {path.name}…"):
            return load(path)
    except DiagnosticError as err:
        fail(err.diagnostics, None, color)


def compose_graph(model: Model, graph: str | None, attribs: dict[str, object], color: bool | None, *,
                  decompose: bool = False, random_weights: bool = False, seed: int = 0, defer: bool = False) -> Graph:
    """One graph of the model composed for these attribute values (its variables read when it first runs);
    `defer`: attributes without a default left awaited (Model.compose), for the caller to say how to give them."""
    try:
        with _status(f"composing {graph or 'the main graph'}…"):
            return model.compose(graph, attribs, decompose=decompose, random_weights=random_weights, seed=seed,
                                 defer=defer)
    except DiagnosticError as err:
        fail(err.diagnostics, model, color)
