"""Static types of SkriptND values and expressions (spec §2.3, §2.13).

A `Type` is a primitive type name with three modifiers:

- `name`: a concrete type (`int`, `real`, `bool`, `str`), a generic type name declared in
  `@dtype` (`T`), an abstract type (`type`, `arith`, `num`), or `?` for *unknown*. An unknown
  type results from an earlier error (or from something only known at composition time); it
  is compatible with everything, so one mistake never produces a cascade of diagnostics.
- `optional`: the value may be null (§2.4.1: optionality is a property of the whole value,
  not of the items of a pack or a tensor).
- `packed`: a pack (`..`) of such values.
- `tensor`: a tensor of such items (`T[...]`), as opposed to a compile-time scalar.

`str(Type)` prints the SkriptND spelling: `optional int..`, `real[]`, `optional T[]..`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from skriptnd.syntax import ast

CONCRETE = ("int", "real", "bool", "str")
ABSTRACT = ("type", "arith", "num")
UNKNOWN_NAME = "?"

#: Which concrete types each abstract type admits (§2.13).
ADMITS: dict[str, tuple[str, ...]] = {
    "type": CONCRETE,
    "arith": ("int", "real", "bool"),
    "num": ("int", "real"),
}


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    optional: bool = False
    packed: bool = False
    tensor: bool = False

    # ------------------------------------------------------------ constructors

    @staticmethod
    def of(name: str, *, optional: bool = False, packed: bool = False, tensor: bool = False) -> Type:
        return Type(name, optional, packed, tensor)

    @staticmethod
    def from_spec(spec: ast.TypeSpec, *, tensor: bool | None = None) -> Type:
        """The type a declaration `x: spec` gives x. `tensor` defaults to whether a shape is
        written; inputs, outputs, constants and variables are tensors even without one."""
        is_tensor = spec.shape is not None if tensor is None else tensor
        return Type(spec.name or UNKNOWN_NAME, spec.optional, spec.pack is not None, is_tensor)

    # ------------------------------------------------------------ queries

    @property
    def unknown(self) -> bool:
        return self.name == UNKNOWN_NAME

    @property
    def concrete(self) -> bool:
        return self.name in CONCRETE

    # ------------------------------------------------------------ modifiers

    def with_(self, **changes: bool | str) -> Type:
        return replace(self, **changes)  # type: ignore[arg-type]

    def item(self) -> Type:
        """The type of one item of a pack (the type itself when not packed)."""
        return replace(self, packed=False) if self.packed else self

    def as_packed(self, packed: bool = True) -> Type:
        return replace(self, packed=packed) if self.packed != packed else self

    def as_optional(self, optional: bool = True) -> Type:
        return replace(self, optional=optional) if self.optional != optional else self

    def as_tensor(self, tensor: bool = True) -> Type:
        return replace(self, tensor=tensor) if self.tensor != tensor else self

    def element(self) -> Type:
        """The scalar type of one element: not packed, not a tensor (optionality kept)."""
        return Type(self.name, self.optional)

    def __str__(self) -> str:
        text = ("optional " if self.optional else "") + self.name
        if self.tensor:
            text += "[]"
        if self.packed:
            text += ".."
        return text


UNKNOWN = Type(UNKNOWN_NAME)
INT = Type("int")
REAL = Type("real")
BOOL = Type("bool")
STR = Type("str")
INTS = Type("int", packed=True)


def base_of(name: str, generics: Mapping[str, str]) -> str:
    """The abstract base of a generic type name (`num` for `T: num`), or the name itself."""
    return generics.get(name, name)


def same_name(a: str, b: str) -> bool:
    """Whether two type names are compatible: equal, or one of them unknown or abstract
    (an abstract *value* type says too little to find a mismatch)."""
    return a == b or a == UNKNOWN_NAME or b == UNKNOWN_NAME or a in ABSTRACT or b in ABSTRACT


def is_numeric(name: str, generics: Mapping[str, str]) -> bool:
    """int or real, or a generic / abstract type that only admits those (`num`)."""
    base = base_of(name, generics)
    return base in ("int", "real", "num", UNKNOWN_NAME)


def is_arith(name: str, generics: Mapping[str, str]) -> bool:
    base = base_of(name, generics)
    return base in ("int", "real", "bool", "num", "arith", UNKNOWN_NAME)
