"""Import NNEF 1.x models (a `graph.nnef` text file with its `.dat` tensor files) as SkriptND model folders.

`import_nnef(src, out_dir)` parses the graph with the Khronos `nnef` package, infers its shapes, turns every
operation into standard-library invocations through the converter registry (`registry.py`, one module per
operation family in `ops/`) and writes the folder atomically through `skriptnd.interop.writer`.
"""

from skriptnd.interop.nnef_import.importer import import_nnef

__all__ = ["import_nnef"]
