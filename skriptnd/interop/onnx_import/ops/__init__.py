"""Converters, one module per ONNX operator family; each registers itself in `..registry`."""
