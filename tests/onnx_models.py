"""Reference networks built as ONNX graphs with onnx.helper from their architecture (torchvision's
ResNet-18 and MobileNetV2, a pre-norm transformer encoder), with given weight arrays.

Shared by tests/test_model_zoo.py (onnxruntime as the oracle for the hand-written models) and
tests/test_onnx_import_models.py (the same graphs imported by `sknd import`).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Onnx:
    """A small ONNX graph builder: nodes with fresh output names, initialisers from numpy arrays."""

    OPSET = 20

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def _fresh(self, base: str) -> str:
        self._count += 1
        return f"{base}_{self._count}"

    def const(self, array: Any, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        name = self._fresh("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
        return name

    def ints(self, *values: int) -> str:
        return self.const(np.array(values), np.int64)

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs: Any) -> Any:
        from onnx import helper

        names = [self._fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def model(self, inputs: dict[str, np.ndarray], outputs: dict[str, str]) -> Any:
        """The checked ModelProto with graph inputs shaped like `inputs` and outputs `outputs`
        (result name -> node output)."""
        import onnx
        from onnx import TensorProto, helper

        types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
                 np.dtype(np.int32): TensorProto.INT32}
        graph_inputs = [helper.make_tensor_value_info(k, types[v.dtype], list(v.shape)) for k, v in inputs.items()]
        nodes = list(self.nodes)
        graph_outputs = []
        for name, node_output in outputs.items():
            nodes.append(helper.make_node("Identity", [node_output], [name]))
            graph_outputs.append(helper.make_empty_tensor_value_info(name))
        graph = helper.make_graph(nodes, "reference", graph_inputs, graph_outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.OPSET)])
        model.ir_version = 10
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # also types the outputs
        onnx.checker.check_model(model)
        return model

    def run(self, ort: Any, inputs: dict[str, np.ndarray], outputs: dict[str, str]) -> dict[str, np.ndarray]:
        """Run with graph inputs `inputs` (by name) and return `outputs` (result name -> node output)."""
        model = self.model(inputs, outputs)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return dict(zip(outputs, session.run(list(outputs), inputs), strict=True))


def _conv_bn_onnx(b: Onnx, w: dict[str, np.ndarray], x: str, name: str, stride: int = 1, relu: bool = False) -> str:
    size = w[f"{name}.filter"].shape[-1]
    y = b.op("Conv", x, b.const(w[f"{name}.filter"]), kernel_shape=[size, size], strides=[stride, stride],
             pads=[size // 2] * 4, group=1)
    y = b.op("BatchNormalization", y, b.const(w[f"{name}.scale"]), b.const(w[f"{name}.bias"]),
             b.const(w[f"{name}.mean"]), b.const(w[f"{name}.variance"]), epsilon=1e-5)
    return b.op("Relu", y) if relu else y


def resnet18_onnx(w: dict[str, np.ndarray]) -> Onnx:
    """torchvision's resnet18 in ONNX operators; input 'input', output 'logits' (node name)."""
    b = Onnx()
    x = _conv_bn_onnx(b, w, "input", "conv1", stride=2, relu=True)
    x = b.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for stage, stride in [(1, 1), (2, 2), (3, 2), (4, 2)]:
        for block in range(2):
            name = f"layer{stage}_{block}"
            s = stride if block == 0 else 1
            y = _conv_bn_onnx(b, w, x, f"{name}.conv1", stride=s, relu=True)
            y = _conv_bn_onnx(b, w, y, f"{name}.conv2")
            shortcut = _conv_bn_onnx(b, w, x, f"{name}.downsample", stride=s) if f"{name}.downsample.filter" in w \
                else x
            x = b.op("Relu", b.op("Add", y, shortcut))
    x = b.op("Flatten", b.op("GlobalAveragePool", x), axis=1)
    b.logits = b.op("Gemm", x, b.const(w["fc_filter"]), b.const(w["fc_bias"]), transB=1)
    return b


def mobilenetv2_onnx(w: dict[str, np.ndarray], blocks: list[tuple[int, int, int]]) -> Onnx:
    """torchvision's mobilenet_v2 (eval mode, no dropout) in ONNX operators."""
    b = Onnx()
    zero, six = b.const(0.0), b.const(6.0)

    def conv_bn(x: str, name: str, stride: int = 1, depthwise: bool = False, relu6: bool = True) -> str:
        filt = w[f"{name}.filter"]
        size = filt.shape[-1]
        y = b.op("Conv", x, b.const(filt), kernel_shape=[size, size], strides=[stride, stride],
                 pads=[size // 2] * 4, group=filt.shape[0] if depthwise else 1)
        y = b.op("BatchNormalization", y, b.const(w[f"{name}.scale"]), b.const(w[f"{name}.bias"]),
                 b.const(w[f"{name}.mean"]), b.const(w[f"{name}.variance"]), epsilon=1e-5)
        return b.op("Clip", y, zero, six) if relu6 else y

    x = conv_bn("input", "conv0", stride=2)
    channels = w["conv0.filter"].shape[0]
    for k, (t, c, s) in enumerate(blocks, start=1):
        y = conv_bn(x, f"block{k}.expand") if t != 1 else x
        y = conv_bn(y, f"block{k}.depthwise", stride=s, depthwise=True)
        y = conv_bn(y, f"block{k}.project", relu6=False)
        x = b.op("Add", x, y) if s == 1 and channels == c else y
        channels = c
    x = conv_bn(x, "conv18")
    x = b.op("Flatten", b.op("GlobalAveragePool", x), axis=1)
    b.logits = b.op("Gemm", x, b.const(w["classifier_filter"]), b.const(w["classifier_bias"]), transB=1)
    return b


def transformer_onnx(w: dict[str, np.ndarray], heads: int, blocks: int = 2) -> Onnx:
    """Pre-norm encoder blocks with ONNX LayerNormalization, MatMul, Softmax and Gelu; input 'tokens'."""
    b = Onnx()

    def dense(x: str, name: str) -> str:
        return b.op("Add", b.op("MatMul", x, b.const(w[f"{name}.filter"].T)), b.const(w[f"{name}.bias"]))

    def norm(x: str, name: str) -> str:
        return b.op("LayerNormalization", x, b.const(w[f"{name}.scale"]), b.const(w[f"{name}.bias"]),
                    axis=-1, epsilon=1e-5)

    x = "tokens"
    for k in range(1, blocks + 1):
        p = f"block{k}"
        dim = w[f"{p}.attention.query.filter"].shape[0]
        dh = dim // heads
        n1 = norm(x, f"{p}.norm1")
        split = b.ints(0, 0, heads, dh)  # Reshape: 0 copies the input extent (batch, seq)
        q, kk, v = (b.op("Transpose", b.op("Reshape", dense(n1, f"{p}.attention.{m}"), split), perm=[0, 2, 1, 3])
                    for m in ("query", "key", "value"))
        logits = b.op("MatMul", q, b.op("Transpose", kk, perm=[0, 1, 3, 2]))
        attn = b.op("Softmax", b.op("Div", logits, b.const(np.sqrt(dh))), axis=-1)
        context = b.op("Transpose", b.op("MatMul", attn, v), perm=[0, 2, 1, 3])
        merged = b.op("Reshape", context, b.ints(0, 0, dim))
        x = b.op("Add", x, dense(merged, f"{p}.attention.out"))
        hidden = b.op("Gelu", dense(norm(x, f"{p}.norm2"), f"{p}.fc1"), approximate="none")
        x = b.op("Add", x, dense(hidden, f"{p}.fc2"))
    b.output = x
    return b


def _onnx_gates(a: np.ndarray) -> np.ndarray:
    """nn.lstm packs gates [i, f, g, o] along axis 0; ONNX LSTM wants [i, o, f, c] (c = g)."""
    i, f, g, o = np.split(a, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def lstm_onnx(w: dict[str, np.ndarray], with_steps: bool) -> Onnx:
    """Two stacked ONNX LSTM layers (forward, zero initial states); input 'X' (and 'steps', int32)."""
    b = Onnx()
    x = "X"
    finals: list[tuple[str, str]] = []
    for layer in ("layer1", "layer2"):
        hidden = w[f"{layer}_R"].shape[1]
        W = _onnx_gates(w[f"{layer}_W"])[None]
        R = _onnx_gates(w[f"{layer}_R"])[None]
        B = np.concatenate([_onnx_gates(w[f"{layer}_B"]), np.zeros(4 * hidden, np.float32)])[None]  # Wb, Rb
        y, h, c = b.op("LSTM", x, b.const(W), b.const(R), b.const(B), "steps" if with_steps else "",
                       outputs=3, hidden_size=hidden, direction="forward")
        x = b.op("Squeeze", y, b.ints(1))  # Y [seq, num_directions=1, batch, hidden]
        finals.append((h, c))
    b.Y = x
    b.hN = b.op("Concat", finals[0][0], finals[1][0], axis=0)
    b.cN = b.op("Concat", finals[0][1], finals[1][1], axis=0)
    return b


def require_onnx() -> tuple[Any, Any]:
    """onnx and onnxruntime (the `onnx` and `dev` extras); missing: skip, or fail on CI (CI=1)."""
    import os

    import pytest

    try:
        import onnx
        import onnxruntime
    except ImportError as err:
        if os.environ.get("CI"):
            pytest.fail(f"{err.name} is not installed; the dev extra installs it")
        pytest.skip(f"{err.name} is not installed (pip install -e '.[dev]')")
    return onnx, onnxruntime
