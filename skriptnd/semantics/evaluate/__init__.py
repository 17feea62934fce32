"""Exact compile-time evaluation of expressions over concrete values (spec §2.3-§2.5).

Graph composition evaluates attribute defaults, @using symbols, @assert conditions and
output shapes for every operator invocation, so this package is a plain tree walk over
Python values (see values.py): a dict dispatches on the node type, and no symbolic
machinery is involved. Values: int, float (real), bool, str, None (null), `Pack` and
`TensorValue`.

Errors are raised as `EvalError` carrying the span of the offending sub-expression; an
identifier without a value raises `Unbound`, which callers use to tell "not evaluable yet"
(§2.9) from a genuine error.

Evaluation order and laziness: operands are evaluated left to right and evaluation stops
at the first null operand (null propagation, §2.4.1). `??`, the select operator with a
non-pack condition, and `&&`/`||`/`=>` whose non-pack left operand decides the result
do not let errors of the unneeded operand escape (so `b != 0 => a % b == 0` is safe).

Modules, in the order data flows (each imports only those before it): errors.py,
kinds.py (value kinds and type names), formatting.py (`format_value`); the value-level
operations operators.py (unary, binary, element-wise), folds.py, casts.py and functions.py
(built-in functions); walk.py (`_eval` and its dispatch table), the node handlers
expressions.py and lists.py (lists, ranges, indexing), and evaluator.py (`evaluate`, which
fills the table); names.py (`free_names`) stands apart. Names with a leading underscore
are private to the package, not to their module.
"""

from __future__ import annotations

from skriptnd.semantics.evaluate.errors import EvalError, Unbound
from skriptnd.semantics.evaluate.evaluator import evaluate
from skriptnd.semantics.evaluate.formatting import format_value
from skriptnd.semantics.evaluate.kinds import type_name_of
from skriptnd.semantics.evaluate.lists import MAX_PACK_LENGTH
from skriptnd.semantics.evaluate.names import free_names

__all__ = ["MAX_PACK_LENGTH", "EvalError", "Unbound", "evaluate", "format_value", "free_names", "type_name_of"]
