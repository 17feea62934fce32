"""Target operator sets (NNAPI 1.0, embARC MLI 2.0, TOSA 1.0): which of them runs each standard operation."""
