"""Module loading and resolution (spec §2.15) and the module-level checks (§2.10, §2.14)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from skriptnd.check import program as checking
from skriptnd.check.program import check_paths, check_program
from skriptnd.diagnostics import Diagnostic, Severity
from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.module_checks import check_modules, invocation_sites
from skriptnd.semantics.modules import Program, load_program

ROOT = Path(__file__).resolve().parent.parent
STDLIB_NAMES = json.loads((ROOT / "tests" / "data" / "stdlib_operator_names.json").read_text(encoding="utf-8"))

GRAPH = """
graph G {
    @input { x: real[4]; }
    @output { y: real[4]; }
    @compose { y = nn.relu(x); }
}
"""

SCALE = """
operator scale {
    @dtype { T: num; }
    @attrib { factor: real = 1.0; }
    @input { x: T[n]; }
    @output { y: T[n]; }
    @lower { y[i,] = x[i,] * T(factor), i < n; }
}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
    return root


def located(diags: list[Diagnostic], root: Path) -> list[tuple[str, int, int, str, str]]:
    """(file relative to root, line, col, code, message), in source order."""
    out = []
    for d in diags:
        file = Path(d.span.file)
        rel = file.relative_to(root).as_posix() if file.is_relative_to(root) else d.span.file
        out.append((rel, d.span.line, d.span.col, d.code, d.message))
    return sorted(out)


def diagnose(root: Path) -> list[tuple[str, int, int, str, str]]:
    return located(check_program(load_program(root)), root)


# ---------------------------------------------------------------------------- loading


def test_model_folder_is_searched_before_the_stdlib(tmp_path: Path) -> None:
    write(tmp_path, {
        "main.sknd": "import nn;\nimport layout;\nimport mine;\n" + GRAPH,
        "nn.sknd": "operator relu {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
                   "    @compose { y = x; }\n}\n",
        "mine.sknd": SCALE,
    })
    program = load_program(tmp_path)
    assert program.main is not None and program.main.name == "main"
    nn, layout, mine = program.modules["nn"], program.modules["layout"], program.modules["mine"]
    assert nn.path == tmp_path / "nn.sknd" and not nn.is_stdlib
    assert mine.path == tmp_path / "mine.sknd" and not mine.is_stdlib
    assert layout.path == stdlib_dir() / "layout.sknd" and layout.is_stdlib
    # The model's nn replaces the standard one entirely: the stdlib's math is never loaded.
    assert "math" not in program.modules
    resolved = program.resolve_operator("nn.relu", program.main)
    assert resolved is not None and resolved[0] is nn
    warnings = [d for d in program.diagnostics if d.code == "E0214"]
    assert [(d.severity, d.span.line, d.span.col) for d in warnings] == [(Severity.WARNING, 1, 8)]
    assert warnings[0].message == "module 'nn' of the model folder shadows the standard module 'nn'"


def test_nested_modules_and_qualified_names(tmp_path: Path) -> None:
    write(tmp_path, {
        "main.sknd": "import ops.custom;\nimport ops.sub.deep;\n"
                     "graph G {\n    @input { x: real[4]; }\n    @output { y: real[4]; }\n"
                     "    @compose {\n        z = ops.custom.twice(x);\n        y = ops.sub.deep.scale(z);\n    }\n}\n",
        "ops/custom.sknd": "import ops.sub.deep;\n" + SCALE
        + "operator twice {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
          "    @compose {\n        z = scale{factor=2.0}(x);\n        y = ops.custom.scale(z);\n"
          "        w = ops.sub.deep.scale(z);\n    }\n}\n",
        "ops/sub/deep.sknd": SCALE,
    })
    program = load_program(tmp_path)
    assert program.diagnostics == []
    assert set(program.modules) == {"main", "ops.custom", "ops.sub.deep"}
    custom, deep = program.modules["ops.custom"], program.modules["ops.sub.deep"]
    assert deep.path == tmp_path / "ops" / "sub" / "deep.sknd"
    main = program.main
    assert main is not None
    assert program.resolve_operator("ops.sub.deep.scale", main) == (deep, deep.definitions["scale"])
    # unqualified names stay in their module; a module may qualify its own names
    assert program.resolve_operator("scale", custom) == (custom, custom.definitions["scale"])
    assert program.resolve_operator("ops.custom.scale", custom) == (custom, custom.definitions["scale"])
    assert program.resolve_operator("scale", main) is None
    assert program.resolve_operator("custom.scale", main) is None
    assert program.resolve_operator("ops.custom.nope", main) is None
    assert set(program.visible_operator_names(main)) == {
        "G", "ops.custom.scale", "ops.custom.twice", "ops.sub.deep.scale"}
    assert set(program.visible_operator_names(custom)) == {"scale", "twice", "ops.sub.deep.scale"}
    assert check_modules(program) == []
    assert [g.name for g in program.graphs()] == ["G"]


def test_qualified_names_need_an_import(tmp_path: Path) -> None:
    write(tmp_path, {"main.sknd": "import nn;\n" + GRAPH})
    program = load_program(tmp_path)
    main, nn = program.main, program.modules["nn"]
    assert main is not None
    assert program.resolve_operator("math.add", main) is None  # main does not import math
    math, add = program.resolve_operator("math.add", nn)  # nn does
    assert math.name == "math" and add.name == "add"
    # the stdlib's math invokes math.abs inside math itself
    assert program.resolve_operator("math.abs", math) == (math, math.definitions["abs"])


def test_stdlib_loads_cleanly_and_every_operator_resolves(tmp_path: Path) -> None:
    imports = "".join(f"import {m};\n" for m in STDLIB_MODULES)
    write(tmp_path, {"main.sknd": imports + GRAPH})
    program = load_program(tmp_path)
    assert program.diagnostics == []
    assert set(program.modules) == {"main", *STDLIB_MODULES}
    assert all(program.modules[m].is_stdlib for m in STDLIB_MODULES)
    main = program.main
    assert main is not None
    assert set(STDLIB_NAMES) == set(STDLIB_MODULES)
    for module, names in STDLIB_NAMES.items():
        for name in names:
            found = program.resolve_operator(f"{module}.{name}", main)
            assert found is not None, f"{module}.{name} does not resolve"
            assert found[0].name == module and found[1].name == name and found[1].kind == "operator"
    # every invocation inside the stdlib resolves, and the module checks find nothing
    for module in program.modules.values():
        assert module.ast is not None
        for definition in module.ast.definitions:
            for call in invocation_sites(module, definition):
                assert program.resolve_operator(call.callee, module, call.span) is not None, call.callee
    assert check_modules(program, list(program.modules.values())) == []
    assert check_program(program) == []


def test_stdlib_is_parsed_once_per_process(tmp_path: Path) -> None:
    write(tmp_path, {"main.sknd": "import nn;\n" + GRAPH})
    first, second = load_program(tmp_path), load_program(tmp_path)
    assert first.modules["nn"] is not second.modules["nn"]
    assert first.modules["nn"].ast is second.modules["nn"].ast
    assert first.main is not None and second.main is not None
    assert first.main.ast is not second.main.ast  # model modules are read afresh


def test_import_cycles_are_allowed(tmp_path: Path) -> None:
    write(tmp_path, {
        "main.sknd": "import a;\ngraph G {\n    @input { x: real[4]; }\n    @output { y: real[4]; }\n"
                     "    @compose { y = a.f(x); }\n}\n",
        "a.sknd": "import b;\noperator f {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
                  "    @compose { y = b.g(x); }\n}\n",
        "b.sknd": "import a;\noperator g {\n    @input { x: real[n]; }\n    @output { y: real[n]; }\n"
                  "    @compose { y = x; }\n}\n",
    })
    assert diagnose(tmp_path) == []


def test_single_file_is_the_main_module(tmp_path: Path) -> None:
    write(tmp_path, {"model.sknd": "import nn;\n" + GRAPH, "lib.sknd": SCALE})
    program = load_program(tmp_path / "model.sknd")
    assert program.main is not None and program.main.name == "model"
    assert [g.name for g in program.graphs()] == ["G"]
    assert check_program(program) == []
    # a single operator file needs no graph; a file named main.sknd does
    assert check_program(load_program(tmp_path / "lib.sknd")) == []
    write(tmp_path, {"main.sknd": SCALE})
    assert located(check_program(load_program(tmp_path / "main.sknd")), tmp_path) == [
        ("main.sknd", 1, 1, "E0206", "the main module defines no graph")]


def test_modules_with_syntax_errors_do_not_cascade(tmp_path: Path) -> None:
    write(tmp_path, {
        "main.sknd": "import broken;\ngraph G {\n    @input { x: real[4]; }\n    @output { y: real[4]; }\n"
                     "    @compose { y = broken.f(x); }\n}\n",
        "broken.sknd": "operator f {\n    @attrib { a: int = 1 }\n}\n",
    })
    assert diagnose(tmp_path) == [
        ("broken.sknd", 2, 25, "E0102", "expected ';' after attribute declaration")]


# ---------------------------------------------------------------------------- golden diagnostics


MAIN = """
import nn;
import ops.custom;
import nnn;
import layout;

graph G {
    @dtype {
        T: num = real;
    }
    @input {
        x: real[4];
    }
    @output {
        y: real[4];
    }
    @variable {
        w: real[4];
    }
    @compose {
        a = nn.rlu(x);
        b = math.add(x, x);
        c = nn.relu{alfa=0.1}(a);
        d = nn.relu(b, c);
        e = ops.custom.scale<real, int>(d);
        f = abs(e);
        g = (abs(e));
        h = T(g);
        k = lbl: ops.custom.scal(h);
        y = if true then ops.custom.scale(h) else { z = nn.sigmod(h); yield z; };
    }
    @quantize {
        w: ops.custom.pair;
        q: ops.custom.scale;
        lbl.w: ops.custom.scale{factr=2.0};
    }
}

operator G {
    @input { x: real[4]; }
    @output { y: real[4]; }
    @compose { y = sum(x) + nn.relu(x); }
}
"""

CUSTOM = SCALE + """
operator pair {
    @input { a: real[n]; b: real[n]; }
    @output { y: real[n]; }
    @compose { y = scale(a); }
}

graph Sub {
    @input { x: real[4]; }
    @output { y: real[4]; }
    @compose { y = foo.scale(x); }
}
"""

LAYOUT = """
operator flatten {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @compose { y = x; }
}
"""

GOLDEN = [
    ("main.sknd", 3, 8, "E0203", "unknown module 'nnn'"),
    ("main.sknd", 4, 8, "E0214", "module 'layout' of the model folder shadows the standard module 'layout'"),
    ("main.sknd", 20, 13, "E0204", "unknown operator 'nn.rlu'"),
    ("main.sknd", 21, 13, "E0203", "module 'math' is not imported"),
    ("main.sknd", 22, 21, "E0209", "operator 'nn.relu' has no attribute 'alfa'"),
    ("main.sknd", 23, 24, "E0212", "too many arguments for operator 'nn.relu': it takes 1 input, 2 given"),
    ("main.sknd", 24, 13, "E0212",
     "too many type arguments for operator 'ops.custom.scale': it declares 1 generic type, 2 given"),
    ("main.sknd", 25, 13, "E0204", "unknown operator 'abs'"),
    ("main.sknd", 28, 18, "E0204", "unknown operator 'ops.custom.scal'"),
    ("main.sknd", 29, 57, "E0204", "unknown operator 'nn.sigmod'"),
    ("main.sknd", 32, 12, "E0212",
     "quantization operator 'ops.custom.pair' must have exactly one input and one output; it has 2 inputs and 1 output"),
    ("main.sknd", 33, 9, "E0201", "unknown tensor 'q' in @quantize"),
    ("main.sknd", 34, 33, "E0209", "operator 'ops.custom.scale' has no attribute 'factr'"),
    ("main.sknd", 38, 10, "E0211", "duplicate definition of 'G'"),
    # calls inside an expression are not invocations; the type checker rejects tensor arithmetic
    ("main.sknd", 41, 20, "E0302",
     "'+' cannot be applied to the tensor 'sum(x)' in @compose; invoke an operator instead (e.g. math.add for '+')"),
    ("main.sknd", 41, 29, "E0302",
     "'+' cannot be applied to the tensor 'nn.relu(x)' in @compose; invoke an operator instead (e.g. math.add for '+')"),
    ("ops/custom.sknd", 15, 7, "E0205", "graph 'Sub' in module 'ops.custom', which is not the main module"),
    ("ops/custom.sknd", 18, 20, "E0203", "unknown module 'foo' in 'foo.scale'"),
]

HINTS = {
    (3, "E0203"): "did you mean 'nn'?",
    (4, "E0214"): "rename it, or move it into a subfolder (e.g. ops/layout.sknd, imported as 'import ops.layout;')",
    (20, "E0204"): "did you mean 'nn.relu'?",
    (21, "E0203"): "add 'import math;' at the top of the module",
    (22, "E0209"): "did you mean 'alpha'?",
    (23, "E0212"): "'nn.relu' takes (x)",
    (24, "E0212"): "its generic types are <T>",
    (25, "E0204"): "wrap the expression in parentheses to call the built-in function, as in '(abs(...))'; "
                   "without them it invokes an operator named 'abs'",
    (28, "E0204"): "did you mean 'ops.custom.scale'?",
    (29, "E0204"): "did you mean 'nn.sigmoid'?",
    (34, "E0209"): "did you mean 'factor'?",
}


@pytest.fixture
def broken_model(tmp_path: Path) -> Path:
    return write(tmp_path, {"main.sknd": MAIN, "ops/custom.sknd": CUSTOM, "layout.sknd": LAYOUT})


def test_golden_diagnostics(broken_model: Path) -> None:
    diags = check_program(load_program(broken_model))
    assert located(diags, broken_model) == GOLDEN
    main_diags = {(d.span.line, d.code): d for d in diags if d.span.file.endswith("main.sknd")}
    for key, hint in HINTS.items():
        assert main_diags[key].hint == hint, key
    dup = main_diags[(38, "E0211")]
    assert [(n.message, n.span.line, n.span.col) for n in dup.notes] == [("'G' is first defined here", 6, 7)]
    assert main_diags[(4, "E0214")].severity is Severity.WARNING
    assert sum(d.severity is Severity.ERROR for d in diags) == len(GOLDEN) - 1
    # spans cover exactly the offending name
    callee = main_diags[(20, "E0204")].span
    assert (callee.line, callee.col, callee.end_line, callee.end_col) == (20, 13, 20, 19)


def test_main_without_graph(tmp_path: Path) -> None:
    write(tmp_path, {"main.sknd": "import nn;\n" + SCALE})
    assert diagnose(tmp_path) == [("main.sknd", 1, 1, "E0206", "the main module defines no graph")]


def test_invocation_positions(tmp_path: Path) -> None:
    """Loops, conditions, nested blocks and labels are invocation positions; expressions are not."""
    write(tmp_path, {"main.sknd": """
import math;

graph G {
    @input { x: real[4]..(k); c: bool[]; }
    @output { y: real[4]; z: real[4]; }
    @compose {
        s = with acc: real[4] = 0.0 for item : x do mth.add(acc, item);
        t = with v = s while mth.lt(v, s) do { u = math.add(v, s); yield u; };
        r = if cnd(c) then { q = lbl: nope(s); yield q; } else s;
        y = with v = r do..(3) math.add(v, v) while lt(v, r);
        z = math.add(real(k) * sqrt(2.0) + sin(1.0), (frac(2.5)));
    }
}
"""})
    assert [(line, col, code, msg) for _, line, col, code, msg in diagnose(tmp_path)] == [
        (7, 53, "E0203", "unknown module 'mth' in 'mth.add'"),
        (8, 30, "E0203", "unknown module 'mth' in 'mth.lt'"),
        (9, 16, "E0204", "unknown operator 'cnd'"),
        (9, 39, "E0204", "unknown operator 'nope'"),
        (10, 53, "E0204", "unknown operator 'lt'"),
    ]
    program = load_program(tmp_path)
    assert program.main is not None and program.main.ast is not None
    graph = program.main.ast.definitions[0]
    assert [c.callee for c in invocation_sites(program.main, graph)] == [
        "mth.add", "mth.lt", "math.add", "cnd", "nope", "math.add", "lt", "math.add"]


def test_quantize_accepts_declared_assigned_and_labelled_tensors(tmp_path: Path) -> None:
    write(tmp_path, {"main.sknd": """
import quant;
import nn;

graph G {
    @input { x: real[4]; }
    @output { y: real[4]; }
    @variable { w: real[4]; }
    @compose {
        a = nn.relu(x);
        y = act: nn.relu(a);
    }
    @quantize {
        x: quant.zero_point_linear_quantize{zero_point=[0], scale=[1.0], bits=8};
        w: quant.min_max_linear_quantize{min=[0.0], max=[1.0], bits=8};
        a.y: quant.min_max_linear_quantize{min=[0.0], max=[1.0], bits=8};
        act.y: quant.min_max_linear_quantize{min=[0.0], max=[1.0], bits=8};
        y: quant.nope;
        y: nn.relu<real>;
    }
}
"""})
    assert diagnose(tmp_path) == [
        ("main.sknd", 17, 12, "E0204", "unknown operator 'quant.nope'"),
        ("main.sknd", 18, 12, "E0212",
         "too many type arguments for operator 'nn.relu': it declares 0 generic types, 1 given"),
    ]


# ---------------------------------------------------------------------------- sknd check


def test_check_hooks_run_on_checked_definitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []

    def hook(program: Program, module, definition) -> list[Diagnostic]:
        seen.append((module.name, definition.name))
        return []

    monkeypatch.setattr(checking, "DEFINITION_CHECKS", [hook])
    write(tmp_path, {"main.sknd": "import nn;\nimport lib;\n" + GRAPH, "lib.sknd": SCALE})
    assert check_program(load_program(tmp_path)) == []
    assert sorted(seen) == [("lib", "scale"), ("main", "G")]  # not the stdlib modules
    seen.clear()
    check_paths([str(stdlib_dir() / "linalg.sknd")])
    assert sorted(seen) == [("linalg", n) for n in sorted(STDLIB_NAMES["linalg"])]


def test_check_paths_reports_every_module_once(broken_model: Path) -> None:
    result = check_paths([str(broken_model), str(broken_model / "main.sknd")])
    assert located(result.diagnostics, broken_model) == GOLDEN
    assert result.files == 3
    assert {Path(p).name for p in result.sources} >= {"main.sknd", "custom.sknd", "layout.sknd", "nn.sknd"}


@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_each_stdlib_file_checks_clean(module: str) -> None:
    result = check_paths([str(stdlib_dir() / f"{module}.sknd")])
    assert result.diagnostics == [] and result.files == 1


def test_sknd_check_cli(tmp_path: Path) -> None:
    def sknd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "skriptnd", "check", "--color", "never", *args],
                              cwd=ROOT, capture_output=True, text=True)

    ok = sknd("models/alexnet")
    assert (ok.returncode, ok.stderr) == (0, "no problems found in 1 file\n")
    std = sknd(*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "stdlib").glob("*.sknd")))
    assert (std.returncode, std.stderr) == (0, "no problems found in 7 files\n")
    write(tmp_path / "warn", {"main.sknd": "import nn;\nimport math;\n" + GRAPH, "math.sknd": SCALE})
    warn = sknd(str(tmp_path / "warn"))
    assert warn.returncode == 0 and "warning[E0214]" in warn.stderr and "1 warning in 2 files" in warn.stderr
    write(tmp_path / "bad", {"main.sknd": "import nn;\n" + GRAPH.replace("nn.relu", "nn.rlu")})
    bad = sknd(str(tmp_path / "bad"))
    assert bad.returncode == 1
    assert f"{tmp_path / 'bad' / 'main.sknd'}:6:20: error[E0204]: unknown operator 'nn.rlu'" in bad.stderr
    assert "= hint: did you mean 'nn.relu'?" in bad.stderr
