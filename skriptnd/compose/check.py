"""Graph-level checking for `sknd check` and the editor (issue 15): a graph is checked by
composing it, with the very code `sknd compose` runs, for its declared attribute defaults.

One source of truth: every invocation is bound by `semantics.binding.bind` (attribute types and
values, generic types, ranks and shapes, the callee's asserts), declared output types and shapes
are compared by the composer, control flow is composed per branch and iteration; whatever
`sknd compose` would report for the defaults is reported here, with the same code, line and
column, because it is the same diagnostic.

An attribute without a default (`batch: int;`) gets a symbolic value (a sympy symbol, sampled at
a large multiple of 840, as `skriptnd.infer` does): shapes become expressions in it, and each
callee assertion decided on the sample is judged by `_judge`:

- false whatever the symbols are: an error (E0501, as composing would say);
- true (or false) only under a condition on graph attributes: `E0611`, a warning that
  `sknd check --strict` shows, with that condition;
- true at the bounds of dynamic input extents (`s` in `real[s|10]`, which composing samples at
  their bounds) but only under a condition on them: `E0612`, a note for `--verbose`; false
  there: the error composing reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import ast
from ..diagnostics import Diagnostic, DiagnosticError, Note, Severity, register_codes
from ..semantics.binding import ASSERTION_HOOKS, Binder
from ..semantics.modules import LoadedModule, Program
from ..source import NO_SPAN

register_codes({
    "E0611": "assertion holds only under a condition on graph attributes",
    "E0612": "assertion depends on dynamic extents",
})

#: Diagnostics `sknd check` shows only with --strict (E0611) or --verbose (E0612).
STRICT_CODES = frozenset({"E0611"})
VERBOSE_CODES = frozenset({"E0612"})

_SAMPLE = 840  # divisible by 2..8: divisibility asserts hold on the sample, as in skriptnd.infer


def _attrib_decls(definition: ast.Definition) -> list[ast.ParamDecl]:
    return [d for b in definition.blocks if isinstance(b, ast.ParamBlock) and b.kind == "attrib" for d in b.items]


def _symbolic_attribs(definition: ast.Definition) -> dict[str, Any] | None:
    """Values for the attributes that have no default: a symbol for each single int; None when
    one of another type has none (nothing sensible to sample, the graph is not composed)."""
    import sympy

    from ..semantics.symbolic import SymInt

    values: dict[str, Any] = {}
    for k, decl in enumerate(d for d in _attrib_decls(definition) if d.default is None and not d.type.optional):
        if decl.type.name != "int" or decl.type.pack is not None:
            return None
        values[decl.name] = SymInt(_SAMPLE * (k + 1), sympy.Symbol(decl.name, integer=True))
    return values


def condition_text(condition: Any) -> str:
    """A sympy condition in SkriptND syntax: `c == 2 && n > 0`."""
    import sympy

    ops = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    for kind, op in ops.items():
        if isinstance(condition, kind):
            return f"{condition.lhs} {op} {condition.rhs}"
    if isinstance(condition, sympy.And | sympy.Or):
        joiner = " && " if isinstance(condition, sympy.And) else " || "
        return joiner.join(f"({condition_text(c)})" if isinstance(c, sympy.And | sympy.Or) else condition_text(c)
                           for c in condition.args)
    if isinstance(condition, sympy.Not):
        return f"!({condition_text(condition.args[0])})"
    return str(condition)


class _Judge:
    """Classifies the assertions decided on symbolic samples (see the module docstring)."""

    def __init__(self, attributes: set[str]) -> None:
        self.attributes = attributes
        self.found: list[Diagnostic] = []

    def __call__(self, binder: Binder, a: ast.Assertion, holds: bool, guards: list[Any]) -> bool:
        import sympy

        path = sympy.simplify(sympy.And(*guards))
        if path is sympy.true:
            return holds  # the outcome does not depend on the symbols
        if not holds and path is sympy.false:
            return True  # an impossible path: nothing to report
        names = {str(s) for s in path.free_symbols}
        if not holds and not names <= self.attributes:
            # false at the bounds of dynamic extents: `sknd compose` samples them there too and
            # reports it, so checking does (one source of truth)
            return False
        condition = path if holds else sympy.simplify(sympy.Not(path))
        site = binder.site.span if binder.site.span is not NO_SPAN else a.span
        notes = (Note(f"assertion of operator '{binder.sig.name}'", a.span),) if site is not a.span else ()
        if names <= self.attributes:
            code, severity = "E0611", Severity.WARNING
            message = f"the assertion of operator '{binder.sig.name}' holds only if {condition_text(condition)}"
        else:
            code, severity = "E0612", Severity.NOTE
            message = (f"the assertion of operator '{binder.sig.name}' depends on dynamic extents: "
                       f"it holds only if {condition_text(condition)}")
        self.found.append(Diagnostic(code=code, message=message, span=site, severity=severity, notes=notes))
        return True


@contextmanager
def _judging(judge: _Judge) -> Iterator[None]:
    ASSERTION_HOOKS.append(judge)
    try:
        yield
    finally:
        ASSERTION_HOOKS.pop()


def check_graph(program: Program, module: LoadedModule, definition: ast.Definition) -> list[Diagnostic]:
    """What composing this graph for its declared attribute defaults reports (see the module
    docstring); nothing for an operator, or for a graph of a module that is not the one composed."""
    if definition.kind != "graph":
        return []
    from .composer import Composer

    symbolic = _symbolic_attribs(definition)
    if symbolic is None:
        return []
    composer = Composer(program)
    from ..semantics.symbolic import recording

    judge = _Judge(set(symbolic))
    try:
        with recording(), _judging(judge):
            composer.compose_definition(module, definition, symbolic)
    except DiagnosticError as err:
        return [*judge.found, *err.diagnostics]
    except Exception:  # noqa: BLE001 - a symbolic sample the composer cannot follow: no verdict
        if not symbolic:
            raise  # with the declared defaults this is what composing does: a bug to report
        return judge.found
    return judge.found
