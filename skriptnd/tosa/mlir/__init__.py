"""TOSA 1.0 MLIR (generic form) of composed graphs and of programs; the flatbuffer through tosa-opt."""
