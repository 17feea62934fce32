"""What binding needs to know about one definition, computed once per definition (spec §2.6.2).

Binding (semantics.binding) runs for every invocation; the analysis here runs once per
definition and is cached by identity: which blocks declare which parameters, the order in which
the inputs' shapes can be bound, which attribute defaults are deferred until the inputs are
bound, and the E0401/E0409 diagnostics when no such order exists. It also renders shapes and
expressions as the source wrote them, for binding's messages.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from skriptnd.diagnostics import Diagnostic
from skriptnd.semantics.affine import affine
from skriptnd.semantics.evaluate import free_names
from skriptnd.syntax import ast
from skriptnd.syntax.printer import format_expr


@dataclass(frozen=True)
class Signature:
    """What binding needs to know about a definition, computed once."""

    definition: ast.Definition
    dtypes: tuple[ast.DtypeDecl, ...]
    attribs: tuple[ast.ParamDecl, ...]
    inputs: tuple[ast.ParamDecl, ...]
    outputs: tuple[ast.ParamDecl, ...]
    constants: tuple[ast.ParamDecl, ...]
    variables: tuple[ast.ParamDecl, ...]
    usings: tuple[ast.UsingDecl, ...]
    asserts: tuple[ast.Assertion, ...]
    order: tuple[int, ...]  # binding order: indices into inputs
    deferred: frozenset[str]  # attributes whose default is not a constant expression

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def kind(self) -> str:
        """'graph' or 'operator', as messages name the definition."""
        return self.definition.kind


def _params(defn: ast.Definition, kind: str) -> tuple[ast.ParamDecl, ...]:
    return tuple(d for b in defn.blocks if isinstance(b, ast.ParamBlock) and b.kind == kind for d in b.items)


def _is_deferred(decl: ast.ParamDecl) -> bool:
    return decl.default is not None and bool(free_names(decl.default))


_SIGNATURES: OrderedDict[int, tuple[ast.Definition, tuple[Signature, tuple[Diagnostic, ...]]]] = OrderedDict()


def analysed(defn: ast.Definition) -> tuple[Signature, tuple[Diagnostic, ...]]:
    """The signature and the binding-order diagnostics of defn. Cached by identity, not equality:
    equal definitions in two files have different spans."""
    hit = _SIGNATURES.get(id(defn))
    if hit is not None and hit[0] is defn:
        _SIGNATURES.move_to_end(id(defn))
        return hit[1]
    result = _analyse(defn)
    _SIGNATURES[id(defn)] = (defn, result)
    if len(_SIGNATURES) > 4096:
        _SIGNATURES.popitem(last=False)
    return result


def _analyse(defn: ast.Definition) -> tuple[Signature, tuple[Diagnostic, ...]]:
    attribs = _params(defn, "attrib")
    inputs = _params(defn, "input")
    order, diags = _binding_order(defn, attribs, inputs)
    sig = Signature(
        definition=defn,
        dtypes=tuple(d for b in defn.blocks if isinstance(b, ast.DtypeBlock) for d in b.items),
        attribs=attribs,
        inputs=inputs,
        outputs=_params(defn, "output"),
        constants=_params(defn, "constant"),
        variables=_params(defn, "variable"),
        usings=tuple(u for b in defn.blocks if isinstance(b, ast.UsingBlock) for u in b.items),
        asserts=tuple(a for b in defn.blocks if isinstance(b, ast.AssertBlock) for a in b.items),
        order=order,
        deferred=frozenset(a.name for a in attribs if _is_deferred(a)),
    )
    return sig, diags


def signature(defn: ast.Definition) -> Signature:
    return analysed(defn)[0]


def binding_order_diagnostics(defn: ast.Definition) -> list[Diagnostic]:
    """The §2.6.2 validity check of a definition: a binding order exists and deferred
    attribute defaults can be evaluated once all inputs are bound."""
    return list(analysed(defn)[1])


def _shape_symbols(decl: ast.ParamDecl, known: set[str]) -> tuple[bool, set[str], str | None]:
    """Can decl's shape be bound given `known`? Returns (bindable, symbols it declares, reason)."""
    spec = decl.type
    local = set(known)
    declared: set[str] = set()
    if spec.rank:
        local.add(spec.rank)
        declared.add(spec.rank)
    if spec.pack is not None and spec.pack.length is not None:
        a = affine(spec.pack.length, lambda n: n not in local)
        if a is not None:
            local.add(a.symbol)
            declared.add(a.symbol)
    flexible: list[str] = []
    for item in spec.shape or ():
        if item.pack is not None:
            length = item.pack.length
            if length is None and isinstance(item.value, ast.Name) and item.value.id in local:
                pass  # a pack bound earlier has a known length
            elif length is None:
                flexible.append(item_text(item))
            elif not (free_names(length) - local):
                pass
            else:
                a = affine(length, lambda n: n not in local)
                if a is None:
                    return False, set(), f"the length of '{item_text(item)}' depends on unknown symbols"
                flexible.append(item_text(item))
                declared.add(a.symbol)
        if item.value is not None:
            unknown = free_names(item.value) - local
            if unknown:
                a = affine(item.value, lambda n: n not in local)
                if a is None:
                    return False, set(), (f"extent '{expr_text(item.value)}' uses unknown symbols "
                                          f"{', '.join(sorted(unknown))}")
                declared.add(a.symbol)
    if len(flexible) > 1:
        return False, set(), f"packed extents {' and '.join(repr(f) for f in flexible)} both have unknown length"
    return True, declared, None


def _binding_order(defn: ast.Definition, attribs: Sequence[ast.ParamDecl],
                   inputs: Sequence[ast.ParamDecl]) -> tuple[tuple[int, ...], tuple[Diagnostic, ...]]:
    known = {a.name for a in attribs
             if a.type.pack is None and not a.type.optional and not _is_deferred(a)}
    order: list[int] = []
    reasons: dict[int, str] = {}
    pending = [i for i, d in enumerate(inputs) if not d.type.optional]
    progress = True
    while pending and progress:
        progress = False
        for i in list(pending):
            ok, declared, reason = _shape_symbols(inputs[i], known)
            if ok:
                order.append(i)
                known |= declared
                pending.remove(i)
                progress = True
            else:
                reasons[i] = reason or ""
    diags: list[Diagnostic] = []
    for i, d in enumerate(inputs):
        if d.type.optional:
            ok, declared, reason = _shape_symbols(d, known)
            if ok:
                order.append(i)
                known |= declared
            else:
                pending.append(i)
                reasons[i] = reason or ""
    for i in pending:
        d = inputs[i]
        diags.append(Diagnostic(
            code="E0401", span=d.span,
            message=f"no binding order for the shape of input '{d.name}': {reasons.get(i, 'ambiguous')}",
            hint="give one pack a length from a (non-packed) attribute or from another input, e.g. 's..(r)'"))
    # Deferred attributes must be evaluable once inputs are bound (in declaration order).
    all_known = known | {a.name for a in attribs if not _is_deferred(a)}
    # A pack length is also known from any packed attribute whose value is surely a pack: one
    # without a default (the invocation must give a list) or with a list default (§2.6.2 step 4).
    for a in attribs:
        if a.type.pack is not None and a.type.pack.length is not None and (
                a.default is None or _is_packed_default(a.default)):
            length = affine(a.type.pack.length, lambda n: n not in all_known)
            if length is not None:
                all_known.add(length.symbol)
    for a in attribs:
        if _is_deferred(a):
            missing = free_names(a.default) - all_known - {x.name for x in attribs}
            if missing:
                diags.append(Diagnostic(
                    code="E0409", span=a.default.span,
                    message=f"the default of attribute '{a.name}' uses {', '.join(sorted(missing))}, "
                            "which cannot be known when the attribute is evaluated"))
            all_known.add(a.name)
        if a.type.pack is not None and a.type.pack.length is not None and a.default is not None:
            length_syms = free_names(a.type.pack.length)
            if length_syms - all_known - {x.name for x in attribs} and not _is_packed_default(a.default):
                diags.append(Diagnostic(
                    code="E0409", span=a.span,
                    message=f"attribute '{a.name}' has a uniform default but its length "
                            f"'{expr_text(a.type.pack.length)}' cannot be deduced from attributes or inputs"))
    return tuple(order), tuple(diags)


def _is_packed_default(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.ListExpr)


def expr_text(expr: ast.Expr) -> str:
    """An expression as the source would write it, for messages."""
    return format_expr(expr)


def item_text(item: ast.ShapeItem) -> str:
    """One shape item as written (`~`, `..t`, `x..(n)`), for messages."""
    text = "~" if item.value is None else expr_text(item.value)
    if item.distinct:
        text = ".." + text
    if item.pack is not None:
        text += ".." + (f"({expr_text(item.pack.length)})" if item.pack.length is not None else "")
    return text


def shape_text(spec: ast.TypeSpec) -> str:
    """A whole shape as written, for messages."""
    return "[" + ", ".join(item_text(i) for i in spec.shape or ()) + "]"


#: Standard comparisons declare two generic types `X` and `Y` (spec §4.2): binding lets them differ only
#: as int and real, compared as numbers (the Khronos reference compares mixed types), otherwise requires
#: them equal (§2.4, l. 443: "the same type"); erratum L2.
SAME_TYPE_OPERATORS = frozenset({"lt", "gt", "le", "ge", "eq", "ne"})


def same_type_operator(definition: ast.Definition) -> bool:
    """Whether binding checks the generic types X and Y of `definition` as a comparison's (erratum L2)."""
    return definition.name in SAME_TYPE_OPERATORS and \
        [d.name for b in definition.blocks if isinstance(b, ast.DtypeBlock) for d in b.items] == ["X", "Y"]


__all__ = ["SAME_TYPE_OPERATORS", "Signature", "analysed", "binding_order_diagnostics", "expr_text", "item_text",
           "same_type_operator", "shape_text", "signature"]
