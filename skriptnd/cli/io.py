"""The CLI's file and input arguments, checked before any work is done.

Output options (`compose -o`, `export --tosa-mlir/--tosa-flatbuffer`, `doc -o`, `run --output-dir`,
`--save-inputs`) are usage errors (exit 2, naming the path) when the target cannot be written: a
missing or unwritable folder, a folder where a file is wanted or a file where a folder is wanted.
They are checked before composing or running, so a bad path never leaves part of the outputs
written. `run`'s inputs (`--input NAME=FILE`, `--random-inputs`) are checked against the graph:
unknown and missing names, files that are not arrays, and sizes beyond `--max-memory` are located
diagnostics at the graph's declaration.
"""

from __future__ import annotations

import difflib
import io
import math
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import typer

from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.fileio import output_target, write_atomic
from skriptnd.io.npy import NpyError, read_npy
from skriptnd.source import Span

register_codes({
    "E0791": "tensor too large for the memory allowed",
    "E0792": "unknown graph input",
    "E0793": "graph inputs missing",
})

# ---------------------------------------------------------------------------- output paths


def _usage(option: str, message: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=f"'{option}'")


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _unwritable(folder: Path) -> str | None:
    """Why a file cannot be created in folder (None if it can): tried, since permission bits do not
    tell for root, read-only mounts or pseudo file systems."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".sknd-probe-"):
            return None
    except OSError as err:
        return err.strerror or str(err)


def check_output_file(path: Path | None, option: str) -> None:
    """A file to be written (atomically, through a temporary sibling): its folder must exist and be
    writable, and the path must not be a folder."""
    if path is None:
        return
    if path.is_dir():
        raise _usage(option, f"{path} is a folder; give a file name")
    try:
        kind, path = output_target(path)
    except OSError as err:
        raise _usage(option, f"cannot write {path}: {err.strerror or err}") from None
    if kind == "stream":  # a character device or FIFO is written through: no temporary sibling needed
        return
    parent = path.parent
    if not parent.exists():
        raise _usage(option, f"cannot write {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise _usage(option, f"cannot write {path}: {parent} is not a folder")
    reason = _unwritable(parent)
    if reason:
        raise _usage(option, f"cannot write {path}: folder {parent} is not writable ({reason})")


def check_output_dir(path: Path | None, option: str) -> None:
    """A folder to write files into; created if missing, so its nearest existing ancestor must be a
    writable folder, and the path itself must not be a file."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise _usage(option, f"{path} is a file, not a folder")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise _usage(option, f"cannot create folder {path}: {existing} is a file")
    reason = _unwritable(existing)
    if reason:
        raise _usage(option, f"cannot write into {path}: folder {existing} is not writable ({reason})")


def write_output(path: Path, data: str | bytes, option: str) -> None:
    """write_atomic, with an OS refusal (full disk, a race) as a usage error naming the path."""
    try:
        write_atomic(path, data)
    except OSError as err:
        raise _usage(option, f"cannot write {path}: {err.strerror or err}") from None


def save_arrays(folder: Path, arrays: dict[str, Any], option: str) -> None:
    """Each array as folder/<name>.npy (atomic writes; the folder is created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _usage(option, f"cannot create folder {folder}: {err.strerror or err}") from None
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        write_output(folder / f"{name}.npy", buffer.getvalue(), option)


# ---------------------------------------------------------------------------- run inputs


def graph_span(graph: Any) -> Span:
    """The declaration of a composed graph (its name in `graph Name {`), for run-time diagnostics."""
    return graph.declared_at()


def read_array(spec: str, name: str) -> np.ndarray:
    """--input NAME=FILE: a .npy or NNEF .dat file; anything else is a usage error saying why."""
    path = Path(spec)
    hint = f"'--input {name}'"
    if not path.is_file():
        what = "not a regular file (a FIFO, a device or a folder is never read)" if path.exists() else "no such file"
        raise typer.BadParameter(f"{what}: {spec}", param_hint=hint)
    try:
        if path.suffix == ".dat":
            from skriptnd.io.tensor_file import read_tensor

            return read_tensor(path)
        with path.open("rb") as fh:
            magic = fh.read(6)
        if magic != b"\x93NUMPY":
            raise typer.BadParameter(f"{spec} is not a .npy file (no NumPy header); save the array with "
                                     "numpy.save, or give an NNEF tensor file (.dat)", param_hint=hint)
        return read_npy(path)  # numbers only, never more memory than the file holds
    except typer.BadParameter:
        raise
    except NpyError as err:
        raise typer.BadParameter(f"cannot read {spec}: {err.message}", param_hint=hint) from None
    except ValueError as err:
        reason = "it holds Python objects (a pickle), not numbers" if "pickle" in str(err) else str(err)
        raise typer.BadParameter(f"cannot read {spec}: {reason}", param_hint=hint) from None
    except Exception as err:  # corrupt user files are a usage problem, reported in one line
        raise typer.BadParameter(f"cannot read {spec}: {err}", param_hint=hint) from None


def check_input_names(graph: Any, given: Iterable[str], random_inputs: bool) -> None:
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


_ITEM_BYTES = {"real": 4, "int": 8, "bool": 1}


def tensor_bytes(t: Any) -> int | None:
    """Bytes of a tensor as run (dynamic extents at their bound, else 1); None for strings."""
    if t.dtype not in _ITEM_BYTES:
        return None
    bounds = t.bounds or (None,) * len(t.shape)
    dims = [d if d is not None else (b or 1) for d, b in zip(t.shape, bounds, strict=False)]
    return math.prod(int(d) for d in dims) * _ITEM_BYTES[t.dtype]


def check_memory(graph: Any, limit: int, random: Iterable[str] = ()) -> None:
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


class CompileLine:
    """The status line of a running compiler (skriptnd.backends.base.reporting_compiles): on a terminal one
    line rewritten in place ("compiling G (…) with iree-compile (llvm-cpu)… 12 s") and cleared when the
    compile ends; elsewhere (a log, a pipe) one plain line per compile that runs past a second, so logs show
    what took the time without a line per tick."""

    def __init__(self, stream: Any = None) -> None:
        import sys

        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown: set[str] = set()

    def __call__(self, what: str, seconds: float | None) -> None:
        if seconds is None:
            if self.tty and what in self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self.shown.discard(what)
            return
        if self.tty:
            self.stream.write(f"\r\033[Kcompiling {what}… {seconds:.0f} s")
        elif what not in self.shown:
            self.stream.write(f"compiling {what}…\n")
        self.shown.add(what)
        self.stream.flush()


def check_device(device: str | None, backends: Iterable[str], target: str | None) -> str | None:
    """``--device`` checked as a usage error (exit 2): a device IREE knows, for a backend that runs there,
    without a CPU ``--target`` beside a GPU."""
    if not device:
        return None
    from skriptnd.backends import get
    from skriptnd.backends.iree_devices import parse

    try:
        parsed = parse(device)
    except ValueError as err:
        raise _usage("--device", str(err)) from None
    names = list(backends)
    if not any(parsed.kind.name in get(n).devices for n in names):
        raise _usage("--device", f"--device {device} is for --via iree (the {', '.join(names)} backend runs "
                     f"on the CPU)")
    if target and not parsed.is_cpu:
        raise _usage("--target", f"--target names the CPU to compile for; for a {parsed.kind.name} GPU give its "
                     f"architecture as --device {parsed.kind.name}:ARCH")
    return device
