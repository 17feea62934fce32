"""`sknd check PATH...` and `sknd fmt PATH...` take folders as ruff and black do (issue 29, item 5).

A folder is walked for .sknd files; a folder holding main.sknd is a model root whose imports resolve from
it; exclude patterns come from the defaults, `[tool.skriptnd] exclude` in the nearest pyproject.toml and
`--exclude`, and never apply to a path named on the command line; a walk does not follow a link out of the
folder it walks and stops after MAX_ENTRIES entries. The last tests run the three commands of the issue on
this repository's own folders.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from skriptnd.check import paths
from skriptnd.check.paths import Excludes, collect
from skriptnd.check.settings import find_settings
from skriptnd.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
RUNNER = CliRunner()

# Modules in the canonical layout (`sknd fmt --check` leaves them alone).
BLOCKS = """import math;

operator {name} {{
    @input {{
        x: real[n];
    }}
    @output {{
        y: real[n];
    }}
    @compose {{
        y = math.{op}(x, x);
    }}
}}
"""
MAIN = """import ops.blocks;

graph G {{
    @input {{
        x: real[4];
    }}
    @output {{
        y: real[4];
    }}
    @compose {{
        y = ops.blocks.{name}(x);
    }}
}}
"""
#: a module with an error only a check finds (an unknown operator), in the canonical layout
UNKNOWN_OP = BLOCKS.format(name="f", op="nope")
#: a module that does not parse
BROKEN = "operator broken {\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def check(*args: str) -> tuple[int, list[dict]]:
    """`sknd check --format json ARGS`: the exit code and the diagnostics."""
    result = RUNNER.invoke(app, ["check", "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def places(diags: list[dict]) -> set[tuple[str, str]]:
    """(code, file name relative to the current folder) of each diagnostic."""
    return {(d["code"], os.path.relpath(d["file"])) for d in diags}


def two_models(folder: Path) -> None:
    """models/a and models/b, each importing its own ops.blocks (defining different operators)."""
    write(folder / "models" / "a" / "main.sknd", MAIN.format(name="twice"))
    write(folder / "models" / "a" / "ops" / "blocks.sknd", BLOCKS.format(name="twice", op="add"))
    write(folder / "models" / "b" / "main.sknd", MAIN.format(name="square"))
    write(folder / "models" / "b" / "ops" / "blocks.sknd", BLOCKS.format(name="square", op="mul"))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh project folder as the current folder (no pyproject.toml above it has [tool.skriptnd])."""
    monkeypatch.chdir(tmp_path)
    assert find_settings().source is None
    return tmp_path


# ---------------------------------------------------------------- walking and model roots


def test_folders_are_walked_recursively(here: Path) -> None:
    write(here / "a" / "b" / "c" / "deep.sknd", UNKNOWN_OP)
    write(here / "a" / "top.sknd", BLOCKS.format(name="g", op="add"))
    code, diags = check("a")
    assert code == 1 and places(diags) == {("E0204", "a/b/c/deep.sknd")}
    assert sorted(str(f) for f in collect(["a"]).files()) == ["a/b/c/deep.sknd", "a/top.sknd"]
    messy = write(here / "a" / "b" / "messy.sknd", "import math;\noperator  h { @input { x: real[n]; } "
                  "@output { y: real[n]; } @compose { y = math.add(x, x); } }\n")
    fmt = RUNNER.invoke(app, ["fmt", "--check", "a"])
    assert fmt.exit_code == 1 and f"would reformat {Path('a/b/messy.sknd')}" in fmt.output
    assert "top.sknd" not in fmt.output and "deep.sknd" not in fmt.output
    assert RUNNER.invoke(app, ["fmt", "a"]).exit_code == 0
    assert RUNNER.invoke(app, ["fmt", "--check", "a"]).exit_code == 0 and "operator h {" in messy.read_text()


def test_each_model_root_resolves_its_own_imports(here: Path) -> None:
    """`import ops.blocks` in models/a/main.sknd is models/a/ops/blocks.sknd, not models/ops/blocks.sknd
    (the false E0203 of `sknd check models` before), and b's is b's: each defines a different operator."""
    two_models(here)
    assert check("models") == (0, [])
    assert check(".") == (0, [])
    assert check() == (0, [])
    found = collect(["models"])
    assert {str(root): [str(f) for f in files] for root, files in found.models.items()} == {
        "models/a": ["models/a/main.sknd", "models/a/ops/blocks.sknd"],
        "models/b": ["models/b/main.sknd", "models/b/ops/blocks.sknd"]}
    assert found.modules == []
    assert RUNNER.invoke(app, ["fmt", "--check", "models"]).exit_code == 0
    # swap b's operator: only b's main fails, and the unknown name is looked up in b's own ops.blocks
    write(here / "models" / "b" / "ops" / "blocks.sknd", BLOCKS.format(name="other", op="mul"))
    code, diags = check("models")
    assert code == 1 and places(diags) == {("E0204", "models/b/main.sknd")}


def test_a_module_the_main_module_does_not_import_is_checked_too(here: Path) -> None:
    two_models(here)
    write(here / "models" / "a" / "ops" / "unused.sknd", UNKNOWN_OP)
    code, diags = check("models")
    assert code == 1 and places(diags) == {("E0204", "models/a/ops/unused.sknd")}


def test_a_path_inside_a_model_is_checked_as_part_of_it(here: Path) -> None:
    """A folder or file below a model root: imports resolve from the root above (as the language server does)."""
    two_models(here)
    write(here / "models" / "a" / "ops" / "more.sknd", "import ops.blocks;\n")
    assert check("models/a/ops") == (0, [])
    assert check("models/a/ops/more.sknd") == (0, [])
    alone = write(here / "alone" / "more.sknd", "import ops.blocks;\n")  # no model root: its own folder
    code, diags = check(str(alone))
    assert code == 1 and places(diags) == {("E0203", "alone/more.sknd")}


def test_a_nested_model_root_owns_its_files(here: Path) -> None:
    two_models(here)
    write(here / "models" / "a" / "sub" / "main.sknd", MAIN.format(name="half"))
    write(here / "models" / "a" / "sub" / "ops" / "blocks.sknd", BLOCKS.format(name="half", op="sub"))
    assert check("models") == (0, [])
    assert set(map(str, collect(["models"]).models)) == {"models/a", "models/a/sub", "models/b"}


def test_loose_modules_are_named_after_their_file(here: Path) -> None:
    """A module outside any model root is checked alone: `math.x` inside a file math.sknd names itself
    (stdlib/math.sknd does this; walked from the repository root it was `stdlib.math` before, three E0203)."""
    write(here / "lib" / "math.sknd", "operator twice {\n    @input {\n        x: real[n];\n    }\n"
          "    @output {\n        y: real[n];\n    }\n    @compose {\n        y = math.twice2(x);\n    }\n}\n\n"
          "operator twice2 {\n    @input {\n        x: real[n];\n    }\n    @output {\n        y: real[n];\n    }\n"
          "    @compose {\n        y = x;\n    }\n}\n")
    assert check(".") == (0, [])


def test_a_folder_without_modules_says_what_was_left_out(here: Path) -> None:
    """Nothing to check is an error; nothing left once exclude patterns applied is a warning (as ruff's)."""
    (here / "empty").mkdir()
    result = RUNNER.invoke(app, ["check", "--color", "never", "empty"])
    assert result.exit_code == 1 and "error[E0003]: 'empty' holds no .sknd file to check" in result.output
    write(here / "empty" / "build" / "x.sknd", BROKEN)
    result = RUNNER.invoke(app, ["check", "--color", "never", "empty"])
    assert result.exit_code == 0
    assert "warning[E0003]: 'empty' holds no .sknd file to check (1 left out by exclude patterns)" in result.output


# ---------------------------------------------------------------- exclusion


def test_default_excludes(here: Path) -> None:
    for name in (".hidden", ".venv", "__pycache__", "build", "dist", "node_modules"):
        write(here / "src" / name / "bad.sknd", BROKEN)
    write(here / "src" / ".bad.sknd", BROKEN)
    write(here / "src" / "good.sknd", BLOCKS.format(name="g", op="add"))
    assert check("src") == (0, [])
    code, diags = check("src/build")  # named: never excluded
    assert code == 1 and places(diags) == {("E0103", "src/build/bad.sknd")}


def test_exclude_from_pyproject(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(here / "fixtures" / "bad.sknd", BROKEN)
    write(here / "src" / "gen" / "x.generated.sknd", BROKEN)
    write(here / "src" / "good.sknd", BLOCKS.format(name="g", op="add"))
    code, diags = check()
    assert code == 1 and {f for _, f in places(diags)} == {"fixtures/bad.sknd", "src/gen/x.generated.sknd"}
    write(here / "pyproject.toml", '[project]\nname = "x"\n\n[tool.skriptnd]\nexclude = ["fixtures", "*.generated.sknd"]\n')
    assert check() == (0, [])
    assert RUNNER.invoke(app, ["fmt", "--check"]).exit_code == 0
    # found from a folder below, a pattern with '/' relative to the pyproject.toml's folder
    write(here / "pyproject.toml", '[tool.skriptnd]\nexclude = ["src/gen", "fixtures/*.sknd"]\n')
    monkeypatch.chdir(here / "src")
    assert check() == (0, [])
    assert check("..") == (0, [])  # walked as ../fixtures: still the pyproject's fixtures
    monkeypatch.chdir(here)
    assert check() == (0, [])
    # a pyproject.toml without the table is passed over, as ruff passes over one without [tool.ruff]
    write(here / "src" / "pyproject.toml", '[project]\nname = "inner"\n')
    monkeypatch.chdir(here / "src")
    assert find_settings().source is not None and find_settings().exclude == ("src/gen", "fixtures/*.sknd")


def test_exclude_option(here: Path) -> None:
    write(here / "fixtures" / "bad.sknd", BROKEN)
    write(here / "a" / "fixtures" / "bad.sknd", BROKEN)
    write(here / "src" / "good.sknd", BLOCKS.format(name="g", op="add"))
    code, diags = check("--exclude", "a/fixtures")  # a path: only that one
    assert code == 1 and places(diags) == {("E0103", "fixtures/bad.sknd")}
    assert check("--exclude", "fixtures") == (0, [])  # a name: every folder so named
    assert check("--exclude", "./fixtures/", "--exclude", "a") == (0, [])  # repeatable
    assert RUNNER.invoke(app, ["fmt", "--check", "--exclude", "fixtures"]).exit_code == 0
    assert RUNNER.invoke(app, ["fmt", "--check"]).exit_code == 1


def test_an_explicitly_named_excluded_path_is_still_checked(here: Path) -> None:
    write(here / "pyproject.toml", '[tool.skriptnd]\nexclude = ["fixtures"]\n')
    write(here / "good.sknd", BLOCKS.format(name="g", op="add"))
    bad = write(here / "fixtures" / "bad.sknd", BROKEN)
    write(here / "fixtures" / "sub" / "worse.sknd", UNKNOWN_OP)
    assert check() == (0, [])
    code, diags = check("fixtures")
    assert code == 1 and places(diags) == {("E0103", "fixtures/bad.sknd"), ("E0204", "fixtures/sub/worse.sknd")}
    code, diags = check("fixtures/bad.sknd", "--exclude", "bad.sknd")
    assert code == 1 and places(diags) == {("E0103", "fixtures/bad.sknd")}
    result = RUNNER.invoke(app, ["fmt", "--check", str(bad)])
    assert result.exit_code == 1 and "E0103" in result.output


def test_settings_that_are_wrong_are_located_diagnostics(here: Path) -> None:
    write(here / "good.sknd", BLOCKS.format(name="g", op="add"))
    write(here / "pyproject.toml", '[project]\nname = "x"\n\n[tool.skriptnd]\nexclude = "fixtures"\n')
    result = RUNNER.invoke(app, ["check", "--color", "never"])
    assert result.exit_code == 1
    assert "pyproject.toml:5:1: error[E0007]: 'exclude' must be a list of strings" in result.output
    write(here / "pyproject.toml", '[tool.skriptnd]\nexlude = ["fixtures"]\n')
    result = RUNNER.invoke(app, ["check", "--color", "never"])
    assert result.exit_code == 0  # a warning
    assert "pyproject.toml:2:1: warning[E0007]: unknown setting 'exlude'" in result.output
    assert "did you mean 'exclude'?" in result.output
    write(here / "pyproject.toml", '[tool.skriptnd]\nexclude = ["fixtures"\n')
    result = RUNNER.invoke(app, ["fmt", "--check", "--color", "never"])
    assert result.exit_code == 1 and "pyproject.toml:3:1: error[E0007]: pyproject.toml is not valid TOML" in result.output
    write(here / "pyproject.toml", '[project\nname = "someone else\'s broken file"\n')
    assert check() == (0, [])


# ---------------------------------------------------------------- untrusted folders


def test_a_link_out_of_the_walked_folder_is_not_followed(here: Path) -> None:
    write(here / "outside" / "bad.sknd", BROKEN)
    write(here / "outside" / "one.sknd", BROKEN)
    model = here / "downloaded"
    write(model / "good.sknd", BLOCKS.format(name="g", op="add"))
    (model / "linked").symlink_to(here / "outside", target_is_directory=True)
    (model / "linked.sknd").symlink_to(here / "outside" / "one.sknd")
    (model / "loop").symlink_to(model, target_is_directory=True)  # back inside: walked once, no endless walk
    (model / "inner.sknd").symlink_to(model / "good.sknd")  # a link inside: the same file, taken once
    code, diags = check("downloaded")
    assert code == 0
    assert {(d["code"], d["severity"], d["file"]) for d in diags} == {
        ("E0005", "warning", "downloaded/linked"), ("E0005", "warning", "downloaded/linked.sknd")}
    assert [str(f) for f in collect(["downloaded"]).files()] == ["downloaded/good.sknd"]
    fmt = RUNNER.invoke(app, ["fmt", "--check", "--color", "never", "downloaded"])
    assert fmt.exit_code == 0 and "warning[E0005]: 'downloaded/linked' is a link leading outside" in fmt.output
    assert check("downloaded/linked")[0] == 1  # named on the command line: the user's own choice


def test_a_model_whose_main_module_is_a_link_outside_is_no_model(here: Path) -> None:
    write(here / "outside" / "main.sknd", MAIN.format(name="twice"))
    write(here / "m" / "ops" / "blocks.sknd", BLOCKS.format(name="twice", op="add"))
    (here / "m" / "main.sknd").symlink_to(here / "outside" / "main.sknd")
    found = collect(["m"])
    assert found.models == {} and [str(f) for f in found.files()] == ["m/ops/blocks.sknd"]
    assert [d.code for d in found.diagnostics] == ["E0005"]


def test_a_walk_is_bounded(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        write(here / "many" / f"d{i:02}" / "x.sknd", BLOCKS.format(name="g", op="add"))
    assert len(collect(["many"]).files()) == 30
    monkeypatch.setattr(paths, "MAX_ENTRIES", 20)
    found = collect(["many"])
    assert [d.code for d in found.diagnostics] == ["E0006"] and len(found.files()) < 30
    result = RUNNER.invoke(app, ["check", "--color", "never", "many"])
    assert result.exit_code == 1 and "error[E0006]: stopped looking for .sknd files after 20 folder entries" in result.output


def test_excludes_match_names_and_paths() -> None:
    base = Path("/p")
    excludes = Excludes().extended(["tests/data", "*.gen.sknd"], base)
    assert excludes.matches(Path("/p/tests/data")) and not excludes.matches(Path("/p/x/tests/data"))
    assert excludes.matches(Path("/q/a.gen.sknd")) and excludes.matches(Path("/p/.git"))
    assert not excludes.matches(Path("/p/tests")) and not excludes.matches(Path("/p/stdlib/nn.sknd"))


SEGMENTS = st.sampled_from(["a", "b", "ops", "build", ".hidden", "dist"])
LEAVES = st.sampled_from(["main.sknd", "x.sknd", "y.sknd", "notes.txt"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.lists(st.tuples(st.lists(SEGMENTS, max_size=3), LEAVES), min_size=1, max_size=12))
def test_every_file_is_found_once_with_its_nearest_model_root(tmp_path_factory, tree) -> None:
    """Against a plain reading of the rule: every .sknd file with no default-excluded folder on its way is
    found, once, in the model of the nearest folder above it (the named one included) holding main.sknd,
    else as a module of its own folder."""
    top = tmp_path_factory.mktemp("tree")
    for folders, leaf in tree:
        write(top.joinpath(*folders, leaf), "")
    expected: dict[Path, Path | None] = {}
    for folders, leaf in tree:
        if leaf.endswith(".sknd") and not any(f.startswith(".") or f in ("build", "dist") for f in folders):
            ancestors = [top.joinpath(*folders[:i]) for i in range(len(folders), -1, -1)]
            expected[top.joinpath(*folders, leaf)] = next((a for a in ancestors if (a / "main.sknd").exists()), None)
    found = collect([str(top)])
    got: dict[Path, Path | None] = {}
    for root, files in found.models.items():
        assert files[0] == root / "main.sknd"
        got.update((f, root) for f in files)
    for f, folder in found.modules:
        assert folder == f.parent
        got[f] = None
    assert len(found.files()) == len(got) and got == expected
    assert [d.code for d in found.diagnostics] == ([] if expected else ["E0003"])  # nothing found: said so


# ---------------------------------------------------------------- this repository


def test_the_repository_root_checks_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sknd check` at the root: tests/data's deliberately broken fixtures left out by pyproject.toml, the
    standard library and every model checked (0 diagnostics; 279 errors before)."""
    monkeypatch.chdir(ROOT)
    result = RUNNER.invoke(app, ["check", "--format", "json", "--verbose"])
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])
    checked = {str(f) for f in collect(["."], Excludes().extended(find_settings().exclude, ROOT)).files()}
    assert {f"stdlib/{m}.sknd" for m in ("nn", "math", "layout")} <= checked
    assert "models/resnet18/ops/blocks.sknd" in checked and not any(f.startswith("tests/") for f in checked)


def test_the_models_folder_checks_and_formats_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = RUNNER.invoke(app, ["check", "--format", "json", "models"])
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])
    result = RUNNER.invoke(app, ["fmt", "--check", "stdlib", "models"])
    assert result.exit_code == 0 and "would reformat" not in result.output, result.output
