"""The importable API: `import skriptnd; skriptnd.infer(...)`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.fileio import read_source
from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.binding import bind
from skriptnd.semantics.values import Pack, TensorValue, recording
from skriptnd.source import Span
from skriptnd.syntax import ast, parse_module


@dataclass
class TensorType:
    """An inferred output: dtype and shape (None extents are dynamic; `shapes` for tensor packs)."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] | None
    shapes: list[tuple[int | None, ...]] | None = None


@dataclass
class InferResult:
    outputs: list[TensorType] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: With named (symbolic) input extents: the conditions, as sympy relations, under which the
    #: symbolic output shapes hold (from the operator's asserts and data-dependent choices).
    guards: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics

    def __getitem__(self, name: str) -> TensorType:
        return next(o for o in self.outputs if o.name == name)


@cache
def _load(path: str) -> tuple[ast.Module | None, tuple[Diagnostic, ...]]:
    source, diags = read_source(path)
    if source is None:
        return None, tuple(diags)
    module, syntax = parse_module(source.text, source.path)
    return module, tuple(syntax)


def find_operator(name: str, module_path: str | Path | None = None) -> tuple[ast.Definition | None, list[Diagnostic]]:
    """`module.op` from the standard library, or `op` from the module file at module_path."""
    if module_path is not None:
        path, op = str(module_path), name
    else:
        module_name, _, op = name.rpartition(".")
        if module_name not in STDLIB_MODULES:
            return None, [Diagnostic(code="E0203", message=f"'{name}' is not a standard library operator; "
                                     f"write it as module.operator with module one of {', '.join(STDLIB_MODULES)}",
                                     span=Span("<infer>", 1, 1, 1, 2))]
        path = str(stdlib_dir() / f"{module_name}.sknd")
    module, diags = _load(path)
    if module is None or diags:
        return None, list(diags)
    for d in module.definitions:
        if d.name == op:
            return d, []
    import difflib

    close = difflib.get_close_matches(op, [d.name for d in module.definitions], n=1)
    return None, [Diagnostic(code="E0204", message=f"no operator '{op}' in {path}", span=Span(path, 1, 1, 1, 2),
                             hint=f"did you mean '{close[0]}'?" if close else None)]


def _dims(shape: Sequence[Any], symbols: dict[str, Any], hints: Mapping[str, int]) -> tuple[Any, ...]:
    """Named extents become SymInts; each name gets its hint, or a distinct multiple of 840
    (divisible by 2..8, so divisibility asserts on the sample hold)."""
    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    out = []
    for d in shape:
        if isinstance(d, str):
            if d not in symbols:
                symbols[d] = SymInt.named(d, hints.get(d, 840 * (len(symbols) + 1)))
            out.append(symbols[d])
        else:
            out.append(d)
    return tuple(out)


def _tensor(shape: Sequence[Any] | None, dtype: str, symbols: dict[str, Any], hints: Mapping[str, int]) -> Any:
    if shape is None:
        return None
    if isinstance(shape, list) and shape and isinstance(shape[0], list | tuple):
        return Pack([TensorValue(dtype, _dims(s, symbols, hints)) for s in shape])
    return TensorValue(dtype, _dims(shape, symbols, hints))


def _output_shape(shape: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    if shape is None:
        return None
    return tuple(getattr(d, "expr", d) for d in shape)


def _value(v: object) -> Any:
    if isinstance(v, list | tuple):
        return Pack([_value(x) for x in v])
    return v


def infer(op: str | ast.Definition, attribs: Mapping[str, Any] | None = None,
          input_shapes: Sequence[Any] = (), dtypes: str | Sequence[str] = "real", *,
          type_args: Sequence[str] = (), module: str | Path | None = None,
          hints: Mapping[str, int] | None = None) -> InferResult:
    """Output shapes and dtypes of one operator invocation, or the diagnostics saying why it is invalid.

    op: `"nn.conv"` (standard library), an operator name in `module` (a .sknd file), or a parsed
    Definition. input_shapes: one shape (list of ints) per input; a list of shapes for a tensor-pack
    input; None for an omitted optional input. dtypes: one dtype for all inputs or one per input.
    Attribute values are Python values (lists for packs). An extent may be a name (a str): the
    output shapes are then sympy expressions in those names, valid under `InferResult.guards`;
    `hints` gives sample values for the names (used where a decision needs a value).

    >>> r = infer("nn.conv", {"stride": 2, "padding": [1, 1, 1, 1]}, [["N", 3, "H", "W"], [8, 3, 3, 3]])
    >>> r.outputs[0].shape
    (N, 8, floor(H/2 - 1/2) + 1, floor(W/2 - 1/2) + 1)

    >>> r = infer("nn.conv", {"stride": 2, "padding": [1, 1, 1, 1]}, [[1, 3, 32, 32], [8, 3, 3, 3], [8]])
    >>> r.outputs[0].shape
    (1, 8, 16, 16)
    """
    if isinstance(op, ast.Definition):
        definition, diags = op, []
    else:
        definition, diags = find_operator(op, module)
    if definition is None:
        return InferResult(diagnostics=diags)
    kinds = [dtypes] * len(input_shapes) if isinstance(dtypes, str) else list(dtypes)
    symbols: dict[str, Any] = {}
    inputs = [_tensor(s, k, symbols, hints or {}) for s, k in zip(input_shapes, kinds, strict=True)]
    attrs = {k: _value(v) for k, v in (attribs or {}).items()}
    if not symbols:
        try:
            binding = bind(definition, attrs, inputs, type_args)
        except DiagnosticError as err:
            return InferResult(diagnostics=err.diagnostics)
        return InferResult(outputs=[TensorType(o.name, o.dtype, o.shape, o.shapes) for o in binding.outputs])
    with recording() as guards:
        try:
            binding = bind(definition, attrs, inputs, type_args)
        except DiagnosticError as err:
            return InferResult(diagnostics=err.diagnostics, guards=list(guards))
    outputs = [TensorType(o.name, o.dtype, _output_shape(o.shape),
                          [_output_shape(s) for s in o.shapes] if o.shapes is not None else None)
               for o in binding.outputs]
    return InferResult(outputs=outputs, guards=list(guards))
