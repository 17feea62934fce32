"""The built-in functions of spec §2.4, named once for the checker, the module resolver and the
evaluator (which implements exactly these)."""

from __future__ import annotations

#: real -> real. `erf` is not in the §2.4 list but nn.erf and nn.gelu use it (docs/spec-errata.md S10).
REAL_FUNCTIONS = frozenset({
    "sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "round", "floor", "ceil", "frac", "erf",
})
#: int -> int and real -> real.
NUM_FUNCTIONS = frozenset({"abs", "sign"})
BUILTIN_FUNCTIONS = REAL_FUNCTIONS | NUM_FUNCTIONS
