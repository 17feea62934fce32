"""Converters for the ``image`` module (resampling through ONNX Resize)."""

from __future__ import annotations
