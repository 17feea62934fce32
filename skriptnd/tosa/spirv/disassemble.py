"""Disassembly text of a module, in the syntax of ``spirv-as`` (numeric ids, ``%N = OpX ...``), so that
``spirv-as --preserve-numeric-ids`` assembles it back into the same words. Driven by the grammar tables:
operand kinds give how each word prints; TOSA instructions print by name; float constants are hex floats
(exact); 8/16/32/64-bit integer constants print as the unsigned numbers SPIR-V stores."""

from __future__ import annotations

import math

import numpy as np

from skriptnd.tosa.spirv import tables
from skriptnd.tosa.spirv.reader import decode_string, instructions
from skriptnd.tosa.spirv.writer import INSTRUCTION_SET

_ENUM_NAMES = {kind: {v: k for k, v in reversed(list(values.items()))} for kind, values in tables.ENUMS.items()}
_TOSA_NAMES = {code: name for name, (code, _, _) in tables.TOSA.items()}


def _hex_float(bits: int) -> str:
    v = float(np.asarray(bits, np.uint32).view(np.float32))
    if math.isnan(v):
        return ("-" if bits >> 31 else "") + "0x1." + f"{(bits & 0x7FFFFF) << 1:06x}" + "p+128"
    if math.isinf(v):
        return "-0x1p+128" if v < 0 else "0x1p+128"
    return v.hex()


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def disassemble(data: bytes, comments: list[str] | None = None) -> str:
    """The module's text; ``comments`` are extra ``;`` lines for the header."""
    header, insts = instructions(data)
    lines = ["; SPIR-V", f"; Version: {header[1] >> 16 & 0xFF}.{header[1] >> 8 & 0xFF}",
             f"; Generator: 0x{header[2]:08x}", f"; Bound: {header[3]}", f"; Schema: {header[4]}"]
    lines += [f"; {c}" for c in comments or []]
    types: dict[int, tuple[str, int]] = {}
    tosa_set = None
    for name, w in insts:
        _, kinds = tables.CORE[name]
        out, result, i = [], None, 0
        for kind, quantifier in kinds:
            while i < len(w):
                if kind == "IdResult":
                    result = f"%{w[i]}"
                    i += 1
                elif kind in ("IdRef", "IdResultType"):
                    out.append(f"%{w[i]}")
                    i += 1
                elif kind == "LiteralString":
                    s, n = decode_string(w[i:])
                    out.append(_quote(s))
                    i += n
                elif kind == "LiteralExtInstInteger":
                    out.append(_TOSA_NAMES.get(w[i], str(w[i])) if w[i - 1] == tosa_set else str(w[i]))
                    i += 1
                elif kind == "LiteralContextDependentNumber":
                    t = types[w[0]]
                    if t[0] == "float":
                        out.append(_hex_float(w[i]))
                        i += 1
                    else:
                        out.append(str(w[i] | (w[i + 1] << 32 if t[1] == 64 else 0)))
                        i += 2 if t[1] == 64 else 1
                elif kind in _ENUM_NAMES:
                    enum = _ENUM_NAMES[kind][w[i]]
                    out.append(enum)
                    i += 1
                    for _ in range(tables.ENUM_PARAMETERS.get(kind, {}).get(enum, 0)):
                        out.append(str(w[i]))
                        i += 1
                else:  # LiteralInteger
                    out.append(str(w[i]))
                    i += 1
                if quantifier != "*":
                    break
        if name == "OpExtInstImport" and decode_string(w[1:])[0] == INSTRUCTION_SET:
            tosa_set = w[0]
        if name in ("OpTypeInt", "OpTypeFloat"):
            types[w[0]] = ("int" if name == "OpTypeInt" else "float", w[1])
        text = " ".join([name, *out])
        lines.append(f"{result} = {text}" if result else text)
    return "\n".join(lines) + "\n"
