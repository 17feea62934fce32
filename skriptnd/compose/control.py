"""Control flow in composition (spec §2.10.1): compile-time `if`s eliminated, `unroll` loops expanded,
dynamic branches and loops made operations with subgraphs.

:class:`ControlFlow` is the part of :class:`skriptnd.compose.composer.Composer` that composes `if` and
`do` expressions; the composer derives from it and provides what it calls back (``_rhs``, ``_operand``,
``_constant``, ``_fresh``, ``_new_tensor``): a seam of the composer, in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from skriptnd.compose.extents import is_symbolic
from skriptnd.compose.frame import NUMPY_DTYPES, _error, _Frame
from skriptnd.compose.ir import Graph, Operation, Tensor, Value
from skriptnd.semantics.binding import Binder, Site, signature
from skriptnd.semantics.evaluate import EvalError, evaluate
from skriptnd.semantics.values import recording
from skriptnd.syntax import ast


class ControlFlow:
    """Composing `if` and `do` (§2.10.1); a base of Composer (see the module's docstring)."""

    sampling: bool
    dynamic_symbols: set[Any]

    def _is_dynamic(self, value: object) -> bool:
        """Whether a compile-time int is known only when the graph runs: one computed from dynamic extents.
        When composing for symbolic samples (checking), a SymInt mostly stands for a compile-time value (an
        attribute): only one over the graph inputs' dynamic extents is dynamic then."""
        if not is_symbolic(value):
            return False
        return not self.sampling or bool(value.expr.free_symbols & self.dynamic_symbols)  # type: ignore[attr-defined]

    def _static_condition(self, frame: _Frame, cond: ast.Expr) -> bool | None:
        """The value of a compile-time condition, or None when it depends on tensor data."""
        if isinstance(cond, ast.Call | ast.BlockExpr):
            return None
        if isinstance(cond, ast.Name) and isinstance(frame.tensors.get(cond.id), Tensor):
            return None
        env = frame.values()  # outside the recording: a pack of tensors compares their shapes (Pack.uniform)
        try:
            with recording() as guards:
                value = evaluate(cond, env, frame.dtypes)
        except EvalError:
            return None
        involved = {s for g in guards for s in getattr(g, "free_symbols", ())}
        if isinstance(value, bool) and (involved & self.dynamic_symbols or (involved and not self.sampling)):
            # decided on a sample of a dynamic extent (its bound): the other sizes would silently take the
            # same branch
            names = sorted(str(s) for s in involved)
            raise _error("E0503", f"this condition depends on the dynamic extent{'s' if len(names) > 1 else ''} "
                         f"{', '.join(names)}, known only when the graph runs; a compile-time 'if' cannot "
                         "decide it", cond.span,
                         hint=f"to branch when the graph runs, compare tensors: '{names[0]}_ = "
                         f"layout.tensor<int>{{value=[{names[0]}]}}();' before it, then 'if math.gt({names[0]}_, "
                         "5) then ...' (with your comparison)")
        if isinstance(value, bool):
            return value
        return None

    def _if(self, frame: _Frame, node: ast.IfExpr, count: int, names: list[str], label: str) -> list[Value]:
        for cond, branch in node.branches:
            decided = self._static_condition(frame, cond)
            if decided is None:
                return self._dynamic_if(frame, node, count, label)
            if decided:
                return self._branch(frame, branch, count, names, label)
        return self._branch(frame, node.orelse, count, names, label)

    def _branch(self, frame: _Frame, branch: ast.Expr, count: int, names: list[str], label: str) -> list[Value]:
        if isinstance(branch, ast.Call | ast.BlockExpr) and branch.label:
            label = frame.scope + branch.label  # §2.10: an explicit label overrides the auto-generated one
        return self._rhs(frame, branch, count, names, label)

    def _subgraph(self, frame: _Frame, name: str, body: ast.Expr, params: Mapping[str, Tensor],
                  scope: str) -> Graph:
        """A branch or loop body as its own graph; outer tensors are captured by reference."""
        graph = Graph(name=name, inputs=list(params.values()))
        inner = frame.child(scope)
        inner.graph = graph
        inner.tensors.update(params)
        results = self._rhs(inner, body, 0, [], scope.rstrip("."))
        for value in results:
            if isinstance(value, list):
                graph.outputs.extend(value)
            elif value is not None:
                graph.outputs.append(value)
        return graph

    def _like(self, frame: _Frame, dtype: str, shape: _Shape | None, name: str = "%out",
              kind: str = "intermediate") -> Tensor:
        """A new tensor of the given unified shape (see _unified): extents, bounds and symbolic extents."""
        assert shape is not None
        dims, bounds, symbolic = shape
        tensor = self._new_tensor(frame, name, dtype, dims, kind, bounds=bounds)  # type: ignore[arg-type]
        tensor.symbolic = symbolic
        return tensor

    def _dynamic_if(self, frame: _Frame, node: ast.IfExpr, count: int, label: str) -> list[Value]:
        scope = (label or self._fresh(frame.scope, "if")) + "."
        subgraphs: dict[str, Graph] = {}
        for k, (cond, branch) in enumerate(node.branches):
            subgraphs[f"cond{k}"] = self._subgraph(frame, f"cond{k}", cond, {}, scope)
            subgraphs[f"then{k}"] = self._subgraph(frame, f"then{k}", branch, {}, scope)
        subgraphs["else"] = self._subgraph(frame, "else", node.orelse, {}, scope)
        branches = [g.outputs for key, g in subgraphs.items() if key.startswith(("then", "else"))]
        outputs: list[Value] = []
        for k in range(len(branches[0])):
            results = [b[k] for b in branches if k < len(b)]
            unified = _unified(results) if len(results) == len(branches) else None
            if unified is None or any(len(b) != len(branches[0]) for b in branches):
                raise _error("E0604", "the branches of an 'if' must yield tensors of the same types and shapes "
                             "(dynamic extents may differ)", node.span)
            outputs.append(self._like(frame, results[0].dtype, unified))
        op = Operation(op="if", definition=None, inputs=[], outputs=outputs, label=scope.rstrip("."),
                       subgraphs=subgraphs, span=node.span)
        assert frame.graph is not None
        frame.graph.operations.append(op)
        return outputs

    def _loop(self, frame: _Frame, node: ast.LoopExpr, count: int, names: list[str], label: str) -> list[Value]:
        scans = {s.name: self._operand(frame, s.pack) for s in node.scans}
        for s in node.scans:
            if not isinstance(scans[s.name], list):
                raise _error("E0304", f"'for {s.name} : ...' needs a pack of tensors", s.span)
        lengths = {len(v) for v in scans.values()}  # type: ignore[arg-type]
        if len(lengths) > 1:
            raise _error("E0406", "the scanned packs of a loop must have the same length", node.span)
        static_count: int | None = lengths.pop() if lengths else None
        count = node.count.count if node.count is not None else None
        count_span = node.count.span if node.count is not None else node.span
        if count is not None and self._is_null(frame, count):
            # `do..(steps)` with an omitted optional `steps` (§2.4.1): no explicit count, the loop
            # runs over its packs (nn.lstm_loop without steps)
            count = None
            if not scans and node.pre_cond is None and node.post_cond is None:
                raise _error("E0503", "the iteration count of this loop is null, and it has no 'for' clause and "
                             "no condition to stop it", count_span)
        if count is not None:
            given = self._static_count(frame, count)
            if given is not None and self._is_dynamic(given):
                # a count given by dynamic extents (`do..(n)` on `real[n|10]`) is a tensor at run time; a
                # dynamic extent itself is at most its bound, which bounds the iterations
                if node.unroll:
                    raise _error("E0503", "'unroll' needs a compile-time iteration count; this one is given by "
                                 "a dynamic extent", count_span)
                if getattr(given.expr, "is_Symbol", False):  # type: ignore[attr-defined]
                    static_count = int(given) if static_count is None else min(static_count, int(given))
            elif given is not None:
                static_count = given if static_count is None else min(static_count, given)
            elif node.unroll:
                raise _error("E0503", "'unroll' needs a compile-time iteration count", count_span)
            # else a dynamic (tensor) count: the scanned packs' length, if any, stays the upper bound
            # of the iterations (§2.10.1), and so of the scan outputs' length
        if node.unroll:
            if static_count is None:
                raise _error("E0503", "'unroll' needs a compile-time iteration count or scanned packs", node.span)
            return self._unroll(frame, node, scans, static_count, label)
        return self._dynamic_loop(frame, node, scans, static_count, label, count)

    def _is_null(self, frame: _Frame, expr: ast.Expr) -> bool:
        """Whether expr is null at compile time (an omitted optional input or attribute)."""
        if isinstance(expr, ast.Name) and expr.id in frame.tensors:
            return frame.tensors[expr.id] is None
        try:
            return evaluate(expr, frame.values(), frame.dtypes) is None
        except EvalError:
            return False

    def _static_count(self, frame: _Frame, expr: ast.Expr) -> int | None:
        if isinstance(expr, ast.Name) and isinstance(frame.tensors.get(expr.id), Tensor):
            return None
        try:
            value = evaluate(expr, frame.values(), frame.dtypes)
        except EvalError:
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _unroll(self, frame: _Frame, node: ast.LoopExpr, scans: dict[str, Value], n: int, label: str) -> list[Value]:
        carried: list[Value] = [self._carried_init(frame, c) for c in node.carried]
        scan_outputs: list[list[Tensor]] = []
        base = label or frame.scope + self._fresh(frame.scope, "loop")
        for i in range(n):
            inner = frame.child(f"{base}.{i}.")
            for c, value in zip(node.carried, carried, strict=True):
                inner.tensors[c.name] = value
            for name, pack in scans.items():
                inner.tensors[name] = pack[i]  # type: ignore[index]
            if node.count is not None and node.count.index is not None:
                inner.tensors[node.count.index] = self._constant(inner, i, node.span)
            results = self._rhs(inner, node.body, 0, [], f"{base}.{i}")
            for c, value in zip(node.carried, results, strict=False):  # a new tensor per step (§2.10.1)
                if isinstance(value, Tensor) and value.name.startswith("%"):
                    value.name = f"{base}.{i}.{c.name}"
            carried = results[:len(node.carried)]
            for k, value in enumerate(results[len(node.carried):]):
                if len(scan_outputs) <= k:
                    scan_outputs.append([])
                if isinstance(value, Tensor):
                    scan_outputs[k].append(value)
        return [*carried, *scan_outputs]

    def _carried_init(self, frame: _Frame, c: ast.Carried) -> Value:
        value = self._operand(frame, c.value)
        if c.type is not None and isinstance(value, Tensor) and value.kind == "constant" and value.shape == () \
                and c.type.shape:
            binder = Binder(signature(frame.definition), Site())
            binder.env, binder.dtypes = frame.values(), frame.dtypes
            decl = ast.ParamDecl(name=c.name, type=c.type, span=c.span)
            shape, _ = binder.output_shape(decl, None)
            dtype = binder.resolve_dtype(c.type.name)
            filled = self._new_tensor(frame, "%const", dtype, shape, "constant")
            if not any(hasattr(d, "expr") for d in shape):  # symbolic when checking: no values
                filled.value = np.full(shape, value.value, dtype=NUMPY_DTYPES.get(dtype, object))
            return filled
        return value

    def _dynamic_loop(self, frame: _Frame, node: ast.LoopExpr, scans: dict[str, Value], static_count: int | None,
                      label: str, count: ast.Expr | None) -> list[Value]:
        scope = (label or self._fresh(frame.scope, "loop")) + "."
        initial = [self._carried_init(frame, c) for c in node.carried]
        for c, value in zip(node.carried, initial, strict=True):
            if not isinstance(value, Tensor):
                raise _error("E0304", f"loop variable '{c.name}' must be a tensor", c.span)
        n_carried = len(node.carried)
        # A loop variable's dynamic extents are those of its initial value (`n`) while the body keeps them; an
        # extent the body changes (a concat growing it) is open in the body: it is composed again so
        # (no tensor inside claims `n`, nor a bound that holds for the first iteration only).
        grown: list[set[int]] = [set() for _ in node.carried]
        for _ in range(2):
            params: dict[str, Tensor] = {}
            for c, value, dims in zip(node.carried, initial, grown, strict=True):
                params[c.name] = self._like(frame, value.dtype, _opened(_unified([value]), dims),  # type: ignore[list-item]
                                            scope + c.name, "input")
            for name, pack in scans.items():
                first = pack[0]  # type: ignore[index]
                # an item has the extents its pack's items agree on (a dynamic one keeps its symbol, e.g. `n`)
                params[name] = self._like(frame, first.dtype, _unified(pack) or _unified([first]), scope + name,
                                          "input")
            if node.count is not None and node.count.index is not None:
                params[node.count.index] = self._new_tensor(frame, scope + node.count.index, "int", (), "input")
            subgraphs = {"body": self._subgraph(frame, "body", node.body, params, scope)}
            for key, cond in (("pre_cond", node.pre_cond), ("post_cond", node.post_cond)):
                if cond is not None:
                    subgraphs[key] = self._subgraph(frame, key, cond, params, scope)
            body_out = subgraphs["body"].outputs
            if len(body_out) < n_carried:
                raise _error("E0605", f"the loop body yields {len(body_out)} tensors for {n_carried} loop "
                             "variables", node.span)
            changed = [_changed(params[c.name], t) for c, t in zip(node.carried, body_out, strict=False)]
            if not any(changed) or any(g for g in grown):
                break
            grown = changed
        finals: list[Value] = []
        for c, start, t, dims in zip(node.carried, initial, body_out[:n_carried], grown, strict=True):
            # after 0 iterations the initial value, else the body's: extents both agree on, or dynamic (one the
            # body changes has no bound: the iterations are not counted here)
            unified = _opened(_unified([start, t]), dims)  # type: ignore[list-item]
            if unified is None:
                raise _error("E0604", f"loop variable '{c.name}' changes its type, rank or a static extent in the "
                             "loop body", c.span)
            finals.append(self._like(frame, t.dtype, unified))
        bound = static_count
        scan_outs: list[Value] = []
        for t in body_out[n_carried:]:
            if bound is None:
                raise _error("E0411", "a loop without a compile-time bound on its iterations cannot have scan "
                             "outputs", node.span)
            scan_outs.append([self._like(frame, t.dtype, _unified([t])) for _ in range(bound)])
        count_input: list[Value] = []
        if count is not None:
            count_input = [self._operand(frame, count)]
        op = Operation(op="loop", definition=None,
                       inputs=[*initial, *[v for v in scans.values()], *count_input],
                       outputs=[*finals, *scan_outs], label=scope.rstrip("."), subgraphs=subgraphs, span=node.span,
                       attribs={"carried": n_carried, "scans": len(scans), "has_count": bool(count_input),
                                "max_iterations": bound})
        assert frame.graph is not None
        frame.graph.operations.append(op)
        return [*finals, *scan_outs]


#: (extents with None where dynamic, their bounds or None, their symbolic extents or None)
_Shape = tuple[tuple[int | None, ...], tuple[int | None, ...] | None, tuple[Any, ...] | None]


def _unified(tensors: Sequence[Tensor]) -> _Shape | None:
    """The shape of a value that is one of tensors (the results of an `if`'s branches, a loop variable before
    and after the body; §2.10.1): an extent static in all is kept; one that is dynamic in any is dynamic,
    bounded by the largest bound (None if one has none), and keeps its symbolic extent (`n`) where all agree
    on it; otherwise it has none, and is named after the result when read (skriptnd.compose.frame). None when
    the dtypes or ranks differ, or static extents do."""
    first = tensors[0]
    if any(t.dtype != first.dtype or t.rank != first.rank for t in tensors):
        return None
    if not any(t.dynamic for t in tensors):
        return (first.shape, None, None) if all(t.shape == first.shape for t in tensors) else None
    from skriptnd.semantics.symbolic import vanishes  # lazy: it imports sympy, only dynamic extents need it

    dims: list[int | None] = []
    bounds: list[int | None] = []
    symbolic: list[Any] = []
    for k in range(first.rank):
        extents = [t.shape[k] for t in tensors]
        if all(d is not None for d in extents):
            if len(set(extents)) > 1:
                return None
            dims.append(extents[0])
            bounds.append(None)
            symbolic.append(None)
            continue
        limits = [d if d is not None else (t.bounds[k] if t.bounds else None) for t, d in zip(tensors, extents,
                                                                                              strict=True)]
        exprs = [None if d is not None else (t.symbolic[k] if t.symbolic else None)
                 for t, d in zip(tensors, extents, strict=True)]
        dims.append(None)
        bounds.append(None if any(b is None for b in limits) else max(int(b) for b in limits))  # type: ignore[arg-type]
        same = exprs[0] is not None and all(e is not None and vanishes(e - exprs[0]) for e in exprs[1:])
        symbolic.append(exprs[0] if same else None)
    return (tuple(dims), tuple(bounds) if any(b is not None for b in bounds) else None,
            tuple(symbolic) if any(e is not None for e in symbolic) else None)


def _opened(shape: _Shape | None, dims: set[int]) -> _Shape | None:
    """shape with the extents at dims dynamic, without a bound or a symbolic extent (see _dynamic_loop)."""
    if shape is None or not dims:
        return shape
    extents, bounds, symbolic = shape
    rank = len(extents)
    opened_bounds = tuple(None if k in dims else b for k, b in enumerate(bounds or (None,) * rank))
    opened_symbolic = tuple(None if k in dims else e for k, e in enumerate(symbolic or (None,) * rank))
    return (tuple(None if k in dims else d for k, d in enumerate(extents)),
            opened_bounds if any(b is not None for b in opened_bounds) else None,
            opened_symbolic if any(e is not None for e in opened_symbolic) else None)


def _changed(param: Tensor, result: Tensor) -> set[int]:
    """The dynamic extents of a loop variable that the body's result does not keep (bound or symbol)."""
    if param.rank != result.rank or not (param.dynamic or result.dynamic):
        return set()
    from skriptnd.semantics.symbolic import vanishes  # lazy: it imports sympy, only dynamic extents need it

    bounds = param.bounds or (None,) * param.rank
    new_bounds = result.bounds or (None,) * result.rank
    exprs = param.symbolic or (None,) * param.rank
    new_exprs = result.symbolic or (None,) * result.rank
    changed = set()
    for k in range(param.rank):
        if param.shape[k] is not None and result.shape[k] is not None:
            continue  # static: _unified judges it
        if param.shape[k] is not None or result.shape[k] is not None or bounds[k] != new_bounds[k]:
            changed.add(k)
        elif exprs[k] is not None and (new_exprs[k] is None or not vanishes(new_exprs[k] - exprs[k])):
            changed.add(k)
    return changed
