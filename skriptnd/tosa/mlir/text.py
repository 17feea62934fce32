"""The text pieces every TOSA MLIR writer shares (generic op form): tensor types, attribute dictionaries and
the module's constants (``tosa.const`` / ``tosa.const_shape`` lines, large payloads as ``dense_resource``
blobs).

The writers that use them: the graph written operation by operation (:mod:`.export`), the simplified
program (:mod:`.program`), control-flow regions (:mod:`.regions`) and the integer graph
(skriptnd.tosa.integer.mlir). They sit here, below all of them, so that no writer imports another for its
helpers; the IREE cache key reads this file's source with theirs (skriptnd.backends.via_iree).
"""

from __future__ import annotations

from typing import Any

import numpy as np

ELEM = {np.dtype(np.float32): "f32", np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8",
         np.dtype(np.int16): "i16", np.dtype(np.int32): "i32"}
NAN_MODE_OPS = {"CLAMP", "MAXIMUM", "MINIMUM", "REDUCE_MAX", "REDUCE_MIN", "ARGMAX", "MAX_POOL2D"}
RESOURCE_MIN_BYTES = 64  # smaller payloads stay inline literals (readable, and not worth a blob)


def tensor_type(a: np.ndarray) -> str:
    dims = "".join(f"{int(d)}x" for d in a.shape)
    return f"tensor<{dims}{ELEM[a.dtype]}>"


def _f32(v: float) -> str:
    return f"0x{int(np.asarray(v, np.float32).view(np.uint32)):08X} : f32"


def _bool_literal(a: np.ndarray) -> str:
    if a.ndim == 0:
        return "true" if a else "false"
    return "[" + ", ".join(_bool_literal(x) for x in a) + "]"


def _le_bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def _resource_key(hint: str, taken: set[str]) -> str:
    """An MLIR resource key (bare identifier) from a tensor name, unique among ``taken``."""
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "const"
    base = base if base[0].isalpha() or base[0] == "_" else "_" + base
    key, n = base, 1
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    taken.add(key)
    return key


def _resource_blob(a: np.ndarray) -> tuple[str, str]:
    """The builtin dialect's hex form of a blob, ``0x<alignment: uint32 LE><payload>``, as (head, payload)
    so that a large payload is copied once more only, into the module text."""
    return "0x" + max(4, a.dtype.itemsize).to_bytes(4, "little").hex().upper(), _le_bytes(a).hex().upper()


class Constants:
    """The constants of one MLIR module as it is written (every TOSA MLIR writer: operation by operation
    in skriptnd.tosa.mlir.export, the simplified program in skriptnd.tosa.mlir.program, the integer
    graph): :meth:`line` writes one ``tosa.const`` (``tosa.const_shape`` for int64 shape operands), large
    numeric payloads as ``dense_resource`` blobs unless ``inline``; :meth:`module` appends the blobs'
    ``dialect_resources`` section to the module text."""

    def __init__(self, inline: bool) -> None:
        self.inline = inline
        self.blobs: list[tuple[str, tuple[str, str]]] = []  # (resource key, hex blob) in order of use
        self.keys: set[str] = set()

    def line(self, name: str, a: np.ndarray, hint: str) -> str:
        if a.dtype == np.int64:  # shape operands (int data is narrowed to int32 before it gets here)
            return (f'{name} = "tosa.const_shape"() <{{values = dense<[{", ".join(str(int(x)) for x in a)}]> : '
                    f"tensor<{a.size}xindex>}}> : () -> !tosa.shape<{a.size}>")
        if not self.inline and a.dtype != np.bool_ and a.nbytes >= RESOURCE_MIN_BYTES:
            key = _resource_key(hint, self.keys)
            self.blobs.append((key, _resource_blob(a)))
            return f'{name} = "tosa.const"() <{{values = dense_resource<{key}> : {tensor_type(a)}}}> : () -> {tensor_type(a)}'
        return f'{name} = "tosa.const"() <{{values = {_dense(a)}}}> : () -> {tensor_type(a)}'

    def module(self, text: str) -> str:
        if not self.blobs:
            return text
        parts = [text, "{-#\n  dialect_resources: {\n    builtin: {\n"]
        for i, (key, (blob_head, payload)) in enumerate(self.blobs):
            parts += [f'      {key}: "{blob_head}', payload, '",\n' if i + 1 < len(self.blobs) else '"\n']
        parts.append("    }\n  }\n#-}\n")
        return "".join(parts)


def _dense(a: np.ndarray) -> str:
    if a.dtype == np.bool_:
        body = _bool_literal(a) if a.size and a.any() != a.all() else ("true" if a.size and a.all() else "false")
    else:
        body = '"0x' + _le_bytes(a).hex().upper() + '"'
    return f"dense<{body}> : {tensor_type(a)}"


def attributes(name: str, attrs: dict[str, Any]) -> str:
    out = []
    for k, v in sorted(attrs.items()):
        if k in ("pad", "stride", "dilation", "kernel", "out_pad"):
            out.append(f"{k} = array<i64: {', '.join(str(int(x)) for x in v)}>")
        elif k == "perms":
            out.append(f"perms = array<i32: {', '.join(str(int(x)) for x in v)}>")
        elif k == "axis":
            out.append(f"axis = {int(v)} : i32")
        elif k == "acc_type":
            out.append(f"acc_type = {ELEM[np.dtype(np.float32)] if v == 'fp32' else v}")
        elif k in ("min_val", "max_val"):
            out.append(f"{k} = {_f32(v)}")
        elif k == "nan_mode":
            out.append(f"nan_mode = #tosa.nan_mode<{v}>")
        elif k == "output_dtype" and name == "CAST":  # CAST's result type says it
            continue
        else:
            raise ValueError(f"no MLIR form for attribute {k} of {name}")
    if name in NAN_MODE_OPS and "nan_mode" not in attrs:
        out.append("nan_mode = #tosa.nan_mode<PROPAGATE>")
    return " <{" + ", ".join(sorted(out)) + "}>" if out else ""
