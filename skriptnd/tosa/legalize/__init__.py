"""Table-driven legalization of standard-library operations to TOSA 1.0 subgraphs (fp32 / bool).

``TABLE`` maps a stdlib operator name to :class:`Rule` s; a rule's ``check`` returns ``None`` when it
applies to an :class:`~skriptnd.compose.ir.Operation` (or the reason why not), its ``build`` emits the
TOSA subgraph. Composite (@compose) operators without a direct rule, or whose direct rules do not
apply, are legalized through their components (:mod:`.composite`). :func:`legalize` returns
``(Subgraph, description)`` or ``(None, reason)`` (the operation falls back to its @lower block);
:func:`run_subgraph` interprets a subgraph with :data:`skriptnd.tosa.ops.OPS`; :func:`coverage` reports a
composed graph. ``NOT_LEGALIZABLE`` lists the operators with no mapping at all, and why.

Shapes come from the operation's binding (``op.binding.env``: the stdlib's @using symbols such as the
broadcast shapes ``ex``/``ey`` or conv's ``offset``/``paddings``), so every subgraph is static.

Coverage: 146 of the 151 standard operators have rules (127 direct; 19 composites through their
components); ``NOT_LEGALIZABLE`` holds the other 5 (dynamic output shapes and loops). Within a rule,
attribute combinations TOSA cannot match exactly fall back with a reason (e.g. quantization scales
that are not powers of two). Modules: :mod:`.core` (Subgraph, Builder, run_subgraph),
:mod:`.elementwise`, :mod:`.reduce`, :mod:`.layout`, :mod:`.tensor` (matmul, conv, deconv, pools),
:mod:`.image` (resampling, grid sampling, ROI pooling, quantization), :mod:`.algo` (top_k),
:mod:`.composite`. Results agree with @lower exactly where TOSA has the primitive (data movement,
comparisons, SELECT, rounding built from FLOOR, NaN handling as the spec's ``x >? y``) and within
fp32 rounding where an identity or approximation is used (sqrt = 1/rsqrt, atan polynomial, ...).

Types: ``real`` is fp32 and ``bool`` is bool in TOSA. SkriptND ``int`` is 64-bit and TOSA integers
are at most 32-bit, so ``int`` tensors map as int32 (``Subgraph.int_values``; checked to fit where they
enter a program) where no value can wrap: indices (argmax results, gather / scatter indices), comparisons,
SELECT, MIN / MAX, data movement, and add / sub / mul whose result range (skriptnd.compose.int_ranges)
fits int32.
"""

from __future__ import annotations

from typing import Any

from skriptnd.compose import int_ranges
from skriptnd.compose.extents import symbolic_attribs
from skriptnd.compose.ir import Graph, Operation, flat_tensors
from skriptnd.compose.stdlib import stdlib_kinds
from skriptnd.tosa.legalize import algo, elementwise, image, layout, reduce, tensor
from skriptnd.tosa.legalize.composite import composite_rule
from skriptnd.tosa.legalize.core import (
    I32_MAX,
    I32_MIN,
    Builder,
    Rule,
    Subgraph,
    TosaOp,
    graph_constant,
    run_subgraph,
)
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer

__all__ = ["graph_constant", "TABLE", "NOT_LEGALIZABLE", "COMPOSITES", "Rule", "Subgraph", "TosaOp", "Builder", "legalize",
           "run_subgraph", "coverage"]


_KINDS = stdlib_kinds()
#: Composite stdlib operators: they legalize through their components when no direct rule applies.
COMPOSITES = sorted(k for k, v in _KINDS.items() if v == "composite")

TABLE: dict[str, list[Rule]] = {}
for _part in (elementwise.RULES, reduce.RULES, layout.RULES, tensor.RULES, image.RULES, algo.RULES):
    TABLE.update(_part)

#: Operators with no TOSA mapping at all (not even through components), and why.
NOT_LEGALIZABLE: dict[str, str] = {
    **elementwise.NOT_LEGALIZABLE,
    **image.NOT_LEGALIZABLE,
    "layout.nonzero": "dynamic output shape (the number of non-zero items)",
    "algo.nonmax_suppress": "data-dependent output size and sequential suppression (no TOSA equivalent)",
    "nn.lstm_loop": "its @compose is a loop over the sequence (a loop operation that 'steps' may end early) with "
                    "an output of dynamic length; this legalization maps operations, not TOSA control flow",
    "nn._jagged_lstm_loops": "a loop of lstm_loop loops over jagged sequence lengths (dynamic lengths, control "
                             "flow)",
    "nn.lstm": "lstm_loop or _jagged_lstm_loops: loops over the sequence with dynamic-length outputs (control "
               "flow); without 'steps' it legalizes outside the TABLE, as a WHILE_LOOP (skriptnd.tosa.legalize."
               "recurrent: the exports and the iree backend)",
}

for _name in COMPOSITES:
    if _name not in NOT_LEGALIZABLE:
        TABLE.setdefault(_name, []).append(composite_rule(lambda op: legalize(op)))

_BOOL_OPS = {"math.and", "math.or", "math.xor", "math.not", "math.any_reduce", "math.all_reduce", "math.any_n",
             "math.all_n"}
_ANY_TYPE = {"math.iden", "math.select", "layout.reshape", "layout.flatten", "layout.unflatten", "layout.squeeze",
             "layout.unsqueeze", "layout.transpose", "layout.concat", "layout.split", "layout.stack",
             "layout.unstack", "layout.slice", "layout.tile", "layout.pad", "layout.broadcast", "layout.uniform",
             "layout.cast"}
_INT_RESULT = {"algo.top_k", "math.argmax", "math.argmin", "math.argmax_nd", "math.argmin_nd", "math.argmax_n", "math.argmin_n"}
_INDEX_INPUT = {"image.max_roi_pool": 2, "image.avg_roi_pool": 2, "layout.gather": 1, "layout.gather_nd": 1, "layout.scatter": 1, "layout.scatter_nd": 1}
_ANY_VALUES = {"layout.scatter", "layout.scatter_nd"}  # SELECT-based: real or bool values
_CONSTANTS = {"layout.tensor", "layout.range", "layout.shape"}
_INT_REASON = ("int tensor {!r} (SkriptND int is 64-bit; TOSA integers are at most 32-bit, so int maps only "
               "for indices)")


#: Operators that map for SkriptND int tensors as TOSA int32 (the program NARROWs int inputs and WIDENs int
#: results, checking the range): those that cannot overflow, i.e. comparisons, SELECT, MIN/MAX/CLAMP (as
#: SELECTs), data movement, casts to bool/real. Integer add/sub/mul map where their result provably fits
#: int32 (:func:`_arithmetic_reason`); elsewhere they could wrap where @lower's int64 does not: numpy.
_INT_OPS = {*elementwise.CMP, "math.iden", "math.select", "math.min", "math.max", "math.clamp", "layout.reshape",
            "layout.flatten", "layout.unflatten", "layout.squeeze", "layout.unsqueeze", "layout.transpose",
            "layout.concat", "layout.split", "layout.stack", "layout.unstack", "layout.slice", "layout.tile",
            "layout.broadcast"}
_INT32 = (I32_MIN, I32_MAX)


def _int32_range(t: Any) -> tuple[int, int]:
    """What an int operand of a compiled operation can hold: its analysed range (skriptnd.compose.int_ranges)
    within int32, as every int value inside a program is (checked where it enters, exact where computed)."""
    r = t.value_range
    if r is None or r[1] < I32_MIN or r[0] > I32_MAX:
        return _INT32
    return max(r[0], I32_MIN), min(r[1], I32_MAX)


#: The ints float32 holds exactly.
FLOAT32_EXACT = 2 ** 24


def _within(t: Any, bound: int) -> bool:
    r = t.value_range
    return r is not None and -bound <= r[0] and r[1] <= bound


def _arithmetic_reason(op: Any, ins: list[Any]) -> str | None:
    """None where int32 add/sub/mul of the operands' ranges cannot wrap (then TOSA ADD/SUB/MUL computes
    exactly @lower's int64 result), else why the operation stays on numpy."""
    if len(ins) != 2 or any(t.dtype != "int" for t in ins):
        return f"{op.op} of {' and '.join(t.dtype for t in ins)} tensors"
    lo, hi = int_ranges.ARITHMETIC[op.op](_int32_range(ins[0]), _int32_range(ins[1]))
    if I32_MIN <= lo and hi <= I32_MAX:
        return None
    known = ", ".join(f"{t.name!r} in [{r[0]}, {r[1]}]" if (r := t.value_range) else f"{t.name!r} unbounded"
                      for t in ins)
    return (f"int {op.op.split('.')[1]} could wrap in int32 (TOSA's integers; SkriptND int is 64-bit): "
            f"{known} (skriptnd.compose.int_ranges)")


def _int_reason(op: Operation, ins: list[Any], outs: list[Any]) -> str | None:
    name = op.op
    bad = next(t for t in ins + outs if t.dtype == "int")
    if name in int_ranges.ARITHMETIC:
        return _arithmetic_reason(op, ins)
    if name == "layout.cast":
        src, dst = op.inputs[0].dtype, op.outputs[0].dtype
        ok = src == dst or (src == "int" and dst in ("bool", "real")) or (src == "bool" and dst == "int")
        return None if ok else f"a cast from {src} to {dst} (TOSA CAST rounds real to int to nearest)"
    if name in _INT_OPS:
        if name in elementwise.CMP and any(t.dtype != "int" for t in ins):
            if {t.dtype for t in ins} != {"int", "real"}:
                return f"{bad.dtype} tensor {bad.name!r} (a comparison of int with another type)"
            # an int compared with a real (erratum L2): exact as float32 within +-2**24 (@lower compares in
            # float64); beyond that float32 would round the int, so numpy compares it
            loose = [t for t in ins if t.dtype == "int" and not _within(t, FLOAT32_EXACT)]
            return (f"int tensor {loose[0].name!r} compared with a real is not proven within +-2**24 (float32 "
                    "would round it; skriptnd.compose.int_ranges)") if loose else None
        return None
    return _INT_REASON.format(bad.name)


def _dtype_reason(op: Operation) -> str | None:
    if symbolic_attribs(op.attribs):  # concrete only when the graph runs (skriptnd.compose.extents)
        return "an attribute given by a dynamic extent"
    ins, outs = flat_tensors(op.inputs), flat_tensors(op.outputs)
    for t in ins + outs:
        if any(d is None for d in t.shape):
            return "dynamic shape"
        if 0 in t.shape:
            return f"empty tensor {t.name!r} (TOSA extents must be positive)"
    name = op.op
    if name in _CONSTANTS:
        return None
    for t in ins + outs:
        if t.dtype == "str":
            return f"str tensor {t.name!r}"
    if name in _INT_RESULT:
        bad = [t for t in ins if t.dtype != "real"]
        return f"{bad[0].dtype} tensor {bad[0].name!r} (argmax/argmin map for real inputs)" if bad else None
    if name in _INDEX_INPUT:
        k = _INDEX_INPUT[name]
        for i, v in enumerate(op.inputs):
            if i == k:
                if v.dtype != "int":
                    return f"{v.dtype} index tensor {v.name!r}"
            elif v is not None and v.dtype != "real" and not (name in _ANY_VALUES and v.dtype == "bool") and not (
                    name in ("layout.gather", "layout.gather_nd") and v.dtype in ("int", "bool")):
                return f"{v.dtype} tensor {v.name!r} (TOSA GATHER takes fp32 values here)"
        return None
    if any(t.dtype == "int" for t in ins + outs):
        return _int_reason(op, ins, outs)
    if name in _BOOL_OPS:
        want_in = want_out = "bool"
    elif name in elementwise.CMP:
        want_in, want_out = "real", "bool"
    elif name in _ANY_TYPE:
        return None  # real or bool; select's condition is bool by its signature
    else:
        want_in = want_out = "real"
    for t in ins:
        if t.dtype != want_in:
            return f"{t.dtype} tensor {t.name!r} ({name} maps for {want_in} operands)"
    for t in outs:
        if t.dtype != want_out:
            return f"{t.dtype} tensor {t.name!r} ({name} maps for {want_out} results)"
    return None


def _mark_int_results(op: Operation, sg: Subgraph) -> Subgraph:
    """The int32 results of int outputs (see _INT_OPS) are marked, so that a program WIDENs them to int64."""
    for t, o in zip(op.outputs, sg.outputs, strict=True):
        for tt, oo in zip(t if isinstance(t, list) else [t], o if isinstance(o, list) else [o], strict=True):
            if tt is not None and tt.dtype == "int" and op.op not in _CONSTANTS:
                sg.int_values.add(oo)
    return sg


def legalize(op: Operation) -> tuple[Subgraph | None, str]:
    """``(subgraph, rule description)``, or ``(None, reason)`` when the operation falls back to @lower."""
    if op.op in NOT_LEGALIZABLE:
        return None, NOT_LEGALIZABLE[op.op]
    rules = TABLE.get(op.op)
    if not rules:
        return None, f"no TOSA mapping for {op.op}"
    if op.binding is None:
        return None, "no binding"
    if op.subgraphs:
        return None, f"control flow ({op.op})"
    reason = _dtype_reason(op)
    reasons = []
    for rule in rules:
        is_composite = rule.description.startswith("through its components")
        if reason is not None and not is_composite:
            if reason not in reasons:
                reasons.append(reason)
            continue
        try:
            why = rule.check(op)
            if why is None:
                return _mark_int_results(op, rule.build(op)), rule.description
        except Exception as e:  # noqa: BLE001 - a rule that cannot handle these attributes: fall back, say why
            why = f"the rule failed on these attributes ({type(e).__name__}: {e})"
        reasons.append(why)
    return None, "; ".join(reasons)


def coverage(graph: Graph) -> list[tuple[Any, bool, str]]:
    """``(operation, legalized, reason)`` for every operation of ``graph`` (and its subgraphs)."""
    result = []
    recurrent = RecurrentLegalizer()  # in graph order: a layer reading a legalized layer's Y
    for op in graph.operations:
        if op.subgraphs:
            result.append((op, False, f"control flow ({op.op})"))
            for sub in op.subgraphs.values():
                result.extend(coverage(sub))
            continue
        if recurrent(op) is not None:
            result.append((op, True, RECURRENT.format(k=recurrent.steps, k2=2 * recurrent.steps)))
            continue
        sg, reason = legalize(op)
        if op.op == "nn.lstm" and sg is None:
            reason = STEPS_REASON if len(op.inputs) > 6 and op.inputs[6] is not None else reason
        result.append((op, sg is not None, reason))
    return result


#: coverage's description of a static-length recurrent layer (not a TABLE rule: skriptnd.tosa.legalize.recurrent)
RECURRENT = ("static length (skriptnd.tosa.legalize.recurrent): a WHILE_LOOP of {k}-step iterations, unrolled "
             "below {k2} steps; for the exports and the iree backend, the numpy backend runs its native kernel")
STEPS_REASON = ("'steps' ends the loop at a step count known only at run time, so Y has a dynamic length, which TOSA "
                "cannot type: call nn.lstm without 'steps' (it then runs all of X's steps) to export it")
