"""Write a SkriptND model folder (main.sknd, extra modules, NNEF tensor files) from a plain description.

Every importer (ONNX, NNEF 1.x, the NNAPI/MLI conformance readers) ends here, so that the folders they
write look alike and are written the same safe way: the text is rendered from dataclasses, parsed and
re-printed by the house formatter (so `sknd fmt --check` is clean and a rendering bug is caught here,
not by the user), and the whole folder is built in a temporary sibling and renamed into place, so an
error leaves nothing behind.
"""

from __future__ import annotations

import keyword
import math
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.compose.quantization import qparams, quantized_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.io.tensor_file import write_tensor
from skriptnd.model import load, variable_file
from skriptnd.source import Span
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module
from skriptnd.untrusted import UnsafeFile, read_regular

#: Words that cannot name a tensor or attribute in generated text: the grammar's reserved words and the
#: operators `is`/`in`. Standard module names (`image`, `nn`) are fine: `image.resize(image)` calls the
#: module's operator on the tensor (a call always names a module operator, see docs/spec-errata.md).
_RESERVED = frozenset(
    "if then elif else with for while do unroll yield optional graph operator public version extension import "
    "true false inf pi type arith num int real bool str is in".split())
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
register_codes({"E0790": "output path not usable", "E0794": "an imported model does not check"})


def is_identifier(name: str) -> bool:
    """A name that generated SkriptND text can use as it is."""
    return bool(_IDENT.match(name)) and name not in _RESERVED


class Names:
    """Unique SkriptND identifiers for foreign names (ONNX tensor names may be '/conv1/Conv_output_0').

    `renamed` keeps the foreign names that had to change, for the importer to print the mapping.
    """

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._used: set[str] = set(taken)
        self._given: dict[str, str] = {}
        self.renamed: dict[str, str] = {}

    def __call__(self, foreign: str) -> str:
        if foreign in self._given:
            return self._given[foreign]
        base = foreign if is_identifier(foreign) else self.clean(foreign)
        name, k = base, 1
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        self._given[foreign] = name
        if name != foreign:
            self.renamed[foreign] = name
        return name

    def fresh(self, foreign: str) -> str:
        """A new identifier for each call, even for a foreign name seen before (labels: two ONNX nodes
        may share a name, two SkriptND labels may not)."""
        self._given.pop(foreign, None)
        return self(foreign)

    def reserve(self, name: str) -> None:
        self._used.add(name)

    @staticmethod
    def clean(foreign: str) -> str:
        """``foreign`` as an identifier (what a name becomes before collisions are numbered)."""
        text = re.sub(r"[^A-Za-z0-9_]+", "_", foreign).strip("_")
        if not text:
            text = "t"
        if text[0].isdigit():
            text = f"t_{text}"
        if text in _RESERVED or keyword.iskeyword(text):
            text = f"{text}_"
        return text


def literal(value: LiteralValue) -> str:
    """A Python value as a SkriptND literal: bool, int, float (always with '.', `inf`), str, lists."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            raise ValueError("NaN has no SkriptND literal")
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else f"{text}.0"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, np.ndarray):
        return literal(value.tolist())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, Expr):
        return value.text
    raise TypeError(f"no SkriptND literal for {type(value).__name__}")


@dataclass(frozen=True)
class Expr:
    """Verbatim SkriptND expression text (an extent like `batch * 2`, a tensor reference)."""

    text: str


#: What `literal` writes: a Python or numpy scalar, a string, an array or a (nested) list, or verbatim `Expr`.
LiteralValue = bool | int | float | str | np.generic | np.ndarray | Expr | Sequence["LiteralValue"]
#: A call's argument or output: a tensor name, None (an omitted optional input), an `Expr`, or a pack.
Argument = str | Expr | None | Sequence[str]


def _extent(d: int | str | Expr) -> str:
    return d.text if isinstance(d, Expr) else str(d)


@dataclass
class Attrib:
    """A graph attribute: `name: type = default;` (importers turn symbolic dims into these)."""

    name: str
    type: str
    default: Any = None


@dataclass
class TensorDecl:
    """An input, output, constant or variable. `shape` items are ints or extent expressions (names of
    attributes); `value` is a constant's value (scalar or flat row-major list)."""

    name: str
    dtype: str
    shape: Sequence[int | str | Expr]
    value: Any = None

    def text(self) -> str:
        decl = f"{self.name}: {self.dtype}[{', '.join(_extent(d) for d in self.shape)}]"
        if self.value is not None:
            decl += f" = {literal(self.value)}"
        return decl + ";"


@dataclass
class Call:
    """One statement of @compose: `outs = label: op<types>{attribs}(args);`. An output is a name, or a list of
    names for an output that is a pack (`[a, b] = layout.split(...)`); several are comma-separated (`m, v =`,
    the grammar's form; a parenthesized tuple does not parse). An argument is a tensor
    name (str), None (an omitted optional input: `~`), an `Expr`, or a list of names (a pack)."""

    outputs: Sequence[str | Sequence[str]]
    op: str
    args: Sequence[str | Expr | None | Sequence[str]] = ()
    attribs: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    type_args: Sequence[str] = ()
    comment: str | None = None

    def text(self) -> str:
        # `a, b = op(...)`; a list item is a pack of results (`[a, b] = layout.split(...)`)
        outs = ", ".join(_argument(o) for o in self.outputs)
        label = f"{self.label}: " if self.label else ""
        types = f"<{', '.join(self.type_args)}>" if self.type_args else ""
        attrs = "{" + ", ".join(f"{k}={literal(v)}" for k, v in self.attribs.items()) + "}" if self.attribs else ""
        args = ", ".join(_argument(a) for a in self.args)
        line = f"{outs} = {label}{self.op}{types}{attrs}({args});"
        return f"{line}  # {self.comment}" if self.comment else line


def _argument(a: Argument) -> str:
    if a is None:
        return "~"
    if isinstance(a, Expr):
        return a.text
    if isinstance(a, str):
        return a
    return "[" + ", ".join(_argument(x) for x in a) + "]"


@dataclass
class Quantize:
    """A @quantize entry: `tensor: op{attribs};`."""

    tensor: str
    op: str
    attribs: Mapping[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        attrs = "{" + ", ".join(f"{k}={literal(v)}" for k, v in self.attribs.items()) + "}" if self.attribs else ""
        return f"{self.tensor}: {self.op}{attrs};"


@dataclass
class GraphText:
    """A graph definition; `body` holds Calls or verbatim statements (control flow, formulas)."""

    name: str
    inputs: Sequence[TensorDecl]
    outputs: Sequence[TensorDecl]
    body: Sequence[Call | str]
    attribs: Sequence[Attrib] = ()
    constants: Sequence[TensorDecl] = ()
    variables: Sequence[TensorDecl] = ()
    quantize: Sequence[Quantize] = ()
    comment: str | None = None
    imports: Sequence[str] = ()

    def modules(self) -> list[str]:
        """The modules to import: those named by the calls and quantizers, then the extra imports."""
        used: dict[str, None] = {}
        for item in [*self.body, *self.quantize]:
            if isinstance(item, Call | Quantize) and "." in item.op:
                used[item.op.rpartition(".")[0]] = None
        for name in self.imports:
            used[name] = None
        return list(used)

    def text(self) -> str:
        lines: list[str] = []
        if self.comment:
            lines += [f"# {line}".rstrip() for line in self.comment.splitlines()]
        lines += [f"import {m};" for m in self.modules()]
        lines.append(f"graph {self.name} {{")
        blocks: list[tuple[str, list[str]]] = [
            ("@attrib", [f"{a.name}: {a.type}" + (f" = {literal(a.default)}" if a.default is not None else "") + ";"
                         for a in self.attribs]),
            ("@input", [t.text() for t in self.inputs]),
            ("@output", [t.text() for t in self.outputs]),
            ("@constant", [t.text() for t in self.constants]),
            ("@variable", [t.text() for t in self.variables]),
            ("@compose", [s.text() if isinstance(s, Call) else s for s in self.body]),
            ("@quantize", [q.text() for q in self.quantize]),
        ]
        for head, items in blocks:
            if items:
                lines.append(f"    {head} {{")
                lines += [f"        {item}" for item in items]
                lines.append("    }")
        lines.append("}")
        return "\n".join(lines) + "\n"


@dataclass
class ModelFolder:
    """What an importer produces: the main graph, its weights by (scoped) variable name, and extra
    modules (relative path -> text, e.g. `ops/custom.sknd` for operators the stdlib lacks).
    `weight_files` maps variable names to existing NNEF tensor files that are copied byte for byte
    (NNEF 1.x weights are already in the format; the importer has validated them)."""

    graph: GraphText
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    modules: Mapping[str, str] = field(default_factory=dict)
    module: str = "main"
    weight_files: Mapping[str, Path] = field(default_factory=dict)


def render(text: str, path: str) -> str:
    """Parse and re-print generated text in the house style; a parse failure is a bug in the importer
    and is raised as such (with the generated text's location), never written."""
    module, diags = parse_module(text, path)
    if module is None or diags:
        first = diags[0] if diags else None
        where = f"{first.span.line}:{first.span.col}: {first.message}" if first else "no module"
        line = text.splitlines()[first.span.line - 1] if first and 0 < first.span.line <= text.count("\n") + 1 else ""
        raise AssertionError(f"generated SkriptND does not parse ({path}:{where}): {line.strip()}")
    return format_module(module)


def write_model(folder: ModelFolder, out_dir: Path | str, *, overwrite: bool = False,
                verify: Span | None = None) -> Path:
    """Write the folder atomically: everything goes to a temporary sibling first, which replaces
    `out_dir` only when complete. An existing non-empty `out_dir` is an error unless `overwrite`.

    With `verify` (where the imported model is, for the diagnostic), the written folder is checked as
    `sknd run` would before it replaces anything (`verify_model`): an import never reports success for
    a folder that fails later, and leaves nothing behind when it would."""
    texts = {"main.sknd" if folder.module == "main" else f"{folder.module}.sknd": folder.graph.text(),
             **folder.modules}
    out = _target(Path(out_dir))
    rendered = {rel: render(text, str(out / rel)) for rel, text in texts.items()}

    def fill(tmp: Path) -> None:
        for rel, text in rendered.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for name, array in folder.weights.items():
            write_tensor(variable_file(tmp, folder.module, folder.graph.name, name), np.ascontiguousarray(array))
        for name, source in folder.weight_files.items():
            # a regular file only (the importer checked it inside its model folder): never a device or FIFO
            variable_file(tmp, folder.module, folder.graph.name, name).write_bytes(read_regular(source))

    return write_folder(out_dir, fill, overwrite=overwrite,
                        verify=(folder.graph.name, verify) if verify is not None else None)


class _NotMade(Exception):
    """The temporary folder could not be made: there is nothing of ours to remove."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def write_folder(out_dir: Path | str, fill: Callable[[Path], None], *, overwrite: bool = False,
                 verify: tuple[str, Span] | None = None) -> Path:
    """Write a model folder atomically: `fill` writes its files into a temporary sibling of `out_dir`,
    which replaces `out_dir` only when complete (and, with `verify` = (graph, where), when it checks:
    `verify_model`). An existing non-empty `out_dir` is an error unless `overwrite`. The way every
    importer and `sknd quantize` write: an error leaves nothing behind."""
    named = Path(out_dir)
    out = _target(named)
    problem = output_folder_problem(named, overwrite=overwrite)
    if problem is not None:
        raise DiagnosticError([_path_error(out, problem)])
    parent = out.parent if str(out.parent) else Path(".")
    # named before it exists, so that a signal arriving the moment it is made (Ctrl-C as soon as the folder
    # appears) still finds it to remove: tempfile.mkdtemp returns the name only after the mkdir
    tmp = parent / f".{out.name}.{secrets.token_hex(6)}.tmp"
    try:
        try:
            os.mkdir(tmp, 0o700)
        except OSError as err:  # nothing was made (read-only or pseudo file system, no permission): keep all
            raise _NotMade(err) from None
        fill(tmp)
        if verify is not None:
            verify_model(tmp, *verify)
        os.chmod(tmp, 0o777 & ~_umask())
        if out.exists():
            backup = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=parent))
            backup.rmdir()
            os.replace(out, backup)
            os.replace(tmp, out)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except _NotMade as err:
        raise DiagnosticError([_path_error(out, f"output folder {out} cannot be written in {parent}: "
                                                f"{err.cause.strerror or err.cause}")]) from None
    except (OSError, UnsafeFile) as err:  # the file system refused (full, read-only, ...): nothing half-written
        shutil.rmtree(tmp, ignore_errors=True)
        reason = err.reason if isinstance(err, UnsafeFile) else err.strerror or str(err)
        raise DiagnosticError([_path_error(out, f"output folder {out} cannot be written: {reason}")]) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return named


def _holds_cwd(folder: Path) -> bool:
    """Whether `folder` is the current folder or one of its ancestors (replacing it would pull the folder
    from under the shell that runs us; renaming '.' fails)."""
    try:
        here, target = Path.cwd().resolve(), folder.resolve()
    except OSError:
        return False
    return here == target or target in here.parents


def verify_model(path: Path, graph: str, where: Span) -> None:
    """Check a written model folder as `sknd check` and `sknd run` would (load, compose the graph with its
    default attributes, unless some have none, read each quantized tensor's parameters); DiagnosticError E0794 at `where`,
    quoting the first problems with their places in the folder, when it fails."""
    try:
        # a graph attribute without a default (an ONNX input fed at run time) leaves the composition to the run
        composed = load(path).compose(graph, defer=True)
        for tensor in quantized_tensors(composed):
            qparams(tensor)
    except DiagnosticError as exc:
        problems = list(exc.diagnostics)
    else:
        return

    def place(d: Diagnostic) -> str:
        try:
            rel = Path(d.span.file).resolve().relative_to(path.resolve())
        except (ValueError, OSError):
            rel = Path(d.span.file).name
        return f"{rel}:{d.span.line}:{d.span.col}" if d.span.line else str(rel)

    first = problems[0] if problems else None
    raise DiagnosticError([Diagnostic(
        code="E0794", span=where,
        message="the imported model would not check, so nothing was written"
        + (f": {place(first)}: {first.message}" if first else ""),
        notes=tuple(Note(f"also: {place(d)}: {d.message}", where) for d in problems[1:4]),
        hint="the source model holds something SkriptND cannot express; please report it if the source is "
             "valid")])


def _target(named: Path) -> Path:
    """A symlink (to a folder, or dangling): the folder it points to is written, the link stays a link."""
    return Path(os.path.realpath(named)) if named.is_symlink() else named


def output_folder_problem(out_dir: Path | str, *, overwrite: bool = False) -> str | None:
    """Why no model folder can be written at ``out_dir``, with what to do instead, or None: asked before any
    work (``sknd import`` reports it as a usage error of ``-o``) and again by write_model (E0790). What only
    writing tells (a read-only or pseudo file system) write_model reports as it happens."""
    out = _target(Path(out_dir))
    if out.exists() and not out.is_dir():
        return f"output folder {out} exists and is not a folder; give the name of a folder to create"
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        return (f"output folder {out} exists and is not empty (nothing is overwritten); choose a new or empty "
                "folder, or remove this one first")
    if out.is_dir() and _holds_cwd(out):
        return (f"output folder {out} is the current folder (or holds it), which cannot be replaced; give the "
                "name of a folder to create, e.g. -o ./model")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        return f"output folder {out} cannot be created: {parent} does not exist (create it first)"
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _path_error(path: Path, message: str) -> Diagnostic:
    """E0790 for callers of the API (``sknd import`` turns it into a usage error naming ``-o``): the span is
    the folder itself, which has no line to point at."""
    return Diagnostic(code="E0790", message=message, span=Span(str(path), 1, 1, 1, 2))
