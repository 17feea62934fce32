"""Property test of the NNAPI reader: random CONV_2D / DEPTHWISE_CONV_2D / pools (explicit paddings,
strides, fused activation) written by to_sknd and run as `sknd run` does, against a direct numpy loop
over NNAPI's definition (NHWC, filters [out, h, w, in] / [1, h, w, C·M], padding [left, right, top,
bottom], strides (w, h))."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.targets.conformance.nnapi_run import run_vector

ACT = {0: lambda v: v, 1: lambda v: np.maximum(v, 0), 2: lambda v: np.clip(v, -1, 1), 3: lambda v: np.clip(v, 0, 6)}


def _reference(x, f, b, pads, stride, act, kind, kernel, mult=1):
    n, h, w, c = x.shape
    left, right, top, bottom = pads
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=np.nan)
    kh, kw = kernel
    sw, sh = stride
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    cout = f.shape[0] if kind == "CONV_2D" else f.shape[3] if kind == "DEPTHWISE_CONV_2D" else c
    y = np.zeros((n, oh, ow, cout))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
            if kind == "CONV_2D":
                y[:, i, j, :] = np.einsum("nhwc,ohwc->no", np.nan_to_num(win), f) + b
            elif kind == "DEPTHWISE_CONV_2D":
                rep = np.repeat(np.nan_to_num(win), mult, axis=3)
                y[:, i, j, :] = np.einsum("nhwc,hwc->nc", rep, f[0]) + b
            elif kind == "MAX_POOL_2D":
                y[:, i, j, :] = np.nanmax(win, axis=(1, 2))
            else:
                y[:, i, j, :] = np.nanmean(win, axis=(1, 2))
    return ACT[act](y)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"]),
       st.integers(3, 6), st.integers(3, 6), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2),
       st.integers(1, 2), st.lists(st.integers(0, 1), min_size=4, max_size=4), st.integers(0, 3),
       st.integers(0, 2 ** 31 - 1))
def test_random_window_operations_match_nnapi(kind, h, w, kh, kw, sw, sh, pads, act, seed) -> None:
    rng = np.random.default_rng(seed)
    c, mult = 2, 2
    x = rng.uniform(-2, 2, (1, h, w, c)).astype(np.float32)
    ops = [{"name": "x", "role": "input", "type": "TENSOR_FLOAT32", "dims": [1, h, w, c]}]
    scalar = lambda name, v: {"name": name, "role": "parameter", "type": "INT32", "dims": [], "value": [v]}  # noqa: E731
    ops += [scalar(n, v) for n, v in zip(["pl", "pr", "pt", "pb", "sw", "sh", "act"], [*pads, sw, sh, act],
                                         strict=True)]
    ins = ["x"]
    f = b = None
    if kind == "CONV_2D":
        f = rng.uniform(-1, 1, (3, kh, kw, c)).astype(np.float32)
        b = rng.uniform(-1, 1, 3).astype(np.float32)
    elif kind == "DEPTHWISE_CONV_2D":
        f = rng.uniform(-1, 1, (1, kh, kw, c * mult)).astype(np.float32)
        b = rng.uniform(-1, 1, c * mult).astype(np.float32)
    if f is not None:
        ops += [{"name": "f", "role": "parameter", "type": "TENSOR_FLOAT32", "dims": list(f.shape),
                 "value": f.reshape(-1).tolist()},
                {"name": "b", "role": "parameter", "type": "TENSOR_FLOAT32", "dims": list(b.shape),
                 "value": b.reshape(-1).tolist()}]
        ins += ["f", "b", "pl", "pr", "pt", "pb", "sw", "sh"] + (["m"] if kind == "DEPTHWISE_CONV_2D" else [])
        if kind == "DEPTHWISE_CONV_2D":
            ops.append(scalar("m", mult))
    else:
        ops += [scalar("fw", kw), scalar("fh", kh)]
        ins += ["pl", "pr", "pt", "pb", "sw", "sh", "fw", "fh"]
    ins.append("act")
    if (h + pads[2] + pads[3] < kh) or (w + pads[0] + pads[1] < kw):
        return
    with warnings.catch_warnings():  # an all-padding pooling window: nan, skipped below
        warnings.simplefilter("ignore", RuntimeWarning)
        y = _reference(x.astype(np.float64), f, b, pads, (sw, sh), act, kind, (kh, kw), mult)
    if np.isnan(y).any():  # a pooling window wholly in the padding: NNAPI leaves it undefined
        return
    ops.append({"name": "y", "role": "output", "type": "TENSOR_FLOAT32", "dims": list(y.shape)})
    model = {"name": "random", "operands": ops, "operations": [{"op": kind, "inputs": ins, "outputs": ["y"]}],
             "model_inputs": ["x"], "model_outputs": ["y"],
             "examples": [{"inputs": {"x": x.reshape(-1).tolist()}, "outputs": {"y": y.reshape(-1).tolist()}}],
             "tolerance": {"atol": 1e-4, "rtol": 1e-5}}
    r = run_vector(model)
    assert r.ok, (kind, r.detail)
