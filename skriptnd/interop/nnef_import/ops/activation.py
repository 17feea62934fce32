"""Activation functions and softmax (NNEF 1.x definitions, matched attribute for attribute)."""

from __future__ import annotations

from skriptnd.interop.nnef_import.context import Arg, Context, Operation
from skriptnd.interop.nnef_import.registry import converter, expanded
from skriptnd.interop.nnef_import.writer_exprs import real

expanded("NNEF definition: sqrt(sqr(x) + epsilon)", "softabs")

SIMPLE = {"relu": "nn.relu", "sigmoid": "nn.sigmoid", "softplus": "nn.softplus", "silu": "nn.silu"}


def _simple(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), SIMPLE[op.name], [ctx.arg(op.inputs["x"])])


for _name, _target in SIMPLE.items():
    converter(_name, target=_target)(_simple)


@converter("gelu", target="nn.gelu{approximate='SIGMOID'}", note="NNEF defines gelu as x * sigmoid(1.702 x)")
def gelu(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "nn.gelu", [ctx.arg(op.inputs["x"])], {"approximate": "SIGMOID"})


@converter("elu", target="nn.elu")
def elu(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "nn.elu", [ctx.arg(op.inputs["x"])], {"alpha": float(op.attribs["alpha"])})


@converter("selu", target="nn.selu")
def selu(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "nn.selu", [ctx.arg(op.inputs["x"])],
             {"alpha": float(op.attribs["alpha"]), "lambda": float(op.attribs["lambda"])})


@converter("leaky_relu", target="nn.relu{alpha}",
           note="alpha outside [0, 1] (which nn.relu refuses) becomes select(x < 0, alpha * x, x)")
def leaky_relu(ctx: Context, op: Operation) -> None:
    alpha = float(op.attribs["alpha"])
    x = ctx.arg(op.inputs["x"])
    if 0.0 <= alpha <= 1.0:
        ctx.emit(ctx.output(), "nn.relu", [x], {"alpha": alpha})
        return
    _select_negative(ctx, x, op.inputs["x"], alpha)


def _select_negative(ctx: Context, x: Arg, x_value: Arg, alpha: Arg, align: dict[str, int] | None = None) -> None:
    """y = select(x < 0, alpha * x, x), NNEF's definition of prelu."""
    neg, scaled = ctx.tmp("negative"), ctx.tmp("scaled")
    ctx.emit(neg, "math.lt", [x, real(0.0)])
    ctx.emit(scaled, "math.mul", [alpha if not isinstance(alpha, float) else real(alpha), x], align or {})
    ctx.emit(ctx.output(), "math.select", [neg, scaled, x])


@converter("prelu", target="nn.prelu{axis=1}",
           note="per-channel alpha ([1, C, 1..]); any other alpha shape as select(x < 0, alpha * x, x)")
def prelu(ctx: Context, op: Operation) -> None:
    x, alpha = op.inputs["x"], op.inputs["alpha"]
    xs, shape = ctx.shape(x), ctx.shape(alpha)
    if ctx.is_tensor(alpha) and len(xs) >= 2 and len(shape) >= 2 and shape[1] == xs[1] \
            and all(d == 1 for i, d in enumerate(shape) if i != 1):
        ctx.emit(ctx.output(), "nn.prelu", [ctx.arg(x), ctx.squeeze_to(alpha, 1, "alpha")], {"axis": 1})
        return
    args, align = ctx.broadcast_args([alpha, x], ["lhs_align", "rhs_align"])
    _select_negative(ctx, args[1], x, args[0], align)


@converter("softmax", target="nn.softmax")
def softmax(ctx: Context, op: Operation) -> None:
    ctx.emit(ctx.output(), "nn.softmax", [ctx.arg(op.inputs["x"])], {"axes": list(op.attribs["axes"])})
