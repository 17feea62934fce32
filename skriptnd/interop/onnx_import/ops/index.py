"""Indexing: Gather, GatherND, ScatterElements, ScatterND, NonZero -> layout.*."""

from __future__ import annotations

import numpy as np

from skriptnd.interop.onnx_import.context import Context, Node
from skriptnd.interop.onnx_import.errors import ImportProblem
from skriptnd.interop.onnx_import.ops._util import axis as norm_axis
from skriptnd.interop.onnx_import.registry import converter


def _index(ctx: Context, name: str, dim: int) -> str:
    """Indices as an argument; constant negative indices are made non-negative at import time.

    Data indices (ONNX allows [-n, n)) become ``negative ? clamp(i, -n-1, -1) + n : i``: ``i + n`` for
    i in [-n, -1], and an index out of [-n, n) stays out of [0, n) (-1 below, i itself above), so that
    the gather refuses it as it would the original. The clamp bounds the add's operands, so its
    result provably fits int32 (skriptnd.compose.int_ranges) and the wrap compiles with the gather
    under ``--via iree`` instead of splitting the graph around an int add."""
    value = ctx.const(name)
    if value is not None:
        if (value < 0).any():
            return ctx.literal_arg(np.where(value < 0, value + dim, value).astype(np.int64), "index")
        return ctx.arg(name)  # type: ignore[return-value]
    index = ctx.arg(name)
    if not dim:
        return index  # type: ignore[return-value]

    def literal(v: int, what: str) -> str:
        return ctx.literal_arg(np.array(v, np.int64), what)

    negative = ctx.emit("math.lt", [index, literal(0, "zero")], outputs=ctx.fresh("negative"), label=False)
    low = ctx.emit("math.clamp", [index, literal(-dim - 1, "below"), literal(-1, "minus_one")],
                   outputs=ctx.fresh("low"), label=False)
    wrapped = ctx.emit("math.add", [low, literal(dim, "dim")], outputs=ctx.fresh("wrapped"), label=False)
    return ctx.emit("math.select", [negative, wrapped, index], outputs=ctx.fresh("index"), label=False)


@converter("Gather", target="`layout.gather{axis}`", caveats="negative data indices wrapped by math.clamp / add / select")
def _gather(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.input(0))
    k = norm_axis(int(node.attr("axis", 0)), len(shape))
    dim = shape[k] if isinstance(shape[k], int) else 0
    ctx.emit("layout.gather", [ctx.arg(node.input(0)), _index(ctx, node.input(1), dim)], {"axis": k})


@converter("GatherND", target="`layout.gather_nd{batch_dims}`")
def _gather_nd(ctx: Context, node: Node) -> None:
    attribs = {"batch_dims": int(node.attr("batch_dims", 0))} if node.attr("batch_dims", 0) else {}
    ctx.emit("layout.gather_nd", [ctx.arg(node.input(0)), ctx.arg(node.input(1))], attribs)


@converter("ScatterElements", target="`layout.scatter{axis}`", caveats="reductions add/mul/min/max as operators written in ops/index.sknd")
def _scatter_elements(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.input(0))
    k = norm_axis(int(node.attr("axis", 0)), len(shape))
    dim = shape[k] if isinstance(shape[k], int) else 0
    reduction = node.attr("reduction", "none")
    if reduction != "none" or ctx.shape(node.input(1)) != shape[:k] + ctx.shape(node.input(1))[k:k + 1] + shape[k + 1:]:
        ctx.define_module(MODULE, "ops.index", TEXT)
        if reduction == "none":
            raise ImportProblem("E0807", f"{node.where}: indices smaller than the data off the axis need a "
                                "reduction-free scatter that is not supported")
        ctx.emit(f"ops.index.scatter_elements_{reduction}", [ctx.arg(node.input(0)), _index(ctx, node.input(1), dim),
                                                             ctx.arg(node.input(2))], {"axis": k})
        return
    ctx.emit("layout.scatter", [ctx.arg(node.input(0)), _index(ctx, node.input(1), dim), ctx.arg(node.input(2))],
             {"axis": k})


@converter("ScatterND", target="`layout.scatter_nd`", caveats="reductions add/mul/min/max as operators written "
           "in ops/index.sknd")
def _scatter_nd(ctx: Context, node: Node) -> None:
    reduction = node.attr("reduction", "none")
    if reduction != "none":
        ctx.define_module(MODULE, "ops.index", TEXT)
        ctx.emit(f"ops.index.scatter_nd_{reduction}", [ctx.arg(node.input(i)) for i in range(3)])
        return
    ctx.emit("layout.scatter_nd", [ctx.arg(node.input(0)), ctx.arg(node.input(1)), ctx.arg(node.input(2))])


@converter("NonZero", target="`layout.nonzero`", caveats="the output's length is dynamic")
def _nonzero(ctx: Context, node: Node) -> None:
    ctx.emit("layout.nonzero", [ctx.arg(node.input(0))])


MODULE = "ops/index.sknd"
TEXT = """# Indexing operators of ONNX that the standard library lacks, written by sknd import.

# ONNX GatherElements: output[i] = data[i with i[axis] replaced by index[i]] (axis non-negative)
operator gather_elements {
    @dtype {
        T: type;
    }
    @attrib {
        axis: int;
    }
    @input {
        data: T[s..(axis), n, t..];
        index: int[u..(axis), m, v..];
    }
    @output {
        output: T[u.., m, v..];
    }
    @lower {
        output[ui.., mi, vi..] = data[ui.., index[ui.., mi, vi..], vi..],
            ui < u, mi < m, vi < v;
    }
}
"""

_SCATTER = """
# ONNX ScatterElements with reduction '{name}' (axis non-negative)
operator scatter_elements_{name} {{
    @dtype {{
        T: num;
    }}
    @attrib {{
        axis: int;
    }}
    @input {{
        data: T[s..(axis), n, t..];
        indices: int[u..(axis), m, v..];
        updates: T[u..(axis), m, v..];
    }}
    @output {{
        output: T[s.., n, t..];
    }}
    @lower {{
        output[si.., ni, ti..] = data[si.., ni, ti..],
            si < s, ni < n, ti < t;
        output[ui.., indices[ui.., mi, vi..], vi..] {op} updates[ui.., mi, vi..],
            ui < u, mi < m, vi < v;
    }}
}}

# ONNX ScatterND with reduction '{name}'
operator scatter_nd_{name} {{
    @dtype {{
        T: num;
    }}
    @input {{
        data: T[s..(d), t..];
        indices: int[z.., d];
        updates: T[z.., t..];
    }}
    @output {{
        output: T[s.., t..];
    }}
    @lower {{
        output[si.., ti..] = data[si.., ti..],
            si < s, ti < t;
        output[indices[zi.., :].., ti..] {op} updates[zi.., ti..],
            zi < z, ti < t;
    }}
}}
"""
_REDUCTIONS = {"add": "+=", "mul": "*=", "min": "<?=", "max": ">?="}
TEXT += "".join(_SCATTER.format(name=k, op=v) for k, v in _REDUCTIONS.items())


@converter("GatherElements", target="`ops.index.gather_elements{axis}` (written in the folder, by @lower)",
           caveats="negative data indices wrapped by math.clamp / add / select")
def _gather_elements(ctx: Context, node: Node) -> None:
    shape = ctx.shape(node.input(0))
    k = norm_axis(int(node.attr("axis", 0)), len(shape))
    dim = shape[k] if isinstance(shape[k], int) else 0
    ctx.define_module(MODULE, "ops.index", TEXT)
    ctx.emit("ops.index.gather_elements", [ctx.arg(node.input(0)), _index(ctx, node.input(1), dim)], {"axis": k})
