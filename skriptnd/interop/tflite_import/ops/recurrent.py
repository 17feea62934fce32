"""Recurrent layers: UNIDIRECTIONAL_SEQUENCE_LSTM -> nn.lstm. TFLite keeps each gate's weights in its own tensor
(inputs 1-8, biases 12-15) in the order input, forget, cell, output, which is nn.lstm's [i, f, g, o]: they are
stacked at import time. The states are TFLite variable tensors (inputs 18 and 19): zeros unless their buffers
hold values. A batch-major sequence ([batch, time, features], the default) is transposed to nn.lstm's time-major
form and back."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.tflite_import.context import Context
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.ops._util import tmp
from skriptnd.interop.tflite_import.reader import Operator
from skriptnd.interop.tflite_import.registry import converter


def _stack(ctx: Context, indices: list[int], what: str) -> np.ndarray:
    parts = [ctx.need_const(i, what) for i in indices]
    if any(p.shape[1:] != parts[0].shape[1:] or p.shape[0] != parts[0].shape[0] for p in parts):
        raise ImportProblem("E0863", f"{ctx.here}: its {what} differ in shape")
    return np.concatenate([p.astype(np.float32) for p in parts])


def _state(ctx: Context, index: int, batch: int, n: int, what: str) -> str | None:
    if index < 0:
        return None
    if ctx.shape(index) != (batch, n):
        raise ImportProblem("E0863", f"{ctx.here}: its {what} has shape {list(ctx.shape(index))}, not {[batch, n]}")
    value = ctx.const(index)
    if value is None and ctx.tensor(index).is_variable:
        return None  # a variable the interpreter starts at zero
    return ctx.arg(index)


@converter("UNIDIRECTIONAL_SEQUENCE_LSTM", target="`nn.lstm` (the gates' weights stacked [i, f, g, o] at import)",
           caveats="tanh activation, no clipping, peepholes, projection, layer norm or coupled input-forget gate; "
           "constant weights")
def _lstm(ctx: Context, op: Operator) -> None:
    inputs = list(op.inputs) + [-1] * (24 - len(op.inputs))
    if ctx.option(0, 0, "b") != 4 or ctx.real_option(1) or ctx.real_option(2):
        raise ImportProblem("E0863", f"{ctx.here}: only the tanh activation without clipping is supported")
    if inputs[1] < 0 or any(inputs[i] >= 0 for i in (9, 10, 11, 16, 17, 20, 21, 22, 23)):
        raise ImportProblem("E0863", f"{ctx.here}: peepholes, projection, layer norm and CIFG are not supported")
    time_major = ctx.flag(3)
    x = inputs[0]
    shape = ctx.shape(x)
    if len(shape) != 3:
        raise ImportProblem("E0863", f"{ctx.here}: the input must have rank 3")
    batch = shape[1] if time_major else shape[0]
    w = _stack(ctx, inputs[1:5], "input weights")
    r = _stack(ctx, inputs[5:9], "recurrent weights")
    b = _stack(ctx, inputs[12:16], "biases")
    n = r.shape[1] if r.ndim == 2 else 0
    if w.shape != (4 * n, shape[2]) or r.shape != (4 * n, n) or b.shape != (4 * n,):
        raise ImportProblem("E0863", f"{ctx.here}: weights {list(w.shape)}, {list(r.shape)}, biases {list(b.shape)} "
                            f"for {shape[2]} features")
    h0 = _state(ctx, inputs[18], batch, n, "output state")
    c0 = _state(ctx, inputs[19], batch, n, "cell state")
    seq = ctx.arg(x)
    if not time_major:
        seq = tmp(ctx, "layout.transpose", [seq], {"perm": [1, 0, 2]})
    args = [seq, ctx.literal_arg(w, "W"), ctx.literal_arg(r, "R"), ctx.literal_arg(b, "B"), h0, c0]
    if h0 is None and c0 is not None:
        args[4] = ctx.literal_arg(np.zeros((batch, n), np.float32), "h0")
    y = ctx.out(0) if time_major else ctx.fresh("Y")
    ctx.emit("nn.lstm", args, outputs=[y, ctx.fresh("h"), ctx.fresh("c")])
    if not time_major:
        ctx.emit("layout.transpose", [y], {"perm": [1, 0, 2]})
