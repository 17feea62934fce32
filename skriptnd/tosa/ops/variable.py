"""VARIABLE, VARIABLE_WRITE, VARIABLE_READ (TOSA 1.0 "Variable operators", extension EXT-VARIABLE).

A TOSA variable is a persistent mutable tensor that outlives one graph invocation, named by ``uid``. The
pseudo-buffer resources live in a :class:`VariableStore` that the caller owns and passes to every variable
operator as ``store=``; :meth:`VariableStore.begin_graph` starts a new graph invocation (it clears the
``seen`` flags, as the spec requires before each execution).

* ``variable(initial_value=None, *, uid, var_shape, type, store)``: declares the variable; the first
  declaration allocates it (``var_shape``, TOSA type name ``type``) and copies ``initial_value`` in (then
  REQUIRE its type and shape equal ``type`` / ``var_shape``); declaring the same ``uid`` twice within one
  invocation is unpredictable (``REQUIRE(!var_tensor.seen)``).
* ``variable_write(input1, *, uid, store)``: REQUIRE the variable is declared and seen in this
  invocation and that ``input1`` has its shape and type; stores a copy.
* ``variable_read(*, uid, store)``: REQUIRE the variable is declared and has been written; returns a copy.

Every failed condition is a REQUIRE in the pseudocode, so it raises :class:`TosaUnpredictable`.
TOSA 0.30 has no variables: ``version="0.30"`` raises :class:`TosaError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from skriptnd.tosa.ops.common import tensor
from skriptnd.tosa.ops.dtypes import BF16Array, numpy_dtype
from skriptnd.tosa.ops.errors import check_version, error_if, require

__all__ = ["VariableStore", "variable", "variable_write", "variable_read"]

_TYPES = ("bool", "int8", "int16", "int32", "fp16", "bf16", "fp32")


@dataclass
class _Variable:
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray
    is_written: bool = False
    seen: bool = False


class VariableStore:
    """The persistent variable tensors of one TOSA program (``variable_tensor_lookup`` by ``uid``)."""

    def __init__(self) -> None:
        self._vars: dict[int, _Variable] = {}

    def begin_graph(self) -> None:
        """Start a graph invocation: clear every variable's ``seen`` flag."""
        for v in self._vars.values():
            v.seen = False

    def __contains__(self, uid: object) -> bool:
        return uid in self._vars

    def lookup(self, uid: int) -> _Variable | None:
        return self._vars.get(int(uid))

    def allocate(self, uid: int, shape: tuple[int, ...], dtype: str) -> _Variable:
        v = _Variable(shape, dtype, np.zeros(shape, numpy_dtype(dtype)))
        self._vars[int(uid)] = v
        return v


def _store(op: str, store: object, version: str) -> VariableStore:
    check_version(version)
    error_if(version == "0.30", f"{op} is not a TOSA 0.30 operator", op)
    if not isinstance(store, VariableStore):
        raise TypeError(f"{op}: pass store=VariableStore() (the persistent variable tensors)")
    return store


def _declared(op: str, uid: int, store: object, version: str, condition: str) -> _Variable:
    """The declared variable ``uid`` of ``store`` (``variable_tensor_lookup``); REQUIRE(``condition``, the
    operator's wording of "it is declared") where there is none."""
    var = _store(op, store, version).lookup(uid)
    require(var is not None, condition, op)
    assert var is not None
    return var


def _out(values: np.ndarray, t: str) -> np.ndarray:
    return values.copy().view(BF16Array) if t == "bf16" else values.copy()


def variable(initial_value: ArrayLike = None, *, uid: int, var_shape: ArrayLike, type: str, store: VariableStore,  # noqa: A002
             version: str = "1.0") -> None:
    """VARIABLE: declare variable ``uid`` of shape ``var_shape`` and TOSA type ``type``."""
    op = "VARIABLE"
    store = _store(op, store, version)
    error_if(type not in _TYPES, f"var_t {type!r} is not a TOSA tensor type", op)
    shape = tuple(int(d) for d in np.asarray(var_shape).reshape(-1))
    error_if(any(d < 0 for d in shape), "var_shape has a negative dimension", op)
    var = store.lookup(uid)
    if var is None:
        var = store.allocate(uid, shape, type)
        if initial_value is not None:
            a, t = tensor(initial_value, op, "initial_value")
            require(t == type, f"var_t == in_t ({type} vs {t})", op)
            require(a.shape == shape, f"var_shape == shape ({list(shape)} vs {list(a.shape)})", op)
            var.data = a.copy()
            var.is_written = True
    else:
        require(not var.seen, "!var_tensor.seen (uid declared twice in one graph invocation)", op)
    var.seen = True


def variable_write(input1: ArrayLike, *, uid: int, store: VariableStore, version: str = "1.0") -> None:
    """VARIABLE_WRITE: assign ``input1`` to variable ``uid``."""
    op = "VARIABLE_WRITE"
    var = _declared(op, uid, store, version, "variable_tensor (uid is declared)")
    require(var.seen, "variable_tensor.seen (declared in this graph invocation)", op)
    a, t = tensor(input1, op, "input1")
    require(var.shape == a.shape, f"variable_tensor.shape == shape ({list(var.shape)} vs {list(a.shape)})", op)
    require(var.dtype == t, f"variable_tensor.type == in_t ({var.dtype} vs {t})", op)
    var.data = a.copy()
    var.is_written = True


def variable_read(*, uid: int, store: VariableStore, version: str = "1.0") -> np.ndarray:
    """VARIABLE_READ: the current value of variable ``uid``."""
    op = "VARIABLE_READ"
    var = _declared(op, uid, store, version, "variable_tensor != NULL (uid is declared)")
    require(var.is_written, "variable_tensor.is_written", op)
    return _out(var.data, var.dtype)
