"""TOSA 1.0: the operator set in numpy, the legalization onto it, programs, and its serializers.

- ``ops/``: numpy implementations of the TOSA operators with exact integer semantics (``OPS``);
- ``legalize/``: standard-library operations -> TOSA subgraphs (table-driven rules);
- ``program/``: runs of legalized operations compiled into one simplified TOSA program, with its fast
  fp32 forms (im2col + BLAS, Winograd, patch matmuls) for the numpy backend;
- ``mlir/``: TOSA MLIR (generic form) of a graph or of a program (the shared text pieces in ``mlir.text``),
  and the flatbuffer via ``tosa-opt``;
- ``integer/``: ``@quantize`` graphs lowered to integer TOSA (``integer.lower``) and written as MLIR
  (``integer.mlir``);
- ``spirv/``: the TOSA 1.0 SPIR-V extended instruction set.

Each folder imports only the ones listed above it (and nothing above ``tosa``); tests/test_layering.py
checks it. README.md in this folder describes each one.
"""
