"""Read a .tflite file (TFLite / LiteRT's FlatBuffer schema, tensorflow/lite/schema/schema.fbs) into plain data.

Only the tables the importer needs are read, through `flatbuf`'s bounds-checked accessors: the model
(operator codes, subgraphs, buffers, signature defs), each subgraph's tensors (shape, type, buffer,
quantization) and operators (inputs, outputs, code and version, their builtin options left as a raw
`Table` for the converter that knows its layout). The slots below are the fields' order in schema.fbs.

What real files hold that a naive reader misses: a builtin code >= 127 lives in `builtin_code` while
older files only set the byte `deprecated_builtin_code` (the code is the larger of the two, as TFLite's
own `GetBuiltinCode`); a model over 2 GB (and the quantizer's output for large models) keeps constant data
after the FlatBuffer, a buffer then giving `offset`/`size` from the start of the file instead of `data`;
operators like `STABLEHLO_REDUCE_WINDOW`, `WHILE` or `IF` name other subgraphs as their bodies; signature
defs give the model's inputs and outputs their user-facing names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from skriptnd.interop.tflite_import.builtins import builtin_name
from skriptnd.interop.tflite_import.errors import ImportProblem
from skriptnd.interop.tflite_import.flatbuf import Buffer, Table

IDENTIFIER = b"TFL3"

#: TensorType -> (name, numpy little-endian dtype or None where numpy has none we use)
TENSOR_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("FLOAT32", "<f4"), 1: ("FLOAT16", "<f2"), 2: ("INT32", "<i4"), 3: ("UINT8", "u1"), 4: ("INT64", "<i8"),
    5: ("STRING", None), 6: ("BOOL", "?"), 7: ("INT16", "<i2"), 8: ("COMPLEX64", None), 9: ("INT8", "i1"),
    10: ("FLOAT64", "<f8"), 11: ("COMPLEX128", None), 12: ("UINT64", "<u8"), 13: ("RESOURCE", None),
    14: ("VARIANT", None), 15: ("UINT32", "<u4"), 16: ("UINT16", "<u2"), 17: ("INT4", None),
    18: ("BFLOAT16", None), 19: ("INT2", None),
}

#: A tensor's constant data larger than this many items is refused (a file cannot hold more than it is long,
#: but an offset/size buffer is checked against the file, so this only bounds what a shape may promise).
MAX_ITEMS = 1 << 31


def type_name(code: int) -> str:
    return TENSOR_TYPES.get(code, (f"type {code}", None))[0]


@dataclass
class Quantization:
    scale: np.ndarray  # float32, one per tensor or per channel
    zero_point: np.ndarray  # int64, as many as scale
    axis: int  # quantized_dimension (per-channel)


@dataclass
class Tensor:
    index: int
    name: str
    type: int  # TensorType
    shape: tuple[int, ...]
    signature: tuple[int, ...] | None  # shape_signature: -1 where the dimension is dynamic
    buffer: int
    quantization: Quantization | None
    is_variable: bool
    external: int = 0  # external_buffer: data in another file (not read)

    @property
    def type_name(self) -> str:
        return type_name(self.type)


@dataclass
class OperatorCode:
    builtin: int  # the BuiltinOperator code (CUSTOM = 32)
    custom: str | None
    version: int

    @property
    def name(self) -> str:
        return self.custom if self.builtin == 32 and self.custom else builtin_name(self.builtin)


@dataclass
class Operator:
    index: int
    code: OperatorCode
    inputs: list[int]  # tensor indices; -1 is an omitted optional input
    outputs: list[int]
    options_type: int  # the BuiltinOptions union's type (0: none)
    options: Table | None  # the builtin options table, read by the converter that knows its layout
    options2: Table | None  # builtin_options_2 (the StableHLO operators' options)

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def version(self) -> int:
        return self.code.version


@dataclass
class Subgraph:
    index: int
    name: str
    tensors: list[Tensor]
    inputs: list[int]
    outputs: list[int]
    operators: list[Operator]


@dataclass
class Signature:
    key: str
    subgraph: int
    inputs: dict[str, int]  # user-facing name -> tensor index in the subgraph
    outputs: dict[str, int]


@dataclass
class Model:
    version: int
    description: str
    subgraphs: list[Subgraph]
    signatures: list[Signature]
    buffers: list[tuple[int, int]]  # (start, length) in the file of each buffer's data; (0, 0) when empty
    file: Buffer = field(repr=False)

    def data(self, tensor: Tensor) -> np.ndarray | None:
        """The tensor's constant value (a copy, shaped), None when its buffer is empty (not a constant).

        The buffer's length must be what the tensor's type and shape need: a mismatch is a corrupt file."""
        if tensor.external:
            raise ImportProblem("E0865", f"tensor '{tensor.name}' keeps its data in an external buffer (another "
                                "file), which is not read", hint="convert the model with its weights inside the file")
        if not 0 < tensor.buffer < len(self.buffers):
            if tensor.buffer >= len(self.buffers):
                raise ImportProblem("E0861", f"corrupt TFLite file: tensor '{tensor.name}' names buffer {tensor.buffer} "
                                    f"of {len(self.buffers)}")
            return None
        start, length = self.buffers[tensor.buffer]
        if length == 0:
            return None
        dtype = TENSOR_TYPES.get(tensor.type, ("", None))[1]
        if dtype is None:
            raise ImportProblem("E0864", f"constant tensor '{tensor.name}' has type {tensor.type_name}, which "
                                "SkriptND does not support")
        count = math.prod(tensor.shape)
        item = np.dtype(dtype).itemsize
        if count > MAX_ITEMS or count * item != length:
            raise ImportProblem("E0861", f"corrupt TFLite file: tensor '{tensor.name}' of type {tensor.type_name} and "
                                f"shape {list(tensor.shape)} needs {count * item} bytes, its buffer holds {length}")
        return np.frombuffer(self.file.data, dtype=dtype, count=count, offset=start).reshape(tensor.shape).copy()


def read(data: bytes) -> Model:
    """Parse a whole .tflite file (bytes). Raises ImportProblem (E0860 not a TFLite file, E0861 corrupt)."""
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ImportProblem("E0860", "not a TFLite model: the file does not carry the 'TFL3' identifier at byte 4")
    buf = Buffer(data)
    root = buf.root()
    codes = [_opcode(t) for t in root.tables(1, "the operator codes")]
    buffers = [_buffer(buf, t, i) for i, t in enumerate(root.tables(4, "the buffers"))]
    subgraphs = [_subgraph(t, i, codes) for i, t in enumerate(root.tables(2, "the subgraphs"))]
    if not subgraphs:
        raise ImportProblem("E0861", "corrupt TFLite file: it has no subgraph")
    signatures = [_signature(t, i, subgraphs) for i, t in enumerate(root.tables(7, "the signature defs"))]
    return Model(root.int(0, 0, "I"), root.string(3, "the description") or "", subgraphs, signatures, buffers, buf)


def _opcode(t: Table) -> OperatorCode:
    deprecated = t.int(0, 0, "b")
    builtin = t.int(3, 0)
    return OperatorCode(max(builtin, deprecated), t.string(1, "an operator's custom code"), t.int(2, 1))


def _buffer(buf: Buffer, t: Table, index: int) -> tuple[int, int]:
    found = t.bytes(0, f"buffer {index}'s data")
    if found is not None and found[1]:
        return found
    offset, size = t.int(1, 0, "Q"), t.int(2, 0, "Q")
    if offset > 1:  # data after the FlatBuffer (1 is the converter's placeholder for "none yet")
        buf.check(offset, size, f"buffer {index}'s data (offset/size)")
        return offset, size
    return 0, 0


def _quantization(t: Table | None, name: str) -> Quantization | None:
    if t is None:
        return None
    scale = t.array(2, "<f4", f"tensor '{name}''s scales")
    if scale is None or not len(scale):
        return None  # min/max only (calibration data): not quantized
    zero = t.array(3, "<i8", f"tensor '{name}''s zero points")
    zero = np.zeros(len(scale), np.int64) if zero is None or not len(zero) else zero.astype(np.int64)
    if len(zero) != len(scale):
        raise ImportProblem("E0861", f"corrupt TFLite file: tensor '{name}' has {len(scale)} scales and "
                            f"{len(zero)} zero points")
    return Quantization(scale.astype(np.float32), zero, t.int(6, 0))


def _tensor(t: Table, index: int, sub: int) -> Tensor:
    name = t.string(3, f"tensor {index}'s name") or f"tensor_{index}"
    shape = tuple(t.ints(0, f"tensor '{name}''s shape"))
    if any(d < 0 for d in shape):
        raise ImportProblem("E0861", f"corrupt TFLite file: tensor '{name}' has shape {list(shape)}")
    signature = tuple(t.ints(7, f"tensor '{name}''s shape signature")) if t.has(7) else None
    return Tensor(index, name, t.int(1, 0, "b"), shape, signature or None, t.int(2, 0, "I"),
                  _quantization(t.table(4, f"tensor '{name}''s quantization"), name), t.bool(5), t.int(10, 0, "I"))


def _indices(values: list[int], count: int, what: str, optional: bool = False) -> list[int]:
    for v in values:
        if not (0 <= v < count or (optional and v == -1)):
            raise ImportProblem("E0861", f"corrupt TFLite file: {what} names tensor {v} of {count}")
    return values


def _subgraph(t: Table, index: int, codes: list[OperatorCode]) -> Subgraph:
    name = t.string(4, f"subgraph {index}'s name") or f"subgraph_{index}"
    tensors = [_tensor(x, i, index) for i, x in enumerate(t.tables(0, f"subgraph {index}'s tensors"))]
    n = len(tensors)
    inputs = _indices(t.ints(1, f"subgraph {index}'s inputs"), n, f"subgraph {index}'s input list")
    outputs = _indices(t.ints(2, f"subgraph {index}'s outputs"), n, f"subgraph {index}'s output list")
    operators = []
    for i, op in enumerate(t.tables(3, f"subgraph {index}'s operators")):
        code = op.int(0, 0, "I")
        if code >= len(codes):
            raise ImportProblem("E0861", f"corrupt TFLite file: operator {i} of subgraph {index} names operator code "
                                f"{code} of {len(codes)}")
        where = f"operator {i} ({codes[code].name}) of subgraph {index}"
        operators.append(Operator(
            i, codes[code],
            _indices(op.ints(1, f"{where}'s inputs"), n, f"{where}'s inputs", optional=True),
            _indices(op.ints(2, f"{where}'s outputs"), n, f"{where}'s outputs", optional=True),
            op.int(3, 0, "B"), op.table(4, f"{where}'s options"), op.table(12, f"{where}'s options")))
    return Subgraph(index, name, tensors, inputs, outputs, operators)


def _signature(t: Table, index: int, subgraphs: list[Subgraph]) -> Signature:
    key = t.string(2, f"signature {index}'s key") or f"signature_{index}"
    sub = t.int(4, 0, "I")
    if sub >= len(subgraphs):
        raise ImportProblem("E0861", f"corrupt TFLite file: signature '{key}' names subgraph {sub} of {len(subgraphs)}")
    n = len(subgraphs[sub].tensors)

    def names(slot: int, what: str) -> dict[str, int]:
        found = {}
        for m in t.tables(slot, f"signature '{key}''s {what}"):
            name = m.string(0, f"a name of signature '{key}'") or ""
            found[name] = _indices([m.int(1, 0, "I")], n, f"signature '{key}''s {what}")[0]
        return found

    return Signature(key, sub, names(0, "inputs"), names(1, "outputs"))
