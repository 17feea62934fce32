"""Read a module written by :mod:`.writer` back into a :class:`~.program.TosaProgram` (to run it in the numpy
TOSA interpreter, and to check that the module says what the exporter meant).

Only the subset the writer emits is understood: one graph of TOSA.001000.1 instructions over
``OpTypeTensorARM`` values; anything else is a :class:`SpirvReadError`. Graph constants
(``OpGraphConstantARM``) are taken from ``constants`` (by GraphConstantID), as an API would supply them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from skriptnd.tosa.legalize.core import TosaOp
from skriptnd.tosa.spirv import tables
from skriptnd.tosa.spirv.encoding import ATTRIBUTES, ENUMS, NUMPY, RESULT_TYPED, SHAPE_OPERANDS, TYPE_NAMES
from skriptnd.tosa.spirv.program import TosaProgram
from skriptnd.tosa.spirv.writer import INSTRUCTION_SET, MAGIC

_CORE_BY_OPCODE = {code: name for name, (code, _) in tables.CORE.items()}
_TOSA_BY_OPCODE = {code: (name, operands, variadic) for name, (code, operands, variadic) in tables.TOSA.items()}
_ENUM_NAMES = {kind: {v: k for k, v in reversed(list(values.items()))} for kind, values in ENUMS.items()}


MAX_ELEMENTS = 1 << 32  # larger tensor types are refused (a damaged shape must not allocate the machine)
MAX_RANK = 1 << 16


class SpirvReadError(ValueError):
    """The bytes are not a SPIR-V module of the form this package writes."""


def decode_string(words: Sequence[int]) -> tuple[str, int]:
    """A literal string at the start of ``words`` and the number of words it takes."""
    data = struct.pack(f"<{len(words)}I", *words)
    end = data.index(b"\0")
    return data[:end].decode("utf-8"), end // 4 + 1


def instructions(data: bytes) -> tuple[list[int], list[tuple[str, list[int]]]]:
    """The header words and ``(opname, operand words)`` of every instruction of a little-endian module."""
    if len(data) % 4 or len(data) < 20:
        raise SpirvReadError("a SPIR-V module is a whole number of 32-bit words, at least its 5-word header")
    words = list(struct.unpack(f"<{len(data) // 4}I", data))
    if words[0] != MAGIC:
        raise SpirvReadError(f"not a little-endian SPIR-V module (magic 0x{words[0]:08x})")
    out, i = [], 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise SpirvReadError(f"instruction at word {i} has a bad word count {count}")
        if opcode not in _CORE_BY_OPCODE:
            raise SpirvReadError(f"opcode {opcode} at word {i} is not one this reader knows")
        out.append((_CORE_BY_OPCODE[opcode], words[i + 1:i + count]))
        i += count
    return words[:5], out


def _prototype(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of the type (dtype, shape) that takes no memory (zero strides)."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >> (width - 1) & 1 else bits


class _Reader:
    def __init__(self, constants: Mapping[int, np.ndarray] | Sequence[np.ndarray] | None) -> None:
        self.graph_constants = constants
        self.types: dict[int, tuple[Any, ...]] = {}
        self.values: dict[int, Any] = {}  # constant id -> python scalar / list / ndarray
        self.names: dict[int, str] = {}

    def dtype(self, type_id: int) -> np.dtype:
        t = self.types[type_id]
        kind = {"bool": "bool", "int": "int", "float": "float"}.get(t[0])
        if kind is None:
            raise SpirvReadError(f"%{type_id} is not a scalar type")
        return NUMPY[(kind, 1 if kind == "bool" else t[1])]

    def tensor(self, type_id: int) -> tuple[np.dtype, tuple[int, ...]]:
        t = self.types.get(type_id)
        if t is None or t[0] != "tensor":
            raise SpirvReadError(f"%{type_id} is not an OpTypeTensorARM")
        shape = tuple(int(d) for d in self.values[t[3]])
        if int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS:
            raise SpirvReadError(f"tensor type %{type_id} {list(shape)} is larger than {MAX_ELEMENTS} elements")
        return self.dtype(t[1]), shape

    def constant(self, result_type: int, parts: list[int] | None) -> Any:
        """The value of an OpConstantComposite (``parts``) or OpConstantNull (None)."""
        t = self.types[result_type]
        if t[0] == "array":
            if parts is None:
                if not 0 < int(self.values[t[2]]) <= MAX_RANK:
                    raise SpirvReadError(f"array %{result_type} of {self.values[t[2]]} elements is not a tensor shape")
                return [0] * int(self.values[t[2]])
            return [self.values[p] for p in parts]
        if t[0] != "tensor":
            raise SpirvReadError(f"constant of type %{result_type} is neither an array nor a tensor")
        dtype, shape = self.tensor(result_type)
        if parts is None:
            return np.zeros(shape, dtype)
        return np.asarray([self.values[p] for p in parts], dtype).reshape(shape)

    def graph_constant(self, result_type: int, index: int) -> np.ndarray:
        dtype, shape = self.tensor(result_type)
        try:
            a = np.asarray(self.graph_constants[index])  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            raise SpirvReadError(f"graph constant {index} was not supplied") from None
        if a.dtype == dtype and a.size == int(np.prod(shape)):  # a flat buffer (as a VGF stores it) is fine
            a = a.reshape(shape)
        if a.dtype != dtype or tuple(a.shape) != shape:
            raise SpirvReadError(f"graph constant {index} is {a.dtype}{list(a.shape)}, the module declares "
                                 f"{dtype}{list(shape)}")
        return a

    def run(self, data: bytes) -> TosaProgram:
        _, insts = instructions(data)
        p = TosaProgram(name="", inputs=[], outputs=[])
        tosa_set, graph_type, interface = None, None, []
        outputs: dict[int, str] = {}
        for name, w in insts:
            if name == "OpExtInstImport":
                if decode_string(w[1:])[0] != INSTRUCTION_SET:
                    raise SpirvReadError(f"unknown extended instruction set {decode_string(w[1:])[0]!r}")
                tosa_set = w[0]
            elif name == "OpName":
                self.names[w[0]] = decode_string(w[1:])[0]
            elif name == "OpTypeBool":
                self.types[w[0]] = ("bool",)
            elif name in ("OpTypeInt", "OpTypeFloat"):
                self.types[w[0]] = ("int" if name == "OpTypeInt" else "float", w[1])
            elif name == "OpTypeArray":
                self.types[w[0]] = ("array", w[1], w[2])
            elif name == "OpTypeTensorARM":
                if len(w) != 4:
                    raise SpirvReadError("a tensor type without rank and shape is not supported")
                self.types[w[0]] = ("tensor", w[1], w[2], w[3])
            elif name == "OpTypePointer":
                self.types[w[0]] = ("pointer", w[1], w[2])
            elif name == "OpTypeGraphARM":
                self.types[w[0]] = ("graph", w[1], tuple(w[2:]))
            elif name in ("OpConstantTrue", "OpConstantFalse"):
                self.values[w[1]] = name == "OpConstantTrue"
            elif name == "OpConstant":
                t = self.types[w[0]]
                if t[0] == "float":
                    self.values[w[1]] = float(np.asarray(w[2], np.uint32).view(np.float32))
                else:
                    bits = w[2] | (w[3] << 32 if len(w) > 3 else 0)
                    self.values[w[1]] = _signed(bits, t[1])
            elif name == "OpConstantComposite":
                self.values[w[1]] = self.constant(w[0], list(w[2:]))
            elif name == "OpConstantNull":
                self.values[w[1]] = self.constant(w[0], None)
            elif name == "OpGraphConstantARM":
                self.values[w[1]] = self.graph_constant(w[0], w[2])
            elif name == "OpVariable":
                pass
            elif name == "OpGraphEntryPointARM":
                p.name, n = decode_string(w[1:])
                interface = list(w[1 + n:])
            elif name == "OpGraphARM":
                if graph_type is not None:
                    raise SpirvReadError("the module has more than one graph")
                graph_type = self.types[w[0]]
            elif name == "OpGraphInputARM":
                index = int(self.values[w[2]])
                while len(p.inputs) <= index:
                    p.inputs.append("")
                p.inputs[index] = f"%{w[1]}"
                dtype, shape = self.tensor(w[0])
                p.types[f"%{w[1]}"] = _prototype(dtype, shape)
            elif name == "OpExtInst":
                if w[2] != tosa_set:
                    raise SpirvReadError(f"OpExtInst %{w[1]} is not from {INSTRUCTION_SET}")
                p.ops.append(self.instruction(p, w))
            elif name == "OpGraphSetOutputARM":
                outputs[int(self.values[w[1]])] = self.operand(p, w[0], False)
            elif name in ("OpCapability", "OpExtension", "OpMemoryModel", "OpDecorate", "OpGraphEndARM"):
                pass
            else:
                raise SpirvReadError(f"{name} is not expected in a TOSA graph module")
        if graph_type is None:
            raise SpirvReadError("the module has no OpGraphARM")
        p.outputs = [outputs[i] for i in range(len(outputs))]
        labels = [self.names.get(v, f"io{i}") for i, v in enumerate(interface)]
        p.input_names, p.output_names = labels[:len(p.inputs)], labels[len(p.inputs):]
        return p

    def operand(self, p: TosaProgram, ref: int, shape_operand: bool) -> str:
        """The program value for an id: an earlier result/input, or a constant added to ``p.constants``."""
        name = f"%{ref}"
        if name in p.types and name not in p.constants:
            return name
        if ref not in self.values:
            raise SpirvReadError(f"%{ref} is used before it is defined")
        a = np.asarray(self.values[ref])
        if shape_operand:
            name = f"%{ref}:shape"
            a = a.astype(np.int32).astype(np.int64)
            p.shapes.add(name)
        p.constants[name] = a
        p.types[name] = a
        return name

    def attribute(self, name: str, ref: int) -> Any:
        kind = ATTRIBUTES[name]
        v = self.values.get(ref)
        if v is None:
            raise SpirvReadError(f"attribute {name} (%{ref}) is not a constant")
        if kind == "i32s":
            return [int(x) for x in np.asarray(v, np.int64).astype(np.uint32).astype(np.int32)]
        if kind == "bool":
            return bool(v)
        if kind in ("u32", "elem"):
            return v
        try:
            return _ENUM_NAMES[kind][int(v)]
        except KeyError:
            raise SpirvReadError(f"{name} = {v} is not a value of {kind}") from None

    def instruction(self, p: TosaProgram, w: list[int]) -> TosaOp:
        if w[3] not in _TOSA_BY_OPCODE:
            raise SpirvReadError(f"unknown {INSTRUCTION_SET} instruction {w[3]}")
        opname, names, variadic = _TOSA_BY_OPCODE[w[3]]
        args = list(w[4:])
        n_attr = next((i for i, n in enumerate(names) if n not in ATTRIBUTES), len(names))  # attributes lead
        attrs = {n: self.attribute(n, ref) for n, ref in zip(names[:n_attr], args[:n_attr], strict=True)}
        # local_bound only tightens the error bound a driver must meet; the numpy operators take no such keyword
        attrs = {k: v for k, v in attrs.items() if k != "local_bound"}
        in_names = [names[-1]] * (len(args) - n_attr) if variadic else list(names[n_attr:])
        if len(in_names) != len(args) - n_attr:
            raise SpirvReadError(f"{opname} %{w[1]} has {len(args)} operands, the grammar lists {len(names)}")
        shape_names = SHAPE_OPERANDS.get(opname, frozenset())
        inputs = [self.operand(p, ref, n in shape_names) for n, ref in zip(in_names, args[n_attr:], strict=True)]
        dtype, shape = self.tensor(w[0])
        if opname in RESULT_TYPED:
            attrs[RESULT_TYPED[opname]] = TYPE_NAMES[dtype]
        out = f"%{w[1]}"
        p.types[out] = _prototype(dtype, shape)
        return TosaOp(opname, inputs, attrs, out)


def read(data: bytes, constants: Mapping[int, np.ndarray] | Sequence[np.ndarray] | None = None) -> TosaProgram:
    """The TOSA program of a module written by :func:`skriptnd.tosa.spirv.write`; ``constants``: the graph
    constants by GraphConstantID (``SpirvModule.constants``, or the arrays of the ``.npz`` written next to
    the module). ``program.run(inputs)`` runs it on the numpy TOSA operators."""
    try:
        return _Reader(constants).run(data)
    except SpirvReadError:
        raise
    except (KeyError, IndexError, ValueError, TypeError, UnicodeDecodeError) as err:  # a malformed module
        raise SpirvReadError(f"malformed module: {type(err).__name__}: {err}") from None
