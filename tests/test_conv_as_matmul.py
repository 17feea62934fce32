"""skriptnd.tosa.program.patch_matmul: a CONV2D over few positions becomes PAD / SLICE / CONCAT / RESHAPE / MATMUL /
ADD, computing the same convolution (checked against the TOSA CONV2D operator of skriptnd.tosa, itself
checked against the TOSA reference model in tests/test_tosa_*.py, and against a direct sum written here)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.tosa.program.build import Op, Program
from skriptnd.tosa.program.patch_matmul import MAX_POSITIONS, convs_as_matmuls


def _conv_program(w: np.ndarray, b: np.ndarray, pad: list[int], dilation: list[int], stride: list[int]) -> Program:
    consts = {"w": w, "b": b, "xz": np.zeros(1, np.float32), "wz": np.zeros(1, np.float32)}
    conv = Op("CONV2D", ["x", "w", "b", "xz", "wz"], {"pad": pad, "stride": stride, "dilation": dilation,
                                                      "acc_type": "fp32"}, "y")
    return Program(inputs=["x"], outputs=["r"], ops=[conv, Op("CLAMP", ["y"], {"min_val": 0.0, "max_val": np.inf},
                                                                  "r")], constants=consts)


def _direct(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: list[int], dilation: list[int]) -> np.ndarray:
    """The convolution as its definition: a sum over taps (stride 1), in float64."""
    top, bottom, left, right = pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    o, kh, kw, _ = w.shape
    oh = xp.shape[1] - (kh - 1) * dilation[0]
    ow = xp.shape[2] - (kw - 1) * dilation[1]
    y = np.zeros((x.shape[0], oh, ow, o)) + b
    for i in range(kh):
        for j in range(kw):
            window = xp[:, i * dilation[0]:i * dilation[0] + oh, j * dilation[1]:j * dilation[1] + ow, :]
            y += window @ w[:, i, j, :].astype(np.float64).T
    return y


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 5), o=st.integers(1, 6),
       kh=st.integers(1, 3), kw=st.integers(1, 3), pad=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       dilation=st.lists(st.integers(1, 2), min_size=2, max_size=2),
       stride=st.lists(st.integers(1, 3), min_size=2, max_size=2), seed=st.integers(0, 2**16))
def test_rewritten_program_computes_the_convolution(n: int, h: int, w: int, c: int, o: int, kh: int, kw: int,
                                                   pad: list[int], dilation: list[int], stride: list[int],
                                                   seed: int) -> None:
    oh = h + pad[0] + pad[1] - (kh - 1) * dilation[0]
    ow = w + pad[2] + pad[3] - (kw - 1) * dilation[1]
    if oh < 1 or ow < 1:
        return
    # TOSA wants the strided windows to end exactly at the padded edge: more bottom / right padding
    pad = [pad[0], pad[1] + (-(oh - 1)) % stride[0], pad[2], pad[3] + (-(ow - 1)) % stride[1]]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    filt = rng.standard_normal((o, kh, kw, c)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    program = _conv_program(filt, bias, pad, dilation, stride)
    rewritten = convs_as_matmuls(program, [(x.shape, np.dtype(np.float32))])
    names = [op.name for op in rewritten.ops]
    if kh * kw > 1:
        assert "CONV2D" not in names and names.count("MATMUL") == 1
        assert names.count("SLICE") == kh * kw or names.count("TRANSPOSE") == 1  # patches of stride = kernel
        read = {i for op in rewritten.ops for i in op.inputs} | set(rewritten.outputs)
        assert set(rewritten.constants) <= read  # the original filter and bias went with their CONV2D
    else:  # a 1x1 convolution is a product already: left alone
        assert rewritten is program
    (got,) = rewritten([x])
    (expected,) = program([x])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    direct = _direct(x, filt, bias, pad, dilation)[:, ::stride[0], ::stride[1]]  # stride: every s-th window
    np.testing.assert_allclose(got, np.maximum(direct, 0), rtol=1e-4, atol=1e-4)
    assert program.ops[0].name == "CONV2D"  # the original is untouched (the numpy backend may run it)


def test_wide_or_quantized_convolutions_are_left_alone() -> None:
    rng = np.random.default_rng(0)
    filt = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    bias = np.zeros(4, np.float32)
    side = int(np.sqrt(MAX_POSITIONS)) + 1  # one position too many
    wide = _conv_program(filt, bias, [1, 1, 1, 1], [1, 1], [1, 1])
    assert convs_as_matmuls(wide, [((1, side, side, 2), np.dtype(np.float32))]) is wide
    strided = _conv_program(filt, bias, [1, 1, 1, 1], [1, 1], [2, 2])  # 15x15 positions: too many
    assert convs_as_matmuls(strided, [((1, 2 * side, 2 * side, 2), np.dtype(np.float32))]) is strided
    quantized = _conv_program(rng.integers(-9, 9, (4, 3, 3, 2)).astype(np.int8), np.zeros(4, np.int32),
                              [1, 1, 1, 1], [1, 1], [1, 1])  # int8 with zero points: an integer convolution
    quantized.constants.update(xz=np.array([3], np.int8), wz=np.zeros(1, np.int8))
    quantized.ops[0].attrs["acc_type"] = "int32"
    quantized.ops = quantized.ops[:1]
    quantized.outputs = ["y"]
    assert convs_as_matmuls(quantized, [((1, 8, 8, 2), np.dtype(np.int8))]) is quantized
    small = _conv_program(filt, bias, [1, 1, 1, 1], [1, 1], [1, 1])
    assert convs_as_matmuls(small, [((1, 14, 14, 2), np.dtype(np.float32))]) is not small  # 196 positions


def test_a_convolution_without_bias_keeps_its_one_element_bias() -> None:
    """A convolution without bias legalizes with a one-element zero bias (CONV2D broadcasts it); the patch
    product must add it as a broadcast too (DenseNet-121's bias-free 3x3 layers on 7x7 maps failed here)."""
    rng = np.random.default_rng(1)
    filt = rng.standard_normal((32, 3, 3, 64)).astype(np.float32)
    x = rng.standard_normal((1, 7, 7, 64)).astype(np.float32)
    for bias in (np.zeros(1, np.float32), np.full(1, 0.5, np.float32)):
        program = _conv_program(filt, bias, [1, 1, 1, 1], [1, 1], [1, 1])
        rewritten = convs_as_matmuls(program, [(x.shape, np.dtype(np.float32))])
        assert "MATMUL" in [op.name for op in rewritten.ops]
        (got,) = rewritten([x])
        np.testing.assert_allclose(got, np.maximum(_direct(x, filt, bias, [1, 1, 1, 1], [1, 1]), 0),
                                   rtol=1e-4, atol=1e-4)


def test_strided_and_patch_convolutions_become_products() -> None:
    """ResNet-50's stride-2 3x3 convolutions on 14x14 and 7x7 outputs (IREE ran them 20-30x slower than
    the same work as a patch product) and ViT's 16x16 stride-16 patch embedding (one TRANSPOSE, no slices)."""
    rng = np.random.default_rng(2)
    for x_shape, (kh, s), pad in (((1, 14, 14, 8), (3, 2), [1, 0, 1, 0]), ((1, 32, 32, 3), (16, 16), [0, 0, 0, 0])):
        filt = rng.standard_normal((5, kh, kh, x_shape[3])).astype(np.float32)
        bias = rng.standard_normal(5).astype(np.float32)
        x = rng.standard_normal(x_shape).astype(np.float32)
        program = _conv_program(filt, bias, pad, [1, 1], [s, s])
        rewritten = convs_as_matmuls(program, [(x.shape, np.dtype(np.float32))])
        names = [op.name for op in rewritten.ops]
        assert "CONV2D" not in names and "MATMUL" in names
        assert names.count("SLICE") == (kh * kh if kh != s else 0)
        (got,) = rewritten([x])
        direct = _direct(x, filt, bias, pad, [1, 1])[:, ::s, ::s]
        np.testing.assert_allclose(got, np.maximum(direct, 0), rtol=1e-4, atol=1e-4)
