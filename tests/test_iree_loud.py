"""The iree backend is right or loud (issue 30): safe default flags per target CPU, a compiler failure that
quotes iree-compile's `error:` lines, and the self-check of every newly compiled module against the numpy
backend (skriptnd.backends.iree_check).

IREE is an optional oracle as in test_backends_compiled.py: skipped without iree-base-compiler / -runtime
locally, a failure in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd.backends import Options
from skriptnd.diagnostics import DiagnosticError


def require(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed; the dev extra installs them")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")


# -- E0782: what iree-compile said ------------------------------------------------------------------


def test_a_compiler_failure_quotes_its_error_line_and_keeps_the_whole_output(tmp_path: Path) -> None:
    """iree-compile's stderr after a failure is mostly an MLIR dump (here --mlir-print-ir-after-failure prints
    the module with a 2000-element constant after the error): E0782 quotes the `error:` line, which the last
    4000 characters did not hold, and names a file in the cache folder with all of it."""
    require("iree.compiler", "iree.runtime")
    from skriptnd.backends.via_iree import IreeModule

    values = ", ".join(f"{v:.6f}" for v in np.random.default_rng(0).standard_normal(2000))
    mlir = f'''func.func @main(%a: tensor<2000xf32>) -> tensor<2000xf32> {{
  %c = "tosa.const"() <{{values = dense<[{values}]> : tensor<2000xf32>}}> : () -> tensor<2000xf32>
  %0 = tosa.add %a, %c : (tensor<2000xf32>, tensor<2000xf32>) -> tensor<2000xf32>
  %1 = "tosa.custom"(%0) <{{domain_name = "x", implementation_attrs = "", operator_name = "foo"}}> : (tensor<2000xf32>) -> tensor<2000xf32>
  return %1 : tensor<2000xf32>
}}'''
    with pytest.raises(DiagnosticError) as err:
        IreeModule(mlir, Options(cache_dir=str(tmp_path), flags=("--mlir-print-ir-after-failure",)))
    (diag,) = err.value.diagnostics
    assert diag.code == "E0782" and "error: failed to legalize operation 'tosa.custom'" in diag.message
    assert len(diag.message) < 4000
    (note,) = diag.notes
    log = Path(note.message.split(": ", 1)[1])
    assert log.parent.parent == tmp_path and log.is_file()
    whole = log.read_text(encoding="utf-8")
    assert len(whole) > 10000 and "failed to legalize operation 'tosa.custom'" in whole and "tosa.add" in whole
    assert whole.find("error:") < len(whole) - 4000  # the line the old 4000-character tail lost
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half entry left


def test_compiler_errors_keeps_error_lines_with_context_and_cuts_long_lines() -> None:
    from skriptnd.backends.iree_compile import ERROR_LINE_WIDTH, compiler_errors

    dump = [f"  %{i} = tosa.add ... " + "x" * 1000 for i in range(300)]
    stderr = "\n".join(["a.mlir:3:5: error: first problem", "a.mlir:3:5: note: see current operation", *dump,
                        "a.mlir:9:1: error: second problem", "tail line"])
    quoted = compiler_errors(stderr).splitlines()
    assert quoted[0] == "a.mlir:3:5: error: first problem" and quoted[1].endswith("see current operation")
    assert "a.mlir:9:1: error: second problem" in quoted and quoted[-1] == "tail line"
    assert "…" in quoted  # the dump between the two errors is left out
    assert all(len(line) <= ERROR_LINE_WIDTH + 2 for line in quoted)
    assert len(quoted) < 16
    # no error line at all: the last lines
    assert compiler_errors("one\ntwo\nthree").splitlines() == ["one", "two", "three"]


# -- the self-check ---------------------------------------------------------------------------------

#: issue 30's reproducer: LayerNorm (math.moments / sub / add / sqrt / div) feeding a [2,10,32] x [32,128]
#: matmul, which IREE 3.13 miscompiles with data tiling on AVX-512 CPUs
LAYERNORM_MATMUL = """import math;
import linalg;

graph LayerNormMatMul {
    @input {
        x: real[2, 10, 32];
    }
    @variable {
        w: real[32, 128];
    }
    @output {
        y: real[2, 10, 128];
    }
    @compose {
        mean, variance = moments: math.moments{axes=[2]}(x);
        centered = math.sub(x, mean);
        stabilized = math.add(variance, 1e-5);
        deviation = root: math.sqrt(stabilized);
        normalized = math.div(centered, deviation);
        y = product: linalg.matmul(normalized, w);
    }
}
"""


@pytest.fixture
def layernorm_matmul(tmp_path: Path) -> Path:
    folder = tmp_path / "lnmm"
    folder.mkdir()
    (folder / "main.sknd").write_text(LAYERNORM_MATMUL, encoding="utf-8")
    return folder


def _compose(folder: Path) -> object:
    import skriptnd

    return skriptnd.load(folder).compose(random_weights=True, seed=1)


def _miscompile(monkeypatch: pytest.MonkeyPatch, operator: str, origin: int, replacement: str) -> None:
    """Make what IREE compiles differ from what numpy runs at one TOSA operator (``operator`` of the graph
    operation number ``origin`` of the program becomes ``replacement``): a deterministic miscompile, for
    every module and every prefix program the bisection compiles."""
    from dataclasses import replace

    from skriptnd.tosa.program import patch_matmul as conv_as_matmul
    from skriptnd.tosa.program.build import Program

    original = conv_as_matmul.convs_as_matmuls

    def wrong(program: Program, inputs: object, limit: int = conv_as_matmul.MAX_POSITIONS) -> Program:
        p = original(program, inputs, limit)
        ops = [replace(o, name=replacement) if (o.name, o.origin) == (operator, origin) else o for o in p.ops]
        return Program(inputs=p.inputs, outputs=p.outputs, ops=ops, constants=p.constants, hints=p.hints)

    monkeypatch.setattr(conv_as_matmul, "convs_as_matmuls", wrong)


def _count_references(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from skriptnd.backends import iree_check

    calls = [0]
    original = iree_check.ProgramCheck.reference

    def counted(self: iree_check.ProgramCheck, arrays: list[np.ndarray]) -> list[np.ndarray]:
        calls[0] += 1
        return original(self, arrays)

    monkeypatch.setattr(iree_check.ProgramCheck, "reference", counted)
    return calls


def test_a_correct_module_passes_its_self_check_once(layernorm_matmul: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The first prepare compiles, compares with numpy on seeded inputs and keeps the verdict with the
    module; a second prepare (a new graph, the same cache) loads the verdict without computing numpy."""
    require("iree.compiler", "iree.runtime")
    from skriptnd import backends
    from skriptnd.backends.iree_check import read_verdict

    calls = _count_references(monkeypatch)
    cache = str(tmp_path / "cache")
    runner = backends.prepare(_compose(layernorm_matmul), "iree", Options(cache_dir=cache))
    assert calls[0] == 1 and "self-check against the numpy backend: passed (1 module(s) checked now" in runner.plan[-1]
    verdict = read_verdict(runner.entry.folder)  # type: ignore[attr-defined]
    assert verdict is not None and verdict.passed and verdict.worst < 0.1 and verdict.kind == "float"
    again = backends.prepare(_compose(layernorm_matmul), "iree", Options(cache_dir=cache))
    assert not again.entry.compiled and calls[0] == 1  # type: ignore[attr-defined]
    assert "passed (1 verdict(s) cached with the module(s)" in again.plan[-1]
    x = np.random.default_rng(5).standard_normal((2, 10, 32)).astype(np.float32)
    graph = _compose(layernorm_matmul)
    np.testing.assert_allclose(skriptnd.run(graph, {"x": x}, backend="iree", cache_dir=cache)["y"],  # type: ignore[attr-defined]
                               skriptnd.run(graph, {"x": x}, backend="numpy")["y"], rtol=1e-4, atol=1e-4)  # type: ignore[attr-defined]
    assert calls[0] == 1


def test_a_miscompiled_module_is_a_located_diagnostic_and_the_verdict_is_cached(
        layernorm_matmul: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module whose numbers differ from numpy's never returns a result: E0785 names the first diverging
    operation (found by bisection over prefix programs) at its source line, with the figures and how to run
    anyway; the failed verdict is kept, so the next prepare refuses at once; verify=False runs it."""
    require("iree.compiler", "iree.runtime")
    from skriptnd import backends
    from skriptnd.backends.iree_check import read_verdict

    # math.sqrt 'root' legalizes to RSQRT then RECIPROCAL (program origin 3): IREE gets EXP for the RECIPROCAL
    _miscompile(monkeypatch, "RECIPROCAL", 3, "EXP")
    calls = _count_references(monkeypatch)
    cache = str(tmp_path / "cache")
    graph = _compose(layernorm_matmul)
    with pytest.raises(DiagnosticError) as err:
        backends.prepare(graph, "iree", Options(cache_dir=cache))
    (diag,) = err.value.diagnostics
    root = next(op for op in graph.operations if op.label == "root")  # type: ignore[attr-defined]
    assert diag.code == "E0785" and diag.span == root.span and diag.span.line == 18
    assert "the first operation that diverges is math.sqrt 'root' (TOSA RECIPROCAL" in diag.message
    assert "max |difference|" in diag.message and "relative" in diag.message
    assert "--no-verify" in (diag.hint or "") and "--iree-opt-data-tiling=false" in (diag.hint or "")
    assert "--via numpy" in (diag.hint or "")
    assert calls[0] == 1
    folders = [p for p in Path(cache).iterdir() if p.is_dir() and len(p.name) == 64]
    failed = [v for v in map(read_verdict, folders) if v is not None and not v.passed]
    assert len(failed) == 1 and failed[0].op >= 0 and failed[0].worst > 1
    # the verdict is cached: refused again without numpy, without compiling
    with pytest.raises(DiagnosticError) as again:
        backends.prepare(_compose(layernorm_matmul), "iree", Options(cache_dir=cache))
    assert calls[0] == 1 and again.value.diagnostics[0].span == root.span
    assert "verdict cached" in " ".join(n.message for n in again.value.diagnostics[0].notes)
    # run anyway: unchecked, and the plan says so
    runner = backends.prepare(_compose(layernorm_matmul), "iree", Options(cache_dir=cache, verify=False))
    assert "self-check: off" in runner.plan[-1]
    x = np.random.default_rng(5).standard_normal((2, 10, 32)).astype(np.float32)
    assert not np.allclose(runner.run({"x": x})["y"], skriptnd.run(graph, {"x": x}, backend="numpy")["y"], atol=1e-2)


def test_a_miscompiled_first_operation_is_located_too(layernorm_matmul: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The bisection's other end: the first TOSA operator of the program (math.moments' REDUCE_SUM)."""
    require("iree.compiler", "iree.runtime")
    from skriptnd import backends

    _miscompile(monkeypatch, "REDUCE_SUM", 0, "REDUCE_MAX")
    graph = _compose(layernorm_matmul)
    with pytest.raises(DiagnosticError) as err:
        backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path / "cache")))
    (diag,) = err.value.diagnostics
    assert diag.code == "E0785" and "math.moments 'moments' (TOSA REDUCE_SUM" in diag.message
    assert diag.span.line == 15


# -- sknd run -v: what runs where and why, and the self-check --------------------------------------


def test_cli_run_verbose_says_why_the_flags_and_what_the_self_check_did(tmp_path: Path) -> None:
    require("iree.compiler", "iree.runtime")
    import subprocess
    import sys

    from skriptnd.backends.iree_defaults import avx512_reason

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "SKRIPTND_CACHE_DIR": ""}

    def sknd(*extra: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "skriptnd", "run", str(root / "models" / "digits"),
                               "--random-inputs", "--via", "iree", *extra], capture_output=True, text=True,
                              cwd=root, env=env, timeout=600)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert proc.returncode == 0, proc.stderr
        return proc

    cold = sknd("-v").stderr
    assert "all 9 operations compiled by IREE" in cold and "module compiled" in cold
    assert ("data tiling on (no AVX-512 in the target)" if avx512_reason("host") is None
            else "data tiling off: this CPU has AVX-512") in cold
    assert "self-check against the numpy backend: passed (1 module(s) checked now on seeded inputs" in cold
    warm = sknd("-v").stderr
    assert "module loaded from the cache" in warm and "passed (1 verdict(s) cached with the module(s)" in warm
    assert "self-check: off" in sknd("-v", "--no-verify").stderr
    assert "self-check" not in sknd().stderr  # without -v: the outputs only
    flagged = sknd("-v", "--iree-flag=--iree-opt-data-tiling=false").stderr
    assert "data tiling as the flags given say (--iree-opt-data-tiling=false)" in flagged
    head = next(line for line in flagged.splitlines() if "compiled by IREE" in line)  # after the status line
    assert "--iree-opt-data-tiling=false" in head and "module compiled" in flagged


def test_the_integer_graph_of_a_quantized_model_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """digits_int8 under iree (its whole integer TOSA graph, skriptnd.tosa.integer.lower): right, it passes; with
    the second ReLU's CLAMP compiled to [-128, 0] it is E0785 at that TOSA CLAMP, located at the graph
    operation whose output it first reaches (pool2)."""
    require("iree.compiler", "iree.runtime")
    from dataclasses import replace

    import skriptnd
    from skriptnd import backends
    from skriptnd.tosa.integer import lower as quantized
    from skriptnd.tosa.integer import mlir as integer_mlir

    models = Path(__file__).resolve().parents[1] / "models"
    runner = backends.prepare(skriptnd.load(models / "digits_int8").compose(), "iree",
                              Options(cache_dir=str(tmp_path / "right")))
    assert "self-check against the numpy backend: passed (1 module(s) checked now" in runner.plan[-1]

    original = integer_mlir.to_mlir
    clamps = [o.output for o in quantized.lower_quantized(skriptnd.load(models / "digits_int8").compose()).ops
              if o.name == "CLAMP"]

    def wrong(ig: quantized.IntegerGraph, outputs: list[str] | None = None) -> str:
        ops = [replace(o, attrs={**o.attrs, "max_val": 0}) if o.output == clamps[1] else o for o in ig.ops]
        return original(replace(ig, ops=ops), outputs)

    monkeypatch.setattr(integer_mlir, "to_mlir", wrong)
    graph = skriptnd.load(models / "digits_int8").compose()
    with pytest.raises(DiagnosticError) as err:
        backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path / "wrong")))
    (diag,) = err.value.diagnostics
    pool2 = next(op for op in graph.operations if any(t.name == "pool2" for t in op.outputs))
    assert diag.code == "E0785" and "(TOSA CLAMP" in diag.message and diag.span == pool2.span


# -- the comparison and the seeded inputs (no IREE needed) ------------------------------------------


def test_compare_tolerances_by_dtype() -> None:
    """Floats: within 1e-3 of the output's largest magnitude; integers: one step; bool: equal; a NaN or an
    infinity on one side only is a mismatch, on both sides is not."""
    from skriptnd.backends.iree_check import compare

    e = np.array([[4.0, -2.0], [0.5, 0.0]], np.float32)  # max |value| 4: tolerance 4e-3
    assert compare([e + np.float32(3.9e-3)], [e]).passed
    bad = compare([e + np.array([[0, 0], [0, 4.5e-3]], np.float32)], [e])
    assert not bad.passed and bad.diff == pytest.approx(4.5e-3, rel=1e-3) and bad.scale == 4.0
    assert bad.worst == pytest.approx(4.5e-3 / 4e-3, rel=1e-3)
    nan = np.array([np.nan, 1.0, np.inf], np.float32)
    assert compare([nan.copy()], [nan]).passed
    assert not compare([np.array([0.0, 1.0, np.inf], np.float32)], [nan]).passed
    assert not compare([np.array([np.nan, 1.0, 1.0], np.float32)], [nan]).passed
    i = np.array([10, -3, 7], np.int8)
    assert compare([i + np.int8(1)], [i]).passed and not compare([i + np.int8(2)], [i]).passed
    b = np.array([True, False])
    assert compare([b.copy()], [b]).passed and not compare([~b], [b]).passed
    # the worst output decides, and it is the one named
    two = compare([e, i + np.int8(3)], [e, i])
    assert not two.passed and two.output == 1 and two.kind == "integer" and two.diff == 3
    assert not compare([e[:1]], [e]).passed  # another shape
    # a quantized output's step is allowed on top
    assert compare([e + np.float32(0.1)], [e], steps=[0.125]).passed


def test_seeded_inputs_are_valid_for_their_dtype_and_reproducible() -> None:
    from types import SimpleNamespace

    from skriptnd.backends.iree_check import seeded_inputs

    tensors = [SimpleNamespace(name="x", dtype="real", shape=(2, 3), bounds=None),
               SimpleNamespace(name="ids", dtype="int", shape=(1, None), bounds=(None, 7)),
               SimpleNamespace(name="mask", dtype="bool", shape=(4, None), bounds=None)]
    first, again = seeded_inputs(tensors), seeded_inputs(tensors)
    assert first["x"].dtype == np.float32 and first["x"].shape == (2, 3)
    assert first["ids"].dtype == np.int64 and first["ids"].shape == (1, 7)
    assert set(np.unique(first["ids"])) <= {0, 1}  # valid ids / indices whatever they index
    assert first["mask"].dtype == np.bool_ and first["mask"].shape == (4, 1)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])


def test_a_check_numpy_cannot_run_is_a_warning_not_a_silent_pass(layernorm_matmul: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    require("iree.compiler", "iree.runtime")
    from skriptnd import backends
    from skriptnd.backends import iree_check

    def fails(self: object, arrays: object) -> None:
        raise ValueError("an ERROR_IF of the reference")

    monkeypatch.setattr(iree_check.ProgramCheck, "reference", fails)
    with pytest.warns(RuntimeWarning, match="could not be compared with the numpy backend.*ERROR_IF"):
        runner = backends.prepare(_compose(layernorm_matmul), "iree", Options(cache_dir=str(tmp_path)))
    assert "self-check against the numpy backend: incomplete (1 module(s) NOT checked" in runner.plan[-1]
    assert not list(tmp_path.glob("*/verdict.json"))  # nothing cached: checked again next time
