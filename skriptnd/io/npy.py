""".npy and .npz files from the user or from a download (`--input x.npy`, `--expect DIR`, SPIR-V constants):
numbers only, never a pickle, and never more memory than the file justifies.

`numpy.load` trusts the header: a 100-byte .npy claiming a shape of 10^12 items allocates first and fails
after, and `allow_pickle=True` (or an object array in an .npz) runs code. Here the header is read first,
an object dtype is refused (E0704), the bytes the shape needs are checked against the file's size
(or, in an .npz, the member's) before the array is allocated, and only regular files are opened
(skriptnd.untrusted.open_regular: a FIFO never blocks).
"""

from __future__ import annotations

import math
import os
import zipfile
from typing import IO, Any

import numpy as np

from skriptnd.diagnostics import Diagnostic, register_codes
from skriptnd.source import Span
from skriptnd.untrusted import UnsafeFile, open_regular

__all__ = ["NpyError", "read_npy", "read_npz"]

register_codes({"E0704": "unreadable .npy or .npz file"})

#: An .npz member larger than INFLATION_FLOOR bytes may inflate at most MAX_INFLATION times its compressed
#: size (weights compress little; a zip bomb of zeros, about 1000 times, is refused).
MAX_INFLATION = 100
INFLATION_FLOOR = 64 * 2**20


class NpyError(Exception):
    """A .npy/.npz file that cannot be read as numbers; `message` says why and what to do."""

    def __init__(self, message: str, path: str | os.PathLike[str]) -> None:
        super().__init__(f"{path}: {message}")
        self.message = message
        self.path = str(path)

    def to_diagnostic(self, span: Span | None = None) -> Diagnostic:
        return Diagnostic(code="E0704", message=self.message, span=span or Span(self.path, 1, 1, 1, 2))


def _header(fh: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            raise NpyError(f"unsupported .npy format version {version[0]}.{version[1]}; save it with "
                           "numpy.save", name)
    except NpyError:
        raise
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as err:
        raise NpyError(f"not a readable .npy file ({err}); save the array with numpy.save", name) from None
    if dtype.hasobject:
        raise NpyError("it holds Python objects (a pickle), not numbers; a pickle can run code, so it is "
                       "never loaded - save a numeric array (numpy.save(path, array.astype(...)))", name)
    return tuple(int(d) for d in shape), bool(fortran), dtype


def _read_body(fh: IO[bytes], available: int, name: str) -> np.ndarray:
    start = fh.tell() if fh.seekable() else 0
    shape, fortran, dtype = _header(fh, name)
    need = math.prod(shape) * dtype.itemsize
    left = available - (fh.tell() - start) if fh.seekable() else available
    if need > left:
        raise NpyError(f"the header announces a {dtype} array of shape {list(shape)} ({need:,} bytes), but the "
                       f"file holds only {max(left, 0):,} after its header; it was cut short - save it again",
                       name)
    buffer = bytearray(need)
    view = memoryview(buffer)
    got = 0
    while got < need:
        n = fh.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise NpyError(f"the file ended after {got:,} of the {need:,} data bytes; save it again", name)
        got += n
    flat = np.frombuffer(buffer, dtype=dtype)
    return flat.reshape(shape, order="F" if fortran else "C")


def npy_header_shape(fh: IO[bytes], name: str) -> tuple[int, ...]:
    """The shape an open .npy file declares, from its header alone (nothing else is read)."""
    return _header(fh, name)[0]


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The numeric array of a .npy file; `NpyError` for anything else (see the module docstring),
    `OSError` when it cannot be opened."""
    name = os.fspath(path)
    try:
        fh, size = open_regular(path)
    except UnsafeFile as err:
        raise NpyError(f"cannot read it: it {err.reason}", name) from None
    with fh:
        return _read_body(fh, size, name)


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The numeric arrays of an .npz file by name, with the same rules per member, and members that
    inflate beyond MAX_INFLATION times their compressed size refused."""
    name = os.fspath(path)
    try:
        fh, _size = open_regular(path)
    except UnsafeFile as err:
        raise NpyError(f"cannot read it: it {err.reason}", name) from None
    arrays: dict[str, np.ndarray] = {}
    with fh:
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError, ValueError) as err:
            raise NpyError(f"not a readable .npz file ({err})", name) from None
        with archive:
            for info in archive.infolist():
                member = f"{name}[{info.filename}]"
                if info.file_size > MAX_INFLATION * info.compress_size + INFLATION_FLOOR:
                    raise NpyError(f"member {info.filename} would inflate from {info.compress_size:,} to "
                                   f"{info.file_size:,} bytes; refused as a zip bomb", name)
                try:
                    with archive.open(info) as part:
                        array = _read_body(part, info.file_size, member)  # type: ignore[arg-type]
                except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as err:
                    raise NpyError(f"cannot read member {info.filename}: {err}", name) from None
                arrays[info.filename.removesuffix(".npy")] = array
    return arrays
