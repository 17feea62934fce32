"""`import_nnef`: NNEF 1.x graph.nnef (+ .dat tensor files) -> a SkriptND model folder.

Steps: parse with the `nnef` package (the standard compound operations listed in `registry.EXPANDED`, and for
the support check the custom fragments too, are expanded by the parser into their definitions), report every
unsupported operation at once, infer shapes (`nnef.infer_shapes`, with `input_shapes` overriding external
shapes), validate the tensor files, convert operation by operation through the registry (custom fragments
become operators of ops/fragments.sknd, see `fragments.py`; graph.quant becomes a @quantize block) and write
the folder atomically. Every problem is a located diagnostic on graph.nnef (or graph.quant); nothing is
written unless all succeeded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from skriptnd.compose.quantization import qparams, quantized_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.extras import install_hint
from skriptnd.interop.nnef_import import ops as _families  # noqa: F401 - fills the converter registry
from skriptnd.interop.nnef_import import registry
from skriptnd.interop.nnef_import.contained import ContainedNnef, ParserCrashed
from skriptnd.interop.nnef_import.context import DTYPES, Context, NnefGraph, Operation, locate
from skriptnd.interop.nnef_import.errors import ImportProblem
from skriptnd.interop.nnef_import.fragments import PATH as FRAGMENTS_PATH
from skriptnd.interop.nnef_import.fragments import FragmentFallback, Fragments
from skriptnd.interop.nnef_import.ops.quant import quantize_entry
from skriptnd.interop.writer import GraphText, ModelFolder, Names, Quantize, TensorDecl, write_model
from skriptnd.io.tensor_file import TensorFileError, read_tensor_with_header
from skriptnd.model import load
from skriptnd.source import Span
from skriptnd.untrusted import UnsafeFile, contained

#: Operations handled by the importer itself (declarations), not by converters.
_DECLARATIONS = ("external", "variable", "constant")
_MAX_EXPANSION_ROUNDS = 16
#: The longest file name (one path component, in bytes) file systems allow.
_NAME_MAX = 255


def import_nnef(src: str | Path, out_dir: str | Path, *,
                input_shapes: Mapping[str, Sequence[int]] | None = None, overwrite: bool = False) -> Path:
    """Import the NNEF 1.x model `src` (a graph.nnef file, or a folder holding graph.nnef and its .dat files)
    into the SkriptND model folder `out_dir`; `input_shapes` overrides the shapes of external inputs.
    Raises `DiagnosticError` (E0830-E0836, E0790) and leaves `out_dir` untouched on any problem."""
    nnef = _require_nnef(Path(src))
    graph_file, folder = _locate(Path(src))
    text = _read_text(graph_file)
    _check_quant_file(graph_file)
    graph, custom = _parse(nnef, graph_file, text)
    _check_supported(graph, graph_file, text)
    shapes = dict(input_shapes or {})
    if custom:
        try:  # custom fragments as operators of ops/fragments.sknd
            with_operators = _convert_with_fragments(nnef, graph_file, folder, text, shapes, custom)
            if not _problems(with_operators):
                return write_model(with_operators, out_dir, overwrite=overwrite)
        except FragmentFallback:
            pass
        # else the fully expanded graph below
    _infer_shapes(nnef, graph, graph_file, text, shapes)
    weight_files = _check_variables(graph, folder, graph_file, text)
    folder_desc = _convert(graph, graph_file, text, weight_files)
    problems = _problems(folder_desc)
    if problems:  # a converter wrote something SkriptND refuses: a bug here, reported without writing
        raise DiagnosticError(Diagnostic(
            code="E0835", message=f"the imported model does not check ({problems[0]}); nothing was written",
            span=Span(str(graph_file), 1, 1, 1, 2), hint="please report this as a bug of the NNEF importer"))
    return write_model(folder_desc, out_dir, overwrite=overwrite)


def _problems(folder_desc: ModelFolder) -> list[Diagnostic]:
    """Check and compose the model in a scratch folder first, so that what is written always checks."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="sknd-nnef-import-"))
    try:
        composed = load(write_model(folder_desc, scratch / "model")).compose()
        for tensor in quantized_tensors(composed):  # what running it reads first (E0760 otherwise)
            qparams(tensor)
    except DiagnosticError as exc:
        return list(exc.diagnostics)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return []


def _convert_with_fragments(nnef: ModuleType, graph_file: Path, folder: Path, text: str,
                            shapes: dict[str, Sequence[int]], custom: set[str]) -> ModelFolder:
    top = _parse_once(nnef, graph_file, text, sorted(registry.EXPANDED))
    fragments = Fragments.from_text(nnef, text, sorted(set(registry.EXPANDED) | custom), custom)
    _infer_shapes(nnef, top, graph_file, text, shapes, fragments.shape_functions(top))
    weight_files = _check_variables(top, folder, graph_file, text)
    return _convert(top, graph_file, text, weight_files, fragments)


# -- reading ------------------------------------------------------------------------------------------

def _require_nnef(src: Path) -> ModuleType:
    try:
        import nnef
    except ImportError as exc:
        raise DiagnosticError(Diagnostic(
            code="E0830", message=f"importing NNEF 1.x models needs the 'nnef' package ({exc})",
            span=Span(str(src), 1, 1, 1, 2), hint=install_hint("nnef"))) from None
    return ContainedNnef(nnef)  # its C++ parser crashes on some malformed text: parse in a child process


def _locate(src: Path) -> tuple[Path, Path]:
    graph_file = src / "graph.nnef" if src.is_dir() else src
    if not graph_file.is_file():
        what = "has no graph.nnef" if src.is_dir() else "does not exist"
        raise DiagnosticError(Diagnostic(code="E0836", message=f"NNEF model {src} {what}",
                                         span=Span(str(src), 1, 1, 1, 2)))
    return graph_file, graph_file.parent


def _read_text(graph_file: Path) -> str:
    try:
        return graph_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DiagnosticError(Diagnostic(code="E0836", message=f"cannot read {graph_file}: {exc}",
                                         span=Span(str(graph_file), 1, 1, 1, 2))) from None


def _check_quant_file(graph_file: Path) -> None:
    """graph.quant, when present, must be a regular file inside the model folder (not a link to a file
    elsewhere, which the parser would read and quote)."""
    quant = graph_file.parent / "graph.quant"
    if not quant.is_symlink() and not quant.exists():
        return
    try:
        contained(graph_file.parent, "graph.quant")
        reason = None if quant.is_file() else "is not a regular file"
    except UnsafeFile as exc:
        reason = exc.reason
    if reason is not None:
        raise DiagnosticError(Diagnostic(code="E0836", message=f"{quant} {reason}", span=Span(str(quant), 1, 1, 1, 2),
                                         hint="graph.quant must be a text file in the folder of graph.nnef"))


_POSITION = re.compile(r"\[(\d+):(\d+)\]\s*(.*)", re.S)


def _parse_once(nnef: ModuleType, graph_file: Path, text: str, lowered: list[str]) -> NnefGraph:
    quant = graph_file.parent / "graph.quant"
    try:
        return nnef.parse_file(str(graph_file), str(quant) if quant.is_file() else None, lowered=lowered)
    except nnef.Error as exc:
        raise DiagnosticError(_syntax_error(str(exc), graph_file, text)) from None
    except ParserCrashed as exc:
        raise DiagnosticError(_crash_error(exc.why, graph_file, text)) from None
    except (ValueError, TypeError, RuntimeError, KeyError, IndexError) as exc:
        # the nnef parser fails this way on some valid-looking input (e.g. comparing strings in a fragment)
        raise DiagnosticError(Diagnostic(
            code="E0831", message=f"the nnef parser failed on this graph ({type(exc).__name__}: {exc})",
            span=Span(str(graph_file), 1, 1, 1, 2),
            hint="simplify the construct the parser rejects (e.g. string comparisons in fragment bodies)")) from None


def _parse(nnef: ModuleType, graph_file: Path, text: str) -> tuple[NnefGraph, set[str]]:
    """Parse, expanding custom fragments and `registry.EXPANDED` operations until only standard operations
    remain (a fragment may use another); also returns the names of the custom fragments used."""
    lowered = set(registry.EXPANDED)
    custom: set[str] = set()
    for _ in range(_MAX_EXPANSION_ROUNDS):
        graph = _parse_once(nnef, graph_file, text, sorted(lowered))
        new = {op.name for op in graph.operations if op.name not in nnef.StandardOperations} - lowered
        if not new:
            break
        lowered |= new
        custom |= new
    return graph, custom


def _syntax_error(message: str, graph_file: Path, text: str) -> Diagnostic:
    match = _POSITION.search(message)
    line, col, what = (int(match.group(1)), int(match.group(2)), match.group(3)) if match else (1, 1, message)
    lines = text.splitlines()
    line = max(1, min(line, len(lines) or 1))
    return Diagnostic(code="E0831", message=f"NNEF syntax error: {what.strip()}",
                      span=Span(str(graph_file), line, max(col, 1), line, max(col, 1) + 1))


_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def _unclosed(text: str) -> tuple[int, int, str] | None:
    """(line, column, bracket) of the innermost bracket still open at the end of `text` (comments and
    string literals skipped), or None when every bracket is closed."""
    stack: list[tuple[int, int, str]] = []
    line, col, i, quote = 1, 0, 0, ""
    while i < len(text):
        ch = text[i]
        i += 1
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif ch in _BRACKETS:
            stack.append((line, col, ch))
        elif stack and ch == _BRACKETS[stack[-1][2]]:
            stack.pop()
    return stack[-1] if stack else None


def _crash_error(why: str, graph_file: Path, text: str) -> Diagnostic:
    """The nnef parser's process died on this text: point at where the text looks truncated, if it does."""
    message = f"the nnef parser {why} reading this graph; nothing was imported"
    open_at = _unclosed(text)
    body = text.rstrip()
    if open_at is None or not body:
        return Diagnostic(code="E0831", message=message, span=Span(str(graph_file), 1, 1, 1, 2),
                          hint="check that graph.nnef is complete, well-formed NNEF 1.x text")
    line = body.count("\n") + 1
    col = len(body) - (body.rfind("\n") + 1) + 1
    return Diagnostic(code="E0831", message=message, span=Span(str(graph_file), line, col, line, col + 1),
                      hint="the text looks truncated: it ends before this bracket is closed",
                      notes=(Note(f"'{open_at[2]}' opened here is never closed",
                                  Span(str(graph_file), open_at[0], open_at[1], open_at[0], open_at[1] + 1)),))


def _span(graph_file: Path, text: str, tensor: str | None, op: str | None) -> Span:
    line, col, end = locate(text, tensor, op)
    return Span(str(graph_file), line, col, line, end)


def _first_output(op: Operation) -> str:
    value = next(iter(op.outputs.values()))
    return str(value[0] if isinstance(value, list) and value else value)


def _check_supported(graph: NnefGraph, graph_file: Path, text: str) -> None:
    """One diagnostic naming every operation that cannot be imported, with counts; raises if any."""
    known = set(registry.CONVERTERS) | set(_DECLARATIONS)
    missing = [op for op in graph.operations if op.name not in known]
    if not missing:
        return
    counts = Counter(op.name for op in missing)
    listing = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items()))
    first = {}
    for op in missing:
        first.setdefault(op.name, op)
    notes = tuple(Note(f"'{name}'" + (f": {registry.UNSUPPORTED[name]}" if name in registry.UNSUPPORTED else
                                      ": no converter (not a NNEF 1.x standard operation, or a fragment "
                                      "without a body)"),
                       _span(graph_file, text, _first_output(op), name)) for name, op in first.items())
    head = missing[0]
    raise DiagnosticError(Diagnostic(
        code="E0832", message=f"{len(missing)} operation{'s' if len(missing) > 1 else ''} cannot be imported: "
                              f"{listing}",
        span=_span(graph_file, text, _first_output(head), head.name), notes=notes))


def _infer_shapes(nnef: ModuleType, graph: NnefGraph, graph_file: Path, text: str, input_shapes: dict[str, Sequence[int]],
                  custom_shapes: dict[str, Any] | None = None) -> None:
    unknown = sorted(set(input_shapes) - set(graph.inputs))
    if unknown:
        raise DiagnosticError(Diagnostic(
            code="E0834", message=f"--input-shape names {', '.join(unknown)}, not inputs of the graph "
                                  f"(inputs: {', '.join(graph.inputs)})", span=Span(str(graph_file), 1, 1, 1, 2)))
    try:
        nnef.infer_shapes(graph, external_shapes={k: list(v) for k, v in input_shapes.items()},
                          custom_shapes=custom_shapes or {})
    except (nnef.Error, AssertionError, ValueError, TypeError, KeyError, IndexError) as exc:
        message = str(exc)
        match = re.search(r"tensor\(s\) '([^',]+)[^']*' \(operation '([^']+)'\)", message)
        span = _span(graph_file, text, match.group(1), match.group(2)) if match else Span(str(graph_file), 1, 1, 1, 2)
        raise DiagnosticError(Diagnostic(code="E0834", message=f"shape inference failed: {message}",
                                         span=span)) from None


def _check_variables(graph: NnefGraph, folder: Path, graph_file: Path, text: str) -> dict[str, Path]:
    """The tensor file of every variable, checked (present, readable, of the declared shape and type)."""
    files: dict[str, Path] = {}
    problems: list[Diagnostic] = []
    for op in graph.operations:
        if op.name != "variable":
            continue
        name = str(op.outputs["output"])
        span = _span(graph_file, text, name, "variable")
        label = str(op.attribs["label"])
        relative = label.lstrip("/") + ".dat"
        too_long = next((part for part in relative.split("/") if len(part.encode("utf-8", "replace")) > _NAME_MAX),
                        None)
        if too_long is not None:
            problems.append(Diagnostic(
                code="E0833", message=f"the label of variable '{name}' names a file of "
                f"{len(too_long.encode('utf-8', 'replace'))} bytes ('{too_long[:40]}...'); file names are at most "
                f"{_NAME_MAX} bytes", span=span, hint="shorten the label, and rename its .dat file to match"))
            continue
        try:  # a label names a file inside the model folder, links resolved (never '../outside/secret')
            path = contained(folder, relative)
        except UnsafeFile as exc:
            problems.append(Diagnostic(
                code="E0833", message=f"the label '{label}' of variable '{name}' {exc.reason}", span=span,
                hint="a label is a path relative to the folder of graph.nnef; copy the tensor file there"))
            continue
        if not path.exists():
            problems.append(Diagnostic(code="E0833", message=f"tensor file {folder / relative} of variable '{name}' "
                                                               f"(label '{label}') not found", span=span))
            continue
        try:
            data, _header = read_tensor_with_header(path)
        except TensorFileError as exc:
            problems.append(Diagnostic(code="E0833", message=f"tensor file {path} of variable '{name}': {exc.message}",
                                       span=span))
            continue
        shape = list(op.attribs["shape"])
        kind = {"scalar": "f", "integer": "iu", "logical": "b"}.get(op.dtype or "scalar", "f")
        if list(data.shape) != shape or data.dtype.kind not in kind:
            problems.append(Diagnostic(
                code="E0833", message=f"tensor file {path} holds {data.dtype}{list(data.shape)}, but variable "
                                      f"'{name}' is declared {op.dtype or 'scalar'}{shape}", span=span))
            continue
        files[name] = path
    if problems:
        raise DiagnosticError(problems)
    return files


# -- converting ---------------------------------------------------------------------------------------

def _decl(ctx: Context, tensor: str) -> TensorDecl:
    t = ctx.graph.tensors[tensor]
    return TensorDecl(ctx.name(tensor), DTYPES.get(t.dtype, "real"), list(t.shape))


def _quantize_entries(ctx: Context, graph: NnefGraph, graph_file: Path) -> list[Quantize]:
    """graph.quant as @quantize entries (spec §2.14); what SkriptND cannot express is a located E0835."""
    entries: list[Quantize] = []
    quant_file = graph_file.parent / "graph.quant"
    for name, tensor in graph.tensors.items():
        if not tensor.quantization:
            continue
        try:
            op, attribs = quantize_entry(name, list(tensor.shape), dict(tensor.quantization))
        except ValueError as exc:
            text = quant_file.read_text(encoding="utf-8", errors="replace") if quant_file.is_file() else ""
            line = next((i for i, row in enumerate(text.splitlines(), 1) if f'"{name}"' in row), 1)
            raise DiagnosticError(Diagnostic(code="E0835", message=f"quantization of tensor '{name}': {exc}",
                                             span=Span(str(quant_file), line, 1, line, 2))) from None
        entries.append(Quantize(ctx.name(name), op, attribs))
    return entries


def _output_decl(ctx: Context, tensor: str) -> TensorDecl:
    decl = _decl(ctx, tensor)
    decl.name = ctx.names(tensor)
    return decl


def _constant_value(op: Operation, shape: list[int], dtype: str) -> list[Any]:
    values = list(op.attribs["value"])
    volume = 1
    for d in shape:
        volume *= d
    if len(values) == 1 and volume != 1:
        values = values * volume
    cast = {"real": float, "int": int, "bool": bool}[dtype]
    return [cast(v) for v in values]


def _convert(graph: NnefGraph, graph_file: Path, text: str, weight_files: dict[str, Path],
             fragments: Fragments | None = None) -> ModelFolder:
    names = Names()
    # graph inputs and outputs keep their names where they can
    for tensor in [*graph.inputs, *graph.outputs, *graph.tensors]:  # NNEF names first: temporaries avoid them
        names(str(tensor))
    ctx = Context(graph=graph, names=names)
    # a variable or constant that is also a graph output is declared under another name and copied out
    declared = {str(op.outputs["output"]) for op in graph.operations if op.name in ("variable", "constant")}
    for tensor in graph.outputs:
        if str(tensor) in declared:
            ctx.aliases[str(tensor)] = names(f"{tensor}_value")
            ctx.emit(names(str(tensor)), "math.iden", [ctx.aliases[str(tensor)]])
    variables: list[TensorDecl] = []
    weights: dict[str, Path] = {}
    for op in graph.operations:
        ctx.op = op
        if op.name == "external":
            continue
        if op.name == "variable":
            tensor = str(op.outputs["output"])
            variables.append(_decl(ctx, tensor))
            weights[ctx.name(tensor)] = weight_files[tensor]
            continue
        if op.name == "constant":
            decl = _decl(ctx, str(op.outputs["output"]))
            decl.value = _constant_value(op, list(decl.shape), decl.dtype)
            ctx.constants.append(decl)
            continue
        if fragments is not None and op.name in fragments.custom:
            fragments.convert(ctx, op)
            continue
        try:
            registry.CONVERTERS[op.name].convert(ctx, op)
        except ImportProblem as exc:
            raise DiagnosticError(Diagnostic(code=exc.code, message=exc.message,
                                             span=_span(graph_file, text, exc.tensor, exc.op))) from None
    quantize = _quantize_entries(ctx, graph, graph_file)
    graph_name = graph.name if Names.clean(graph.name) == graph.name else Names.clean(graph.name)
    comment = f"imported from NNEF 1.x {graph_file.name} by skriptnd"
    if names.renamed:
        comment += "\nrenamed: " + ", ".join(f"{k} -> {v}" for k, v in names.renamed.items())
    body_graph = GraphText(
        name=graph_name, inputs=[_decl(ctx, str(t)) for t in graph.inputs],
        outputs=[_output_decl(ctx, str(t)) for t in graph.outputs], body=ctx.body, constants=ctx.constants,
        variables=variables, comment=comment, imports=sorted(ctx.imports), quantize=quantize)
    modules = {FRAGMENTS_PATH: fragments.module_text()} if fragments is not None and fragments.texts else {}
    return ModelFolder(graph=body_graph, weight_files=weights, modules=modules)

