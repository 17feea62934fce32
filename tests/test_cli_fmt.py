"""`sknd fmt`: rewrites in place (atomically), keeps comments, refuses files with syntax errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skriptnd.syntax import parse_module

MESSY = """# header comment
import nn;
operator   scale {   # trailing comment
  @attrib { factor : real = 2.0 ; }
  @input { x: real[ n ] ; }
  @output {y:real[n];}
  # before the formula
  @lower { y[i,]=x[i,]*factor,i<n; }
}
"""


def sknd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True)


def test_fmt_check_rewrite_and_idempotence(tmp_path: Path) -> None:
    path = tmp_path / "m.sknd"
    path.write_text(MESSY)
    check = sknd("fmt", "--check", str(path))
    assert check.returncode == 1 and f"would reformat {path}" in check.stderr
    assert path.read_text() == MESSY  # --check never writes
    assert sknd("fmt", str(path)).returncode == 0
    formatted = path.read_text()
    assert formatted != MESSY
    for comment in ("# header comment", "# trailing comment", "# before the formula"):
        assert formatted.count(comment) == 1
    assert parse_module(formatted)[0] == parse_module(MESSY)[0]
    assert sknd("fmt", "--check", str(path)).returncode == 0
    assert sknd("fmt", "--stdout", str(path)).stdout == formatted


def test_fmt_leaves_files_with_syntax_errors_alone(tmp_path: Path) -> None:
    path = tmp_path / "bad.sknd"
    text = "operator f {\n    @attrib { a: int = 1 }\n}\n"
    path.write_text(text)
    res = sknd("fmt", "--color", "never", str(path))
    assert res.returncode == 1
    assert "expected ';' after attribute declaration" in res.stderr
    assert path.read_text() == text
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
