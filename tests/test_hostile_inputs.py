"""A hostile-input campaign (issue 23): mutated ONNX files, NNEF folders, tensor files and --input /
--expect arrays, made from small valid models built here, fed to the CLI in process.

Every case asserts what a user opening a model from the internet relies on: an exit code in {0, 1, 2}
(never an internal error or a traceback), a bounded time and bounded memory (tracemalloc's peak, numpy
included), no file opened outside the model's folder (an audit hook records every `open`, links
resolved), none of the secret's bytes in what was written, nothing left behind on failure, and a
successful import writes a folder that checks.

The CI runs a few dozen cases in all; `pytest tests/test_hostile_inputs.py --fuzz N` (or SKRIPTND_FUZZ=N)
runs N times as many, with fresh random cases (the same switch as tests/test_fuzz.py).
"""

from __future__ import annotations

import io
import os
import re
import struct
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import fuzz_settings

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

#: 64 bytes that appear nowhere else: found in an output, they were read from outside the model folder.
SECRET = bytes(range(0xA0, 0xE0))
MEMORY_LIMIT = 256 * 2**20  # a small hostile file never costs more than this (tracemalloc peak)
TIME_LIMIT = 60.0

_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and args and isinstance(args[0], str | bytes):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


def _invoke(args: list[str], outside: Path) -> tuple[int, str, float, int]:
    """Run the CLI in process: (exit code, output, seconds, peak bytes); asserts that nothing under
    `outside` was opened."""
    global _opened
    from typer.testing import CliRunner

    from skriptnd.cli.app import app

    _opened = []
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = CliRunner().invoke(app, args, env={"NO_COLOR": "1", "COLUMNS": "200"})
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        opened, _opened = _opened, None
    escaped = [p for p in opened if Path(os.path.realpath(p)).is_relative_to(outside.resolve())]
    assert not escaped, (args, escaped)
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in (0, 1, 2), (args, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, (args, output[-2000:])
    assert elapsed < TIME_LIMIT, (args, elapsed)
    assert peak < MEMORY_LIMIT, (args, peak)
    return result.exit_code, output, elapsed, peak


def _scene(tmp: Path) -> tuple[Path, Path]:
    """(model folder, outside folder): the secret outside, a link to it and a link to /dev/zero inside."""
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(SECRET)
    (outside / "secret.dat").write_bytes(SECRET)
    model = tmp / "model"
    model.mkdir()
    (model / "link.bin").symlink_to(outside / "secret.bin")
    (model / "zero.bin").symlink_to("/dev/zero")
    return model, outside


def _import_checks(code: int, output: str, out: Path, outside: Path, outside_bytes: bytes = SECRET) -> None:
    parent = out.parent
    if code != 0:
        assert not out.exists(), output[-2000:]
    assert not [p for p in parent.iterdir() if p.name.startswith(f".{out.name}.")], "a temporary folder was left"
    if code == 0:
        for path in out.rglob("*"):
            if path.is_file():
                assert outside_bytes not in path.read_bytes(), path
        check = _invoke(["check", str(out)], outside)
        assert check[0] == 0, check[1][-2000:]
        run = _invoke(["run", str(out), "--random-inputs"], outside)
        assert run[0] == 0, run[1][-2000:]


# -- ONNX files ----------------------------------------------------------------------------------------------

LOCATIONS = ["w.bin", "../outside/secret.bin", "/etc/passwd", "link.bin", "zero.bin", "", "sub/../w.bin",
             "missing.bin", "w.bin\0x", "../model/w.bin", "."]
INTERESTING = [-1, 0, 1, 2, 3, 4, 7, 255, 2**31 - 1, 2**31, 2**32, 2**40, 2**62]


def _onnx_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, 48], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], auto_pad="NOTSET"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48])], [w, b, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


onnx_field = st.one_of(
    st.tuples(st.just("raw_len"), st.sampled_from(["w", "b", "shape"]), st.integers(-16, 16)),
    st.tuples(st.just("dims"), st.sampled_from(["w", "b", "shape"]), st.integers(0, 3), st.sampled_from(INTERESTING)),
    st.tuples(st.just("dtype"), st.sampled_from(["w", "b", "shape"]), st.integers(0, 25)),
    st.tuples(st.just("attr_bytes"), st.binary(max_size=12)),
    st.tuples(st.just("same_names")),
    st.tuples(st.just("external"), st.sampled_from(["w", "b"]), st.sampled_from(LOCATIONS),
              st.sampled_from(INTERESTING), st.sampled_from([None, *INTERESTING])),
    st.tuples(st.just("shape_values"), st.lists(st.sampled_from(INTERESTING), min_size=1, max_size=3)),
)
byte_edit = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
)


def _init(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    return next(t for t in model.graph.initializer if t.name == name)


def _mutate_onnx(model: onnx.ModelProto, edit: tuple, folder: Path) -> None:
    kind = edit[0]
    if kind == "raw_len":
        t = _init(model, edit[1])
        t.raw_data = t.raw_data + bytes(edit[2]) if edit[2] >= 0 else t.raw_data[:edit[2]]
    elif kind == "dims":
        t = _init(model, edit[1])
        if edit[2] < len(t.dims):
            t.dims[edit[2]] = edit[3] if -2**63 <= edit[3] < 2**63 else 0
    elif kind == "dtype":
        _init(model, edit[1]).data_type = edit[2]
    elif kind == "attr_bytes":
        model.graph.node[0].attribute[-1].s = edit[1]
    elif kind == "same_names":
        for node in model.graph.node:
            node.name = "n"
    elif kind == "external":
        t = _init(model, edit[1])
        data = t.raw_data
        (folder / "w.bin").write_bytes(bytes(64) + data)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", edit[2]), ("offset", edit[3]), ("length", edit[4])):
            if value is not None:
                entry = t.external_data.add()
                entry.key, entry.value = key, str(value)
    elif kind == "shape_values":
        values = [v if -2**63 <= v < 2**63 else 0 for v in edit[1]]
        _init(model, "shape").CopyFrom(numpy_helper.from_array(np.array(values, np.int64), "shape"))


def _edit_bytes(data: bytes, edit: tuple) -> bytes:
    if not data:
        return data
    pos = edit[1] % len(data)
    if edit[0] == "flip":
        return data[:pos] + bytes([edit[2]]) + data[pos + 1:]
    if edit[0] == "truncate":
        return data[:pos]
    return data[:pos] + edit[2] + data[pos:]


@fuzz_settings(10)
@given(fields=st.lists(onnx_field, max_size=3), edits=st.lists(byte_edit, max_size=2))
def test_hostile_onnx_files(tmp_path_factory: pytest.TempPathFactory, fields: list[tuple], edits: list[tuple]) -> None:
    model_dir, outside = _scene(tmp_path_factory.mktemp("onnx"))
    model = _onnx_model()
    for edit in fields:
        _mutate_onnx(model, edit, model_dir)
    data = model.SerializeToString()
    for edit in edits:
        data = _edit_bytes(data, edit)
    src = model_dir / "m.onnx"
    src.write_bytes(data)
    out = model_dir.parent / "out"
    code, output, _, _ = _invoke(["import", str(src), "-o", str(out)], outside)
    _import_checks(code, output, out, outside)


# -- NNEF folders --------------------------------------------------------------------------------------------

NNEF = """version 1.0;

graph G( x ) -> ( y )
{{
    x = external(shape = [1, 2, 4, 4]);
    w = variable(shape = [3, 2, 3, 3], label = '{label}');
    c = conv(x, w, 0.0, padding = [(1, 1), (1, 1)]);
    y = relu(c);
}}
"""
LABELS = ["conv/w", "../outside/secret", "/conv/w", "conv/../conv/w", "link", "zero", "w" * 300, "conv//w",
          "conv/w/..", "", "."]
QUANT_NUMBERS = ["0.0", "-1.0", "0.5", "1e-30", "1e30", "inf", "nan", "0", "1", "8", "32", "33", "1000", "-8"]


def _nnef_folder(folder: Path, label: str, quant: str | None) -> None:
    from skriptnd.io.tensor_file import write_tensor

    (folder / "graph.nnef").write_text(NNEF.format(label=label), encoding="utf-8")
    (folder / "conv").mkdir(exist_ok=True)
    write_tensor(folder / "conv" / "w.dat", np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32))
    (folder / "link.dat").symlink_to(folder.parent / "outside" / "secret.dat")
    (folder / "zero.dat").symlink_to("/dev/zero")
    if quant is not None:
        (folder / "graph.quant").write_text(quant, encoding="utf-8")


quant_text = st.builds(
    lambda op, a, b, c, signed: (
        f'"y": zero_point_linear_quantize(zero_point = {a if a.lstrip("-").isdigit() else 0}, scale = {b}, '
        f'bits = {c if c.lstrip("-").isdigit() else 8}, signed = {signed}, symmetric = false);\n'
        if op == "zp" else
        f'"y": min_max_linear_quantize(min = {a}, max = {b}, bits = {c if c.lstrip("-").isdigit() else 8}, '
        f'signed = {signed}, symmetric = false);\n'),
    st.sampled_from(["zp", "mm"]), st.sampled_from(QUANT_NUMBERS), st.sampled_from(QUANT_NUMBERS),
    st.sampled_from(QUANT_NUMBERS), st.sampled_from(["true", "false"]))


@fuzz_settings(8)
@given(label=st.sampled_from(LABELS), quant=st.none() | quant_text,
       header=st.none() | st.tuples(st.sampled_from([0, 2, 4, 8, 12, 44, 48]), st.sampled_from(INTERESTING)))
def test_hostile_nnef_folders(tmp_path_factory: pytest.TempPathFactory, label: str, quant: str | None,
                              header: tuple[int, int] | None) -> None:
    model_dir, outside = _scene(tmp_path_factory.mktemp("nnef"))
    _nnef_folder(model_dir, label, quant)
    if header is not None:
        _poke(model_dir / "conv" / "w.dat", *header)
    out = model_dir.parent / "out"
    code, output, _, _ = _invoke(["import", str(model_dir), "-o", str(out)], outside)
    _import_checks(code, output, out, outside)


# -- tensor files, --input and --expect arrays ---------------------------------------------------------------

MODEL = ("import math;\ngraph G {\n    @input { x: real[4]; }\n    @output { y: real[4]; }\n"
         "    @variable { w: real[4]; }\n    @compose { y = math.add(x, w); }\n}\n")


def _poke(path: Path, offset: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    if offset + 4 <= len(data):
        data[offset:offset + 4] = struct.pack("<I", value % 2**32)
    path.write_bytes(bytes(data))


def _npy(descr: str, shape: str, fortran: bool, body: bytes) -> bytes:
    header = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1") + body


DESCRS = ["<f4", "<f8", "|O", "<i8", "|b1", ">f4", "<U3", "|V4", "<c8", "<f2", "float32", "<M8[s]"]
SHAPES = ["(4,)", "()", f"({2**40},)", "(0,)", "(4, 1)", "(-1,)", "(2, 2)", f"({2**28},)", "'x'", "(4.0,)"]
tensor_edit = st.one_of(
    st.tuples(st.just("header"), st.sampled_from([0, 2, 4, 8, 12, 16, 44, 48, 52]), st.sampled_from(INTERESTING)),
    st.tuples(st.just("truncate"), st.integers(0, 200)),
    st.tuples(st.just("append"), st.integers(1, 64)),
    st.tuples(st.just("sparse"), st.sampled_from([2**20, 2**30])),
    st.tuples(st.just("link"), st.sampled_from(["secret", "/dev/zero", "folder"])),
)


def _apply_tensor_edit(path: Path, edit: tuple, outside: Path) -> None:
    kind = edit[0]
    if kind == "header":
        _poke(path, edit[1], edit[2])
    elif kind == "truncate":
        path.write_bytes(path.read_bytes()[:edit[1]])
    elif kind == "append":
        path.write_bytes(path.read_bytes() + bytes(edit[1]))
    elif kind == "sparse":
        with open(path, "r+b") as fh:
            fh.truncate(edit[1])
    else:
        path.unlink()
        target = {"secret": outside / "secret.dat", "/dev/zero": Path("/dev/zero"), "folder": outside}[edit[1]]
        path.symlink_to(target)


@fuzz_settings(10)
@given(weights=st.lists(tensor_edit, max_size=2),
       input_kind=st.sampled_from(["npy", "dat"]), input_edits=st.lists(tensor_edit, max_size=2),
       npy=st.none() | st.tuples(st.sampled_from(DESCRS), st.sampled_from(SHAPES), st.booleans(),
                                 st.integers(0, 64)),
       expect=st.none() | st.tuples(st.sampled_from(DESCRS), st.sampled_from(SHAPES), st.booleans(),
                                    st.integers(0, 64)))
def test_hostile_tensor_files_and_arrays(tmp_path_factory: pytest.TempPathFactory, weights: list[tuple],
                                         input_kind: str, input_edits: list[tuple],
                                         npy: tuple | None, expect: tuple | None) -> None:
    from skriptnd.io.tensor_file import write_tensor

    model_dir, outside = _scene(tmp_path_factory.mktemp("run"))
    (model_dir / "main.sknd").write_text(MODEL)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    write_tensor(model_dir / "main.G.w.dat", w)
    for edit in weights:
        _apply_tensor_edit(model_dir / "main.G.w.dat", edit, outside)
    inputs = model_dir.parent / "inputs"
    inputs.mkdir()
    x = inputs / f"x.{input_kind}"
    if input_kind == "dat":
        write_tensor(x, np.ones(4, np.float32))
    elif npy is None:
        buffer = io.BytesIO()
        np.save(buffer, np.ones(4, np.float32))
        x.write_bytes(buffer.getvalue())
    else:
        x.write_bytes(_npy(npy[0], npy[1], npy[2], np.ones(16, np.uint8).tobytes()[:npy[3]]))
    for edit in input_edits:
        _apply_tensor_edit(x, edit, outside)
    reference = model_dir.parent / "expect"
    reference.mkdir()
    if expect is None:
        np.save(reference / "y.npy", w + 1)
    else:
        (reference / "y.npy").write_bytes(_npy(expect[0], expect[1], expect[2], (w + 1).tobytes()[:expect[3]]))
    code, output, _, _ = _invoke(["run", str(model_dir), "--input", f"x={x}", "--expect", str(reference)], outside)
    assert SECRET.hex() not in output
    clean = not weights and not input_edits and npy is None and expect is None
    if clean:  # the control: the untouched case runs and matches its hand-computed reference (w + 1)
        assert code == 0 and "y: matches" in output, output[-2000:]
    for line in re.findall(r"^\S+:\d+:\d+: error\[E\d{4}\].*$", output, re.M):
        assert ":" in line
