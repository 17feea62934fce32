"""Window geometry shared by convolution and pooling: ONNX's auto_pad turned into explicit paddings.

SkriptND's implicit padding (`padding` omitted) centres like TensorFlow's SAME but differs from ONNX's
SAME_LOWER, so the importer always writes explicit paddings, [begin..., end...] as ONNX's `pads`.
"""

from __future__ import annotations

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem


def window(ctx: Context, node: Node, spatial: tuple[int, ...], kernel: list[int], *,
           transposed: bool = False) -> tuple[list[int], list[int], list[int]]:
    """(strides, dilations, pads) of a Conv/ConvTranspose/pool node with auto_pad resolved."""
    d = len(kernel)
    strides = list(node.attr("strides", [1] * d))
    dilations = list(node.attr("dilations", [1] * d))
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(node.attr("pads", [0] * (2 * d)))
    elif auto == "VALID":
        pads = [0] * (2 * d)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(d):
            fd = (kernel[i] - 1) * dilations[i] + 1
            if transposed:
                total = max(0, (spatial[i] - 1) * strides[i] + fd - spatial[i] * strides[i]
                            + list(node.attr("output_padding", [0] * d))[i])
            else:
                out = -(-spatial[i] // strides[i])
                total = max(0, (out - 1) * strides[i] + fd - spatial[i])
            small, large = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else large)
            end.append(large if auto == "SAME_UPPER" else small)
        pads = begin + end
    else:
        raise ImportProblem("E0807", f"{node.where}: auto_pad '{auto}' is not an ONNX value")
    return strides, dilations, pads
