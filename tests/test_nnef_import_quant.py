"""graph.quant (NNEF 1.x tensor quantization) imported as a @quantize block, run with fake quantization and
compared with the nnef executor running the same graph with the quantize operations written out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import reference, write_graph
from test_nnef_import import _rand

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import import_nnef

GRAPH = """graph G( x ) -> ( y )
{
    x = external(shape = [1, 2, 5, 5]);
    w = variable(shape = [3, 2, 3, 3], label = 'w');
    c = conv(x, w, 0.0, padding = []);
    y = relu(c);
}
"""

QUANT = """"x": zero_point_linear_quantize(zero_point = 3, scale = 0.05, bits = 8, signed = false, symmetric = false);
"w": min_max_linear_quantize(min = -1.0, max = 1.0, bits = 8, signed = true, symmetric = true);
"c": linear_quantize(min = -2.0, max = 4.0, bits = 8);
"""

EXPLICIT = """graph G( x ) -> ( y )
{
    x = external(shape = [1, 2, 5, 5]);
    w = variable(shape = [3, 2, 3, 3], label = 'w');
    xq = zero_point_linear_quantize(x, 3, 0.05, bits = 8, signed = false, symmetric = false);
    wq = %s;
    c = conv(xq, wq, 0.0, padding = []);
    cq = linear_quantize(c, -2.0, 4.0, bits = 8);
    y = relu(cq);
}
"""


def _fake_quantized_run(folder: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from skriptnd.backends import kernels_for
    from skriptnd.compose.quantization import fake_quantize
    from skriptnd.execute import Executor

    graph = fake_quantize(skriptnd.load(folder).compose())
    kernels, optimize = kernels_for("kernels")
    sources = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
    return Executor(graph, sources, kernels=kernels, optimize=optimize).run(inputs)


@pytest.mark.parametrize("per_channel", [False, True])
def test_graph_quant_becomes_quantize_block(tmp_path: Path, per_channel: bool) -> None:
    w = _rand(3, 2, 3, 3) * 0.5
    quant = QUANT
    wq = "min_max_linear_quantize(w, -1.0, 1.0, bits = 8, signed = true, symmetric = true)"
    if per_channel:
        quant = quant.replace('"w": min_max_linear_quantize(min = -1.0, max = 1.0,',
                              '"w": min_max_linear_quantize(min = [-1.0, -0.5, -2.0], max = [1.0, 0.5, 2.0],')
        wq = ("min_max_linear_quantize(w, constant(shape = [3, 1, 1, 1], value = [-1.0, -0.5, -2.0]), "
              "constant(shape = [3, 1, 1, 1], value = [1.0, 0.5, 2.0]), bits = 8, signed = true, symmetric = true)")
    src = write_graph(tmp_path / "q", GRAPH, {"w": w})
    (src / "graph.quant").write_text(quant)
    out = import_nnef(src, tmp_path / "out")
    text = (out / "main.sknd").read_text()
    assert "@quantize" in text and ("channel_axis=0" in text) == per_channel
    x = _rand(1, 2, 5, 5)
    got = _fake_quantized_run(out, {"x": x})["y"]
    oracle = write_graph(tmp_path / "explicit", EXPLICIT % wq, {"w": w})
    want = reference(oracle, [x])[0]
    step = 6.0 / 255  # one step of c's quantization
    np.testing.assert_allclose(got, want, atol=step * 1.01)
    assert np.mean(np.isclose(got, want, atol=1e-5)) > 0.9  # all but rounding ties agree exactly


def test_logarithmic_quantization_is_refused_at_its_line(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "q", GRAPH, {"w": _rand(3, 2, 3, 3)})
    (src / "graph.quant").write_text('"x": zero_point_linear_quantize(zero_point = 0, scale = 0.1, bits = 8, '
                                     'signed = true, symmetric = false);\n"c": logarithmic_quantize(max = 4.0, '
                                     'bits = 4);\n')
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    [diag] = err.value.diagnostics
    assert diag.code == "E0835" and "logarithmic_quantize" in diag.message
    assert diag.span.file.endswith("graph.quant") and diag.span.line == 2
