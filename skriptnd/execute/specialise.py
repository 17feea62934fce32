"""A graph with dynamic extents bound to one run's input shapes (spec §3.1; issue 25, item 5).

Composition binds operations to shapes, with dynamic extents (`x: real[n|8, 3, h|64, w|64]`) left open.
The executor can run such a graph as it is, binding each operation anew to its actual argument shapes as it
goes (Executor._specialised); but then no run of operations is planned as a whole: nothing legalizes to a
TOSA program (skriptnd.tosa.legalize refuses dynamic shapes), nothing is folded, and every operation runs on
its own. :func:`specialise` makes, for one set of input shapes, the graph with every operation bound to
the static shapes that follow from them (:func:`bound_to`, the same binding the executor does), so that a
backend plans it as it plans a static graph: one plan per distinct input shapes, and never a composition.

A graph this cannot describe statically (control flow, whose subgraphs read the enclosing tensors by
identity; an extent only the data gives, e.g. `layout.nonzero`; a pack whose length changes; @update
state) gives None, and the caller runs the composed graph as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from skriptnd.compose.extents import bind_extents, extent_symbols, resolve_attribs, symbolic_attribs
from skriptnd.compose.ir import Graph, Operation, Tensor, Value, flat_tensors
from skriptnd.semantics.binding import Site, bind
from skriptnd.semantics.values import Pack, TensorValue
from skriptnd.source import NO_SPAN, Span

__all__ = ["bound_to", "specialise"]

#: A value's shape: a tuple, a tuple of tuples for a pack, None for an omitted optional.
Shape = Any


def _span(op: Operation) -> Span:
    return op.span if isinstance(op.span, Span) else NO_SPAN


def bound_to(op: Operation, shapes: Sequence[Shape], concrete: bool = False) -> Operation:
    """``op`` bound anew to argument ``shapes`` (§3.1: output shapes inferred again from the actual input
    shapes, with the same attributes and generic types): its inputs and outputs are fresh tensors of those
    shapes, named ``%in`` / ``%out``. ``concrete``: its attributes were just made concrete from dynamic
    extents, so the defaults computed from them are taken from the new binding (see Composer._atomic)."""
    assert op.binding is not None and op.definition is not None

    def typed(dtype: str, shape: tuple[int, ...]) -> Tensor:
        return Tensor(name="%in", dtype=dtype, shape=shape, kind="input")

    inputs: list[Value] = []
    for value, shape in zip(op.inputs, shapes, strict=True):
        if shape is None or value is None:
            inputs.append(None)
        elif isinstance(value, list):
            inputs.append([typed(t.dtype, s) for t, s in zip(value, shape, strict=False)])
        else:
            inputs.append(typed(value.dtype, shape))
    bound = [None if v is None else Pack([TensorValue(t.dtype, t.shape) for t in v]) if isinstance(v, list)
             else TensorValue(v.dtype, v.shape) for v in inputs]
    attribs = {k: v for k, v in op.attribs.items() if v is not None}
    type_args = [op.dtypes[d.name] for d in op.binding.signature.dtypes if d.name in op.dtypes]
    binding = bind(op.definition, attribs, bound, type_args, Site(span=_span(op)))
    outputs: list[Value] = []
    for info in binding.outputs:
        if info.shapes is not None:
            outputs.append([Tensor("%out", info.dtype, tuple(s)) for s in info.shapes])
        elif info.shape is None:
            outputs.append(None)
        else:
            outputs.append(Tensor("%out", info.dtype, tuple(info.shape), bounds=info.bounds))
    special = replace(op, inputs=inputs, outputs=outputs, binding=binding)
    if concrete:
        special.attribs = {**op.attribs, **{a.name: binding.env.get(a.name) for a in binding.signature.attribs}}
    return special


def composed_shape(v: Value) -> Shape:
    """The composed shape of an operation's input or output (None extents where dynamic; a tuple of shapes
    for a pack)."""
    if v is None:
        return None
    if isinstance(v, list):
        return tuple(t.shape for t in v)
    return v.shape


def _static(shape: Shape) -> bool:
    if shape is None:
        return True
    if shape and isinstance(shape[0], tuple):
        return all(_static(s) for s in shape)
    return all(d is not None for d in shape)


def specialise(graph: Graph, shapes: Mapping[str, tuple[int, ...]], extents: dict[Any, int]) -> Graph | None:
    """``graph`` with its inputs of ``shapes`` (checked to fit by the caller) and every operation bound to
    the shapes that follow; ``extents``: the values of the input extents' symbols for these shapes
    (skriptnd.compose.extents.input_extents). Variables and constants are the graph's own tensors (their
    values are found as for the graph); asserts on dynamic extents are the caller's to judge (they depend on
    the shapes alone). None where the graph cannot be bound statically (see the module docstring)."""
    if graph.updates or graph.awaiting:
        return None
    extents = dict(extents)
    renamed: dict[int, Tensor] = {}
    for t in graph.inputs:
        shape = shapes.get(t.name)
        if shape is None or len(shape) != t.rank:
            return None
        if t.dynamic:
            renamed[id(t)] = replace(t, shape=tuple(int(d) for d in shape), bounds=None, symbolic=None)

    def mapped(v: Value) -> Value:
        if v is None:
            return None
        if isinstance(v, list):
            return [renamed.get(id(t), t) for t in v]
        return renamed.get(id(v), v)

    operations: list[Operation] = []
    for op in graph.operations:
        if op.subgraphs:
            return None
        inputs = [mapped(v) for v in op.inputs]
        symbolic = symbolic_attribs(op.attribs)
        changed = symbolic or any(a is not b for v, w in zip(op.inputs, inputs, strict=True)
                                  for a, b in zip(flat_tensors([v]), flat_tensors([w]), strict=True))
        if not changed:
            if not all(_static(composed_shape(v)) for v in op.outputs):
                return None  # an extent the data gives (layout.nonzero): known only when it runs
            operations.append(op)
            continue
        if op.binding is None or op.definition is None:
            return None
        given = [composed_shape(v) for v in inputs]
        if not all(_static(s) for s in given):
            return None
        source = op
        if symbolic:
            bind_extents(flat_tensors(op.inputs), [t.shape for t in flat_tensors(inputs)], extents)
            attribs = resolve_attribs(op.attribs, extents)
            if isinstance(attribs, str):
                return None
            source = replace(op, attribs=attribs)
        special = bound_to(source, given, concrete=symbolic)
        outputs: list[Value] = []
        for old, new in zip(op.outputs, special.outputs, strict=True):
            if old is None or new is None:
                if old is not new:
                    return None
                outputs.append(None)
            elif isinstance(old, list) != isinstance(new, list):
                return None
            elif isinstance(old, list):
                if len(old) != len(new) or not all(_static(t.shape) for t in new):
                    return None  # a pack of dynamic length
                outputs.append([_renamed(renamed, o, n) for o, n in zip(old, new, strict=True)])
            else:
                if not _static(new.shape):
                    return None
                outputs.append(_renamed(renamed, old, new))
        for old_t, new_t in zip(flat_tensors(op.outputs), flat_tensors(outputs), strict=True):
            for k, sym in extent_symbols(old_t):  # a later attribute may read this extent (`y.shape[1]`)
                extents[sym] = int(new_t.shape[k])
        operations.append(replace(special, inputs=inputs, outputs=outputs))
    tensors = [renamed.get(id(t), t) for t in graph.tensors]
    outputs_ = [renamed.get(id(t), t) for t in graph.outputs]
    if any(t.dynamic for t in outputs_):
        return None
    return replace(graph, inputs=[renamed.get(id(t), t) for t in graph.inputs], outputs=outputs_,
                   operations=operations, tensors=tensors, run_asserts=None, rebind=None)


def _renamed(renamed: dict[int, Tensor], old: Tensor, new: Tensor) -> Tensor:
    """The graph's tensor ``old`` with the shape the new binding gives it (its name, kind and span kept)."""
    if old.shape == new.shape and not old.dynamic:
        return old
    t = replace(old, shape=new.shape, bounds=None, symbolic=None)
    renamed[id(old)] = t
    return t

