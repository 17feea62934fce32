"""Values of the @lower evaluator (spec §2.12).

A formula is evaluated over its *index space*: one numpy axis per (scalar) index symbol, in the
order the symbols are introduced. Every runtime value is an array broadcastable to that space
(with exactly as many dimensions, extents 1 where it does not vary) or a plain Python scalar.

Evaluation is *staged*: the plan is built once per binding, and everything that does not
depend on tensor data is computed then (index arithmetic, masks of bounded indices, constant
sub-expressions). What does depend on data is a `Dyn`: a closure over the runtime context that
the plan calls on every run. The kinds of staged values:

- Python int / float / bool / str / None (null): compile-time scalars;
- tuple: a pack (its structure is always known when the plan is built; items may be anything);
- `Aff`: an int index expression affine in the index symbols (kept symbolic, so that tensor
  accesses with such indices become numpy views instead of gathers);
- `Arr`: a concrete array over the space with its validity mask (bounded indices that skip)
  and error mask (e.g. an unguarded index out of range inside a select branch);
- `Dyn`: data dependent, computed on each run (it yields an `Arr` or a scalar);
- `BIdx`: a bounded index `|i|` or `|i <> lo : hi|`, only meaningful as a tensor index;
- `TRef` / `TStack`: a tensor (or a tensor-pack item), the subject of a tensor access;
- `Counter`: the data-dependent extent symbol of an output (§2.12, data dependent shapes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skriptnd.diagnostics import Diagnostic, register_codes
from skriptnd.source import NO_SPAN, Span

register_codes({"E0710": "error while evaluating @lower"})

#: The one place where SkriptND types map to numpy dtypes.
NP_DTYPES: dict[str, np.dtype] = {
    "real": np.dtype(np.float32),
    "int": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}
REAL = NP_DTYPES["real"]
INT = NP_DTYPES["int"]
BOOL = NP_DTYPES["bool"]


def np_dtype(kind: str) -> np.dtype:
    try:
        return NP_DTYPES[kind]
    except KeyError:
        raise LoweringError(f"tensors of type '{kind}' cannot be evaluated") from None


def kind_of(value: Concrete | Aff) -> str:
    """'int', 'real', 'bool' (or 'str') of a concrete value."""
    if isinstance(value, Arr):
        value = value.data
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, int | np.integer | Aff):
        return "int"
    if isinstance(value, float | np.floating):
        return "real"
    if isinstance(value, str):
        return "str"
    if isinstance(value, np.ndarray):
        k = value.dtype.kind
        return "bool" if k == "b" else "int" if k in "iu" else "real" if k == "f" else "str"
    raise LoweringError(f"unexpected value {value!r}")


class LoweringError(Exception):
    """An error while building or running a @lower plan; `span` is the formula's."""

    code = "E0710"

    def __init__(self, message: str, span: Span = NO_SPAN) -> None:
        super().__init__(message)
        self.message = message
        self.span = span

    def __str__(self) -> str:
        if self.span is NO_SPAN:
            return self.message
        return f"{self.span}: {self.message}"

    def to_diagnostic(self) -> Diagnostic:
        return Diagnostic(self.code, self.message, self.span)


# ---------------------------------------------------------------- the index space


@dataclass
class Space:
    """The axes of one formula: extents, and the first index value of each (chunks start later)."""

    lengths: tuple[int, ...]
    starts: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.lengths)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.lengths

    @property
    def size(self) -> int:
        n = 1
        for x in self.lengths:
            n *= x
        return n

    def axis_array(self, axis: int) -> np.ndarray:
        shape = [1] * self.ndim
        shape[axis] = self.lengths[axis]
        return (np.arange(self.lengths[axis], dtype=INT) + self.starts[axis]).reshape(shape)

    def ones(self) -> tuple[int, ...]:
        return (1,) * self.ndim


class Aff:
    """`const + sum(coef * index)` over the axes of a space (terms: sorted (axis, coef), coef != 0)."""

    __slots__ = ("terms", "const", "space", "_arr")

    def __init__(self, terms: dict[int, int] | tuple[tuple[int, int], ...], const: int, space: Space) -> None:
        items = terms.items() if isinstance(terms, dict) else terms
        self.terms = tuple(sorted((a, c) for a, c in items if c != 0))
        self.const = int(const)
        self.space = space
        self._arr: np.ndarray | None = None

    @staticmethod
    def make(terms: dict[int, int], const: int, space: Space) -> Aff | int:
        aff = Aff(terms, const, space)
        return aff if aff.terms else aff.const

    def arr(self) -> np.ndarray:
        """The values over the space (int64, extent 1 on the axes it does not use)."""
        if self._arr is None:
            sp = self.space
            out = np.full(sp.ones(), self.const, dtype=INT)
            for a, c in self.terms:
                out = out + c * sp.axis_array(a)
            self._arr = out
        return self._arr

    def range(self) -> tuple[int, int]:
        """Minimum and maximum over the space (the space must not be empty)."""
        lo = hi = self.const
        for a, c in self.terms:
            first = self.space.starts[a]
            last = first + self.space.lengths[a] - 1
            lo += min(c * first, c * last)
            hi += max(c * first, c * last)
        return lo, hi

    def __repr__(self) -> str:
        return f"Aff({dict(self.terms)}, {self.const})"


class Arr:
    """A concrete array over the space, with optional validity and error masks."""

    __slots__ = ("data", "valid", "err")

    def __init__(self, data: np.ndarray, valid: np.ndarray | None = None, err: np.ndarray | None = None) -> None:
        self.data = data
        self.valid = valid
        self.err = err

    def __repr__(self) -> str:
        return f"Arr({self.data.dtype}{list(self.data.shape)})"


@dataclass(eq=False)
class Factor:
    """A tensor access that is a numpy view: `get(rt)` gives the view, whose dimensions are the
    index-space axes `axes`; `padded` when skipped (bounded) entries read as zero."""

    get: Callable[[Runtime], np.ndarray]
    axes: tuple[int, ...]
    padded: bool = False


class Dyn:
    """A data-dependent value: `fn(rt)` computes it on each run.

    `varying`: it changes between iterations of a sequential loop (reads the output being
    written, or a loop parameter). `factors`/`scale`: it is `scale * prod(factors)` (for the
    einsum fast path). `uses`: how many staged values consume it (cached per run when > 1).
    """

    __slots__ = ("fn", "varying", "factors", "scale", "uses", "axis")

    def __init__(self, fn: Callable[[Runtime], Concrete], varying: bool = False,
                 factors: Sequence[Factor] | None = None, scale: Concrete = 1) -> None:
        self.fn = fn
        self.varying = varying
        self.factors = tuple(factors) if factors is not None else None
        self.scale = scale
        self.uses = 0
        self.axis: int | None = None  # a sequential-loop parameter: the index of this axis

    def get(self, rt: Runtime) -> Concrete:
        if self.uses > 1 or (rt.seq and not self.varying):
            cache = rt.iter_cache if self.varying else rt.cache
            try:
                return cache[self]
            except KeyError:
                value = cache[self] = self.fn(rt)
                return value
        return self.fn(rt)


def param(axis: int) -> Dyn:
    """The value of index axis `axis` in a sequential loop iteration (a Python int)."""
    d = Dyn(lambda rt: rt.params[axis], varying=True)
    d.axis = axis
    return d


@dataclass(eq=False)
class BIdx:
    """`|value|` (low and high None: skip out-of-range entries) or `|value <> low : high|`."""

    value: Staged
    low: Staged = None
    high: Staged = None

    @property
    def skip(self) -> bool:
        return self.low is None


@dataclass(eq=False)
class TRef:
    """A tensor read or written by formulas: an input, output or constant (item of a pack)."""

    name: str
    item: int | None
    shape: tuple[int, ...]
    kind: str
    output: bool = False

    def array(self, rt: Runtime) -> np.ndarray:
        value = rt.arrays[self.name]
        return value if self.item is None else value[self.item]


@dataclass(eq=False)
class TStack:
    """A tensor pack indexed by a runtime value: `xs[y[i..]]` (items must share a shape)."""

    name: str
    refs: tuple[TRef, ...]
    index: Staged


@dataclass(eq=False)
class Counter:
    """The data-dependent extent symbol `k` of an output, used as an index on a left-hand side."""

    name: str


@dataclass(eq=False)
class RangeIdx:
    """A range `b:e:s` used as a tensor index (resolved against the indexed dimension)."""

    start: int | None
    stop: int | None
    step: int | None

    def resolve(self, extent: int) -> tuple[int, ...]:
        return tuple(range(extent)[slice(self.start, self.stop, self.step)])


@dataclass
class Runtime:
    """What a plan step sees while running: tensors by name and the caches of `Dyn` values."""

    arrays: dict[str, Any]
    cache: dict[Any, Any] = field(default_factory=dict)
    iter_cache: dict[Any, Any] = field(default_factory=dict)
    params: dict[int, int] = field(default_factory=dict)
    seq: bool = False
    counts: dict[tuple[str, int | None, int], int] = field(default_factory=dict)
    offsets: dict[tuple[str, int | None, int], int] = field(default_factory=dict)
    stacks: dict[str, np.ndarray] = field(default_factory=dict)


# ---------------------------------------------------------------- the kinds of values, as types

#: a compile-time scalar (None: null)
Scalar = int | float | bool | str | None
#: numpy data over the index space: an array broadcastable to it, one of its items, or a Python number
Data = np.ndarray | np.generic | int | float | bool
#: a validity or error mask over the space (None: valid everywhere / no error anywhere)
Mask = np.ndarray | None
#: what the operators of :mod:`skriptnd.lower.ops` compute on: a scalar, numpy data, or an `Arr` with its masks
Concrete = Scalar | np.ndarray | np.generic | Arr
#: any staged value (see the module docstring): what `Stager.ev` returns
Staged = Concrete | Aff | Dyn | BIdx | TRef | TStack | Counter | RangeIdx | tuple["Staged", ...]
