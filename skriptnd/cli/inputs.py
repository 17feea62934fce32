"""`sknd run`'s and `sknd bench`'s inputs checked against the composed graph before anything runs.

Unknown and missing input names, and sizes beyond `--max-memory`, are located diagnostics at the graph's
declaration (E0791-E0793); inputs not given are drawn at random (`--random-inputs`, and always for bench).
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import typer

from skriptnd.backends.bind import attribute_value
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.compose.stats import tensor_bytes
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.io.npy import NpyError, npy_header_shape
from skriptnd.io.tensor_file import HEADER_SIZE, TensorFileError, decode_header
from skriptnd.model import Model
from skriptnd.source import Span

register_codes({
    "E0791": "tensor too large for the memory allowed",
    "E0792": "unknown graph input",
    "E0793": "graph inputs missing",
})


def graph_span(graph: Graph) -> Span:
    """The declaration of a composed graph (its name in `graph Name {`), for run-time diagnostics."""
    return graph.declared_at()


def check_input_names(graph: Graph, given: Iterable[str], random_inputs: bool) -> None:
    """Every --input name is an input of the graph; without --random-inputs, every input is given.

    Both are located at the graph's declaration, listing its inputs."""
    names = [t.name for t in graph.inputs]
    declared = ", ".join(f"{t.name}: {t.declared or t.dtype}" for t in graph.inputs) or "none"
    diags: list[Diagnostic] = []
    given = list(given)
    for name in given:
        if name not in names:
            close = [n for n in names if n.lower() == name.lower()] or difflib.get_close_matches(name, names, n=1)
            diags.append(Diagnostic(
                code="E0792", message=f"graph '{graph.name}' has no input '{name}'; its inputs are {declared}",
                span=graph_span(graph),
                hint=f"did you mean '{close[0]}'?" if close else "give --input NAME=FILE with one of its inputs"))
    missing = [n for n in names if n not in given]
    if missing and not random_inputs:
        listed = ", ".join(f"'{n}'" for n in missing)
        diags.append(Diagnostic(
            code="E0793", message=f"no value for input{'s' if len(missing) > 1 else ''} {listed} of graph "
            f"'{graph.name}'; it requires {declared}", span=graph_span(graph),
            hint=" ".join(f"--input {n}=FILE.npy" for n in missing) + ", or --random-inputs"))
    if diags:
        raise DiagnosticError(diags)


def random_input(rng: np.random.Generator, t: Tensor) -> np.ndarray:
    """Seeded random values for an input not given (dynamic extents at their bound, else 1)."""
    shape = tuple(d if d is not None else (b or 1) for d, b in zip(t.shape, t.bounds or (None,) * t.rank,
                                                                  strict=False))
    if t.dtype == "real":
        return rng.standard_normal(shape).astype(np.float32)
    if t.dtype == "int":
        return rng.integers(0, 10, size=shape, dtype=np.int64)
    return rng.integers(0, 2, size=shape).astype(np.bool_)


# ---------------------------------------------------------------------------- memory


_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str) -> int:
    """'512M', '4G', '1.5GB', '100000' (bytes) -> bytes; a usage error for anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).upper() not in _UNITS:
        raise typer.BadParameter(f"'{text}' is not a size; write e.g. 512M, 4G or 1.5GB", param_hint="'--max-memory'")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def default_max_memory() -> int:
    """80% of the machine's physical memory (8 GiB where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8)
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_memory(graph: Graph, limit: int, random: Iterable[str] = ()) -> None:
    """Refuse, before allocating anything, a run whose inputs, variables or any single tensor would
    not fit in `limit` bytes: E0791 at the tensor's declaration (else the graph's), with the size."""
    random = set(random)
    where = graph_span(graph)
    held = 0
    for t in {id(t): t for t in [*graph.inputs, *graph.tensors, *graph.outputs]}.values():
        size = tensor_bytes(t)
        if size is None:
            continue
        if t.kind in ("input", "variable", "constant"):
            held += size
        if size > limit:
            what = "random values for input" if t.name in random else f"{t.kind} tensor"
            span = t.span if isinstance(t.span, Span) else where
            raise DiagnosticError([Diagnostic(
                code="E0791", message=f"{what} '{t.name}' ({t.declared or t.dtype}, shape "
                f"{list(t.shape)}) would need {format_bytes(size)} ({size:,} bytes); the limit is "
                f"{format_bytes(limit)}", span=span,
                notes=(Note(f"in graph '{graph.name}'", where),) if span is not where else (),
                hint="give smaller --attrib values (e.g. batch), or raise the limit with --max-memory")])
    if held > limit:
        raise DiagnosticError([Diagnostic(
            code="E0791", message=f"the inputs, variables and constants of graph '{graph.name}' would need "
            f"{format_bytes(held)} ({held:,} bytes) together; the limit is {format_bytes(limit)}", span=where,
            hint="raise the limit with --max-memory")])


def file_shape(spec: str) -> tuple[int, ...] | None:
    """The shape an --input file declares (a .npy or NNEF .dat header, nothing else read); None when it cannot
    be told here (reading the file later says why)."""
    path = Path(spec)
    try:
        # never block on a FIFO or a device: opened without waiting, and read only when a regular file
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            if path.suffix == ".dat":
                return decode_header(fh.read(HEADER_SIZE), spec).shape
            return npy_header_shape(fh, spec)
    except (OSError, ValueError, NpyError, TensorFileError):
        return None


#: An --input that gives a graph attribute (an ONNX input fed at run time) holds at most this many values.
ATTRIB_LIMIT = 4096


def attribs_from_inputs(model: Model, graph: str | None, files: Inputs, attribs: Mapping[str, object],
                        read: Callable[[str, str], np.ndarray]) -> tuple[dict[str, object], Inputs]:
    """`--input axes=a.npy` where `axes` is an attribute of the graph (issue 25: an ONNX input that feeds only
    parameters is imported as one): its value, read from the file, composes the graph. Returns the attributes
    with those values added and the --input items left for the graph's tensor inputs. Giving one both ways, a
    file of more than ATTRIB_LIMIT values or of more than one dimension is a usage error."""
    names = {d.name for d in model.attrib_decls(graph)}
    found: dict[str, object] = {}
    for name, spec in files.files.items():
        if name not in names:
            continue
        if name in attribs:
            raise typer.BadParameter(f"'{name}' is given both as --attrib and as --input", param_hint="--input")
        shape = file_shape(spec)
        if shape is not None and int(np.prod(shape)) > ATTRIB_LIMIT:
            raise typer.BadParameter(f"'{name}' is a graph attribute: at most {ATTRIB_LIMIT} values, the file has "
                                     f"shape {list(shape)}", param_hint="--input")
        try:
            found[name] = attribute_value(name, read(spec, name))
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--input") from None
    rest = Inputs({k: v for k, v in files.files.items() if k not in found})
    return {**attribs, **found}, rest


@dataclass(frozen=True)
class Inputs:
    """`--input NAME=FILE` items split, before the graph is known to check the names against."""
    files: dict[str, str]

    @staticmethod
    def parse(items: list[str] | None) -> Inputs:
        files: dict[str, str] = {}
        for item in items or []:
            name, sep, spec = item.partition("=")
            if not sep or not name:
                raise typer.BadParameter(f"'{item}' is not name=file", param_hint="'--input'")
            files[name] = spec
        return Inputs(files)
