"""ONNX model -> SkriptND model folder.

normalize (load, check, upgrade, infer shapes) -> list unsupported operators (one diagnostic for all)
-> walk the nodes in order: fold what is known at import time (Constant, Shape of a static shape,
shape arithmetic on constants, and with `fold_constants` any constant subgraph; evaluated by the onnx
package's reference implementation), convert the rest with the registry -> `ModelFolder` ->
`write_model` (atomic: an error leaves nothing in the output folder).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.import_problem import unsupported_message
from skriptnd.interop.onnx_import import normalize as norm
from skriptnd.interop.onnx_import import ops as _families  # noqa: F401 - fills the converter registry
from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.context import Context, Node, Param, Value, value_of
from skriptnd.interop.onnx_import.errors import ImportProblem, diagnostic
from skriptnd.interop.onnx_import.fold import fold as _fold
from skriptnd.interop.onnx_import.registry import REGISTRY, registry
from skriptnd.interop.onnx_import.symbolic_shapes import propagate as _propagate_symbolic
from skriptnd.interop.writer import GraphText, ModelFolder, TensorDecl, write_model
from skriptnd.source import Span

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import GraphProto, ModelProto, ValueInfoProto

#: Rounds of fold-then-infer in _resolve_shapes; each round can open one more level of shapes that depend
#: on shapes (Swin-T's shifted windows need one per block: 12 blocks, pads computed from the previous
#: block's shape). It stops early once a round learns nothing, so the bound only limits pathological graphs.
ROUNDS = 64


@dataclass
class ImportResult:
    path: Path
    renamed: dict[str, str] = field(default_factory=dict)  # graph input/output names that had to change
    attribs: list[str] = field(default_factory=list)  # graph attributes made from symbolic dims
    params: list[str] = field(default_factory=list)  # graph attributes made from inputs that feed only parameters


def import_onnx(src: str | Path | ModelProto, out_dir: str | Path, *, input_shapes: Mapping[str, Sequence[int | str]] | None = None,
                fold_constants: bool = False, opset_upgrade: bool = True, overwrite: bool = False,
                progress: Callable[[str], None] | None = None) -> ImportResult:
    """``progress``: told each step as it starts (reading, normalizing, converting, writing and checking),
    so that a caller can show what a long import of a large model is doing (``sknd import``'s status line)."""
    say = progress or (lambda _step: None)
    source = str(src) if isinstance(src, str | Path) else "<onnx model>"
    say(f"reading {Path(source).name}")
    model = norm.load(src, source)
    if norm.opset(model) >= norm.TARGET_OPSET:  # before checking: missing operators are the first thing to say
        _refuse_unsupported(model, source)
    say(f"normalizing {len(model.graph.node)} nodes (opset, shape inference)")
    model = norm.normalize(model, source, input_shapes, upgrade=opset_upgrade)
    say(f"converting {len(model.graph.node)} nodes")
    folder, renamed, attribs, params = convert(model, source, fold_constants)
    say("writing the model folder and checking it (load, compose)")
    path = write_model(folder, out_dir, overwrite=overwrite, verify=Span(source, 1, 1, 1, 2))
    return ImportResult(path, renamed, attribs, params)


def unsupported(model: ModelProto) -> dict[str, list[str]]:
    """op type -> names of its nodes, for every node (also in subgraphs) no converter handles."""
    known = registry()
    found: dict[str, list[str]] = defaultdict(list)

    def visit(graph: GraphProto) -> None:
        for node in graph.node:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            if key not in known:
                found[key].append(node.name or "<unnamed>")
            for a in node.attribute:
                if a.type == a.GRAPH:
                    visit(a.g)
                for g in a.graphs:
                    visit(g)

    visit(model.graph)
    return dict(found)


def _refuse_unsupported(model: ModelProto, source: str) -> None:
    missing = unsupported(model)
    if missing:
        raise DiagnosticError([diagnostic("E0806", unsupported_message(missing, "node"), source,
                                          hint="docs/import.md lists the supported operators")])


def convert(model: ModelProto, source: str, fold_constants: bool = False
            ) -> tuple[ModelFolder, dict[str, str], list[str], list[str]]:
    from onnx import numpy_helper

    _refuse_unsupported(model, source)
    graph = model.graph
    ctx = Context(opset=norm.opset(model), convert_node=_convert_subgraph_node, fold_constants=fold_constants)
    for t in graph.initializer:
        ctx.consts[t.name] = numpy_helper.to_array(t)
        ctx.initializers.add(t.name)
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        ctx.values[vi.name] = value_of(vi)
    inputs = [vi for vi in graph.input if vi.name not in ctx.initializers]
    ctx.graph_inputs = [vi.name for vi in inputs]
    ctx.params = _param_inputs(ctx, graph)
    inputs = [vi for vi in inputs if vi.name not in ctx.params]
    # graph inputs and outputs keep their names when they can; symbolic dims become attributes, an unnamed
    # one (neither a value nor a dim_param) too, named after its input and axis
    for vi in inputs:
        value = ctx.values[vi.name]
        if value.shape is not None and any(d is None for d in value.shape):
            value.shape = tuple(f"{vi.name}_dim{k}" if d is None else d for k, d in enumerate(value.shape))
    for vi in inputs:
        for d in ctx.values[vi.name].shape or ():
            if isinstance(d, str) and d not in ctx.symbols:
                ctx.symbols[d] = ctx.names(d)
    input_decls = []
    for vi in inputs:
        ctx.node = None
        input_decls.append(_decl(ctx, vi.name, source))
        ctx.bound[vi.name] = input_decls[-1].name
    ctx.graph_outputs = {vi.name for vi in graph.output}
    for proto in graph.node:
        for name in proto.input:
            ctx.consumers.setdefault(name, []).append(Node.of(proto))
    _resolve_shapes(model, ctx, fold_constants)
    if ctx.symbols:  # extents that depend on a symbolic dimension, as expressions of its graph attribute
        _propagate_symbolic(model, ctx, Context(opset=ctx.opset, values=ctx.values, consts=dict(ctx.consts),
                                          initializers=set(ctx.initializers), symbols=dict(ctx.symbols)),
                      lambda c, n: _fold(c, n, fold_constants))
    entries = registry()
    for proto in graph.node:
        node = Node.of(proto)
        ctx.node, ctx._label_used = node, False
        try:
            if _fold(ctx, node, fold_constants) or sym.fold(ctx, node):
                continue
            entries[node.op_type].convert(ctx, node)
        except ImportProblem as problem:
            raise DiagnosticError([diagnostic(problem.code, problem.message, source, problem.hint)]) from None
    ctx.node = None
    output_decls = []
    for vi in graph.output:
        try:
            output_decls.append(_output_decl(ctx, vi, source, {vi.name for vi in inputs}))
        except ImportProblem as problem:
            raise DiagnosticError([diagnostic(problem.code, problem.message, source, problem.hint)]) from None
    renamed = {k: v for k, v in ctx.names.renamed.items()
               if k in {vi.name for vi in inputs} | {vi.name for vi in graph.output}}
    graph_name = ctx.names(graph.name) if graph.name else "main_graph"
    text = GraphText(
        name=graph_name if graph_name[0].isalpha() else f"G{graph_name}",
        inputs=input_decls, outputs=output_decls, body=ctx.body, attribs=ctx.attrib_decls(),
        constants=ctx.constants, variables=ctx.variables, imports=list(ctx.imports),
        quantize=list(ctx.quantize.values()),
        comment=f"Imported from ONNX ({source}, opset {ctx.opset}) by sknd import.")
    return ModelFolder(text, ctx.weights, ctx.modules), renamed, list(ctx.symbols.values()), \
        [p.name for p in ctx.params.values()]


def _param_inputs(ctx: Context, graph: GraphProto) -> dict[str, Param]:
    """Graph inputs read only at input positions their converters take as graph attributes (Entry.params: a
    Reshape's shape, ReduceSum's axes ...), scalars or 1-D of a known length, int or real: imported as graph
    attributes, given at run time with the inputs (issue 25)."""
    entries = registry()
    inner: set[str] = set()  # names read inside subgraphs: those stay tensors

    def visit(g: GraphProto) -> None:
        for node in g.node:
            for a in node.attribute:
                for sub in ([a.g] if a.type == a.GRAPH else []) + list(a.graphs):
                    inner.update(i for n in sub.node for i in n.input)
                    visit(sub)

    visit(graph)
    outputs = {vi.name for vi in graph.output}
    found: dict[str, Param] = {}
    for name in ctx.graph_inputs:
        value = ctx.values.get(name)
        uses = [(node, k) for node in graph.node for k, i in enumerate(node.input) if i == name]
        if not uses or name in outputs or name in inner or value is None or value.dtype not in ("int", "real") \
                or value.shape is None or len(value.shape) > 1 or not all(isinstance(d, int) for d in value.shape):
            continue
        if all(node.domain in ("", "ai.onnx") and node.op_type in entries and k in entries[node.op_type].params
               for node, k in uses):
            found[name] = Param(ctx.names(name), value.dtype, int(value.shape[0]) if value.shape else None)
    return found


def _convert_subgraph_node(ctx: Context, node: Node) -> None:
    """The walker handed to the control-flow converters for an If branch's or a Loop body's nodes: fold the
    node when its value is known now (never a large constant subgraph), else convert it (op types of other
    domains by their qualified name)."""
    if not _fold(ctx, node, False) and not sym.fold(ctx, node):
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        REGISTRY[key].convert(ctx, node)


def _unknown(ctx: Context, model: ModelProto) -> bool:
    for node in model.graph.node:
        for o in node.output:
            v = ctx.values.get(o)
            if o and (v is None or v.shape is None or any(not isinstance(d, int) and d not in ctx.symbols
                                                          for d in v.shape)):
                return True
    return False


def _resolve_shapes(model: ModelProto, ctx: Context, fold_all: bool) -> None:
    """Shapes onnx's inference leaves open (an Expand or Reshape whose shape operand is computed by a
    chain it does not propagate) are found by folding what is known, then inferring again with those
    values as initializers (a few rounds, while something new is learnt)."""
    import copy

    import onnx
    from onnx import numpy_helper

    for _ in range(ROUNDS):
        if not _unknown(ctx, model):
            return
        scratch = Context(opset=ctx.opset, values=copy.deepcopy(ctx.values), consts=dict(ctx.consts),
                          initializers=set(ctx.initializers), symbols=dict(ctx.symbols))
        for proto in model.graph.node:
            node = Node.of(proto)
            scratch.node = node
            try:
                _fold(scratch, node, fold_all)
            except ImportProblem:
                pass
        new = {k: v for k, v in scratch.consts.items() if k not in ctx.consts and v.dtype.kind in "iub"
               and v.size <= 4096}
        if not new:
            return
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        kept = [n for n in probe.graph.node if not (n.output and all(o in new or not o for o in n.output))]
        del probe.graph.node[:]
        probe.graph.node.extend(kept)
        probe.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in new.items())
        del probe.graph.value_info[:]
        try:
            probe = onnx.shape_inference.infer_shapes(probe, check_type=False, strict_mode=False, data_prop=True)
        except Exception:  # noqa: BLE001 - nothing more is learnt
            return
        learnt = False
        for vi in [*probe.graph.value_info, *probe.graph.output]:
            value = value_of(vi)
            old = ctx.values.get(vi.name)
            if value.shape is not None and all(isinstance(d, int) for d in value.shape) and \
                    (old is None or old.shape is None or any(not isinstance(d, int) for d in old.shape)):
                ctx.values[vi.name] = Value(value.dtype or (old.dtype if old else None), value.shape)
                learnt = True
        if not learnt:
            return


def _decl(ctx: Context, onnx_name: str, source: str) -> TensorDecl:
    value = ctx.values.get(onnx_name)
    if value is None or value.dtype is None:
        raise DiagnosticError([diagnostic("E0810", f"graph input '{onnx_name}' has no tensor type SkriptND "
                                          "supports (float, integer or bool tensors)", source)])
    if value.shape is None or any(d is None for d in value.shape):
        raise DiagnosticError([diagnostic("E0808", f"graph input '{onnx_name}' has an unknown rank or dimension",
                                          source, hint=f"give its shape: --input-shape {onnx_name}=d0,d1,...")])
    return TensorDecl(ctx.names(onnx_name), value.dtype, [ctx.extent(d) for d in value.shape])


def _output_decl(ctx: Context, vi: ValueInfoProto, source: str, graph_inputs: set[str] = frozenset()) -> TensorDecl:
    value = ctx.values.get(vi.name) or Value(None, None)
    name = ctx.names(vi.name)
    if vi.name in graph_inputs:
        # a graph input given out as it is (a graph without nodes): SkriptND names each tensor of a graph
        # once, so the output is a copy under its own name
        name = ctx.names(f"{vi.name}_output")
        ctx.body.append(f"{name} = math.iden({ctx.bound[vi.name]});")
        ctx.imports["math"] = None
    elif vi.name in ctx.bound and ctx.bound[vi.name] != name:
        # an alias (a QDQ pair's output is the quantized tensor itself): copy it under the output's name
        ctx.body.append(f"{name} = math.iden({ctx.bound[vi.name]});")
        ctx.imports["math"] = None
    elif vi.name not in ctx.bound and vi.name in ctx.consts:
        # a folded constant given out as an output: copy it under the output's name
        source_name = ctx.literal_arg(ctx.consts[vi.name], "value")
        ctx.body.append(f"{name} = math.iden({source_name});")
        ctx.imports["math"] = None
    shape = value.shape
    if vi.name in ctx.consts:
        shape = ctx.consts[vi.name].shape
    elif vi.name in ctx.symbolic_shapes:  # depends on a graph attribute fed at run time
        return TensorDecl(name, value.dtype or ctx.dtype(vi.name), ctx.symbolic_shapes[vi.name])
    if shape is None or any(d is None for d in shape):
        raise ImportProblem("E0808", f"the shape of graph output '{vi.name}' is unknown after shape inference",
                            hint="give the input shapes with --input-shape")
    dtype = value.dtype or ctx.dtype(vi.name)
    return TensorDecl(name, dtype, [ctx.extent(d) for d in shape])
