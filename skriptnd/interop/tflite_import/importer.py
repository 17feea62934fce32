""".tflite file -> SkriptND model folder.

read the file (a regular file, bounded) -> parse the FlatBuffer (`reader`, every offset checked) -> pick
the subgraph to import (the `serving_default` signature's, else the first signature's, else subgraph 0)
-> list unsupported operators (one diagnostic for all) -> walk the operators in order through the
registry -> `ModelFolder` -> `write_model` (atomic, and checked by loading and composing the result: an
error leaves nothing in the output folder).

Graph inputs and outputs take their signature names (`args_0`, `output_0`: what a LiteRT user passes to
the signature runner) where the file has signature defs, else their tensor names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.import_problem import unsupported_message
from skriptnd.interop.tflite_import import ops as _families  # noqa: F401 - fills the converter registry
from skriptnd.interop.tflite_import.context import Context, sknd_type
from skriptnd.interop.tflite_import.dynamic import BATCH, dynamic_batch
from skriptnd.interop.tflite_import.errors import ImportProblem, diagnostic
from skriptnd.interop.tflite_import.quantized import entries, is_static
from skriptnd.interop.tflite_import.reader import Model, Operator, Signature, Subgraph, Tensor, read
from skriptnd.interop.tflite_import.registry import registry
from skriptnd.interop.writer import Attrib, Expr, GraphText, ModelFolder, TensorDecl, write_model
from skriptnd.source import Span
from skriptnd.untrusted import UnsafeFile, open_regular, read_regular

#: operators with LiteRT hybrid kernels (int8 weights, float input and output)
HYBRID = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"}
#: The largest .tflite file read (FlatBuffers address 2 GiB; data after the FlatBuffer can take more).
MAX_FILE = 16 << 30


@dataclass
class ImportResult:
    path: Path
    renamed: dict[str, str] = field(default_factory=dict)  # graph input/output names that had to change
    attribs: list[str] = field(default_factory=list)  # graph attributes made of dynamic dimensions (`batch`)
    #: the SkriptND tensor written for each TFLite tensor of the main subgraph, by TFLite name (to compare a
    #: tensor's values with LiteRT's: an int8 model's codes, tests/test_tflite_int8.py)
    tensors: dict[str, str] = field(default_factory=dict)


def is_tflite(path: Path) -> bool:
    """A .tflite path, or a regular file carrying the FlatBuffer identifier 'TFL3' at byte 4 (opened without
    blocking: a FIFO or a device is not looked into)."""
    if path.suffix.lower() == ".tflite":
        return True
    try:
        fh, _size = open_regular(path)
    except (OSError, UnsafeFile):
        return False
    with fh:
        return fh.read(8)[4:8] == b"TFL3"


def import_tflite(src: str | Path | bytes, out_dir: str | Path, *, overwrite: bool = False,
                  progress: Callable[[str], None] | None = None, reference_kernels: bool = False) -> ImportResult:
    """Import a TFLite model (a path, or the file's bytes) into the model folder `out_dir`.

    Dynamic-range (hybrid) operators compute as LiteRT's default kernels do, or as its reference kernels
    (`reference_kernels`, the interpreter's BUILTIN_REF resolver): the two quantize some inputs differently.

    Raises skriptnd.diagnostics.DiagnosticError (nothing written) when the model cannot be imported."""
    say = progress or (lambda _step: None)
    source = "<tflite model>" if isinstance(src, bytes) else str(src)
    say(f"reading {Path(source).name}")
    try:
        data = src if isinstance(src, bytes) else _read(src, source)
        model = read(data)
        tensors: dict[str, str] = {}
        folder, renamed = convert(model, source, say, reference_kernels, tensors)
    except ImportProblem as problem:
        raise DiagnosticError([diagnostic(problem.code, problem.message, source, problem.hint)]) from None
    say("writing the model folder and checking it (load, compose)")
    path = write_model(folder, out_dir, overwrite=overwrite, verify=Span(source, 1, 1, 1, 2))
    return ImportResult(path, renamed, [a.name for a in folder.graph.attribs], tensors)


def _read(path: str | Path, source: str) -> bytes:
    try:
        return read_regular(path, MAX_FILE)
    except UnsafeFile as err:
        raise ImportProblem("E0860", f"cannot read the TFLite model: {err.reason}") from None
    except OSError as err:
        raise ImportProblem("E0860", f"cannot read the TFLite model: {err.strerror or err}") from None


def main_signature(model: Model) -> Signature | None:
    for sig in model.signatures:
        if sig.key == "serving_default":
            return sig
    return model.signatures[0] if model.signatures else None


def unsupported(subgraph: Subgraph) -> dict[str, list[str]]:
    """operator name -> the names of the first output tensors of its operators no converter handles."""
    known = registry()
    found: dict[str, list[str]] = defaultdict(list)
    for op in subgraph.operators:
        if op.name not in known:
            first = op.outputs[0] if op.outputs and op.outputs[0] >= 0 else -1
            found[op.name].append(subgraph.tensors[first].name if first >= 0 else f"operator {op.index}")
    return dict(found)


def unsupported_in(model: Model, subgraph: Subgraph) -> dict[str, list[str]]:
    """`unsupported` of the subgraph and of the bodies it converts (STABLEHLO_COMPOSITE decompositions, WHILE
    and IF subgraphs)."""
    found: dict[str, list[str]] = defaultdict(list)
    seen, todo = {subgraph.index}, [subgraph]
    while todo:
        sub = todo.pop()
        for name, tensors in unsupported(sub).items():
            found[name] += tensors
        for op in sub.operators:
            bodies = [op.options2.int(1, -1)] if op.name == "STABLEHLO_COMPOSITE" and op.options2 is not None else []
            if op.name in ("WHILE", "IF") and op.options is not None:  # condition and body, then and else
                bodies = [op.options.int(0, -1), op.options.int(1, -1)]
            for body in bodies:
                if 0 <= body < len(model.subgraphs) and body not in seen:
                    seen.add(body)
                    todo.append(model.subgraphs[body])
    return dict(found)


def _walk(ctx: Context, op: Operator) -> None:
    """Convert one operator (of the main subgraph, or of a body being inlined)."""
    if not op.outputs or any(o < 0 for o in op.outputs):
        raise ImportProblem("E0861", f"corrupt TFLite file: operator {op.index} ({op.name}) has an omitted "
                            "or no output")
    entry = registry().get(op.name)
    if entry is None:  # only in a body: the main subgraph's were all checked first
        raise ImportProblem("E0862", f"{ctx.here}: unsupported operator {op.name} in a body subgraph")
    entry.convert(ctx, op)


def _refuse_quantized(model: Model, subgraph: Subgraph) -> None:
    """Quantized integer tensors are refused (int8 models), except constants only DEQUANTIZE reads (weight-only
    quantization: their float values are folded at import) or only the hybrid kernels read (dynamic-range
    quantization: their converters check that the input is float, see ops/_hybrid.py)."""
    readers: dict[int, set[str]] = defaultdict(set)
    for op in subgraph.operators:
        for i in op.inputs:
            readers[i].add(op.name)

    def weight_only(t: Tensor) -> bool:
        constant = 0 < t.buffer < len(model.buffers) and model.buffers[t.buffer][1] > 0
        return constant and (readers[t.index] <= {"DEQUANTIZE"} or readers[t.index] <= HYBRID)

    quantized = [t.name for t in subgraph.tensors if t.quantization is not None and t.type not in (0, 1, 10)
                 and not weight_only(t)]
    if quantized:
        raise ImportProblem("E0864", f"the model has {len(quantized)} quantized tensors ({', '.join(quantized[:3])}"
                            f"{', …' if len(quantized) > 3 else ''}); this importer reads float models (and "
                            "weight-only quantized ones) so far", hint="import the float model that was quantized")


def convert(model: Model, source: str, say: Callable[[str], None] = lambda _s: None,
            reference_kernels: bool = False, tensors: dict[str, str] | None = None) \
        -> tuple[ModelFolder, dict[str, str]]:
    """The model folder and the renamed graph inputs/outputs; `tensors` (if given) is filled as
    `ImportResult.tensors` says."""
    sig = main_signature(model)
    subgraph = model.subgraphs[sig.subgraph if sig else 0]
    missing = unsupported_in(model, subgraph)
    if missing:
        raise ImportProblem("E0862", unsupported_message(missing, "operator"), hint="docs/import-tflite.md lists the supported "
                            "operators")
    static = is_static(model, subgraph)  # int8 activations: a @quantize graph (quantized.py)
    if not static:
        _refuse_quantized(model, subgraph)
    ctx = Context(model, subgraph, reference_kernels=reference_kernels, static=static)
    inputs, outputs = list(subgraph.inputs), list(subgraph.outputs)
    if sig is not None:  # the signature's order and names: what a LiteRT signature runner takes and gives
        inputs, outputs = list(sig.inputs.values()), list(sig.outputs.values())
        ctx.display.update({i: n for n, i in sig.outputs.items()})
        ctx.display.update({i: n for n, i in sig.inputs.items()})  # an input given out keeps its input name
        if sorted(inputs) != sorted(subgraph.inputs) or sorted(outputs) != sorted(subgraph.outputs):
            raise ImportProblem("E0865", f"signature '{sig.key}' names other tensors than its subgraph's inputs "
                                "and outputs")
    input_decls, attribs = [], []
    ctx.dynamic = dynamic_batch(model, subgraph, inputs)  # else -1 dimensions at the extent the file gives
    for i in inputs:
        t = subgraph.tensors[i]
        shape: list[int | Expr] = list(t.shape)
        if ctx.dynamic and t.signature is not None and t.signature[0] < 0:
            if not attribs:
                attribs.append(Attrib(ctx.names(BATCH), "int", t.shape[0]))
            shape[0] = Expr(attribs[0].name)
        input_decls.append(TensorDecl(ctx.name_of(i), sknd_type(t), shape))
        ctx.bound[i] = input_decls[-1].name
    say(f"converting {len(subgraph.operators)} operators")
    ctx.walk = _walk
    for op in subgraph.operators:
        ctx.op, ctx._label_used = op, False
        _walk(ctx, op)
    ctx.op = None
    output_decls, copies = [], {}
    for i in outputs:
        t = subgraph.tensors[i]
        folded = ctx.const(i) if i not in ctx.bound and i not in ctx.pending else None
        # a constant given out (folded at import): declared under its own name, copied to the output's
        name = ctx.literal_arg(folded, "value") if folded is not None else ctx.arg(i)
        wanted = ctx.name_of(i)
        if i in inputs:  # an input given out: a copy under the output's own name
            out_name = {j: n for n, j in sig.outputs.items()}.get(i) if sig else None
            wanted = ctx.names.fresh(out_name or f"{t.name}_output")
        if name != wanted:  # an input or an alias given out
            ctx.emit("math.iden", [name], outputs=wanted, label=False)
            copies[i] = wanted
        output_decls.append(TensorDecl(wanted, sknd_type(t), ["~"] * len(t.shape) if ctx.dynamic else list(t.shape)))
    foreign = {ctx.display.get(i, subgraph.tensors[i].name) for i in [*inputs, *outputs]}
    renamed = {k: v for k, v in ctx.names.renamed.items() if k in foreign}
    if tensors is not None:
        tensors.update({subgraph.tensors[i].name: name for i, name in ctx.bound.items()})
    quantize = entries(subgraph, ctx.bound, ctx.body, ctx.origin, copies, ctx.quantize) if static else []
    text = GraphText(name="main", inputs=input_decls, outputs=output_decls, body=ctx.body, attribs=attribs,
                     constants=ctx.constants, variables=ctx.variables, imports=list(ctx.imports), quantize=quantize,
                     comment=f"Imported from TFLite ({Path(source).name}, schema version {model.version}"
                     f"{', signature ' + sig.key if sig else ''}) by sknd import.")
    return ModelFolder(text, ctx.weights), renamed
