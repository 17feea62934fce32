"""The command table of `sknd` (skriptnd.cli.app.COMMANDS): lazily loaded commands that still list, help and
run as registered ones would, and command modules that stay independent of each other."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from skriptnd.cli.app import COMMANDS, app

ROOT = Path(__file__).resolve().parent.parent
RUNNER = CliRunner()


def test_each_summary_is_the_first_line_of_its_commands_docstring() -> None:
    """`sknd --help` lists the table's summary without importing the module: it must say what the command's
    own help says."""
    for name, entry in COMMANDS.items():
        doc = inspect.getdoc(importlib.import_module(entry.module).command)
        assert doc is not None and doc.splitlines()[0] == entry.summary, name


def test_help_lists_every_command_in_order_without_importing_them() -> None:
    code = ("import sys; from skriptnd.cli.app import main; sys.argv = ['sknd', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in sys.modules if m.startswith('skriptnd.cli.')))\n"
            "print('NUMPY', 'numpy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("│ ") and
              line.split()[1] in COMMANDS]
    assert listed == list(COMMANDS)
    loaded = proc.stdout.split("LOADED", 1)[1].splitlines()[0]
    assert "skriptnd.cli.run" not in loaded and "skriptnd.cli.check" not in loaded
    assert "NUMPY False" in proc.stdout


def test_a_commands_help_comes_from_its_module() -> None:
    result = RUNNER.invoke(app, ["run", "--help"])
    assert result.exit_code == 0
    assert "--input" in result.output and "NAME=FILE" in result.output and "--via" in result.output


def test_an_unknown_command_is_a_usage_error() -> None:
    result = RUNNER.invoke(app, ["rnu", "models/digits"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_command_modules_import_no_other_command_module() -> None:
    commands = {entry.module for entry in COMMANDS.values()}
    for module in commands:
        path = ROOT / (module.replace(".", "/") + ".py")
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        assert not (imported & (commands - {module})), module
