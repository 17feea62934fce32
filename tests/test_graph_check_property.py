"""Property (issue 15): for random invocations of standard operators with concrete shapes,
`sknd check` is clean iff `sknd compose` succeeds -- and both agree with an independent oracle
(numpy's broadcasting rules; PyTorch's convolution output-size formula), so neither can be
trivially right by agreeing with the other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skriptnd.check.program import check_program
from skriptnd.compose.composer import compose
from skriptnd.diagnostics import DiagnosticError
from skriptnd.semantics.modules import load_program

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _shape(dims: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, dims)) + "]"


def _verdicts(tmp_path: Path, source: str) -> tuple[list, object]:
    path = tmp_path / "main.sknd"
    path.write_text(source, encoding="utf-8")
    program = load_program(path)
    errors = [d for d in check_program(program) if d.severity == "error"]
    try:
        graph = compose(load_program(path))
    except DiagnosticError as err:
        assert errors == err.diagnostics  # the same diagnostics, not merely both failing
        return errors, None
    assert errors == [], [str(d) for d in errors]
    return errors, graph


dims = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@SETTINGS
@given(a=dims, b=dims, op=st.sampled_from(["math.add", "math.mul", "math.lt", "math.max"]))
def test_binary_broadcasting(tmp_path: Path, a: tuple[int, ...], b: tuple[int, ...], op: str) -> None:
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    dtype = "bool" if op == "math.lt" else "real"
    out = _shape(expected) if expected is not None else "[]"
    source = f"""import math;

graph G {{
    @input {{
        a: real{_shape(a)};
        b: real{_shape(b)};
    }}
    @output {{
        z: {dtype}{out};
    }}
    @compose {{
        z = {op}(a, b);
    }}
}}
"""
    errors, graph = _verdicts(tmp_path, source)
    assert (graph is not None) == (expected is not None), [str(d) for d in errors]
    if graph is not None:
        assert graph.outputs[0].shape == tuple(expected)


@SETTINGS
@given(ic=st.integers(1, 4), fc=st.integers(1, 4), groups=st.integers(1, 2), n=st.integers(1, 4),
       size=st.integers(1, 6), k=st.integers(1, 4), stride=st.integers(1, 3), pad=st.integers(0, 2))
def test_convolution(tmp_path: Path, ic: int, fc: int, groups: int, n: int, size: int, k: int, stride: int,
                     pad: int) -> None:
    valid = ic == fc * groups and n % groups == 0 and size + 2 * pad >= k
    out = (size + 2 * pad - k) // stride + 1 if size + 2 * pad >= k else 1
    source = f"""import nn;

graph G {{
    @input {{
        x: real[1, {ic}, {size}, {size}];
        w: real[{n}, {fc}, {k}, {k}];
    }}
    @output {{
        y: real[1, {n}, {out}, {out}];
    }}
    @compose {{
        y = nn.conv{{stride = {stride}, padding = [{pad}, {pad}, {pad}, {pad}], groups = {groups}}}(x, w);
    }}
}}
"""
    errors, graph = _verdicts(tmp_path, source)
    assert (graph is not None) == valid, [str(d) for d in errors]
    if not valid:
        assert {d.code for d in errors} <= {"E0501"}, [str(d) for d in errors]
