"""Static checking of one operator or graph definition (spec §2.2-§2.14).

`check_definition` gives every expression a `Type` by the rules of §2.4 (the same rules a
concrete evaluator applies) and checks names, blocks and the rules of @lower, @compose and
@update. It never raises on bad input: problems are located `Diagnostic`s.

Rules in brief (spec sections in brackets):

- arithmetic `+ - * ** <? >?` on int or real, both sides of the same type; `/` and `\\` on
  int or real, `%` on int; comparisons on any type (same on both sides); `&& || ^ =>` on
  bool; `??` needs an optional left side and a non-optional right side and is never null;
  `?x` is a bool [2.4];
- packs combine element-wise, with broadcasting of single values; lists need items of the
  same type, with packs expanded by `..` [2.4];
- an optional operand makes the result optional (null propagation), except for `??` and
  `?x` [2.4.1]; `?x` in a condition promotes x to non-optional in the branch it guards;
- tensor values are allowed only where the spec allows them: tensor accesses in @lower,
  tensors as invocation arguments, results and compile-time branches in @compose/@update,
  and `.shape`/`.rank`/`.size` anywhere [2.4, 2.10, 2.12].

An expression whose type cannot be known (because of an earlier error, or because it
depends on an operator that lookup does not find) has the unknown type `?`, which is
compatible with everything: one mistake is reported once.

Modules, each a layer of `Checker` over the one before it: common.py (state, reporting,
name resolution, helpers), lengths.py (pack lengths, tensor ranks), packs.py (lists,
indexing, tensor access), expressions.py (`type_of` and the rules for the other
expressions), then lower.py (@lower) and compose.py (@compose, @update) side by side,
and checker.py (`Checker.run`, @assert, @quantize, `check_definition`).
"""

from __future__ import annotations

from skriptnd.semantics.typecheck.checker import Checker, build_scope, check_definition

__all__ = ["Checker", "build_scope", "check_definition"]
