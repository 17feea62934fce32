"""Matrix products: MatMul -> linalg.matmul, Gemm -> nn.linear (the common transB=1 layer) or
linalg.matmul{transA, transB} with alpha/beta arithmetic."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.registry import converter


def _tmp(ctx: Context, op: str, args: list, **attribs: object) -> str:
    return ctx.emit(op, args, attribs, outputs=ctx.fresh(op.rpartition(".")[2]), label=False)


@converter("MatMul", target="`linalg.matmul`", caveats="1-D operands are unsqueezed and the result squeezed")
def _matmul(ctx: Context, node: Node) -> None:
    a, b = node.input(0), node.input(1)
    if ctx.dtype(a) != "real":
        raise ImportProblem("E0810", f"{node.where}: integer MatMul is not supported (use MatMulInteger in QDQ)")
    ra, rb = ctx.rank(a), ctx.rank(b)
    x, y = ctx.arg(a), ctx.arg(b)
    if ra == 1:
        x = _tmp(ctx, "layout.unsqueeze", [x], axes=[0])
    if rb == 1:
        y = _tmp(ctx, "layout.unsqueeze", [y], axes=[1])
    if ra > 1 and rb > 1:
        ctx.emit("linalg.matmul", [x, y])
        return
    z = _tmp(ctx, "linalg.matmul", [x, y])
    rz = max(ra, rb, 2)
    axes = ([rz - 2] if ra == 1 else []) + ([rz - 1] if rb == 1 else [])
    ctx.emit("layout.squeeze", [z], {"axes": axes})


@converter("Gemm", target="`nn.linear` (transB=1, alpha=beta=1, 1-D bias) else `linalg.matmul{transA, transB}`")
def _gemm(ctx: Context, node: Node) -> None:
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    a, b, c = node.input(0), node.input(1), node.input(2)
    n = ctx.static_shape(b)[0 if trans_b else 1]
    if trans_b and not trans_a and alpha == 1.0 and beta == 1.0 and (not c or ctx.shape(c) == (n,)):
        ctx.emit("nn.linear", [ctx.arg(a), ctx.arg(b), ctx.arg(c)])
        return
    attribs = {k: True for k, v in (("transA", trans_a), ("transB", trans_b)) if v}
    last = not c and alpha == 1.0
    y = ctx.emit("linalg.matmul", [ctx.arg(a), ctx.arg(b)], attribs,
                 outputs=None if last else ctx.fresh("product"), label=last)
    if last:
        return
    if alpha != 1.0:
        last = not c
        y = ctx.emit("math.mul", [y, ctx.literal_arg(np.array(alpha, np.float32), "alpha")],
                     outputs=None if last else ctx.fresh("scaled"), label=last)
        if last:
            return
    bias = ctx.arg(c)
    if beta != 1.0:
        bias = _tmp(ctx, "math.mul", [bias, ctx.literal_arg(np.array(beta, np.float32), "beta")])
    ctx.emit("math.add", [y, bias])


def _einsum_terms(ctx: Context, node: Node) -> tuple[list[str], str]:
    equation = node.attr("equation").replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    names = [i for i in node.inputs if i]
    spare = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ellipsis = ""
    expanded = []
    for term, name in zip(terms, names, strict=True):
        if "..." in term:
            extra = ctx.rank(name) - (len(term) - 3)
            if len(ellipsis) < extra:
                ellipsis += "".join(next(spare) for _ in range(extra - len(ellipsis)))
            term = term.replace("...", ellipsis[len(ellipsis) - extra:])
        expanded.append(term)
    if not arrow:  # implicit output: the letters seen once, in alphabetical order (ellipsis first)
        letters = "".join(expanded)
        out = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis))
    else:
        out = out.replace("...", ellipsis)
    for term in [*expanded, out]:
        if len(set(term)) != len(term):
            raise ImportProblem("E0807", f"{node.where}: a repeated index (a diagonal) in '{equation}' is not "
                                "supported")
    return expanded, out


def _reduce_letters(ctx: Context, x: str, term: str, keep: set[str]) -> tuple[str, str]:
    gone = [k for k, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    y = _tmp(ctx, "math.sum_reduce", [x], axes=gone, squeeze=True)
    return y, "".join(c for c in term if c in keep)


@converter("Einsum", target="`layout.transpose` / `math.sum_reduce` / `layout.reshape` + `linalg.matmul`",
           caveats="one or two operands, static shapes, no repeated index (diagonal)")
def _einsum(ctx: Context, node: Node) -> None:
    terms, out = _einsum_terms(ctx, node)
    names = [i for i in node.inputs if i]
    if len(names) > 2:
        raise ImportProblem("E0807", f"{node.where}: Einsum of {len(names)} operands is not supported (one or two)")
    sizes: dict[str, sym.SymDim] = {}  # a symbolic batch stays an expression of its graph attribute
    for term, name in zip(terms, names, strict=True):
        sizes.update(zip(term, ctx.dims(name), strict=True))
    if len(names) == 1:
        x, term = _reduce_letters(ctx, ctx.arg(names[0]), terms[0], set(out))
        perm = [term.index(c) for c in out]
        if perm == list(range(len(perm))):
            ctx.emit("math.iden", [x])
        else:
            ctx.emit("layout.transpose", [x], {"perm": perm})
        return
    (ta, tb), (na, nb) = terms, names
    a, ta = _reduce_letters(ctx, ctx.arg(na), ta, set(tb) | set(out))
    b, tb = _reduce_letters(ctx, ctx.arg(nb), tb, set(ta) | set(out))
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    inner = [c for c in ta if c in tb and c not in out]

    def arrange(x: str, term: str, order: list[str], shape: list[sym.SymDim]) -> str:
        perm = [term.index(c) for c in order]
        if perm != list(range(len(perm))):
            x = _tmp(ctx, "layout.transpose", [x], perm=perm)
        return _tmp(ctx, "layout.reshape", [x], shape=ctx.extents(shape))

    def volume(letters: list[str]) -> sym.SymDim:
        return sym.product([sizes[c] for c in letters])

    nbatch, nleft, nright, ninner = volume(batch), volume(left), volume(right), volume(inner)
    a3 = arrange(a, ta, batch + left + inner, [nbatch, nleft, ninner])
    b3 = arrange(b, tb, batch + inner + right, [nbatch, ninner, nright])
    z = _tmp(ctx, "linalg.matmul", [a3, b3])
    natural = batch + left + right
    perm = [natural.index(c) for c in out]
    shape = ctx.extents([sizes[c] for c in natural])
    if perm == list(range(len(perm))):
        ctx.emit("layout.reshape", [z], {"shape": shape})
        return
    z = _tmp(ctx, "layout.reshape", [z], shape=shape)
    ctx.emit("layout.transpose", [z], {"perm": perm})
