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
from typing import TYPE_CHECKING, Any

from skriptnd.compose.composer import Composer, _Frame
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, Severity, register_codes
from skriptnd.semantics.binding import ASSERTION_HOOKS, Binder, Site, bind
from skriptnd.semantics.evaluate import EvalError, evaluate
from skriptnd.semantics.modules import LoadedModule, Program
from skriptnd.semantics.values import GUARD_STACK, Pack, TensorValue, guards_suspended, recording
from skriptnd.source import NO_SPAN
from skriptnd.syntax import ast

if TYPE_CHECKING:
    import sympy

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
    undefaulted = [d for d in _attrib_decls(definition) if d.default is None and not d.type.optional]
    if any(decl.type.name != "int" or decl.type.pack is not None for decl in undefaulted):
        return None
    if not undefaulted:
        return {}  # composed with plain ints: sympy is not even imported
    import sympy

    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    return {decl.name: SymInt(_SAMPLE * (k + 1), sympy.Symbol(decl.name, integer=True))
            for k, decl in enumerate(undefaulted)}


def symbolic_attribs(definition: ast.Definition) -> dict[str, Any] | None:
    """The attribute values a graph is checked with beyond its defaults (see `_symbolic_attribs`), for other
    readers of its composed shapes (hover)."""
    return _symbolic_attribs(definition)


def condition_text(condition: sympy.Basic) -> str:
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


_TRIALS = (1, 2, 3, 4, 8)


def _substituted(value: Any, assignment: dict[Any, int]) -> Any:
    """value with every symbolic extent replaced by its value under assignment."""
    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    if isinstance(value, SymInt):
        result = value.expr.xreplace(assignment)
        return int(result) if result.is_Integer else value
    if isinstance(value, Pack):
        return Pack([_substituted(v, assignment) for v in value])
    if isinstance(value, TensorValue):
        return TensorValue(value.dtype, tuple(_substituted(d, assignment) for d in value.shape))
    return value


def _holds_for(binder: Binder, a: ast.Assertion, assignment: dict[Any, int]) -> bool | None:
    """The assertion's value with the symbols replaced by assignment; None if it cannot be told."""
    env = {k: _substituted(v, assignment) for k, v in binder.env.items()}
    try:
        with guards_suspended():
            value = evaluate(a.condition, env, binder.dtypes)
    except (EvalError, TypeError, ValueError, ZeroDivisionError):
        return None
    if value is None:
        return True
    return all(v is not False for v in value) if isinstance(value, Pack) else bool(value)


def _counterexample(binder: Binder, a: ast.Assertion, symbols: list[Any],
                    assumed: list[tuple[Binder, ast.Assertion]] = (), context: list[Any] = ()) -> dict[Any, int] | None:
    """Values of the symbols (small ones, a bounded search) for which the assertion is false
    while every assumed assertion (an operator's own, about its inputs) holds, and every decision
    taken on the way there (`context`: the guards recorded so far, e.g. a static `if`) stays."""
    import itertools

    import sympy

    symbols = sorted({*symbols, *(s for g in context for s in getattr(g, "free_symbols", ()))}, key=str)
    if len(symbols) > 3:
        return None
    for values in itertools.product(_TRIALS, repeat=len(symbols)):
        assignment = {k: sympy.Integer(v) for k, v in zip(symbols, values, strict=True)}
        if any(g.xreplace(assignment) is sympy.false for g in context):
            continue
        if _holds_for(binder, a, assignment) is False and \
                all(_holds_for(b, own, assignment) is not False for b, own in assumed):
            return {k: int(v) for k, v in assignment.items()}
    return None


class _Judge:
    """Classifies the assertions decided on symbolic samples (see the module docstring)."""

    def __init__(self, attributes: set[str]) -> None:
        self.attributes = attributes
        self.found: list[Diagnostic] = []
        self.assumed: list[tuple[Binder, ast.Assertion]] = []  # assertions taken as true

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
        counter: dict[Any, int] | None = None
        if holds:
            outer = GUARD_STACK[-1] if GUARD_STACK else None
            context = [g for g in outer or () if g not in guards]
            counter = _counterexample(binder, a, sorted(path.free_symbols, key=str), self.assumed, context)
            if counter is None:
                return True  # holds on every sample tried: the path was sufficient, not necessary
        site = binder.site.span if binder.site.span is not NO_SPAN else a.span
        notes = (Note(f"assertion of operator '{binder.sig.name}'", a.span),) if site is not a.span else ()
        if names <= self.attributes:
            code, severity = "E0611", Severity.WARNING
            message = f"the assertion of operator '{binder.sig.name}' holds only if {condition_text(condition)}"
            if counter:
                message += " (it fails for " + ", ".join(f"{k} = {v}" for k, v in counter.items()) + ")"
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
    symbolic = _symbolic_attribs(definition)
    if symbolic is None:
        return []
    composer = Composer(program, sampling=True)
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


# ---------------------------------------------------------------- operator bodies

_GENERIC_SAMPLE = {"type": "real", "arith": "real", "num": "real"}


def _operator_inputs(definition: ast.Definition, dtypes: dict[str, str], attribs: dict[str, Any]) -> list[Any] | None:
    """Symbolic sample inputs of an operator: each named extent a symbol (one per name), each
    literal extent its int; None when a shape is not a plain list of names and ints (packs,
    spreads, expressions, `~`): those operators are checked where they are invoked."""
    import sympy

    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    symbols: dict[str, Any] = dict(attribs)
    inputs: list[Any] = []
    for b in definition.blocks:
        if not (isinstance(b, ast.ParamBlock) and b.kind == "input"):
            continue
        for decl in b.items:
            spec = decl.type
            if spec.pack is not None or spec.shape is None or spec.rank is not None:
                return None
            dims: list[Any] = []
            for item in spec.shape:
                if item.pack is not None or item.distinct or item.bound is not None:
                    return None
                if isinstance(item.value, ast.IntLit):
                    dims.append(item.value.value)
                elif isinstance(item.value, ast.Name):
                    name = item.value.id
                    if name not in symbols:  # one sample for all: unifying two names never fails on it
                        symbols[name] = SymInt(_SAMPLE, sympy.Symbol(name, integer=True, positive=True))
                    dims.append(symbols[name])
                else:  # an expression of extents named before (`2 * c`)
                    try:
                        value = evaluate(item.value, symbols, dtypes)
                    except EvalError:
                        return None
                    if isinstance(value, bool) or not isinstance(value, int):
                        return None
                    dims.append(value)
            dtype = dtypes.get(spec.name, spec.name)
            if dtype not in ("real", "int", "bool", "str"):
                return None
            inputs.append(TensorValue(dtype, tuple(dims)))
    return inputs


def _operator_sample(definition: ast.Definition) -> tuple[dict[str, str], dict[str, Any], list[Any]] | None:
    """(generic types, attributes, inputs) to compose an operator's body with: each generic type its default
    or a sample, attributes without a default symbols, input extents symbols; None where there is none."""
    dtypes = {d.name: d.default or _GENERIC_SAMPLE.get(d.base, "real")
              for b in definition.blocks if isinstance(b, ast.DtypeBlock) for d in b.items}
    attribs = _symbolic_attribs(definition)
    if attribs is None:
        return None
    inputs = _operator_inputs(definition, dtypes, attribs)
    return None if inputs is None else (dtypes, attribs, inputs)


def compose_body(program: Program, module: LoadedModule, definition: ast.Definition) -> Graph | None:
    """An operator's @compose body composed for symbolic input extents (as `check_operator` does, callees
    atomic), for the shapes of its tensors (`real[n, 2 * c]`: hover); None where it cannot be composed."""
    sample = _operator_sample(definition)
    if sample is None:
        return None
    dtypes, attribs, inputs = sample
    composer = Composer(program, atomic=lambda *_: True, sampling=True)
    graph = Graph(name=definition.name, program=program)
    frame = _Frame(module, definition, {}, {}, "", graph=graph)
    try:
        binding = bind(definition, attribs, inputs, list(dtypes.values()), Site(span=definition.name_span))
        args = [Tensor(name=d.name, dtype=v.dtype, shape=v.shape, kind="input")
                for d, v in zip(binding.signature.inputs, inputs, strict=True)]
        composer._decompose(frame, module, definition, binding, args, "")
    except DiagnosticError:
        return None
    except Exception:  # noqa: BLE001 - a symbolic sample the composer cannot follow, as in check_operator
        return None
    return graph


class _OperatorJudge(_Judge):
    """As _Judge, with every symbol a parameter of the operator; its own assertions are assumed."""

    def __init__(self, definition: ast.Definition) -> None:
        super().__init__(set())
        self.own = {id(a) for b in definition.blocks if isinstance(b, ast.AssertBlock) for a in b.items}

    def __call__(self, binder: Binder, a: ast.Assertion, holds: bool, guards: list[Any]) -> bool:
        if id(a) in self.own:
            self.assumed.append((binder, a))
            return True
        self.attributes = {str(s) for g in guards for s in getattr(g, "free_symbols", ())}
        return super().__call__(binder, a, holds, guards)


def check_operator(program: Program, module: LoadedModule, definition: ast.Definition) -> list[Diagnostic]:
    """The invocations of an operator's @compose body, bound for symbolic input extents and the
    declared attribute defaults (each callee kept atomic: its own body is checked on its own).
    Only what lies inside this definition is reported; operators whose input shapes are not
    plain names and ints are left to the graphs that invoke them."""
    if definition.kind == "graph" or not any(isinstance(b, ast.ComposeBlock) and b.kind == "compose"
                                             for b in definition.blocks):
        return []
    sample = _operator_sample(definition)
    if sample is None:
        return []
    dtypes, attribs, inputs = sample
    judge = _OperatorJudge(definition)
    composer = Composer(program, atomic=lambda *_: True, sampling=True)
    graph = Graph(name=definition.name, program=program)
    frame = _Frame(module, definition, {}, {}, "", graph=graph)
    found: list[Diagnostic] = []
    try:
        with recording(), _judging(judge):
            binding = bind(definition, attribs, inputs, list(dtypes.values()), Site(span=definition.name_span))
            args = [Tensor(name=d.name, dtype=v.dtype, shape=v.shape, kind="input")
                    for d, v in zip(binding.signature.inputs, inputs, strict=True)]
            composer._decompose(frame, module, definition, binding, args, "")
    except DiagnosticError as err:
        found = list(err.diagnostics)
    except Exception:  # noqa: BLE001 - a symbolic sample the composer cannot follow: no verdict
        found = []
    span = definition.span
    inside = [d for d in [*judge.found, *found]
              if d.span.file == span.file and span.line <= d.span.line <= span.end_line
              and d.span != definition.name_span]
    return inside
