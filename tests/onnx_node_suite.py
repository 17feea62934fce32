"""Run the ONNX backend node test suite (`onnx.backend.test.loader.load_model_tests(kind='node')`) through
`sknd import` and skriptnd's executor, against the outputs stored with each case.

A case is *eligible* when every node of its graph is an operator the importer maps. The passing set is
recorded in tests/data/onnx_node_suite_passing.txt; tests/test_onnx_node_suite.py asserts that every
case listed there still passes. `python tests/onnx_node_suite.py` prints the pass rate per operator
and, with --write, rewrites that file.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import skriptnd

PASSING = Path(__file__).parent / "data" / "onnx_node_suite_passing.txt"
RTOL = 1e-4  # relative to the largest magnitude of the expected output
ATOL = 1e-6


def cases() -> list[Any]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model_tests(kind="node")


def op_types(model: Any) -> set[str]:
    found: set[str] = set()

    def visit(graph: Any) -> None:
        for node in graph.node:
            found.add(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}")
            for a in node.attribute:
                if a.type == a.GRAPH:
                    visit(a.g)
                for g in a.graphs:
                    visit(g)

    visit(model.graph)
    return found


#: ONNX element types SkriptND has a type for (real: float16/32/64, bfloat16; int: 8-64 bit; bool)
REPRESENTABLE = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16}


def elem_types(model: Any) -> set[int]:
    graph = model.graph
    types = {t.data_type for t in graph.initializer}
    for vi in [*graph.input, *graph.output]:
        if vi.type.HasField("tensor_type"):
            types.add(vi.type.tensor_type.elem_type)
        else:
            types.add(-1)  # sequences, maps, optionals
    for node in graph.node:
        for a in node.attribute:
            if a.name == "to":
                types.add(a.i)
    return types


#: Cases whose stored outputs come from a random generator (Dropout in training mode with a non-zero
#: ratio draws its mask from numpy's RNG): no other implementation can reproduce them.
RANDOM = {"test_training_dropout", "test_training_dropout_default", "test_training_dropout_mask",
          "test_training_dropout_default_mask"}


def eligible(case: Any) -> bool:
    """All ops mapped, only tensor types SkriptND has (no float8/int4/string/sequence data), and a
    deterministic expected output."""
    from skriptnd.interop.onnx_import.registry import registry

    known = registry()
    return case.model is not None and case.name not in RANDOM and op_types(case.model) <= set(known) \
        and elem_types(case.model) <= REPRESENTABLE


def _array(value: Any) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def _close(actual: np.ndarray, expected: np.ndarray) -> str | None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "iub":
        return None if np.array_equal(actual.astype(expected.dtype), expected) else "values differ"
    rtol = RTOL
    if expected.dtype.itemsize == 2:  # float16 / bfloat16 outputs: compare in that type, one step apart
        actual = actual.astype(expected.dtype)
        rtol = 2.0 ** -10 if expected.dtype == np.float16 else 2.0 ** -7
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    special = ~np.isfinite(e)
    if not np.array_equal(np.isnan(a[special]), np.isnan(e[special])) or \
            not np.array_equal(a[special & ~np.isnan(e)], e[special & ~np.isnan(e)]):
        return "inf/nan differ"
    finite = ~special
    if not finite.any():
        return None
    scale = float(np.abs(e[finite]).max()) if finite.any() else 0.0
    err = float(np.abs(a[finite] - e[finite]).max()) if finite.any() else 0.0
    return None if err <= rtol * scale + ATOL else f"max error {err:.3g} (scale {scale:.3g})"


def run_case(case: Any, folder: Path) -> str | None:
    """None when the case passes, else why not. Every input is fed as the case stores it, in its own type: an
    input that feeds only parameters (a Reshape's shape, ReduceSum's axes) is a graph attribute of the imported
    graph, and the run composes the graph for its value (skriptnd.backends.bind)."""
    from skriptnd.diagnostics import DiagnosticError
    from skriptnd.interop.onnx_import import import_model

    try:
        path = import_model(case.model, folder / case.name)
        graph = skriptnd.load(path).compose(defer=True)
        inputs = [i.name for i in case.model.graph.input if i.name not in
                  {t.name for t in case.model.graph.initializer}]
        names = {t.name: t for t in graph.inputs} | dict.fromkeys(graph.attribs)
        for feeds, expected in case.data_sets:
            given = {_sanitized(name, names): _array(value) for name, value in zip(inputs, feeds, strict=False)}
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = skriptnd.run(graph, given)
            outs = list(got.values())
            for k, value in enumerate(expected):
                why = _close(outs[k], _array(value))
                if why:
                    return f"output {k}: {why}"
        return None
    except DiagnosticError as err:
        return f"{err.diagnostics[0].code}: {err.diagnostics[0].message[:150]}"
    except Exception as err:  # noqa: BLE001 - the suite reports every failure, whatever it is
        return f"{type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''}"


def _sanitized(name: str, names: dict[str, Any]) -> str:
    from skriptnd.interop.writer import Names

    return name if name in names else Names()(name)


def main(argv: list[str]) -> None:
    results: dict[str, str | None] = {}
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    selected = [c for c in cases() if eligible(c)]
    pattern = next((a for a in argv if not a.startswith("-")), "")
    with tempfile.TemporaryDirectory() as tmp:
        for case in selected:
            if pattern and pattern not in case.name:
                continue
            why = run_case(case, Path(tmp))
            results[case.name] = why
            for op in op_types(case.model):
                per_op[op][0] += why is None
                per_op[op][1] += 1
            if why and "-v" in argv:
                print(f"FAIL {case.name}: {why}")
    passed = sorted(k for k, v in results.items() if v is None)
    for op, (ok, total) in sorted(per_op.items()):
        print(f"{op:28s} {ok:4d}/{total:<4d} {100 * ok / total:5.1f}%")
    print(f"passed {len(passed)}/{len(results)} eligible cases ({100 * len(passed) / max(len(results), 1):.1f}%)")
    if "--write" in argv:
        PASSING.write_text("".join(f"{name}\n" for name in passed))


if __name__ == "__main__":
    main(sys.argv[1:])
