"""Output shapes of standard operators from `skriptnd.infer`, against independent formulas
(PyTorch's documented output-size formulas, numpy's shape rules), on random invocations."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd

FAST = settings(max_examples=60, deadline=None)


def conv_out(i: int, k: int, s: int, d: int, pad_total: int) -> int:
    # torch.nn.Conv2d: floor((i + 2p - d (k - 1) - 1) / s) + 1, with 2p generalised to before + after
    return (i + pad_total - d * (k - 1) - 1) // s + 1


@st.composite
def conv_case(draw: st.DrawFn) -> dict:
    rank = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 2]))
    cin = groups * draw(st.integers(1, 3))
    cout = groups * draw(st.integers(1, 3))
    ks = [draw(st.integers(1, 4)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    stride = [draw(st.integers(1, 3)) for _ in range(rank)]
    before = [draw(st.integers(0, 2)) for _ in range(rank)]
    after = [draw(st.integers(0, 2)) for _ in range(rank)]
    size = [draw(st.integers(d * (k - 1) + 1, 20)) for k, d in zip(ks, dil, strict=True)]
    return dict(rank=rank, groups=groups, cin=cin, cout=cout, ks=ks, dil=dil, stride=stride, before=before,
                after=after, size=size, batch=draw(st.integers(1, 3)), bias=draw(st.booleans()))


@FAST
@given(conv_case())
def test_conv_output_shape_matches_torch_formula(c: dict) -> None:
    shapes = [[c["batch"], c["cin"], *c["size"]], [c["cout"], c["cin"] // c["groups"], *c["ks"]]]
    if c["bias"]:
        shapes.append([c["cout"]])
    r = skriptnd.infer("nn.conv", {"stride": c["stride"], "dilation": c["dil"], "groups": c["groups"],
                                   "padding": c["before"] + c["after"]}, shapes)
    assert r.ok, r.diagnostics
    spatial = [conv_out(i, k, s, d, b + a) for i, k, s, d, b, a in
               zip(c["size"], c["ks"], c["stride"], c["dil"], c["before"], c["after"], strict=True)]
    assert r.outputs[0].shape == (c["batch"], c["cout"], *spatial)


@FAST
@given(st.integers(1, 40), st.integers(1, 5), st.integers(1, 4), st.booleans())
def test_conv_automatic_padding(size: int, k: int, s: int, ceil: bool) -> None:
    # Without explicit padding the spec pads so the output has floor(i / s) (or ceil with ceil_mode)
    r = skriptnd.infer("nn.conv", {"stride": s, "ceil_mode": ceil}, [[1, 2, size], [3, 2, k]])
    if not ceil and size < s:  # floor(i / s) == 0 outputs: the padded input is smaller than the filter
        assert [d.code for d in r.diagnostics] == ["E0501"]
        return
    assert r.ok, r.diagnostics
    expected = -(-size // s) if ceil else size // s
    assert r.outputs[0].shape == (1, 3, expected)


def test_conv_channel_mismatch_is_a_located_assertion() -> None:
    r = skriptnd.infer("nn.conv", {}, [[1, 3, 8, 8], [4, 2, 3, 3]])
    assert not r.ok
    (d,) = r.diagnostics
    assert d.code == "E0501"
    assert "input-channels must equal filter-channels * groups" in d.message
    assert "input-channels = 3" in d.message and "filter-channels = 2" in d.message
    assert d.span.file.endswith("nn.sknd")


@st.composite
def matmul_case(draw: st.DrawFn) -> tuple:
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    batch = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 3)))]
    a_batch = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
    b_batch = [b if draw(st.booleans()) else 1 for b in batch][draw(st.integers(0, len(batch))):]
    ta, tb = draw(st.booleans()), draw(st.booleans())
    return m, k, n, a_batch, b_batch, ta, tb


@FAST
@given(matmul_case())
def test_matmul_output_shape_matches_numpy(case: tuple) -> None:
    m, k, n, a_batch, b_batch, ta, tb = case
    a = [*a_batch, *((k, m) if ta else (m, k))]
    b = [*b_batch, *((n, k) if tb else (k, n))]
    r = skriptnd.infer("linalg.matmul", {"transA": ta, "transB": tb}, [a, b])
    assert r.ok, r.diagnostics
    x = np.zeros(a)
    y = np.zeros(b)
    expected = np.matmul(np.swapaxes(x, -1, -2) if ta else x, np.swapaxes(y, -1, -2) if tb else y).shape
    assert r.outputs[0].shape == expected


def test_matmul_inner_mismatch() -> None:
    r = skriptnd.infer("linalg.matmul", {}, [[2, 3], [4, 5]])
    assert [d.code for d in r.diagnostics] == ["E0501"]
    assert "last dimension of A must match first (non-batch) dimension of B" in r.diagnostics[0].message


@FAST
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_matches_numpy(shape: list[int], data: st.DataObject) -> None:
    volume = int(np.prod(shape))
    divisors = [d for d in range(1, volume + 1) if volume % d == 0]
    first = data.draw(st.sampled_from(divisors))
    new = [first, -1] if data.draw(st.booleans()) else [first, volume // first]
    r = skriptnd.infer("layout.reshape", {"shape": new}, [shape])
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == np.zeros(shape).reshape(new).shape


def test_reshape_volume_mismatch() -> None:
    r = skriptnd.infer("layout.reshape", {"shape": [5, 5]}, [[2, 3]])
    assert [d.code for d in r.diagnostics] == ["E0501"]


@FAST
@given(st.integers(1, 4), st.data())
def test_concat_matches_numpy(rank: int, data: st.DataObject) -> None:
    base = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(-rank, rank - 1))
    count = data.draw(st.integers(1, 4))
    shapes = []
    for _ in range(count):
        s = list(base)
        s[axis] = data.draw(st.integers(0, 4))
        shapes.append(s)
    r = skriptnd.infer("layout.concat", {"axis": axis}, [shapes])
    assert r.ok, r.diagnostics
    assert r.outputs[0].shape == np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape


def test_concat_extent_mismatch_names_the_input() -> None:
    r = skriptnd.infer("layout.concat", {"axis": 0}, [[[2, 3], [2, 4]]])
    assert [d.code for d in r.diagnostics] == ["E0403"]
    assert "input 'inputs'" in r.diagnostics[0].message


@FAST
@given(st.integers(1, 3), st.data())
def test_split_matches_numpy(rank: int, data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(0, rank - 1))
    if data.draw(st.booleans()):
        count = data.draw(st.sampled_from([d for d in range(1, shape[axis] + 1) if shape[axis] % d == 0]))
        r = skriptnd.infer("layout.split", {"axis": axis, "count": count}, [shape])
        expected = [a.shape for a in np.split(np.zeros(shape), count, axis=axis)]
    else:
        cuts = sorted(data.draw(st.lists(st.integers(0, shape[axis]), max_size=3)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, shape[axis]], strict=True)]
        r = skriptnd.infer("layout.split", {"axis": axis, "sizes": sizes}, [shape])
        expected = [a.shape for a in np.split(np.zeros(shape), cuts, axis=axis)]
    assert r.ok, r.diagnostics
    assert r.outputs[0].shapes == expected


def test_unknown_operator_suggests() -> None:
    r = skriptnd.infer("nn.rellu", {}, [[1]])
    assert r.diagnostics[0].code == "E0204" and "relu" in (r.diagnostics[0].hint or "")


def test_missing_required_attribute() -> None:
    r = skriptnd.infer("layout.concat", {}, [[[1], [2]]])
    assert r.diagnostics[0].code == "E0410"
