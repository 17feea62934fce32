"""Target operator sets: which target operation would run each standard operation of a composed graph.

A *target* is a fixed operator library a SkriptND graph may be deployed to: Android NNAPI 1.0
(:mod:`.nnapi`), Synopsys embARC MLI 2.0 (:mod:`.mli`) and TOSA 1.0 (:mod:`.tosa`, read from the existing
legalization in :mod:`skriptnd.tosa.legalize`). Each is one module that registers a :class:`Target`:

- ``spec_ops``: the target's own operator table (every operation its specification document lists:
  supported / how / caveat), rendered in ``docs/targets.md``;
- ``map_graph(graph)``: one :class:`Mapping` per operation of a composed graph — the target operation
  with its exact parameter translation (paddings, strides, fused activations, layouts, quantization), or
  the precise reason why it has none.

``sknd compose MODEL --target NAME`` prints ``map_graph``'s rows (:mod:`.table`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SpecOp:
    """One operation of a target's specification: ``status`` is 'supported', 'partial' or 'unsupported'."""

    name: str
    status: str
    how: str
    caveat: str = ""


@dataclass
class Mapping:
    """One composed-graph operation on a target: ``target_op`` None means it has none (``how`` says why)."""

    op: Any  # skriptnd.compose.ir.Operation
    target_op: str | None
    how: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return self.target_op is not None


@dataclass
class Target:
    name: str
    title: str
    spec_ops: Callable[[], list[SpecOp]]
    map_graph: Callable[[Any], list[Mapping]]


TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    TARGETS[target.name] = target
    return target


def targets() -> dict[str, Target]:
    """Every registered target, by name (importing the target modules registers them)."""
    from skriptnd.targets import mli, nnapi, tosa  # noqa: F401  (registration)

    return TARGETS


def get(name: str) -> Target:
    found = targets().get(name)
    if found is None:
        raise KeyError(f"unknown target '{name}'; choose one of {', '.join(sorted(TARGETS))}")
    return found


def walk(graph: Any) -> list[Any]:
    """The operations of ``graph`` and of its subgraphs, in order."""
    ops = []
    for op in graph.operations:
        ops.append(op)
        for sub in op.subgraphs.values():
            ops.extend(walk(sub))
    return ops


__all__ = ["Mapping", "SpecOp", "TARGETS", "Target", "get", "register", "targets", "walk"]
