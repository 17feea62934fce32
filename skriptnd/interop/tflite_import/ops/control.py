"""Control flow with subgraph bodies: WHILE -> `with v = v0, g = c while g do { ... yield v', g'; }`, IF ->
`if c then { ... } else { ... }` (spec §2.10.1), as the ONNX importer writes Loop and If.

A body subgraph is converted by the same registry (`Context.inline`) with its inputs bound to the SkriptND
names of the values it receives, into a block of its own: the names it binds stay local to the block. WHILE runs
its condition subgraph once before the loop (on the initial values) and again at the end of each iteration (on
the new ones), as TFLite's `while (cond(v)) v = body(v)`. An IF whose condition is a constant is the taken
branch, converted in place. A condition of shape [1] is read as its single element."""

from __future__ import annotations

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter
from skriptnd.interop.writer import Call


def _scalar(ctx: Context, name: str, shape: tuple[int, ...], what: str) -> str:
    """A condition as a rank-0 tensor (TFLite allows a one-element tensor)."""
    if shape == ():
        return name
    if any(d != 1 for d in shape):
        raise ImportProblem("E0863", f"{ctx.here}: its {what} must hold a single element, not shape {list(shape)}")
    return tmp(ctx, "layout.reshape", [name], {"shape": []})


def _run(ctx: Context, index: int, args: list[str], condition: bool = False) -> list[str]:
    """Subgraph `index` converted in place on `args` (its outputs' names); a condition subgraph's one output as
    a scalar."""
    outs = ctx.inline(index, args)
    if condition:
        sub = ctx.model.subgraphs[index]
        if len(outs) != 1 or sub.tensors[sub.outputs[0]].type != 6:
            raise ImportProblem("E0863", f"{ctx.here}: its condition subgraph must give one bool")
        outs = [_scalar(ctx, outs[0], sub.tensors[sub.outputs[0]].shape, "condition")]
    return outs


def _subgraph(ctx: Context, slot: int, what: str) -> int:
    table = ctx.options()
    index = table.int(slot, -1) if table is not None else -1
    if not 0 <= index < len(ctx.model.subgraphs):
        raise ImportProblem("E0861", f"corrupt TFLite file: {ctx.here} names subgraph {index} as its {what} "
                            f"({len(ctx.model.subgraphs)} subgraphs)")
    return index


@converter("WHILE", target="`with v = v0, go = cond(v0) while go do { v = body(v); yield v, cond(v); }`",
           caveats="the loop values keep their shapes from one iteration to the next")
def _while(ctx: Context, op: Operator) -> None:
    cond, body = _subgraph(ctx, 0, "condition"), _subgraph(ctx, 1, "body")
    inits = [ctx.arg(i) or "" for i in op.inputs]
    if any(i < 0 for i in op.inputs) or len(op.outputs) != len(op.inputs):
        raise ImportProblem("E0863", f"{ctx.here}: a WHILE needs every loop value, and as many outputs as inputs")
    outs = [ctx.out(k) for k in range(len(op.outputs))]  # named first: the bodies' tensors may share the names
    go0 = _run(ctx, cond, inits, condition=True)[0]
    carried = [ctx.fresh(f"v{k}") for k in range(len(inits))]
    text, results = _block_loop(ctx, body, cond, carried)
    go, went = ctx.fresh("go"), ctx.fresh("went")
    decls = ", ".join([*(f"{v} = {i}" for v, i in zip(carried, inits, strict=True)), f"{go} = {go0}"])
    ctx.body.append(f"{', '.join([*outs, went])} = with {decls} while {go} do "
                    f"{{ {text} yield {', '.join(results)}; }};")


def _block_loop(ctx: Context, body: int, cond: int, carried: list[str]) -> tuple[str, list[str]]:
    """The loop's block: the body on the carried values, then the condition on the body's results."""
    saved = ctx.body
    ctx.body = []
    try:
        new = _run(ctx, body, carried)
        if len(new) != len(carried):
            raise ImportProblem("E0863", f"{ctx.here}: its body gives {len(new)} values for {len(carried)} loop values")
        go = _run(ctx, cond, new, condition=True)[0]
        statements = ctx.body
    finally:
        ctx.body = saved
    return _text(ctx, statements), [*new, go]


def _text(ctx: Context, statements: list) -> str:
    for item in statements:
        if isinstance(item, Call) and "." in item.op:
            ctx.imports[item.op.rpartition(".")[0]] = None
    return " ".join(s.text() if isinstance(s, Call) else s for s in statements)


@converter("IF", target="`if c then { ... } else { ... }` (a constant condition: the taken branch, in place)",
           caveats="both branches must give the same types and shapes (SkriptND's `if` has one result type)")
def _if(ctx: Context, op: Operator) -> None:
    then, other = _subgraph(ctx, 0, "then branch"), _subgraph(ctx, 1, "else branch")
    c = ctx.input(0)
    args = [ctx.arg(i) or "" for i in op.inputs[1:]]
    outs = [ctx.out(k) for k in range(len(op.outputs))]  # named first: the bodies' tensors may share the names
    known = ctx.const(c)
    if known is not None:
        if known.size != 1:
            raise ImportProblem("E0863", f"{ctx.here}: its condition must hold a single element")
        taken = _run(ctx, then if bool(known.reshape(-1)[0]) else other, args)
        if len(taken) != len(outs):
            raise ImportProblem("E0863", f"{ctx.here}: a branch gives {len(taken)} values for {len(outs)} outputs")
        for out, name in zip(outs, taken, strict=True):
            ctx.emit("math.iden", [name], outputs=out)
        return
    cond = _scalar(ctx, ctx.arg(c) or "", ctx.shape(c), "condition")
    branches = []
    for index in (then, other):
        saved = ctx.body
        ctx.body = []
        try:
            given = _run(ctx, index, args)
            statements = ctx.body
        finally:
            ctx.body = saved
        if len(given) != len(outs):
            raise ImportProblem("E0863", f"{ctx.here}: a branch gives {len(given)} values for {len(outs)} outputs")
        branches.append(f"{{ {_text(ctx, statements)} yield {', '.join(given)}; }}")
    ctx.body.append(f"{', '.join(outs)} = if {cond} then {branches[0]} else {branches[1]};")

