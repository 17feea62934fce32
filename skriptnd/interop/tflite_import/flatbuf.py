"""Bounds-checked reading of a FlatBuffer (the binary format of .tflite files), for untrusted files.

The `flatbuffers` package's Python runtime trusts its input: an offset past the end raises whatever
`struct` raises, and a vector length is believed as it is. This reader is the few primitives a schema
needs (a table's fields through its vtable, scalars, strings, vectors of scalars or tables), each read
checked against the file: an offset or a length that leads outside it is `ImportProblem` E0861 naming
what was being read, never an exception from deep inside. Reading is lazy (nothing is copied until a
field is asked for) and bounded: every vector read is charged to a budget proportional to the file's size,
so a crafted file whose tables all share one huge vector cannot make the importer work quadratically.

Layout (flatbuffers.dev/internals): the file starts with a uoffset to the root table; a table starts with
an soffset back to its vtable; a vtable is [its size, the table's size, one uint16 offset per field
(0: absent, the schema's default)]; a field holding a table, string or vector holds a uoffset from itself;
a vector or string is a uint32 length then its items (a string also has a NUL after them).
"""

from __future__ import annotations

import struct

import numpy as np

from skriptnd.interop.tflite_import.errors import ImportProblem

#: How many vector items may be read in all, per byte of the file (plus a constant for tiny files).
BUDGET_PER_BYTE = 16
BUDGET_BASE = 1 << 20


class Buffer:
    """The bytes of one file and the checks every read goes through."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.budget = BUDGET_BASE + BUDGET_PER_BYTE * len(data)

    def check(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise ImportProblem("E0861", f"corrupt TFLite file: {what} at byte {pos} (+{length}) lies outside the "
                                f"file ({self.size} bytes)", hint="the file is truncated or not a TFLite model")

    def unpack(self, fmt: str, pos: int, what: str) -> int | float:
        n = struct.calcsize(fmt)
        self.check(pos, n, what)
        return struct.unpack_from("<" + fmt, self.data, pos)[0]

    def charge(self, items: int, what: str) -> None:
        self.budget -= items
        if self.budget < 0:
            raise ImportProblem("E0861", f"corrupt TFLite file: {what} makes the file's tables larger than a file of "
                                f"{self.size} bytes can hold (shared vectors read over and over)")

    def root(self) -> Table:
        return self.table_at(0, "the root table")

    def table_at(self, ref: int, what: str) -> Table:
        """The table a uoffset at `ref` points to."""
        pos = ref + int(self.unpack("I", ref, what))
        vtable = pos - int(self.unpack("i", pos, what))
        vt_size = int(self.unpack("H", vtable, f"the vtable of {what}"))
        if vt_size < 4 or vt_size % 2:
            raise ImportProblem("E0861", f"corrupt TFLite file: the vtable of {what} at byte {vtable} has size {vt_size}")
        self.check(vtable, vt_size, f"the vtable of {what}")
        return Table(self, pos, vtable, vt_size, what)


class Table:
    """One table: fields by slot (0, 1, ... in the schema's order, a union taking two slots)."""

    def __init__(self, buf: Buffer, pos: int, vtable: int, vt_size: int, what: str) -> None:
        self.buf, self.pos, self.vtable, self.vt_size, self.what = buf, pos, vtable, vt_size, what

    def _offset(self, slot: int) -> int:
        entry = 4 + 2 * slot
        if entry + 2 > self.vt_size:
            return 0
        return int(self.buf.unpack("H", self.vtable + entry, f"the vtable of {self.what}"))

    def has(self, slot: int) -> bool:
        return self._offset(slot) != 0

    def scalar(self, slot: int, fmt: str, default: int | float | bool = 0) -> int | float | bool:
        """A scalar field: fmt is a struct code (b B h H i I q Q f d ?)."""
        o = self._offset(slot)
        if not o:
            return default
        value = self.buf.unpack(fmt, self.pos + o, f"field {slot} of {self.what}")
        return bool(value) if fmt == "?" else value

    def int(self, slot: int, default: int = 0, fmt: str = "i") -> int:
        return int(self.scalar(slot, fmt, default))

    def bool(self, slot: int, default: bool = False) -> bool:
        return bool(self.scalar(slot, "?", default))

    def float(self, slot: int, default: float = 0.0) -> float:
        return float(self.scalar(slot, "f", default))

    def table(self, slot: int, what: str) -> Table | None:
        o = self._offset(slot)
        return self.buf.table_at(self.pos + o, what) if o else None

    def _vector(self, slot: int, item_size: int, what: str) -> tuple[int, int] | None:
        """(start of the items, count) of a vector field, checked to lie inside the file."""
        o = self._offset(slot)
        if not o:
            return None
        ref = self.pos + o
        start = ref + int(self.buf.unpack("I", ref, what))
        count = int(self.buf.unpack("I", start, what))
        self.buf.check(start + 4, count * item_size, f"{what} ({count} items)")
        self.buf.charge(count, what)
        return start + 4, count

    def string(self, slot: int, what: str) -> str | None:
        found = self._vector(slot, 1, what)
        if found is None:
            return None
        start, count = found
        return self.buf.data[start:start + count].decode("utf-8", errors="replace")

    def bytes(self, slot: int, what: str) -> tuple[int, int] | None:
        """(start, length) of a [ubyte] field, without copying it."""
        return self._vector(slot, 1, what)

    def array(self, slot: int, dtype: str, what: str) -> np.ndarray | None:
        """A vector of scalars as a (read-only) numpy array; dtype a little-endian numpy code ('<i4')."""
        item = np.dtype(dtype)
        found = self._vector(slot, item.itemsize, what)
        if found is None:
            return None
        start, count = found
        return np.frombuffer(self.buf.data, dtype=item, count=count, offset=start)

    def ints(self, slot: int, what: str) -> list[int]:
        values = self.array(slot, "<i4", what)
        return [] if values is None else [int(v) for v in values]

    def tables(self, slot: int, what: str) -> list[Table]:
        found = self._vector(slot, 4, what)
        if found is None:
            return []
        start, count = found
        return [self.buf.table_at(start + 4 * i, f"{what}[{i}]") for i in range(count)]
