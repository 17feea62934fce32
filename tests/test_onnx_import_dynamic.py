"""ONNX import keeps symbolic dimensions (issue 25, item 2).

* Real blocks exported by PyTorch with dynamic axes (``python benchmarks/zoo/build.py --ci --dynamic``:
  tests/data/zoo/*_dyn.onnx): a ResNet stem with a MaxPool and flatten (dynamic batch), a one-layer BERT and
  a one-layer GPT-2 (dynamic batch and sequence), and a one-block torchvision ViT (MultiheadAttention's
  `Shape` chains, dynamic batch). Each imports WITHOUT fixed shapes (the dimensions become
  the graph attributes `batch`, `seq`), is composed at two different shapes and run by the numpy backend;
  the oracle is onnxruntime on the ORIGINAL file at the same inputs.
* The symbolic shape folding (skriptnd/interop/onnx_import/symbolic.py) on hand-made graphs and on random
  Shape / Gather / Slice / Mul / Concat / Reshape chains (hypothesis), checked against onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx_models import require_onnx
from onnx_oracle import require_ort

import skriptnd
from skriptnd.backends import Options, prepare
from skriptnd.interop.onnx_import import import_onnx
from skriptnd.interop.onnx_import import symbolic as sym
from skriptnd.interop.onnx_import.importer import ImportResult

ZOO = Path(__file__).resolve().parent / "data" / "zoo"
#: block -> the symbolic dimensions its inputs have
BLOCKS = {"ci_resnet_block_dyn": ["batch"], "ci_vit_block_dyn": ["batch"], "ci_bert_block_dyn": ["batch", "seq"],
          "ci_gpt2_block_dyn": ["batch", "seq"]}
SHAPES = [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 16}]
TOLERANCE = 1e-4


def _feeds(model: object, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs of the given sizes: images, token ids < 100, padding masks (last two tokens), token types."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in t.shape.dim]
        if t.elem_type == 1:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in vi.name:
            mask = np.ones(shape, np.int64)
            mask[..., -2:] = 0
            feeds[vi.name] = mask
        elif "type" in vi.name:
            feeds[vi.name] = np.zeros(shape, np.int64)
        else:
            feeds[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
    return feeds


def _run_both(path: Path, folder: Path, sizes: dict[str, int], seed: int, backend: str = "numpy",
              run_options: Options | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(the backend's output, onnxruntime's on the original) for each output, at `sizes`."""
    onnx, _ = require_onnx()
    ort = require_ort()
    model = onnx.load(str(path))
    feeds = _feeds(model, sizes, seed)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    reference = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)
    loaded = skriptnd.load(folder)
    attribs = {d.name: sizes[d.name] for d in loaded.attrib_decls() if d.name in sizes}
    graph = loaded.compose(attribs=attribs)
    outputs = prepare(graph, backend, run_options or Options(threads=1)).run(
        {t.name: feeds[vi.name] for t, vi in zip(graph.inputs, model.graph.input, strict=True)})
    return list(zip(outputs.values(), reference, strict=True))


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(float(np.max(np.abs(expected))), 1e-30)
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale


def test_committed_dynamic_blocks_are_small_and_dynamic() -> None:
    onnx, _ = require_onnx()
    for block, dims in BLOCKS.items():
        path = ZOO / f"{block}.onnx"
        assert path.stat().st_size < 400_000
        params = {d.dim_param for vi in onnx.load(str(path)).graph.input for d in vi.type.tensor_type.shape.dim}
        assert params - {""} == set(dims), (block, params)


@pytest.mark.parametrize("block", list(BLOCKS))
def test_dynamic_block_imports_without_fixed_shapes_and_runs_at_two_shapes(block: str, tmp_path: Path) -> None:
    result = import_onnx(ZOO / f"{block}.onnx", tmp_path / "m")
    assert result.attribs == BLOCKS[block]  # the symbolic dimensions, kept as graph attributes
    for seed, sizes in enumerate(SHAPES):
        for actual, expected in _run_both(ZOO / f"{block}.onnx", result.path, sizes, seed):
            assert expected.shape[0] == sizes["batch"]
            assert _relative_error(actual, expected) <= TOLERANCE, (block, sizes)


def test_dynamic_bert_block_compiles_with_iree_at_two_shapes(tmp_path: Path) -> None:
    """--via iree on the imported block at each size (one module per composition): it used to stop with a
    TypeError traceback in the MLIR writer, which took an unused int64 constant the program kept (the
    attention mask's) for a shape operand."""
    import importlib.util
    import os

    if importlib.util.find_spec("iree") is None or importlib.util.find_spec("iree.compiler") is None:
        if os.environ.get("CI"):
            pytest.fail("iree not installed; the dev extra installs it")
        pytest.skip("iree not installed (pip install -e '.[dev]')")
    block = "ci_bert_block_dyn"
    result = import_onnx(ZOO / f"{block}.onnx", tmp_path / "m")
    for seed, sizes in enumerate(SHAPES):
        for actual, expected in _run_both(ZOO / f"{block}.onnx", result.path, sizes, seed, "iree",
                                          Options(cache_dir=str(tmp_path / "cache"))):
            assert _relative_error(actual, expected) <= TOLERANCE, sizes


# ------------------------------------------------------------------------------ symbolic folding, unit level


def test_text_writes_integer_expressions() -> None:
    b, s = sym.symbol("batch"), sym.symbol("seq")
    assert sym.text(b * s) == "batch * seq"
    assert sym.text(sym.floordiv(b * s * 64, 4)) == "16 * batch * seq"
    assert sym.text(sym.floordiv(s, 2)) == "seq / 2"  # SkriptND's `/` rounds down on int
    assert sym.text(sym.norm(sym.sympy.ceiling(s / 3))) == "seq \\ 3"  # and `\` up
    assert sym.text(s - 1) == "seq - 1"
    with pytest.raises(ValueError):
        sym.text(s / 2)  # a fraction is no extent


def test_slice_bounds_clamp_as_onnx() -> None:
    s = sym.symbol("seq")
    assert sym.slice_bounds(s, 0, 2 ** 62, 1) == (0, s)  # [0:INT_MAX] is the whole extent
    assert sym.slice_bounds(s, -1, 2 ** 62, 1) == (sym.norm(sym.sympy.Max(0, s - 1)), s)
    assert sym.slice_bounds(64, 0, s, 1) == (0, sym.sympy.Min(s, 64))  # position ids [:seq] of a 64-long table
    assert sym.slice_bounds(s, 0, 4, -1) is None  # a negative step on a symbolic extent is not decided


def _chain_model(groups: list[list[int]], minus_one: int | None, use_slice: bool, dims: list) -> object:
    """x[dims] reshaped to the products of `groups` of its extents, each read by Shape -> Gather (or Slice)
    -> ReduceProd-free Mul chain -> Unsqueeze -> Concat; group `minus_one` is written -1."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Shape", ["x"], ["shape"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "axes0")]
    parts = []
    for g, group in enumerate(groups):
        if g == minus_one:
            inits.append(numpy_helper.from_array(np.array([-1], np.int64), f"m{g}"))
            parts.append(f"m{g}")
            continue
        factors = []
        for k in group:
            if use_slice:
                inits += [numpy_helper.from_array(np.array([k], np.int64), f"s{g}_{k}"),
                          numpy_helper.from_array(np.array([k + 1], np.int64), f"e{g}_{k}")]
                nodes.append(helper.make_node("Slice", ["shape", f"s{g}_{k}", f"e{g}_{k}"], [f"d{g}_{k}"]))
                nodes.append(helper.make_node("Squeeze", [f"d{g}_{k}", "axes0"], [f"q{g}_{k}"]))
            else:
                inits.append(numpy_helper.from_array(np.array(k, np.int64), f"i{g}_{k}"))
                nodes.append(helper.make_node("Gather", ["shape", f"i{g}_{k}"], [f"q{g}_{k}"], axis=0))
            factors.append(f"q{g}_{k}")
        acc = factors[0]
        for j, f in enumerate(factors[1:]):
            nodes.append(helper.make_node("Mul", [acc, f], [f"p{g}_{j}"]))
            acc = f"p{g}_{j}"
        nodes.append(helper.make_node("Unsqueeze", [acc, "axes0"], [f"u{g}"]))
        parts.append(f"u{g}")
    nodes.append(helper.make_node("Concat", parts, ["target"], axis=0))
    nodes.append(helper.make_node("Reshape", ["x", "target"], ["r"]))
    nodes.append(helper.make_node("Relu", ["r"], ["y"]))  # the reshaped tensor flows on
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"o{g}" for g in range(len(groups))])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@st.composite
def _chains(draw: st.DrawFn) -> tuple:
    rank = draw(st.integers(2, 4))
    dims = [draw(st.sampled_from(["batch", "seq", 2, 3, 4])) for _ in range(rank)]
    cuts = sorted(draw(st.sets(st.integers(1, rank - 1), max_size=rank - 1)))
    bounds = [0, *cuts, rank]
    groups = [list(range(bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]
    minus_one = draw(st.none() | st.integers(0, len(groups) - 1))
    return dims, groups, minus_one, draw(st.booleans())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_chains())
def test_random_shape_chains_fold_symbolically_and_match_onnxruntime(tmp_path: Path, chain: tuple) -> None:
    """A Reshape whose target shape is computed from the input's symbolic extents imports with the target as
    expressions of the graph attributes, and runs like onnxruntime at two sizes."""
    onnx, _ = require_onnx()
    ort = require_ort()
    dims, groups, minus_one, use_slice = chain
    model = _chain_model(groups, minus_one, use_slice, dims)
    onnx.checker.check_model(model)
    folder = tmp_path / f"m{abs(hash(str(chain)))}"
    result = import_onnx(model, folder, overwrite=True)
    assert set(result.attribs) == {d for d in dims if isinstance(d, str)}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for sizes in ({"batch": 2, "seq": 5}, {"batch": 3, "seq": 1}):
        x = np.random.default_rng(0).standard_normal([sizes.get(d, d) for d in dims]).astype(np.float32)
        (expected,) = session.run(None, {"x": x})
        loaded = skriptnd.load(result.path)
        graph = loaded.compose(attribs={a: sizes[a] for a in result.attribs})
        (actual,) = prepare(graph, "numpy", Options(threads=1)).run({graph.inputs[0].name: x}).values()
        assert actual.shape == expected.shape
        np.testing.assert_array_equal(actual, expected)


# ------------------------------------------------------------------------------ --input-shape with names


def _cnn(path: Path, dims: list) -> Path:
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_input_shape_parses_names_and_numbers() -> None:
    from skriptnd.cli.importing import parse_input_shapes

    assert parse_input_shapes(["x=batch,3,224,224", "ids=b, seq"]) == {"x": ["batch", 3, 224, 224], "ids": ["b", "seq"]}
    import typer

    for bad in ("x=1,a-b", "x=", "x=1,,2", "=1"):
        with pytest.raises(typer.BadParameter):
            parse_input_shapes([bad])


def test_input_shape_names_a_dimension_and_fixes_the_others(tmp_path: Path) -> None:
    """x[N, 1, H, 8] imported with --input-shape x=batch,1,8,8: N kept symbolic under the name given, H fixed;
    the graph runs like onnxruntime at batch 2 and 5."""
    ort = require_ort()
    model = _cnn(tmp_path / "m.onnx", ["N", 1, "H", 8])
    result = import_onnx(model, tmp_path / "a", input_shapes={"x": ["batch", 1, 8, 8]})
    assert result.attribs == ["batch"]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 1, 8, 8)).astype(np.float32)
        graph = skriptnd.load(result.path).compose(attribs={"batch": batch})
        (actual,) = prepare(graph, "numpy", Options(threads=1)).run({"x": x}).values()
        np.testing.assert_allclose(actual, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_name_for_a_fixed_dimension_is_refused(tmp_path: Path) -> None:
    from skriptnd.diagnostics import DiagnosticError

    model = _cnn(tmp_path / "m.onnx", [2, 1, 8, 8])
    with pytest.raises(DiagnosticError) as err:
        import_onnx(model, tmp_path / "a", input_shapes={"x": ["batch", 1, 8, 8]})
    (d,) = err.value.diagnostics
    assert d.code == "E0809" and "contradicts the model's fixed shape [2, 1, 8, 8]" in d.message


def test_an_unnamed_dimension_becomes_a_graph_attribute_named_after_its_input(tmp_path: Path) -> None:
    ort = require_ort()
    model = _cnn(tmp_path / "m.onnx", [None, 1, 8, 8])
    result = import_onnx(model, tmp_path / "a")
    assert result.attribs == ["x_dim0"]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((3, 1, 8, 8)).astype(np.float32)
    graph = skriptnd.load(result.path).compose(attribs={"x_dim0": 3})
    (actual,) = prepare(graph, "numpy", Options(threads=1)).run({"x": x}).values()
    np.testing.assert_allclose(actual, session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _per_batch(model: object, folder: Path, batches: tuple[int, ...],
               feeds_of: Callable[[int], dict[str, np.ndarray]]) -> tuple[ImportResult, list[tuple[list, list]]]:
    """``model`` (an in-memory ONNX graph with a symbolic ``batch``) imported into ``folder``, then at each batch
    composed, run by the numpy backend and by onnxruntime on the model on ``feeds_of(batch)``: the import result
    and, per batch, (numpy's outputs, onnxruntime's outputs), both in output order."""
    ort = require_ort()
    result = import_onnx(model, folder)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    runs = []
    for batch in batches:
        feeds = feeds_of(batch)
        graph = skriptnd.load(result.path).compose(attribs={"batch": batch})
        actual = prepare(graph, "numpy", Options(threads=1)).run(feeds)
        runs.append((list(actual.values()), session.run(None, feeds)))
    return result, runs


@pytest.mark.parametrize("equation", ["bij,bjk->bik", "bhqd,bhkd->bhqk", "bij->bji"])
def test_einsum_with_a_symbolic_batch(equation: str, tmp_path: Path) -> None:
    """Einsum's reshapes to [batch, left, inner] carry the batch as an expression (was: E0808)."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper

    terms = equation.split("->")[0].split(",")
    extents = {"b": "batch", "h": 2, "i": 3, "j": 4, "k": 5, "q": 3, "d": 4}
    inputs = [helper.make_tensor_value_info(f"x{n}", TensorProto.FLOAT, [extents[c] for c in t])
              for n, t in enumerate(terms)]
    out = equation.split("->")[1]
    graph = helper.make_graph([helper.make_node("Einsum", [vi.name for vi in inputs], ["y"], equation=equation)], "g",
                              inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [extents[c] for c in out])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    def feeds(batch: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(batch)
        return {f"x{n}": rng.standard_normal([batch if c == "b" else extents[c] for c in t]).astype(np.float32)
                for n, t in enumerate(terms)}

    result, runs = _per_batch(model, tmp_path / "m", (1, 3), feeds)
    assert result.attribs == ["batch"]
    for (actual,), (expected,) in runs:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def _fold_one(op: str, inputs: dict, **attrs: object) -> object:
    """Fold one node whose inputs are known values (object arrays hold expressions); its output's value, or None
    where it stays a run-time computation."""
    require_onnx()
    from onnx import helper

    from skriptnd.interop.onnx_import.context import Context, Node

    ctx = Context(opset=17)
    for name, v in inputs.items():
        arr = np.asarray(v, dtype=object if any(sym.is_symbolic(x) for x in np.asarray(v, object).reshape(-1))
                         else np.int64)
        (ctx.symvals if arr.dtype == object else ctx.consts)[name] = arr
    node = Node.of(helper.make_node(op, list(inputs), ["y"], **attrs))
    return sym.value(ctx, "y") if sym.fold(ctx, node) else None


def test_known_values_fold_with_symbols() -> None:
    b, s = sym.symbol("batch"), sym.symbol("seq")
    assert list(_fold_one("Mul", {"a": [b, s], "k": [1, 4]})) == [b, 4 * s]
    assert list(_fold_one("Div", {"a": [4 * s], "k": [2]})) == [2 * s]
    assert list(_fold_one("Gather", {"a": [b, s, 64], "i": -1}, axis=0).reshape(-1)) == [64]
    assert _fold_one("Equal", {"a": [b, -1], "k": [-1]}).tolist() == [False, True]  # symbols are positive
    assert _fold_one("Equal", {"a": [b], "k": [1]}) is None  # batch == 1 is not decided at import time
    assert _fold_one("Div", {"a": [s - 20], "k": [2]}) is None  # truncation vs floor: the sign is unknown
    assert list(_fold_one("Concat", {"a": [b], "c": [-1, 4]}, axis=0)) == [b, -1, 4]


def test_cli_imports_with_a_named_dimension_and_runs_it(tmp_path: Path) -> None:
    """`sknd import m.onnx --input-shape x=batch,1,8,8` then `sknd run --attrib batch=2 --input x=...`: the
    output is onnxruntime's."""
    import subprocess
    import sys

    ort = require_ort()
    model = _cnn(tmp_path / "m.onnx", ["N", 1, 8, 8])

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "skriptnd", *args, "--color", "never"], capture_output=True,
                              text=True, cwd=Path(__file__).resolve().parents[1])

    proc = cli("import", str(model), "-o", str(tmp_path / "out"), "--input-shape", "x=batch,1,8,8")
    assert proc.returncode == 0, proc.stderr
    assert "dynamic dimensions became graph attributes: batch" in proc.stderr
    x = np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(tmp_path / "out"), "--attrib", "batch=2", "--input", f"x={tmp_path / 'x.npy'}",
               "--output-dir", str(tmp_path / "res"))
    assert proc.returncode == 0, proc.stderr
    (saved,) = [p for p in (tmp_path / "res").iterdir() if p.suffix == ".npy"]
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(saved), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["Split", "ArgMax"])
def test_ops_needing_one_axis_as_a_number_leave_the_batch_symbolic(op: str, tmp_path: Path) -> None:
    """An equal Split of a static axis (the dynamo exporter's fused QKV split in GPT-2) and ArgMax with
    select_last_index need only that axis' extent (was: E0808 on the symbolic batch)."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper

    if op == "Split":
        nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1)]
        outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 3]) for n in ("a", "b")]
    else:
        nodes = [helper.make_node("ArgMax", ["x"], ["a"], axis=1, select_last_index=1)]
        outputs = [helper.make_tensor_value_info("a", TensorProto.INT64, ["batch", 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    # integers in [0, 3): ties for select_last_index
    _, runs = _per_batch(model, tmp_path / "m", (1, 4),
                         lambda batch: {"x": np.random.default_rng(batch).integers(0, 3, (batch, 6)).astype(np.float32)})
    for actual, expected in runs:
        for a, e in zip(actual, expected, strict=True):
            np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("case", ["resize", "depth_to_space_crd", "space_to_depth", "hardmax", "trilu"])
def test_more_ops_with_a_symbolic_batch(case: str, tmp_path: Path) -> None:
    """Resize (scales 1 on batch and channels), DepthToSpace CRD, SpaceToDepth, Hardmax and Trilu need numbers only
    for the axes they work on: the batch stays symbolic; results match onnxruntime at two batches."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    inits = []
    if case == "resize":
        inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
        node, dims, out = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest"), [4, 2, 3, 3], \
            [2, 6, 6]
    elif case == "depth_to_space_crd":
        node, dims, out = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"), [8, 2, 2], [2, 4, 4]
    elif case == "space_to_depth":
        node, dims, out = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2), [2, 4, 4], [8, 2, 2]
    elif case == "hardmax":
        node, dims, out = helper.make_node("Hardmax", ["x"], ["y"], axis=-1), [3, 5], [3, 5]
    else:
        node, dims, out = helper.make_node("Trilu", ["x"], ["y"], upper=0), [4, 4], [4, 4]
    if case == "resize":
        dims = dims[1:]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", *dims])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", *out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    result, runs = _per_batch(model, tmp_path / "m", (1, 3), lambda batch: {
        "x": np.random.default_rng(batch).standard_normal((batch, *dims)).astype(np.float32)})
    assert result.attribs == ["batch"]
    for (actual,), (expected,) in runs:
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def test_a_shape_of_a_data_dependent_extent_names_the_tensor(tmp_path: Path) -> None:
    """NonZero's count is known only at run time: the Shape of it is E0808 naming the tensor and its '?' extent."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper

    from skriptnd.diagnostics import DiagnosticError

    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"], name="shape"),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(DiagnosticError) as err:
        import_onnx(model, tmp_path / "m")
    (d,) = err.value.diagnostics
    assert d.code == "E0808" and "the shape of 'nz' [2, ?]" in d.message, d.message
