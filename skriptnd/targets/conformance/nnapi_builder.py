"""The graph an NNAPI model becomes while :mod:`.nnapi_import` translates it, and the operand geometry its
translations share (paddings and strides of conv/pool operations, arities).

:class:`Builder` holds the names, declarations, statements and @quantize entries of ``main.sknd`` under
construction and reads the model's operands (tensor parameters become ``@variable`` s on first use, scalar
parameters attribute values; see :mod:`.nnapi_import` for the quantization conventions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skriptnd.interop.writer import Call, Expr, Names, Quantize, TensorDecl
from skriptnd.targets.conformance.vectors import Locator


class Builder:
    """The graph under construction: names, declarations, statements and @quantize entries."""

    def __init__(self, model: dict[str, Any], loc: Locator) -> None:
        self.model, self.loc = model, loc
        self.names = Names(taken=["Main"])
        self.operands: dict[str, dict[str, Any]] = {}
        self.index: dict[str, int] = {}
        self.sk: dict[str, str] = {}  # NNAPI operand name -> SkriptND tensor name
        self.inputs: list[TensorDecl] = []
        self.outputs: list[TensorDecl] = []
        self.variables: list[TensorDecl] = []
        self.weights: dict[str, np.ndarray] = {}
        self.body: list[Call] = []
        self.quantize: list[Quantize] = []
        self._n = 0

    # -- operands -----------------------------------------------------------------------------------

    def operand(self, name: str, where: list[Any]) -> dict[str, Any]:
        if name not in self.operands:
            raise self.loc.error(where, f"names operand '{name}', which 'operands' does not declare")
        return self.operands[name]

    def present(self, name: str) -> bool:
        """False for an omitted optional operand: a zero extent, or a model input that every example
        leaves empty (the CTS passes a null buffer)."""
        o = self.operands[name]
        if 0 in o["dims"]:
            return False
        if o["role"] == "input":
            examples = self.model.get("examples") or []
            return not examples or any(len(e.get("inputs", {}).get(name, [])) > 0 for e in examples)
        return True

    def qspec(self, o: dict[str, Any]) -> dict[str, Any] | None:
        """The @quantize attributes of an operand (None when it is not quantized)."""
        if o["type"] == "TENSOR_QUANT8_ASYMM":
            return {"zero_point": int(o["zero_point"]), "scale": float(np.float32(o["scale"])), "bits": 8,
                    "signed": False, "channel_axis": 0}
        if o["type"] == "TENSOR_INT32" and float(o.get("scale", 0.0)) > 0.0 and o["role"] in ("parameter", "input"):
            return {"zero_point": 0, "scale": float(np.float32(o["scale"])), "bits": 32, "channel_axis": 0}
        return None

    def quantize_as(self, name: str, o: dict[str, Any]) -> None:
        spec = self.qspec(o)
        if spec is not None:
            self.quantize.append(Quantize(name, "quant.zero_point_linear_quantize", spec))

    def real_values(self, o: dict[str, Any]) -> np.ndarray:
        values = np.asarray(o["value"], dtype=np.float64).reshape(o["dims"])
        if o["type"] == "TENSOR_QUANT8_ASYMM":
            return (np.float32(o["scale"]) * (values - int(o["zero_point"]))).astype(np.float32)
        if self.qspec(o) is not None:  # a quantized int32 bias
            return (np.float32(o["scale"]) * values).astype(np.float32)
        return values.astype(np.float32 if o["type"] == "TENSOR_FLOAT32" else np.int64)

    def tensor(self, name: str, where: list[Any], transform: Callable[[np.ndarray], np.ndarray] | None = None
               ) -> str:
        """The SkriptND tensor holding operand ``name``; a tensor parameter is declared as a variable on
        first use (``transform`` re-lays out its values, e.g. a depthwise filter)."""
        o = self.operand(name, where)
        if o["dims"] == [] and o["role"] == "parameter":
            raise self.loc.error(where, f"operand '{name}' is a scalar; a tensor is needed here")
        key = name if transform is None else f"{name}#t"
        if key in self.sk:
            return self.sk[key]
        if o["role"] != "parameter":
            raise self.loc.error(where, f"operand '{name}' is used before an operation computes it")
        values = self.real_values(o)
        if transform is not None:
            values = transform(values)
        sk = self.names(name)
        dtype = "int" if values.dtype.kind == "i" else "real"
        self.variables.append(TensorDecl(sk, dtype, list(values.shape)))
        self.weights[sk] = values
        self.quantize_as(sk, o)
        self.sk[key] = sk
        return sk

    def scalar(self, name: str, where: list[Any], kind: str = "INT32") -> int | float:
        o = self.operand(name, where)
        if o["role"] != "parameter" or "value" not in o:
            raise self.loc.error(where, f"operand '{name}' must be a constant {kind} parameter (NNAPI 1.0 "
                                 "takes it as a compile-time value)")
        if o["type"] != kind:
            raise self.loc.error(where, f"operand '{name}' must be {kind}, not {o['type']}")
        value = o["value"][0]
        return int(value) if kind == "INT32" else float(np.float32(value))

    def ints(self, name: str, where: list[Any]) -> list[int]:
        o = self.operand(name, where)
        if o["role"] != "parameter" or o["type"] != "TENSOR_INT32":
            raise self.loc.error(where, f"operand '{name}' must be a constant TENSOR_INT32 parameter")
        return [int(v) for v in o["value"]]

    def tmp(self, hint: str, like: dict[str, Any] | None = None) -> str:
        self._n += 1
        name = self.names(f"{hint}_{self._n}")
        if like is not None:
            self.quantize_as(name, like)
        return name

    def define(self, operand: str, where: list[Any]) -> str:
        """The SkriptND name an operation's output operand gets."""
        o = self.operand(operand, where)
        if operand in self.sk:
            raise self.loc.error(where, f"operand '{operand}' is computed twice")
        if o["role"] in ("input", "parameter"):
            raise self.loc.error(where, f"operand '{operand}' is a model {o['role']}; an operation cannot compute it")
        sk = self.names(operand)
        self.sk[operand] = sk
        if o["role"] == "internal":
            self.quantize_as(sk, o)
        return sk

    def emit(self, out: str | list[str], op: str, args: list[Any], attribs: dict[str, Any] | None = None,
             comment: str | None = None) -> None:
        self.body.append(Call([out] if isinstance(out, str) else out, op, args, attribs or {}, comment=comment))

    def activated(self, code: int, out_operand: str, where: list[Any], defined: str | None = None
                  ) -> tuple[str, Callable[[str], None]]:
        """The name the operation itself should write, and a finisher that applies the fused activation
        ``code`` into the output operand (``defined``: its SkriptND name when already defined)."""
        o = self.operand(out_operand, where)
        out = defined or self.define(out_operand, where)
        if code == 0:
            return out, lambda _: None
        if code not in (1, 2, 3):
            raise self.loc.error(where, f"fused activation code {code} is not NONE (0), RELU (1), RELU1 (2) or "
                                 "RELU6 (3)")
        pre = self.tmp(f"{out}_pre", like=o)

        def finish(src: str) -> None:
            if code == 1:
                self.emit(out, "nn.relu", [src], comment="fused RELU")
            elif code == 2:
                self.emit(out, "math.clamp", [src, Expr("-1.0"), Expr("1.0")], comment="fused RELU1")
            else:
                self.emit(out, "nn.relu", [src], {"max": 6.0}, comment="fused RELU6")
        return pre, finish


def same_padding(size: int, out: int, stride: int, kernel: int) -> tuple[int, int]:
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def geometry(b: Builder, op: dict[str, Any], where: list[Any], explicit: int, kernel: tuple[int, int],
              x: dict[str, Any], y: dict[str, Any]) -> tuple[list[int], list[int], int]:
    """``(padding [top, left, bottom, right], stride [h, w], next input index)`` of a conv/pool
    operation whose explicit form has ``explicit`` inputs."""
    ins = op["inputs"]
    conv = op["op"] in ("CONV_2D", "DEPTHWISE_CONV_2D")
    if len(ins) == explicit:
        p0 = 3 if conv else 1  # [left, right, top, bottom], then stride w, h
        left, right, top, bottom = (b.scalar(ins[i], [*where, "inputs", i]) for i in range(p0, p0 + 4))
        first = p0 + 4
        sw, sh = b.scalar(ins[first], [*where, "inputs", first]), b.scalar(ins[first + 1], [*where, "inputs", first + 1])
        return [top, left, bottom, right], [sh, sw], first + 2
    first = 3 if conv else 1
    code = b.scalar(ins[first], [*where, "inputs", first])
    sw, sh = b.scalar(ins[first + 1], [*where, "inputs", first + 1]), b.scalar(ins[first + 2],
                                                                                 [*where, "inputs", first + 2])
    if code == 2:
        return [0, 0, 0, 0], [sh, sw], first + 3
    if code != 1:
        raise b.loc.error([*where, "inputs", first], f"padding code {code} is not SAME (1) or VALID (2)")
    kh, kw = kernel
    top, bottom = same_padding(x["dims"][1], y["dims"][1], sh, kh)
    left, right = same_padding(x["dims"][2], y["dims"][2], sw, kw)
    return [top, left, bottom, right], [sh, sw], first + 3


def arity(b: Builder, op: dict[str, Any], where: list[Any], counts: tuple[int, ...], outs: int = 1) -> None:
    if len(op["inputs"]) not in counts:
        raise b.loc.error([*where, "inputs"], f"{op['op']} takes {' or '.join(map(str, counts))} inputs, "
                          f"got {len(op['inputs'])}")
    if len(op["outputs"]) != outs:
        raise b.loc.error([*where, "outputs"], f"{op['op']} has {outs} output(s), got {len(op['outputs'])}")
