"""Small helpers the TFLite converter families share."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem


def axis(value: int, rank: int) -> int:
    """A TFLite axis (negative counts from the end) as a non-negative one; outside the rank: E0863."""
    if not -rank <= value < rank:
        raise ImportProblem("E0863", f"axis {value} is outside a tensor of rank {rank}")
    return value + rank if value < 0 else value


def real(ctx: Context, value: float) -> str:
    """A real @constant scalar."""
    return ctx.literal_arg(np.array(value, np.float32), "k")


def tmp(ctx: Context, op: str, args: list, attribs: dict | None = None, types: list[str] | None = None) -> str:
    """An intermediate statement (a fresh name, no label)."""
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), types=types or [], label=False)


def same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow's SAME padding of one axis: (begin, end), the larger half at the end."""
    fd = (kernel - 1) * dilation + 1
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + fd - size)
    return total // 2, total - total // 2


def paddings(ctx: Context, kind: int, spatial: tuple[int, ...], kernel: list[int], stride: list[int],
             dilation: list[int]) -> list[int]:
    """Explicit [begin..., end...] paddings of TFLite's Padding (0 SAME, 1 VALID)."""
    if kind == 1:
        return [0] * (2 * len(kernel))
    pairs = [same_padding(s, k, st, d) for s, k, st, d in zip(spatial, kernel, stride, dilation, strict=True)]
    return [b for b, _ in pairs] + [e for _, e in pairs]
