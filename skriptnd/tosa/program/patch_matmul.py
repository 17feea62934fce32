"""Deep convolutions over few positions rewritten as one TOSA MATMUL over gathered patches (im2col in TOSA).

Why: IREE's CPU code for ``CONV2D`` (the iree backend, skriptnd.backends.via_iree) is fast on wide feature
maps and slow on deep, small ones. Measured on ResNet-18 (2-core AMD EPYC, AVX-512, IREE 3.13, per-dispatch
profile): every 3x3 convolution does 115.6 M multiply-adds, yet the 56x56x64 ones ran at ~400 GFLOP/s and
the 14x14x256 and 7x7x512 ones at 40-70. Written as PAD → one SLICE per kernel tap → CONCAT → RESHAPE →
MATMUL (the filter pre-arranged to ``[taps * C, O]``) → RESHAPE → ADD bias, those layers become matrix
products that IREE's data tiling and micro-kernels run at 180-230 GFLOP/s: the whole network went from 16.2
to 13.0 ms (docs/performance.md). Wider maps keep their ``CONV2D`` (written as products they got slower).

Strided convolutions too: IREE's own code for them is worse still. ResNet-50's stride-2 3x3 convolutions
(14x14x256 and 7x7x512 outputs, 115.6 M multiply-adds each) took 55% of its run, 20-30x the time of the
stride-1 layers of the same work written as patch products (2-core AMD EPYC znver3, AVX2, data tiling;
ConvNeXt-T's 2x2 stride-2 downsampling layers: 19% of its run, ~15x). A strided tap is a plain SLICE of
the padded input read as ``[n, H/s, s, W/s, s*c]`` (TOSA's SLICE has no stride); non-overlapping patches
(stride = kernel, no padding: ViT's and ConvNeXt's patch layers) are one RESHAPE / TRANSPOSE / RESHAPE.

The rewrite is exact arithmetic re-association only (same products, summed in another order); it applies
to float32 convolutions with constant filters, any stride and dilation, whose output has at most
:data:`MAX_POSITIONS` positions (batch x height x width) and whose kernel has more than one tap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from skriptnd.tosa.program.build import Op, Program, placeholder_value

#: Output positions (batch x height x width) up to which a convolution becomes a matrix product: ResNet-18's
#: 14x14 and 7x7 layers; 28x28 (784) measured slower as products.
MAX_POSITIONS = 196


def value_shapes(program: Program, inputs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> dict[str, tuple[int, ...]]:
    """The shape of every array value of ``program`` (evaluated once on ones, as the MLIR writer types it)."""
    vals: dict[str, Any] = {n: np.ones(shape, dtype) for n, (shape, dtype) in zip(program.inputs, inputs,
                                                                                   strict=True)}
    vals.update({n: np.asarray(a) for n, a in program.constants.items()})
    scratch: dict[str, np.ndarray] = {}
    for o in program.ops:
        vals[o.output] = placeholder_value(o, [vals[i] for i in o.inputs], program.constants, scratch)
    return {n: a.shape for n, a in vals.items() if isinstance(a, np.ndarray)}


def _eligible(o: Op, program: Program, shapes: dict[str, tuple[int, ...]], limit: int) -> bool:
    if o.name != "CONV2D" or len(o.inputs) != 5 or o.attrs.get("acc_type", "fp32") != "fp32":
        return False
    x, w, b, xz, wz = o.inputs
    consts = program.constants
    if w not in consts or b not in consts or consts[w].dtype != np.float32 or len(shapes[x]) != 4:
        return False
    if any(z not in consts or np.any(consts[z] != 0) for z in (xz, wz)):
        return False
    n, oh, ow, _ = shapes[o.output]
    _, kh, kw, _ = consts[w].shape
    return kh * kw > 1 and n * oh * ow <= limit


def convs_as_matmuls(program: Program, inputs: Sequence[tuple[tuple[int, ...], np.dtype]],
                     limit: int = MAX_POSITIONS) -> Program:
    """A copy of ``program`` in which every eligible ``CONV2D`` (see the module doc) is a patch MATMUL; the
    program itself is left as it is (the numpy backend may run it)."""
    shapes = value_shapes(program, inputs)
    if not any(_eligible(o, program, shapes, limit) for o in program.ops):
        return program
    consts = dict(program.constants)
    ops: list[Op] = []
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        while f"{prefix}{counter[0]}" in consts or f"{prefix}{counter[0]}" in shapes:
            counter[0] += 1
        return f"{prefix}{counter[0]}"

    def const(a: np.ndarray) -> str:
        key = name("mm_c")
        consts[key] = a
        return key

    def op(kind: str, args: list[str], attrs: dict | None = None, out: str | None = None) -> str:
        ops.append(Op(kind, args, attrs or {}, out or name("mm_v")))
        return ops[-1].output

    def shape(*dims: int) -> str:
        return const(np.array(dims, np.int64))

    for o in program.ops:
        if not _eligible(o, program, shapes, limit):
            ops.append(o)
            continue
        x, w, b, _, _ = o.inputs
        n, _, _, c = shapes[x]
        _, oh, ow, co = shapes[o.output]
        filt = program.constants[w]
        _, kh, kw, _ = filt.shape
        top, bottom, left, right = (int(p) for p in o.attrs["pad"])
        dh, dw = (int(d) for d in o.attrs["dilation"])
        sh, sw = (int(d) for d in o.attrs["stride"])
        _, h, w_, _ = shapes[x]
        if (sh, sw) == (kh, kw) and (dh, dw) == (1, 1) and not (top or bottom or left or right) \
                and (h, w_) == (oh * kh, ow * kw):  # non-overlapping patches (ViT's patch embedding)
            rows = op("RESHAPE", [x, shape(n, oh, kh, ow, kw * c)])
            patches = op("RESHAPE", [op("TRANSPOSE", [rows], {"perms": [0, 1, 3, 2, 4]}),
                                     shape(1, n * oh * ow, kh * kw * c)])
        else:
            # stride s: the padded input, grown to a multiple of s, is read as [n, H/s, s, W/s, s*c], so that
            # each tap is one plain SLICE (TOSA's SLICE has no stride): row i*dh + s*y is (i*dh // s + y, i*dh % s)
            hq, wq = -(-(h + top + bottom) // sh), -(-(w_ + left + right) // sw)
            bottom, right = sh * hq - h - top, sw * wq - w_ - left
            src = x
            if top or bottom or left or right:
                src = op("PAD", [x, shape(0, 0, top, bottom, left, right, 0, 0), const(np.zeros(1, np.float32))])
            if (sh, sw) == (1, 1):
                taps = [op("SLICE", [src, shape(0, i * dh, j * dw, 0), shape(n, oh, ow, c)])
                        for i in range(kh) for j in range(kw)]
                joined = op("CONCAT", taps, {"axis": 3})
            else:
                phased = op("RESHAPE", [src, shape(n, hq, sh, wq, sw * c)])
                taps = [op("SLICE", [phased, shape(0, i * dh // sh, i * dh % sh, j * dw // sw, j * dw % sw * c),
                                     shape(n, oh, 1, ow, c)]) for i in range(kh) for j in range(kw)]
                joined = op("CONCAT", taps, {"axis": 4})
            patches = op("RESHAPE", [joined, shape(1, n * oh * ow, kh * kw * c)])
        matrix = np.ascontiguousarray(filt.reshape(co, kh * kw * c).T[None])  # [1, (i, j, c), o]
        zero = const(np.zeros(1, np.float32))
        product = op("MATMUL", [patches, const(matrix), zero, zero])
        bias_values = np.asarray(program.constants[b], np.float32)  # [co], or [1] (CONV2D broadcasts it)
        bias = const(bias_values.reshape(1, 1, 1, co if bias_values.size == co else 1))
        op("ADD", [op("RESHAPE", [product, shape(n, oh, ow, co)]), bias], out=o.output)
    # the rewritten convolutions' filters and biases are read by nothing now (their re-arranged copies are)
    read = {i for o in ops for i in o.inputs} | set(program.outputs)
    consts = {k: v for k, v in consts.items() if k in read}
    return replace(program, ops=ops, constants=consts, hints={k: v for k, v in program.hints.items() if k in consts},
                   _steps=None, _slots={})
