"""The notes for PyTorch / ONNX users that `sknd doc` shows (skriptnd/semantics/opnotes.toml), each
checked: the operator runs through skriptnd (numpy interpreter) with the settings the note names and
through onnxruntime with the ONNX equivalent the note states, built by hand with onnx.helper (not by
our exporter), and the two must agree. One test per note, keyed by (operator, position); a test
below checks that every note in the file has one, so a note cannot be added unchecked."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.semantics.docgen import load_module, operator_notes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_oracle import assert_close, require_ort, run_onnx  # noqa: E402

_counter = itertools.count()
RNG = np.random.default_rng(29)


def sknd(tmp: Path, inputs: dict[str, np.ndarray], body: str, shape: tuple[int, ...]) -> np.ndarray:
    """Run `y = <body>` in a one-operation graph through skriptnd's default (numpy) backend; `shape`
    is the output's declared shape, so a different one fails to compose."""
    folder = tmp / f"g{next(_counter)}"
    folder.mkdir(parents=True)
    decls = " ".join(f"{k}: {'real' if v.dtype.kind == 'f' else 'int'}[{', '.join(map(str, v.shape))}];"
                     for k, v in inputs.items())
    (folder / "main.sknd").write_text("import layout;\nimport math;\nimport nn;\n"
                                      f"graph G {{\n    @input {{ {decls} }}\n    @output {{ y: real[{', '.join(map(str, shape))}]; }}\n"
                                      f"    @compose {{\n        y = {body};\n    }}\n}}\n")
    graph = skriptnd.load(folder).compose()
    return np.asarray(skriptnd.run(graph, inputs)["y"])


def ort(op: str, inputs: dict[str, np.ndarray], opset: int = 17, extra: dict[str, np.ndarray] | None = None,
        **attrs: Any) -> np.ndarray:
    """Run one ONNX node (`op`, inputs in order, constant `extra` inputs as initializers) in onnxruntime."""
    require_ort()
    from onnx import TensorProto, helper, numpy_helper

    def info(name: str, a: np.ndarray) -> Any:
        kind = TensorProto.FLOAT if a.dtype.kind == "f" else TensorProto.INT64
        return helper.make_tensor_value_info(name, kind, list(a.shape))

    extra = extra or {}
    node = helper.make_node(op, [*inputs, *extra], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [info(k, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in extra.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return run_onnx(model, dict(inputs))["y"]


def real(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def same(tmp: Path, inputs: dict[str, np.ndarray], body: str, expected: np.ndarray) -> None:
    """skriptnd's `body` on `inputs` gives `expected` (onnxruntime's result), shape included."""
    assert_close(sknd(tmp, inputs, body, expected.shape), expected)


# ---------------------------------------------------------------------------------------- nn.conv

def conv_default_padding_is_same(tmp: Path) -> None:
    xw = {"x": real(1, 2, 6, 5), "w": real(3, 2, 3, 2)}  # an even filter width: odd total padding
    same_upper = ort("Conv", xw, auto_pad="SAME_UPPER")
    assert same_upper.shape == (1, 3, 6, 5)
    assert not np.allclose(same_upper, ort("Conv", xw, auto_pad="SAME_LOWER"))  # so UPPER is tested
    same(tmp, xw, "nn.conv(x, w)", same_upper)
    same(tmp, xw, "nn.conv{padding=[0, 0, 0, 0]}(x, w)", ort("Conv", xw))  # ONNX default: no padding


def conv_padding_order(tmp: Path) -> None:
    xw = {"x": real(1, 2, 5, 6), "w": real(2, 2, 3, 2)}
    # [h_before, w_before, h_after, w_after], all different so that any other order fails
    same(tmp, xw, "nn.conv{padding=[2, 0, 1, 3]}(x, w)", ort("Conv", xw, pads=[2, 0, 1, 3]))
    same(tmp, xw, "nn.conv{padding=[1, 2, 1, 2]}(x, w)", ort("Conv", xw, pads=[1, 2, 1, 2]))  # Conv2d(padding=(1, 2))


def conv_strided_same(tmp: Path) -> None:
    w = real(1, 1, 2, 2)  # (4 - 1) * 2 + 2 - 7: an odd total padding, so UPPER and LOWER differ
    x7, x8 = {"x": real(1, 1, 7, 7), "w": w}, {"x": real(1, 1, 8, 8), "w": w}
    assert not np.allclose(ort("Conv", x7, strides=[2, 2], auto_pad="SAME_UPPER"),
                           ort("Conv", x7, strides=[2, 2], auto_pad="SAME_LOWER"))
    for align, onnx_pad in (("UPPER", "SAME_UPPER"), ("LOWER", "SAME_LOWER")):
        same(tmp, x7, f'nn.conv{{stride=2, ceil_mode=true, padding_align="{align}"}}(x, w)',
             ort("Conv", x7, strides=[2, 2], auto_pad=onnx_pad))
    same(tmp, x8, "nn.conv{stride=2}(x, w)", ort("Conv", x8, strides=[2, 2], auto_pad="SAME_UPPER"))
    # the "only": 7 is not a multiple of 2, and without ceil_mode the output is shorter than SAME's
    assert ort("Conv", x7, strides=[2, 2], auto_pad="SAME_UPPER").shape == (1, 1, 4, 4)
    assert sknd(tmp, x7, "nn.conv{stride=2}(x, w)", (1, 1, 3, 3)).shape == (1, 1, 3, 3)


def conv_layouts_and_depthwise(tmp: Path) -> None:
    x = real(2, 3, 5, 4)
    xwb = {"x": x, "w": real(4, 3, 2, 3), "b": real(4)}
    same(tmp, xwb, "nn.conv{padding=[0, 0, 0, 0]}(x, w, b)", ort("Conv", xwb))
    xw = {"x": x, "w": real(3, 1, 3, 3)}
    same(tmp, xw, "nn.conv{groups=0, padding=[1, 1, 1, 1]}(x, w)", ort("Conv", xw, group=3, pads=[1, 1, 1, 1]))


# ---------------------------------------------------------------------------------------- pools

def max_pool_defaults(tmp: Path) -> None:
    x = {"x": real(1, 2, 6, 7)}
    same(tmp, x, "nn.max_pool{size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0]}(x)",
         ort("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2]))
    same(tmp, x, "nn.max_pool{size=[2, 2]}(x)", ort("MaxPool", x, kernel_shape=[2, 2], auto_pad="SAME_UPPER"))


def max_pool_padding_is_skipped(tmp: Path) -> None:
    x = {"x": -np.abs(real(1, 1, 4, 5)) - 1.0}  # all negative: a zero read from the padding would win
    expected = ort("MaxPool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert (expected < 0).all()
    same(tmp, x, "nn.max_pool{size=[3, 3], padding=[1, 1, 1, 1]}(x)", expected)


def avg_pool_ignore_border(tmp: Path) -> None:
    x = {"x": real(1, 2, 5, 5)}
    for ignore, include in (("true", 0), ("false", 1)):
        same(tmp, x, f"nn.avg_pool{{size=[3, 3], padding=[1, 1, 1, 1], ignore_border={ignore}}}(x)",
             ort("AveragePool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=include))
    same(tmp, x, "nn.avg_pool{size=[3, 3], padding=[1, 1, 1, 1]}(x)",
         ort("AveragePool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))


def avg_pool_defaults(tmp: Path) -> None:
    x = {"x": real(1, 2, 6, 4)}
    same(tmp, x, "nn.avg_pool{size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0]}(x)",
         ort("AveragePool", x, kernel_shape=[2, 2], strides=[2, 2]))
    same(tmp, x, "nn.avg_pool{size=[2, 2]}(x)", ort("AveragePool", x, kernel_shape=[2, 2], auto_pad="SAME_UPPER"))


# ---------------------------------------------------------------------------------------- activations

def relu_leaky_and_six(tmp: Path) -> None:
    x = {"x": real(3, 8) * 5.0}
    for a in (0.0, 0.1, 1.0):
        same(tmp, x, f"nn.relu{{alpha={a}}}(x)", ort("LeakyRelu", x, alpha=a))
    bounds = {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    same(tmp, x, "nn.relu{max=6.0}(x)", ort("Clip", x, extra=bounds))


def gelu_tanh(tmp: Path) -> None:
    x = {"x": real(4, 6) * 3.0}
    same(tmp, x, 'nn.gelu{approximate="TANH"}(x)', ort("Gelu", x, opset=20, approximate="tanh"))
    same(tmp, x, "nn.gelu(x)", ort("Gelu", x, opset=20))


def softmax_axis(tmp: Path) -> None:
    x = {"x": real(2, 3, 4)}
    same(tmp, x, "nn.softmax(x)", ort("Softmax", x, opset=13, axis=1))
    same(tmp, x, "nn.softmax{axes=[-1]}(x)", ort("Softmax", x, opset=13))


def batch_norm_input_order(tmp: Path) -> None:
    x = {"x": real(2, 3, 4, 4)}
    mean, scale, bias = real(3), real(3), real(3)
    var = np.abs(real(3)) + 0.1
    stats = {"mean": mean, "var": var, "bias": bias, "scale": scale}
    expected = ort("BatchNormalization", x, opset=15, extra={"s": scale, "b": bias, "m": mean, "v": var})
    same(tmp, {**x, **stats}, "nn.batch_norm(x, mean, var, bias, scale)", expected)


# ---------------------------------------------------------------------------------------- layout, math

def flatten_torch_and_onnx(tmp: Path) -> None:
    x = {"x": real(2, 3, 4, 5)}
    same(tmp, x, "layout.flatten{axis=1}(x)", ort("Flatten", x, axis=1))
    # torch.flatten(x, 1, 2) merges dimensions 1 and 2 only: numpy's reshape is the oracle
    same(tmp, x, "layout.flatten{axis=1, rank=2}(x)", x["x"].reshape(2, 12, 5))
    # ONNX Flatten(axis=2) also merges the dimensions before 2, which layout.flatten{axis=2} keeps
    assert ort("Flatten", x, axis=2).shape == (6, 20)
    assert sknd(tmp, x, "layout.flatten{axis=2}(x)", (2, 3, 20)).shape == (2, 3, 20)



def reshape_zero(tmp: Path) -> None:
    x = {"x": real(2, 3, 4)}
    same(tmp, x, "layout.reshape{axis=1, shape=[-1]}(x)", ort("Reshape", x, extra={"s": np.array([0, -1], np.int64)}))
    with pytest.raises(DiagnosticError, match="must be positive or -1"):
        sknd(tmp, x, "layout.reshape{shape=[0, -1]}(x)", (2, 12))


def transpose_perm(tmp: Path) -> None:
    x = {"x": real(2, 3, 4, 5)}
    expected = ort("Transpose", x, perm=[0, 2, 3, 1])
    assert_close(expected, np.transpose(x["x"], (0, 2, 3, 1)))
    same(tmp, x, "layout.transpose{perm=[0, 2, 3, 1]}(x)", expected)
    same(tmp, x, "layout.transpose(x)", ort("Transpose", x))


def pad_order(tmp: Path) -> None:
    x = {"x": real(1, 2, 4, 5)}
    t, left, b, r = 2, 1, 0, 3
    pads = {"p": np.array([0, 0, t, left, 0, 0, b, r], np.int64)}
    expected = ort("Pad", x, extra=pads)
    # F.pad(x, (l, r, t, b)) pads the last dimension by (l, r) and the one before it by (t, b)
    assert_close(expected, np.pad(x["x"], [(0, 0), (0, 0), (t, b), (left, r)]))
    same(tmp, x, f"layout.pad{{axes=[2, 3], padding=[{t}, {left}, {b}, {r}]}}(x)", expected)
    for method, mode in (("REFLECT", "reflect"), ("REPLICATE", "edge")):
        same(tmp, x, f'layout.pad{{axes=[2, 3], padding=[{t}, {left}, {b}, {r}], method="{method}"}}(x)',
             ort("Pad", x, extra=pads, mode=mode))


def slice_negative(tmp: Path) -> None:
    x = {"x": real(6, 5)}

    def ints(*v: int) -> np.ndarray:
        return np.array(v, np.int64)

    down = ort("Slice", x, extra={"b": ints(4), "e": ints(np.iinfo(np.int64).min), "a": ints(0), "s": ints(-1)})
    assert down.shape == (5, 5)
    same(tmp, x, "layout.slice{axes=[0], begin=[4], end=[-1], stride=[-1]}(x)", down)
    same(tmp, x, "layout.slice{axes=[1], begin=[1], end=[100]}(x)",
         ort("Slice", x, extra={"b": ints(1), "e": ints(100), "a": ints(1)}))
    with pytest.raises(DiagnosticError, match="'begin' must be non-negative"):
        sknd(tmp, x, "layout.slice{axes=[0], begin=[-2], end=[6]}(x)", (2, 5))


def sum_reduce_squeeze(tmp: Path) -> None:
    x, axes = {"x": real(2, 3, 4)}, {"a": np.array([1], np.int64)}
    same(tmp, x, "math.sum_reduce{axes=[1]}(x)", ort("ReduceSum", x, extra=axes))
    squeezed = ort("ReduceSum", x, extra=axes, keepdims=0)
    assert squeezed.shape == (2, 4)
    same(tmp, x, "math.sum_reduce{axes=[1], squeeze=true}(x)", squeezed)


CHECKS: dict[tuple[str, int], Callable[[Path], None]] = {
    ("nn.conv", 0): conv_default_padding_is_same,
    ("nn.conv", 1): conv_padding_order,
    ("nn.conv", 2): conv_strided_same,
    ("nn.conv", 3): conv_layouts_and_depthwise,
    ("nn.max_pool", 0): max_pool_defaults,
    ("nn.max_pool", 1): max_pool_padding_is_skipped,
    ("nn.avg_pool", 0): avg_pool_ignore_border,
    ("nn.avg_pool", 1): avg_pool_defaults,
    ("nn.relu", 0): relu_leaky_and_six,
    ("nn.gelu", 0): gelu_tanh,
    ("nn.softmax", 0): softmax_axis,
    ("nn.batch_norm", 0): batch_norm_input_order,
    ("layout.flatten", 0): flatten_torch_and_onnx,
    ("layout.reshape", 0): reshape_zero,
    ("layout.transpose", 0): transpose_perm,
    ("layout.pad", 0): pad_order,
    ("layout.slice", 0): slice_negative,
    ("math.sum_reduce", 0): sum_reduce_squeeze,
}


def test_every_note_has_a_check() -> None:
    notes = {(op, i) for op, n in operator_notes().items() for i in range(len(n.notes))}
    assert notes == set(CHECKS)


def test_every_curated_attribute_exists() -> None:
    """A meaning for an attribute the operator does not have (renamed, mistyped) fails here."""
    for name, notes in operator_notes().items():
        module, _, op = name.partition(".")
        defn = next(d for d in load_module(module).definitions if d.name == op)
        declared = {p.name for b in defn.blocks if getattr(b, "kind", None) == "attrib" for p in b.items}
        assert set(notes.attributes) <= declared, (name, set(notes.attributes) - declared)


@pytest.mark.parametrize("key", list(CHECKS), ids=[f"{op}-{i}" for op, i in CHECKS])
def test_note_holds(key: tuple[str, int], tmp_path: Path) -> None:
    CHECKS[key](tmp_path)


def test_deconv_meanings_hold(tmp_path: Path) -> None:
    """nn.deconv's curated meanings: `padding` crops like ConvTranspose's `pads` (begins, then ends),
    the filter is [in_channels, out_channels / groups, ...], and `output_size` picks among the sizes
    a stride of 2 allows, as ConvTranspose's `output_padding`."""
    xw = {"x": real(1, 3, 4, 5), "w": real(3, 2, 3, 3)}
    same(tmp_path, xw, "nn.deconv{stride=2, padding=[1, 0, 2, 1]}(x, w)",
         ort("ConvTranspose", xw, strides=[2, 2], pads=[1, 0, 2, 1]))
    same(tmp_path, xw, "nn.deconv{stride=2, padding=[1, 1, 1, 1], output_size=[8, 10]}(x, w)",
         ort("ConvTranspose", xw, strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))


def test_unsqueeze_axes_are_output_positions(tmp_path: Path) -> None:
    x = {"x": real(3, 4)}
    same(tmp_path, x, "layout.unsqueeze{axes=[0, 2]}(x)", ort("Unsqueeze", x, extra={"a": np.array([0, 2], np.int64)}))
