"""Control flow (spec §2.10.1) as ONNX ``If`` and ``Loop`` nodes whose branches / body are ONNX subgraphs.

A dynamic ``if`` (a condition computed at run time) becomes ``If`` (``elif`` chains nest in the else
branch); a loop becomes ``Loop``: carried values are its loop-carried dependencies, the iteration index
is its ``iter_num``, a count its trip count, ``while``/``do-while`` conditions its condition (a pre-
condition is evaluated once before the loop and at the end of every iteration on the new values), a
scanned pack is stacked and read with ``Gather`` at the iteration index, and scan outputs are the loop's
scan outputs, split back into packs (only for loops that always run their full count: a loop that may
stop early has scan outputs of dynamic length, which a pack cannot hold).

Subgraph nodes read enclosing values by name (ONNX outer-scope references); constants and weights stay
initializers of the main graph.

The operations of branches and bodies are converted by the walker handed in (`walk.convert`, as onnx's
`reference/ops/op_if.py` receives its evaluator): this module sits below the walker and never imports it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.interop.onnx_export.core import Context, Results, Unsupported, shape

if TYPE_CHECKING:  # onnx is an optional dependency, imported when exporting
    from onnx import GraphProto, ValueInfoProto


def _elem(dtype: str) -> int:
    from onnx import TensorProto

    return {"real": TensorProto.FLOAT, "int": TensorProto.INT64, "bool": TensorProto.BOOL}[dtype]


def _child(ctx: Context) -> Context:
    """A context for a subgraph: its own node list, the enclosing names and initializers."""
    return replace(ctx, nodes=[], names=ctx.names, taken=ctx.taken, initializers=ctx.initializers)


#: The walker that converts one operation (`walk.convert`), handed in by the walker itself.
Convert = Callable[[Context, Operation], None]


def _convert_graph(ctx: Context, graph: Graph, convert: Convert) -> None:
    for op in graph.operations:
        convert(ctx, op)


def _subgraph(ctx: Context, name: str, results: list[tuple[str, Tensor]],
              inputs: list[ValueInfoProto] | None = None) -> GraphProto:
    """An ONNX GraphProto computing ``results`` ((ONNX name, tensor) pairs) with the nodes of ``ctx``."""
    from onnx import helper

    outs = []
    for value, t in results:
        out = ctx.fresh(f"{name}.out")
        ctx.nodes.append(helper.make_node("Identity", [value], [out], name=ctx.fresh(f"{name}/Identity")))
        outs.append(helper.make_tensor_value_info(out, _elem(t.dtype), None))
    return helper.make_graph(ctx.nodes, name, inputs or [], outs)


def _scalar_bool(ctx: Context, t: Tensor) -> str:
    c = ctx.value(t)
    return ctx.reshape(c, []) if shape(t) else c


def _if_chain(ctx: Context, op: Operation, k: int, convert: Convert) -> list[str]:
    """Emit into ``ctx`` the branches from ``cond{k}`` on; returns the ONNX names of the if's outputs."""
    from onnx import helper

    subs = op.subgraphs
    if f"cond{k}" not in subs:
        _convert_graph(ctx, subs["else"], convert)
        return [ctx.value(t) for t in subs["else"].outputs]
    cond = subs[f"cond{k}"]
    _convert_graph(ctx, cond, convert)
    c = _scalar_bool(ctx, cond.outputs[0])
    then_ctx = _child(ctx)
    _convert_graph(then_ctx, subs[f"then{k}"], convert)
    then_graph = _subgraph(then_ctx, ctx.fresh(f"{op.label}.then{k}"),
                           [(then_ctx.value(t), t) for t in subs[f"then{k}"].outputs])
    else_ctx = _child(ctx)
    names = _if_chain(else_ctx, op, k + 1, convert)
    else_graph = _subgraph(else_ctx, ctx.fresh(f"{op.label}.else{k}"),
                           list(zip(names, subs["else"].outputs, strict=True)))
    outs = [ctx.fresh(f"{op.label}:If") for _ in subs["else"].outputs]
    ctx.nodes.append(helper.make_node("If", [c], outs, name=ctx.fresh(f"{op.label}/If"), then_branch=then_graph,
                                      else_branch=else_graph))
    return outs


def convert_if(ctx: Context, op: Operation, convert: Convert) -> Results:
    return list(_if_chain(ctx, op, 0, convert))


def convert_loop(ctx: Context, op: Operation, convert: Convert) -> Results:
    from onnx import helper

    n_carried, n_scans = op.attribs["carried"], op.attribs["scans"]
    body = op.subgraphs["body"]
    params = body.inputs
    carried = op.inputs[:n_carried]
    scans = op.inputs[n_carried:n_carried + n_scans]
    limit = op.attribs.get("max_iterations")
    has_count = bool(op.attribs.get("has_count"))
    conditional = "pre_cond" in op.subgraphs or "post_cond" in op.subgraphs
    n_scan_outs = len(body.outputs) - n_carried
    if n_scan_outs and (conditional or has_count):
        raise Unsupported("a loop that may stop early has scan outputs of dynamic length (a pack cannot hold them)")
    if limit is None and not has_count and not conditional:
        raise Unsupported("a loop without a count, a bound or a condition")
    # trip count: min(bound, count)
    trip = None
    if has_count:
        trip = ctx.reshape(ctx.value(op.inputs[-1]), [])
        if limit is not None:
            trip = ctx.node("Min", [trip, ctx.const(np.asarray(limit, np.int64), None, "bound")])
    elif limit is not None:
        trip = ctx.const(np.asarray(limit, np.int64), None, "trip_count")
    # the initial condition: the pre-condition on the initial values
    cond = None
    if "pre_cond" in op.subgraphs:
        for p, v in zip(params[:n_carried], carried, strict=True):
            ctx.names[id(p)] = ctx.value(v)
        _convert_graph(ctx, op.subgraphs["pre_cond"], convert)
        cond = _scalar_bool(ctx, op.subgraphs["pre_cond"].outputs[0])
    stacked = [ctx.node("Concat", [ctx.unsqueeze(ctx.value(t), [0]) for t in pack], axis=0) for pack in scans]
    # the body: (iter_num, cond_in, carried..) -> (cond_out, carried.., scan outputs..)
    b = _child(ctx)
    it, cond_in = b.fresh(f"{op.label}.i"), b.fresh(f"{op.label}.cond")
    inputs = [helper.make_tensor_value_info(it, _elem("int"), []), helper.make_tensor_value_info(cond_in, _elem("bool"), [])]
    for p in params[:n_carried]:
        name = b.fresh(f"{op.label}.{p.name}")
        b.names[id(p)] = name
        inputs.append(helper.make_tensor_value_info(name, _elem(p.dtype), [d for d in p.shape]))
    for p, s in zip(params[n_carried:n_carried + n_scans], stacked, strict=True):
        b.names[id(p)] = b.node("Gather", [s, it], axis=0)
    if len(params) > n_carried + n_scans:
        b.names[id(params[-1])] = b.node("Identity", [it])
    _convert_graph(b, body, convert)
    results = [(b.value(t), t) for t in body.outputs]
    cond_out = cond_in
    for key in ("post_cond", "pre_cond"):
        if key in op.subgraphs:  # evaluated on the new values: whether the next iteration runs
            for p, (v, _) in zip(params[:n_carried], results[:n_carried], strict=True):
                b.names[id(p)] = v
            _convert_graph(b, op.subgraphs[key], convert)
            c = _scalar_bool(b, op.subgraphs[key].outputs[0])
            cond_out = c if cond_out == cond_in else b.node("And", [cond_out, c])
    b.nodes.append(helper.make_node("Identity", [cond_out], [b.fresh(f"{op.label}.continue")],
                                    name=b.fresh(f"{op.label}/continue")))
    cond_name = b.nodes[-1].output[0]
    graph = _subgraph(b, ctx.fresh(f"{op.label}.body"), results, inputs)
    graph.output.insert(0, helper.make_tensor_value_info(cond_name, _elem("bool"), []))
    outs = [ctx.fresh(f"{op.label}:Loop") for _ in body.outputs]
    ctx.nodes.append(helper.make_node("Loop", [trip or "", cond or "", *[ctx.value(t) for t in carried]], outs,
                                      name=ctx.fresh(f"{op.label}/Loop"), body=graph))
    results_out: Results = list(outs[:n_carried])
    for k, out in enumerate(outs[n_carried:]):
        pack = op.outputs[n_carried + k]
        parts = ctx.node("Split", [out, ctx.i64([1] * len(pack), "split")], outputs=len(pack), axis=0) \
            if len(pack) > 1 else [out]
        results_out.append([ctx.squeeze(x, [0]) for x in parts])
    return results_out

