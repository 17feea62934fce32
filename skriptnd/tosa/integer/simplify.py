"""Clean-up of a lowered integer TOSA graph: each operation is lowered on its own (NCHW at its boundaries), which
leaves layout operations on constants and TRANSPOSE pairs between operations; removing them is exact."""

from __future__ import annotations

import numpy as np

from skriptnd.tosa.integer.graph import IntegerGraph
from skriptnd.tosa.ops import OPS

__all__ = ["simplify_graph"]


def simplify_graph(ig: IntegerGraph) -> None:
    """Fold layout operations on constants (filters transposed on the host) and cancel the NCHW ↔ NHWC
    TRANSPOSE pairs the per-operation lowering leaves between operations, also across a CLAMP (which
    commutes with TRANSPOSE). Values that disappear are dropped from ``ig.values``."""
    def rename(old: str, new: str) -> None:
        for o in ig.ops:
            o.inputs = [new if i == old else i for i in o.inputs]
        ig.outputs = [(n, new if v == old else v) for n, v in ig.outputs]

    changed = True
    while changed:
        changed = False
        for o in list(ig.ops):
            if o.name in ("TRANSPOSE", "RESHAPE") and all(i in ig.constants for i in o.inputs):
                ig.constants[o.output] = np.asarray(OPS[o.name](*[ig.constants[i] for i in o.inputs], **o.attrs))
                ig.ops.remove(o)
                changed = True
        producers = {o.output: o for o in ig.ops}
        uses: dict[str, int] = {}
        for name in [i for o in ig.ops for i in o.inputs] + [v for _, v in ig.outputs]:
            uses[name] = uses.get(name, 0) + 1
        for o in ig.ops:
            if o.name != "TRANSPOSE":
                continue
            mid = producers.get(o.inputs[0])
            src = mid
            if mid is not None and mid.name == "CLAMP" and uses[mid.output] == 1:
                src = producers.get(mid.inputs[0])
            else:
                mid = None
            if src is None or src.name != "TRANSPOSE" or uses[src.output] != 1:
                continue
            p, q = [int(v) for v in src.attrs["perms"]], [int(v) for v in o.attrs["perms"]]
            if any(p[q[i]] != i for i in range(len(q))):
                continue
            if mid is None:
                ig.ops.remove(o)
                ig.ops.remove(src)
                rename(o.output, src.inputs[0])
            else:
                mid.inputs = [src.inputs[0]]
                mid.output = o.output
                ig.ops.remove(o)
                ig.ops.remove(src)
            changed = True
            break
    used = {i for o in ig.ops for i in o.inputs} | {v for _, v in ig.outputs}
    ig.constants = {k: v for k, v in ig.constants.items() if k in used}
    ig.shapes &= set(ig.constants)
    live = {n for n, _, _ in ig.inputs} | set(ig.constants) | {o.output for o in ig.ops}
    ig.values = {k: v for k, v in ig.values.items() if v.name in live}
