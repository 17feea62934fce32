"""Normalizations. All of NNEF's are compound fragments; those whose SkriptND counterpart is not defined the
same way are imported through their NNEF definition (exact by construction)."""

from __future__ import annotations

from ..registry import expanded

expanded("NNEF definition: offset + scale * (input - mean) / sqrt(variance + epsilon)", "batch_normalization")
expanded("NNEF definition: input / (bias + alpha * box(sqr(input), normalize))^beta",
         "local_response_normalization")
expanded("NNEF definition: input - box(input, normalize)", "local_mean_normalization")
expanded("NNEF definition: input / max(sqrt(box(sqr(input), normalize)) + bias, epsilon)",
         "local_variance_normalization")
expanded("NNEF definition: local mean then local variance normalization", "local_contrast_normalization")
expanded("NNEF definition: input / max(sum_reduce(abs(input)) + bias, epsilon)", "l1_normalization")
expanded("NNEF definition: input / max(sqrt(sum_reduce(sqr(input))) + bias, epsilon)", "l2_normalization")
