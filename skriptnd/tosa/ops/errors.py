"""TOSA graph results other than ``tosa_valid``.

TOSA 1.0 / 0.30 §1.7 (Operator graphs): ``ERROR_IF(condition)`` marks an illegal graph
(``tosa_error``, every implementation must report it); ``REQUIRE(condition)`` marks a result that
cannot be relied upon (``tosa_unpredictable``). Here the first is raised as :class:`TosaError`, the
second as :class:`TosaUnpredictable`; the message names the violated condition in the spec's words.

Checks are made in pseudocode order, all argument-level checks (shapes, types, attributes) before any
data-dependent one, and the first failing check is raised. The spec lets unpredictable override error;
within one operator that only matters for a graph that is both, and such inputs are not classified.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TosaError", "TosaUnpredictable", "error_if", "require", "VERSIONS", "check_version"]

VERSIONS = ("1.0", "0.30")


class TosaError(Exception):
    """An ERROR_IF condition holds: the graph is illegal (``tosa_error``)."""

    def __init__(self, condition: str, op: str | None = None) -> None:
        self.condition = condition
        self.op = op
        super().__init__(f"{op}: ERROR_IF({condition})" if op else f"ERROR_IF({condition})")


class TosaUnpredictable(Exception):
    """A REQUIRE condition fails: the result is ``tosa_unpredictable``."""

    def __init__(self, condition: str, op: str | None = None) -> None:
        self.condition = condition
        self.op = op
        super().__init__(f"{op}: REQUIRE({condition}) fails" if op else f"REQUIRE({condition}) fails")


def error_if(condition: object, text: str, op: str | None = None) -> None:
    """Raise :class:`TosaError` when ``condition`` (a bool or array: any element) holds."""
    if bool(np.any(condition)):
        raise TosaError(text, op)


def require(condition: object, text: str, op: str | None = None) -> None:
    """Raise :class:`TosaUnpredictable` unless ``condition`` (a bool or array: every element) holds."""
    if not bool(np.all(condition)):
        raise TosaUnpredictable(text, op)


def check_version(version: str) -> str:
    """Validate the ``version`` keyword every operator takes ("1.0" by default, or "0.30")."""
    if version not in VERSIONS:
        raise ValueError(f"unsupported TOSA version {version!r}; expected one of {VERSIONS}")
    return version
