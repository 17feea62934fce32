"""Pictures of a composed graph (skriptnd.render, `sknd compose --format svg|html`): what the boxes say and how
they are coloured, checked against the legalization's and the target tables' own answers and by hand; the
files are well-formed and load nothing; the CLI picks the format from the suffix and never writes DOT text
into a picture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import skriptnd
from skriptnd.render import by_backend, by_target, to_html, to_svg
from skriptnd.targets.table import to_json
from skriptnd.tosa.legalize import coverage

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"

#: one operation of each kind the numpy backend runs: TOSA (relu, top_k), a native kernel (nonmax_suppress:
#: data-dependent output), @lower (the model's own operator), control flow (a loop with a dynamic count)
MIXED = """import nn;
import algo;
import math;

operator twice {
    @input { x: real[n]; }
    @output { y: real[n]; }
    @lower { y[i,] = x[i,] * 2.0, i < n; }
}

graph Mixed {
    @input { x: real[8]; boxes: real[1, 4, 4]; scores: real[1, 1, 4]; p: int; }
    @output { values: real[3]; doubled: real[8]; selected: int[~|4, 3]; y: real[8]; }
    @compose {
        r = nn.relu(x);
        values, indices = algo.top_k{k=3, axis=0}(r);
        doubled = twice(r);
        selected = algo.nonmax_suppress(boxes, scores);
        y = with s = r do..(p) math.add(s, r);
    }
}
"""
#: what each top-level operation is, by hand (reading MIXED and `sknd compose --tosa`'s words above)
EXPECTED = {"nn.relu": "tosa", "algo.top_k": "tosa", "main.twice": "lower", "algo.nonmax_suppress": "kernel",
            "loop": "control"}


def mixed_model(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "main.sknd").write_text(MIXED, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> skriptnd.Graph:
    return skriptnd.load(mixed_model(tmp_path_factory.mktemp("mixed") / "m")).compose()


def _nodes(svg_text: str) -> list[ET.Element]:
    root = ET.fromstring(svg_text)
    return [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]


def _op_nodes(svg_text: str) -> dict[str, str]:
    """operator -> category of each operation box (the first text line is the operator)."""
    found = {}
    for g in _nodes(svg_text):
        classes = g.get("class", "").split()
        if "op" in classes:
            first = next(g.iter(f"{SVG}tspan")).text or ""
            found[first.split("<")[0]] = next(c[4:] for c in classes if c.startswith("cat-"))
    return found


def test_backend_colours_agree_with_the_hand_expectation_and_the_legalization(mixed: skriptnd.Graph) -> None:
    colouring = by_backend(mixed)
    assert {op.op: colouring.of(op) for op in mixed.operations} == EXPECTED
    # the same answer as the legalization's coverage (sknd compose --tosa) for every operation, bodies included
    for op, ok, _ in coverage(mixed):
        assert (colouring.of(op) == "tosa") == (ok and not op.subgraphs)
    svg = to_svg(mixed, colouring)
    assert _op_nodes(svg) == EXPECTED  # each operation drawn once, in its colour


def test_svg_boxes_say_operator_label_shapes_and_weights(tmp_path: Path) -> None:
    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    svg = to_svg(graph, by_backend(graph))
    boxes = {tuple(t.text for t in g.iter(f"{SVG}tspan")) for g in _nodes(svg)}
    # models/digits: conv1 = nn.conv(image, conv1_filter, conv1_bias) with 8 filters 3x3 on 1x8x8
    assert ("nn.conv", "conv1", "-> real[1, 8, 8, 8]", "conv1_filter: real[8, 1, 3, 3]", "conv1_bias: real[8]") in boxes
    assert ("image", "real[1, 1, 8, 8]") in boxes  # the graph input
    ops = [g for g in _nodes(svg) if "op" in g.get("class", "").split()]
    assert len(ops) == len(graph.operations)
    # every box's fill is its category's (the legend's) colour; edges end in the arrow marker
    root = ET.fromstring(svg)
    assert len(root.findall(f".//{SVG}path[@marker-end='url(#arrow)']")) == len(graph.operations) + 1


def test_target_colours_follow_the_target_table(mixed: skriptnd.Graph) -> None:
    for target in ("nnapi", "mli", "tosa"):
        table = json.loads(to_json(mixed, target))
        want = {row["operation"]: "supported" if row["supported"] else "unsupported" for row in table["operations"]
                if row["operation"] in EXPECTED}
        colouring = by_target(mixed, target)
        assert {op.op: colouring.of(op) for op in mixed.operations} == want
        assert _op_nodes(to_svg(mixed, colouring)) == want
    assert by_target(mixed, "nnapi").of(mixed.operations[2]) == "unsupported"  # main.twice: no target has it


def test_html_is_self_contained_and_has_the_bodies(mixed: skriptnd.Graph) -> None:
    page = to_html(mixed)
    assert page.startswith("<!DOCTYPE html>")
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "@import" not in page and "url(" not in page.replace("url(#arrow)", "")
    # the loop's body: a collapsible section drawing its one math.add, and the loop's box opens it
    bodies = dict(re.findall(r'<details id="(body\d+)"><summary>(.*?)</summary>', page))
    loop_body = next(k for k, title in bodies.items() if title.startswith("loop"))
    section = page[page.index(f'<details id="{loop_body}">'):]
    section = section[:section.index("</details>")]
    assert "math.add" in section and "body: 1 operations" in section
    assert re.search(rf'class="node op cat-control"[^>]*data-body="{loop_body}"', page)
    # the search box and the zoom buttons are there, with the script that drives them inline
    for element in ('id="search"', 'id="zoom-in"', 'id="zoom-fit"', "<script>"):
        assert element in page


def test_a_composite_gets_its_compose_as_a_body() -> None:
    # nn.softmax is composite in the standard library: the page draws its @compose, the stable formula
    # exp(x - max(x)) / sum(exp(x - max(x))), in that order
    graph = skriptnd.load(ROOT / "models" / "digits").compose()
    page = to_html(graph)
    title = re.search(r'<details id="(body\d+)"><summary>nn\.softmax \(its @compose\)', page)
    assert title, "nn.softmax's body"
    section = page[title.start():page.index("</details>", title.start())]
    ops = [op.split("&lt;")[0] for op in re.findall(r'class="node op [^"]*".*?font-weight="bold">([^<]*)', section, re.S)]
    assert ops == ["math.max_reduce", "math.sub", "math.exp", "math.sum_reduce", "math.div"]
    assert re.search(rf'data-body="{title.group(1)}"', page[:page.index("<section")])  # the softmax box opens it


def _sknd(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_cli_picks_the_picture_from_the_suffix(tmp_path: Path) -> None:
    model = str(mixed_model(tmp_path / "m"))
    svg = _sknd("compose", model, "-o", str(tmp_path / "g.svg"))
    assert svg.returncode == 0, svg.stderr
    assert _op_nodes((tmp_path / "g.svg").read_text()) == EXPECTED
    assert "wrote" in svg.stderr and "5 operations" in svg.stderr
    html = _sknd("compose", model, "-o", str(tmp_path / "g.html"), "--target", "nnapi")
    assert html.returncode == 0, html.stderr
    assert "Android NNAPI" in (tmp_path / "g.html").read_text() and "cat-unsupported" in (tmp_path / "g.html").read_text()
    # --format wins over the suffix; no -o: the picture on stdout
    out = _sknd("compose", model, "--format", "svg")
    assert out.returncode == 0 and out.stdout.startswith("<svg ")
    dot = _sknd("compose", model, "-o", str(tmp_path / "g.dot"))
    assert dot.returncode == 0 and (tmp_path / "g.dot").read_text().startswith('digraph "Mixed"')


def test_without_graphviz_no_dot_text_lands_in_a_picture(tmp_path: Path) -> None:
    model = str(mixed_model(tmp_path / "m"))
    # no graphviz `dot` to be found; wide enough that the error box never splits a long tmp_path (under
    # pytest-xdist it holds popen-gwN/) inside "g.svg"
    bare = {"PATH": str(tmp_path / "nothing"), "COLUMNS": "400"}
    png = _sknd("compose", model, "-o", str(tmp_path / "g.png"), env=bare)
    assert png.returncode == 2 and "graphviz" in png.stderr and "g.svg" in png.stderr
    assert not (tmp_path / "g.png").exists() and not (tmp_path / "g.dot").exists()
    svg = _sknd("compose", model, "--format", "dot", "-o", str(tmp_path / "g.svg"), env=bare)
    assert svg.returncode == 0 and (tmp_path / "g.svg").read_text().startswith("<svg ")
    assert "graphviz is not installed" in svg.stderr
    target = _sknd("compose", model, "--target", "nnapi", "--format", "dot")
    assert target.returncode == 2


def test_equal_composites_share_one_body_named_by_its_parameters() -> None:
    """ResNet-18's 20 batch norms have 5 input shapes (64 x 112², 64 x 56², 128 x 28², 256 x 14², 512 x 7²; the
    downsampling ones share their stage's), so 5 bodies are drawn; a body's inputs carry the operator's
    parameter names, and its labels drop the first instance's label path (it stands for all of them)."""
    graph = skriptnd.load(ROOT / "models" / "resnet18").compose()
    assert sum(op.op == "nn.batch_norm" for op in graph.operations) == 20
    page = to_html(graph)
    summaries = re.findall(r"<summary>(nn\.batch_norm \(its @compose\)) — <small>([^<]*)</small>", page)
    assert len(summaries) == 5
    assert {re.search(r"\(real\[([^\]]*)\]", key).group(1) for _, key in summaries} == {
        "1, 64, 112, 112", "1, 64, 56, 56", "1, 128, 28, 28", "1, 256, 14, 14", "1, 512, 7, 7"}
    first = page.index("<summary>nn.batch_norm")
    section = page[first:page.index("</details>", first)]
    texts = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", section)
    assert [t for t in texts[:10:2]] == ["input", "mean", "variance", "bias", "scale"]  # nn.batch_norm's @input
    assert "centered" in texts and not any("conv1.bn" in t for t in texts)
    # every batch norm box opens one of the five
    ids = set(re.findall(r'<details id="(body\d+)"><summary>nn\.batch_norm', page))
    main = page[:page.index("<section")]
    opened = re.findall(r'data-text="nn\.batch_norm[^"]*" data-body="(body\d+)"', main)
    assert len(opened) == 20 and set(opened) == ids


def test_two_loops_alike_keep_their_own_bodies(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text("""import math;
graph G {
    @input { x: real[4]; p: int; }
    @output { y: real[4]; z: real[4]; }
    @compose {
        y = with s = x do..(p) math.add(s, x);
        z = with s = x do..(p) math.mul(s, x);
    }
}
""", encoding="utf-8")
    page = to_html(skriptnd.load(tmp_path).compose())
    bodies = re.findall(r'<details id="body\d+"><summary>loop.*?</details>', page, re.S)
    assert len(bodies) == 2
    assert sorted("math.add" in b for b in bodies) == [False, True]
    assert sorted("math.mul" in b for b in bodies) == [False, True]


def test_model_text_cannot_inject_markup(tmp_path: Path) -> None:
    """Untrusted models: a string attribute is shown (in the tooltip) as text, never as markup or script."""
    evil = "</title><script>alert(1)</script><title>"
    (tmp_path / "main.sknd").write_text("""operator tag {
    @attrib { note: str; }
    @input { x: real[n]; }
    @output { y: real[n]; }
    @lower { y[i,] = x[i,], i < n; }
}

graph G {
    @input { x: real[2]; }
    @output { y: real[2]; }
    @compose { y = tag{note="EVIL"}(x); }
}
""".replace("EVIL", evil), encoding="utf-8")
    graph = skriptnd.load(tmp_path).compose()
    assert graph.operations[0].attribs["note"] == evil
    page, svg = to_html(graph), to_svg(graph, by_backend(graph))
    for text in (page, svg):
        assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert page.count("<script>") == 1  # the page's own
    ET.fromstring(svg)  # still well-formed


def test_every_body_link_opens_a_drawn_body(tmp_path: Path) -> None:
    """A box marked ▸ body names a <details> that exists, and every drawn body is opened by some box, also
    for a body inside a body (a loop whose body holds a composite, nn.softmax)."""
    (tmp_path / "main.sknd").write_text("""import nn;
graph G {
    @input { x: real[1, 4]; p: int; }
    @output { y: real[1, 4]; }
    @compose { y = with s = x do..(p) nn.softmax(s); }
}
""", encoding="utf-8")
    page = to_html(skriptnd.load(tmp_path).compose())
    drawn = set(re.findall(r'<details id="(body\d+)">', page))
    linked = re.findall(r'data-body="(body\d+)"', page)
    assert set(linked) == drawn and len(drawn) == 2  # the loop's body, and in it softmax's @compose
    softmax = re.search(r'<details id="(body\d+)"><summary>nn\.softmax', page)
    loop = page[page.index("<summary>loop"):page.index("</details>", page.index("<summary>loop"))]
    assert softmax and f'data-body="{softmax.group(1)}"' in loop  # opened from inside the loop's body
