"""One IREE module for every shape of a graph with dynamic extents, where its TOSA allows (issue 25, item 5).

skriptnd's TOSA programs are legalized for static shapes (skriptnd.tosa.legalize computes transposes, reshape
targets, paddings and constants from them), so a module with IREE's dynamic dimensions (`tensor<?x3x?x?xf32>`)
is found by comparison rather than by legalizing on symbols: the graph is bound to three input shapes that
differ in every dynamic extent (this run's, and each extent one and two away: both parities, so that a
`floor(n / 2)` that two samples share still shows; skriptnd.execute.specialise) and written as TOSA MLIR for
each. Where the texts
differ only in tensor types' extents and in at most one entry of each RESHAPE target, the extents become `?`
and those entries -1 (RESHAPE infers it: the element count is the input's at every size), and that one text is
compiled. Any other difference (a padding, a window, a constant, an attribute that follows the extent) means
the program is not the same at other sizes: :func:`merge` gives None and the caller compiles per shape.

The merged module is then checked at the three shapes against the numpy backend's run of the graph bound to
them (:func:`agrees`) before it is used; a compile failure or a mismatch also falls back to per-shape modules.
Two texts that agree at three sizes can still hold a constant that changes at another (an extent divided by
3, rounded); the check at three sizes is what stands against that, and the plan names the sizes checked.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["merge", "agrees", "perturbed"]

_TYPE = re.compile(r"tensor<(?:[0-9?]+x)*[a-z]\w*>")
_CONST_SHAPE = re.compile(r'"tosa\.const_shape"\(\) <\{values = dense<\[?[-0-9, ]*\]?> : tensor<\d+xindex>\}>')
_NUMBER = re.compile(r"-?\d+")


def merge(a: str, b: str) -> str | None:
    """``a`` with each number that differs in ``b`` made dynamic (`?` in a tensor type, -1 in a RESHAPE target,
    at most one per target), or None where the texts differ otherwise (see the module docstring)."""
    pieces_a, pieces_b = _NUMBER.split(a), _NUMBER.split(b)
    if pieces_a != pieces_b:
        return None
    numbers_a = list(_NUMBER.finditer(a))
    numbers_b = [m.group() for m in _NUMBER.finditer(b)]
    if len(numbers_a) != len(numbers_b):
        return None
    types = [m.span() for m in _TYPE.finditer(a)]
    shapes = [m.span() for m in _CONST_SHAPE.finditer(a)]
    replaced: dict[int, str] = {}
    per_shape: dict[int, int] = {}
    for m, other in zip(numbers_a, numbers_b, strict=True):
        if m.group() == other:
            continue
        start = m.start()
        if any(s <= start < e for s, e in types):
            if m.group().startswith("-"):
                return None
            replaced[start] = "?"
            continue
        inside = [k for k, (s, e) in enumerate(shapes) if s <= start < e]
        if not inside:
            return None  # an attribute, a constant's value, a padding: the program differs
        k = inside[0]
        per_shape[k] = per_shape.get(k, 0) + 1
        if per_shape[k] > 1:
            return None  # RESHAPE infers one extent only
        replaced[start] = "-1"
    if not replaced:
        return None
    out, last = [], 0
    for m in numbers_a:
        if m.start() in replaced:
            out.append(a[last:m.start()])
            out.append(replaced[m.start()])
            last = m.end()
    out.append(a[last:])
    text = "".join(out)
    # a type whose every extent became `?` inside a const_shape's own type (`tensor<?xindex>`) is not one
    return None if "tensor<?xindex>" in text else text


def perturbed(extents: dict[object, int], bounds: dict[object, int | None], step: int) -> dict[object, int] | None:
    """Other values of the dynamic extents, each ``step`` away from this run's (above, or below where the bound
    is reached): the further samples :func:`merge` compares with; None where an extent has no such value."""
    other = {}
    for sym, value in extents.items():
        bound = bounds.get(sym)
        if bound is None or value + step <= bound:
            other[sym] = value + step
        elif value - step >= 1:
            other[sym] = value - step
        else:
            return None
    return other


def agrees(got: list[np.ndarray], expected: list[np.ndarray], relative: float = 1e-3) -> bool:
    """Whether the module's outputs match the numpy backend's: same shapes, values within ``relative`` of the
    largest magnitude (the iree backend's self-check tolerance)."""
    for g, e in zip(got, expected, strict=True):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return False
        if e.size == 0:
            continue
        scale = max(float(np.max(np.abs(e))), 1.0)
        if not np.allclose(g, e, rtol=0, atol=relative * scale, equal_nan=True):
            return False
    return True
