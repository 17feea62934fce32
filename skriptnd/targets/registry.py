"""The table of targets and the records a target's mapping is made of.

The registry imports none of its entries: each target module (:mod:`.mli`, :mod:`.nnapi`, :mod:`.tosa`)
calls :func:`register` when it is imported, and the package (``skriptnd/targets/__init__.py``) imports
them, as onnx's ``onnx/reference/ops/_op_list.py`` builds its table. A target module imports this module,
never the package face.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skriptnd.compose.ir import Graph, Operation


@dataclass
class SpecOp:
    """One operation of a target's specification: ``status`` is 'supported', 'partial' or 'unsupported'."""

    name: str
    status: str
    how: str
    caveat: str = ""


#: a parameter of a target operation as a mapping reports it (JSON-like: ``sknd compose --format json``)
Param = int | float | bool | str | None | list | dict


@dataclass
class Mapping:
    """One composed-graph operation on a target: ``target_op`` None means it has none (``how`` says why)."""

    op: Operation
    target_op: str | None
    how: str
    params: dict[str, Param] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return self.target_op is not None


@dataclass
class Target:
    name: str
    title: str
    spec_ops: Callable[[], list[SpecOp]]
    map_graph: Callable[[Graph], list[Mapping]]


TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    TARGETS[target.name] = target
    return target


def targets() -> dict[str, Target]:
    """Every registered target, by name (the package ``skriptnd.targets`` imports the target modules, which
    registers them; importing this module imports the package first)."""
    return TARGETS


def get(name: str) -> Target:
    found = TARGETS.get(name)
    if found is None:
        raise KeyError(f"unknown target '{name}'; choose one of {', '.join(sorted(TARGETS))}")
    return found


__all__ = ["Mapping", "Param", "SpecOp", "TARGETS", "Target", "get", "register", "targets"]
