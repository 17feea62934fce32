"""Converters, one module per NNEF 1.x operation family; each registers itself in `..registry` on import."""
