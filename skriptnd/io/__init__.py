"""Reading and writing tensor data files (NNEF tensor binary files, `.dat`)."""

from __future__ import annotations

from .tensor_file import (
    HEADER_SIZE,
    MAX_RANK,
    ItemType,
    TensorFileError,
    TensorHeader,
    decode_header,
    encode_tensor,
    expected,
    read_tensor,
    read_tensor_bytes,
    read_tensor_with_header,
    write_tensor,
)

__all__ = [
    "HEADER_SIZE",
    "MAX_RANK",
    "ItemType",
    "TensorFileError",
    "TensorHeader",
    "decode_header",
    "encode_tensor",
    "expected",
    "read_tensor",
    "read_tensor_bytes",
    "read_tensor_with_header",
    "write_tensor",
]
