"""Small helpers the converter families share."""

from __future__ import annotations


def axis(value: int, rank: int) -> int:
    """An ONNX axis (negative counts from the end) as a non-negative one."""
    return value + rank if value < 0 else value
