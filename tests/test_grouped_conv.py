"""Grouped convolutions in the form the iree backend compiles (skriptnd.tosa.legalize.tensor.conv_for_compilers):
one DEPTHWISE_CONV2D over the input channels tiled per output channel, then a REDUCE_SUM, instead of the
TABLE's CONV2D per group. Checked against nn.conv's own @lower formula (hypothesis over groups, channels
per group, kernel, stride, dilation, padding, 1-D / 2-D, with and without bias), and end to end under IREE
against the `lower` backend, with the compiled program holding one depthwise convolution and no CONV2D."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_tosa_legalize import SETTINGS, _compose  # noqa: E402

from skriptnd.diagnostics import DiagnosticError  # noqa: E402
from skriptnd.lower import run_lowering  # noqa: E402
from skriptnd.tosa.legalize import legalize, run_subgraph  # noqa: E402
from skriptnd.tosa.legalize.tensor import conv_for_compilers  # noqa: E402


def _conv(groups: int, fc: int, m: int, size: int, k: int, d: int, bias: bool, attrs: str):
    spatial = [size] * d
    inputs = {"x": f"real[2, {groups * fc}, {', '.join(map(str, spatial))}]",
              "w": f"real[{groups * m}, {fc}, {', '.join([str(k)] * d)}]"}
    if bias:
        inputs["b"] = f"real[{groups * m}]"
    args = "x, w, b" if bias else "x, w"
    return _compose(inputs, f"nn.conv{{groups={groups}{attrs}}}({args})")


@SETTINGS
@given(groups=st.integers(2, 4), fc=st.integers(1, 3), m=st.integers(1, 3), size=st.integers(3, 7),
       k=st.integers(1, 3), d=st.sampled_from([1, 2]), stride=st.integers(1, 2), dilation=st.integers(1, 2),
       pad=st.integers(0, 2), bias=st.booleans(), seed=st.integers(0, 3))
def test_grouped_conv_as_one_depthwise_matches_lower(groups: int, fc: int, m: int, size: int, k: int, d: int,
                                                     stride: int, dilation: int, pad: int, bias: bool,
                                                     seed: int) -> None:
    attrs = f", stride={stride}, dilation={dilation}, padding=[{', '.join([str(pad)] * 2 * d)}]"
    try:
        _, op = _conv(groups, fc, m, size, k, d, bias, attrs)
    except DiagnosticError:  # a window larger than the padded input
        reject()
    sg = conv_for_compilers(op)
    assert sg is not None
    names = [o.name for o in sg.ops]
    if "REDUCE_SUM" in names:
        assert fc > 1 and names.count("DEPTHWISE_CONV2D") == 1 and "CONV2D" not in names and "CONCAT" not in names
    else:  # depthwise (one input channel per group), or every window wholly in the padding: the TABLE's form
        assert names == [o.name for o in legalize(op)[0].ops]
        assert fc == 1 or "DEPTHWISE_CONV2D" not in names
    rng = np.random.default_rng(seed)
    args = [None if v is None else rng.uniform(-2, 2, v.shape).astype(np.float32) for v in op.inputs]
    (got,) = run_subgraph(sg, args)
    (ref,) = run_lowering(op.definition, op.binding, args)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_only_grouped_convolutions_take_the_compiler_form() -> None:
    _, plain = _conv(1, 4, 4, 5, 3, 2, True, "")
    assert conv_for_compilers(plain) is None  # one group: the TABLE's CONV2D
    _, cube = _compose({"x": "real[1, 4, 4, 4, 4]", "w": "real[4, 2, 3, 3, 3]"}, "nn.conv{groups=2}(x, w)")
    assert conv_for_compilers(cube) is None  # 3-D: CONV3D per group, as the TABLE
    _, relu = _compose({"x": "real[2, 3]"}, "nn.relu(x)")
    assert conv_for_compilers(relu) is None
    _, grouped = _conv(4, 2, 3, 6, 3, 2, True, ", padding=[1, 1, 1, 1]")
    table = [o.name for o in legalize(grouped)[0].ops]
    assert table.count("CONV2D") == 4 and "CONCAT" in table  # what numpy and the exports keep


def test_iree_compiles_a_grouped_convolution_as_one_depthwise(tmp_path: Path) -> None:
    from test_backends_compiled import require

    require("iree.compiler", "iree.runtime")
    from skriptnd import backends

    graph, _ = _conv(8, 4, 4, 12, 3, 2, True, ", padding=[1, 1, 1, 1]")
    rng = np.random.default_rng(0)
    feed = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in graph.inputs}
    runner = backends.prepare(graph, "iree", backends.Options(cache_dir=str(tmp_path)))
    (module,) = runner.modules
    ops = [o.name for o in module.source.program.ops]
    assert ops.count("DEPTHWISE_CONV2D") == 1 and "CONV2D" not in ops
    got, ref = runner.run(feed)["z"], backends.run(graph, feed, "lower")["z"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
