"""Which IREE CPU driver runs a compiled module: IREE's task executor (``local-task``, worker threads) or the
caller's thread (``local-sync``).

A module asked to run on several threads gets ``local-task`` only when it does enough work for the workers
to pay: the task executor wakes its workers, splits every dispatch among them and waits for the slowest one,
a fixed cost per dispatch that a small model's dispatches (a few thousand multiply-accumulates each) do
not repay. The small text models of the zoo (BERT, GPT-2, LLaMA with 2 layers of hidden 128: 4–7 M MACs,
~100 dispatches) ran 1.9–19x slower than onnxruntime on two task workers and 1.1–1.2x on the caller's thread,
on the same 2-core machine in the same minutes; MobileNetV3-Large (217 M MACs) is faster on two workers
(docs/performance.md, "iree against onnxruntime"). So a module of fewer than :data:`SMALL_WORK_MACS`
multiply-accumulates runs on the caller's thread whatever the thread count; ``--threads 1`` always did.

The count comes from the TOSA program's own shapes (one numpy run on placeholders, as the MLIR writer types
it), made once per compiled module and kept beside it in the cache (``work.json``), so that a cached start
does not pay for it again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from skriptnd.fileio import write_atomic
from skriptnd.tosa.program.build import Program
from skriptnd.tosa.program.patch_matmul import value_shapes

#: Multiply-accumulates below which a module runs on the caller's thread (see the module docstring).
SMALL_WORK_MACS = 32_000_000
WORK = "work.json"
_PRODUCTS = frozenset({"MATMUL", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"})


def program_macs(program: Program, shapes: Mapping[str, tuple[int, ...]]) -> int:
    """The multiply-accumulates of ``program``'s convolutions and matrix products (``shapes``: every value's
    shape, skriptnd.tosa.program.patch_matmul.value_shapes); element-wise work is not counted."""
    total = 0
    for o in program.ops:
        if o.name not in _PRODUCTS or len(o.inputs) < 2:
            continue
        out, x, w = shapes.get(o.output), shapes.get(o.inputs[0]), shapes.get(o.inputs[1])
        if out is None or x is None or w is None:
            continue
        if o.name == "MATMUL":  # [b, m, k] x [b, k, n]
            total += math.prod(out) * x[-1]
        elif o.name in ("CONV2D", "CONV3D"):  # filter [o, (d,) h, w, i]
            total += math.prod(out) * math.prod(w[1:])
        elif o.name == "DEPTHWISE_CONV2D":  # filter [h, w, c, m]
            total += math.prod(out) * w[0] * w[1]
        elif o.name == "TRANSPOSE_CONV2D":  # every input position scatters the filter [o, h, w, i]
            total += math.prod(x) * math.prod(w[:3])
    return total


def read_macs(folder: Path) -> int | None:
    try:
        value = json.loads((folder / WORK).read_text(encoding="utf-8"))["macs"]
        return int(value) if isinstance(value, int) and value >= 0 else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_macs(folder: Path, macs: int) -> None:
    try:
        write_atomic(folder / WORK, json.dumps({"macs": macs}))
    except OSError:  # a read-only cache: counted again next time
        pass


def module_macs(folder: Path, program: Program, inputs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> int:
    """The MACs of a compiled program: read from its cache entry, else counted and kept there."""
    macs = read_macs(folder)
    if macs is None:
        macs = program_macs(program, value_shapes(program, inputs))
        write_macs(folder, macs)
    return macs


def cpu_driver(threads: int | None, macs: int | None) -> tuple[str, str]:
    """(the driver of a CPU module asked for ``threads`` (None: IREE's default) doing ``macs`` multiply-
    accumulates (None: unknown), why: a phrase for the plan)."""
    if threads == 1:
        return "local-sync", "one thread"
    if macs is not None and macs < SMALL_WORK_MACS:
        return "local-sync", (f"{macs / 1e6:.1f} M MACs, under {SMALL_WORK_MACS / 1e6:.0f} M: on the caller's "
                              "thread, where IREE's task workers would cost more than they save")
    return "local-task", f"{threads} task workers" if threads else "IREE's task workers, one per core"
