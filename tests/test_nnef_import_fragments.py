"""Custom NNEF fragments: written as @compose operators of ops/fragments.sknd (one per distinct
specialization), or expanded inline where an operator cannot represent them; results against the nnef
reference executor, unsupported bodies reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import reference, write_graph
from test_nnef_import import _rand

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import import_nnef

HEAD = "extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\n"

SCALE_SHIFT = """fragment scale_shift( x: tensor<scalar>, s: tensor<scalar>, k: scalar = 2.0, smooth: logical = false )
-> ( y: tensor<scalar>, z: tensor<scalar> )
{
    t = k * x + s;
    y = sigmoid(t) if smooth else relu(t);
    z = sum_reduce(t, axes = [1]);
}

fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    a, b = scale_shift(x, 1.0, smooth = true);
    y = add(a, 0.5);
}
"""


def _run(tmp_path: Path, text: str, inputs: dict[str, np.ndarray], outputs: list[str],
         weights: dict | None = None) -> Path:
    src = write_graph(tmp_path / "nnef", text, weights or {})
    out = import_nnef(src, tmp_path / "sknd")
    got = skriptnd.run(skriptnd.load(out).compose(), inputs)
    for name, want in zip(outputs, reference(src, list(inputs.values())), strict=True):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
    return out


def test_fragments_become_operators_one_per_specialization(tmp_path: Path) -> None:
    text = HEAD + SCALE_SHIFT + """
graph G( x, s ) -> ( y1, z1, y2, y3, w )
{
    x = external(shape = [2, 3, 4]);
    s = external(shape = [2, 3, 4]);
    y1, z1 = scale_shift(x, s);
    y2, z2 = scale_shift(s, x);
    y3, z3 = scale_shift(x, s, k = 0.5);
    w = twice(y1);
}
"""
    out = _run(tmp_path, text, {"x": _rand(2, 3, 4), "s": _rand(2, 3, 4)}, ["y1", "z1", "y2", "y3", "w"])
    module = (out / "ops" / "fragments.sknd").read_text()
    assert module.count("operator ") == 3  # scale_shift (k=2.0, twice), scale_shift_2 (k=0.5), twice
    assert "operator scale_shift {" in module and "operator scale_shift_2 {" in module
    assert "operator twice {" in module and "k=0.5" in module
    main = (out / "main.sknd").read_text()
    assert "import ops.fragments;" in main
    assert main.count("ops.fragments.scale_shift(") == 2 and "ops.fragments.scale_shift_2(" in main


def test_tensor_array_parameter_is_expanded_inline(tmp_path: Path) -> None:
    text = HEAD + """fragment total( xs: tensor<scalar>[] ) -> ( y: tensor<scalar> )
{
    y = add_n(xs);
}

graph G( a, b ) -> ( y )
{
    a = external(shape = [3]);
    b = external(shape = [3]);
    y = total([a, b, a]);
}
"""
    out = _run(tmp_path, text, {"a": _rand(3), "b": _rand(3)}, ["y"])
    assert not (out / "ops").exists() and "math.sum_n" in (out / "main.sknd").read_text()


def test_unsupported_operation_inside_a_fragment_is_listed(tmp_path: Path) -> None:
    text = HEAD + """fragment pick( x: tensor<scalar> ) -> ( i: tensor<integer> )
{
    i = argmax_pool(x, size = [1, 2]);
}

graph G( x ) -> ( i )
{
    x = external(shape = [2, 4]);
    i = pick(x);
}
"""
    src = write_graph(tmp_path / "nnef", text)
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    [diag] = err.value.diagnostics
    assert diag.code == "E0832" and "argmax_pool (1)" in diag.message
    assert not (tmp_path / "out").exists()


def test_fragment_without_body_is_listed(tmp_path: Path) -> None:
    text = HEAD + """fragment mystery( x: tensor<scalar> ) -> ( y: tensor<scalar> );

graph G( x ) -> ( y )
{
    x = external(shape = [2, 4]);
    y = mystery(x);
}
"""
    src = write_graph(tmp_path / "nnef", text)
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    [diag] = err.value.diagnostics
    assert diag.code == "E0832" and "mystery (1)" in diag.message and diag.span.line == 10
    assert "fragment without a body" in diag.notes[0].message


def test_nnef_parser_crash_is_a_diagnostic(tmp_path: Path) -> None:
    # the nnef package raises ValueError('Value: kind mismatch') for a string comparison in a fragment
    text = HEAD + """fragment f( x: tensor<scalar>, mode: string = 'a' ) -> ( y: tensor<scalar> )
{
    y = relu(x) if mode == 'a' else sigmoid(x);
}

graph G( x ) -> ( y )
{
    x = external(shape = [2]);
    y = f(x);
}
"""
    src = write_graph(tmp_path / "nnef", text)
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    [diag] = err.value.diagnostics
    assert diag.code == "E0831" and "nnef parser failed" in diag.message
