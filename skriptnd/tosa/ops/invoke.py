"""Applying one TOSA operator of a graph or program to numpy operands (:func:`apply`), and ``ITEM``.

Most operators take their operands positionally; CONCAT and WHILE_LOOP take them as one list (``input1``,
``input_list``). A WHILE_LOOP's value in a program is its output list, which ``ITEM {index}`` reads: ITEM
is not a TOSA operator, the MLIR writers write it as the result ``%loop#index``
(skriptnd.tosa.mlir.regions).
"""

from __future__ import annotations

from typing import Any

from skriptnd.tosa.ops import OPS

ITEM = "ITEM"
#: Operators taking their operands as one list (ITEM: the list value it reads).
LIST_OPS = frozenset({"CONCAT", "WHILE_LOOP"})


def apply(name: str, operands: list[Any], attrs: dict[str, Any]) -> Any:
    """``name`` applied to ``operands`` with ``attrs`` on :data:`skriptnd.tosa.ops.OPS`."""
    if name in LIST_OPS:
        return OPS[name](list(operands), **attrs)
    if name == ITEM:
        return operands[0][int(attrs["index"])]
    return OPS[name](*operands, **attrs)
