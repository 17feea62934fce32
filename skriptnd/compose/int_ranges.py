"""Value ranges of a composed graph's ``int`` tensors: a forward interval analysis.

SkriptND ``int`` is 64-bit; TOSA integers are at most 32-bit. A compiled program holds ``int`` tensors as
int32 (checked to fit where they enter it), so integer arithmetic there could wrap where @lower's int64
does not. This analysis gives each ``int`` tensor an interval ``(lo, hi)`` that holds every value @lower
can compute for it (``Tensor.value_range``; None: nothing known), so that skriptnd.tosa.legalize compiles
an int ``add`` / ``sub`` / ``mul`` exactly where its result provably fits int32 (e.g. ``clamp(i, -n-1, -1)
+ n``, the ONNX importer's wrap of negative gather indices) and leaves it to numpy elsewhere.

The intervals come from constants' values, from operators whose results are among their operands'
values (data movement, ``select``, ``min`` / ``max`` / ``clamp``), from ``bool -> int`` casts, argmax-like
index results, and interval arithmetic for ``add`` / ``sub`` / ``mul`` / ``neg`` / ``abs`` (None where the
exact result could leave int64, since @lower wraps there). Graph inputs and variables are unknown: their
range is checked where a compiled program takes them (int32), which is what the legalization assumes.
Operations with subgraphs (control flow) give unknown results; their bodies are not analysed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor

Range = tuple[int, int]
I64_MIN, I64_MAX = -(2 ** 63), 2 ** 63 - 1

#: Operators whose int results are values of their data inputs (by input position; None: all inputs).
_AMONG_INPUTS: dict[str, tuple[int, ...] | None] = {
    **{name: (0,) for name in (
        "math.iden", "layout.reshape", "layout.flatten", "layout.unflatten", "layout.squeeze", "layout.unsqueeze",
        "layout.transpose", "layout.split", "layout.unstack", "layout.slice", "layout.tile", "layout.broadcast",
        "layout.gather", "layout.gather_nd")},
    "layout.concat": None, "layout.stack": None, "math.min": None, "math.max": None, "math.min_n": None,
    "math.max_n": None, "layout.scatter": (0, 2), "layout.scatter_nd": (0, 2),
    "math.select": (1, 2),
}
#: Operators whose int results index their first input (values in [0, its element count)).
_INDEX_RESULT = {"math.argmax", "math.argmin", "math.argmax_nd", "math.argmin_nd", "algo.top_k"}


def _fits(lo: int, hi: int) -> Range | None:
    return (lo, hi) if I64_MIN <= lo and hi <= I64_MAX else None


def _hull(ranges: list[Range | None]) -> Range | None:
    if not ranges or any(r is None for r in ranges):
        return None
    return min(r[0] for r in ranges), max(r[1] for r in ranges)  # type: ignore[index]


def add(a: Range, b: Range) -> Range:
    return a[0] + b[0], a[1] + b[1]


def sub(a: Range, b: Range) -> Range:
    return a[0] - b[1], a[1] - b[0]


def mul(a: Range, b: Range) -> Range:
    products = [x * y for x in a for y in b]
    return min(products), max(products)


#: Exact integer interval arithmetic of the int operators that can overflow (unbounded Python ints).
ARITHMETIC: dict[str, Callable[[Range, Range], Range]] = {"math.add": add, "math.sub": sub, "math.mul": mul}


def _clamp(x: Range | None, a: Range | None, b: Range | None) -> Range | None:
    """@lower: ``x < a ? a : x > b ? b : x``: a value of ``a``, of ``b``, or ``x`` within [a.lo, b.hi]."""
    if a is None or b is None:
        return None
    inner = (max(x[0], a[0]) if x else a[0], min(x[1], b[1]) if x else b[1])
    return min(a[0], b[0], inner[0]), max(a[1], b[1], inner[1])


def _flat(values: list) -> list[Tensor | None]:
    return [t for v in values for t in (v if isinstance(v, list) else [v])]


def _of(t: Tensor | None) -> Range | None:
    if t is None or t.dtype != "int":
        return None
    return t.value_range


def _result(op: Operation) -> Range | None:
    name = op.op
    ins = _flat(op.inputs)
    if name in ARITHMETIC and len(ins) == 2:
        a, b = _of(ins[0]), _of(ins[1])
        return None if a is None or b is None else _fits(*ARITHMETIC[name](a, b))
    if name == "math.neg" and ins and (x := _of(ins[0])) is not None:
        return _fits(-x[1], -x[0])
    if name == "math.abs" and ins and (x := _of(ins[0])) is not None:
        lo = 0 if x[0] <= 0 <= x[1] else min(abs(x[0]), abs(x[1]))
        return _fits(lo, max(abs(x[0]), abs(x[1])))
    if name == "math.clamp" and len(ins) == 3:
        return _clamp(_of(ins[0]), _of(ins[1]), _of(ins[2]))
    if name == "layout.cast" and ins and ins[0] is not None and ins[0].dtype == "bool":
        return 0, 1
    if name == "layout.cast" and ins and ins[0] is not None and ins[0].dtype == "int":
        return _of(ins[0])
    if name in _INDEX_RESULT and ins and ins[0] is not None:
        if any(d is None for d in ins[0].shape):  # a dynamic extent: no static bound
            return None
        return 0, max(int(np.prod(ins[0].shape, dtype=np.int64)) - 1, 0)
    if name in _AMONG_INPUTS:
        positions = _AMONG_INPUTS[name]
        picked = ins if positions is None else [op.inputs[i] for i in positions if i < len(op.inputs)]
        data = [t for t in _flat(picked) if t is not None and t.dtype == "int"]
        return _hull([_of(t) for t in data])
    return None


def annotate(graph: Graph) -> None:
    """Set ``value_range`` on every int tensor of ``graph`` (constants from their values, results in order)."""
    def seed(t: Tensor | None) -> None:
        if t is not None and t.dtype == "int" and t.value is not None and t.value_range is None:
            a = np.asarray(t.value)
            if a.size and np.issubdtype(a.dtype, np.integer):
                t.value_range = int(a.min()), int(a.max())

    for t in graph.tensors:
        seed(t)
    for op in graph.operations:
        for t in _flat(op.inputs):
            seed(t)
        if op.subgraphs:
            continue
        results = [t for t in _flat(op.outputs) if t is not None and t.dtype == "int" and t.value is None]
        if not results:
            continue
        if op.op == "algo.top_k":  # values (its data's), then indices
            values, indices = _flat(op.outputs)[:2]
            if values is not None and values.dtype == "int":
                values.value_range = _of(_flat(op.inputs)[0])
            if indices is not None and indices.dtype == "int":
                indices.value_range = _result(op)
            continue
        r = _result(op)
        for t in results:
            t.value_range = r
