"""Values as text: string formatting fields and assertion messages (§2.4, string formatting)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from skriptnd.semantics.values import Pack, TensorValue, Value


def format_value(v: Value | Sequence[Value]) -> str:
    """A value as string formatting and assertion messages print it (§2.4, string formatting).

    int as is; real in the shortest form that reads back exactly (`1.0`, `0.5`, `1e-5`, `inf`,
    `-inf`, `nan`); bool as `true`/`false`; null as `null`; a str raw at the top level but
    quoted in single quotes inside a pack; a pack as `[1, 2, 3]`; a tensor as its type and
    shape, `tensor<real>[2, 3]` (a dynamic extent prints as `?`).
    """
    return _format(v, top=True)


def _format(v: Value | Sequence[Value], top: bool) -> str:
    t = type(v)
    if t is bool:
        return "true" if v else "false"
    if t is int or (t is not bool and isinstance(v, int)):
        return str(v)
    if t is float:
        return _format_real(v)
    if t is str:
        if top:
            return v
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if v is None:
        return "null"
    if isinstance(v, Pack) or t is tuple or t is list:
        return "[" + ", ".join(_format(x, False) for x in v) + "]"
    if isinstance(v, TensorValue):
        return f"tensor<{v.dtype}>[" + ", ".join("?" if e is None else str(e) for e in v.shape) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _format_real(float(v))
    return str(v)


def _format_real(x: float) -> str:
    if x != x:
        return "nan"
    if x == math.inf:
        return "inf"
    if x == -math.inf:
        return "-inf"
    text = repr(x)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"  # 1e-05 -> 1e-5, 1e+16 -> 1e16: as SkriptND writes them
    return text
