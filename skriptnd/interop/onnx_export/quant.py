"""@quantize graphs as QDQ ONNX graphs (QuantizeLinear / DequantizeLinear around quantized tensors)."""

from __future__ import annotations

from typing import Any

from .core import Context, Unsupported


def quantize_graph_inputs(ctx: Context, graph: Any) -> None:
    raise Unsupported("@quantize graphs are not exported to ONNX yet")


def quantized_value(ctx: Context, op: Any) -> None:
    pass
