"""The composition state and the helpers every part of the composer shares (skriptnd.compose.composer,
skriptnd.compose.control): one definition body's frame, the atomic policies, the extents of a tensor as
binding sees them, and the located errors composition raises."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skriptnd.compose.ir import Graph, Tensor, Value
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.semantics.modules import LoadedModule
from skriptnd.semantics.values import Pack, TensorValue
from skriptnd.source import Span
from skriptnd.syntax import ast

NUMPY_DTYPES = {"real": np.float32, "int": np.int64, "bool": np.bool_}
#: The values an int tensor may hold: TOSA's int32, what every backend computes in (compile-time values,
#: attributes and extents, are Python ints of any size; a tensor's are not).
INT_TENSOR_RANGE = (-(2 ** 31), 2 ** 31 - 1)

#: Decides whether an invocation stays one operation: (qualified name, module, definition).
AtomicPolicy = Callable[[str, LoadedModule, ast.Definition], bool]


def default_atomic(name: str, module: LoadedModule, definition: ast.Definition) -> bool:
    """Standard operators stay atomic (they run on kernels); so do operators without @compose."""
    return module.is_stdlib or not _compose_blocks(definition, "compose")


def decompose_all(name: str, module: LoadedModule, definition: ast.Definition) -> bool:
    """Go down to operators with @lower (or intrinsics): nothing with @compose stays atomic."""
    return not _compose_blocks(definition, "compose")


def _compose_blocks(defn: ast.Definition, kind: str) -> list[ast.Stmt]:
    return [s for b in defn.blocks if isinstance(b, ast.ComposeBlock) and b.kind == kind for s in b.items]


def _params(defn: ast.Definition, kind: str) -> list[ast.ParamDecl]:
    return [d for b in defn.blocks if isinstance(b, ast.ParamBlock) and b.kind == kind for d in b.items]



def _fits(dtype: str, values: Sequence[Any], what: str, span: Span) -> None:
    """E0502 at span when an int tensor would hold a value outside INT_TENSOR_RANGE (it could not run)."""
    if dtype != "int":
        return
    low, high = INT_TENSOR_RANGE
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and not low <= v <= high:
            raise _error("E0502", f"{what} holds {v}, outside the range of an int tensor ({low} to {high}, "
                         "32 bits)", span)


def _error(code: str, message: str, span: Span, hint: str | None = None, notes: tuple[Note, ...] = ()) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code=code, message=message, span=span, hint=hint, notes=notes)])


@dataclass
class _Frame:
    """The composition state of one definition body."""

    module: LoadedModule
    definition: ast.Definition
    env: dict[str, Any]  # compile-time symbols
    dtypes: dict[str, str]
    scope: str  # label prefix, '' or 'conv1.'
    tensors: dict[str, Value] = field(default_factory=dict)
    graph: Graph | None = None

    def child(self, scope: str | None = None) -> _Frame:
        """A nested block: sees everything here, its assignments stay local (may shadow)."""
        return _Frame(self.module, self.definition, self.env, self.dtypes,
                      self.scope if scope is None else scope, dict(self.tensors), self.graph)

    def values(self) -> dict[str, Any]:
        """Compile-time view: symbols, and tensors as TensorValues (for ?x, x.shape, x.rank)."""
        out = dict(self.env)
        for name, value in self.tensors.items():
            out[name] = _as_value(value)
        return out


def _as_value(value: Value) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return Pack([TensorValue(t.dtype, _dims(t)) for t in value])
    return TensorValue(value.dtype, _dims(value))


def _dims(t: Tensor) -> tuple[Any, ...]:
    """A tensor's extents for binding: a dynamic one is a symbolic extent (semantics.symbolic)
    whose sample value is its upper bound, so output shapes come out as expressions in the
    dynamic input extents, with upper bounds (§3.1)."""
    if not t.dynamic:
        return t.shape
    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,
        symbol,
    )

    bounds = t.bounds or (None,) * t.rank
    symbolic = t.symbolic or (None,) * t.rank
    return tuple(d if d is not None else SymInt(b if b is not None else 1,
                                                e if e is not None else symbol(f"{t.name}_{i}"))
                 for i, (d, b, e) in enumerate(zip(t.shape, bounds, symbolic, strict=True)))


def _split_dims(shape: tuple[Any, ...]) -> tuple[tuple[int | None, ...], tuple[int | None, ...] | None,
                                                 tuple[Any, ...] | None]:
    """Output extents as (shape with None for dynamic ones, their upper bounds, their expressions)."""
    if not any(hasattr(d, "expr") for d in shape):
        return shape, None, None
    return (tuple(None if hasattr(d, "expr") else d for d in shape),
            tuple(int(d) if hasattr(d, "expr") else None for d in shape),
            tuple(d.expr if hasattr(d, "expr") else None for d in shape))
