"""Composite (@compose) standard operators without a direct rule: legalized through their
components. The operation is expanded with the composer (its own @compose, as the executor does)
and every component is legalized in turn (recursively); the component subgraphs are inlined into
one subgraph. Components that are graph constants (e.g. an ``epsilon`` scalar, avg_pool's ones)
become subgraph constants."""

from __future__ import annotations

from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation, Tensor
from skriptnd.compose.stdlib import expand
from skriptnd.tosa.legalize.core import Legalizer, Rule, Subgraph, TosaOp

_NUMPY = {"real": np.float32, "int": np.int64, "bool": np.bool_}


class CompositeError(Exception):
    pass


def through_components(op: Operation, legalize: Legalizer) -> tuple[Subgraph | None, str]:
    """(subgraph, '') inlining the legalized components of ``op``, or (None, why not)."""
    try:
        graph = expand(op)
    except Exception as e:  # noqa: BLE001 - any composition failure means: no TOSA mapping this way
        return None, f"cannot expand its @compose ({type(e).__name__}: {e})"
    names: dict[int, str] = {}
    sg = Subgraph(inputs=[], outputs=[])
    flat_inputs = iter(graph.inputs)
    for i, v in enumerate(op.inputs):
        if isinstance(v, list):
            sg.inputs.append([])
            for j, _ in enumerate(v):
                name = f"in{i}_{j}"
                sg.inputs[-1].append(name)
                names[id(next(flat_inputs))] = name
        elif v is None:
            sg.inputs.append(None)
        else:
            name = f"in{i}"
            sg.inputs.append(name)
            names[id(next(flat_inputs))] = name
            if v.dtype == "int":
                sg.int_values.add(name)
    counter = [0]

    def value(t: Tensor) -> str:
        if id(t) in names:
            return names[id(t)]
        if t.value is not None and t.kind in ("constant", "variable", "intermediate"):
            a = np.asarray(t.value, _NUMPY.get(t.dtype, np.float32))
            shape = [int(d) for d in t.shape]
            a = np.broadcast_to(a, shape).copy() if a.size == 1 else a.reshape(shape)
            if a.dtype == np.int64:
                raise CompositeError(f"int constant {t.name!r} (SkriptND int is 64-bit, TOSA int32)")
            name = f"k{len(sg.constants)}"
            sg.constants[name] = a
            names[id(t)] = name
            return name
        raise CompositeError(f"tensor {t.name!r} has no producer in the expansion")

    for k, comp in enumerate(graph.operations):
        if comp.subgraphs:
            return None, f"component {comp.op} is control flow"
        sub, why = legalize(comp)
        if sub is None:
            return None, f"component {comp.op}: {why}"
        prefix = f"p{k}_"
        local: dict[str, str] = {}
        try:
            for names_in, t in zip(sub.inputs, comp.inputs, strict=True):
                if isinstance(names_in, list):
                    for n, tt in zip(names_in, t, strict=True):
                        local[n] = value(tt)
                elif names_in is not None:
                    local[names_in] = value(t)
        except CompositeError as e:
            return None, f"component {comp.op}: {e}"
        if any(n in sub.int_values for n in local) or any(
                (n in sub.int_values) for o in sub.outputs for n in (o if isinstance(o, list) else [o])):
            return None, f"component {comp.op} has int tensors"
        for n, a in sub.constants.items():
            sg.constants[prefix + n] = a
            local[n] = prefix + n
        for o in sub.ops:
            counter[0] += 1
            out = f"{prefix}{o.output}"
            sg.ops.append(TosaOp(o.name, [local.get(i, prefix + i) for i in o.inputs], dict(o.attrs), out))
            local[o.output] = out
        for names_out, t in zip(sub.outputs, comp.outputs, strict=True):
            if isinstance(names_out, list):
                for n, tt in zip(names_out, t, strict=True):
                    names[id(tt)] = local[n]
            elif t is not None:
                names[id(t)] = local[names_out]
    outs: list[Any] = []
    used: set[str] = set()
    flat_outputs = iter(graph.outputs)
    for v in op.outputs:
        items = v if isinstance(v, list) else [v]
        got = []
        for _ in items:
            t = next(flat_outputs)
            try:
                n = value(t)
            except CompositeError as e:
                return None, str(e)
            if n in used or n in sg.constants or any(n == i or (isinstance(i, list) and n in i) for i in sg.inputs):
                fresh = f"o{len(sg.ops)}"
                sg.ops.append(TosaOp("IDENTITY", [n], {}, fresh))
                n = fresh
            used.add(n)
            got.append(n)
        outs.append(got if isinstance(v, list) else got[0])
    sg.outputs = outs
    return sg, ""


def composite_rule(legalize: Legalizer) -> Rule:
    """A rule for a composite operator; its check expands and legalizes (cached on the operation)."""
    cache: dict[int, tuple[Any, Subgraph | None, str]] = {}

    def attempt(op: Operation) -> tuple[Subgraph | None, str]:
        hit = cache.get(id(op))
        if hit is None or hit[0] is not op:
            hit = (op, *through_components(op, legalize))
            cache[id(op)] = hit
            if len(cache) > 256:
                cache.pop(next(iter(cache)))
        return hit[1], hit[2]

    def check(op: Operation) -> str | None:
        sg, why = attempt(op)
        return None if sg is not None else f"through its components: {why}"

    def build(op: Operation) -> Subgraph:
        sg, _ = attempt(op)
        assert sg is not None
        return sg

    return Rule("through its components (its @compose expanded, each component legalized)", build, check)
