"""Files a downloaded model names are read only inside its folder, only when they are regular files, and
never beyond what their size justifies (issue 23, items 1 and 3).

Every test builds a small valid model, then makes one file of it hostile the way an attacker would (a
label or location climbing out of the folder, a link to a secret or to /dev/zero, a FIFO, a sparse file
whose header lies) and checks the located diagnostic, that nothing was written, and that no byte of the
secret reached the output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from nnef_oracle import write_graph

import skriptnd
from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.nnef_import import import_nnef
from skriptnd.io.tensor_file import TensorFileError, encode_tensor, read_tensor, write_tensor

ROOT = Path(__file__).resolve().parents[1]
SECRET = np.array([4.0, 8.0, 15.0, 16.0], np.float32)  # what must never be read into a model

NNEF = """graph G( x ) -> ( y )
{{
    x = external(shape = [4]);
    w = variable(shape = [4], label = '{label}');
    y = add(x, w);
}}
"""


def _sknd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _secret(tmp_path: Path) -> Path:
    """A tensor file outside every model folder (as ~/.ssh or another model would be)."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    write_tensor(outside / "secret.dat", SECRET)
    return outside / "secret.dat"


def _nnef_refused(src: Path, out: Path, *words: str) -> str:
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, out)
    (diag,) = err.value.diagnostics
    assert diag.code == "E0833" and diag.span.file.endswith("graph.nnef")
    assert diag.span.line == 6  # the variable's line (after the version line write_graph adds)
    for word in words:
        assert word in diag.message
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    return diag.message


# -- item 1: NNEF labels ----------------------------------------------------------------------------------

def test_an_nnef_label_cannot_climb_out_of_the_model_folder(tmp_path: Path) -> None:
    _secret(tmp_path)
    src = write_graph(tmp_path / "m", NNEF.format(label="../outside/secret"))
    _nnef_refused(src, tmp_path / "out", "../outside/secret", "leads outside the model folder")
    # an absolute label is relative to the model folder (as before), so /etc/x is m/etc/x.dat: not found
    src = write_graph(tmp_path / "m", NNEF.format(label=str(tmp_path / "outside" / "secret")))
    _nnef_refused(src, tmp_path / "out", "not found")


def test_an_nnef_tensor_file_linking_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    src = write_graph(tmp_path / "m", NNEF.format(label="w"))
    (src / "w.dat").symlink_to(secret)
    _nnef_refused(src, tmp_path / "out", "leads outside the model folder")
    (src / "w.dat").unlink()
    (src / "w.dat").symlink_to("/dev/zero")
    _nnef_refused(src, tmp_path / "out", "leads outside the model folder")


def test_an_nnef_link_inside_the_folder_is_fine(tmp_path: Path) -> None:
    """The control: links that stay inside the folder are followed, so the refusals above are about
    leaving the folder."""
    src = write_graph(tmp_path / "m", NNEF.format(label="w"), {"store/w": SECRET})
    (src / "w.dat").symlink_to("store/w.dat")
    out = import_nnef(src, tmp_path / "out")
    got = skriptnd.run(skriptnd.load(out).compose(), {"x": np.ones(4, np.float32)})["y"]
    np.testing.assert_array_equal(got, SECRET + 1)


def test_an_nnef_tensor_file_that_is_a_fifo_does_not_block(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", NNEF.format(label="w"))
    os.mkfifo(src / "w.dat")
    start = time.monotonic()
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 1 and "E0833" in proc.stderr and "FIFO" in proc.stderr, proc.stderr
    assert time.monotonic() - start < 60 and not (tmp_path / "out").exists()


def test_an_nnef_label_longer_than_a_file_name_is_a_located_error(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", NNEF.format(label="w" * 300))
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1 and "E0833" in proc.stderr and "255 bytes" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and f"{src / 'graph.nnef'}:6:" in proc.stderr


def test_graph_quant_linking_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    src = write_graph(tmp_path / "m", NNEF.format(label="w"), {"w": SECRET})
    (tmp_path / "elsewhere.txt").write_text('"w": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n')
    (src / "graph.quant").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(DiagnosticError) as err:
        import_nnef(src, tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0836" and "leads outside" in err.value.diagnostics[0].message


# -- item 1: the tensor files of a SkriptND model folder ----------------------------------------------------

MODEL = "import math;\ngraph G {\n    @input { x: real[4]; }\n    @output { y: real[4]; }\n    @variable { w: real[4]; }\n" \
        "    @compose { y = math.add(x, w); }\n}\n"


def _model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "main.sknd").write_text(MODEL)
    np.save(tmp_path / "x.npy", np.ones(4, np.float32))
    return folder


@pytest.mark.parametrize("target", ["secret", "/dev/zero"])
def test_sknd_run_refuses_a_variable_file_linking_out_of_the_folder(tmp_path: Path, target: str) -> None:
    folder = _model(tmp_path)
    (folder / "main.G.w.dat").symlink_to(_secret(tmp_path) if target == "secret" else target)
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "o"),
                 timeout=120)
    assert proc.returncode == 1 and "E0701" in proc.stderr and "leads outside the model folder" in proc.stderr
    assert f"{folder / 'main.sknd'}:5:" in proc.stderr  # at the variable's declaration
    assert not (tmp_path / "o").exists()


def test_sknd_run_refuses_a_fifo_variable_file_without_blocking(tmp_path: Path) -> None:
    folder = _model(tmp_path)
    os.mkfifo(folder / "main.G.w.dat")
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", timeout=60)
    assert proc.returncode == 1 and "E0701" in proc.stderr and "not a regular file (a FIFO)" in proc.stderr


def test_a_module_import_cannot_leave_the_model_folder(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "helpers.sknd").write_text("operator twice { @input { x: real[s..]; } "
                                                         "@output { y: real[s..]; } @compose { y = 2.0 * x; } }\n")
    folder.mkdir()
    (folder / "ops").symlink_to(tmp_path / "elsewhere")
    (folder / "main.sknd").write_text("import ops.helpers;\n" + MODEL.replace("math.add(x, w)", "math.add(ops.helpers.twice(x), w)"))
    proc = _sknd("check", str(folder))
    assert proc.returncode == 1 and "E0203" in proc.stderr and "leads outside the model folder" in proc.stderr
    assert f"{folder / 'main.sknd'}:1:" in proc.stderr


def test_a_source_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "m.sknd")
    proc = _sknd("check", str(tmp_path / "m.sknd"), timeout=60)
    assert proc.returncode == 1 and "not a regular file (a FIFO)" in proc.stderr


# -- item 3: tensor files ---------------------------------------------------------------------------------

def test_a_sparse_tensor_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 1 GiB sparse file whose header announces 16 bytes: refused from its size alone."""
    path = tmp_path / "big.dat"
    path.write_bytes(encode_tensor(SECRET))
    with open(path, "r+b") as fh:
        fh.truncate(2**30)
    tracemalloc.start()
    try:
        with pytest.raises(TensorFileError, match="unexpected bytes after") as err:
            read_tensor(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.code == "E0702" and peak < 2**20


def test_a_header_claiming_more_than_the_file_holds_allocates_nothing(tmp_path: Path) -> None:
    """The header of a 4 GiB tensor on a 144-byte file: truncated, said before anything is allocated."""
    data = bytearray(encode_tensor(SECRET))
    header = bytearray(encode_tensor(np.zeros([1, 1], np.float32)))[:128]
    header[4:8] = ((2**15 - 1) * 2**15 * 4).to_bytes(4, "little")  # data length: within uint32
    header[12:16] = (2**15 - 1).to_bytes(4, "little")
    header[16:20] = (2**15).to_bytes(4, "little")
    path = tmp_path / "liar.dat"
    path.write_bytes(bytes(header) + bytes(data[128:]))
    tracemalloc.start()
    try:
        with pytest.raises(TensorFileError, match="truncated tensor file") as err:
            read_tensor(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.code == "E0702" and peak < 2**20


def test_a_variable_file_of_the_wrong_shape_is_refused_from_its_header(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid 64 MiB tensor where real[4] is declared: the declaration is checked against the header, so
    its data is never read."""
    folder = _model(tmp_path)
    write_tensor(folder / "main.G.w.dat", np.zeros([4096, 4096], np.float32))
    from skriptnd.io import tensor_file

    reads: list[int] = []
    real = tensor_file._read_exactly
    monkeypatch.setattr(tensor_file, "_read_exactly", lambda fh, n: reads.append(n) or real(fh, n))
    graph = skriptnd.load(folder).compose()
    with pytest.raises(DiagnosticError) as err:
        skriptnd.run(graph, {"x": np.ones(4, np.float32)})
    assert err.value.diagnostics[0].code == "E0703" and "[4096, 4096]" in err.value.diagnostics[0].message
    assert reads == [128]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_read_tensor_reads_only_regular_files(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "t.dat"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    with pytest.raises(TensorFileError) as err:
        read_tensor(path)
    assert err.value.code == "E0701"


# -- item 1: ONNX external data ---------------------------------------------------------------------------

def _onnx_with_external(tmp_path: Path, location: str) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    folder = tmp_path / "onnx"
    folder.mkdir(exist_ok=True)
    w = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(folder / "m.onnx"))
    return folder / "m.onnx"


@pytest.mark.parametrize("how", ["dotdot", "absolute", "link"])
def test_onnx_external_data_cannot_leave_the_model_folder(tmp_path: Path, how: str) -> None:
    secret = tmp_path / "outside" / "secret.bin"
    secret.parent.mkdir()
    secret.write_bytes(SECRET.tobytes())
    location = {"dotdot": "../outside/secret.bin", "absolute": str(secret), "link": "w.bin"}[how]
    src = _onnx_with_external(tmp_path, location)
    if how == "link":
        (src.parent / "w.bin").symlink_to(secret)
    proc = _sknd("import", str(src), "-o", str(tmp_path / "out"))
    assert proc.returncode == 1 and "E0802" in proc.stderr and f"{src}:1:1" in proc.stderr, proc.stderr
    assert ("leads outside the model folder" in proc.stderr or "absolute path" in proc.stderr)
    assert not (tmp_path / "out").exists()


def test_onnx_external_data_inside_the_folder_is_read_by_its_dims(tmp_path: Path) -> None:
    """The control, and the size check: a file inside the folder is read; one shorter than the dims say
    is a located E0802; a FIFO never blocks."""
    src = _onnx_with_external(tmp_path, "w.bin")
    (src.parent / "w.bin").write_bytes(SECRET.tobytes())
    out = skriptnd.import_model(src, tmp_path / "ok")
    np.testing.assert_array_equal(skriptnd.run(skriptnd.load(out).compose(), {"x": np.zeros(4, np.float32)})["y"], SECRET)
    (src.parent / "w.bin").write_bytes(SECRET.tobytes()[:10])
    proc = _sknd("import", str(src), "-o", str(tmp_path / "short"))
    assert proc.returncode == 1 and "E0802" in proc.stderr and "holds 10 bytes" in proc.stderr, proc.stderr
    (src.parent / "w.bin").unlink()
    os.mkfifo(src.parent / "w.bin")
    proc = _sknd("import", str(src), "-o", str(tmp_path / "fifo"), timeout=60)
    assert proc.returncode == 1 and "E0802" in proc.stderr and "FIFO" in proc.stderr, proc.stderr


# -- item 3: --input and --expect arrays ------------------------------------------------------------------

def _lying_npy(path: Path, items: int = 2**28) -> Path:
    """A 144-byte .npy whose header announces `items` float32 (1 GiB by default)."""
    import io

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (items,)})
    path.write_bytes(header.getvalue() + SECRET.tobytes())
    return path


def test_an_input_npy_whose_header_lies_allocates_nothing(tmp_path: Path) -> None:
    """numpy.load allocates the 1 GiB the header announces before it finds 16 bytes; we check first."""
    import typer

    from skriptnd.cli.io import read_array

    path = _lying_npy(tmp_path / "x.npy")
    tracemalloc.start()
    try:
        with pytest.raises(typer.BadParameter, match="cut short"):
            read_array(str(path), "x")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_input_and_expect_files_that_are_pickles_or_special(tmp_path: Path) -> None:
    folder = _model(tmp_path)
    write_tensor(folder / "main.G.w.dat", SECRET)
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'objects.npy'}")
    assert proc.returncode == 2 and "a pickle" in proc.stderr and "Traceback" not in proc.stderr
    os.mkfifo(tmp_path / "fifo.npy")
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'fifo.npy'}", timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr
    # --expect DIR with a pickled reference: a located diagnostic (was exit 3)
    expect = tmp_path / "expect"
    expect.mkdir()
    np.save(expect / "y.npy", np.array([None, 1], dtype=object), allow_pickle=True)
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--expect", str(expect))
    assert proc.returncode == 1 and "E0704" in proc.stderr and f"{expect / 'y.npy'}:1:1" in proc.stderr, proc.stderr
    assert "a pickle" in proc.stderr and "Traceback" not in proc.stderr
    _lying_npy(expect / "y.npy")
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--expect", str(expect))
    assert proc.returncode == 1 and "E0704" in proc.stderr and "cut short" in proc.stderr, proc.stderr
    # the control: the right reference matches
    np.save(expect / "y.npy", SECRET + 1)
    proc = _sknd("run", str(folder), "--input", f"x={tmp_path / 'x.npy'}", "--expect", str(expect))
    assert proc.returncode == 0 and "matches" in proc.stderr, proc.stderr


def test_npz_members_are_numbers_within_their_size(tmp_path: Path) -> None:
    import zipfile

    from skriptnd.io.npy import NpyError, read_npz
    from skriptnd.tosa.spirv import load_constants

    np.savez(tmp_path / "ok.npz", **{"0": SECRET, "1": np.arange(3)})
    got = load_constants(tmp_path / "ok.npz")
    np.testing.assert_array_equal(got[0], SECRET) and np.testing.assert_array_equal(got[1], np.arange(3))
    np.savez(tmp_path / "pickle.npz", **{"0": np.array([{}], dtype=object)})
    with pytest.raises(NpyError, match="a pickle"):
        read_npz(tmp_path / "pickle.npz")
    # a zip bomb: 128 MiB of zeros in a member of 130 KB
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        import io

        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**25,)})
        z.writestr("0.npy", header.getvalue() + bytes(2**27))
    with pytest.raises(NpyError, match="zip bomb"):
        read_npz(tmp_path / "bomb.npz")
