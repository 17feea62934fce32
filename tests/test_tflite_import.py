"""TFLite import (issue 27): models converted from PyTorch by LiteRT (litert-torch, benchmarks/zoo/make_tflite.py)
and one-operator models built here with LiteRT's schema, imported and run on the numpy backend, against
LiteRT's interpreter on the same file (the oracle); the file features real converters write (constant data
after the FlatBuffer, deprecated builtin codes, several subgraphs, signature names); corrupt and crafted
files, which must be diagnostics and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tflite_oracle import (
    DATA,
    ZOO,
    builtin_options,
    inputs_of,
    one_operator_model,
    operator_code,
    pack,
    run_litert,
    schema,
    unpack,
)

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.tflite_import import doc
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.importer import convert, import_tflite
from skriptnd.interop.tflite_import.reader import read
from skriptnd.interop.tflite_import.registry import FAMILIES, registry

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-3


def _run_imported(out: Path, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    graph = skriptnd.load(out).compose()
    return skriptnd.run(graph, {t.name: x for t, x in zip(graph.inputs, inputs, strict=True)})


def _compare(src: Path | bytes, inputs: list[np.ndarray], tmp_path: Path, atol: float = TOLERANCE) -> float:
    """Import `src`, run it and LiteRT on `inputs`; the largest difference (asserted within atol)."""
    expected = run_litert(src, inputs)
    out = tmp_path / "imported"
    import_tflite(src, out)
    got = _run_imported(out, inputs)
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    worst = 0.0
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        if value.dtype == np.bool_ or np.issubdtype(value.dtype, np.integer):
            np.testing.assert_array_equal(got[name], value)
            continue
        worst = max(worst, float(np.abs(got[name] - value).max()))
    assert worst <= atol, worst
    return worst


# ------------------------------------------------------------------------ models converted from PyTorch

#: *_wo8: the same, weight-only quantized by ai-edge-quantizer (int8 weights behind DEQUANTIZE)
#: *_dr8: dynamic-range quantized (int8 weights read by LiteRT's hybrid kernels, float activations)
CI_MODELS = ["small_cnn", "tiny_transformer", "lstm_cell", "gru_cell", "ops_mix", "pools", "small_cnn_wo8",
             "tiny_transformer_wo8", "small_cnn_dr8", "tiny_transformer_dr8"]


@pytest.mark.parametrize("name", CI_MODELS)
def test_litert_converted_model_matches_the_interpreter(name: str, tmp_path: Path) -> None:
    path = DATA / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"{path} not made (python benchmarks/zoo/make_tflite.py --ci)")
    _compare(path, inputs_of(DATA / f"{name}.inputs.npz"), tmp_path)


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18", "mobilenet_v3_small", "efficientnet_b0",
                                  "lstm_sequence", "transformer_encoder", "mobilenet_v2_wo8",
                                  "mobilenet_v2_dr8", "resnet18_dr8", "lstm_sequence_dr8", "transformer_encoder_dr8"])
def test_zoo_model_matches_the_interpreter(name: str, tmp_path: Path) -> None:
    """The big models (make_tflite.py without --ci writes them to the zoo cache; absent: skipped)."""
    path = ZOO / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"{path} absent (python benchmarks/zoo/make_tflite.py, in an environment with litert-torch)")
    inputs = inputs_of(ZOO / f"{name}.inputs.npz")
    atol = TOLERANCE
    if name.endswith("_dr8"):  # a code flipped at a rounding boundary grows through deep hybrid networks: within
        # the spread of LiteRT's own two kernel sets (default and reference) on the same file
        default, reference = run_litert(path, inputs), run_litert(path, inputs, "BUILTIN_REF")
        atol = max(TOLERANCE, *(float(np.abs(default[k] - reference[k]).max()) for k in default))
    _compare(path, inputs, tmp_path, atol)


def test_boundary_transposes_of_a_pytorch_model_fold(tmp_path: Path) -> None:
    """LiteRT wraps PyTorch's NCHW in TRANSPOSEs (here: after the input, and back before the final pad and
    mean); inside, convolutions and pools are NHWC through their layout attributes: no transpose per operator."""
    out = tmp_path / "m"
    import_tflite(DATA / "small_cnn.tflite", out)
    text = (out / "main.sknd").read_text()
    model = read((DATA / "small_cnn.tflite").read_bytes())
    assert sum(op.name == "TRANSPOSE" for op in model.subgraphs[0].operators) == 2
    assert text.count("layout.transpose") == 2
    assert text.count('nn.conv{data_format="NXC"') == 4 and 'filter_format="CXN"' in text


# --------------------------------------------------------------------------- one-operator models

def _tensor(s: Any, shape: list[int], name: str, buffer: int = 0, type_: int = 0) -> Any:
    t = s.TensorT()
    t.shape, t.name, t.buffer, t.type = list(shape), name, buffer, type_
    return t


#: operator versions the interpreter registers where 1 is not one of them
VERSIONS = {"BROADCAST_TO": 2, "TRANSPOSE_CONV": 3}


def one_op(builtin: str, inputs: list[tuple[list[int], np.ndarray | None]], outputs: list[list[int]],
           options: Any = None, options_type: str | None = None, out_type: int = 0) -> bytes:
    """A model of one builtin operator: inputs are (shape, constant value or None for a graph input)."""
    s = schema()
    opcode = operator_code(builtin, VERSIONS.get(builtin, 1))
    buffers = [s.BufferT()]
    tensors, graph_inputs, op_inputs = [], [], []
    types = {np.dtype(np.float32): 0, np.dtype(np.int32): 2, np.dtype(np.int64): 4, np.dtype(np.bool_): 6,
             np.dtype(np.int8): 9, np.dtype(np.float16): 1}
    for i, (shape, value) in enumerate(inputs):
        if value is None:
            tensors.append(_tensor(s, shape, f"in{i}"))
            graph_inputs.append(len(tensors) - 1)
        else:
            b = s.BufferT()
            b.data = list(np.ascontiguousarray(value).tobytes())
            buffers.append(b)
            tensors.append(_tensor(s, list(value.shape), f"const{i}", len(buffers) - 1, types[value.dtype]))
        op_inputs.append(len(tensors) - 1)
    outs = []
    for j, shape in enumerate(outputs):
        tensors.append(_tensor(s, shape, f"out{j}", type_=out_type))
        outs.append(len(tensors) - 1)
    return one_operator_model(opcode, tensors, buffers, graph_inputs, op_inputs, outs, options, options_type)


RNG = np.random.default_rng(7)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def _cases() -> list[tuple[str, Any]]:
    """(id, (builtin, inputs, output shapes, options)) for the one-operator comparisons."""
    conv_w = _x(6, 3, 3, 4)
    dw_w = _x(1, 3, 3, 8)
    return [
        ("conv_same_strided_relu6", ("CONV_2D", [([1, 9, 9, 4], None), ([], conv_w), ([], _x(6))], [[1, 5, 5, 6]],
                                     builtin_options("Conv2DOptions", padding=0, strideW=2, strideH=2,
                                              fusedActivationFunction=3))),
        ("conv_dilated_valid", ("CONV_2D", [([1, 9, 8, 4], None), ([], conv_w), ([], _x(6))], [[1, 5, 4, 6]],
                                builtin_options("Conv2DOptions", padding=1, strideW=1, strideH=1, dilationWFactor=2,
                                         dilationHFactor=2))),
        ("depthwise_multiplier_2", ("DEPTHWISE_CONV_2D", [([1, 7, 7, 4], None), ([], dw_w), ([], _x(8))],
                                    [[1, 4, 4, 8]], builtin_options("DepthwiseConv2DOptions", padding=0, strideW=2,
                                                             strideH=2, depthMultiplier=2))),
        ("avg_pool_same_border", ("AVERAGE_POOL_2D", [([1, 5, 5, 3], None)], [[1, 3, 3, 3]],
                                  builtin_options("Pool2DOptions", padding=0, strideW=2, strideH=2, filterWidth=3,
                                           filterHeight=3))),
        ("max_pool_same", ("MAX_POOL_2D", [([1, 6, 5, 2], None)], [[1, 3, 3, 2]],
                           builtin_options("Pool2DOptions", padding=0, strideW=2, strideH=2, filterWidth=3,
                                    filterHeight=2))),
        ("fully_connected_rank3", ("FULLY_CONNECTED", [([2, 3, 5], None), ([], _x(4, 5)), ([], _x(4))], [[6, 4]],
                                   builtin_options("FullyConnectedOptions", fusedActivationFunction=1))),
        ("batch_matmul_adj", ("BATCH_MATMUL", [([2, 4, 3], None), ([2, 5, 4], None)], [[2, 3, 5]],
                              builtin_options("BatchMatMulOptions", adjX=True, adjY=True))),
        ("add_broadcast_relu", ("ADD", [([2, 3, 4], None), ([], _x(4))], [[2, 3, 4]],
                                builtin_options("AddOptions", fusedActivationFunction=1))),
        ("div", ("DIV", [([2, 3], None), ([2, 3], None)], [[2, 3]], None)),
        ("squared_difference", ("SQUARED_DIFFERENCE", [([2, 3], None), ([1, 3], None)], [[2, 3]], None)),
        ("minimum", ("MINIMUM", [([2, 3], None), ([2, 3], None)], [[2, 3]], None)),
        ("maximum", ("MAXIMUM", [([2, 3], None), ([3], None)], [[2, 3]], None)),
        ("exp", ("EXP", [([2, 3], None)], [[2, 3]], None)),
        ("gelu_tanh", ("GELU", [([2, 7], None)], [[2, 7]], builtin_options("GeluOptions", approximate=True))),
        ("gelu", ("GELU", [([2, 7], None)], [[2, 7]], None)),
        ("hard_swish", ("HARD_SWISH", [([2, 9], None)], [[2, 9]], None)),
        ("leaky_relu", ("LEAKY_RELU", [([2, 5], None)], [[2, 5]], builtin_options("LeakyReluOptions", alpha=0.3))),
        ("prelu", ("PRELU", [([2, 3, 4], None), ([], _x(4))], [[2, 3, 4]], None)),
        ("relu_n1_to_1", ("RELU_N1_TO_1", [([2, 5], None)], [[2, 5]], None)),
        ("softmax_beta", ("SOFTMAX", [([2, 6], None)], [[2, 6]], builtin_options("SoftmaxOptions", beta=0.5))),
        ("mean_keep", ("MEAN", [([2, 3, 4], None), ([], _i32(1, -1))], [[2, 1, 1]],
                       builtin_options("ReducerOptions", keepDims=True))),
        ("sum", ("SUM", [([2, 3, 4], None), ([], _i32(0))], [[3, 4]], builtin_options("ReducerOptions"))),
        ("reduce_max", ("REDUCE_MAX", [([2, 3, 4], None), ([], _i32(2))], [[2, 3]], builtin_options("ReducerOptions"))),
        ("pad", ("PAD", [([2, 3], None), ([], _i32(1, 0, 2, 1).reshape(2, 2))], [[3, 6]], None)),
        ("padv2", ("PADV2", [([2, 3], None), ([], _i32(0, 1, 1, 1).reshape(2, 2)),
                             ([], np.array([2.5], np.float32))], [[3, 5]], None)),
        ("mirror_pad_symmetric", ("MIRROR_PAD", [([3, 4], None), ([], _i32(1, 2, 2, 1).reshape(2, 2))], [[6, 7]],
                                  builtin_options("MirrorPadOptions", mode=1))),
        ("mirror_pad_reflect", ("MIRROR_PAD", [([3, 4], None), ([], _i32(2, 1, 1, 2).reshape(2, 2))], [[6, 7]],
                                builtin_options("MirrorPadOptions", mode=0))),
        ("slice", ("SLICE", [([4, 5], None), ([], _i32(1, 2)), ([], _i32(2, -1))], [[2, 3]], None)),
        ("strided_slice", ("STRIDED_SLICE", [([5, 6, 4], None), ([], _i32(1, 0, 2)), ([], _i32(5, -1, 3)),
                                             ([], _i32(2, 2, 1))], [[2, 3]],
                           builtin_options("StridedSliceOptions", beginMask=2, shrinkAxisMask=4))),
        ("concatenation", ("CONCATENATION", [([2, 3], None), ([2, 2], None)], [[2, 5]],
                           builtin_options("ConcatenationOptions", axis=-1))),
        ("gather", ("GATHER", [([5, 3], None), ([], _i32(4, 0, 2, 2))], [[4, 3]], builtin_options("GatherOptions"))),
        ("split", ("SPLIT", [([], _i32(1)), ([2, 6], None)], [[2, 2], [2, 2], [2, 2]],
                   builtin_options("SplitOptions", numSplits=3))),
        ("split_v", ("SPLIT_V", [([2, 6], None), ([], _i32(1, 5)), ([], _i32(-1))], [[2, 1], [2, 5]],
                     builtin_options("SplitVOptions", numSplits=2))),
        ("pack", ("PACK", [([2, 3], None), ([2, 3], None)], [[2, 2, 3]],
                  builtin_options("PackOptions", valuesCount=2, axis=1))),
        ("unpack", ("UNPACK", [([2, 3], None)], [[2], [2], [2]], builtin_options("UnpackOptions", num=3, axis=1))),
        ("tile", ("TILE", [([2, 3], None), ([], _i32(2, 1))], [[4, 3]], None)),
        ("broadcast_to", ("BROADCAST_TO", [([3, 1], None), ([], _i32(2, 3, 4))], [[2, 3, 4]], None)),
        ("transpose", ("TRANSPOSE", [([2, 3, 4], None), ([], _i32(2, 0, 1))], [[4, 2, 3]], None)),
        ("reshape", ("RESHAPE", [([2, 3, 4], None), ([], _i32(4, -1))], [[4, 6]], None)),
        ("squeeze", ("SQUEEZE", [([2, 1, 3], None)], [[2, 3]], builtin_options("SqueezeOptions", squeezeDims=[1]))),
        ("resize_bilinear_half_pixel", ("RESIZE_BILINEAR", [([1, 3, 4, 2], None), ([], _i32(7, 5))], [[1, 7, 5, 2]],
                                        builtin_options("ResizeBilinearOptions", halfPixelCenters=True))),
        ("resize_bilinear_align", ("RESIZE_BILINEAR", [([1, 3, 4, 2], None), ([], _i32(7, 5))], [[1, 7, 5, 2]],
                                   builtin_options("ResizeBilinearOptions", alignCorners=True))),
        ("resize_bilinear_asymmetric", ("RESIZE_BILINEAR", [([1, 3, 4, 2], None), ([], _i32(7, 5))],
                                        [[1, 7, 5, 2]], builtin_options("ResizeBilinearOptions"))),
        ("resize_nearest", ("RESIZE_NEAREST_NEIGHBOR", [([1, 3, 4, 2], None), ([], _i32(7, 5))], [[1, 7, 5, 2]],
                            builtin_options("ResizeNearestNeighborOptions"))),
        ("resize_nearest_half_pixel", ("RESIZE_NEAREST_NEIGHBOR", [([1, 3, 4, 2], None), ([], _i32(7, 5))],
                                       [[1, 7, 5, 2]], builtin_options("ResizeNearestNeighborOptions",
                                                                halfPixelCenters=True))),
        ("transpose_conv_same", ("TRANSPOSE_CONV", [([], _i32(1, 8, 7, 5)), ([], _x(5, 3, 3, 4)), ([1, 4, 4, 4], None),
                                                   ([], _x(5))], [[1, 8, 7, 5]],
                                 builtin_options("TransposeConvOptions", padding=0, strideW=2, strideH=2))),
        ("transpose_conv_valid", ("TRANSPOSE_CONV", [([], _i32(1, 9, 9, 2)), ([], _x(2, 3, 3, 4)), ([1, 4, 4, 4], None),
                                                    ([], _x(2))], [[1, 9, 9, 2]],
                                  builtin_options("TransposeConvOptions", padding=1, strideW=2, strideH=2,
                                           fusedActivationFunction=1))),
        ("select_v2", ("SELECT_V2", [([], RNG.random((2, 3)) > 0.5), ([2, 3], None), ([3], None)], [[2, 3]], None)),
        ("floor_div", ("FLOOR_DIV", [([2, 5], None), ([2, 5], None)], [[2, 5]], None)),
        ("arg_max", ("ARG_MAX", [([3, 5, 4], None), ([], _i32(1))], [[3, 4]],
                     builtin_options("ArgMaxOptions", outputType=4), 4)),
        ("arg_min", ("ARG_MIN", [([3, 5, 4], None), ([], _i32(-1))], [[3, 5]],
                     builtin_options("ArgMinOptions", outputType=2), 2)),
        ("space_to_depth", ("SPACE_TO_DEPTH", [([1, 4, 6, 3], None)], [[1, 2, 3, 12]],
                            builtin_options("SpaceToDepthOptions", blockSize=2))),
        ("depth_to_space", ("DEPTH_TO_SPACE", [([1, 2, 3, 12], None)], [[1, 4, 6, 3]],
                            builtin_options("DepthToSpaceOptions", blockSize=2))),
        ("l2_normalization", ("L2_NORMALIZATION", [([2, 3, 6], None)], [[2, 3, 6]],
                              builtin_options("L2NormOptions"))),
        ("elu", ("ELU", [([2, 5], None)], [[2, 5]], None)),
        ("shape", ("SHAPE", [([2, 5, 3], None)], [[3]], builtin_options("ShapeOptions", outType=2), 2)),
        ("zeros_like", ("ZEROS_LIKE", [([2, 5], None)], [[2, 5]], None)),
        ("fill", ("FILL", [([], _i32(2, 3)), ([], np.array(1.5, np.float32))], [[2, 3]], None)),
        ("range", ("RANGE", [([], np.array(1, np.int32)), ([], np.array(11, np.int32)), ([], np.array(3, np.int32))],
                   [[4]], None, 2)),
        ("cumsum_exclusive_reverse", ("CUMSUM", [([3, 5], None), ([], _i32(1))], [[3, 5]],
                                      builtin_options("CumsumOptions", exclusive=True, reverse=True))),
        ("resize_nearest_align", ("RESIZE_NEAREST_NEIGHBOR", [([1, 3, 4, 2], None), ([], _i32(7, 5))],
                                  [[1, 7, 5, 2]], builtin_options("ResizeNearestNeighborOptions", alignCorners=True))),
    ]


@pytest.mark.parametrize("case", [c for _, c in _cases()], ids=[i for i, _ in _cases()])
def test_one_operator_matches_the_interpreter(case: tuple, tmp_path: Path) -> None:
    builtin, inputs, outputs, options, *out_type = case
    data = one_op(builtin, inputs, outputs, options, out_type=out_type[0] if out_type else 0)
    feeds = [_x(*shape) for shape, value in inputs if value is None]
    _compare(data, feeds, tmp_path, atol=1e-5)


@pytest.mark.parametrize("time_major", [False, True])
def test_unidirectional_sequence_lstm_matches_the_interpreter(time_major: bool, tmp_path: Path) -> None:
    """Keras' LSTM layer as TFLite writes it: one weight tensor per gate, the states as variable tensors."""
    s = schema()
    n, features, steps, batch = 5, 3, 4, 2
    consts = {**{i: _x(n, features) for i in range(1, 5)}, **{i: _x(n, n) for i in range(5, 9)},
              **{i: _x(n) for i in range(12, 16)}}
    shape = [steps, batch, features] if time_major else [batch, steps, features]
    spec = [(shape, None)] + [([], consts[i]) for i in sorted(consts)]
    options = builtin_options("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=4, timeMajor=time_major)
    out = [steps, batch, n] if time_major else [batch, steps, n]
    model = unpack(one_op("UNIDIRECTIONAL_SEQUENCE_LSTM", spec, [out], options))
    sub = model.subgraphs[0]
    op = sub.operators[0]
    given = list(op.inputs)
    for name in ("output_state", "cell_state"):
        state = _tensor(s, [batch, n], name)
        state.isVariable = True
        sub.tensors.append(state)
    wired = [-1] * 24
    wired[0] = given[0]
    for k, i in enumerate(sorted(consts)):
        wired[i] = given[1 + k]
    wired[18], wired[19] = len(sub.tensors) - 2, len(sub.tensors) - 1
    op.inputs = wired
    _compare(pack(model), [_x(*shape)], tmp_path, atol=1e-5)


def test_float16_weights_through_dequantize(tmp_path: Path) -> None:
    """LiteRT's float16 post-training quantization stores weights as FLOAT16 with a DEQUANTIZE to float32."""
    s = schema()
    model = unpack(one_op("DEQUANTIZE", [([], np.zeros(1, np.float32))], [[2, 3]]))
    sub = model.subgraphs[0]
    weights = _x(2, 3).astype(np.float16)
    model.buffers[1].data = list(weights.tobytes())
    sub.tensors[0].type, sub.tensors[0].shape = 1, [2, 3]  # FLOAT16
    add = s.OperatorCodeT()
    add.builtinCode = add.deprecatedBuiltinCode = s.BuiltinOperator.ADD
    model.operatorCodes.append(add)
    sub.tensors += [_tensor(s, [2, 3], "x"), _tensor(s, [2, 3], "y")]
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 1, [len(sub.tensors) - 2, sub.outputs[0]], [len(sub.tensors) - 1]
    op.builtinOptionsType, op.builtinOptions = s.BuiltinOptions.AddOptions, s.AddOptionsT()
    sub.operators.append(op)
    sub.inputs, sub.outputs = [len(sub.tensors) - 2], [len(sub.tensors) - 1]
    _compare(pack(model), [_x(2, 3)], tmp_path, atol=0.0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_weight_only_int8_through_dequantize(per_channel: bool, tmp_path: Path) -> None:
    """Weight-only quantization: int8 weights with scales and zero points, a DEQUANTIZE, a float FULLY_CONNECTED."""
    s = schema()
    codes = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    model = unpack(one_op("DEQUANTIZE", [([], codes)], [[4, 5]]))
    sub = model.subgraphs[0]
    q = s.QuantizationParametersT()
    q.scale = [0.02, 0.05, 0.01, 0.03] if per_channel else [0.04]
    q.zeroPoint = [0, 3, -2, 1] if per_channel else [5]
    q.quantizedDimension = 0
    sub.tensors[0].quantization = q
    fc = s.OperatorCodeT()
    fc.builtinCode = fc.deprecatedBuiltinCode = s.BuiltinOperator.FULLY_CONNECTED
    model.operatorCodes.append(fc)
    sub.tensors += [_tensor(s, [3, 5], "x"), _tensor(s, [3, 4], "y")]
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 1, [len(sub.tensors) - 2, sub.outputs[0], -1], [len(sub.tensors) - 1]
    op.builtinOptionsType, op.builtinOptions = s.BuiltinOptions.FullyConnectedOptions, s.FullyConnectedOptionsT()
    sub.operators.append(op)
    sub.inputs, sub.outputs = [len(sub.tensors) - 2], [len(sub.tensors) - 1]
    _compare(pack(model), [_x(3, 5)], tmp_path, atol=1e-5)


def test_a_transpose_pair_that_cancels_writes_no_transpose(tmp_path: Path) -> None:
    s = schema()
    model = unpack(one_op("TRANSPOSE", [([2, 3, 4], None), ([], _i32(1, 2, 0))], [[3, 4, 2]]))
    sub = model.subgraphs[0]
    sub.tensors.append(_tensor(s, [2, 3, 4], "back"))
    b = s.BufferT()
    b.data = list(_i32(2, 0, 1).tobytes())
    model.buffers.append(b)
    sub.tensors.append(_tensor(s, [3], "perm2", len(model.buffers) - 1, 2))
    second = s.OperatorT()
    second.opcodeIndex, second.inputs, second.outputs = 0, [sub.outputs[0], len(sub.tensors) - 1], \
        [len(sub.tensors) - 2]
    sub.operators.append(second)
    relu = s.OperatorCodeT()
    relu.builtinCode = relu.deprecatedBuiltinCode = s.BuiltinOperator.RELU
    model.operatorCodes.append(relu)
    third = s.OperatorT()
    sub.tensors.append(_tensor(s, [2, 3, 4], "y"))
    third.opcodeIndex, third.inputs, third.outputs = 1, [len(sub.tensors) - 3], [len(sub.tensors) - 1]
    sub.operators.append(third)
    sub.outputs = [len(sub.tensors) - 1]
    data = pack(model)
    _compare(data, [_x(2, 3, 4)], tmp_path)
    assert "transpose" not in (tmp_path / "imported" / "main.sknd").read_text()


# ------------------------------------------------------------------------------------ file features

def test_constant_data_after_the_flatbuffer(tmp_path: Path) -> None:
    """Buffers with offset/size (the quantizer's and the >2 GB converter's form) read as inline data."""
    original = (DATA / "small_cnn.tflite").read_bytes()
    model = unpack(original)
    blob = bytearray()
    moved = []
    for b in model.buffers:
        if b.data is not None and len(b.data):
            moved.append((b, bytes(bytearray(b.data))))
            b.data = None
            b.offset, b.size = 1 << 40, 1 << 20  # placeholders (same encoding), set once the length is known
    head = pack(model)
    base = (len(head) + 15) // 16 * 16
    for b, payload in moved:
        b.offset, b.size = base + len(blob), len(payload)
        blob += payload + bytes(-len(payload) % 16)
    head = pack(model)
    assert len(head) <= base  # the offsets did not change the FlatBuffer's length past the data
    data = head + bytes(base - len(head)) + bytes(blob)
    parsed = read(data)
    assert any(start >= base for start, size in parsed.buffers if size)
    _compare(data, inputs_of(DATA / "small_cnn.inputs.npz"), tmp_path)


def test_deprecated_builtin_code_only(tmp_path: Path) -> None:
    """Files from before schema 3a set only the byte-wide deprecated_builtin_code (builtin_code reads 0, ADD)."""
    model = unpack((DATA / "small_cnn.tflite").read_bytes())
    for code in model.operatorCodes:
        code.builtinCode = 0
    data = pack(model)
    assert [op.name for op in read(data).subgraphs[0].operators] == \
        [op.name for op in read((DATA / "small_cnn.tflite").read_bytes()).subgraphs[0].operators]


def test_signature_names_inputs_and_outputs_and_versions_are_read() -> None:
    model = read((DATA / "small_cnn.tflite").read_bytes())
    sig = model.signatures[0]
    assert (sig.key, list(sig.inputs), list(sig.outputs)) == ("serving_default", ["args_0"], ["output_0"])
    versions = {op.name: op.version for op in model.subgraphs[0].operators}
    assert versions["FULLY_CONNECTED"] >= 1 and versions["RESIZE_BILINEAR"] >= 1


def test_the_signature_picks_the_subgraph(tmp_path: Path) -> None:
    """A second subgraph (a body, or another signature) is read; the serving_default signature's is imported."""
    s = schema()
    relu = unpack(one_op("RELU", [([2, 3], None)], [[2, 3]]))
    tanh = unpack(one_op("TANH", [([2, 3], None)], [[2, 3]]))
    tanh.subgraphs[0].operators[0].opcodeIndex = 1
    relu.operatorCodes += tanh.operatorCodes
    relu.subgraphs.append(tanh.subgraphs[0])
    sig = s.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = "serving_default", 1
    sig.inputs, sig.outputs = [s.TensorMapT()], [s.TensorMapT()]
    sig.inputs[0].name, sig.inputs[0].tensorIndex = "x", 0
    sig.outputs[0].name, sig.outputs[0].tensorIndex = "y", 1
    relu.signatureDefs = [sig]
    data = pack(relu)
    assert len(read(data).subgraphs) == 2
    out = tmp_path / "m"
    import_tflite(data, out)
    x = _x(2, 3)
    got = skriptnd.run(skriptnd.load(out).compose(), {"x": x})
    np.testing.assert_allclose(got["y"], np.tanh(x), atol=1e-6)


def test_bodies_are_subgraphs_and_a_body_that_contains_itself_is_refused() -> None:
    """pools.tflite: two STABLEHLO_REDUCE_WINDOW bodies and a STABLEHLO_COMPOSITE decomposition, each a subgraph
    (their conversion is checked against the interpreter above); a decomposition naming the main subgraph is E0861."""
    data = (DATA / "pools.tflite").read_bytes()
    model = read(data)
    assert len(model.subgraphs) == 4
    assert sum(op.name == "STABLEHLO_REDUCE_WINDOW" for op in model.subgraphs[0].operators) == 2
    altered = unpack(data)
    composite = next(op for op in altered.subgraphs[0].operators
                     if altered.operatorCodes[op.opcodeIndex].builtinCode == schema().BuiltinOperator.STABLEHLO_COMPOSITE)
    composite.builtinOptions2.decompositionSubgraphIndex = 0
    with pytest.raises(ImportProblem) as err:
        convert(read(pack(altered)), "m.tflite")
    assert err.value.code == "E0861" and "may not contain itself" in err.value.message


def test_every_unsupported_operator_in_one_diagnostic() -> None:
    s = schema()
    model = unpack(one_op("RELU", [([2, 3], None)], [[2, 3]]))
    sub = model.subgraphs[0]
    rfft, custom = s.OperatorCodeT(), s.OperatorCodeT()
    rfft.builtinCode, rfft.deprecatedBuiltinCode = s.BuiltinOperator.RFFT2D, 127
    custom.builtinCode = custom.deprecatedBuiltinCode = s.BuiltinOperator.CUSTOM
    custom.customCode = "MyFancyOp"
    model.operatorCodes += [rfft, custom]
    last = sub.outputs[0]
    for k, code in enumerate([1, 1, 2]):
        sub.tensors.append(_tensor(s, [2, 3], f"made_by_{k}"))
        op = s.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = code, [last], [len(sub.tensors) - 1]
        sub.operators.append(op)
        last = len(sub.tensors) - 1
    sub.outputs = [last]
    with pytest.raises(ImportProblem) as err:
        convert(read(pack(model)), "m.tflite")
    assert err.value.code == "E0862"
    assert "RFFT2D ×2 (made_by_0, made_by_1)" in err.value.message
    assert "MyFancyOp ×1 (made_by_2)" in err.value.message


# ---------------------------------------------------------------------------------- untrusted files

def _only_diagnostics(data: bytes) -> None:
    try:
        convert(read(data), "fuzz.tflite")
    except ImportProblem as problem:
        assert problem.code.startswith("E086"), problem.code


def test_every_truncation_is_a_diagnostic() -> None:
    data = (DATA / "small_cnn.tflite").read_bytes()
    for cut in range(0, len(data), 97):
        _only_diagnostics(data[:cut])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted_bytes_are_diagnostics_never_a_traceback(flips: list[tuple[int, int]]) -> None:
    data = bytearray((DATA / "tiny_transformer.tflite").read_bytes())
    for where, value in flips:
        data[8 + where % (len(data) - 8)] = value  # keep the identifier: reach the reader's checks
    _only_diagnostics(bytes(data))


def test_a_huge_vector_length_is_refused_without_allocating() -> None:
    data = bytearray((DATA / "small_cnn.tflite").read_bytes())
    root = int.from_bytes(data[0:4], "little")
    vtable = root - int.from_bytes(data[root:root + 4], "little", signed=True)
    field = int.from_bytes(data[vtable + 4 + 2 * 4:vtable + 6 + 2 * 4], "little")  # Model.buffers
    ref = root + field
    vector = ref + int.from_bytes(data[ref:ref + 4], "little")
    data[vector:vector + 4] = (0xFFFFFFF0).to_bytes(4, "little")
    with pytest.raises(ImportProblem) as err:
        read(bytes(data))
    assert err.value.code == "E0861" and "the buffers" in err.value.message


def test_a_buffer_offset_past_the_file_is_refused() -> None:
    model = unpack((DATA / "small_cnn.tflite").read_bytes())
    big = next(b for b in model.buffers if b.data is not None and len(b.data) > 64)
    big.data, big.offset, big.size = None, 1 << 40, 1 << 20
    with pytest.raises(ImportProblem) as err:
        read(pack(model))
    assert err.value.code == "E0861"


def test_not_a_tflite_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(DiagnosticError) as err:
        import_tflite(bad, tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0860"
    assert not (tmp_path / "out").exists()


def test_unusable_quantization_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    """int8 models import as @quantize graphs (tests/test_tflite_int8.py); a scale of 0 stays E0864."""
    s = schema()
    model = unpack(one_op("RELU", [([2, 3], None)], [[2, 3]]))
    for t in model.subgraphs[0].tensors:
        t.type = 9  # INT8
        t.quantization = s.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [0.0], [0]
    with pytest.raises(DiagnosticError) as err:
        import_tflite(pack(model), tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0864" and "'in0'" in err.value.diagnostics[0].message
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------- CLI, API, docs

def test_cli_and_api_detect_tflite_by_its_identifier(tmp_path: Path) -> None:
    renamed = tmp_path / "model.bin"  # no suffix to go by
    renamed.write_bytes((DATA / "small_cnn.tflite").read_bytes())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(renamed), "-o", str(tmp_path / "cli")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "from TFLite" in done.stderr
    assert skriptnd.import_model(renamed, tmp_path / "api") == tmp_path / "api"
    bad = tmp_path / "broken.tflite"
    bad.write_bytes((DATA / "small_cnn.tflite").read_bytes()[:2000])
    done = subprocess.run([sys.executable, "-m", "skriptnd", "import", str(bad), "-o", str(tmp_path / "bad")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and "E0861" in done.stderr and "Traceback" not in done.stderr


def test_import_doc_is_current() -> None:
    assert doc.current(ROOT / "docs" / "import-tflite.md") == doc.render(), \
        "docs/import-tflite.md is stale: run python -m skriptnd.interop.tflite_import.doc docs/import-tflite.md"


def test_the_ops_package_imports_every_family() -> None:
    from skriptnd.interop.tflite_import import ops

    imported = {name for name in vars(ops) if not name.startswith("_")}
    assert imported == set(FAMILIES)
    assert {e.family for e in registry().values()} == set(FAMILIES)


_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(registry())), st.lists(st.tuples(_shapes, st.booleans()), min_size=0, max_size=4),
       st.lists(_shapes, min_size=0, max_size=3), st.integers(-3, 3))
def test_any_operator_on_any_shapes_is_converted_or_refused(builtin: str, inputs: list, outputs: list,
                                                            fill: int) -> None:
    """Crafted operators (wrong input counts, ranks, constants, no options): each converter either writes
    statements or raises a diagnostic; a converter's IndexError or ZeroDivisionError would be a traceback."""
    spec = [(shape, np.full(shape, fill, np.int32) if constant else None) for shape, constant in inputs]
    _only_diagnostics(one_op(builtin, spec, outputs))


def test_every_converter_is_a_builtin_of_the_schema() -> None:
    from skriptnd.interop.tflite_import.builtins import BUILTIN_CODES

    names = set(vars(schema().BuiltinOperator))
    assert set(registry()) <= names and set(registry()) <= set(BUILTIN_CODES)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"]),
       size=st.tuples(st.integers(1, 9), st.integers(1, 9)), kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       same=st.booleans(), activation=st.sampled_from([0, 1, 3]))
def test_window_geometry_matches_the_interpreter(kind: str, size: tuple, kernel: tuple, stride: tuple,
                                                 dilation: tuple, same: bool, activation: int,
                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """SAME/VALID padding, strides, dilations and fused activations of convolutions and pools, any geometry."""
    from hypothesis import assume

    pool = "POOL" in kind
    if pool:
        dilation = (1, 1)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation, strict=True)]
    assume(same or all(s >= f for s, f in zip(size, span, strict=True)))
    out = [-(-s // st_) if same else (s - f) // st_ + 1 for s, f, st_ in zip(size, span, stride, strict=True)]
    channels, mult = 3, 2
    geometry = {"padding": 0 if same else 1, "strideW": stride[1], "strideH": stride[0], "fusedActivationFunction": activation}
    if kind == "CONV_2D":
        spec = [([1, *size, channels], None), ([], _x(4, *kernel, channels)), ([], _x(4))]
        options, oc = builtin_options("Conv2DOptions", **geometry, dilationWFactor=dilation[1], dilationHFactor=dilation[0]), 4
    elif kind == "DEPTHWISE_CONV_2D":
        spec = [([1, *size, channels], None), ([], _x(1, *kernel, channels * mult)), ([], _x(channels * mult))]
        options = builtin_options("DepthwiseConv2DOptions", **geometry, depthMultiplier=mult, dilationWFactor=dilation[1],
                           dilationHFactor=dilation[0])
        oc = channels * mult
    else:
        spec, oc = [([1, *size, channels], None)], channels
        options = builtin_options("Pool2DOptions", **geometry, filterWidth=kernel[1], filterHeight=kernel[0])
    data = one_op(kind, spec, [[1, *out, oc]], options)
    _compare(data, [_x(1, *size, channels)], tmp_path_factory.mktemp("w"), atol=1e-5)


def test_nested_decompositions_cannot_explode() -> None:
    """Each decomposition calls the next twice, 24 levels deep (within the nesting limit of 32): 2**24 operators
    if inlined blindly; refused once the inlined operators pass the limit."""
    s = schema()
    base = unpack((DATA / "pools.tflite").read_bytes())
    composite_code = next(i for i, c in enumerate(base.operatorCodes)
                          if c.builtinCode == s.BuiltinOperator.STABLEHLO_COMPOSITE)
    model = unpack(one_op("RELU", [([2], None)], [[2]]))
    model.operatorCodes.append(base.operatorCodes[composite_code])
    levels = 24
    for level in range(levels):
        sub = s.SubGraphT()
        sub.name, sub.tensors = f"level{level}", [_tensor(s, [2], "a"), _tensor(s, [2], "b"), _tensor(s, [2], "c")]
        sub.inputs, sub.outputs = [0], [2]
        ops = []
        for k in range(2):
            op = s.OperatorT()
            op.opcodeIndex, op.inputs, op.outputs = 1, [k], [k + 1]
            if level + 1 < levels:
                op.builtinOptions2Type = s.BuiltinOptions2.StableHLOCompositeOptions
                op.builtinOptions2 = s.StableHLOCompositeOptionsT()
                op.builtinOptions2.name, op.builtinOptions2.decompositionSubgraphIndex = "c", level + 2
            else:
                op.opcodeIndex = 0  # RELU at the bottom
            ops.append(op)
        sub.operators = ops
        model.subgraphs.append(sub)
    top = model.subgraphs[0].operators[0]
    top.opcodeIndex = 1
    top.builtinOptions2Type = s.BuiltinOptions2.StableHLOCompositeOptions
    top.builtinOptions2 = s.StableHLOCompositeOptionsT()
    top.builtinOptions2.name, top.builtinOptions2.decompositionSubgraphIndex = "c", 1
    with pytest.raises(ImportProblem) as err:
        convert(read(pack(model)), "m.tflite")
    assert err.value.code == "E0861" and "inline more than" in err.value.message
