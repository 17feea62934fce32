"""Small helpers the converter families share."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import Context, Node
from ..errors import ImportProblem


def axis(value: int, rank: int) -> int:
    return value + rank if value < 0 else value


def unsupported_attr(ctx: Context, node: Node, what: str) -> ImportProblem:
    return ImportProblem("E0807", f"{node.where}: {what} is not supported")


def scalar(ctx: Context, value: Any, dtype: str = "real") -> str:
    kind = {"real": np.float32, "int": np.int64, "bool": np.bool_}[dtype]
    return ctx.literal_arg(np.array(value, kind), "k")


def real_input(ctx: Context, node: Node, i: int = 0) -> str:
    name = node.input(i)
    if ctx.dtype(name) != "real":
        raise ImportProblem("E0810", f"{node.where}: input {i} is {ctx.dtype(name)}; this operator needs "
                            "floating-point tensors in SkriptND")
    return ctx.arg(name)  # type: ignore[return-value]
