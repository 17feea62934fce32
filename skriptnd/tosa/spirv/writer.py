"""Serialize a :class:`~.program.TosaProgram` as a SPIR-V module (SPV_ARM_graph, SPV_ARM_tensors, TOSA.001000.1).

Layout (SPIR-V 1.5, logical addressing, Vulkan memory model, as Arm's model converter writes it): the
capabilities ``Shader``, ``VulkanMemoryModel``, ``TensorsARM``, ``GraphARM`` (plus ``Int8``/``Int16``/``Int64`` for the integer
widths used), the extensions, ``%tosa = OpExtInstImport "TOSA.001000.1"``, ``OpName`` s for the interface,
``Binding``/``DescriptorSet`` decorations, then types, constants and one ``UniformConstant`` tensor variable
per graph input and output, ``OpGraphEntryPointARM``, and the graph: ``OpGraphARM``, one ``OpGraphInputARM``
per input, one ``OpExtInst`` per TOSA operator, one ``OpGraphSetOutputARM`` per output, ``OpGraphEndARM``.

Attributes are constant operands first, in the order of the grammar; tensor constants are
``OpConstantComposite`` (rank > 1 nests tensors of rank - 1; all-zero tensors are ``OpConstantNull``) when
smaller than :data:`INLINE_MAX_BYTES`, like the MLIR export's inline literals, and ``OpGraphConstantARM``
otherwise: the module refers to the weights by GraphConstantID and the API (or a container such as VGF)
supplies them; :class:`SpirvModule` carries them next to the module words. SPV_ARM_tensors tensors have
rank >= 1: a rank-0 TOSA value is a [1] tensor (its one element), as Arm's model-converter writes it, and an
empty shape operand (RESHAPE to rank 0, ...) the one of that [1] tensor; reading the module back gives [1].
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import Span
from skriptnd.tosa.legalize.core import TosaOp
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.spirv import tables
from skriptnd.tosa.spirv.encoding import (
    ATTRIBUTES,
    ELEMENTS,
    ENUMS,
    RESULT_TYPED,
    SHAPE_OPERANDS,
    default_attribute,
)
from skriptnd.tosa.spirv.program import TosaProgram

register_codes({
    "E0770": "a TOSA value has no SPIR-V tensor type",
    "E0771": "a TOSA operator or attribute has no TOSA.001000.1 encoding",
    "E0772": "TOSA control flow (a loop) has no SPIR-V graph form",
})

MAGIC = 0x07230203
VERSION = 0x00010500  # SPIR-V 1.5
#: the generator word: 0, which SPIR-V allows for a tool without a registered generator id
GENERATOR = 0
INSTRUCTION_SET = "TOSA.001000.1"
INLINE_MAX_BYTES = 64  # as skriptnd.tosa.mlir.text.RESOURCE_MIN_BYTES: smaller payloads are literals
#: an empty shape_t operand (of a rank-0 value) -> its value for the [1] tensor that stands for it
RANK0_SHAPE_OPERANDS = {"shape": [1], "multiples": [1], "start": [0], "size": [1], "padding": [0, 0]}
EXTENSIONS = ("SPV_ARM_tensors", "SPV_ARM_graph", "SPV_KHR_vulkan_memory_model")


@dataclass
class SpirvModule:
    """A module's words (little-endian bytes via :meth:`to_bytes`) and its graph constants by GraphConstantID."""

    words: list[int]
    constants: list[np.ndarray] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return struct.pack(f"<{len(self.words)}I", *self.words)

    def constants_npz(self) -> bytes:
        """The graph constants as an ``.npz`` archive (arrays named by their GraphConstantID)."""
        buf = io.BytesIO()
        np.savez(buf, **{str(i): a for i, a in enumerate(self.constants)})
        return buf.getvalue()


def string_words(s: str) -> list[int]:
    """A SPIR-V literal string: UTF-8, NUL-terminated, padded to whole words (little-endian)."""
    data = s.encode("utf-8") + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _fail(code: str, message: str, span: Span | None) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code=code, message=message, span=span or Span("<graph>", 1, 1, 1, 1))])


class _Writer:
    SECTIONS = ("capability", "extension", "import", "memory", "debug", "annotation", "types", "entry", "graph")

    def __init__(self, program: TosaProgram) -> None:
        self.p = program
        self.bound = 1
        self.sec: dict[str, list[int]] = {s: [] for s in self.SECTIONS}
        self.cache: dict[Any, int] = {}
        self.caps: list[str] = ["Shader", "VulkanMemoryModel", "TensorsARM", "GraphARM"]
        self.constants: list[np.ndarray] = []

    def new_id(self) -> int:
        self.bound += 1
        return self.bound - 1

    def emit(self, section: str, opname: str, *operands: int) -> None:
        opcode = tables.CORE[opname][0]
        if len(operands) >= 0xFFFF:  # the word count is 16 bits; nothing this writer emits comes close
            raise ValueError(f"{opname} with {len(operands)} operands does not fit one SPIR-V instruction")
        self.sec[section] += [((len(operands) + 1) << 16) | opcode, *operands]

    def cached(self, key: Hashable, make: Callable[[], int]) -> int:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    # -- types ------------------------------------------------------------------------------------

    def _result(self, opname: str, *operands: int) -> int:
        rid = self.new_id()
        if tables.CORE[opname][1][0][0] == "IdResultType":  # (type, result, ...) instead of (result, ...)
            self.emit("types", opname, operands[0], rid, *operands[1:])
        else:
            self.emit("types", opname, rid, *operands)
        return rid

    def scalar_type(self, dtype: np.dtype) -> int:
        kind, width = ELEMENTS[np.dtype(dtype)]
        if kind == "int" and width != 32:
            cap = {8: "Int8", 16: "Int16", 64: "Int64"}[width]
            if cap not in self.caps:
                self.caps.append(cap)
        if kind == "bool":
            return self.cached(("bool",), lambda: self._result("OpTypeBool"))
        if kind == "float":
            return self.cached(("float", width), lambda: self._result("OpTypeFloat", width))
        return self.cached(("int", width), lambda: self._result("OpTypeInt", width, 0))

    def u32(self, v: int) -> int:
        return self.scalar(np.dtype(np.int32), int(v))

    def tensor_type(self, dtype: np.dtype, shape: tuple[int, ...], where: Span | None = None) -> int:
        if np.dtype(dtype) not in ELEMENTS:
            raise _fail("E0770", f"a TOSA value of type {np.dtype(dtype)} has no SPIR-V element type", where)
        shape = tuple(shape) or (1,)  # a rank-0 value is a [1] tensor (as Arm's model-converter writes it)
        key = ("tensor", np.dtype(dtype).str, tuple(shape))

        def make() -> int:
            elem = self.scalar_type(dtype)
            rank = self.u32(len(shape))
            arr = self.cached(("array", len(shape)),
                              lambda: self._result("OpTypeArray", self.scalar_type(np.dtype(np.int32)), rank))
            dims = [self.u32(d) for d in shape]
            shp = self.cached(("dims", tuple(shape)), lambda: self._result("OpConstantComposite", arr, *dims))
            return self._result("OpTypeTensorARM", elem, rank, shp)

        return self.cached(key, make)

    # -- constants --------------------------------------------------------------------------------

    def scalar(self, dtype: np.dtype, value: bool | int | float | np.generic) -> int:
        dtype = np.dtype(dtype)
        t = self.scalar_type(dtype)
        kind, width = ELEMENTS[dtype]
        if kind == "bool":
            return self.cached(("const", "bool", bool(value)),
                               lambda: self._result("OpConstantTrue" if value else "OpConstantFalse", t))
        if kind == "float":
            bits = int(np.asarray(value, np.float32).view(np.uint32))
            words = [bits]
        else:
            bits = int(value) & ((1 << width) - 1)
            words = [bits & 0xFFFFFFFF, bits >> 32] if width == 64 else [bits]
        return self.cached(("const", dtype.str, bits), lambda: self._result("OpConstant", t, *words))

    def tensor_constant(self, a: np.ndarray) -> int:
        a = np.asarray(a)
        key = ("tensor const", a.dtype.str, a.shape, a.tobytes())

        def make() -> int:
            t = self.tensor_type(a.dtype, a.shape)
            if not np.ascontiguousarray(a).view(np.uint8).any():  # all bits zero (-0.0 is not: it is written)
                return self._result("OpConstantNull", t)
            parts = [self.scalar(a.dtype, x) for x in a] if a.ndim == 1 else [self.tensor_constant(x) for x in a]
            return self._result("OpConstantComposite", t, *parts)

        return self.cached(key, make)

    def graph_constant(self, a: np.ndarray) -> int:
        t = self.tensor_type(a.dtype, a.shape)
        self.constants.append(np.ascontiguousarray(a))
        return self._result("OpGraphConstantARM", t, len(self.constants) - 1)

    def value_constant(self, name: str, shape_operand: str | None = None) -> int:
        """The id of constant ``name``; ``shape_operand``: the shape_t operand it is (e.g. RESHAPE's shape)."""
        a = np.asarray(self.p.constants[name])
        if a.ndim == 0:
            a = a.reshape(1)
        if shape_operand is not None or name in self.p.shapes:
            if a.size == 0:  # the shape of a rank-0 value: that of its [1] tensor
                a = np.asarray(RANK0_SHAPE_OPERANDS.get(shape_operand or "", [1]))
            return self.tensor_constant(a.astype(np.int32))
        if a.nbytes < INLINE_MAX_BYTES:
            return self.tensor_constant(a)
        return self.cached(("graph const", name), lambda: self.graph_constant(a))

    def attribute(self, op: TosaOp, name: str, value: object, where: Span | None) -> int:
        kind = ATTRIBUTES.get(name)
        if kind is None:
            raise _fail("E0771", f"{op.name}: attribute '{name}' has no TOSA.001000.1 operand encoding", where)
        if kind == "u32":
            return self.u32(int(value))
        if kind == "bool":
            return self.scalar(np.dtype(np.bool_), bool(value))
        if kind == "i32s":
            return self.tensor_constant(np.asarray([int(v) for v in value], np.int32))
        if kind == "elem":
            dtype = self.p.types[op.inputs[0]].dtype
            return self.scalar(dtype, value)
        try:
            return self.u32(ENUMS[kind][str(value)])
        except KeyError:
            raise _fail("E0771", f"{op.name}: {name} = {value!r} is not a value of {kind}", where) from None

    # -- the module -------------------------------------------------------------------------------

    def run(self) -> SpirvModule:
        p = self.p
        tosa = self.new_id()
        ids: dict[str, int] = {}
        in_types = [self.tensor_type(p.types[n].dtype, p.types[n].shape) for n in p.inputs]
        out_types = []
        for n in p.outputs:
            out_types.append(self.tensor_type(p.types[n].dtype, p.types[n].shape, p.spans.get(n)))
        interface = []
        for i, (t, label) in enumerate(zip(in_types + out_types, p.input_names + p.output_names, strict=True)):
            ptr = self.cached(("ptr", t), lambda t=t: self._result("OpTypePointer", 0, t))
            var = self._result("OpVariable", ptr, 0)  # StorageClass UniformConstant
            self.emit("debug", "OpName", var, *string_words(label))
            self.emit("annotation", "OpDecorate", var, tables.ENUMS["Decoration"]["DescriptorSet"], 0)
            self.emit("annotation", "OpDecorate", var, tables.ENUMS["Decoration"]["Binding"], i)
            interface.append(var)
        graph_type = self._result("OpTypeGraphARM", len(in_types), *in_types, *out_types)
        graph = self.new_id()
        self.emit("graph", "OpGraphARM", graph_type, graph)
        for i, (n, t) in enumerate(zip(p.inputs, in_types, strict=True)):
            ids[n] = self.new_id()
            self.emit("graph", "OpGraphInputARM", t, ids[n], self.u32(i))
        for op in p.ops:
            ids[op.output] = self.instruction(op, tosa, ids)
        for i, n in enumerate(p.outputs):
            value = ids[n] if n in ids else self.value_constant(n, False)
            self.emit("graph", "OpGraphSetOutputARM", value, self.u32(i))
        self.emit("graph", "OpGraphEndARM")
        self.emit("entry", "OpGraphEntryPointARM", graph, *string_words(p.name), *interface)
        for cap in self.caps:
            self.emit("capability", "OpCapability", tables.ENUMS["Capability"][cap])
        for ext in EXTENSIONS:
            self.emit("extension", "OpExtension", *string_words(ext))
        self.emit("import", "OpExtInstImport", tosa, *string_words(INSTRUCTION_SET))
        self.emit("memory", "OpMemoryModel", tables.ENUMS["AddressingModel"]["Logical"],
                  tables.ENUMS["MemoryModel"]["Vulkan"])
        words = [MAGIC, VERSION, GENERATOR, self.bound, 0]
        for s in self.SECTIONS:
            words += self.sec[s]
        return SpirvModule(words, self.constants)

    def instruction(self, op: TosaOp, tosa: int, ids: dict[str, int]) -> int:
        where = self.p.spans.get(op.output)
        if op.name == "WHILE_LOOP":
            raise _fail("E0772", f"TOSA WHILE_LOOP (control flow) is not an instruction of {INSTRUCTION_SET}, and "
                        "SPV_ARM_graph graphs have no regions: recurrent layers are unrolled for SPIR-V up to "
                        f"{RecurrentLegalizer.MAX_UNROLLED} steps in all, longer ones are loops; export it with --tosa-mlir "
                        "or --tosa-flatbuffer (they write the loop)", where)
        if op.name not in tables.TOSA:
            raise _fail("E0771", f"TOSA operator {op.name} is not an instruction of {INSTRUCTION_SET}", where)
        opcode, names, variadic = tables.TOSA[op.name]
        n_attr = len(names) - 1 if variadic else len(names) - len(op.inputs)
        if n_attr < 0 or any(n not in ATTRIBUTES for n in names[:n_attr]):
            raise _fail("E0771", f"{op.name} with {len(op.inputs)} inputs does not match the operands "
                        f"{', '.join(names)}", where)
        extra = set(op.attrs) - set(names[:n_attr]) - {RESULT_TYPED.get(op.name)}
        if extra:
            raise _fail("E0771", f"{op.name}: attribute '{sorted(extra)[0]}' has no TOSA.001000.1 operand", where)
        in_dtype = self.p.types[op.inputs[0]].dtype if op.inputs else None
        operands = []
        for name in names[:n_attr]:
            value = op.attrs[name] if name in op.attrs else default_attribute(op.name, name, in_dtype)
            operands.append(self.attribute(op, name, value, where))
        shape_names = SHAPE_OPERANDS.get(op.name, frozenset())
        in_names = [names[-1]] * len(op.inputs) if variadic else names[n_attr:]
        for operand, v in zip(in_names, op.inputs, strict=True):
            if v in ids:
                operands.append(ids[v])
            elif v in self.p.constants:
                operands.append(self.value_constant(v, operand if operand in shape_names else None))
            else:
                raise ValueError(f"value {v} is used before it is computed")
        result = self.p.types[op.output]
        if isinstance(result, (tuple, list)):
            raise _fail("E0770", f"{op.name} has several results (an OpTypeStruct result is not written yet)", where)
        rtype = self.tensor_type(result.dtype, result.shape, where)
        rid = self.new_id()
        self.emit("graph", "OpExtInst", rtype, rid, tosa, opcode, *operands)
        return rid


def write(program: TosaProgram) -> SpirvModule:
    """The SPIR-V module of ``program``; :class:`DiagnosticError` (E0770/E0771) for what it cannot encode."""
    return _Writer(program).run()
