"""Messages that say what to do (issue 29, item 8): each diagnostic a newcomer meets carries the fix, with
their own text, at a real location (file:line:col of the construct, never `<unknown>:1:1` or a folder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GRAPH = """import nn;

graph G {{
    @input {{
        x: real[1, 8];
    }}
    @output {{
        y: real[1, 8];
    }}
    @compose {{
        {body}
    }}
}}
"""


def sknd(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def check_json(path: Path) -> list[dict]:
    proc = sknd("check", "--format", "json", str(path))
    assert proc.returncode == 1, proc.stderr
    return json.loads(proc.stdout)


def model(tmp_path: Path, body: str) -> Path:
    (tmp_path / "main.sknd").write_text(GRAPH.format(body=body), encoding="utf-8")
    return tmp_path / "main.sknd"


def test_a_nested_invocation_is_split_with_the_users_own_text(tmp_path: Path) -> None:
    [d] = check_json(model(tmp_path, "y = nn.relu(nn.sigmoid(x));"))
    assert d["code"] == "E0503" and "operator invocations are not compile-time expressions" in d["message"]
    assert (d["range"]["start"]["line"] + 1, d["range"]["start"]["character"] + 1) == (11, 21)
    assert d["hint"] == "assign nn.sigmoid(x) to a name first: t = nn.sigmoid(x); y = nn.relu(t);"


def test_the_suggested_name_is_free_and_the_statement_kept_whole(tmp_path: Path) -> None:
    """`t` is taken (a tensor of the graph): the hint uses `t1`; the attributes and other inputs stay."""
    [d] = check_json(model(tmp_path, "t = x;\n        y = nn.relu{alpha=0.5}(nn.sigmoid{}( t ));"))
    assert (d["range"]["start"]["line"] + 1, d["range"]["start"]["character"] + 1) == (12, 32)
    assert d["hint"] == ("assign nn.sigmoid{}( t ) to a name first: t1 = nn.sigmoid{}( t ); "
                         "y = nn.relu{alpha=0.5}(t1);")


def test_a_nested_invocation_in_an_attribute_gets_no_split_hint(tmp_path: Path) -> None:
    """An attribute cannot take a tensor, so splitting it out would not help: the attribute's own message."""
    [d] = check_json(model(tmp_path, "y = nn.relu{alpha=nn.sigmoid(x)}(x);"))
    assert "assign" not in (d["hint"] or "")


TINYQ = """import nn;
import quant;

graph TinyQ {
    @input {
        x: real[1, 4];
    }
    @output {
        p: real[1, 3];
    }
    @variable {
        w: real[3, 4];
        b: real[3];
    }
    @compose {
        p = nn.linear(x, w, b);
    }
    @quantize {
        x: quant.zero_point_linear_quantize{zero_point=0, bits=8, scale=0.05};
    }
}
"""


def test_a_quantized_graph_without_an_integer_graph_names_the_backend_that_runs_it(tmp_path: Path) -> None:
    """E0761 (only the input quantized): iree refuses it with a hint naming --via numpy and kernels, which run it;
    the default backend runs it with fake quantization itself, saying where the integer graph failed."""
    (tmp_path / "main.sknd").write_text(TINYQ, encoding="utf-8")
    hint = "run it with --via numpy (the default: integer TOSA for the operations that lower, fake quantization"
    proc = sknd("run", str(tmp_path), "--random-inputs", "--random-weights", "--via", "iree", "--color", "never")
    assert proc.returncode == 1, proc.stderr
    assert "main.sknd:16:13: error[E0781]: " in proc.stderr and "the filter of 'nn.linear'" in proc.stderr
    assert "= hint: add 'w: quant.zero_point_linear_quantize{" in proc.stderr  # what would make it lower
    assert f"; or {hint}" in proc.stderr
    default = sknd("run", str(tmp_path), "--random-inputs", "--random-weights", "--color", "never")
    assert default.returncode == 0, default.stderr
    assert "fake quantization" in default.stderr and "E0761 at " in default.stderr
    assert "main.sknd:16:13: the filter of 'nn.linear'" in default.stderr
    ok = sknd("run", str(tmp_path), "--random-inputs", "--random-weights", "--via", "kernels")
    assert ok.returncode == 0, ok.stderr


def test_a_backend_that_is_not_installed_is_located_at_the_graph(monkeypatch) -> None:
    """E0780 at `graph Digits` in main.sknd (it was `<unknown>:1:1`), as E0786 for a missing device."""
    import skriptnd
    from skriptnd import backends
    from skriptnd.diagnostics import DiagnosticError

    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    monkeypatch.setattr(backends.get("onnxruntime"), "requires", ("no_such_package_for_sknd",))
    try:
        backends.prepare(graph, "onnxruntime")
    except DiagnosticError as err:
        (d,) = err.diagnostics
    else:
        raise AssertionError("a backend without its package was prepared")
    assert d.code == "E0780" and "no_such_package_for_sknd" in d.message
    assert (Path(d.span.file).name, d.span.line, d.span.col) == ("main.sknd", 6, 7)
    assert d.hint is not None and "choose another backend" in d.hint


def test_doc_of_an_unqualified_operator_suggests_its_module() -> None:
    """`sknd doc relu`: a usage error (exit 2) naming nn.relu; a name in several modules names each; a typo the
    closest operators; and the suggestion does work."""
    proc = sknd("doc", "relu")
    assert proc.returncode == 2 and proc.stderr.strip().endswith("; did you mean nn.relu?"), proc.stderr
    from skriptnd.semantics.docgen import STDLIB_MODULES, load_module

    abs_in = [m for m in STDLIB_MODULES if any(d.name == "abs" for d in load_module(m).definitions)]
    assert abs_in  # an independent count of the modules defining `abs`
    proc = sknd("doc", "abs")
    assert proc.stderr.strip().endswith(f"did you mean {' or '.join(f'{m}.abs' for m in abs_in)}?"), proc.stderr
    assert "did you mean nn.relu" in sknd("doc", "reluu").stderr
    assert "did you mean" not in sknd("doc", "zzzzq").stderr
    ok = sknd("doc", "nn.relu")
    assert ok.returncode == 0 and "relu" in ok.stdout
