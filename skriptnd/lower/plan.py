"""Plans for @lower blocks (spec §2.12): analysis once per binding, vectorised execution per run.

A plan is a list of steps, one per formula instance (a formula is instantiated once per value
of its pack-loop indices: the `unroll..(k -> n)` index and indices that select items of tensor
packs, whose items may differ in shape; and once per chunk when its index space is too large).
Each step evaluates the staged right-hand side over the index space and assigns it:

- *structured* left-hand sides (every index an int or affine in distinct index symbols, incl.
  mixed-radix `i * n + j`) write through a numpy view of the output: reductions over the index
  symbols missing on the left use `ufunc.reduce`; a product-sum of tensor accesses that are
  views goes through `np.einsum`;
- any other left-hand side scatters with `ufunc.at` (or plain fancy assignment, where the last
  write wins, as a sequential loop would have it);
- a left-hand side indexed by a data-dependent extent symbol enumerates the points that satisfy
  the condition in row-major order of the loop indices (`where_true`);
- an update that reads the output it writes (argmax-style `idx[] := i, i < n | x[i,] > x[idx[],]`)
  loops in Python over the index symbols missing on the left (the dependency carrying ones),
  vectorised over all others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skriptnd.lower import ops
from skriptnd.lower.access import view_builder
from skriptnd.lower.stage import PackedDim, Shared, Stager
from skriptnd.lower.step import Step, Window, Write
from skriptnd.lower.values import Aff as _Aff
from skriptnd.lower.values import Arr as _Arr
from skriptnd.lower.values import (
    BIdx,
    Counter,
    Dyn,
    LoweringError,
    RangeIdx,
    Runtime,
    Space,
    Staged,
    TRef,
    TStack,
    np_dtype,
    param,
)
from skriptnd.semantics.binding import Binding
from skriptnd.semantics.evaluate import EvalError, evaluate, free_names
from skriptnd.semantics.values import TensorValue
from skriptnd.syntax import ast

#: Index spaces larger than this are evaluated in chunks along one axis (elements).
CHUNK_ELEMENTS = 1 << 24


# ================================================================ compiling


class _Compiler:
    def __init__(self, definition: ast.Definition, binding: Binding) -> None:
        self.definition = definition
        self.binding = binding
        self.sig = binding.signature
        self.env = binding.env
        self.dtypes = binding.dtypes
        tensors: dict[str, Any] = {}
        self.input_refs: list[Any] = []
        for decl in self.sig.inputs:
            value = self.env.get(decl.name)
            ref = self._input_ref(decl.name, value)
            tensors[decl.name] = ref
            self.input_refs.append(ref)
        self.output_refs: list[Any] = []
        self.output_bounds: list[Any] = []
        for info in binding.outputs:
            if info.shapes is not None:
                refs = tuple(TRef(info.name, k, self._concrete(s, info.name), info.dtype, True)
                             for k, s in enumerate(info.shapes))
                ref: Any = refs
            elif info.shape is not None:
                shape = tuple(b if s is None else s for s, b in zip(info.shape, info.bounds or (None,) * len(
                    info.shape), strict=True))
                ref = TRef(info.name, None, self._concrete(shape, info.name), info.dtype, True)
            else:
                ref = None
            tensors[info.name] = ref
            self.output_refs.append(ref)
        counters = set()
        for decl in self.sig.outputs:
            for item in decl.type.shape or ():
                if item.bound is not None and isinstance(item.value, ast.Name) and item.value.id not in self.env:
                    counters.add(item.value.id)
        self.shared = Shared(self.env, self.dtypes, tensors, counters)
        self.constants: dict[str, np.ndarray] = {}
        for decl in self.sig.constants:
            self._constant(decl)

    def _concrete(self, shape: Sequence[Any], name: str) -> tuple[int, ...]:
        if any(not isinstance(s, int) for s in shape):
            raise LoweringError(f"the shape of '{name}' is not known ({list(shape)}); @lower needs concrete shapes")
        return tuple(int(s) for s in shape)

    def _input_ref(self, name: str, value: object) -> TRef | tuple[TRef, ...] | None:
        """The tensor(s) an input is bound to; ``value`` is whatever the binding holds (checked here)."""
        if value is None:
            return None
        if isinstance(value, TensorValue):
            return TRef(name, None, self._concrete(value.shape, name), value.dtype)
        if isinstance(value, tuple):
            return tuple(TRef(name, k, self._concrete(v.shape, name), v.dtype) for k, v in enumerate(value))
        raise LoweringError(f"input '{name}' is not bound to a tensor")

    # -- constants (@constant tensors with loop bounds are formulas too)

    def _constant(self, decl: ast.ParamDecl) -> None:
        kind = self.dtypes.get(decl.type.name, decl.type.name)
        try:
            shape = self._shape(decl.type)
        except EvalError as err:
            raise LoweringError(err.message, decl.span) from None
        ref = TRef(decl.name, None, shape, kind, True)
        arr = np.zeros(shape, dtype=np_dtype(kind))
        if decl.default is None:
            raise LoweringError(f"constant '{decl.name}' has no value", decl.span)
        if decl.bounds:
            self.shared.tensors[decl.name] = ref
            probe = Stager(self.shared, Space((), ()), {}, decl.span)
            indices = []
            for b in decl.bounds:
                bound = probe.ev(b.bound)
                name = ast.Name(id=b.index, span=b.span)
                indices.append(ast.Expand(value=name, span=b.span) if isinstance(bound, tuple) else name)
            formula = ast.Lowering(target=ast.TensorAccess(tensor=ast.Name(id=decl.name), indices=tuple(indices)),
                                   op="=", value=decl.default, bounds=decl.bounds, span=decl.span)
            rt = Runtime({decl.name: arr})
            for step in self.formula(formula):
                step.run(rt)
        else:
            try:
                value = evaluate(decl.default, self.env, self.dtypes)
            except EvalError as err:
                raise LoweringError(err.message, decl.span) from None
            arr[...] = np.asarray(value, dtype=arr.dtype).reshape(shape) if isinstance(value, tuple) else value
        self.constants[decl.name] = arr
        self.shared.tensors[decl.name] = TRef(decl.name, None, shape, kind, False)

    def _shape(self, spec: ast.TypeSpec) -> tuple[int, ...]:
        dims: list[int] = []
        for item in spec.shape or ():
            v = evaluate(item.value, self.env, self.dtypes)
            if isinstance(v, tuple):
                dims.extend(int(x) for x in v)
            elif item.pack is not None and item.pack.length is not None:
                dims.extend([int(v)] * int(evaluate(item.pack.length, self.env, self.dtypes)))
            else:
                dims.append(int(v))
        return tuple(dims)

    # -- formulas

    def formulas(self) -> list[ast.Lowering]:
        return [f for b in self.definition.blocks if isinstance(b, ast.LowerBlock) for f in b.items]

    def formula(self, f: ast.Lowering) -> list[Step]:
        target = _base_name(f.target)
        if target is None:
            raise LoweringError("the left-hand side must be an access of an output tensor", f.span)
        pack_syms = self._pack_loop_symbols(f)
        loops: list[tuple[str, ast.Expr]] = []
        if f.unroll is not None:
            if f.unroll.index is None or f.unroll.count is None:
                raise LoweringError("an unrolled formula needs an index and a count: 'unroll..(k -> n)'", f.span)
            loops.append((f.unroll.index, f.unroll.count))
        loops += [(b.index, b.bound) for b in f.bounds if b.index in pack_syms]
        vector = [b for b in f.bounds if b.index not in pack_syms]
        steps: list[Step] = []
        self._loop(f, loops, vector, {}, lambda scope, extents, lengths: steps.extend(
            self._instance(f, scope, extents, lengths)))
        return steps

    def index_spaces(self, f: ast.Lowering) -> list[tuple[int, ...]]:
        """The extents of each instance of formula ``f`` (one per pack-loop value), without staging it."""
        pack_syms = self._pack_loop_symbols(f)
        loops = [(b.index, b.bound) for b in f.bounds if b.index in pack_syms]
        if f.unroll is not None and f.unroll.index is not None and f.unroll.count is not None:
            loops.insert(0, (f.unroll.index, f.unroll.count))
        spaces: list[tuple[int, ...]] = []
        self._loop(f, loops, [b for b in f.bounds if b.index not in pack_syms], {},
                   lambda _scope, _extents, lengths: spaces.append(lengths))
        return spaces

    def _loop(self, f: ast.Lowering, loops: list[tuple[str, ast.Expr]], vector: list[ast.LoopBound],
              scope: dict[str, Any], emit: Callable[[dict[str, Any], list[tuple[str, Any]], tuple[int, ...]], None]) -> None:
        if loops:
            (name, bound), rest = loops[0], loops[1:]
            n = Stager(self.shared, Space((), ()), scope, f.span).ev(bound)
            if type(n) is not int:
                raise LoweringError(f"the bound of pack index '{name}' must be a compile-time int", f.span)
            for k in range(n):
                self._loop(f, rest, vector, {**scope, name: k}, emit)
            return
        probe = Stager(self.shared, Space((), ()), scope, f.span)
        extents: list[tuple[str, int | tuple[int, ...]]] = []
        for b in vector:
            n = probe.ev(b.bound)
            if isinstance(n, tuple):
                if not all(type(x) is int for x in n):
                    raise LoweringError(f"the bound of index '{b.index}' must be compile-time ints", f.span)
                extents.append((b.index, tuple(max(0, x) for x in n)))
            elif type(n) is int:
                extents.append((b.index, max(0, n)))
            else:
                raise LoweringError(f"the bound of index '{b.index}' must be a compile-time int or pack of ints",
                                    f.span)
        lengths: list[int] = []
        for _, n in extents:
            lengths.extend(n if isinstance(n, tuple) else (n,))
        if any(x == 0 for x in lengths):
            return  # an empty loop assigns nothing
        emit(scope, extents, tuple(lengths))

    def _instance(self, f: ast.Lowering, scope: dict[str, Any], extents: list[tuple[str, Any]],
                  lengths: tuple[int, ...]) -> list[Step]:
        space = Space(lengths, (0,) * len(lengths))
        step = self._stage(f, scope, extents, space, ())
        if step is None:
            return []
        reads_target = _reads(f, _base_name(f.target))
        if reads_target:
            laxes = set(range(len(lengths)))
            for w in step.writes:
                laxes &= _plain_axes(w.items)
            seq = tuple(a for a in range(len(lengths)) if a not in laxes)
            if seq:
                seq_space = Space(tuple(1 if a in seq else n for a, n in enumerate(lengths)), (0,) * len(lengths))
                step = self._stage(f, scope, extents, seq_space, seq)
                if step is None:
                    return []
                for w in step.writes:
                    if w.struct is None or w.counter_dim is not None:
                        raise LoweringError("an update that reads its own output needs a left-hand side indexed "
                                            "by index symbols, ints and affine expressions", f.span)
                step.space_lengths = lengths
                return [step]
        if space.size > CHUNK_ELEMENTS and not all(step.einsum):
            return self._chunks(f, scope, extents, space, step)
        return [step]

    def _chunks(self, f: ast.Lowering, scope: dict[str, Any], extents: list[tuple[str, Any]], space: Space,
                step: Step) -> list[Step]:
        """Split the space along one axis: the leading axis of the left-hand side (axis 0 when points
        are counted, to keep their order)."""
        counted = any(w.counter_dim is not None for w in step.writes)
        axis = 0
        if not counted:
            candidates = [a for w in step.writes if w.struct is not None for a in w.struct[1]]
            candidates = [a for a in candidates if space.lengths[a] > 1] or [
                a for a in range(space.ndim) if space.lengths[a] > 1]
            axis = candidates[0] if candidates else 0
        n = space.lengths[axis]
        per = max(1, space.size // n)
        chunk = max(1, CHUNK_ELEMENTS // per)
        steps = []
        for start in range(0, n, chunk):
            lengths = list(space.lengths)
            starts = [0] * space.ndim
            lengths[axis] = min(chunk, n - start)
            starts[axis] = start
            part = self._stage(f, scope, extents, Space(tuple(lengths), tuple(starts)), ())
            if part is not None:
                steps.append(part)
        return steps

    def _stage(self, f: ast.Lowering, scope: dict[str, Any], extents: list[tuple[str, Any]], space: Space,
               seq: tuple[int, ...]) -> Step | None:
        symbols: dict[str, Any] = {}
        axis = 0
        for name, n in extents:
            if isinstance(n, tuple):
                items = []
                for _ in n:
                    items.append(param(axis) if axis in seq else _Aff({axis: 1}, 0, space))
                    axis += 1
                symbols[name] = tuple(items)
            else:
                symbols[name] = param(axis) if axis in seq else _Aff({axis: 1}, 0, space)
                axis += 1
        target = _base_name(f.target)
        pad_node = f.value if isinstance(f.value, ast.TensorAccess) and f.op in ops.ACCUMULATORS else None
        st = Stager(self.shared, space, {**scope, **symbols}, f.span,
                    varying_tensors=frozenset({target}) if seq else frozenset(), pad_node=pad_node, pad_op=f.op)
        for loc in f.locals:
            st.scope[loc.name] = st.ev(loc.value)
        value = st.ev(f.value)
        cond: Any = True
        if f.condition is not None:
            cond = st.ev(f.condition)
            if isinstance(cond, tuple):
                raise LoweringError("the condition of a formula must be a single bool, not a pack", f.span)
            if cond is False or cond is None:
                return None
            if isinstance(cond, _Aff) or type(cond) not in (bool, _Arr, Dyn):
                raise LoweringError("the condition of a formula must be a bool", f.span)
        st.lhs = True
        writes = self._writes(st, f, value)
        for w in writes:
            self._analyse(st, w, f, space)
        return Step(f, space, writes, cond, st.reasons, seq)

    def _writes(self, st: Stager, f: ast.Lowering, value: Staged) -> list[Write]:
        target: ast.TensorAccess = f.target
        tensor = st.tensor_of(target.tensor)
        if tensor is None:
            raise LoweringError("the left-hand side writes an omitted output", f.span)
        if isinstance(tensor, TStack):
            raise LoweringError("an output pack item must be selected by a compile-time index", f.span)
        items = st.index_items(target.indices)
        if items is None:
            raise LoweringError("an index of the left-hand side is null", f.span)
        out: list[Write] = []

        def expand(t: Staged, its: list[Any], v: Staged, packed: bool) -> None:
            if isinstance(t, tuple):
                if packed:
                    raise LoweringError("a left-hand side can only be packed once", f.span)
                for k, ref in enumerate(t):
                    expand(ref, its, _item(v, k, len(t), f), True)
                return
            dims = [d for d, it in enumerate(its) if isinstance(it, RangeIdx | PackedDim)]
            if dims:
                if packed:
                    raise LoweringError("a left-hand side can only be packed once", f.span)
                d = dims[0]
                it = its[d]
                values = it.resolve(t.shape[d]) if isinstance(it, RangeIdx) else it.items
                for k, p in enumerate(values):
                    expand(t, its[:d] + [p] + its[d + 1:], _item(v, k, len(values), f), True)
                return
            if isinstance(v, tuple):
                raise LoweringError("the right-hand side is a pack but the left-hand side is not", f.span)
            out.append(Write(t, list(its), v))

        expand(tensor, items, value, False)
        return out

    def _analyse(self, st: Stager, w: Write, f: ast.Lowering, space: Space) -> None:
        tref = w.tref
        if not tref.output:
            raise LoweringError(f"'{tref.name}' is not an output; only outputs can be assigned", f.span)
        if len(w.items) != len(tref.shape):
            raise LoweringError(f"output '{tref.name}' has rank {len(tref.shape)} but is written with "
                                f"{len(w.items)} indices", f.span)
        counters = [d for d, it in enumerate(w.items) if isinstance(it, Counter)]
        if len(counters) > 1:
            raise LoweringError("at most one data-dependent extent can be enumerated", f.span)
        if counters:
            w.counter_dim = counters[0]
        else:
            w.struct = _struct_lhs(w.items, tref.shape, space)
            if w.struct is None and f.op in ops.ACCUMULATORS:
                w.window = _window_lhs(w.items, tref.shape, space)
        fixed = []
        for d, it in enumerate(w.items):
            if d == w.counter_dim:
                fixed.append(0)
            elif isinstance(it, BIdx) or type(it) is int or isinstance(it, _Aff | _Arr | Dyn):
                fixed.append(st.fix_index(it, tref.shape[d], tref.name, d))
            else:
                raise LoweringError(f"invalid index on the left-hand side: {it!r}", f.span)
        w.fixed = fixed
        if isinstance(w.value, _Aff):
            w.value = _Arr(w.value.arr())

    def _pack_loop_symbols(self, f: ast.Lowering) -> set[str]:
        names = {b.index for b in f.bounds}
        packs = {n for n, t in self.shared.tensors.items() if isinstance(t, tuple)}
        packs |= {d.name for d in self.sig.inputs if d.type.pack is not None}
        packs |= {d.name for d in self.sig.outputs if d.type.pack is not None}
        found = set()
        nodes: list[ast.Node] = [f.target, f.value, *(loc.value for loc in f.locals)]
        if f.condition is not None:
            nodes.append(f.condition)
        for root in nodes:
            for n in root.walk():
                if (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in packs
                        and isinstance(n.index, ast.Name) and n.index.id in names):
                    found.add(n.index.id)
        for b in f.bounds:
            found |= free_names(b.bound) & names
        return found


def _item(v: Staged, k: int, n: int, f: ast.Lowering) -> Staged:
    if isinstance(v, tuple):
        if len(v) != n:
            raise LoweringError(f"the right-hand side has {len(v)} items but the left-hand side {n}", f.span)
        return v[k]
    return v


def _base_name(target: ast.Expr) -> str | None:
    if not isinstance(target, ast.TensorAccess):
        return None
    t = target.tensor
    if isinstance(t, ast.Subscript):
        t = t.value
    return t.id if isinstance(t, ast.Name) else None


def _reads(f: ast.Lowering, name: str | None) -> bool:
    roots: list[ast.Node] = [f.value, *(loc.value for loc in f.locals), *f.target.indices]
    if f.condition is not None:
        roots.append(f.condition)
    for root in roots:
        for n in root.walk():
            if isinstance(n, ast.TensorAccess) and _base_name(n) == name:
                return True
    return False


def _plain_axes(items: list[Any]) -> set[int]:
    """Axes written by a plain index (affine in one symbol) of a left-hand side."""
    axes = []
    for it in items:
        if isinstance(it, _Aff) and len(it.terms) == 1:
            axes.append(it.terms[0][0])
    return {a for a in axes if axes.count(a) == 1}


def _window_lhs(items: list[Any], shape: tuple[int, ...], space: Space) -> Window | None:
    """A left-hand side of ints, affine indices and bounded `|ci * i + cj * j + base|` indices
    (positive coefficients), all in distinct axes; None when it is anything else."""
    plan: list[tuple[Any, ...]] = []
    dims: list[tuple[Any, ...]] = []
    order: list[int] = []
    windowed = False
    for it, extent in zip(items, shape, strict=True):
        if isinstance(it, BIdx) and it.skip and isinstance(it.value, _Aff) and 1 <= len(it.value.terms) <= 2 \
                and all(c > 0 for _, c in it.value.terms):
            aff = it.value
            terms = sorted(aff.terms, key=lambda t: space.lengths[t[0]], reverse=True)
            base = aff.const + sum(c * space.starts[a] for a, c in aff.terms)
            (ai, ci), (aj, cj) = terms[0], terms[1] if len(terms) == 2 else (None, 0)
            plan.append(("raw", extent))
            dims.append(("raw", ai, ci, aj, cj, base, extent))
            order.extend([ai] if aj is None else [ai, aj])
            windowed = True
            continue
        if isinstance(it, BIdx) and isinstance(it.value, _Aff | int) and _in_range(it.value, extent):
            it = it.value
        sub = _struct_lhs([it], (extent,), space)
        if sub is None:
            return None
        entry = sub[2][0]
        plan.append(entry)
        if entry[0] == "int":
            continue
        axes = [entry[1]] if entry[0] == "slice" else list(entry[1])
        dims.extend(("axis", a) for a in axes)
        order.extend(axes)
    if not windowed or len(set(order)) != len(order):
        return None
    core, _ = view_builder(plan, space, 0)
    return Window(lambda out, rt: core(out, rt), dims, order)


def _in_range(v: Staged, extent: int) -> bool:
    if isinstance(v, int):
        return 0 <= v < extent
    lo, hi = v.range()
    return lo >= 0 and hi < extent


def _struct_lhs(items: list[Any], shape: tuple[int, ...], space: Space) -> tuple[Any, tuple[int, ...], list] | None:
    """A view builder for a left-hand side of ints and affine indices in distinct axes."""
    plan: list[tuple[Any, ...]] = []
    used: list[int] = []
    for it, extent in zip(items, shape, strict=True):
        if type(it) is int:
            if not 0 <= it < extent:
                return None
            plan.append(("int", it))
        elif isinstance(it, Dyn) and it.axis is not None:
            plan.append(("param", it))
        elif isinstance(it, _Aff):
            lo, hi = it.range()
            if lo < 0 or hi >= extent:
                return None
            base = it.const + sum(c * space.starts[a] for a, c in it.terms)
            if len(it.terms) == 1:
                (a, c), = it.terms
                plan.append(("slice", a, c, base))
            else:
                terms = sorted(it.terms, key=lambda t: -t[1])
                for (_, c1), (a2, c2) in zip(terms, terms[1:], strict=False):
                    if c1 != c2 * space.lengths[a2]:
                        return None
                if terms[-1][1] <= 0:
                    return None
                plan.append(("split", tuple(a for a, _ in terms), terms[-1][1], base))
            used.extend(a for a, _ in it.terms)
        else:
            return None
    if len(set(used)) != len(used):
        return None
    core, axes = view_builder(plan, space, 0)
    return core, axes, plan


# ================================================================ the plan


class LoweringPlan:
    """A compiled @lower block for one binding: `run(inputs)` executes it."""

    def __init__(self, compiler: _Compiler, steps: list[Step], init: dict[str, Any]) -> None:
        self.definition = compiler.definition
        self.binding = compiler.binding
        self._inputs = compiler.input_refs
        self._input_decls = compiler.sig.inputs
        self._outputs = compiler.output_refs
        self._constants = compiler.constants
        self._steps = steps
        self._init = init

    @property
    def steps(self) -> int:
        return len(self._steps)

    def run(self, inputs: Sequence[Any]) -> list[Any]:
        if len(inputs) > len(self._inputs):
            raise LoweringError(f"operator '{self.definition.name}' takes {len(self._inputs)} inputs, "
                                f"{len(inputs)} given")
        arrays: dict[str, Any] = dict(self._constants)
        for k, ref in enumerate(self._inputs):
            value = inputs[k] if k < len(inputs) else None
            name = self._input_decls[k].name
            arrays[name] = _check_input(name, ref, value)
        for ref in self._outputs:
            if ref is None:
                continue
            if isinstance(ref, tuple):
                arrays[ref[0].name] = [self._alloc(r) for r in ref] if ref else []
            else:
                arrays[ref.name] = self._alloc(ref)
        rt = Runtime(arrays)
        for step in self._steps:
            step.run(rt)
            rt.stacks.clear()
        results: list[Any] = []
        for ref in self._outputs:
            if ref is None:
                results.append(None)
                continue
            if isinstance(ref, tuple):
                results.append([self._trim(r, arrays[r.name][r.item], rt) for r in ref])
            else:
                results.append(self._trim(ref, arrays[ref.name], rt))
        return results

    def _alloc(self, ref: TRef) -> np.ndarray:
        dtype = np_dtype(ref.kind)
        fill = self._init.get(ref.name, 0)
        if fill == 0:
            return np.zeros(ref.shape, dtype=dtype)
        return np.full(ref.shape, fill, dtype=dtype)

    def _trim(self, ref: TRef, arr: np.ndarray, rt: Runtime) -> np.ndarray:
        index = [slice(None)] * arr.ndim
        trimmed = False
        for (name, item, dim), count in rt.counts.items():
            if name == ref.name and item == ref.item:
                index[dim] = slice(0, count)
                trimmed = True
        return np.ascontiguousarray(arr[tuple(index)]) if trimmed else arr


def _check_input(name: str, ref: TRef | tuple[TRef, ...] | None, value: object) -> np.ndarray | list | None:
    """The run's input ``value`` (whatever the caller passed: an array, a list for a pack, None) checked
    against the plan's tensor(s) ``ref``."""
    if ref is None:
        if value is not None:
            raise LoweringError(f"input '{name}' was omitted in the binding but is given a value")
        return None
    if value is None:
        raise LoweringError(f"no value for input '{name}'")
    if isinstance(ref, tuple):
        if not isinstance(value, list | tuple) or len(value) != len(ref):
            raise LoweringError(f"input '{name}' is a pack of {len(ref)} tensors")
        return [_check_input(name, r, v) for r, v in zip(ref, value, strict=True)]
    arr = np.asarray(value, dtype=np_dtype(ref.kind))
    if arr.shape != ref.shape:
        raise LoweringError(f"input '{name}' has shape {list(arr.shape)}, but the plan was built for "
                            f"{list(ref.shape)}")
    return arr


def compile_lowering(definition: ast.Definition, binding: Binding) -> LoweringPlan:
    """Analyse the @lower block of `definition` for `binding` once; `plan.run(inputs)` executes it."""
    if binding.signature.definition is not definition and binding.signature.definition != definition:
        raise LoweringError(f"the binding is not one of operator '{definition.name}'")
    compiler = _Compiler(definition, binding)
    formulas = compiler.formulas()
    if not formulas:
        raise LoweringError(f"operator '{definition.name}' has no @lower block", definition.name_span)
    init: dict[str, Any] = {}
    seen: set[str] = set()
    for f in formulas:
        name = _base_name(f.target)
        if name is None:
            raise LoweringError("the left-hand side must be an access of an output tensor", f.span)
        if name in seen:
            continue
        seen.add(name)
        if f.op == ":=":
            raise LoweringError(f"the update ':=' of '{name}' needs an initialisation with '=' before it", f.span)
        if f.op in ops.ACCUMULATORS:
            ref = compiler.shared.tensors.get(name)
            first = ref[0] if isinstance(ref, tuple) and ref else ref
            if isinstance(first, TRef):
                init[name] = ops.identity(f.op, first.kind)
    steps: list[Step] = []
    for f in formulas:
        steps.extend(compiler.formula(f))
    return LoweringPlan(compiler, steps, init)


def index_spaces(definition: ast.Definition, binding: Binding) -> list[tuple[ast.Lowering, tuple[int, ...]]]:
    """Each @lower formula instance of `definition` for `binding` with the extents of its index space, in
    order; cheap (the bounds are evaluated, nothing is staged): what counting the work of an operation
    (skriptnd.compose.stats) reads."""
    compiler = _Compiler(definition, binding)
    return [(f, lengths) for f in compiler.formulas() for lengths in compiler.index_spaces(f)]


def run_lowering(definition: ast.Definition, binding: Binding, inputs: Sequence[Any]) -> list[Any]:
    """Evaluate the @lower block of `definition` on `inputs` (numpy arrays; lists for tensor packs;
    None for omitted optional inputs); one result per declared output."""
    return compile_lowering(definition, binding).run(inputs)
