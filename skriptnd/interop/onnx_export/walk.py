"""Converting one composed operation: its registered converter, else (for a composite operator) its own
@compose expanded by the composer and each component converted in turn (recursively).

The expansion is how the many composite standard operators (rms_pool, l2_norm, lstm_step, ...) reach
ONNX without a converter of their own; the direct converters exist where ONNX has the operator
(Softmax, BatchNormalization, LSTM) or where the expansion would be slow."""

from __future__ import annotations

from typing import Any

from skriptnd.compose.extents import symbolic_attribs
from skriptnd.compose.ir import Operation, flat_tensors
from skriptnd.compose.stdlib import expand, stdlib_kinds
from skriptnd.interop.onnx_export.control import convert_if, convert_loop
from skriptnd.interop.onnx_export.core import CONVERTERS, Context, Results, Unsupported
from skriptnd.semantics.values import Pack, recording


def is_composite(op: Operation) -> bool:
    return stdlib_kinds().get(op.op) == "composite"


def bind_outputs(ctx: Context, op: Operation, results: Results) -> None:
    """Record the ONNX names of ``op``'s outputs (a list per pack output)."""
    for names, t in zip(results, op.outputs, strict=True):
        if t is None or names is None:
            continue
        if isinstance(t, list):
            for n, tt in zip(names, t, strict=True):
                ctx.names[id(tt)] = n
        else:
            ctx.names[id(t)] = names


class ControlFlowUnsupported(Unsupported):
    """An if or a loop that has no ONNX form (E0843)."""


def convert(ctx: Context, op: Operation, depth: int = 0) -> None:
    """Emit ``op`` into ``ctx`` (binding its outputs), or raise Unsupported naming what is missing."""
    if op.op in ("if", "loop"):
        mark = ctx.mark()
        try:
            bind_outputs(ctx, op, (convert_if if op.op == "if" else convert_loop)(ctx, op, convert))
        except ControlFlowUnsupported:
            ctx.restore(mark)
            raise
        except Unsupported as e:
            ctx.restore(mark)
            raise ControlFlowUnsupported(str(e)) from None
        return
    if op.subgraphs:
        raise ControlFlowUnsupported(f"'{op.op}' with subgraphs")
    if symbolic_attribs(op.attribs):  # its value at the sample (the bound) would be written: refused
        name = next(k for k, v in op.attribs.items() if symbolic_attribs({k: v}))
        value = op.attribs[name]
        shown = f"[{', '.join(map(str, value))}]" if isinstance(value, Pack | list | tuple) else str(value)
        raise Unsupported(f"attribute '{name}' is given by a dynamic extent ({name}={shown}), known only when "
                          "the graph runs")
    fn = CONVERTERS.get(op.op)
    reason = None
    if fn is not None:
        mark = ctx.mark()
        saved_label, ctx.label = ctx.label, op.label or op.op
        try:
            with recording() as guards:  # decisions on a dynamic extent's sample value (see core's docstring)
                results = _dynamic_safe(fn, ctx, op)
            if guards:
                raise Unsupported(_decided(guards))
            bind_outputs(ctx, op, results)
            return
        except Unsupported as e:
            ctx.restore(mark)
            reason = str(e)
        finally:
            ctx.label = saved_label
    if not is_composite(op) or op.binding is None or op.definition is None:
        raise Unsupported(reason or f"no ONNX mapping for '{op.op}'")
    if depth > 16:
        raise Unsupported(f"'{op.op}' expands too deeply")
    _through_components(ctx, op, depth, reason)


def _through_components(ctx: Context, op: Operation, depth: int, reason: str | None) -> None:
    try:
        graph = expand(op)
    except Exception as e:  # noqa: BLE001 - any composition failure means: no ONNX mapping this way
        raise Unsupported(reason or f"cannot expand its @compose ({type(e).__name__}: {e})") from None
    ctx.keep.append(graph)
    flat = [t for v in op.inputs for t in (v if isinstance(v, list) else [v] if v is not None else [])]
    mark = ctx.mark()
    for inner, outer in zip(graph.inputs, flat, strict=True):
        ctx.names[id(inner)] = ctx.value(outer)
    try:
        for comp in graph.operations:
            convert(ctx, comp, depth + 1)
        results = []
        inner_outs = iter(graph.outputs)
        for v in op.outputs:
            if isinstance(v, list):
                results.append([ctx.value(next(inner_outs)) for _ in v])
            elif v is not None:
                results.append(ctx.value(next(inner_outs)))
            else:
                results.append(None)
    except Unsupported as e:
        ctx.restore(mark)
        why = f"component {comp.op}: {e}" if "comp" in locals() else str(e)
        raise Unsupported(f"{reason}; through its components: {why}" if reason else why) from None
    bind_outputs(ctx, op, results)


def _decided(guards: list[Any]) -> str:
    """Why a mapping that decided on dynamic extents is refused: it holds for the sample sizes only."""
    names = sorted({str(sym) for g in guards for sym in getattr(g, "free_symbols", ())})
    listed = ", ".join(f"'{n}'" for n in names) or "a dynamic extent"
    return f"the mapping depends on the size of {listed} (it holds only where {guards[0]})"


def _dynamic_safe(fn: Any, ctx: Context, op: Operation) -> Results:
    """The converter's results; one that fails on a dynamic extent (a helper that takes static sizes) is
    Unsupported, located at the operation, rather than a traceback."""
    try:
        return fn(ctx, op)
    except (TypeError, ValueError, OverflowError) as e:
        if not any(t.dynamic for t in flat_tensors(op.inputs + op.outputs)):
            raise
        raise Unsupported(f"its ONNX mapping needs static extents, and it reads a dynamic one ({e})") from None
