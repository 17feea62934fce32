"""Custom NNEF fragments (`extension KHR_enable_fragment_definitions`) as SkriptND operators.

Each invocation of a custom fragment in the graph becomes a call of an operator defined by @compose in the
model folder's `ops/fragments.sknd`. The `nnef` parser does not expose fragment bodies, so the body is
obtained per invocation: a one-call NNEF graph (the original file's fragment definitions, external inputs of
the invocation's shapes, the invocation with its attribute values) is parsed with the fragment expanded, its
shapes inferred, and its operations converted like the main graph's. The operator is therefore specialized
to the invocation's shapes and attribute values; identical specializations share one operator.

Anything this cannot represent (tensor-array parameters or results, a constant inside the body, a parse
problem) raises `FragmentFallback`; the importer then expands the fragments inline instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from skriptnd.interop.nnef_import import registry
from skriptnd.interop.nnef_import.context import DTYPES, Arg, Context, NnefGraph, Operation, tidy
from skriptnd.interop.nnef_import.errors import ImportProblem
from skriptnd.interop.writer import Call, Names, TensorDecl

MODULE = "ops.fragments"
PATH = "ops/fragments.sknd"

#: What a custom shape function gives the nnef parser: the output shape, or one per output.
ShapeResult = list[int] | tuple[list[int], ...]

_GRAPH = re.compile(r"^\s*graph\s+[A-Za-z_]", re.M)


class FragmentFallback(Exception):
    """This graph's fragments cannot be written as operators; expand them inline."""


@dataclass
class Expansion:
    op: Operation  # the invocation in the top-level graph
    graph: NnefGraph  # the one-call graph, fragment expanded, shapes inferred
    params: list[tuple[str, Arg]]  # (parameter name, argument in the top-level graph) of tensor inputs
    results: list[str]  # result names (= top-level op's output keys)


@dataclass
class Fragments:
    nnef: ModuleType
    prelude: str
    lowered: list[str]
    custom: set[str]
    expansions: dict[int, Expansion] = field(default_factory=dict)
    operators: dict[str, str] = field(default_factory=dict)  # operator text (body) -> operator name
    texts: list[str] = field(default_factory=list)
    imports: set[str] = field(default_factory=set)
    top: NnefGraph | None = None  # the top-level graph (fragments not expanded)
    _names: Names = field(default_factory=Names)
    _specializations: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_text(cls, nnef: ModuleType, text: str, lowered: list[str], custom: set[str]) -> Fragments:
        match = _GRAPH.search(text)
        if not match:
            raise FragmentFallback("no graph")
        return cls(nnef, text[:match.start()], lowered, custom)

    # -- shape inference: expand each invocation while the top-level graph's shapes are inferred ----
    def shape_functions(self, graph: NnefGraph) -> dict[str, Callable[..., ShapeResult]]:
        self.top = graph
        queues: dict[str, list[Operation]] = {}
        for op in graph.operations:
            if op.name in self.custom:
                queues.setdefault(op.name, []).append(op)

        def make(name: str) -> Callable[..., ShapeResult]:
            def infer(*shapes: Sequence[int], **_attribs: Arg) -> ShapeResult:
                op = queues[name].pop(0)
                exp = self._expand(op, list(shapes))
                out = [list(exp.graph.tensors[r].shape) for r in exp.results]
                return tuple(out) if len(out) > 1 else out[0]
            return infer

        return {name: make(name) for name in queues}

    def _expand(self, op: Operation, shapes: list[Sequence[int]]) -> Expansion:
        fmt = self.nnef.format_argument
        params: list[tuple[str, Arg]] = []
        lines, args = [], []
        for (key, value), shape in zip(op.inputs.items(), shapes, strict=True):
            if isinstance(value, list):
                raise FragmentFallback(f"tensor-array parameter '{key}'")
            if isinstance(value, str):
                dtype = self.top.tensors[value].dtype
                lines.append(f"    {key} = external<{dtype}>(shape = {list(shape)});")
                params.append((key, value))
                args.append(key)
            else:
                args.append(fmt(value))
        results = list(op.outputs)
        if any(isinstance(v, list) for v in op.outputs.values()):
            raise FragmentFallback("tensor-array result")
        attribs = [f"{k} = {fmt(v)}" for k, v in op.attribs.items()]
        generic = f"<{op.dtype}>" if op.dtype else ""
        lines.append(f"    {', '.join(results)} = {op.name}{generic}({', '.join(args + attribs)});")
        text = (self.prelude + f"graph F( {', '.join(k for k, _ in params)} ) -> ( {', '.join(results)} )\n{{\n"
                + "\n".join(lines) + "\n}\n")
        try:
            graph = self.nnef.parse_string(text, lowered=self.lowered)
            self.nnef.infer_shapes(graph)
        except Exception as exc:  # noqa: BLE001 - any problem here means: expand inline instead
            raise FragmentFallback(str(exc)) from None
        exp = Expansion(op, graph, params, results)
        self.expansions[id(op)] = exp
        return exp

    # -- conversion -------------------------------------------------------------------------------
    def convert(self, ctx: Context, op: Operation) -> None:
        """Emit the call of the operator for invocation `op` (defining the operator if new)."""
        exp = self.expansions[id(op)]
        name = self._operator(exp)
        outs = [ctx.name(op.outputs[r]) for r in exp.results]
        ctx.emit(outs, f"{MODULE}.{name}", [ctx.arg(value) for _, value in exp.params])

    def _operator(self, exp: Expansion) -> str:
        graph = exp.graph
        names = Names()
        for tensor in [*graph.inputs, *graph.outputs, *graph.tensors]:
            names(str(tensor))
        sub = Context(graph=graph, names=names)
        for op in graph.operations:
            sub.op = op
            if op.name == "external":
                continue
            if op.name not in registry.CONVERTERS:
                raise FragmentFallback(f"'{op.name}' in a fragment body")
            try:
                registry.CONVERTERS[op.name].convert(sub, op)
            except ImportProblem as exc:  # reported, located, by the inline expansion
                raise FragmentFallback(exc.message) from None
        if sub.constants:
            raise FragmentFallback("a constant in a fragment body")

        def decl(tensor: str) -> str:
            t = graph.tensors[tensor]
            return TensorDecl(sub.name(tensor), DTYPES.get(t.dtype, "real"), list(t.shape)).text()

        body = ["    @input {", *[f"        {decl(str(t))}" for t in graph.inputs], "    }",
                "    @output {", *[f"        {decl(str(t))}" for t in graph.outputs], "    }",
                "    @compose {", *[f"        {c.text() if isinstance(c, Call) else c}" for c in sub.body], "    }", "}"]
        key = exp.op.name + "\n" + "\n".join(body)
        if key in self.operators:
            return self.operators[key]
        count = self._specializations[exp.op.name] = self._specializations.get(exp.op.name, 0) + 1
        name = self._names(exp.op.name if count == 1 else f"{exp.op.name}.{count}")
        self.operators[key] = name
        for call in sub.body:
            if isinstance(call, Call) and "." in call.op:
                self.imports.add(call.op.rpartition(".")[0])
        settings = ", ".join(f"{k}={self.nnef.format_argument(tidy(v))}" for k, v in exp.op.attribs.items())
        literal_args = ", ".join(f"{k}={self.nnef.format_argument(tidy(v))}" for k, v in exp.op.inputs.items()
                                 if not isinstance(v, str))
        note = "; ".join(x for x in (settings, literal_args) if x)
        self.texts.append(f"# NNEF fragment '{exp.op.name}', specialized to these shapes"
                          + (f" and {note}" if note else "") + f"\noperator {name} {{\n" + "\n".join(body))
        return name

    def module_text(self) -> str:
        head = "".join(f"import {m};\n" for m in sorted(self.imports))
        return head + "\n" + "\n\n".join(self.texts) + "\n"
