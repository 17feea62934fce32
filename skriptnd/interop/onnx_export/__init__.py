"""Export a composed SkriptND graph of standard operations to ONNX.

:func:`to_onnx` walks the graph (``skriptnd.load(folder).compose(...)``) and converts each operation
with the converter registered for its operator (one module per stdlib family: :mod:`.layout`,
:mod:`.math_ops`, :mod:`.linalg`, :mod:`.nn`, :mod:`.image`, :mod:`.quant`, :mod:`.algo`); composite
operators without a converter go through their own @compose (:mod:`.walk`). Weights become
initializers. The model is checked by ``onnx.checker.check_model(full_check=True)`` before it is
returned. Everything ONNX cannot express is a located diagnostic (E0840-E0846) at the operation's
span, all of them at once, and nothing is produced.

:func:`save_onnx` writes a model atomically: one ``.onnx`` file, or, above 2 GB (protobuf's limit),
the ``.onnx`` file and its external data file ``<name>.data`` beside it. :func:`export_onnx` does both.

``onnx`` is an optional dependency (the ``dev`` extra); it is imported lazily, and a missing package
is a diagnostic naming the extra.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.extras import install_hint
from skriptnd.fileio import output_target, write_atomic

# the operator families register their converters on import: this package lists them (the registry, core,
# imports none of its entries)
from skriptnd.interop.onnx_export import algo, image, layout, linalg, math_ops, nn  # noqa: F401
from skriptnd.interop.onnx_export.core import CONVERTERS, NUMPY, Context, Unsupported, shape
from skriptnd.interop.onnx_export.fuse import hard_activations, read_initializers
from skriptnd.interop.onnx_export.quant import quantize_graph_inputs, quantized_value
from skriptnd.interop.onnx_export.walk import ControlFlowUnsupported, convert
from skriptnd.source import Span

if TYPE_CHECKING:  # onnx is an optional dependency, imported when exporting
    from onnx import GraphProto, ModelProto, ValueInfoProto

register_codes({
    "E0840": "operation cannot be exported to ONNX",
    "E0841": "graph input or output type cannot be written in ONNX",
    "E0842": "stateful graph (variable updates) cannot be exported to ONNX",
    "E0843": "control flow that ONNX If/Loop cannot express",
    "E0844": "the onnx package is not installed",
    "E0845": "the ONNX checker rejected the exported model",
    "E0846": "unsupported ONNX opset",
})

__all__ = ["to_onnx", "export_onnx", "save_onnx", "check_exportable", "CONVERTERS", "MIN_OPSET", "MAX_OPSET"]

MIN_OPSET = 17
MAX_OPSET = 21
#: Above this many bytes of initializers the model is written with external data (protobuf: 2 GB).
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**24


#: What to do about an operation whose ONNX form needs a dynamic extent as a constant.
DYNAMIC_HINT = ("ONNX gets the graph's dynamic extents as dim_params; this operation needs the size itself: declare "
                "the input with that extent fixed (`real[1, 3, 224, 224]`), or as a graph attribute "
                "(`@attrib { h: int = 224; }`, `real[n|8, 3, h, h]`) and export with --attrib h=VALUE")


def _span(x: Tensor | Operation | Graph) -> Span:
    span = getattr(x, "span", None)
    return span if isinstance(span, Span) else Span("<graph>", 1, 1, 1, 1)


def _graph_span(graph: Graph) -> Span:
    for t in list(graph.outputs) + list(graph.inputs):
        if isinstance(getattr(t, "span", None), Span):
            return t.span
    return Span("<graph>", 1, 1, 1, 1)


def _require_onnx(graph: Graph) -> ModuleType:
    try:
        import onnx
    except ImportError:
        raise DiagnosticError([Diagnostic(
            code="E0844", message="ONNX export needs the 'onnx' package", span=_graph_span(graph),
            hint=install_hint("onnx"))]) from None
    return onnx


def _value_info(onnx: ModuleType, name: str, t: Tensor) -> ValueInfoProto:
    elem = {"real": onnx.TensorProto.FLOAT, "int": onnx.TensorProto.INT64, "bool": onnx.TensorProto.BOOL}[t.dtype]
    dims: list[Any] = []
    for i, d in enumerate(t.shape):
        sym = t.symbolic[i] if t.symbolic is not None and i < len(t.symbolic) else None
        dims.append(int(d) if d is not None else (str(sym) if sym is not None else f"{name}_dim{i}"))
    return onnx.helper.make_tensor_value_info(name, elem, dims)


def _type_problems(graph: Graph) -> list[Diagnostic]:
    diags = []
    for t in graph.inputs:
        if t.dtype not in NUMPY:  # a dynamic extent is a dim_param (named after it): see core.shape
            diags.append(Diagnostic(code="E0841", message=f"graph input '{t.name}' is a {t.dtype} tensor; ONNX "
                                    "export needs real, int or bool inputs", span=_span(t)))
    for t in graph.outputs:
        if t.dtype not in NUMPY:
            diags.append(Diagnostic(code="E0841", message=f"graph output '{t.name}' is a {t.dtype} tensor "
                                    "(ONNX export writes real, int or bool tensors)", span=_span(t)))
    for name in getattr(graph, "updates", None) or {}:
        diags.append(Diagnostic(code="E0842", message=f"the graph updates variable '{name}': stateful graphs "
                                "cannot be exported to ONNX", span=_span(graph.tensor(name))))
    return diags


def _build(graph: Graph, opset: int, variables: dict[str, np.ndarray] | None) -> tuple[GraphProto | None, list[Diagnostic]]:
    """(ONNX GraphProto or None, diagnostics)."""
    import onnx

    diags = _type_problems(graph)
    if variables is None:
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    ctx = Context(opset=opset, variables={k: np.asarray(v) for k, v in variables.items()})
    out_names = [graph.output_name(i) for i in range(len(graph.outputs))]
    ctx.taken.update(t.name for t in graph.inputs)
    ctx.taken.update(out_names)
    for t in graph.inputs:
        ctx.names[id(t)] = t.name
    quantized = any(t.quant for t in graph.tensors)
    if quantized:
        try:
            quantize_graph_inputs(ctx, graph)
        except Unsupported as e:
            return None, [Diagnostic(code="E0840", message=f"graph '{graph.name}' cannot be exported to ONNX: {e}",
                                     span=_graph_span(graph))]
    # refused inputs and outputs of refused operations: their readers are not reported again
    failed: set[int] = {id(t) for t in graph.inputs if t.dtype not in NUMPY}
    for op in graph.operations:
        outs = [t for v in op.outputs for t in (v if isinstance(v, list) else [v]) if t is not None]
        if any(id(t) in failed for v in op.inputs for t in (v if isinstance(v, list) else [v]) if t is not None):
            failed.update(id(t) for t in outs)
            continue
        failed.update(id(t) for t in outs)  # until converted
        try:
            convert(ctx, op)
            if quantized:
                quantized_value(ctx, op)
            failed.difference_update(id(t) for t in outs)
        except ControlFlowUnsupported as e:
            diags.append(Diagnostic(code="E0843", message=f"'{op.op}' ({op.label or 'top level'}) cannot be exported "
                                    f"to ONNX: {e}", span=_span(op)))
        except Unsupported as e:
            where = f" ({op.label})" if op.label else ""
            diags.append(Diagnostic(code="E0840", message=f"operation '{op.op}'{where} cannot be exported to ONNX: "
                                    f"{e}", span=_span(op), hint=DYNAMIC_HINT if "dynamic" in str(e) else None))
    if diags:
        return None, diags
    outputs = []
    for t, name in zip(graph.outputs, out_names, strict=True):
        try:
            src = ctx.value(t)
        except Unsupported as e:
            diags.append(Diagnostic(code="E0841", message=f"graph output '{name}': {e}", span=_span(t)))
            continue
        ctx.nodes.append(onnx.helper.make_node("Identity", [src], [name], name=ctx.fresh(f"{name}/Identity")))
        outputs.append(_value_info(onnx, name, t))
    if diags:
        return None, diags
    inputs = [_value_info(onnx, t.name, t) for t in graph.inputs]
    shapes = {ctx.names[id(t)]: tuple(shape(t)) for t in graph.tensors if id(t) in ctx.names and not t.dynamic}
    nodes = hard_activations(ctx.nodes, ctx.initializers, shapes, out_names)  # peepholes over the converted nodes
    initializers = read_initializers(nodes, ctx.initializers, out_names)
    return onnx.helper.make_graph(nodes, graph.name, inputs, outputs, initializers), []


def check_exportable(graph: Graph, *, opset: int = MIN_OPSET) -> list[Diagnostic]:
    """Located diagnostics for everything that keeps ``graph`` from being exported (empty: exportable)."""
    _require_onnx(graph)
    return _build(graph, opset, None)[1]


def to_onnx(graph: Graph, *, opset: int = 17, variables: dict[str, np.ndarray] | None = None) -> ModelProto:
    """The ONNX model (``onnx.ModelProto``) of a composed graph; ``variables`` by name (default: the model's
    tensor files). Raises :class:`DiagnosticError` (E0840-E0846) when the graph cannot be exported."""
    onnx = _require_onnx(graph)
    if not MIN_OPSET <= opset <= min(MAX_OPSET, onnx.defs.onnx_opset_version()):
        raise DiagnosticError([Diagnostic(code="E0846", message=f"ONNX opset {opset} is not supported by the "
                                          f"exporter (opsets {MIN_OPSET} to {MAX_OPSET})", span=_graph_span(graph))])
    onnx_graph, diags = _build(graph, opset, variables)
    if diags:
        raise DiagnosticError(diags)
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(onnx_graph, opset_imports=opsets, producer_name="skriptnd",
                                   ir_version=onnx.helper.find_min_ir_version_for(opsets))
    _check(model, graph)
    return model


def _initializer_bytes(model: ModelProto) -> int:
    return sum(len(t.raw_data) for t in model.graph.initializer)


def _check(model: ModelProto, graph: Graph) -> None:
    import onnx

    try:
        if _initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD:  # the checker needs a file beyond 2 GB
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "model.onnx"
                _write_external(model, path)
                onnx.checker.check_model(str(path), full_check=True)
        else:
            onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise DiagnosticError([Diagnostic(code="E0845", message=f"the ONNX checker rejected the export of graph "
                                          f"'{graph.name}': {str(e).strip().splitlines()[0]}",
                                          span=_graph_span(graph),
                                          hint="this is a bug in skriptnd's ONNX exporter; please report it")]) from None


def _write_external(model: ModelProto, path: Path) -> Path:
    """Save with every initializer in one external data file beside ``path``; returns the data file."""
    import onnx

    data = path.with_name(path.name + ".data")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    onnx.save_model(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=1024)
    return data


def save_onnx(model: ModelProto, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` atomically to ``path`` (above 2 GB of weights: ``path`` plus ``path.data``, each
    written through a temporary sibling and renamed, the data file first)."""
    if _initializer_bytes(model) <= EXTERNAL_DATA_THRESHOLD:
        write_atomic(path, model.SerializeToString())
        return Path(path)
    kind, target = output_target(path)  # a symlink: its target (and the data file beside the target)
    if kind == "stream":
        raise OSError(errno.EINVAL, "a model over 2 GB is two files (the model and its .data); give a file name",
                      str(path))
    with tempfile.TemporaryDirectory(dir=target.parent or ".", prefix=f".{target.name}.") as tmp:
        staged = Path(tmp) / target.name
        data = _write_external(model, staged)
        os.replace(data, target.with_name(data.name))
        os.replace(staged, target)
    return target


def export_onnx(graph: Graph, path: str | os.PathLike[str], *, opset: int = 17,
                variables: dict[str, np.ndarray] | None = None) -> Path:
    """:func:`to_onnx` then :func:`save_onnx`; nothing is written when the export fails."""
    return save_onnx(to_onnx(graph, opset=opset, variables=variables), path)
