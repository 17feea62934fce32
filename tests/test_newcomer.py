"""A newcomer's path: the README's commands are CI's, `sknd --version` and `--help` read well, every
shipped .sknd is in house style, and `sknd run` shows a class table only for class probabilities."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import typer
from typer import _click as click  # typer vendors click (0.29+)
from typer.testing import CliRunner

from skriptnd.cli.app import COMMANDS as TABLE
from skriptnd.cli.app import app
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: every command of `sknd` (the app's table: a new command is covered without editing this file)
COMMANDS = tuple(TABLE)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "120"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


# ---------------------------------------------------------------- README and CI


def readme_commands() -> tuple[str, str]:
    setup = re.search(r"```sh\n# 1\..*?\n(.*?)\n# 2\..*?\n(.*?)\n```", README, re.S)
    assert setup, "README: the set-up block with commands 1 and 2"
    return setup.group(1).strip(), setup.group(2).strip()


def test_ci_runs_exactly_the_readme_commands() -> None:
    install_and_demo, tests = readme_commands()
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    # .ci/run: set -e, export CI, cd, then command 1 without its demo run, then command 2
    assert ci[-1] == tests
    assert install_and_demo.startswith(ci[-2] + " && "), (ci[-2], install_and_demo)
    assert "tosa-tools" in ci[-2] and "-e '.[dev]'" in ci[-2]  # everything the tests need
    assert install_and_demo.split(" && ")[-1].startswith(".venv/bin/sknd run models/digits")


def test_ci_installs_the_browser_the_browser_test_needs_and_the_readme_says_so() -> None:
    """tests/test_render_browser.py needs Chromium: .ci/run installs it when missing (unattended), and the
    set-up section names it with the command that installs it."""
    assert (ROOT / "tests" / "test_render_browser.py").is_file()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "command -v chromium" in ci and "DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium" in ci
    assert ci.index("chromium") < ci.index("python3 -m venv")  # before the tests run
    assert "`apt-get install chromium`" in _setup_section() and "test_render_browser.py" in _setup_section()


def test_readme_needs_nothing_beside_the_clone() -> None:
    assert "../shared" not in README and "shared/spec" not in README
    for link in re.findall(r"\]\(((?:docs|models)/[^)#]+)\)", README):
        assert (ROOT / link).exists(), link


def _setup_section() -> str:
    return README[README.index("## Set-up"):README.index("## Usage")]


def test_readme_names_exactly_the_variables_the_tests_read() -> None:
    """The skip section's SKRIPTND_* variables are those tests/ reads from the environment (a renamed or
    new variable changes both), and what .ci/run does differently (CI=1) is said."""
    read = set()
    for path in (ROOT / "tests").glob("*.py"):
        read |= set(re.findall(r"os\.environ(?:\.get\(|\[)[\"'](SKRIPTND_\w+)", path.read_text(encoding="utf-8")))
    assert {"SKRIPTND_SPEC", "SKRIPTND_SHARED"} <= read  # the reader finds them
    assert set(re.findall(r"SKRIPTND_\w+", _setup_section())) == read
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'export CI="${CI:-1}"' in ci and "`CI=1`" in _setup_section()


def test_readme_says_how_to_install_each_user_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = re.findall(r"^pip install -e (?:'\.\[(\w+)\]'|\.) ", _setup_section(), re.M)
    assert named[0] == "" and set(named[1:]) == set(extras) - {"zoo"}, named  # zoo: benchmarks only


# ---------------------------------------------------------------- --version and --help


def test_version_matches_the_package_metadata() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    code, output = invoke("--version")
    assert code == 0 and output.strip() == f"skriptnd {version}"
    proc = subprocess.run([sys.executable, "-m", "skriptnd", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == f"skriptnd {version}"


@pytest.mark.parametrize("command", ("", *COMMANDS))
def test_help_has_an_example_and_no_python_types(command: str) -> None:
    code, output = invoke(*([command] if command else []), "--help")
    assert code == 0
    assert re.search(r"Example: .*sknd", output), output
    noise = re.findall(r"<(?:bool|str|int|float|path|list\[\w+\])>", output)
    assert not noise, noise


@pytest.mark.parametrize(("command", "option", "placeholder"), [
    ("run", "--via", "BACKEND"), ("bench", "--via", "BACKEND,..."), ("run", "--target", "CPU"),
    ("bench", "--target", "CPU"), ("compose", "--target", "nnapi|mli|tosa"), ("import", "--output", "DIR"),
    ("compose", "--output", "FILE"), ("run", "--threads", "N"), ("export", "--onnx-opset", "17..21")])
def test_help_placeholder_says_what_the_option_takes_in_that_command(command: str, option: str,
                                                                     placeholder: str) -> None:
    """One option name, different meanings: `--via` takes a list in bench, `--target` a CPU in run and
    bench but a target operation set in compose."""
    code, output = invoke(command, "--help")
    assert code == 0
    line = next(x for x in output.splitlines() if re.match(rf"│\s+(\*\s+)?{re.escape(option)} ", x))  # its row
    assert f" {placeholder} " in line, line


def _command(name: str) -> click.Command:
    group = typer.main.get_command(app)
    with click.Context(group) as ctx:
        found = group.get_command(ctx, name)
    assert found is not None, name
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_and_argument_has_help(command: str) -> None:
    """`run --decompose-all`, `--rtol` and `--atol` had none (issue 29)."""
    bare = [p.name for p in _command(command).params if not getattr(p, "help", None)]
    assert not bare, bare


def test_export_help_and_docs_give_the_onnx_codes_that_exist() -> None:
    """The range E0840-E08xx that `export --help`, the docs and the README name is the registered one."""
    import skriptnd.interop.onnx_export  # noqa: F401  (registers its codes)
    from skriptnd.diagnostics import CODES

    codes = sorted(c for c in CODES if c.startswith("E084"))
    assert codes == [f"E08{n}" for n in range(40, 40 + len(codes))]  # contiguous from E0840
    span = f"{codes[0]}-{codes[-1]}"
    code, output = invoke("export", "--help")
    assert code == 0 and span in output and re.findall(r"E084\d-E084\d", output) == [span]
    for doc in ("README.md", "docs/api.md", "docs/onnx-export.md"):
        named = re.findall(r"E084\d-E084\d", (ROOT / doc).read_text(encoding="utf-8"))
        assert named and set(named) == {span}, (doc, named)


def _examples(command: str) -> list[list[str]]:
    """The commands in a help's example line (`sknd X ...`, then any `(or: sknd ...)` / `(then: sknd ...)`),
    as argument lists; an argument naming a file of the checkout (models/digits) becomes its absolute path,
    anything else (an output) stays relative to the folder the example runs in."""
    doc = app.info.help if not command else importlib.import_module(TABLE[command].module).command.__doc__
    (line,) = [x for x in doc.splitlines() if "Example:" in x]
    runs = [found.split() for found in re.findall(r"\bsknd((?: [^\s()]+)+)", line)]
    assert runs and (not command or runs[0][0] == command), (command, line)

    def shipped(arg: str) -> str:
        name, sep, value = arg.rpartition("=") if "=" in arg and not arg.startswith("-") else ("", "", arg)
        return f"{name}{sep}{ROOT / value}" if value and (ROOT / value).exists() else arg
    return [[shipped(a) for a in r] for r in runs]


@pytest.mark.parametrize("command", ("", *COMMANDS))
def test_every_help_example_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example, run as written from a fresh folder (outputs land there), exits 0 and says nothing
    is wrong; the shipped files it names are the checkout's."""
    if command == "bench" and not os.environ.get("CI"):  # its example compares with onnxruntime (the onnx extra)
        pytest.importorskip("onnxruntime")
    monkeypatch.chdir(tmp_path)
    env = {"NO_COLOR": "1", "COLUMNS": "120", "SKRIPTND_CACHE_DIR": str(tmp_path / "cache")}
    for args in _examples(command):
        if args == ["lsp"]:  # a server on stdin: it must start and end cleanly at end of input
            proc = subprocess.run([sys.executable, "-m", "skriptnd", "lsp"], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=120, env={**os.environ, **env},
                                  cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            continue
        result = CliRunner().invoke(app, args, env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code == 0, (args, result.output)
        assert not re.search(r"error(\[|:)", result.output), (args, result.output)  # no diagnostic, no error line
        for written in re.findall(r"^wrote (\S+)", result.output, re.M):  # what it says it wrote is there
            assert (tmp_path / written).exists(), written


def test_help_placeholders_do_not_hide_usage_errors() -> None:
    code, output = invoke("run", "models/digits", "--seed", "many")
    assert code == 2 and "'--seed'" in output


# ---------------------------------------------------------------- house style


def shipped_sources() -> list[Path]:
    """Every .sknd meant to be well-formed: the stdlib, the models and the docs. Not tests/data:
    spec_blocks are the spec's verbatim text (fragments, the spec's own layout) and
    syntax_errors are malformed on purpose."""
    found = [p for d in ("stdlib", "models", "docs") for p in sorted((ROOT / d).rglob("*.sknd"))]
    assert len(found) >= 17
    return found


def test_every_shipped_source_is_in_house_style() -> None:
    unformatted = []
    for path in shipped_sources():
        text = path.read_text(encoding="utf-8")
        tree, diags = parse_module(text, str(path))
        assert tree is not None and not diags, path
        if format_module(tree) != text:
            unformatted.append(str(path.relative_to(ROOT)))
    assert not unformatted, f"run `sknd fmt` on {unformatted} (the stdlib: tests/tools/build_stdlib.py)"


def test_fmt_check_accepts_the_shipped_sources() -> None:
    code, output = invoke("fmt", "--check", *map(str, shipped_sources()))
    assert code == 0, output


# ---------------------------------------------------------------- the class table of `sknd run`


GRAPH = """import nn;

graph Scores {
    @input {
        x: real[2, 5];
    }
    @output {
        p: real[2, 5];
        r: real[2, 5];
    }
    @compose {
        p = nn.softmax(x);
        r = nn.relu(x);
    }
}
"""


def test_class_table_only_for_softmax_outputs_or_top_k(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(GRAPH)
    x = np.array([[0.0, 3.0, 1.0, 2.0, -1.0], [5.0, 0.0, 0.5, 1.0, 4.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    code, output = invoke("run", str(tmp_path), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out"))
    assert code == 0, output
    assert f"wrote 2 outputs to {tmp_path / 'out'}" in output.replace("\n", "")  # -o says what it wrote
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["p.npy", "r.npy"]
    assert "p[0]: class 1" in output and "p[1]: class 0" in output  # argmax by hand
    assert "r[0]" not in output and "r[1]" not in output  # relu: statistics only
    assert re.search(r"│ r\s+│ float32 │ \[2, 5\] │ 0\s+│ 5\s+│", output)  # min 0, max 5
    code, output = invoke("run", str(tmp_path), "--input", f"x={tmp_path / 'x.npy'}", "--top-k", "2")
    assert code == 0
    table = output[output.index("r[1]"):]
    rows = re.findall(r"│\s+(\d)\s+│\s+([\d.]+)\s+│", table)
    assert rows[:2] == [("0", "5.0000"), ("4", "4.0000")]  # the two largest of r[1], in order

