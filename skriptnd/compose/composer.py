"""Graph composition (spec chapter 3, §2.7, §2.10, §2.11, §2.14).

A graph definition plus attribute values becomes a Graph of atomic operations: each
invocation in `@compose` is bound (skriptnd.semantics.binding), then either kept atomic (by
default: standard-library operators, and operators without `@compose`) or decomposed
recursively into its own `@compose`. Labels and scopes follow §2.10; compile-time `if`s are
eliminated (with optional promotion, `if ?x`), `unroll` loops are expanded, and dynamic
branches and loops become operations with subgraphs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from skriptnd.compose import int_ranges
from skriptnd.compose.control import ControlFlow
from skriptnd.compose.extents import symbolic_attribs
from skriptnd.compose.frame import (
    INT_TENSOR_RANGE,
    NUMPY_DTYPES,
    AtomicPolicy,
    _as_value,
    _compose_blocks,
    _error,
    _fits,
    _Frame,
    _params,
    _split_dims,
    decompose_all,
    default_atomic,
)
from skriptnd.compose.interface import GraphInterface, _dynamic_asserts
from skriptnd.compose.ir import Graph, Operation, RunAsserts, Tensor, Value
from skriptnd.compose.nesting import with_nesting_hint
from skriptnd.diagnostics import DiagnosticError, register_codes
from skriptnd.semantics.binding import Binder, Binding, Site, bind, signature
from skriptnd.semantics.evaluate import EvalError, evaluate, free_names
from skriptnd.semantics.modules import LoadedModule, Program, stdlib_module
from skriptnd.semantics.values import Pack, TensorValue, recording
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast

if TYPE_CHECKING:
    import sympy

    from skriptnd.semantics.symbolic import SymInt

register_codes({"E0610": "graph output does not have its declared type"})


class Composer(ControlFlow, GraphInterface):
    """Composes a program's graphs and expands operations (see the module's docstring)."""

    def __init__(self, program: Program, atomic: AtomicPolicy | None = None, sampling: bool = False) -> None:
        self.program = program
        self.atomic = atomic or default_atomic
        #: Composing for symbolic samples of attributes and operator inputs (checking, hover): a SymInt is then
        #: a compile-time value unless its symbols are the graph inputs' dynamic extents (`dynamic_symbols`)
        self.sampling = sampling
        self.dynamic_symbols: set[Any] = set()
        self._names: dict[str, int] = {}
        self._scopes: dict[str, ast.Definition] = {}  # 'conv1.' -> the operator decomposed there

    # ------------------------------------------------------------ graphs

    def compose(self, graph_name: str | None = None, attribs: Mapping[str, Any] | None = None) -> Graph:
        main = self.program.main
        graphs = self.program.graphs()
        if main is None or not graphs:
            raise _error("E0206", "the main module defines no graph to compose",
                         Span(str(main.path) if main else "<main>", 1, 1, 1, 2))
        if graph_name is None:
            definition = graphs[0]
        else:
            definition = next((g for g in graphs if g.name == graph_name), None)
            if definition is None:
                import difflib

                close = difflib.get_close_matches(graph_name, [g.name for g in graphs], n=1)
                raise _error("E0204", f"no graph '{graph_name}' in the main module", graphs[0].name_span,
                             hint=f"did you mean '{close[0]}'?" if close else
                             "graphs: " + ", ".join(g.name for g in graphs))
        return self.compose_definition(main, definition, dict(attribs or {}))

    def expand(self, op: Operation) -> Graph:
        """An atomic operation's own @compose as a graph whose inputs stand for the operation's
        inputs (for executing a composite operator that has no kernel)."""
        assert op.definition is not None and op.binding is not None and op.module is not None
        graph = Graph(name=op.op, program=self.program)
        frame = _Frame(op.module, op.definition, {}, {}, op.label + "." if op.label else "", graph=graph)
        params: list[Value] = []
        for value in op.inputs:
            if isinstance(value, list):
                params.append([self._new_tensor(frame, "%in", t.dtype, t.shape, "input") for t in value])
            elif value is not None:
                params.append(self._new_tensor(frame, "%in", value.dtype, value.shape, "input"))
            else:
                params.append(None)
        graph.inputs = [t for p in params for t in (p if isinstance(p, list) else [p] if p is not None else [])]
        results = self._decompose(frame, op.module, op.definition, op.binding, params, op.label)
        graph.outputs = [t for r in results for t in (r if isinstance(r, list) else [r] if r is not None else [])]
        return graph

    def compose_definition(self, module: LoadedModule, definition: ast.Definition,
                           attribs: dict[str, Any]) -> Graph:
        graph = Graph(name=definition.name, program=self.program)
        binder = Binder(signature(definition), Site(span=definition.name_span))
        binder.bind_attributes(attribs)
        binder.bind_deferred(attribs)
        frame = _Frame(module, definition, binder.env, binder.dtypes, "", graph=graph)
        dynamic = self._graph_inputs(frame, binder, graph)
        self._extent_symbols(binder, definition, dynamic)
        # `x.shape[0] <= 50` is on a dynamic extent too: the inputs that have one count as such names
        deferred = _dynamic_asserts(binder.sig, dynamic | {name for name, v in frame.tensors.items()
                                                           if any(t.dynamic for t in (v if isinstance(v, list)
                                                                                      else [v] if v else []))})
        if deferred:  # judged when the graph runs, on the actual extents (§2.6.1): not on their bounds here
            binder.sig = replace(binder.sig, asserts=tuple(a for a in binder.sig.asserts if a not in deferred))
        binder.run_usings_and_asserts()
        if deferred:
            graph.run_asserts = RunAsserts(binder.sig, binder.env, binder.dtypes, deferred)
        frame.env = binder.env
        graph.attribs = {a.name: binder.env.get(a.name) for a in _params(definition, "attrib")}
        self._locals(frame, binder)
        self._statements(frame, _compose_blocks(definition, "compose"))
        for decl in _params(definition, "output"):
            value = frame.tensors.get(decl.name)
            if decl.type.pack is not None and isinstance(value, list):
                self._output_pack(graph, binder, decl, value, dynamic)
                continue
            if not isinstance(value, Tensor):
                raise _error("E0601", f"output '{decl.name}' of graph '{definition.name}' is never assigned",
                             decl.span)
            self._check_declared_dtype(binder, decl, value)
            if decl.type.shape is not None:
                self._check_declared_shape(binder, decl, value, dynamic)
            if value.kind == "intermediate":
                value.kind = "output"
            if value.span is None:  # diagnostics about a graph output point at its declaration
                value.span = decl.span
            graph.outputs.append(value)
            graph.output_names.append(decl.name)
        update = frame.child()
        update.tensors = dict(frame.tensors)
        self._statements(update, _compose_blocks(definition, "update"), updating=True)
        for decl in _params(definition, "variable"):
            new = update.tensors.get(decl.name)
            if new is not None and new is not frame.tensors.get(decl.name):
                graph.updates[decl.name] = new
        self._quantize(frame, definition)
        int_ranges.annotate(graph)
        return graph

    def _locals(self, frame: _Frame, binder: Binder) -> None:
        """@variable and @constant tensors of a definition, named by the frame's scope (§2.7)."""
        for decl in _params(frame.definition, "variable"):
            shape, _ = binder.output_shape(decl, None)
            tensor = self._new_tensor(frame, decl.name, binder.resolve_dtype(decl.type.name), shape, "variable")
            tensor.span = decl.span
            frame.tensors[decl.name] = tensor
        for decl in _params(frame.definition, "constant"):
            dtype = binder.resolve_dtype(decl.type.name)
            if decl.type.pack is not None:
                frame.tensors[decl.name] = self._constant_pack(frame, binder, decl, dtype)
                continue
            shape, _ = binder.output_shape(decl, None)
            value = self._constant_value(frame, decl, dtype, shape)
            tensor = self._new_tensor(frame, decl.name, dtype, shape, "constant")
            tensor.value = value
            frame.tensors[decl.name] = tensor

    def _constant_pack(self, frame: _Frame, binder: Binder, decl: ast.ParamDecl, dtype: str) -> list[Tensor]:
        """`c: real[..n]..(k) = [v1, ..., vk];`: k uniform constants, shapes per item (§2.7)."""
        if decl.type.pack is None or decl.type.pack.length is None:
            raise _error("E0406", f"a pack of constants needs an explicit length, as in '{decl.name}: ...(k)'",
                         decl.span)
        count = self._eval(frame, decl.type.pack.length, f"the length of constant pack '{decl.name}'")
        values = self._eval(frame, decl.default, f"the values of constant pack '{decl.name}'") \
            if decl.default is not None else None
        if not isinstance(values, Pack) or len(values) != count:
            raise _error("E0406", f"constant pack '{decl.name}' needs a list of {count} values, one per item",
                         decl.default.span if decl.default is not None else decl.span)
        items = []
        for j, value in enumerate(values):
            shape, _ = binder.output_shape(decl, j)
            tensor = self._new_tensor(frame, f"{decl.name}.{j}", dtype, shape, "constant")
            tensor.value = np.full(shape, value, dtype=NUMPY_DTYPES.get(dtype, object))
            tensor.span = decl.span
            items.append(tensor)
        return items

    def _constant_value(self, frame: _Frame, decl: ast.ParamDecl, dtype: str, shape: tuple[int | None, ...]) -> Any:
        np_type = NUMPY_DTYPES.get(dtype, object)
        if decl.default is None:
            raise _error("E0307", f"constant '{decl.name}' needs a value", decl.span)
        if any(hasattr(d, "expr") for d in shape):
            return None  # a symbolic extent (graph checking samples it): the shape is checked, not the values
        if not decl.bounds:
            value = self._eval(frame, decl.default, f"the value of constant '{decl.name}'")
            if isinstance(value, Pack):
                _fits(dtype, list(value), f"constant '{decl.name}'", decl.span)
                array = np.array(list(value), dtype=np_type)
                if array.size != int(np.prod(shape)):
                    raise _error("E0406", f"constant '{decl.name}' has {array.size} values for shape {list(shape)}",
                                 decl.span)
                return array.reshape(shape)
            _fits(dtype, [value], f"constant '{decl.name}'", decl.span)
            return np.full(shape, value, dtype=np_type)
        # per-element initialiser with index symbols (§2.7): evaluated once per element
        names = [b.index for b in decl.bounds]
        extents = [int(self._eval(frame, b.bound, f"the bound of '{b.index}'")) for b in decl.bounds]
        if int(np.prod(extents)) > 1 << 16:
            raise _error("E0503", f"constant '{decl.name}' is too large for a per-element initialiser "
                         f"({int(np.prod(extents))} elements)", decl.span)
        out = np.empty(extents, dtype=np_type)
        env = frame.values()
        for index in np.ndindex(*extents):
            env.update(zip(names, (int(i) for i in index), strict=True))
            item = evaluate(decl.default, env, frame.dtypes)
            _fits(dtype, [item], f"constant '{decl.name}'", decl.span)
            out[index] = item
        return out.reshape(shape)

    # ------------------------------------------------------------ statements

    def _statements(self, frame: _Frame, stmts: Sequence[ast.Stmt], updating: bool = False) -> list[Value]:
        yielded: list[Value] = []
        single = len(stmts) == 1
        for stmt in stmts:
            if isinstance(stmt, ast.Yield):
                yielded = [self._operand(frame, e) for e in stmt.values]
                continue
            assert isinstance(stmt, ast.Assign)
            names = [t.name for t in stmt.targets if isinstance(t, ast.LName)]
            label = self._label(frame, stmt, single)
            try:
                results = self._rhs(frame, stmt.value, len(stmt.targets), names, label)
            except DiagnosticError as err:  # an invocation nested in another's arguments: say how to split it
                taken = set(frame.tensors) | set(frame.env)
                raise with_nesting_hint(err, stmt, frame.module.source, taken) from None
            self._assign(frame, stmt.targets, results, stmt)
        return yielded

    def _label(self, frame: _Frame, stmt: ast.Assign, single: bool) -> str:
        """The scope of the right-hand side's invocation (§2.10, labelling invocations)."""
        value = stmt.value
        explicit = value.label if isinstance(value, ast.Call | ast.BlockExpr) else None
        if explicit:
            return frame.scope + explicit
        if single and frame.scope and not _params(frame.definition, "variable") \
                and not _params(frame.definition, "constant"):
            return frame.scope.rstrip(".")  # the containing operator's scope propagates
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.LName):
            return frame.scope + stmt.targets[0].name
        return frame.scope + self._fresh(frame.scope, "op")

    def _fresh(self, scope: str, base: str) -> str:
        key = scope + base
        self._names[key] = self._names.get(key, 0) + 1
        return f"{base}{self._names[key]}"

    def _assign(self, frame: _Frame, targets: Sequence[ast.LValue], results: list[Value], stmt: ast.Assign) -> None:
        if len(results) < len(targets):
            raise _error("E0605", f"{len(targets)} results expected, the right-hand side gives {len(results)}",
                         stmt.span)
        for target, value in zip(targets, results, strict=False):
            if isinstance(target, ast.LSkip):
                continue
            if isinstance(target, ast.LName):
                if target.pack is not None and value is not None and not isinstance(value, list):
                    raise _error("E0304", f"'{target.name}' is declared as a pack but gets a single tensor",
                                 target.span)
                self._rename(frame, target.name, value)
                frame.tensors[target.name] = value
            elif isinstance(target, ast.LList):
                items = value if isinstance(value, list) else [value]
                self._assign(frame, target.items, list(items), stmt)
            else:
                raise _error("E0304", "this left-hand side cannot receive tensors", target.span)

    def _rename(self, frame: _Frame, name: str, value: Value) -> None:
        """Fresh intermediates take the name they are assigned to, in the current scope."""
        if isinstance(value, Tensor) and value.kind == "intermediate" and value.name.startswith("%"):
            value.name = frame.scope + name
        elif isinstance(value, list):
            for i, t in enumerate(value):
                if t.kind == "intermediate" and t.name.startswith("%"):
                    t.name = f"{frame.scope}{name}.{i}"

    # ------------------------------------------------------------ right-hand sides

    def _rhs(self, frame: _Frame, value: ast.Expr, count: int, names: list[str], label: str) -> list[Value]:
        if isinstance(value, ast.Call) and not self._is_builtin(frame, value):
            return self._invoke(frame, value, label)
        if isinstance(value, ast.BlockExpr):
            inner = frame.child(label + "." if label else frame.scope)
            results = self._statements(inner, value.stmts)
            # Like an invocation's results (see _decompose), what the block yields of its own takes the
            # name it is assigned to (`y = { ...; yield v; }` gives 'y', not 'y.v'): a graph output
            # computed by a block is then found under its declared name.
            outer = {id(t) for v in frame.tensors.values() for t in (v if isinstance(v, list) else [v])}
            for result in results:
                for t in result if isinstance(result, list) else [result]:
                    if t is not None and t.kind == "intermediate" and id(t) not in outer \
                            and not t.name.startswith("%"):
                        t.name = "%" + t.name
            return results
        if isinstance(value, ast.IfExpr):
            return self._if(frame, value, count, names, label)
        if isinstance(value, ast.LoopExpr):
            return self._loop(frame, value, count, names, label)
        return [self._operand(frame, value)]

    def _is_builtin(self, frame: _Frame, call: ast.Call) -> bool:
        return call.callee in frame.dtypes

    def _operand(self, frame: _Frame, expr: ast.Expr) -> Value:
        """A tensor (or pack) named by expr, or a compile-time value as a constant tensor."""
        if isinstance(expr, ast.Name) and expr.id in frame.tensors:
            return frame.tensors[expr.id]
        if isinstance(expr, ast.Skip):
            return None
        if isinstance(expr, ast.ListExpr):
            items: list[Tensor] = []
            for item in expr.items:
                inner = item.value if isinstance(item, ast.Expand) else item
                got = self._operand(frame, inner)
                if isinstance(got, list):
                    items.extend(got)
                elif got is not None:
                    items.append(got)
            return items
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) \
                and isinstance(frame.tensors.get(expr.value.id), list):
            pack = frame.tensors[expr.value.id]
            index = self._eval(frame, expr.index, "a pack index")
            if isinstance(index, Pack):
                return [pack[i] for i in index]
            return pack[index]
        if isinstance(expr, ast.Select) and not (free_names(expr.cond) & set(frame.tensors)):
            cond = self._eval(frame, expr.cond, "a condition")
            if cond:
                return self._operand(frame, expr.then)
            return self._operand(frame, expr.orelse) if expr.orelse is not None else None
        value = self._eval(frame, expr, "an expression")
        if isinstance(value, TensorValue | Pack) or value is None:
            raise _error("E0503", "only tensor names, lists of tensors and compile-time values can be passed "
                         "to an operator here", expr.span)
        return self._constant(frame, value, expr.span)

    def _constant(self, frame: _Frame, value: bool | int | float | str, span: Span) -> Tensor:
        if self._is_dynamic(value):
            return self._extent_tensor(frame, value, span)  # type: ignore[arg-type]
        dtype = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else \
            "real" if isinstance(value, float) else "str"
        _fits(dtype, [value], "an int value passed to an operator", span)
        tensor = self._new_tensor(frame, "%const", dtype, (), "constant")
        tensor.value = np.array(value, dtype=NUMPY_DTYPES.get(dtype, object))
        return tensor

    def _extent_tensor(self, frame: _Frame, value: SymInt, span: Span) -> Tensor:
        """An int computed from dynamic extents (`n` of `real[n|10]`, as in `do..(n)`) passed as a tensor:
        `layout.tensor<int>{value=n}`, whose attribute is made concrete when the graph runs
        (skriptnd.compose.extents), not a constant of its bound."""
        module = self.program.modules.get("layout")
        definition = module.definitions.get("tensor") if module is not None and module.is_stdlib else None
        if definition is None:
            parsed = stdlib_module("layout")
            assert parsed is not None, "the standard module layout does not parse"
            definition = next(d for d in parsed.definitions if d.name == "tensor")
        attrs = {"shape": Pack([]), "value": Pack([value])}
        binding = bind(definition, attrs, [], ["int"], Site(span=span))
        (out,) = self._atomic(frame, "layout.tensor", definition, binding, [], frame.scope + self._fresh(frame.scope,
                                                                                                        "extent"),
                              span, set(attrs))
        assert isinstance(out, Tensor)
        return out

    def _eval(self, frame: _Frame, expr: ast.Expr, what: str) -> Any:
        env = frame.values()  # outside the recording: a pack of tensors compares their shapes (Pack.uniform)
        try:
            with recording() as guards:
                value = evaluate(expr, env, frame.dtypes)
        except EvalError as err:
            raise DiagnosticError([err.to_diagnostic()]) from None
        involved = {s for g in guards for s in getattr(g, "free_symbols", ())}
        if involved & self.dynamic_symbols or (involved and not self.sampling):
            # a comparison, a choice or a length taken on a dynamic extent's sample (its bound): the value
            # would hold for that size only (arithmetic, `[h, -1]`, stays symbolic and is made concrete per run)
            names = ", ".join(sorted(str(s) for s in involved))
            raise _error("E0503", f"{what} depends on the dynamic extent{'s' if len(involved) > 1 else ''} {names} "
                         "through a comparison, a choice or a length, which composing cannot decide before the "
                         "graph runs", expr.span,
                         hint="compute it with arithmetic only (it is then evaluated per run), or make the choice "
                         "a dynamic 'if' on tensors")
        return value

    # ------------------------------------------------------------ invocations

    def _invoke(self, frame: _Frame, call: ast.Call, label: str) -> list[Value]:
        found = self.program.resolve_operator(call.callee, frame.module, call.span)
        if found is None:
            raise _error("E0204", f"unknown operator '{call.callee}'", call.span)
        module, definition = found
        qualified = f"{module.name}.{definition.name}"
        attrs = {a.name: self._eval(frame, a.value, f"attribute '{a.name}'") for a in call.attrs}
        args = [self._operand(frame, a) for a in call.args]
        values = [_as_value(a) for a in args]
        site = Site(span=call.span, args=[a.span for a in call.args], attrs={a.name: a.span for a in call.attrs})
        binding = bind(definition, attrs, values, call.type_args, site)
        if self.atomic(qualified, module, definition):
            return self._atomic(frame, qualified, definition, binding, args, label, call.span, set(attrs))
        return self._decompose(frame, module, definition, binding, args, label)

    def _atomic(self, frame: _Frame, qualified: str, definition: ast.Definition, binding: Binding,
                args: list[Value], label: str, span: Span, given: set[str] | None = None) -> list[Value]:
        outputs: list[Value] = []
        for info in binding.outputs:
            if info.shapes is not None:
                outputs.append([self._shaped(frame, info.dtype, s, None) for s in info.shapes])
            elif info.shape is None:
                outputs.append(None)
            else:
                outputs.append(self._shaped(frame, info.dtype, info.shape, info.bounds))
        attribs = {a.name: binding.env.get(a.name) for a in binding.signature.attribs}
        if given is not None and not self.sampling and symbolic_attribs(attribs):
            # attributes given by dynamic extents are made concrete per run (skriptnd.execute): a default
            # computed from them (layout.split's `sizes` from `count`) is computed again then, not kept
            for name in binding.signature.deferred - given:
                attribs[name] = None
        op = Operation(op=qualified, definition=definition, inputs=list(args), outputs=outputs, attribs=attribs,
                       dtypes=dict(binding.dtypes), label=label, binding=binding, span=span,
                       module=self.program.modules.get(qualified.rpartition(".")[0]))
        assert frame.graph is not None
        frame.graph.operations.append(op)
        return outputs

    def _shaped(self, frame: _Frame, dtype: str, shape: tuple[Any, ...],
                bounds: tuple[int | None, ...] | None) -> Tensor:
        dims, sym_bounds, symbolic = _split_dims(shape)
        if bounds is not None:  # a bound given by a dynamic input extent is that extent's own bound: an int
            bounds = tuple(None if b is None else int(b) for b in bounds)
        if sym_bounds is not None:
            bounds = tuple(b if b is not None else (o if bounds else None)
                           for b, o in zip(sym_bounds, bounds or (None,) * len(dims), strict=True))
        tensor = self._new_tensor(frame, "%out", dtype, dims, bounds=bounds)
        tensor.symbolic = symbolic
        return tensor

    def _decompose(self, frame: _Frame, module: LoadedModule, definition: ast.Definition, binding: Binding,
                   args: list[Value], label: str) -> list[Value]:
        scope = label + "." if label else ""
        if definition.kind == "graph" and not label:
            scope = definition.name + "."
        if scope:
            self._scopes.setdefault(scope, definition)
        inner = _Frame(module, definition, dict(binding.env), dict(binding.dtypes), scope, graph=frame.graph)
        for decl, arg in zip(binding.signature.inputs, list(args) + [None] * len(binding.signature.inputs),
                             strict=False):
            if arg is None and decl.default is not None:
                # an omitted input with a default (§2.6): a constant of the value the binding gave it
                # (nn.lstm's `h0: real[b,n] = 0.0` fills [b,n]), not null, which the body cannot pass on
                arg = self._input_default(inner, decl, binding.env.get(decl.name))
            inner.tensors[decl.name] = arg
        binder = Binder(binding.signature, Site())
        binder.env, binder.dtypes = inner.env, inner.dtypes
        self._locals(inner, binder)
        self._statements(inner, _compose_blocks(definition, "compose"))
        results: list[Value] = []
        for decl in binding.signature.outputs:
            value = inner.tensors.get(decl.name)
            if value is None and not decl.type.optional:
                raise _error("E0601", f"output '{decl.name}' of operator '{definition.name}' is never assigned",
                             decl.span)
            self._check_operator_output(definition, decl, binding, value)
            declared = binding.dtypes.get(decl.type.name, decl.type.name)
            for t in value if isinstance(value, list) else [value]:
                if t is not None and declared in NUMPY_DTYPES and t.dtype != declared:
                    raise _error("E0610", f"output '{decl.name}' of operator '{definition.name}' is declared "
                                 f"'{declared}' but receives a '{t.dtype}' tensor", decl.span,
                                 hint=f"declare it '{t.dtype}', or convert the value explicitly "
                                 f"(layout.cast<{declared}>)")
            results.append(value)
        passed = {id(t) for a in args for t in (a if isinstance(a, list) else [a]) if t is not None}
        for value in results:  # results made inside take the caller's name (see _rename)
            for t in value if isinstance(value, list) else [value]:
                if t is not None and t.kind == "intermediate" and id(t) not in passed:
                    t.name = "%" + t.name
        return results

    @staticmethod
    def _check_operator_output(definition: ast.Definition, decl: ast.ParamDecl, binding: Binding,
                               value: Value) -> None:
        """The shape an operator's @compose gives an output must be the one its declaration
        binds (symbolically equal when checking with symbolic extents)."""
        info = next((o for o in binding.outputs if o.name == decl.name), None)
        if info is None or info.shape is None or not isinstance(value, Tensor):
            return
        symbolic = value.symbolic or (None,) * value.rank
        produced = tuple(d if d is not None or e is None else _sym(e) for d, e in zip(value.shape, symbolic, strict=True))
        if len(produced) == len(info.shape) and all(
                a is None or b is None or (a == b if not (hasattr(a, "expr") or hasattr(b, "expr"))
                                           else _same_extent(a, b))
                for a, b in zip(info.shape, produced, strict=True)):
            return
        shown = ", ".join("?" if d is None else str(d) for d in produced)
        declared = ", ".join("?" if d is None else str(d) for d in info.shape)
        raise _error("E0403", f"output '{decl.name}' of operator '{definition.name}' is declared with shape "
                     f"[{declared}] but its @compose produces [{shown}]", decl.span)

    def _input_default(self, frame: _Frame, decl: ast.ParamDecl, bound: TensorValue | Pack | None) -> Value:
        value = self._eval(frame, decl.default, f"the default of input '{decl.name}'")  # type: ignore[arg-type]

        def filled(name: str, tensor: TensorValue, item: Any) -> Tensor:
            shape = tuple(tensor.shape)
            t = self._new_tensor(frame, name, tensor.dtype, shape, "constant")
            if not any(hasattr(d, "expr") for d in shape):  # symbolic when checking: no values
                t.value = np.full(shape, item, dtype=NUMPY_DTYPES.get(tensor.dtype, object))
            return t

        if isinstance(bound, Pack):  # a packed input's default: a list of 0-rank values, or one for all
            items = list(value) if isinstance(value, Pack) else [value] * len(bound)
            return [filled(f"{decl.name}.{k}", t, v) for k, (t, v) in enumerate(zip(bound, items, strict=False))]
        if isinstance(bound, TensorValue):
            return filled(decl.name, bound, value)
        return None

    # ------------------------------------------------------------ quantization and tensors

    def _quantize(self, frame: _Frame, definition: ast.Definition) -> None:
        graph = frame.graph
        assert graph is not None
        by_name = {t.name: t for t in graph.tensors}
        for block in definition.blocks:
            if not isinstance(block, ast.QuantizeBlock):
                continue
            for q in block.items:
                tensor = by_name.get(q.tensor)
                if tensor is None:
                    raise _error("E0201", f"no tensor '{q.tensor}' in the composed graph to quantize", q.span)
                self._check_accessible(q, tensor)
                attrs = {a.name: self._eval(frame, a.value, f"attribute '{a.name}'") for a in q.attrs}
                tensor.quant = {"op": q.op, "attribs": attrs, "dtypes": list(q.type_args)}

    def _check_accessible(self, q: ast.Quantization, tensor: Tensor) -> None:
        """§2.10: through a label, only variables and constants of an operator are visible, unless
        the operator (and every one enclosing it) is `public`."""
        if tensor.kind in ("variable", "constant"):
            return
        parts = q.tensor.split(".")
        for k in range(1, len(parts)):
            owner = self._scopes.get(".".join(parts[:k]) + ".")
            if owner is not None and not owner.public and owner.kind != "graph":
                raise _error("E0201", f"'{q.tensor}' is internal to operator '{owner.name}', which is not public; "
                             "only its variables and constants can be named through its label", q.span,
                             hint=f"declare it 'public operator {owner.name}' to expose its tensors")

    def _new_tensor(self, frame: _Frame, name: str, dtype: str, shape: tuple[int | None, ...],
                    kind: str = "intermediate", bounds: tuple[int | None, ...] | None = None) -> Tensor:
        if name.startswith("%"):
            name = f"%{self._fresh('', name[1:])}"
        elif kind in ("variable", "constant", "input") and not name.startswith(frame.scope):
            name = frame.scope + name
        tensor = Tensor(name=name, dtype=dtype, shape=tuple(shape), kind=kind, bounds=bounds)  # type: ignore[arg-type]
        assert frame.graph is not None
        frame.graph.tensors.append(tensor)
        return tensor


def _sym(expr: sympy.Expr) -> Any:
    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        SymInt,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    return SymInt(1, expr)


def _same_extent(a: int | SymInt, b: int | SymInt) -> bool:
    from skriptnd.semantics.symbolic import (  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
        identical,  # lazy: it imports sympy (~0.4 s), only dynamic extents need it
    )

    return identical(a, b)


def compose(program: Program, graph: str | None = None, attribs: Mapping[str, Any] | None = None,
            atomic: AtomicPolicy | None = None) -> Graph:
    """Compose the main module's graph (the first one, or `graph`) for the given attributes."""
    return Composer(program, atomic).compose(graph, attribs)


__all__ = ["INT_TENSOR_RANGE", "NUMPY_DTYPES", "AtomicPolicy", "Composer", "compose", "decompose_all", "default_atomic",
           "NO_SPAN"]
