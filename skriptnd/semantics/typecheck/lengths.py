"""Symbolic lengths of packed expressions and ranks of tensor accesses (E0407).

The scope builder asks for the length of a pack bound (`length_of`), and a tensor access
with a packed index such as `x[i..]` is checked against the declared rank by comparing
linear forms (`Lin`), since lengths are usually symbols rather than numbers.
"""

from __future__ import annotations

from skriptnd.diagnostics import Note
from skriptnd.semantics.scope import Lin, Scope, Symbol, lin_value
from skriptnd.semantics.show import show
from skriptnd.semantics.typecheck.common import CheckerBase
from skriptnd.syntax import ast


class Lengths(CheckerBase):
    """Lengths of packs and ranks of tensor accesses."""

    def length_of(self, expr: ast.Expr, env: Scope) -> Lin | None:
        """The symbolic length of a packed expression (None when not a pack or unknowable)."""
        t = self._cached(expr, env)
        if not t.packed:
            return None
        return self._length(expr, env)

    def _opaque(self, expr: ast.Expr) -> Lin:
        return Lin.key(show(expr))

    def _length(self, e: ast.Expr, env: Scope) -> Lin | None:
        if isinstance(e, ast.Name):
            sym = env.lookup(e.id)
            if sym is None:
                return None
            if sym.length is not None:
                return sym.length
            if sym.value is not None and sym.env is not None:
                if "length" not in sym.cache:
                    sym.cache["length"] = None  # guards against cycles
                    sym.cache["length"] = self.length_of(sym.value, sym.env) or Lin.key(f"|{e.id}|")
                return sym.cache["length"]  # type: ignore[return-value]
            return Lin.key(f"|{e.id}|")
        if isinstance(e, ast.ListExpr):
            total = Lin()
            for item in e.items:
                part = self._item_length(item, env)
                if part is None:
                    return None
                total = total + part
            return total
        if isinstance(e, ast.Subscript):
            if isinstance(e.index, ast.Range):
                return self._opaque(e)
            it = self._cached(e.index, env)
            if it.name == "bool":
                return self._opaque(e)
            return self.length_of(e.index, env)
        if isinstance(e, ast.Substitute):
            return self.length_of(e.value, env)
        if isinstance(e, ast.Unary | ast.Fold | ast.Bounded | ast.Expand):
            inner = e.operand if isinstance(e, ast.Unary | ast.Fold) else e.value
            return self.length_of(inner, env)
        if isinstance(e, ast.Cast):
            return self.length_of(e.arg, env) if e.arg is not None else None
        if isinstance(e, ast.Call):
            return self.length_of(e.args[0], env) if len(e.args) == 1 else None
        if isinstance(e, ast.Binary):
            if e.op == "??":
                left, right = self.length_of(e.left, env), self.length_of(e.right, env)
                return left if left is not None and left == right else self._opaque(e)
            if e.op == "in" or self._cached(e.left, env).packed:
                return self.length_of(e.left, env)
            return self.length_of(e.right, env)
        if isinstance(e, ast.Select):
            if self._cached(e.cond, env).packed:
                return self.length_of(e.cond, env)
            left = self.length_of(e.then, env)
            right = self.length_of(e.orelse, env) if e.orelse is not None else None
            return left if left is not None and left == right else self._opaque(e)
        if isinstance(e, ast.Property) and e.name == "shape" and isinstance(e.value, ast.Name):
            sym = env.lookup(e.value.id)
            if sym is not None and sym.rank is not None:
                return sym.rank
            return self._opaque(e)
        if isinstance(e, ast.Range):
            return self._range_length(e)
        return self._opaque(e)

    def _range_length(self, e: ast.Range) -> Lin:
        if e.start is None or e.stop is None:
            return self._opaque(e)
        step = 1 if e.step is None else lin_value(e.step)
        if step == 1 or step == Lin(1):
            return lin_value(e.stop) - lin_value(e.start)
        if step == Lin(-1):
            return lin_value(e.start) - lin_value(e.stop)
        return self._opaque(e)

    def _item_length(self, item: ast.Expr, env: Scope) -> Lin | None:
        if isinstance(item, ast.Expand):
            if item.count is not None:
                return self._count_length(item.count, env)
            return self.length_of(item.value, env)
        if isinstance(item, ast.Range):
            return self._range_length(item)
        if isinstance(item, ast.Zip):
            first = self.length_of(item.items[0], env) if item.items else None
            return first.scale(len(item.items)) if first is not None else None
        return Lin(1)

    def _count_length(self, count: ast.Expr, env: Scope) -> Lin:
        if self._cached(count, env).name == "bool":
            return Lin.key(f"[{show(count)}]")
        return lin_value(count)

    def _check_rank(self, e: ast.TensorAccess, sym: Symbol, env: Scope) -> None:
        declared = sym.rank
        if declared is None:
            return
        used = Lin()
        for idx in e.indices:
            if isinstance(idx, ast.Expand):
                part = self._count_length(idx.count, env) if idx.count is not None else self.length_of(idx.value, env)
                if part is None:
                    return
                used = used + part
            else:
                used = used + Lin(1)
        if used.terms != declared.terms or used.const == declared.const:
            return
        count = str(used)
        indices = "index" if used == Lin(1) else "indices"
        self.report("E0407", f"tensor '{sym.name}' has rank {declared} but is accessed with {count} {indices}", e.span,
                    notes=[Note(f"'{sym.name}' is declared here", sym.span)],
                    hint="write one index per dimension; a packed index such as 'i..' covers several dimensions")
