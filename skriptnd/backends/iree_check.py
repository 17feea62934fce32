"""The self-check of the iree backend: a newly compiled module is compared once with the numpy backend before
its first result is returned, and the verdict is kept with the module in the cache (``verdict.json``, see
skriptnd.backends.iree_cache), so that a later run does not compute it again.

Why: IREE has compiled graphs to wrong numbers without an error (IREE 3.13, data tiling on AVX-512: a
LayerNorm -> MatMul off by 3.2 on outputs of 1.9; issue 30). Default flags avoid what is known
(skriptnd.backends.iree_defaults); this catches the rest, loudly.

What is compared: each module runs a TOSA program (or the integer TOSA graph of a @quantize graph), which the
numpy backend runs on its TOSA operators (skriptnd.tosa.program.build); the module's outputs are compared with
those on the module's first inputs, which the backend makes seeded (:func:`seeded_inputs`: the graph's inputs,
random and dtype-appropriate) at prepare time. Tolerance: float outputs within :data:`RELATIVE` of their
largest magnitude; integer outputs within one step (the integer path is bit-exact against the reference);
bool outputs equal.

On a mismatch, the first TOSA operator that diverges is found by bisection over the program: a prefix of the
program that outputs one intermediate value is compiled and compared, O(log n) compilations, only then. The
diagnostic (E0785) is located at the graph operation that operator comes from, and says how to run anyway.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.compose.ir import Graph, flat_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.fileio import write_atomic
from skriptnd.source import NO_SPAN, Span
from skriptnd.tosa.integer import mlir as integer_mlir
from skriptnd.tosa.integer.graph import IntegerGraph
from skriptnd.tosa.legalize import run_subgraph
from skriptnd.tosa.program.build import Program

register_codes({"E0785": "compiled module disagrees with the numpy backend"})

#: Float outputs: max |compiled - numpy| <= RELATIVE * max |numpy| (per output).
RELATIVE = 1e-3
#: Integer outputs: at most this many steps apart.
INTEGER_STEPS = 1
#: The seed of the inputs the check runs on (graph inputs; see :func:`seeded_inputs`).
SEED = 20261126
VERDICT = "verdict.json"
#: At most this many prefix programs compiled to locate a divergence.
MAX_PROBES = 24
#: How to run anyway, for every E0785.
HINT = ("run it anyway (unchecked) with --no-verify (Options(verify=False)), compile it another way, e.g. "
        "--iree-flag=--iree-opt-data-tiling=false or --target generic, or run it on --via numpy; please "
        "report it with the model")


@dataclass
class Verdict:
    """The outcome of one check. ``worst``: the largest deviation over the outputs, as a fraction of the
    tolerance (<= 1: passed); ``output``: the output it was on; ``diff`` / ``scale``: its max |difference|
    and max |numpy value|; ``op``: the index of the first diverging TOSA operator (-1: not located)."""

    passed: bool
    worst: float
    output: int = 0
    diff: float = 0.0
    scale: float = 0.0
    kind: str = "float"
    op: int = -1
    op_diff: float = 0.0
    op_scale: float = 0.0
    op_kind: str = "float"
    seconds: float = 0.0
    checked: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))

    def figures(self) -> str:
        if self.kind == "float":
            rel = self.diff / self.scale if self.scale else self.diff
            return f"max |difference| {self.diff:.3g} where max |value| is {self.scale:.3g} (relative {rel:.2g})"
        return f"max |difference| {self.diff:.3g} ({self.kind})"


def deviation(got: np.ndarray, expected: np.ndarray, step: float | None = None) -> tuple[float, float, float, str]:
    """(deviation as a fraction of the tolerance, max |difference|, max |expected|, kind) of one output:
    ``kind`` is float / integer / bool; a NaN or infinity where the other side has none is an infinite
    deviation. ``step``: an extra absolute allowance (a quantized output's step)."""
    e = np.asarray(expected)
    g = np.asarray(got)
    if g.shape != e.shape:
        return float("inf"), float("inf"), 0.0, f"shape {list(g.shape)} instead of {list(e.shape)}"
    if e.size == 0:
        return 0.0, 0.0, 0.0, "float"
    if e.dtype == np.bool_ or g.dtype == np.bool_:
        wrong = float(np.count_nonzero(g.astype(bool) != e.astype(bool)))
        return (float("inf") if wrong else 0.0), wrong, 1.0, "bool"
    if e.dtype.kind in "iu" and g.dtype.kind in "iu":
        diff = float(np.max(np.abs(g.astype(np.int64) - e.astype(np.int64))))
        return diff / INTEGER_STEPS, diff, float(np.max(np.abs(e.astype(np.int64)))), "integer"
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    finite = np.isfinite(e64)
    same = (np.isnan(e64) & np.isnan(g64)) | (~np.isnan(e64) & ~finite & (e64 == g64))
    if np.any(~finite & ~same) or np.any(finite & ~np.isfinite(g64)):
        return float("inf"), float("inf"), float(np.max(np.abs(e64[finite]), initial=0.0)), "float"
    diff = float(np.max(np.abs(g64[finite] - e64[finite]), initial=0.0))
    scale = float(np.max(np.abs(e64[finite]), initial=0.0))
    allowed = max(RELATIVE * scale, step or 0.0, np.finfo(np.float32).tiny)
    return diff / allowed, diff, scale, "float"


def compare(got: Sequence[np.ndarray], expected: Sequence[np.ndarray],
            steps: Sequence[float | None] | None = None) -> Verdict:
    """The verdict on a module's outputs against numpy's (the worst output decides)."""
    verdict = Verdict(passed=True, worst=0.0)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        worst, diff, scale, kind = deviation(g, e, steps[i] if steps else None)
        if worst > verdict.worst or i == 0:
            verdict.worst, verdict.output, verdict.diff, verdict.scale, verdict.kind = worst, i, diff, scale, kind
    verdict.passed = verdict.worst <= 1.0
    return verdict


def read_verdict(folder: Path) -> Verdict | None:
    """The verdict kept with a cached module, or None (not checked yet, or unreadable: checked again)."""
    try:
        data = json.loads((folder / VERDICT).read_text(encoding="utf-8"))
        return Verdict(**{k: data[k] for k in Verdict.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_verdict(folder: Path, verdict: Verdict) -> None:
    try:
        write_atomic(folder / VERDICT, json.dumps(asdict(verdict)))
    except OSError:  # a read-only cache: checked again next time
        pass


def seeded_inputs(tensors: Sequence[Any], seed: int = SEED) -> dict[str, np.ndarray]:
    """Inputs for the check, by graph input name: real values standard normal (float32), int values 0 or 1
    (int64: valid token ids, indices and masks whatever the table or axis they index), bool values random;
    a dynamic extent its bound, else 1."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in tensors:
        bounds = t.bounds or (None,) * len(t.shape)
        shape = tuple(int(d) if d is not None else int(b or 1) for d, b in zip(t.shape, bounds, strict=False))
        if t.dtype == "real":
            out[t.name] = rng.standard_normal(shape).astype(np.float32)
        elif t.dtype == "int":
            out[t.name] = rng.integers(0, 2, size=shape, dtype=np.int64)
        else:
            out[t.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
    return out


#: A probe of operator k: (compiled value, numpy value) of the program's prefix that outputs operator k's value.
Probe = Callable[[int], tuple[np.ndarray, np.ndarray]]


def bisect(candidates: list[int], probe: Probe) -> tuple[int, Verdict | None]:
    """The first of ``candidates`` (operator indices, in program order) whose value diverges, by bisection
    (the values after a divergence diverge too); a probe that fails (an intermediate the compiler or the
    MLIR writer does not take alone) drops that candidate. (-1, None) when none diverges."""
    lo, hi = 0, len(candidates) - 1
    found: tuple[int, Verdict | None] = (-1, None)
    probes = 0
    while lo <= hi and probes < MAX_PROBES:
        mid = (lo + hi) // 2
        probes += 1
        try:
            got, expected = probe(candidates[mid])
        except (DiagnosticError, ArithmeticError, ValueError, TypeError, KeyError, IndexError, RuntimeError):
            del candidates[mid]
            hi -= 1
            continue
        verdict = compare([got], [expected])
        if verdict.passed:
            lo = mid + 1
        else:
            found = (candidates[mid], verdict)
            hi = mid - 1
    return found


def mismatch(verdict: Verdict, where: str, located: tuple[str, Span | None, str] | None, module: str,
             flags: Sequence[str], cached: bool) -> DiagnosticError:
    """E0785: the compiled module disagrees with numpy; ``located``: (operation, span, TOSA operator) of the
    first divergence, when found."""
    message = (f"the IREE-compiled module {where} disagrees with the numpy backend on seeded inputs: output "
               f"{verdict.output}: {verdict.figures()}, above the tolerance ({RELATIVE:g} of max |value| for "
               f"floats, {INTEGER_STEPS} step for integers)")
    notes = []
    span: Span = NO_SPAN
    if located is not None:
        operation, at, tosa = located
        span = at if isinstance(at, Span) else NO_SPAN
        rel = verdict.op_diff / verdict.op_scale if verdict.op_scale else verdict.op_diff
        message += (f"; the first operation that diverges is {operation} (TOSA {tosa}: max |difference| "
                    f"{verdict.op_diff:.3g}, relative {rel:.2g})")
    else:
        notes.append(Note("no single operation could be located (its intermediate values agree alone)"))
    notes.append(Note(f"compiled with {' '.join(flags)}; module {module}"
                      + ("; verdict cached from an earlier run" if cached else "")))
    return DiagnosticError([Diagnostic(code="E0785", span=span, message=message, notes=tuple(notes), hint=HINT)])


#: Compiles a prefix program (a skriptnd.tosa.program.build.Program, or integer-graph MLIR text) into a callable
#: ``arrays -> outputs`` (the backend's IreeModule, unchecked).
Compile = Callable[[Any], Callable[[list[np.ndarray]], list[np.ndarray]]]


def _ancestors(ops: Sequence[Any], output: str) -> list[int]:
    """Indices (in order) of the operators ``output`` depends on, its producer last."""
    needed = {output}
    kept: list[int] = []
    for i in range(len(ops) - 1, -1, -1):
        if ops[i].output in needed:
            kept.append(i)
            needed.update(ops[i].inputs)
    return kept[::-1]


class ProgramCheck:
    """How a module compiled from a TOSA program is checked: the program on numpy's TOSA operators is the
    reference; ``sources``: the graph operations the program's operators come from (``Op.origin``)."""

    def __init__(self, program: Program, sources: Sequence[Any], compile: Compile) -> None:
        self.program, self.sources, self.compile = program, list(sources), compile
        self.steps: list[float | None] | None = None

    def reference(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(a) for a in self.program(arrays)]

    def candidates(self, output: int) -> list[int]:
        return _ancestors(self.program.ops, self.program.outputs[output])

    def prefix(self, k: int) -> Any:
        """The program computing operator ``k``'s value: the operators it needs, their constants."""
        ops = self.program.ops
        keep = _ancestors(ops, ops[k].output)
        used = {i for j in keep for i in ops[j].inputs}
        return Program(inputs=list(self.program.inputs), outputs=[ops[k].output], ops=[ops[j] for j in keep],
                       constants={n: c for n, c in self.program.constants.items() if n in used},
                       hints=dict(self.program.hints))

    def probe(self, k: int, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        sub = self.prefix(k)
        (expected,) = sub(arrays)
        (got,) = self.compile(sub)(arrays)
        return got, np.asarray(expected)

    def locate(self, k: int) -> tuple[str, Span | None, str]:
        op = self.program.ops[k]
        source = self.sources[op.origin] if 0 <= op.origin < len(self.sources) else None
        if source is None:
            return f"TOSA {op.name} ({op.output})", None, op.name
        return (f"{source.op}" + (f" '{source.label}'" if source.label else ""), source.span, op.name)


class IntegerCheck:
    """How the module of a @quantize graph's integer TOSA graph (skriptnd.tosa.integer.lower) is checked: that
    graph on numpy's TOSA operators is the reference (bit-exact but for one step of a quantized output)."""

    def __init__(self, integer: IntegerGraph, graph: Graph, compile: Compile) -> None:
        self.integer, self.graph, self.compile = integer, graph, compile
        self.sg = integer.subgraph()
        self.steps = []
        for name, _ in integer.outputs:
            qv = integer.values.get(name)
            self.steps.append(float(np.max(qv.qp.scale)) if qv is not None and qv.qp is not None else None)

    def reference(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(a) for a in run_subgraph(self.sg, arrays)]

    def candidates(self, output: int) -> list[int]:
        return _ancestors(self.sg.ops, self.sg.outputs[output])

    def probe(self, k: int, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        value = self.sg.ops[k].output
        (expected,) = run_subgraph(self.integer.subgraph([value]), arrays)
        (got,) = self.compile(integer_mlir.to_mlir(self.integer, outputs=[value]))(arrays)
        return got, np.asarray(expected)

    def locate(self, k: int) -> tuple[str, Span | None, str]:
        """The graph operation whose output is operator ``k``'s value, or the first later one that has one."""
        tensors = {qv.name: name for name, qv in self.integer.values.items()}
        producers = {t.name: op for op in self.graph.operations for t in flat_tensors(op.outputs)}
        ops = self.sg.ops
        for j in range(k, len(ops)):
            op = producers.get(tensors.get(ops[j].output, ""))
            if op is not None:
                return f"{op.op}" + (f" '{op.label}'" if op.label else ""), op.span, ops[k].name
        return f"TOSA {ops[k].name} ({ops[k].output})", None, ops[k].name


def check(module_outputs: list[np.ndarray], arrays: list[np.ndarray], how: ProgramCheck | IntegerCheck) -> Verdict:
    """The verdict on one call of a newly compiled module (``module_outputs`` on ``arrays``), located by
    bisection over its operators when it fails."""
    start = time.perf_counter()
    verdict = compare(module_outputs, how.reference(arrays), how.steps)
    if not verdict.passed:
        k, at = bisect(how.candidates(verdict.output), lambda j: how.probe(j, arrays))
        if at is not None:
            verdict.op, verdict.op_diff, verdict.op_scale, verdict.op_kind = k, at.diff, at.scale, at.kind
    verdict.seconds = time.perf_counter() - start
    return verdict
