"""``@quantize`` graphs lowered to integer TOSA 1.0."""
