"""Typing of lists, repetitions, ranges and zips, of indexing and substitution, and of
tensor accesses in @lower (§2.4, §2.12)."""

from __future__ import annotations

from skriptnd.semantics.scope import Ctx, Kind, Scope, Symbol
from skriptnd.semantics.show import show
from skriptnd.semantics.typecheck.common import _what
from skriptnd.semantics.typecheck.lengths import Lengths
from skriptnd.semantics.types import INTS, STR, UNKNOWN, Type, same_name
from skriptnd.syntax import ast


class PackTyping(Lengths):
    """Types of the expressions that build, index or access packs and tensors."""

    def _list(self, e: ast.ListExpr, env: Scope, ctx: Ctx) -> Type:
        name = "?"
        first: Type | None = None
        optional = tensor = unknown = False
        for pos, item in enumerate(e.items, 1):
            t = self._list_item(item, env, ctx)
            optional = optional or t.optional
            tensor = tensor or t.tensor
            if t.unknown:
                unknown = True
                continue
            if first is None:
                first, name = t, t.name
            elif not same_name(first.name, t.name):
                self.report("E0301", f"list items must have the same type; item {pos} is {self._describe(t, env)} "
                            f"but the first item is {self._describe(first, env)}", item.span)
        return Type("?" if unknown else name, optional, True, tensor)

    def _list_item(self, item: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(item, ast.Expand):
            t = self.type_of(item.value, env, ctx)
            if item.count is not None:
                ct = self._count(item.count, env, ctx)
                if t.packed and not t.unknown:
                    self.report("E0304", f"{_what(item.value)} is already a pack; '..({show(item.count)})' repeats a "
                                f"single value — write '{show(item.value)}..' to expand the pack", item.count.span)
                return t.item().as_optional(t.optional or ct.optional)
            if not t.packed and not t.unknown:
                self.report("E0304", f"{_what(item.value)} is not a pack ({t}), so it cannot be expanded with '..'; "
                            f"to repeat it, give a count as in '{show(item.value)}..(n)'", item.span)
            return t.item()
        if isinstance(item, ast.Range):
            return self._range(item, env, ctx).item()
        if isinstance(item, ast.Zip):
            first: Type | None = None
            optional = False
            for part in item.items:
                t = self._no_tensor(self.type_of(part, env, ctx), part, ctx, "(..)..")
                optional = optional or t.optional
                if t.unknown:
                    continue
                if not t.packed:
                    self.report("E0304", f"a zip '(a, b)..' interleaves packs; {_what(part)} is not a pack ({t})",
                                part.span)
                elif first is None:
                    first = t
                elif not same_name(first.name, t.name):
                    self.report("E0301", f"zipped packs must have the same item type; got {first.name} and {t.name}",
                                part.span)
            return (first.item() if first is not None else UNKNOWN).as_optional(optional)
        t = self.type_of(item, env, ctx)
        if t.packed and not t.unknown:
            self.report("E0304", f"{_what(item)} is a pack ({t}); expand it into the list with '{show(item)}..'",
                        item.span)
            return t.item()
        return t

    def _count(self, count: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        ct = self._no_tensor(self.type_of(count, env, ctx), count, ctx, "..()")
        if not ct.unknown and (ct.name not in ("int", "bool") or ct.packed):
            self.report("E0302", f"a repeat count must be an int (or a bool, for a conditional item); "
                        f"{_what(count)} is {ct}", count.span)
        return ct

    def _range(self, e: ast.Range, env: Scope, ctx: Ctx) -> Type:
        optional = False
        for part in (e.start, e.stop, e.step):
            if part is None:
                continue
            t = self._no_tensor(self.type_of(part, env, ctx), part, ctx, ":")
            optional = optional or t.optional
            if not t.unknown and (t.name != "int" or t.packed):
                self.report("E0302", f"range bounds and steps must be int; {_what(part)} is {t}", part.span)
        return INTS.as_optional(optional)

    def _index_type(self, index: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(index, ast.Range):
            return self._range(index, env, ctx)
        t = self._no_tensor(self.type_of(index, env, ctx), index, ctx, "[]")
        if t.unknown:
            return t
        if t.name == "bool" and t.packed:
            return t
        if t.name != "int":
            self.report("E0302", f"an index must be int, int.. or a bool.. mask; {_what(index)} is {t}", index.span)
            return UNKNOWN
        return t

    def _subscript(self, e: ast.Subscript, env: Scope, ctx: Ctx) -> Type:
        vt = self.type_of(e.value, env, ctx)
        it = self._index_type(e.index, env, ctx)
        optional = vt.optional or it.optional
        if vt.tensor and not vt.packed:
            if ctx.stage == "lower":
                self.report("E0302", f"{_what(e.value)} is a tensor: access its elements with a tensor access; a "
                            f"one-dimensional access needs a trailing comma, as in '{show(e.value)}[{show(e.index)},]' "
                            "(§2.4)", e.span)
            else:
                self.report("E0302", f"{_what(e.value)} is a tensor, which cannot be indexed here; only packs and "
                            "strings can be indexed (tensor elements are accessed in @lower)", e.span)
            return UNKNOWN
        if vt.unknown and not vt.packed:
            return UNKNOWN.as_optional(optional)
        if not vt.packed:
            if vt.name == "str":
                return STR.as_optional(optional)
            self.report("E0304", f"{_what(e.value)} is not a pack ({vt}); only packs and strings can be indexed",
                        e.span)
            return UNKNOWN
        return vt.with_(packed=isinstance(e.index, ast.Range) or it.packed, optional=optional)

    def _substitute(self, e: ast.Substitute, env: Scope, ctx: Ctx) -> Type:
        vt = self.type_of(e.value, env, ctx)
        it = self._index_type(e.index, env, ctx)
        rt = self.type_of(e.replacement, env, ctx)
        optional = vt.optional or it.optional or rt.optional
        if not vt.packed and not vt.unknown:
            self.report("E0304", f"'<-' replaces items of a pack; {_what(e.value)} is not a pack ({vt})", e.value.span)
            return UNKNOWN
        several = isinstance(e.index, ast.Range) or it.packed
        if not it.unknown and not rt.unknown:
            if several and not rt.packed:
                self.report("E0304", f"the index {_what(e.index)} selects several items, so the new value must be a "
                            f"pack of the same length; {_what(e.replacement)} is {rt}", e.replacement.span)
            elif not several and rt.packed:
                self.report("E0304", f"the single index {_what(e.index)} replaces one item, so the new value must not "
                            f"be a pack; {_what(e.replacement)} is {rt}", e.replacement.span)
        if not same_name(vt.name, rt.name):
            self.report("E0301", f"'<-' replaces {self._describe(vt, env)} items with {self._describe(rt, env)} "
                        "values; use values of the pack's item type", e.replacement.span)
        return vt.with_(packed=True, optional=optional)

    def _expand(self, e: ast.Expand, env: Scope, ctx: Ctx) -> Type:
        t = self.type_of(e.value, env, ctx)
        if e.count is not None:
            self._count(e.count, env, ctx)
        return t

    def _zip(self, e: ast.Zip, env: Scope, ctx: Ctx) -> Type:
        for part in e.items:
            self.type_of(part, env, ctx)
        return UNKNOWN

    def _bounded(self, e: ast.Bounded, env: Scope, ctx: Ctx) -> Type:
        t = self.type_of(e.value, env, ctx)
        for part in (e.low, e.high):
            if part is not None:
                pt = self.type_of(part, env, ctx)
                if not pt.unknown and pt.name != "int":
                    self.report("E0302", f"a remapped index must be int; {_what(part)} is {pt}", part.span)
        if not t.unknown and t.name != "int":
            self.report("E0302", f"a guarded index must be int; {_what(e.value)} is {t}", e.value.span)
        return t

    # -- tensor access

    def _access_symbol(self, e: ast.TensorAccess, env: Scope, ctx: Ctx) -> tuple[Symbol | None, Type, bool]:
        """The accessed tensor's symbol, its type and whether a pack item was selected."""
        target = e.tensor
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            sym = self._resolve(target.value, env, ctx, tensor=True)
            it = self._index_type(target.index, env, ctx)
            if sym is None:
                return None, UNKNOWN, True
            t = sym.type
            self._types[id(target.value)] = t
            if not t.packed and not t.unknown:
                self.report("E0304", f"'{sym.name}' is not a tensor pack, so '{show(target)}' cannot select an item "
                            "of it", target.span)
            elif it.packed:
                return sym, t.with_(optional=t.optional or it.optional), False
            return sym, t.with_(packed=False, optional=t.optional or it.optional), True
        if isinstance(target, ast.Name):
            sym = self._resolve(target, env, ctx, tensor=True)
            t = sym.type if sym is not None else UNKNOWN
            self._types[id(target)] = t
            return sym, t, False
        return None, self.type_of(target, env, ctx), False

    def _access(self, e: ast.TensorAccess, env: Scope, ctx: Ctx) -> Type:
        sym, tt, _item = self._access_symbol(e, env, ctx)
        if ctx.stage != "lower":
            self.report("E0302", f"the tensor access '{show(e)}' is only allowed in @lower formulas (§2.4)", e.span)
            for idx in e.indices:
                self.type_of(idx, env, ctx)
            return UNKNOWN
        if sym is not None and sym.kind is Kind.DTYPE:
            return UNKNOWN
        if not tt.tensor and not tt.unknown:
            hint = f"index the pack with a single index: '{show(e.tensor)}[i]'" if tt.packed else None
            self.report("E0302", f"{_what(e.tensor)} is not a tensor ({tt}), so it cannot be accessed with tensor "
                        "indices", e.span, hint=hint)
            for idx in e.indices:
                self.type_of(idx, env, ctx)
            return UNKNOWN
        packed = tt.packed
        optional = tt.optional
        for idx in e.indices:
            t = self._tensor_index(idx, env, ctx)
            optional = optional or t.optional
            if isinstance(idx, ast.Range) or (t.packed and not isinstance(idx, ast.Expand)):
                packed = True
        if sym is not None:
            self._check_rank(e, sym, env)
        return Type(tt.name, optional, packed)

    def _tensor_index(self, idx: ast.Expr, env: Scope, ctx: Ctx) -> Type:
        if isinstance(idx, ast.Range):
            return self._range(idx, env, ctx)
        if isinstance(idx, ast.Expand):
            t = self._no_tensor(self.type_of(idx.value, env, ctx), idx.value, ctx, "[]")
            if idx.count is not None:
                self._count(idx.count, env, ctx)
            elif not t.packed and not t.unknown:
                self.report("E0304", f"{_what(idx.value)} is not a pack ({t}), so it cannot be expanded with '..'",
                            idx.span)
            if not t.unknown and t.name != "int":
                self.report("E0302", f"tensor indices must be int; {_what(idx.value)} is {t}", idx.value.span)
            return t.item()
        t = self._no_tensor(self.type_of(idx, env, ctx), idx, ctx, "[]")
        if not t.unknown and t.name != "int":
            self.report("E0302", f"tensor indices must be int; {_what(idx)} is {t}", idx.span)
        return t
