"""The wheel ships the grammar and the standard library, and `sknd` works from outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True)
    (found,) = out.glob("skriptnd-*.whl")
    return found


def test_wheel_contains_grammar_and_stdlib(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "skriptnd/_data/grammar/skriptnd.lark" in names
    for module in ("layout", "math", "linalg", "nn", "image", "quant", "algo"):
        assert f"skriptnd/_data/stdlib/{module}.sknd" in names
    assert "skriptnd/semantics/opnotes.toml" in names  # `sknd doc`'s attribute meanings and notes
    assert not any(n.startswith("tests/") for n in names)


def test_installed_wheel_checks_files_outside_the_tree(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, text=True)
    # Dependencies come from the test environment (no network): a plain path entry, so the
    # editable install of the checkout (a .pth hook there) stays inactive.
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    good = work / "ok.sknd"
    good.write_text((ROOT / "stdlib" / "linalg.sknd").read_text())
    bad = work / "bad.sknd"
    bad.write_text("operator f {\n    @attrib { a: int = 1 }\n}\n")
    where = subprocess.run([str(python), "-c", "import skriptnd.resources as r; print(r.grammar_path())"],
                           cwd=work, check=True, capture_output=True, text=True, env=CLEAN_ENV).stdout
    assert str(site) in where and "_data" in where
    sknd = env_dir / "bin" / "sknd"
    ok = subprocess.run([str(sknd), "check", "--color", "never", str(good)], cwd=work, capture_output=True, text=True,
                        env=CLEAN_ENV)
    assert ok.returncode == 0, ok.stderr
    res = subprocess.run([str(sknd), "check", "--color", "never", str(bad)], cwd=work, capture_output=True,
                         text=True, env=CLEAN_ENV)
    assert res.returncode == 1
    assert f"{bad}:2:25: error[E0102]: expected ';' after attribute declaration" in res.stderr
    assert "Traceback" not in res.stderr
    doc = subprocess.run([str(sknd), "doc", "nn.conv"], cwd=work, capture_output=True, text=True, env=CLEAN_ENV)
    assert doc.returncode == 0, doc.stderr
    assert "For PyTorch / ONNX users:" in doc.stdout and "h_before, w_before, h_after, w_after" in doc.stdout
