"""Tests for skriptnd.io.tensor_file: NNEF tensor binary files (.dat).

Oracle tests compare against the reference implementation, the `nnef` package (a dev dependency);
they are skipped only on a platform without an `nnef` wheel.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skriptnd.diagnostics import CODES, Diagnostic
from skriptnd.io import (
    HEADER_SIZE,
    ItemType,
    TensorFileError,
    decode_header,
    encode_tensor,
    expected,
    read_tensor,
    read_tensor_bytes,
    read_tensor_with_header,
    write_tensor,
)

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]
INT_DTYPES = [d for d in DTYPES if d.startswith(("int", "uint"))]

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def arrays(dtype: str, max_dims: int = 8) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype`, ranks 0..max_dims, extents 0..3 (NaNs, infinities and -0.0 included)."""
    shapes = hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=3)
    return hnp.arrays(np.dtype(dtype), shapes)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical: same dtype, shape and bytes (so NaN payloads and -0.0 count too)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def header(*, magic: bytes = b"\x4e\xef", version: tuple[int, int] = (1, 0), data_length: int,
           shape: tuple[int, ...], bits: int, item_type: int, reserved0: int = 0) -> bytes:
    """A header built field by field (independently of the module's own struct)."""
    out = magic + bytes(version)
    out += data_length.to_bytes(4, "little") + len(shape).to_bytes(4, "little")
    for i in range(8):
        out += (shape[i] if i < len(shape) else 0).to_bytes(4, "little")
    out += bits.to_bytes(4, "little") + item_type.to_bytes(4, "little")
    out += reserved0.to_bytes(4, "little") + bytes(72)
    assert len(out) == 128
    return out


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(data=st.data())
def test_round_trip_bytes(dtype: str, data: st.DataObject) -> None:
    a = data.draw(arrays(dtype))
    blob = encode_tensor(a)
    assert len(blob) == HEADER_SIZE + ((a.size + 7) // 8 if dtype == "bool" else a.nbytes)
    assert same(read_tensor_bytes(blob, "x.dat"), a)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(data=st.data())
def test_round_trip_file(dtype: str, data: st.DataObject) -> None:
    a = data.draw(arrays(dtype))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.dat"
        write_tensor(path, a)
        back = read_tensor(path)
        assert same(back, a)
        assert back.flags.writeable and back.dtype.isnative
        assert os.listdir(tmp) == ["t.dat"]


@pytest.mark.parametrize("rank", range(9))
def test_every_rank(rank: int) -> None:
    shape = tuple(range(2, 2 + rank))
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    assert same(read_tensor_bytes(encode_tensor(a)), a)


def test_non_contiguous_and_big_endian_inputs() -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert same(read_tensor_bytes(encode_tensor(a.T)), np.ascontiguousarray(a.T))
    assert same(read_tensor_bytes(encode_tensor(a[:, ::2])), np.ascontiguousarray(a[:, ::2]))
    big = a.astype(">f4")
    back = read_tensor_bytes(encode_tensor(big))
    assert back.dtype == np.float32 and np.array_equal(back, a)
    assert encode_tensor(big) == encode_tensor(a)


def test_array_likes() -> None:
    assert same(read_tensor_bytes(encode_tensor([[1.0, 2.0]])), np.array([[1.0, 2.0]]))
    assert same(read_tensor_bytes(encode_tensor(True)), np.array(True))


def test_streams() -> None:
    a, b = np.arange(5, dtype=np.uint16), np.array([True, False, True])
    buf = io.BytesIO()
    write_tensor(buf, a)
    write_tensor(buf, b, quantized=False)
    buf.seek(0)
    # A stream may hold several tensors back to back; each read consumes exactly one.
    assert same(read_tensor(buf), a)
    assert same(read_tensor(buf), b)
    assert buf.read() == b""


def test_quantized_flag() -> None:
    a = np.array([1, 2, 250], dtype=np.uint8)
    blob = encode_tensor(a, quantized=True)
    assert int.from_bytes(blob[48:52], "little") == ItemType.QUINT
    back, hdr = read_tensor_with_header(io.BytesIO(blob))
    assert same(back, a) and hdr.quantized and hdr.item_type is ItemType.QUINT
    blob = encode_tensor(a.astype(np.int8), quantized=True)
    assert int.from_bytes(blob[48:52], "little") == ItemType.QINT
    assert not decode_header(encode_tensor(a), "x").quantized


# --------------------------------------------------------------------------------------------
# Byte layout, by hand
# --------------------------------------------------------------------------------------------


def test_header_bytes_float32() -> None:
    a = np.array([[1.5, -2.0, 3.0]], dtype=np.float32)
    want = bytes([
        0x4E, 0xEF,                 # magic
        0x01, 0x00,                 # version 1.0 (major, minor)
        0x0C, 0x00, 0x00, 0x00,     # data length: 3 items x 4 bytes = 12, uint32 LE
        0x02, 0x00, 0x00, 0x00,     # rank 2
        0x01, 0x00, 0x00, 0x00,     # extent 0: 1
        0x03, 0x00, 0x00, 0x00,     # extent 1: 3
        *([0x00] * 24),             # extents 2..7: zero
        0x20, 0x00, 0x00, 0x00,     # bits per item: 32
        0x00, 0x00, 0x00, 0x00,     # item type 0: float
        *([0x00] * 76),             # 19 reserved (quantization) words: zero
        0x00, 0x00, 0xC0, 0x3F,     # 1.5f little-endian
        0x00, 0x00, 0x00, 0xC0,     # -2.0f
        0x00, 0x00, 0x40, 0x40,     # 3.0f
    ])
    assert len(want) == 128 + 12
    assert encode_tensor(a) == want
    assert same(read_tensor_bytes(want), a)


def test_header_bytes_bool_packing() -> None:
    a = np.array([1, 0, 1, 1, 0, 0, 0, 0, 1, 1], dtype=bool)
    want = bytes([
        0x4E, 0xEF, 0x01, 0x00,     # magic, version 1.0
        0x02, 0x00, 0x00, 0x00,     # data length: ceil(10 bits / 8) = 2 bytes
        0x01, 0x00, 0x00, 0x00,     # rank 1
        0x0A, 0x00, 0x00, 0x00,     # extent 0: 10
        *([0x00] * 28),             # extents 1..7
        0x01, 0x00, 0x00, 0x00,     # bits per item: 1
        0x05, 0x00, 0x00, 0x00,     # item type 5: bool
        *([0x00] * 76),             # reserved
        0b1011_0000,                # items 0..7, first item in the most significant bit
        0b1100_0000,                # items 8, 9, then zero padding bits
    ])
    assert encode_tensor(a) == want
    assert same(read_tensor_bytes(want), a)


def test_scalar_and_empty_headers() -> None:
    blob = encode_tensor(np.int16(7))
    assert blob[8:12] == bytes(4) and blob[12:44] == bytes(32)       # rank 0, no extents
    assert blob[4:8] == (2).to_bytes(4, "little") and blob[128:] == b"\x07\x00"
    assert blob[44:52] == struct.pack("<II", 16, ItemType.INT)
    blob = encode_tensor(np.zeros((2, 0, 3)))
    assert blob[4:8] == bytes(4) and len(blob) == 128                # zero items, zero data bytes
    assert same(read_tensor_bytes(blob), np.zeros((2, 0, 3)))


def test_item_type_codes() -> None:
    bits = {d: int.from_bytes(encode_tensor(np.zeros(1, dtype=d))[44:48], "little") for d in DTYPES}
    types = {d: int.from_bytes(encode_tensor(np.zeros(1, dtype=d))[48:52], "little") for d in DTYPES}
    assert types == {"float16": 0, "float32": 0, "float64": 0, "int8": 4, "int16": 4, "int32": 4, "int64": 4,
                     "uint8": 1, "uint16": 1, "uint32": 1, "uint64": 1, "bool": 5}
    assert bits == {"float16": 16, "float32": 32, "float64": 64, "int8": 8, "int16": 16, "int32": 32,
                    "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "bool": 1}


def test_legacy_signed_flag_and_byte_bools() -> None:
    # First NNEF 1.0 revision: signed ints are item type 1 with a non-zero first reserved word.
    blob = header(data_length=2, shape=(2,), bits=8, item_type=1, reserved0=1) + bytes([0xFF, 0x02])
    assert same(read_tensor_bytes(blob), np.array([-1, 2], dtype=np.int8))
    # Bools stored one per byte (8 bits per item); any non-zero byte is true.
    blob = header(data_length=3, shape=(3,), bits=8, item_type=5) + bytes([0, 1, 7])
    assert same(read_tensor_bytes(blob), np.array([False, True, True]))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

GOOD = encode_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))


def _error(blob: bytes) -> TensorFileError:
    with pytest.raises(TensorFileError) as info:
        read_tensor_bytes(blob, "w.dat")
    assert info.value.path == "w.dat"
    return info.value


def test_codes_registered() -> None:
    assert CODES["E0701"] == "tensor file not found"
    assert CODES["E0702"] == "corrupt tensor file"
    assert CODES["E0703"] == "tensor file type or shape mismatch"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TensorFileError) as info:
        read_tensor(tmp_path / "nope.dat")
    err = info.value
    assert err.code == "E0701" and err.path == str(tmp_path / "nope.dat")
    assert "tensor file not found; check the path" in err.message
    assert str(err).startswith(str(tmp_path / "nope.dat") + ": ")
    with pytest.raises(TensorFileError, match="is a folder, not a tensor file") as info:
        read_tensor(tmp_path)
    assert info.value.code == "E0701"


@pytest.mark.parametrize(("blob", "message"), [
    (b"", "truncated tensor file: it is empty, but an NNEF tensor file starts with a 128-byte header"),
    (GOOD[:50], "truncated tensor file: it is only 50 bytes long"),
    (b"PK\x03\x04" + GOOD[4:], "not an NNEF tensor file: it starts with bytes 0x50 0x4B, not the magic number 0x4E 0xEF"),
    (GOOD[:2] + b"\x02\x00" + GOOD[4:], "unsupported tensor file version 2.0; only version 1.0 is supported"),
    (GOOD[:2] + b"\x01\x01" + GOOD[4:], "unsupported tensor file version 1.1"),
    (GOOD[:4] + (20).to_bytes(4, "little") + GOOD[8:],
     "data length is 20 bytes, but extents [2, 3] x 32 bits per item need 24 bytes"),
    (GOOD[:-1], "truncated tensor file: the header announces 24 data bytes for a [2, 3] tensor, but only 23 follow"),
    (GOOD + b"\x00\x00", "2 unexpected bytes after the 24 data bytes"),
    (GOOD[:48] + (9).to_bytes(4, "little") + GOOD[52:], "unknown item type code 9; known codes are 0 (float), 1 (uint)"),
    (GOOD[:48] + (0x10000).to_bytes(4, "little") + GOOD[52:], "unsupported vendor-defined item type 0x00010000"),
    (GOOD[:44] + (8).to_bytes(4, "little") + GOOD[48:], "unsupported bits per item 8 for item type float; supported: 16, 32, 64"),
    (GOOD[:8] + (9).to_bytes(4, "little") + GOOD[12:], "rank 9 exceeds the maximum rank 8"),
])
def test_corrupt_files(blob: bytes, message: str) -> None:
    err = _error(blob)
    assert err.code == "E0702"
    assert message in err.message
    # Every message says how to fix it, too.
    assert any(w in err.message for w in ("re-export", "re-copy", "point to", "reshape"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), max_size=4),
       st.integers(0, len(GOOD) + 4))
def test_damaged_files_raise_only_tensor_file_errors(edits: list[tuple[int, int]], cut: int) -> None:
    blob = bytearray(GOOD + b"\x00\x00\x00\x00")[:cut]
    for at, value in edits:
        if at < len(blob):
            blob[at] = value
    try:
        a = read_tensor_bytes(bytes(blob))
    except TensorFileError as err:
        assert err.code == "E0702"
    else:
        assert isinstance(a, np.ndarray)


def test_error_becomes_diagnostic() -> None:
    diag = _error(b"").to_diagnostic()
    assert isinstance(diag, Diagnostic) and diag.code == "E0702" and diag.span.file == "w.dat"
    assert diag.title == "corrupt tensor file"


def test_stream_truncated() -> None:
    with pytest.raises(TensorFileError, match="only 3 follow") as info:
        read_tensor(io.BytesIO(GOOD[:131]))
    assert info.value.path == "<stream>"


@pytest.mark.parametrize(("array", "kwargs", "message"), [
    (np.zeros((1,) * 9), {}, "cannot store a rank-9 tensor: NNEF tensor files hold at most 8 dimensions"),
    (np.zeros(2, dtype=complex), {}, "cannot store dtype complex128 in an NNEF tensor file"),
    (np.array(["a"]), {}, "cannot store dtype <U1"),
    (np.zeros(2, dtype=np.float32), {"quantized": True}, "a quantized tensor must hold integers, not float32"),
])
def test_unwritable_arrays(tmp_path: Path, array: np.ndarray, kwargs: dict, message: str) -> None:
    target = tmp_path / "t.dat"
    with pytest.raises(TensorFileError) as info:
        write_tensor(target, array, **kwargs)
    assert info.value.code == "E0703" and message in info.value.message
    assert info.value.path == str(target)
    assert list(tmp_path.iterdir()) == []


def test_expected() -> None:
    a = np.zeros((2, 3), dtype=np.float32)
    assert expected(a, "real", (2, 3)) is a
    assert expected(a, "real", (None, 3)) is a
    assert expected(np.zeros(4, dtype=np.uint8), "int", (4,)) is not None
    assert expected(np.array(True), "bool", ()) is not None
    with pytest.raises(TensorFileError) as info:
        expected(a, "int", (3, 2), "w.dat")
    err = info.value
    assert err.code == "E0703" and err.path == "w.dat"
    assert err.message == ("tensor file holds a float32 tensor of shape [2, 3], but a int tensor of shape [3, 2] "
                           "was expected; re-export the tensor to store int data (an integer dtype) and store "
                           "shape [3, 2], or change the declaration")
    with pytest.raises(TensorFileError, match=r"holds a int64 tensor of shape \[2\], but a real tensor of shape \[2\]"):
        expected(np.zeros(2, dtype=np.int64), "real", (2,))
    with pytest.raises(TensorFileError, match=r"shape \[2, 3\], but a real tensor of shape \[2, 3, 1\]"):
        expected(a, "real", (2, 3, 1))
    with pytest.raises(ValueError, match="unknown SkriptND dtype"):
        expected(a, "float", (2, 3))


# --------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------

OLD = b"previous contents"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_folder(tmp_path: Path) -> None:
    target = tmp_path / "t.dat"
    target.write_bytes(OLD)
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(PermissionError):
            write_tensor(target, np.zeros(3))
    finally:
        tmp_path.chmod(0o755)
    assert target.read_bytes() == OLD
    assert list(tmp_path.iterdir()) == [target]


def test_cannot_create_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a read-only folder does to a non-root user (root bypasses the permission bits).
    target = tmp_path / "t.dat"
    target.write_bytes(OLD)

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(PermissionError):
        write_tensor(target, np.zeros(3))
    monkeypatch.undo()
    assert target.read_bytes() == OLD
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("fail_in", ["fsync", "replace"])
def test_failure_mid_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_in: str) -> None:
    target = tmp_path / "t.dat"
    target.write_bytes(OLD)

    def boom(*args: object) -> None:
        # The temporary file exists and holds the new data when this fails.
        assert len(list(tmp_path.iterdir())) == 2
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fail_in, boom)
    with pytest.raises(OSError, match="No space left"):
        write_tensor(target, np.arange(1000, dtype=np.float64))
    monkeypatch.undo()
    assert target.read_bytes() == OLD
    assert list(tmp_path.iterdir()) == [target]


def test_failure_while_writing_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.dat"
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_tensor(target, np.zeros(3))
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# Oracle: the reference implementation (`nnef` package)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nnef():
    return pytest.importorskip("nnef")


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(data=st.data())
def test_oracle_nnef_writes_we_read(nnef, dtype: str, data: st.DataObject) -> None:
    a = data.draw(arrays(dtype))
    quantized = dtype in INT_DTYPES and data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.dat"
        with open(path, "wb") as fh:   # nnef needs a real file object
            nnef.write_tensor(fh, a, quantized=quantized)
        ours, hdr = read_tensor_with_header(path)
        assert same(ours, a)
        assert hdr.quantized == quantized
        assert path.read_bytes() == encode_tensor(a, quantized=quantized)


@pytest.mark.parametrize("dtype", DTYPES)
@SETTINGS
@given(data=st.data())
def test_oracle_we_write_nnef_reads(nnef, dtype: str, data: st.DataObject) -> None:
    a = data.draw(arrays(dtype))
    quantized = dtype in INT_DTYPES and data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.dat"
        write_tensor(path, a, quantized=quantized)
        with open(path, "rb") as fh:
            theirs, their_quantized = nnef.read_tensor(fh, return_quantization=True)
        assert same(theirs, a)
        assert their_quantized == quantized


def test_oracle_legacy_signed_flag(nnef, tmp_path: Path) -> None:
    path = tmp_path / "legacy.dat"
    path.write_bytes(header(data_length=4, shape=(2,), bits=16, item_type=1, reserved0=1) + b"\xfe\xff\x03\x00")
    with open(path, "rb") as fh:
        theirs = nnef.read_tensor(fh)
    assert same(read_tensor(path), theirs)
    assert same(theirs, np.array([-2, 3], dtype=np.int16))


@pytest.mark.parametrize("blob", [b"PK\x03\x04" + GOOD[4:], GOOD[:2] + b"\x02\x00" + GOOD[4:], GOOD[:-1],
                                  GOOD + b"\x00", GOOD[:8] + (9).to_bytes(4, "little") + GOOD[12:]])
def test_oracle_agrees_on_rejection(nnef, tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "bad.dat"
    path.write_bytes(blob)
    with open(path, "rb") as fh, pytest.raises(ValueError):
        nnef.read_tensor(fh)
    with pytest.raises(TensorFileError):
        read_tensor(path)
