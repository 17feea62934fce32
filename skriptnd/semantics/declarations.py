"""Filling the declaration table of a definition (spec §2.2, §2.6).

`ScopeBuilder` fills the root scope (semantics.scope) following the processing order of §2.2:
@dtype → @attrib → @input → @using → @constant → @variable → @output. It implements the
declaration rules of shapes (§2.6): in @input, an extent, a pack length, a rank capture
`^(r)` or a distinct extent `..t` that is an *affine* expression (`a * x + b`, integer
literals a and b) of a not-yet-declared identifier x declares x; an expression of declared
identifiers only is a prescribed value; anything else cannot be bound (E0405). Outputs,
constants and variables may only use declared identifiers, except that a graph may omit its
output shapes and an operator output may introduce a data-dependent symbol together with an
upper bound (`s|k`, §2.6.1; E0411 without one). Attribute pack lengths `int..(k)` declare k
when it is new.

Expressions are typed by an `ExprTyper` (see typecheck/expressions.py), so that this module
stays about names (it never imports typecheck: the checker imports it); `typecheck.build_scope`
runs the whole checker and returns the finished table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from skriptnd.diagnostics import Note
from skriptnd.semantics.affine import affine
from skriptnd.semantics.scope import (
    PARAM_KIND,
    Ctx,
    ExprTyper,
    Forward,
    Kind,
    Lin,
    Scope,
    Symbol,
    describe,
    lin_value,
)
from skriptnd.semantics.show import did_you_mean, show, show_lvalue
from skriptnd.semantics.types import ABSTRACT, ADMITS, CONCRETE, INT, UNKNOWN, Type, same_name
from skriptnd.source import Span
from skriptnd.syntax import ast


def blocks_of(defn: ast.Definition, name: str) -> list[ast.Block]:
    return [b for b in defn.blocks if ast.block_name(b) == name]


def lvalue_names(target: ast.LValue) -> Iterator[ast.LName]:
    if isinstance(target, ast.LName):
        yield target
    elif isinstance(target, ast.LList):
        for item in target.items:
            yield from lvalue_names(item)
    elif isinstance(target, ast.LZip):
        yield from target.items


def _names_in(expr: ast.Expr) -> list[ast.Name]:
    """Identifiers of an expression in source order (format fields of strings excluded)."""
    out: list[ast.Name] = []
    stack: list[ast.Node] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.append(node)
        elif isinstance(node, ast.StrLit):
            continue
        else:
            stack.extend(reversed(list(node.children())))
    return out


class ScopeBuilder:
    """Declares the names of the declaration blocks, in §2.2 order, into a root scope."""

    def __init__(self, defn: ast.Definition, typer: ExprTyper) -> None:
        self.defn = defn
        self.typer = typer
        self.root = Scope()
        self.is_graph = defn.kind == "graph"
        self._deferred: list[tuple[ast.Expr, Callable[[Type], None]]] = []

    # ------------------------------------------------------------ entry point

    def build(self) -> Scope:
        self._forward_index()
        self._dtypes()
        self._params("attrib")
        self._params("input")
        for expr, then in self._deferred:  # attribute defaults and pack lengths (deferred, §2.6.2)
            then(self.typer.type_of(expr, self.root, Ctx("attrib")))
        self._deferred.clear()
        self._usings()
        for kind in ("constant", "variable", "output"):
            self._params(kind)
        return self.root

    # ------------------------------------------------------------ helpers

    def report(self, code: str, message: str, span: Span, *, notes: Iterable[Note] = (),
               hint: str | None = None) -> None:
        self.typer.report(code, message, span, notes=notes, hint=hint)

    def declare(self, sym: Symbol, scope: Scope | None = None) -> Symbol:
        scope = scope or self.root
        previous = scope.declare(sym)
        if previous is not None:
            self.report("E0202", f"'{sym.name}' is already declared as {describe(previous.kind)} "
                        f"(line {previous.span.line}); each name of a definition must be unique",
                        sym.span, notes=[Note(f"'{sym.name}' first declared here", previous.span)])
            return previous
        return sym

    def _forward_index(self) -> None:
        forward = self.root.forward
        for block in self.defn.blocks:
            name = ast.block_name(block)
            if isinstance(block, ast.ParamBlock):
                for decl in block.items:
                    forward.setdefault(decl.name, Forward(name, decl.span))
            elif isinstance(block, ast.UsingBlock):
                for u in block.items:
                    for lname in lvalue_names(u.target):
                        forward.setdefault(lname.name, Forward(name, lname.span))
            elif isinstance(block, ast.ComposeBlock):
                for stmt in block.items:
                    if isinstance(stmt, ast.Assign):
                        for target in stmt.targets:
                            for lname in lvalue_names(target):
                                forward.setdefault(lname.name, Forward(name, lname.span))

    def is_new(self, name: str, scope: Scope | None = None) -> bool:
        """An identifier that neither is declared yet nor names something of a later block."""
        if (scope or self.root).lookup(name) is not None:
            return False
        ahead = self.root.forward.get(name)
        return ahead is None or ahead.block in ("compose", "update")

    def check_type_name(self, spec: ast.TypeSpec, what: str) -> Type | None:
        """E0308 for unknown or abstract type names; returns the element type or None."""
        name = spec.name
        if name in CONCRETE or name in self.root.generics:
            return Type(name)
        if name in ABSTRACT:
            self.report("E0308", f"{what} cannot have the abstract type '{name}'; abstract types only restrict "
                        f"generic types: declare 'T: {name};' in @dtype and use T (§2.13)", spec.span)
            return None
        hint = did_you_mean(name, [*CONCRETE, *self.root.generics])
        self.report("E0308", f"unknown type '{name}' for {what}; use int, real, bool, str or a type declared in @dtype"
                    + (f" (did you mean '{hint}'?)" if hint else ""), spec.span)
        return None

    # ------------------------------------------------------------ @dtype

    def _dtypes(self) -> None:
        for block in blocks_of(self.defn, "dtype"):
            assert isinstance(block, ast.DtypeBlock)
            for decl in block.items:
                base = decl.base if decl.base in ABSTRACT else "type"
                sym = Symbol(decl.name, Kind.DTYPE, Type(decl.name), decl.span, "dtype", base=base, decl=decl)
                if self.declare(sym) is sym:
                    self.root.generics[decl.name] = base
                if decl.default is not None and decl.base in ADMITS and decl.default not in ADMITS[decl.base]:
                    admitted = ", ".join(ADMITS[decl.base])
                    self.report("E0308", f"default type '{decl.default}' of '{decl.name}' is not a '{decl.base}' type; "
                                f"'{decl.base}' admits {admitted}", decl.span)

    # ------------------------------------------------------------ parameter blocks

    def _params(self, kind: str) -> None:
        for block in blocks_of(self.defn, kind):
            assert isinstance(block, ast.ParamBlock)
            for decl in block.items:
                if kind == "attrib":
                    self._attribute(decl)
                else:
                    self._tensor(decl, kind)

    def _attribute(self, decl: ast.ParamDecl) -> None:
        spec = decl.type
        what = f"attribute '{decl.name}'"
        elem = self.check_type_name(spec, what)
        if spec.shape is not None or spec.rank is not None:
            self.report("E0308", f"{what} cannot have a shape; attributes are compile-time values, "
                        "not tensors (§2.5)", spec.span)
        t = Type(elem.name if elem else "?", spec.optional, spec.pack is not None)
        length: Lin | None = None
        if spec.pack is not None:
            length = self._attribute_pack_length(decl, spec)
        self.declare(Symbol(decl.name, Kind.ATTRIBUTE, t, decl.span, "attrib", length=length, decl=decl))
        if decl.bounds:
            self.report("E0307", f"index bounds after a value are only allowed for @constant tensors, "
                        f"not for {what}", decl.bounds[0].span)
        if decl.default is None:
            return
        if spec.optional:
            self.report("E0307", f"optional {what} cannot have a default value; it is null when not "
                        "given (§2.5)", decl.default.span,
                        hint=f"remove '= {show(decl.default)}', or drop 'optional'")
            return
        self._deferred.append((decl.default,
                               lambda dt, d=decl, t=t: None if t.unknown else self._check_default(d, t, dt)))

    def _attribute_pack_length(self, decl: ast.ParamDecl, spec: ast.TypeSpec) -> Lin:
        assert spec.pack is not None
        length = spec.pack.length
        if length is None:
            return Lin.key(f"|{decl.name}|")
        form = affine(length, self.is_new)
        if form is not None:
            sym = self.declare(Symbol(form.symbol, Kind.PACK_LENGTH, INT.as_optional(spec.optional), length.span,
                                      "attrib", decl=decl))
            if spec.optional:
                sym.cache["from_optional_input"] = True
        else:
            if not spec.optional:
                self._bound_by_required(ast.TypeSpec(name="", pack=spec.pack))
            self._deferred.append((length, lambda lt, e=length: self._expect_length(e, lt)))
        return lin_value(length)

    def _check_default(self, decl: ast.ParamDecl, t: Type, dt: Type) -> None:
        assert decl.default is not None
        span = decl.default.span
        if dt.unknown and not dt.packed:
            return
        if dt.tensor:
            self.report("E0302", f"the default value of attribute '{decl.name}' must be a compile-time value, "
                        f"not a tensor ({dt})", span, hint="use the tensor's '.shape' or '.rank'")
        elif not same_name(dt.name, t.name):
            self.report("E0307", f"the default value of attribute '{decl.name}' has type {dt.element()}, "
                        f"but '{decl.name}' is declared {t.item().as_optional(False)}",
                        span, hint=_conversion_hint(dt.name, t.name))
        elif dt.packed and not t.packed:
            self.report("E0307", f"attribute '{decl.name}' is a single {t.name}, but its default value is a pack "
                        f"({dt}); declare it '{decl.name}: {t.name}..' or give a single value", span)
        elif t.packed and not dt.packed and decl.type.pack is not None and decl.type.pack.length is None:
            self.report("E0307", f"a single default value for the pack '{decl.name}' needs a marked pack "
                        f"length, as in '{decl.name}: {t.name}..(n) = {show(decl.default)}' (§2.5)", span,
                        hint=f"or write the default as a list, e.g. '[{show(decl.default)}]'")

    def _expect_length(self, expr: ast.Expr, t: Type) -> bool:
        """A pack length is an int (or a bool, for conditional items); returns True for bool."""
        if t.unknown:
            return False
        if t.packed or t.tensor or t.name not in ("int", "bool"):
            self.report("E0301", f"a pack length must be an int (or a bool condition); '{show(expr)}' is {t}",
                        expr.span)
            return False
        return t.name == "bool"

    # ------------------------------------------------------------ tensors and shapes

    def _tensor(self, decl: ast.ParamDecl, kind: str) -> None:
        spec = decl.type
        sym_kind = PARAM_KIND[kind]
        what = f"{kind} '{decl.name}'"
        elem = self.check_type_name(spec, what)
        optional = spec.optional
        pack_length: Lin | None = None
        if spec.pack is not None:
            pack_length = self._count(spec.pack, kind, decl, optional, f"the pack length of {what}")[0] \
                if spec.pack.length is not None else Lin.key(f"|{decl.name}|")
        rank: Lin | None = None
        if spec.rank is not None:
            if self.is_new(spec.rank) and kind == "input":
                sym = self.declare(Symbol(spec.rank, Kind.RANK, INT.as_optional(optional), spec.span, kind, decl=decl))
                if optional:
                    sym.cache["from_optional_input"] = True
            elif self.root.lookup(spec.rank) is None:
                self.report("E0405", f"undeclared rank symbol '{spec.rank}' in {what}; only inputs can declare "
                            "new symbols (§2.6)", spec.span)
        if spec.shape is not None:
            rank = self._shape(decl, spec, kind, optional, pack_length)
            if rank is None and spec.rank is not None:
                rank = Lin.key(spec.rank)
        elif kind in ("constant", "variable"):
            self.report("E0405", f"{what} needs a shape, e.g. '{decl.name}: {spec.name}[n]'; use '[]' for a scalar",
                        spec.span)
        if kind == "input" and not optional:
            self._bound_by_required(spec)
        t = Type(elem.name if elem else "?", optional, spec.pack is not None, True)
        sym = Symbol(decl.name, sym_kind, t, decl.span, kind, length=pack_length, rank=rank, decl=decl)
        self._tensor_value(decl, kind, t)
        self.declare(sym)

    def _bound_by_required(self, spec: ast.TypeSpec) -> None:
        """Symbols first seen in an optional input are optional, unless a non-optional input also
        binds them: optional inputs come last in the binding order (§2.6.2)."""
        names = [spec.rank] if spec.rank else []
        for item in spec.shape or ():
            for part in (item.value, item.pack.length if item.pack else None):
                if part is not None:
                    names.extend(n.id for n in _names_in(part))
        if spec.pack is not None and spec.pack.length is not None:
            names.extend(n.id for n in _names_in(spec.pack.length))
        for name in names:
            sym = self.root.lookup(name)
            if sym is not None and sym.cache.get("from_optional_input"):
                sym.type = sym.type.as_optional(False)
                del sym.cache["from_optional_input"]

    def _tensor_value(self, decl: ast.ParamDecl, kind: str, t: Type) -> None:
        value = decl.default
        if kind == "constant" and value is None:
            zero = {"int": "0", "real": "0.0", "bool": "false", "str": "''"}.get(t.name, f"{t.name}()")
            self.report("E0307", f"constant '{decl.name}' needs a value, e.g. '{decl.name}: {t.name}[n] = {zero}'",
                        decl.span)
            return
        if value is None:
            if decl.bounds:
                self.report("E0307", "index bounds are only allowed after the value of a @constant",
                            decl.bounds[0].span)
            return
        if kind in ("variable", "output"):
            why = ("variables are loaded from data files (§2.7)" if kind == "variable"
                   else "outputs are computed by @lower or @compose")
            self.report("E0307", f"{kind} '{decl.name}' cannot have a value; {why}", value.span)
            return
        env = self.root
        if decl.bounds:
            if kind != "constant":
                self.report("E0307", "index bounds are only allowed after the value of a @constant",
                            decl.bounds[0].span)
            env = self.root.child()
            for b in decl.bounds:
                bt = self.typer.type_of(b.bound, self.root, Ctx(kind))
                if not bt.unknown and (bt.name != "int" or bt.tensor):
                    self.report("E0302", f"the bound of index '{b.index}' must be int or int..; got {bt}", b.bound.span)
                self.declare(Symbol(b.index, Kind.INDEX, INT.as_packed(bt.packed), b.span, kind,
                                    length=self.typer.length_of(b.bound, self.root) if bt.packed else None),
                             env)
        vt = self.typer.type_of(value, env, Ctx(kind))
        if vt.unknown:
            return
        if vt.tensor:
            self.report("E0302", f"the value of {kind} '{decl.name}' must be a compile-time value, not a tensor ({vt})",
                        value.span)
        elif not same_name(vt.name, t.name):
            self.report("E0301", f"the value of {kind} '{decl.name}' has type {vt.element()}, but '{decl.name}' "
                        f"holds {t.name} items", value.span, hint=_conversion_hint(vt.name, t.name))
        elif vt.optional:
            self.report("E0303", f"the value of {kind} '{decl.name}' may be null ({vt}); resolve it with '??'",
                        value.span)

    def _count(self, pack: ast.PackSpec, kind: str, decl: ast.ParamDecl, optional: bool,
               what: str) -> tuple[Lin, str]:
        """A pack length `..(n)` of a tensor pack or a shape item: declares n when new (inputs).
        Returns the length and the type of the count: 'int', 'bool' (a conditional item) or '?'."""
        assert pack.length is not None
        length = pack.length
        if kind == "input":
            form = affine(length, self.is_new)
            if form is not None:
                sym = self.declare(Symbol(form.symbol, Kind.PACK_LENGTH, INT.as_optional(optional), length.span,
                                          kind, decl=decl))
                if optional:
                    sym.cache["from_optional_input"] = True
                return lin_value(length), "int"
        lt = self._prescribed(length, kind, decl, what)
        if lt is None or lt.unknown:
            return lin_value(length), "?"
        if self._expect_length(length, lt):
            return Lin.key(f"[{show(length)}]"), "bool"
        return lin_value(length), "int"

    def _prescribed(self, expr: ast.Expr, kind: str, decl: ast.ParamDecl, what: str,
                    deduce: bool = True) -> Type | None:
        """Type an expression of declared identifiers; E0405 for identifiers that are not."""
        missing = [n for n in _names_in(expr) if self.root.lookup(n.id) is None and n.id not in self.root.forward
                   and "." not in n.id]
        if missing:
            first = missing[0]
            if kind == "input" and deduce:
                self.report("E0405", f"cannot deduce '{first.id}' from '{show(expr)}'; declare {first.id} by an "
                            f"affine expression like '2 * {first.id} + 1'", expr.span,
                            hint="a shape item can declare one new symbol x in the form a * x + b, with integer "
                            "literals a and b (§2.6); other expressions must use declared symbols only")
            else:
                self._undeclared(first, kind, what)
            return None
        return self.typer.type_of(expr, self.root, Ctx(kind))

    def _undeclared(self, name: ast.Name, kind: str, what: str) -> None:
        hint = did_you_mean(name.id, self.root.visible())
        rule = ("an upper bound may only use declared identifiers" if what.startswith("the upper bound")
                else f"{kind} shapes may only use declared identifiers")
        self.report("E0405", f"undeclared symbol '{name.id}' in {what}; {rule}"
                    + (f"; did you mean '{hint}'?" if hint else ""), name.span,
                    hint="symbols are declared by input shapes, attributes or @using (§2.6, §2.7)")

    def _shape(self, decl: ast.ParamDecl, spec: ast.TypeSpec, kind: str, optional: bool,
               pack_length: Lin | None) -> Lin | None:
        assert spec.shape is not None
        what = f"the shape of {kind} '{decl.name}'"
        total: Lin | None = Lin()
        for item in spec.shape:
            count: Lin | None = None
            status = "int"
            if item.pack is not None and item.pack.length is not None:
                count, status = self._count(item.pack, kind, decl, optional, f"a pack length in {what}")
            item_len = self._extent(item, decl, kind, what, optional, count, status, pack_length)
            if item.bound is not None:
                self._bound(item, decl, kind, what)
            total = None if total is None or item_len is None else total + item_len
        return total

    def _bound(self, item: ast.ShapeItem, decl: ast.ParamDecl, kind: str, what: str) -> None:
        assert item.bound is not None
        bt = self._prescribed(item.bound, kind, decl, f"the upper bound in {what}", deduce=False)
        if bt is not None and not bt.unknown and (bt.name != "int" or bt.tensor or bt.optional):
            self.report("E0301", f"an upper bound must be an int; '{show(item.bound)}' is {bt}", item.bound.span)

    def _extent(self, item: ast.ShapeItem, decl: ast.ParamDecl, kind: str, what: str, optional: bool,
                count: Lin | None, status: str, pack_length: Lin | None) -> Lin | None:
        """Declare or check one extent; returns how many dimensions it stands for (None: unknown)."""
        packed = item.pack is not None
        ones: Lin | None = count if packed else Lin(1)
        value = item.value
        if value is None:  # `~`: a dynamic extent
            if kind == "output" and not self.is_graph and item.bound is None:
                self.report("E0411", f"the dynamic extent '~' of operator output '{decl.name}' needs an upper bound, "
                            "e.g. '~|n' (§2.6.1)", item.span)
            elif kind in ("constant", "variable"):
                self.report("E0405", f"{what} must be fully specified; '~' is only allowed for inputs and outputs",
                            item.span)
            return ones
        form = affine(value, self.is_new)
        if form is not None and (kind == "input" or (kind == "output" and item.bound is not None)):
            if status == "?":
                t = UNKNOWN  # the count's type is unknown (already reported): no cascade
            elif status == "bool":
                t = INT.as_optional()  # a conditional item (§2.6)
            elif kind == "output":
                t = INT
            else:
                t = INT.as_packed(packed or item.distinct)
            from_input = optional and not t.optional
            t = t.as_optional(t.optional or optional)
            length = None
            if t.packed:
                length = count if packed else pack_length
                if length is None:
                    length = Lin.key(f"|{form.symbol}|")
            sym = self.declare(Symbol(form.symbol, Kind.SHAPE, t, value.span, kind, length=length,
                                      dynamic=kind == "output", decl=decl))
            if from_input:
                sym.cache["from_optional_input"] = True
            if not packed:
                return Lin(1)
            return count if count is not None else length
        if form is not None and kind == "output":
            # A bare new name in an operator output reads as a data-dependent extent that lacks its
            # bound (E0411); a near-miss of a declared name, or a graph output, as an undeclared one.
            typo = did_you_mean(form.symbol, self.root.visible())
            if self.is_graph or typo is not None or not isinstance(value, ast.Name):
                self._undeclared(ast.Name(id=form.symbol, span=value.span), kind, what)
            else:
                self.report("E0411", f"output '{decl.name}' introduces the new symbol '{form.symbol}' without an upper "
                            f"bound; a data-dependent extent needs one, as in '{form.symbol}|n' (§2.6.1)", value.span,
                            hint="output shapes may only use declared symbols, except data-dependent extents "
                            "with an upper bound")
            return ones
        vt = self._prescribed(value, kind, decl, what)
        if vt is None or vt.unknown:
            return ones if packed and count is not None else None
        if vt.tensor or vt.name != "int":
            self.report("E0301", f"a shape extent must be an int; '{show(value)}' is {vt}", value.span)
            return None
        if item.distinct:
            if not vt.packed:
                self.report("E0304", f"the distinct extent '..{show(value)}' must be a pack with one extent per "
                            f"tensor of the pack; '{show(value)}' is {vt}", value.span)
            return Lin(1)
        if packed and count is None and not vt.packed:
            self.report("E0304", f"'{show(value)}' is not a pack, so '{show(value)}..' needs a count, as in "
                        f"'{show(value)} ..(n)'", value.span)
            return None
        if not packed and vt.packed:
            self.report("E0304", f"'{show(value)}' is a pack ({vt}); expand it into the shape with '{show(value)}..'",
                        value.span)
            return None
        if not packed:
            return None if vt.optional else Lin(1)
        if count is not None:
            return count
        return self.typer.length_of(value, self.root)

    # ------------------------------------------------------------ @using

    def _usings(self) -> None:
        for block in blocks_of(self.defn, "using"):
            assert isinstance(block, ast.UsingBlock)
            for decl in block.items:
                t = self.typer.type_of(decl.value, self.root, Ctx("using"))
                if t.tensor:
                    self.report("E0302", f"@using expressions are compile-time values; '{show(decl.value)}' is a "
                                f"tensor ({t})", decl.value.span, hint="use the tensor's '.shape' or '.rank'")
                    t = UNKNOWN
                self._bind_using(decl.target, t, decl.value)

    def _bind_using(self, target: ast.LValue, t: Type, value: ast.Expr | None) -> None:
        if isinstance(target, ast.LSkip):
            return
        if isinstance(target, ast.LName):
            length: Lin | None = None
            if target.pack is not None:
                if not t.packed and not t.unknown:
                    self.report("E0304", f"'{target.name}..' declares a pack, but its value is not a pack ({t})",
                                target.span)
                if target.pack.length is not None:
                    lt = self.typer.type_of(target.pack.length, self.root, Ctx("using"))
                    self._expect_length(target.pack.length, lt)
                    length = lin_value(target.pack.length)
                t = t.as_packed()
            self.declare(Symbol(target.name, Kind.USING, t, target.span, "using", length=length, value=value,
                                env=self.root, decl=target))
            return
        if not t.packed and not t.unknown:
            self.report("E0304", f"only a pack can be decomposed by '{show_lvalue(target)}'; the value is {t}",
                        target.span)
            t = UNKNOWN
        if isinstance(target, ast.LList):
            for item in target.items:
                if isinstance(item, ast.LName) and item.pack is None:
                    self._bind_using(item, t.item(), None)
                else:
                    self._bind_using(item, t, None)
        elif isinstance(target, ast.LZip):
            for name in target.items:
                self._bind_using(ast.LName(name=name.name, pack=ast.PackSpec(span=name.span), span=name.span),
                                 t, None)


def _conversion_hint(have: str, want: str) -> str | None:
    if want in ("int", "real", "bool") and have in ("int", "real", "bool"):
        return f"convert it with {want}(...)" if not (have == "int" and want == "real") else \
            "write a real literal such as 1.0, or convert with real(...)"
    return None
