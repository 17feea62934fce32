"""The CLI's files: output paths checked before any work is done, written atomically; input arrays read.

Output options (`compose -o`, `export --tosa-mlir/--tosa-flatbuffer`, `doc -o`, `run --output-dir`,
`--save-inputs`) are usage errors (exit 2, naming the path) when the target cannot be written: a
missing or unwritable folder, a folder where a file is wanted or a file where a folder is wanted.
They are checked before composing or running, so a bad path never leaves part of the outputs
written. `run --input NAME=FILE` reads a .npy or NNEF .dat file; a file that is not an array is a
usage error saying why (the names are checked against the graph by skriptnd.cli.inputs).
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np
import typer

from skriptnd.fileio import output_target, write_atomic
from skriptnd.io.npy import NpyError, read_npy
from skriptnd.io.tensor_file import read_tensor

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


def save_arrays(folder: Path, arrays: dict[str, np.ndarray], option: str) -> None:
    """Each array as folder/<name>.npy (atomic writes; the folder is created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _usage(option, f"cannot create folder {folder}: {err.strerror or err}") from None
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        write_output(folder / f"{name}.npy", buffer.getvalue(), option)



# ---------------------------------------------------------------------------- input files


def read_array(spec: str, name: str) -> np.ndarray:
    """--input NAME=FILE: a .npy or NNEF .dat file; anything else is a usage error saying why."""
    path = Path(spec)
    hint = f"'--input {name}'"
    if not path.is_file():
        what = "not a regular file (a FIFO, a device or a folder is never read)" if path.exists() else "no such file"
        raise typer.BadParameter(f"{what}: {spec}", param_hint=hint)
    try:
        if path.suffix == ".dat":
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
