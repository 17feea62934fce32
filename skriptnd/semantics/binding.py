"""Binding an operator invocation to concrete attributes and input shapes (spec §2.5, §2.6,
§2.9, §2.13).

Everything here works on plain Python values (ints, Packs, TensorValues): it runs for every
invocation during graph composition, so it never touches sympy. The per-definition analysis
(binding order, which defaults are deferred) is computed once and cached in
semantics.signature; `Signature`, `signature` and `binding_order_diagnostics` are re-exported
here because callers of `bind` need them together.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.semantics.affine import Affine, affine
from skriptnd.semantics.evaluate import EvalError, Unbound, evaluate, format_value, free_names, type_name_of
from skriptnd.semantics.signature import (
    Signature,
    analysed,
    binding_order_diagnostics,
    expr_text,
    item_text,
    same_type_operator,
    shape_text,
    signature,
)
from skriptnd.semantics.values import GUARD_STACK, NO_UNIFORM, Pack, TensorValue, Value, recording
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast

if TYPE_CHECKING:
    from sympy.logic.boolalg import Boolean

CONCRETE_TYPES = ("int", "real", "bool", "str")
ABSTRACT_ALLOWS = {"type": set(CONCRETE_TYPES), "arith": {"int", "real", "bool"}, "num": {"int", "real"}}


#: Judges of assertions decided on symbolic samples (skriptnd.check.graph): called with the
#: binder, the assertion, its outcome on the sample and the guards of that outcome (sympy
#: conditions); returns the outcome binding goes on with. Empty outside graph checking, so
#: composition with concrete values never pays for it.
AssertionHook = Callable[["Binder", ast.Assertion, bool, list["Boolean"]], bool]
ASSERTION_HOOKS: list[AssertionHook] = []


# ---------------------------------------------------------------- invocation binding


@dataclass
class OutputInfo:
    name: str
    dtype: str
    shape: tuple[int | None, ...] | None  # None for a tensor pack (see shapes) or an omitted output
    shapes: list[tuple[int | None, ...]] | None = None  # per item, for tensor packs
    bounds: tuple[int | None, ...] | None = None  # upper bounds of dynamic extents
    optional: bool = False


@dataclass
class Binding:
    signature: Signature
    env: dict[str, Value]
    dtypes: dict[str, str]
    outputs: list[OutputInfo] = field(default_factory=list)


@dataclass
class Site:
    """Where an invocation is written, so errors point at the caller's code."""

    span: Span = NO_SPAN
    args: Sequence[Span] = ()
    attrs: Mapping[str, Span] = field(default_factory=dict)
    label_expr: Callable[[ast.Expr], str] | None = None  # source text of an expression, for assert labels


class Binder:
    def __init__(self, sig: Signature, site: Site) -> None:
        self.sig = sig
        self.site = site
        self.env: dict[str, Value] = {}
        self.dtypes: dict[str, str] = {}
        self.pending_uniform: dict[str, Value] = {}
        self.absent: set[str] = set()  # symbols of input shape items absent by a false bool length

    # -- reporting

    def fail(self, code: str, message: str, decl_span: Span | None = None, at: Span | None = None,
             hint: str | None = None) -> None:
        primary = at if at is not None and at is not NO_SPAN else self.site.span
        notes: tuple[Note, ...] = ()
        if primary is NO_SPAN and decl_span is not None:
            primary = decl_span
        elif decl_span is not None and decl_span is not NO_SPAN:
            notes = (Note(f"declared in {self.sig.kind} '{self.sig.name}'", decl_span),)
        raise DiagnosticError([Diagnostic(code=code, message=message, span=primary, notes=notes, hint=hint)])

    def eval(self, expr: ast.Expr, what: str) -> Value:
        try:
            return evaluate(expr, self.env, self.dtypes)
        except EvalError as err:
            notes = (Note(f"while evaluating {what} of operator '{self.sig.name}'", err.span),)
            span = self.site.span if self.site.span is not NO_SPAN else err.span
            raise DiagnosticError([Diagnostic(code=err.code, message=err.message, span=span, notes=notes)]) from None

    def known(self, name: str) -> bool:
        return name in self.env

    # -- generic types

    def bind_dtype(self, name: str, concrete: str, span: Span | None) -> None:
        decl = next((d for d in self.sig.dtypes if d.name == name), None)
        if decl is None:
            return
        if concrete not in ABSTRACT_ALLOWS.get(decl.base, set(CONCRETE_TYPES)):
            self.fail("E0412", f"type '{concrete}' is not allowed for generic type '{name}: {decl.base}' "
                      f"of operator '{self.sig.name}'", decl.span, span)
        bound = self.dtypes.get(name)
        if bound is None:
            self.dtypes[name] = concrete
        elif bound != concrete:
            self.fail("E0412", f"generic type '{name}' is '{bound}' from an earlier argument but '{concrete}' here",
                      decl.span, span)

    def check_type(self, declared: str, concrete: str, what: str, decl_span: Span, at: Span | None) -> None:
        if declared in CONCRETE_TYPES:
            if declared != concrete:
                self.fail("E0412" if what.startswith("input") else "E0301",
                          f"{what} must be of type '{declared}', not '{concrete}'", decl_span, at)
        elif declared in ABSTRACT_ALLOWS:
            if concrete not in ABSTRACT_ALLOWS[declared]:
                self.fail("E0301", f"{what} must be of type '{declared}', not '{concrete}'", decl_span, at)
        else:
            self.bind_dtype(declared, concrete, at)

    # -- attributes (§2.5, §2.6.2 step 1)

    def bind_attributes(self, attribs: Mapping[str, Value]) -> None:
        declared = {a.name: a for a in self.sig.attribs}
        for name in attribs:
            if name not in declared:
                close = difflib.get_close_matches(name, list(declared), n=1)
                self.fail("E0209", f"{self.sig.kind} '{self.sig.name}' has no attribute '{name}'",
                          self.sig.definition.name_span, self.site.attrs.get(name),
                          hint=f"did you mean '{close[0]}'?" if close else None)
        for a in self.sig.attribs:
            if a.name in attribs:
                self.env[a.name] = self.attribute_value(a, attribs[a.name])
            elif a.type.optional and a.default is None:
                self.env[a.name] = None
            elif a.default is not None and a.name not in self.sig.deferred:
                self.env[a.name] = self.attribute_value(a, self.eval(a.default, f"the default of '{a.name}'"),
                                                        default=True)
            elif a.default is None:
                self.fail("E0410", f"attribute '{a.name}' of operator '{self.sig.name}' must be given a value",
                          a.span, hint=f"add {{{a.name}=...}} to the invocation")

    def attribute_value(self, a: ast.ParamDecl, value: Value, default: bool = False) -> Value:
        at = self.site.attrs.get(a.name) if not default else None
        what = f"attribute '{a.name}'"
        if value is None:
            if not a.type.optional:
                self.fail("E0504", f"{what} of operator '{self.sig.name}' cannot be null", a.span, at)
            return None
        packed = a.type.pack is not None
        if isinstance(value, Pack):
            if not packed:
                self.fail("E0304", f"{what} takes a single value, not a pack", a.span, at)
            for item in value:
                self.check_type(a.type.name, type_name_of(item), what, a.span, at)
            return value
        self.check_type(a.type.name, type_name_of(value), what, a.span, at)
        if packed:
            self.pending_uniform[a.name] = value  # uniform value: length known later (§2.6.2 step 4)
        return value

    # -- inputs (§2.6.2 step 2)

    def bind_inputs(self, inputs: Sequence[Value]) -> None:
        decls = self.sig.inputs
        if len(inputs) > len(decls):
            self.fail("E0212", f"{self.sig.kind} '{self.sig.name}' takes {len(decls)} inputs, {len(inputs)} given",
                      self.sig.definition.name_span)
        values = list(inputs) + [None] * (len(decls) - len(inputs))
        defaulted: set[int] = set()
        for i, d in enumerate(decls):
            if values[i] is None and d.default is not None:
                defaulted.add(i)
                values[i] = TensorValue(self.resolve_dtype(d.type.name), ())
            if values[i] is None and not d.type.optional:
                self.fail("E0212", f"input '{d.name}' of operator '{self.sig.name}' is not optional and must be given",
                          d.span)
        for i in self.sig.order:
            if i in defaulted and self.shape_known(decls[i]):
                # §2.6 (l. 690): an input default is a 0-rank value; when the declared shape is fully
                # prescribed by earlier inputs (nn.lstm's `h0: real[b,n] = 0.0`), the value fills
                # that shape instead of failing the rank check against it.
                shape, _ = self.output_shape(decls[i], None)
                values[i] = TensorValue(self.resolve_dtype(decls[i].type.name), shape)
            self.bind_input(decls[i], values[i], self.arg_span(i))
        for name in self.absent:
            self.env.setdefault(name, None)  # declared only by absent conditional items: null (§2.6, l. 642)

    def shape_known(self, d: ast.ParamDecl) -> bool:
        """Whether d's whole shape is prescribed by symbols already bound (no rank, pack or `~`)."""
        spec = d.type
        return (spec.shape is not None and spec.pack is None and not spec.rank and not self.declared_symbols(spec)
                and not any(it.distinct or it.value is None for it in spec.shape))

    def arg_span(self, i: int) -> Span | None:
        return self.site.args[i] if i < len(self.site.args) else None

    def resolve_dtype(self, name: str) -> str:
        return self.dtypes.get(name, name)

    def bind_input(self, d: ast.ParamDecl, value: Value, at: Span | None) -> None:
        spec = d.type
        if value is None:
            for name in self.declared_symbols(spec):
                self.env.setdefault(name, None)
            self.env[d.name] = None
            return
        if spec.pack is not None:
            if not isinstance(value, Pack):
                self.fail("E0304", f"input '{d.name}' of operator '{self.sig.name}' is a pack of tensors; "
                          "pass a list such as [a, b]", d.span, at)
            if spec.pack.length is not None:
                self.bind_value(spec.pack.length, len(value), f"the length of input pack '{d.name}'", d, at)
            tensors = list(value)
        else:
            if isinstance(value, Pack):
                self.fail("E0304", f"input '{d.name}' of operator '{self.sig.name}' is a single tensor, "
                          "not a pack", d.span, at)
            tensors = [value]
        distinct: dict[str, list[Value]] = {}
        for t in tensors:
            self.check_type(spec.name, t.dtype, f"input '{d.name}'", d.span, at)
            self.bind_shape(d, t.shape, at, distinct)
        for name, items in distinct.items():
            self.env[name] = Pack(items)
        self.env[d.name] = value

    def declared_symbols(self, spec: ast.TypeSpec) -> set[str]:
        names = {spec.rank} if spec.rank else set()
        for item in spec.shape or ():
            for expr in (item.value, item.pack.length if item.pack else None):
                if expr is not None:
                    names |= {n for n in free_names(expr) if n not in self.env}
        return names

    def bind_value(self, expr: ast.Expr, value: Value, what: str, d: ast.ParamDecl, at: Span | None) -> None:
        """Bind value to expr: declare its symbol (affine) or check it (prescribed)."""
        if not (free_names(expr) - self.env.keys()):
            expected = self.eval(expr, what)
            if isinstance(expected, bool):
                expected = int(expected)
            if isinstance(value, Pack) and expected is not None and not isinstance(expected, Pack):
                # §2.4 (l. 405): a non-packed extent expanded with a length (`1 ..(n)`, layout.stack)
                # is repeated, so every extent it covers must equal it.
                expected = Pack([expected] * len(value))
            if expected != value:
                self.fail("E0403", f"{what} is {format_value(value)} but operator '{self.sig.name}' expects "
                          f"{format_value(expected)} ('{expr_text(expr)}')", d.span, at)
            return
        a = affine(expr, lambda n: n not in self.env)
        if a is None:
            self.fail("E0405", f"cannot deduce {what} from '{expr_text(expr)}'", d.span, at)
        self.env[a.symbol] = self.solve(a, value, what, d, at)

    def solve(self, a: Affine, value: Value, what: str, d: ast.ParamDecl, at: Span | None) -> Value:
        if isinstance(value, Pack):
            return Pack([self.solve(a, v, what, d, at) for v in value])
        if value is None:
            return None
        x = a.solve(value)
        if x is None:
            self.fail("E0403", f"{what} is {value}, which is not of the form {a.scale} * {a.symbol} + {a.offset} "
                      "for an integer {a.symbol}", d.span, at)
        return x

    def bind_shape(self, d: ast.ParamDecl, shape: tuple[int | None, ...], at: Span | None,
                   distinct: dict[str, list[Value]]) -> None:
        spec = d.type
        if spec.rank:
            self.bind_value(ast.Name(id=spec.rank, span=d.span), len(shape), f"the rank of input '{d.name}'", d, at)
        if spec.shape is None:
            return
        items = spec.shape
        lengths: list[int | None] = []
        conditional: set[int] = set()  # items `x..(cond)` with a bool length: x is one optional extent
        flexible: int | None = None
        flexible_affine: Affine | None = None
        for k, item in enumerate(items):
            if item.pack is None:
                if item.value is not None and not (free_names(item.value) - self.env.keys()):
                    v = self.eval(item.value, f"extent '{expr_text(item.value)}' of input '{d.name}'")
                    lengths.append(0 if v is None else 1)
                else:
                    lengths.append(1)
                continue
            length = item.pack.length
            if length is not None and not (free_names(length) - self.env.keys()):
                n = self.eval(length, f"the length of '{item_text(item)}'")
                if isinstance(n, bool):
                    conditional.add(k)
                elif isinstance(n, int) and n < 0:
                    # e.g. `s..(axis < 0 ? axis + rank : axis)` with axis < -rank: no shape fits (this
                    # used to slice the shape with a negative count and crash with an IndexError)
                    self.fail("E0402", f"input '{d.name}' of operator '{self.sig.name}' has rank {len(shape)}, "
                              f"which does not fit its shape {shape_text(spec)}: the length of "
                              f"'{item_text(item)}' is {n}", d.span, at)
                lengths.append(int(n) if n is not None else 0)
                continue
            if length is None and isinstance(item.value, ast.Name) and isinstance(self.env.get(item.value.id), Pack):
                lengths.append(len(self.env[item.value.id]))
                continue
            flexible = k
            flexible_affine = affine(length, lambda n: n not in self.env) if length is not None else None
            lengths.append(None)
        fixed = sum(n for n in lengths if n is not None)
        rank = len(shape)
        expected = shape_text(spec)
        if flexible is None:
            if fixed != rank:
                self.fail("E0402", f"input '{d.name}' of operator '{self.sig.name}' has rank {rank}, "
                          f"expected {fixed} (shape {expected})", d.span, at)
        else:
            rest = rank - fixed
            if rest < 0:
                self.fail("E0402", f"input '{d.name}' of operator '{self.sig.name}' has rank {rank}, "
                          f"expected at least {fixed} (shape {expected})", d.span, at)
            if flexible_affine is not None:
                x = flexible_affine.solve(rest)
                if x is None or x < 0:
                    self.fail("E0402", f"input '{d.name}' of operator '{self.sig.name}' has rank {rank}, which does "
                              f"not fit its shape {expected}", d.span, at)
                self.env[flexible_affine.symbol] = x
            lengths[flexible] = rest
        pos = 0
        for k, (item, n) in enumerate(zip(items, lengths, strict=True)):
            dims = shape[pos:pos + n]
            pos += n
            if item.value is None:
                continue
            what = f"extent '{item_text(item)}' of input '{d.name}'"
            if k in conditional:
                # §2.6 (l. 642): with a bool length, `x..(cond)` is the single extent x when cond is
                # true and no extent when it is false; x is an optional int, not a pack. An absent
                # item binds nothing (another item may still declare x: space_to_batch's
                # `c..(data_format == 'NCX'), s..(d), c..(data_format != 'NCX')`).
                if n == 0:
                    self.absent |= free_names(item.value) - self.env.keys()
                    continue
                self.bind_value(item.value, dims[0], what, d, at)
                continue
            if item.pack is None:
                if n == 0:
                    continue
                value: Value = dims[0]
            else:
                value = Pack(dims)
            if item.distinct:
                name = item.value.id if isinstance(item.value, ast.Name) else None
                if name is None:
                    self.fail("E0405", "a per-item extent '..x' must be a plain name", d.span, at)
                distinct.setdefault(name, []).append(value)
                continue
            if item.bound is not None and item.pack is None and value is not None:
                bound = self.eval(item.bound, f"the upper bound of {what}")
                if bound is not None and value > bound:
                    self.fail("E0403", f"{what} is {value}, above its upper bound {bound}", d.span, at)
            self.bind_value(item.value, value, what, d, at)

    # -- deferred attributes and packed attribute lengths (§2.6.2 steps 3-4)

    def bind_deferred(self, given: Mapping[str, Value]) -> None:
        for a in self.sig.attribs:
            if a.name in self.sig.deferred and a.name not in given:
                value = self.eval(a.default, f"the default of attribute '{a.name}'")
                if value is None and not a.type.optional:
                    self.fail("E0410", f"attribute '{a.name}' of operator '{self.sig.name}' must be given a value "
                              "(its default is null here)", a.span)
                self.env[a.name] = self.attribute_value(a, value, default=True)
        packed = [a for a in self.sig.attribs if a.type.pack is not None and self.env.get(a.name) is not None]
        # Lists first: their lengths may be what a uniform value needs (§2.6.2 step 4).
        packed.sort(key=lambda a: not isinstance(self.env[a.name], Pack))
        for a in packed:
            length = a.type.pack.length
            value = self.env[a.name]
            if a.name in self.pending_uniform and not isinstance(value, Pack):
                if length is None or free_names(length) - self.env.keys():
                    self.fail("E0406", f"attribute '{a.name}' is given a single value, but its length "
                              f"'{expr_text(length) if length is not None else '..'}' is not known; give a list",
                              a.span, self.site.attrs.get(a.name))
                n = self.eval(length, f"the length of attribute '{a.name}'")
                self.env[a.name] = Pack([value] * int(n), uniform=value)
            elif length is not None:
                self.bind_value(length, len(value), f"the length of attribute '{a.name}'", a,
                                self.site.attrs.get(a.name))

    # -- @using and @assert (§2.9)

    def run_usings_and_asserts(self) -> None:
        unchecked = list(self.sig.asserts)
        # Assertions found false whose message still needs @using symbols defined later: nn.deconv's
        # `(output_size + paddings - fd) / stride + 1 == ix` is decidable before `ox`, which its
        # message shows. Its report waits for those symbols; a later @using that fails meanwhile
        # (often because of the very violation) yields to it, with what it can show.
        failed: list[ast.Assertion] = []

        def unknown(names: set[str]) -> set[str]:
            return names - self.env.keys() - set(self.dtypes)

        def check_ready() -> None:
            for a in failed:
                if not unknown(_message_names(a)):
                    self.report_assertion(a)
            for a in list(unchecked):
                if not unknown(free_names(a.condition)):
                    unchecked.remove(a)
                    if not self.assertion_holds(a):
                        if not unknown(_message_names(a)):
                            self.report_assertion(a)
                        failed.append(a)

        try:
            for u in self.sig.usings:
                check_ready()
                value = self.eval(u.value, "a @using definition")
                self.assign(u.target, value, u)
            check_ready()
            failed += [a for a in unchecked if not self.assertion_holds(a)]
        except DiagnosticError as err:
            if failed and err.diagnostics[0].code != "E0501":
                self.report_assertion(failed[0])
            raise
        if failed:
            self.report_assertion(failed[0])

    def assign(self, target: ast.LValue, value: Value, u: ast.UsingDecl) -> None:
        if isinstance(target, ast.LName):
            if target.pack is not None:
                if value is not None and not isinstance(value, Pack):
                    self.fail("E0304", f"'{target.name}' is declared as a pack but its value is not", u.span)
                if target.pack.length is not None and value is not None:
                    self.bind_using_length(target.pack.length, len(value), target.name, u)
            self.env[target.name] = value
            return
        if isinstance(target, ast.LList):
            if value is None:
                for name in _lvalue_names(target):
                    self.env[name] = None
                return
            if not isinstance(value, Pack):
                self.fail("E0304", "a list on the left of '=' needs a pack on the right", u.span)
            self.destructure(target.items, list(value), u)
            return
        self.fail("E0304", "invalid left-hand side in @using", u.span)

    def destructure(self, items: Sequence[ast.LValue], values: list[Value], u: ast.UsingDecl) -> None:
        sizes: list[int | None] = []
        for it in items:
            if isinstance(it, ast.LName) and it.pack is None:
                sizes.append(1)
            elif isinstance(it, ast.LName | ast.LZip):
                width = 1 if isinstance(it, ast.LName) else len(it.items)
                length = it.pack.length if it.pack else None
                if length is not None and not (free_names(length) - self.env.keys()):
                    sizes.append(width * int(self.eval(length, "a pack length")))
                else:
                    sizes.append(None)
            else:
                self.fail("E0304", "nested lists cannot be unpacked", u.span)
        unknown = [i for i, s in enumerate(sizes) if s is None]
        fixed = sum(s for s in sizes if s is not None)
        if len(unknown) > 1:
            self.fail("E0406", "at most one pack of unknown length can take the rest of a list", u.span)
        if unknown:
            sizes[unknown[0]] = len(values) - fixed
        if sum(s for s in sizes if s is not None) != len(values) or any(s is not None and s < 0 for s in sizes):
            self.fail("E0406", f"cannot unpack {len(values)} items into {len(items)} targets", u.span)
        pos = 0
        for it, size in zip(items, sizes, strict=True):
            part = values[pos:pos + size]
            pos += size
            if isinstance(it, ast.LName) and it.pack is None:
                self.env[it.name] = part[0]
            elif isinstance(it, ast.LName):
                if it.pack.length is not None:
                    self.bind_using_length(it.pack.length, len(part), it.name, u)
                self.env[it.name] = Pack(part)
            else:
                width = len(it.items)
                if len(part) % width:
                    self.fail("E0406", f"cannot unzip {len(part)} items into {width} packs", u.span)
                for j, name in enumerate(it.items):
                    self.env[name.name] = Pack(part[j::width])
                if it.pack.length is not None:
                    self.bind_using_length(it.pack.length, len(part) // width, it.items[0].name, u)

    def bind_using_length(self, length: ast.Expr, n: int, name: str, u: ast.UsingDecl) -> None:
        if not (free_names(length) - self.env.keys()):
            expected = self.eval(length, f"the length hint of '{name}'")
            if expected != n:
                self.fail("E0406", f"'{name}' has {n} items but its length hint says {expected}", u.span)
            return
        a = affine(length, lambda x: x not in self.env)
        if a is None or a.solve(n) is None:
            self.fail("E0406", f"'{name}' has {n} items, which does not fit its length hint", u.span)
        self.env[a.symbol] = a.solve(n)

    def assertion_holds(self, a: ast.Assertion) -> bool:
        if not ASSERTION_HOOKS:
            return self._assertion_value(a)

        with recording() as guards:
            holds = self._assertion_value(a)
        if not guards:  # decided for every value of the symbols: the hook has nothing to judge
            return holds
        outer = GUARD_STACK[-1] if GUARD_STACK else None
        if outer is not None:
            outer.extend(g for g in guards if g not in outer)
        return ASSERTION_HOOKS[-1](self, a, holds, list(guards))

    def _assertion_value(self, a: ast.Assertion) -> bool:
        value = self.eval(a.condition, "an assertion")
        if value is None:
            return True
        return all(v is not False for v in value) if isinstance(value, Pack) else bool(value)

    def report_assertion(self, a: ast.Assertion) -> None:
        message = "assertion failed"
        if a.message is not None:
            text = self.shown(a.message, "an assertion message")
            if text is not None:
                message = text
        shown = []
        for arg in a.args:
            label = arg.label or (self.site.label_expr(arg.value) if self.site.label_expr else expr_text(arg.value))
            shown.append(f"{label} = {format_value(self.shown(arg.value, 'an assertion argument'))}")
        if shown:
            message += " (" + ", ".join(shown) + ")"
        primary = self.site.span if self.site.span is not NO_SPAN else a.span
        notes = (Note(f"assertion of operator '{self.sig.name}'", a.span),) if primary is not a.span else ()
        raise DiagnosticError([Diagnostic(code="E0501", message=message, span=primary, notes=notes)])

    def shown(self, expr: ast.Expr, what: str) -> Value:
        """A value for an assertion message; '?' when it needs a symbol that never got a value."""
        if free_names(expr) - self.env.keys() - set(self.dtypes):
            return "?"
        return self.eval(expr, what)

    # -- outputs

    def bind_outputs(self) -> list[OutputInfo]:
        return [self.output(d) for d in self.sig.outputs]

    def output(self, d: ast.ParamDecl) -> OutputInfo:
        spec = d.type
        dtype = self.resolve_dtype(spec.name)
        if spec.shape is None:
            return OutputInfo(d.name, dtype, None, optional=spec.optional)
        if spec.pack is not None:
            n = None
            if spec.pack.length is not None:
                n = self.eval(spec.pack.length, f"the length of output pack '{d.name}'")
            shapes = [self.output_shape(d, j) for j in range(int(n or 0))]
            return OutputInfo(d.name, dtype, None, shapes=[s for s, _ in shapes], optional=spec.optional)
        shape, bounds = self.output_shape(d, None)
        return OutputInfo(d.name, dtype, shape, bounds=bounds if any(b is not None for b in bounds) else None,
                          optional=spec.optional)

    def output_shape(self, d: ast.ParamDecl, item: int | None) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        dims: list[int | None] = []
        bounds: list[int | None] = []
        role = "input" if any(d.name == x.name for x in self.sig.inputs) else "output"  # graph inputs too
        for it in d.type.shape or ():
            bound = self.eval(it.bound, f"the upper bound of {role} '{d.name}'") if it.bound is not None else None
            if it.value is None or (isinstance(it.value, ast.Name) and it.value.id not in self.env
                                    and it.bound is not None):
                count = 1
                if it.pack is not None and it.pack.length is not None:
                    count = int(self.eval(it.pack.length, f"the rank of {role} '{d.name}'"))
                dims.extend([None] * count)
                bounds.extend([bound] * count)
                continue
            value = self.eval(it.value, f"the shape of {role} '{d.name}'")
            if it.distinct:
                if not isinstance(value, Pack) or item is None:
                    self.fail("E0304", f"per-item extent of {role} '{d.name}' must be a pack", d.span)
                value = value[item]
            if value is None:
                continue
            if isinstance(value, Pack):
                if it.pack is None and not it.distinct:
                    self.fail("E0304", f"extent '{item_text(it)}' of {role} '{d.name}' is a pack; "
                              "expand it with '..'", d.span)
                if it.pack is not None and it.pack.length is not None:
                    n = self.eval(it.pack.length, f"the length of '{item_text(it)}'")
                    if n != len(value):
                        self.fail("E0406", f"'{item_text(it)}' has {len(value)} items, expected {n}", d.span)
                dims.extend(v if v is None or isinstance(v, int) else int(v) for v in value)
                bounds.extend([bound] * len(value))
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    self.fail("E0301", f"extent '{item_text(it)}' of {role} '{d.name}' is not an int "
                              f"({format_value(value)})", d.span)
                if it.pack is not None:
                    n = 1 if it.pack.length is None else self.eval(it.pack.length, "a repetition count")
                    dims.extend([value] * int(n))
                    bounds.extend([bound] * int(n))
                else:
                    dims.append(value)
                    bounds.append(bound)
        for i, v in enumerate(dims):
            if v is not None and v < 0:
                self.fail("E0403", f"{role} '{d.name}' would have a negative extent {v} at dimension {i}", d.span)
        return tuple(dims), tuple(bounds)


def _message_names(a: ast.Assertion) -> set[str]:
    names = free_names(a.message) if a.message is not None else set()
    for arg in a.args:
        names |= free_names(arg.value)
    return names


def _lvalue_names(target: ast.LValue) -> list[str]:
    if isinstance(target, ast.LName):
        return [target.name]
    if isinstance(target, ast.LList):
        return [n for it in target.items for n in _lvalue_names(it)]
    if isinstance(target, ast.LZip):
        return [n.name for n in target.items]
    return []


#: The types a standard comparison may mix (erratum L2).
NUMERIC = frozenset({"int", "real"})


def _check_same_types(b: Binder, sig: Signature, explicit: bool = False) -> None:
    """A standard comparison compares two numbers of either numeric type (``int`` with ``real`` as the
    Khronos reference does: erratum L2), or two values of one type; not a bool or str with another type."""
    if not same_type_operator(sig.definition):
        return
    x, y = b.dtypes.get("X"), b.dtypes.get("Y")
    if x is not None and y is not None and x != y and not {x, y} <= NUMERIC:
        what = "the generic types" if explicit else "the operands"
        b.fail("E0412", f"{what} of '{sig.name}' are '{x}' and '{y}': a comparison takes two numbers (int or "
               "real, mixed as they are) or two values of one type", sig.dtypes[1].span,
               None if explicit else b.arg_span(1),
               hint=f"convert one operand with layout.cast<{x}> or layout.cast<{y}>")


def bind(definition: ast.Definition, attribs: Mapping[str, Value] | None = None, inputs: Sequence[Value] = (),
         type_args: Sequence[str] = (), site: Site | None = None) -> Binding:
    """Bind one invocation; raises DiagnosticError with located diagnostics when it is invalid.

    inputs are TensorValues (a Pack of them for a tensor-pack input, None for an omitted
    optional input), attribs are compile-time values by attribute name.
    """
    sig, problems = analysed(definition)
    if problems:
        raise DiagnosticError(list(problems))
    b = Binder(sig, site or Site())
    attribs = dict(attribs or {})
    if len(type_args) > len(sig.dtypes):
        b.fail("E0212", f"operator '{sig.name}' has {len(sig.dtypes)} generic types, {len(type_args)} given",
               definition.name_span)
    for decl, concrete in zip(sig.dtypes, type_args, strict=False):
        b.bind_dtype(decl.name, concrete, None)
    _check_same_types(b, sig, explicit=True)
    b.bind_attributes(attribs)
    b.bind_inputs(inputs)
    for decl in sig.dtypes:
        if decl.name not in b.dtypes:
            if decl.default is None:
                b.fail("E0306", f"cannot deduce generic type '{decl.name}' of operator '{sig.name}'", decl.span,
                       hint=f"give it explicitly: {sig.name}<{'real' if decl.base != 'type' else 'int'}>(...)")
            b.dtypes[decl.name] = decl.default
    _check_same_types(b, sig)
    b.bind_deferred(attribs)
    b.run_usings_and_asserts()
    outputs = b.bind_outputs()
    return Binding(signature=sig, env=b.env, dtypes=b.dtypes, outputs=outputs)


__all__ = ["Binding", "OutputInfo", "Signature", "Site", "Unbound", "bind", "binding_order_diagnostics",
           "shape_text", "signature", "NO_UNIFORM"]
