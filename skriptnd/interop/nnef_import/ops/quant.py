"""Quantization operations, imported through their NNEF definitions (fake quantization: round, clamp and
rescale in floating point, as NNEF defines them)."""

from __future__ import annotations

from ..registry import expanded

expanded("NNEF definition (clamp, round, rescale)", "min_max_linear_quantize", "zero_point_linear_quantize",
         "linear_quantize", "logarithmic_quantize")
