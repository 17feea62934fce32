"""NNEF tensor binary files (`.dat`, the NNEF 1.x "Tensor File Format").

A file is a fixed 128-byte little-endian header followed by the raw item data:

=======  =====  ==============================================================================
offset   size   field
=======  =====  ==============================================================================
0        2      magic bytes ``0x4E 0xEF``
2        1      version major (1)
3        1      version minor (0)
4        4      data length in bytes, uint32 (``ceil(volume * bits_per_item / 8)``)
8        4      rank, uint32 (0..8)
12       32     extents, 8 x uint32 (entries past ``rank`` are zero)
44       4      bits per item, uint32
48       4      item type code, uint32 (`ItemType`; the upper 16 bits set = vendor-defined)
52       76     reserved / quantization parameters, 19 x uint32 (written as zeros)
128      ...    data: items in row-major order, little-endian; bools packed 8 per byte,
                most significant bit first, the last byte padded with zero bits
=======  =====  ==============================================================================

Legacy files (the first NNEF 1.0 revision) mark signed integers as item type 1 (unsigned) with
a non-zero first reserved word; like the reference implementation we read those as signed.
Quantized item types (2, 3) hold plain integers: the quantization parameters live in the
model's ``graph.quant`` file, not in the tensor file.

Everything a user can get wrong raises `TensorFileError` with a diagnostic code:
E0701 (file not found or unreadable), E0702 (corrupt or unsupported file), E0703 (the array's
type or shape does not fit the file format or the declaration it is checked against).
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from skriptnd.diagnostics import Diagnostic, register_codes
from skriptnd.fileio import write_atomic
from skriptnd.source import Span
from skriptnd.untrusted import UnsafeFile, open_regular

__all__ = [
    "HEADER_SIZE",
    "MAX_RANK",
    "ItemType",
    "TensorFileError",
    "TensorHeader",
    "decode_header",
    "encode_tensor",
    "expected",
    "expected_header",
    "read_tensor",
    "read_tensor_bytes",
    "read_tensor_with_header",
    "write_tensor",
]

register_codes({
    "E0701": "tensor file not found",
    "E0702": "corrupt tensor file",
    "E0703": "tensor file type or shape mismatch",
})

HEADER_SIZE = 128
MAX_RANK = 8
MAGIC = b"\x4e\xef"
VERSION = (1, 0)
_U32_MAX = 0xFFFF_FFFF

# magic, major, minor, data length, rank, 8 extents, bits per item, item type, 19 reserved words.
_HEADER = struct.Struct(f"<2sBBII{MAX_RANK}III19I")
assert _HEADER.size == HEADER_SIZE


class ItemType(IntEnum):
    """Khronos-defined item type codes (the low 16 bits of the item type field)."""

    FLOAT = 0
    UINT = 1
    QUINT = 2
    QINT = 3
    INT = 4
    BOOL = 5


#: numpy dtype kind of the items of each item type.
_KIND = {ItemType.FLOAT: "f", ItemType.UINT: "u", ItemType.QUINT: "u", ItemType.QINT: "i",
         ItemType.INT: "i", ItemType.BOOL: "b"}
#: bits per item this implementation can load, per item type.
_BITS = {ItemType.FLOAT: (16, 32, 64), ItemType.BOOL: (1, 8)}
_INT_BITS = (8, 16, 32, 64)

_PathOrFile = str | os.PathLike[str] | IO[bytes]


class TensorFileError(Exception):
    """A problem with a tensor file that the user can fix; `code` is its E07xx diagnostic code."""

    def __init__(self, message: str, path: str | os.PathLike[str], code: str = "E0702") -> None:
        super().__init__(message, str(path), code)
        self.message = message
        self.path = str(path)
        self.code = code

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def to_diagnostic(self, span: Span | None = None) -> Diagnostic:
        """This error as a located diagnostic, at `span` or else at the start of the tensor file."""
        return Diagnostic(code=self.code, message=self.message,
                          span=span or Span(self.path, 1, 1, 1, 2))


@dataclass(frozen=True, slots=True)
class TensorHeader:
    """A decoded, validated header. `item_type` is normalised (legacy signed flag applied)."""

    version: tuple[int, int]
    data_length: int
    shape: tuple[int, ...]
    bits_per_item: int
    item_type: ItemType
    reserved: tuple[int, ...]

    @property
    def quantized(self) -> bool:
        """True for the quantized integer item types (their parameters are in graph.quant)."""
        return self.item_type in (ItemType.QINT, ItemType.QUINT)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype `read_tensor` returns for this header (native byte order)."""
        if self.item_type is ItemType.BOOL:
            return np.dtype(np.bool_)
        return np.dtype(f"{_KIND[self.item_type]}{self.bits_per_item // 8}")

    @property
    def volume(self) -> int:
        return math.prod(self.shape)


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if e is None else str(e) for e in shape) + "]"


def _data_bytes(volume: int, bits: int) -> int:
    return (volume * bits + 7) // 8


def decode_header(data: bytes, name: str) -> TensorHeader:
    """Decode and validate the 128-byte header at the start of `data` (`name` is for messages)."""
    if len(data) < HEADER_SIZE:
        what = "is empty" if not data else f"is only {len(data)} bytes long"
        raise TensorFileError(
            f"truncated tensor file: it {what}, but an NNEF tensor file starts with a "
            f"{HEADER_SIZE}-byte header; the file was cut short - re-export or re-copy it", name)
    (magic, major, minor, data_length, rank, *rest) = _HEADER.unpack_from(data)
    extents = rest[:MAX_RANK]
    bits, code = rest[MAX_RANK], rest[MAX_RANK + 1]
    reserved = tuple(rest[MAX_RANK + 2:])
    if magic != MAGIC:
        raise TensorFileError(
            f"not an NNEF tensor file: it starts with bytes 0x{magic[0]:02X} 0x{magic[1]:02X}, "
            "not the magic number 0x4E 0xEF; point to the .dat file NNEF exported for this tensor", name)
    if (major, minor) != VERSION:
        raise TensorFileError(
            f"unsupported tensor file version {major}.{minor}; only version 1.0 is supported - "
            "re-export the tensor with an NNEF 1.0 writer", name)
    if rank > MAX_RANK:
        raise TensorFileError(
            f"corrupt tensor file header: rank {rank} exceeds the maximum rank {MAX_RANK}; "
            f"an NNEF tensor file can hold at most {MAX_RANK} dimensions - reshape the tensor", name)
    if code & 0xFFFF0000:
        raise TensorFileError(
            f"unsupported vendor-defined item type 0x{code:08X}; only the Khronos item types "
            "(float, int, uint, qint, quint, bool) can be read - re-export with a standard item type", name)
    try:
        item_type = ItemType(code)
    except ValueError:
        raise TensorFileError(
            f"corrupt tensor file header: unknown item type code {code}; known codes are "
            + ", ".join(f"{t.value} ({t.name.lower()})" for t in ItemType)
            + "; the file is damaged or not an NNEF 1.0 tensor file - re-export it", name) from None
    if item_type is ItemType.UINT and reserved[0] != 0:
        item_type = ItemType.INT  # legacy NNEF 1.0 signedness flag
    allowed = _BITS.get(item_type, _INT_BITS)
    if bits not in allowed:
        raise TensorFileError(
            f"unsupported bits per item {bits} for item type {item_type.name.lower()}; supported: "
            + ", ".join(map(str, allowed)) + " - re-export the tensor with one of these widths", name)
    shape = tuple(extents[:rank])
    need = _data_bytes(math.prod(shape), bits)
    if data_length != need:
        raise TensorFileError(
            f"corrupt tensor file header: data length is {data_length} bytes, but extents "
            f"{_shape_text(shape)} x {bits} bits per item need {need} bytes; the header is damaged - "
            "re-export the tensor", name)
    return TensorHeader((major, minor), data_length, shape, bits, item_type, reserved)


def _decode_data(header: TensorHeader, payload: bytes) -> np.ndarray:
    volume = header.volume
    raw = np.frombuffer(payload, dtype=np.uint8)
    if header.item_type is ItemType.BOOL:
        if header.bits_per_item == 1:
            flat = np.unpackbits(raw, count=volume, bitorder="big").astype(np.bool_)
        else:
            flat = raw != 0
    else:
        stored = header.dtype.newbyteorder("<")
        flat = np.frombuffer(payload, dtype=stored).astype(header.dtype)
    return flat.reshape(header.shape)


def _check_payload_size(header: TensorHeader, got: int, name: str, *, trailing: int = 0) -> None:
    if got < header.data_length:
        raise TensorFileError(
            f"truncated tensor file: the header announces {header.data_length} data bytes for a "
            f"{_shape_text(header.shape)} tensor, but only {got} follow; the file was cut short - "
            "re-export or re-copy it", name)
    if trailing:
        raise TensorFileError(
            f"corrupt tensor file: {trailing} unexpected bytes after the {header.data_length} data "
            f"bytes of a {_shape_text(header.shape)} tensor; the file is damaged or two files were "
            "concatenated - re-export it", name)


def _read_tensor_impl(data: bytes, name: str) -> tuple[np.ndarray, TensorHeader]:
    header = decode_header(data, name)
    payload = data[HEADER_SIZE:HEADER_SIZE + header.data_length]
    extra = max(0, len(data) - HEADER_SIZE - header.data_length)
    _check_payload_size(header, len(payload), name, trailing=extra)
    return _decode_data(header, payload), header


def read_tensor_bytes(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Decode a whole tensor file held in memory; `name` is used in error messages."""
    return _read_tensor_impl(bytes(data), name)[0]


def _read_exactly(fh: IO[bytes], n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = fh.read(n - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


HeaderCheck = Callable[[TensorHeader], None]


def read_tensor_with_header(path_or_file: _PathOrFile, check: HeaderCheck | None = None) -> tuple[np.ndarray, TensorHeader]:
    """Like `read_tensor`, also returning the decoded header (e.g. to see `quantized`).

    `check(header)` runs before any data is read (e.g. `expected_header` against a declaration), so that
    a file of the wrong type or shape costs no more than its header."""
    if hasattr(path_or_file, "read"):
        fh: IO[bytes] = path_or_file  # type: ignore[assignment]
        name = str(getattr(fh, "name", "<stream>"))
        head = _read_exactly(fh, HEADER_SIZE)
        header = decode_header(head, name)
        if check is not None:
            check(header)
        payload = _read_exactly(fh, header.data_length)
        _check_payload_size(header, len(payload), name)
        return _decode_data(header, payload), header
    name = os.fspath(path_or_file)  # type: ignore[arg-type]
    try:
        fh, size = open_regular(name)
    except FileNotFoundError:
        raise TensorFileError(
            "tensor file not found; check the path, or export the tensor's data there", name,
            "E0701") from None
    except IsADirectoryError:
        raise TensorFileError("this is a folder, not a tensor file; point to the tensor's .dat file",
                              name, "E0701") from None
    except UnsafeFile as err:
        raise TensorFileError(f"cannot read tensor file: it {err.reason}", name, "E0701") from None
    except OSError as err:
        raise TensorFileError(f"cannot read tensor file: {err.strerror or err}; check its permissions",
                              name, "E0701") from None
    with fh:
        try:
            head = _read_exactly(fh, min(HEADER_SIZE, size))
            header = decode_header(head, name)
            if check is not None:
                check(header)
            # the size the header claims, against the file's own size, before the data is read: a file
            # that lies costs nothing (no allocation beyond what the file holds)
            _check_payload_size(header, size - HEADER_SIZE, name,
                                trailing=max(0, size - HEADER_SIZE - header.data_length))
            payload = _read_exactly(fh, header.data_length)
        except OSError as err:
            raise TensorFileError(f"cannot read tensor file: {err.strerror or err}", name, "E0701") from None
    _check_payload_size(header, len(payload), name)  # the file shrank while it was read
    return _decode_data(header, payload), header


def read_tensor(path_or_file: _PathOrFile, check: HeaderCheck | None = None) -> np.ndarray:
    """Read a tensor file from a path, or from a binary file object at its current position.

    A path must hold exactly one tensor (trailing bytes are an error); from a file object exactly
    one tensor is consumed. The result is a new, writable array in native byte order, of dtype
    float16/32/64, int8..int64, uint8..uint64 or bool; quantized items are read as integers.
    Only a regular file is read (a FIFO, a device or a folder is an E0701), and its size must be the one
    its header announces before any data is read; `check` sees the header first (see
    `read_tensor_with_header`).
    """
    return read_tensor_with_header(path_or_file, check)[0]


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def _item_type_of(dtype: np.dtype[Any], quantized: bool, name: str) -> tuple[ItemType, int]:
    kind, bits = dtype.kind, dtype.itemsize * 8
    if kind == "f" and bits in _BITS[ItemType.FLOAT]:
        item_type = ItemType.FLOAT
    elif kind in "iu" and bits in _INT_BITS:
        item_type = ItemType.INT if kind == "i" else ItemType.UINT
    elif kind == "b":
        item_type, bits = ItemType.BOOL, 1
    else:
        raise TensorFileError(
            f"cannot store dtype {dtype} in an NNEF tensor file; convert the array to float16/32/64, "
            "int8..int64, uint8..uint64 or bool first", name, "E0703")
    if quantized:
        if item_type not in (ItemType.INT, ItemType.UINT):
            raise TensorFileError(
                f"a quantized tensor must hold integers, not {dtype}; quantize the values to an "
                "integer dtype first or write it unquantized", name, "E0703")
        item_type = ItemType.QINT if item_type is ItemType.INT else ItemType.QUINT
    return item_type, bits


def encode_tensor(array: npt.ArrayLike, *, quantized: bool = False, name: str = "<tensor>") -> bytes:
    """The bytes of a version 1.0 tensor file holding `array` (any array-like).

    With `quantized`, integer items are tagged as quantized (item type qint/quint)."""
    arr = np.asarray(array)
    item_type, bits = _item_type_of(arr.dtype, quantized, name)
    if arr.ndim > MAX_RANK:
        raise TensorFileError(
            f"cannot store a rank-{arr.ndim} tensor: NNEF tensor files hold at most {MAX_RANK} "
            "dimensions; reshape it first", name, "E0703")
    if any(e > _U32_MAX for e in arr.shape):
        raise TensorFileError(
            f"cannot store shape {_shape_text(arr.shape)}: extents must fit in 32 bits", name, "E0703")
    data_length = _data_bytes(arr.size, bits)
    if data_length > _U32_MAX:
        raise TensorFileError(
            f"cannot store a tensor of {data_length} bytes: the data length of an NNEF tensor file "
            "must fit in 32 bits (under 4 GiB); split the tensor", name, "E0703")
    extents = list(arr.shape) + [0] * (MAX_RANK - arr.ndim)
    header = _HEADER.pack(MAGIC, *VERSION, data_length, arr.ndim, *extents, bits, item_type, *([0] * 19))
    if item_type is ItemType.BOOL:
        payload = np.packbits(arr.reshape(-1), bitorder="big").tobytes()
    else:
        payload = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    return header + payload


def write_tensor(path_or_file: _PathOrFile, array: npt.ArrayLike, *, quantized: bool = False) -> None:
    """Write `array` as a tensor file to a path (atomically) or to a binary file object.

    A path is replaced only once the whole file is written and synced (temporary file in the same
    folder, then rename), so an error never leaves a half-written or missing target behind. Arrays
    the format cannot hold raise `TensorFileError` (E0703) before anything is written; failures of
    the file system itself raise `OSError`.
    """
    if hasattr(path_or_file, "write"):
        name = str(getattr(path_or_file, "name", "<stream>"))
        path_or_file.write(encode_tensor(array, quantized=quantized, name=name))  # type: ignore[union-attr]
        return
    name = os.fspath(path_or_file)  # type: ignore[arg-type]
    write_atomic(name, encode_tensor(array, quantized=quantized, name=name))


# --------------------------------------------------------------------------------------------
# Checking against declarations
# --------------------------------------------------------------------------------------------

#: SkriptND tensor dtypes and the numpy kinds that may hold them.
_SKND_KINDS = {"real": "f", "int": "iu", "bool": "b"}


def expected(array: np.ndarray, dtype: str, shape: Sequence[int | None],
             path: str | os.PathLike[str] = "<tensor>") -> np.ndarray:
    """Check a loaded array against a SkriptND dtype (`real`, `int`, `bool`) and shape.

    A `None` extent matches anything. Returns `array`; raises `TensorFileError` (E0703) naming
    both the found and the expected type and shape when they differ.
    """
    _expect(array.dtype, tuple(array.shape), dtype, shape, path)
    return array


def expected_header(header: TensorHeader, dtype: str, shape: Sequence[int | None],
                    path: str | os.PathLike[str] = "<tensor>") -> None:
    """`expected` from the header alone, before the data is read (a `check` for `read_tensor`)."""
    _expect(header.dtype, header.shape, dtype, shape, path)


def _expect(found_dtype: np.dtype[Any], found_shape: tuple[int, ...], dtype: str, shape: Sequence[int | None],
            path: str | os.PathLike[str]) -> None:
    if dtype not in _SKND_KINDS:
        raise ValueError(f"unknown SkriptND dtype {dtype!r}; expected one of {', '.join(_SKND_KINDS)}")
    want = tuple(shape)
    dtype_ok = found_dtype.kind in _SKND_KINDS[dtype]
    shape_ok = len(want) == len(found_shape) and all(w is None or w == e for w, e in zip(want, found_shape,
                                                                                           strict=True))
    if dtype_ok and shape_ok:
        return
    found = f"{found_dtype} tensor of shape {_shape_text(found_shape)}"
    wanted = f"{dtype} tensor of shape {_shape_text(want)}"
    fixes = []
    if not dtype_ok:
        fixes.append(f"store {dtype} data (" + {"real": "float16/32/64", "int": "an integer dtype",
                                                  "bool": "bool"}[dtype] + ")")
    if not shape_ok:
        fixes.append(f"store shape {_shape_text(want)}")
    raise TensorFileError(
        f"tensor file holds a {found}, but a {wanted} was expected; re-export the tensor to "
        + " and ".join(fixes) + ", or change the declaration", path, "E0703")
