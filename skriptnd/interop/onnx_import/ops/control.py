"""ONNX control flow (`If`, `Loop`) -> SkriptND control flow (spec §2.10.1).

An `If` whose condition is known at import time (exported models often branch on shapes) is inlined:
the taken branch's nodes are converted in place. A condition computed at run time becomes a dynamic
`if c then { ... yield ...; } else { ... yield ...; }`; a `Loop` becomes a `with ... while g do..(i -> M)`
loop whose carried values are the ONNX loop-carried dependencies (the condition is one of them when the
loop has one). Subgraph nodes go through the same converter registry; outer-scope ONNX names resolve to
the SkriptND names already bound. Scan outputs become a pack stacked after the loop, so they need a
constant trip count and no condition (a pack's length must be known)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node, value_of
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.registry import converter
from skriptnd.interop.writer import Call

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import GraphProto


def _convert_nodes(ctx: Context, graph: GraphProto) -> None:
    """Convert a subgraph's nodes with the importer's walker (`ctx.convert_node`, handed in by the importer)."""
    assert ctx.convert_node is not None, "the importer hands its walker in"
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.name not in ctx.values or ctx.values[vi.name].shape is None:
            ctx.values[vi.name] = value_of(vi)
    outer = ctx.node
    for proto in graph.node:
        inner = Node.of(proto)
        ctx.node, ctx._label_used = inner, False
        ctx.convert_node(ctx, inner)
    ctx.node, ctx._label_used = outer, False


def _block(ctx: Context, graph: GraphProto, bind: dict[str, str], results: list[str]) -> str:
    """`{ statements; yield results; }` for a subgraph: its nodes are converted into a body of their own;
    the names they bind stay local to the block (constants they declare are the graph's)."""
    saved_body, saved_bound = ctx.body, dict(ctx.bound)
    ctx.body = []
    ctx.bound.update(bind)
    try:
        _convert_nodes(ctx, graph)
        yields = [ctx.arg(name) for name in results]
        body = ctx.body
    finally:
        declared = {d.name for d in [*ctx.constants, *ctx.variables]}
        kept = {k: v for k, v in ctx.bound.items() if v in declared}
        ctx.body, ctx.bound = saved_body, saved_bound
        ctx.bound.update(kept)
    for item in body:
        if isinstance(item, Call) and "." in item.op:
            ctx.imports[item.op.rpartition(".")[0]] = None
    lines = [s.text() if isinstance(s, Call) else s for s in body]
    return "{ " + " ".join([*lines, f"yield {', '.join(yields)};"]) + " }"


def _scalar(ctx: Context, name: str, what: str) -> str:
    """The input as a rank-0 tensor (ONNX allows a one-element tensor for conditions and counts)."""
    shape = ctx.shape(name)
    if shape == ():
        return ctx.arg(name)
    if any(d != 1 for d in shape):
        raise ImportProblem("E0807", f"{ctx.here}: its {what} must hold a single element, not shape {list(shape)}")
    return ctx.emit("layout.reshape", [ctx.arg(name)], {"shape": []}, outputs=ctx.fresh(what), label=False)


@converter("If", target="`if c then { ... } else { ... }` (a condition known at import time: the taken "
           "branch, inline)", caveats="both branches must give the same types and shapes (SkriptND's `if` "
           "has one result type)")
def _if(ctx: Context, node: Node) -> None:
    cond = ctx.const(node.input(0))
    if cond is not None:
        _inline(ctx, node, node.attr("then_branch") if bool(np.asarray(cond).reshape(-1)[0])
                else node.attr("else_branch"))
        return
    c = _scalar(ctx, node.input(0), "cond")
    then_graph, else_graph = node.attr("then_branch"), node.attr("else_branch")
    for k in range(len(node.outputs)):
        shapes = {tuple(ctx.values.get(g.output[k].name, value_of(g.output[k])).shape or ())
                  for g in (then_graph, else_graph)}
        if len(shapes) > 1 and all(all(isinstance(d, int) for d in s) for s in shapes):
            raise ImportProblem("E0807", f"{node.where}: its branches give output {k} different shapes "
                                f"({' vs '.join(str(list(s)) for s in shapes)}); a SkriptND `if` has one result "
                                "shape")
    then_text = _block(ctx, then_graph, {}, [o.name for o in then_graph.output])
    else_text = _block(ctx, else_graph, {}, [o.name for o in else_graph.output])
    outs = [ctx.out(k) for k in range(len(node.outputs))]
    ctx.body.append(f"{', '.join(outs)} = if {c} then {then_text} else {else_text};")


def _inline(ctx: Context, node: Node, branch: GraphProto) -> None:
    """Exported models branch on shapes (known at import): the taken branch's nodes are converted in
    place and its outputs become the If's outputs."""
    _convert_nodes(ctx, branch)
    for k, vi in enumerate(branch.output):
        if vi.name in ctx.consts and vi.name not in ctx.bound:
            ctx.consts[node.outputs[k]] = ctx.consts[vi.name]
            continue
        ctx.emit("math.iden", [ctx.arg(vi.name)], outputs=ctx.out(k))


def _passes_condition(body: GraphProto) -> bool:
    """True when the body gives its condition input back unchanged (a for loop written as a Loop)."""
    cond_in, cond_out = body.input[1].name, body.output[0].name
    if cond_out == cond_in:
        return True
    return any(n.op_type == "Identity" and list(n.output) == [cond_out] and list(n.input) == [cond_in]
               for n in body.node)


@converter("Loop", target="`with v = v0, g = cond while g do..(i -> M) { ... }`",
           caveats="scan outputs need a constant trip count and no condition; a loop with neither count nor "
           "condition is refused")
def _loop(ctx: Context, node: Node) -> None:
    body = node.attr("body")
    trip, cond = node.input(0), node.input(1)
    carried0 = node.inputs[2:]
    n = len(carried0)
    scans = list(body.output[1 + n:])
    # an omitted condition starts true; the body's condition output decides the next iteration either
    # way (onnxruntime's reading of the spec), unless the body passes its condition input through
    cond_value = ctx.const(cond) if cond else np.array(True)
    count_only = cond_value is not None and bool(np.asarray(cond_value).reshape(-1)[0]) and _passes_condition(body)
    if cond_value is not None and not bool(np.asarray(cond_value).reshape(-1)[0]):
        for k in range(n):  # never runs: the outputs are the initial values
            ctx.emit("math.iden", [ctx.arg(carried0[k])], outputs=ctx.out(k))
        if scans:
            raise ImportProblem("E0807", f"{node.where}: a loop that never runs has empty scan outputs, which "
                                "SkriptND cannot declare")
        return
    if not trip and count_only:
        raise ImportProblem("E0807", f"{node.where}: a Loop with neither a trip count nor a condition never ends")
    trip_count = ctx.const(trip) if trip else None
    if scans and not (count_only and trip_count is not None):
        raise ImportProblem("E0808", f"{node.where}: its scan outputs have a length known only at run time "
                            "(the loop has a condition or a computed trip count); SkriptND stacks scan outputs "
                            "from a pack, whose length must be known at import time",
                            hint="give the loop a constant trip count (its inputs with --input-shape"
                            + ("" if ctx.fold_constants else " or --fold-constants") + "), or return the values as "
                            "carried ones")
    if scans and int(np.asarray(trip_count).reshape(-1)[0]) < 1:
        raise ImportProblem("E0807", f"{node.where}: a loop with scan outputs must run at least once")
    inits = []
    for k, name in enumerate(carried0):
        if not name:
            raise ImportProblem("E0807", f"{node.where}: loop-carried value {k} has no initial value")
        inits.append(ctx.arg(name))
    bind: dict[str, str] = {}
    carried = [ctx.names(vi.name) for vi in body.input[2:]]
    for vi, name, init in zip(body.input[2:], carried, carried0, strict=True):
        bind[vi.name] = name
        if vi.name not in ctx.values or ctx.values[vi.name].shape is None:
            ctx.values[vi.name] = ctx.values.get(init) or value_of(vi)
    decls = [f"{name} = {init}" for name, init in zip(carried, inits, strict=True)]
    head = ""
    if not count_only:
        g = ctx.fresh("go")
        decls.append(f"{g} = {_scalar(ctx, cond, 'cond') if cond else ctx.literal_arg(np.array(True), 'go')}")
        bind[body.input[1].name] = g
        head = f" while {g}"
    elif body.input[1].name:
        bind[body.input[1].name] = ctx.literal_arg(np.array(True), "go")
    index = ""
    if body.input[0].name:
        index = ctx.fresh("i")
        bind[body.input[0].name] = index
        ctx.values.setdefault(body.input[0].name, ctx.values.get(body.input[0].name) or value_of(body.input[0]))
    count = None
    if trip_count is not None:
        count = str(int(np.asarray(trip_count).reshape(-1)[0]))
    elif trip:
        count = _scalar(ctx, trip, "count")
    if index:
        repeat = f"do..({index} -> {count})" if count is not None else f"do..({index} ->)"
    else:
        repeat = f"do..({count})" if count is not None else "do"
    results = [o.name for o in body.output[1:1 + n]]
    if not count_only:
        results.append(body.output[0].name)
    results += [o.name for o in scans]
    text = _block(ctx, body, bind, results)
    outs = [ctx.out(k) for k in range(n)]
    if not count_only:
        outs.append(ctx.fresh("went"))
    packs = [ctx.fresh(f"scan{j}") for j in range(len(scans))]
    outs += [f"{p}..({count})" for p in packs]
    with_ = f"with {', '.join(decls)} " if decls else ""
    ctx.body.append(f"{', '.join(outs)} = {with_}{head.strip()}{' ' if head else ''}{repeat} {text};")
    for j, p in enumerate(packs):
        ctx.emit("layout.stack", [p], {"axis": 0}, outputs=ctx.out(n + j), label=False)
