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
    from skriptnd.backends.via_iree import ERROR_LINE_WIDTH, compiler_errors

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
