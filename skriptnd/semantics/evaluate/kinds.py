"""The kinds of values, and type names as messages spell them (`int`, `real..`, `tensor<real>`)."""

from __future__ import annotations

from skriptnd.semantics.values import NO_UNIFORM, Pack, TensorValue, Value

_KINDS: dict[type, str] = {bool: "bool", int: "int", float: "real", str: "str", TensorValue: "tensor", Pack: "pack"}
_NUM = ("int", "real")
_ORDERED = ("int", "real", "bool", "str")


def _kind(v: Value) -> str:
    """'int', 'real', 'bool', 'str', 'tensor' or 'pack' (bool before int: Python's bool is an int)."""
    k = _KINDS.get(type(v))
    if k is not None:
        return k
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "real"
    if isinstance(v, str):
        return "str"
    if isinstance(v, Pack):
        return "pack"
    if isinstance(v, TensorValue):
        return "tensor"
    return type(v).__name__


def type_name_of(v: Value) -> str:
    """The SkriptND type of a non-pack value: int, real, bool, str, or a tensor's dtype."""
    k = _kind(v)
    return v.dtype if k == "tensor" else k


def _item_type(v: Value) -> str | None:
    """The type name of a non-pack value, with the dtype of a tensor (lists check with this)."""
    k = _kind(v)
    if k == "tensor":
        return f"tensor<{v.dtype}>"
    return k


def _pack_item_type(p: Pack) -> str | None:
    """The item type of a pack: from its first item, else its uniform value, else unknown."""
    if len(p):
        return _item_type(p[0])
    if p.uniform is not NO_UNIFORM:
        return _item_type(p.uniform)
    return None


def _type_name(v: Value) -> str:
    """A type as the spec writes it, for messages: `int`, `real..`, `tensor<real>`."""
    if v is None:
        return "null"
    if isinstance(v, Pack):
        item = _pack_item_type(v)
        return f"{item}.." if item is not None else "pack"
    return _item_type(v) or type(v).__name__


def _intlike(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
