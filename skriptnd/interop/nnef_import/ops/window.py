"""Sliding-window attributes shared by convolutions and pooling: NNEF 1.x explicit or automatic padding
(`[]` = the runtime's "same"-like rule, made explicit here from the inferred shapes) and border modes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skriptnd.interop.nnef_import.context import Arg, Context
from skriptnd.interop.nnef_import.writer_exprs import real

#: NNEF border modes that are a padding of the input with `layout.pad` before an unpadded window.
PAD_METHODS = {"reflect": "REFLECT", "replicate": "REPLICATE", "reflect-even": "SYMMETRIC"}


def explicit_padding(padding: Sequence[Any], big: Sequence[int], small: Sequence[int], size: Sequence[int],
                     stride: Sequence[int], dilation: Sequence[int]) -> list[tuple[int, int]]:
    """(before, after) per axis. `big` is the input of a convolution (the output of a transposed one),
    `small` the other side. Automatic padding follows the NNEF runtime: the total that makes
    `(small - 1) * stride + dilated size` cover `big`, `before = total // 2` and the rest after."""
    if padding:
        return [(int(p), int(q)) for p, q in padding]
    result = []
    for b, s_, f, st, d in zip(big, small, size, stride, dilation, strict=True):
        total = max((s_ - 1) * st + (f - 1) * d + 1 - b, 0)
        result.append((total // 2, total - total // 2))
    return result


def flat(pads: Sequence[tuple[int, int]]) -> list[int]:
    """SkriptND order: all befores, then all afters."""
    return [p for p, _ in pads] + [q for _, q in pads]


def defaults(value: Sequence[int], rank: int) -> list[int]:
    return [int(v) for v in value] if value else [1] * rank


def pre_pad(ctx: Context, x: Arg, axes: list[int], pads: list[tuple[int, int]], border: str,
            value: float | None = None) -> Any:
    """Pad `x` explicitly (border mode `border`, or a constant) and return the padded tensor's name."""
    if not any(p or q for p, q in pads):
        return x
    out = ctx.tmp("padded")
    attribs: dict[str, Any] = {"axes": axes, "padding": flat(pads)}
    args = [x]
    if border in PAD_METHODS:
        attribs["method"] = PAD_METHODS[border]
    elif value:
        args.append(real(value))
    ctx.emit(out, "layout.pad", args, attribs)
    return out
