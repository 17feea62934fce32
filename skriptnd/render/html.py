"""A self-contained HTML page of a composed graph: the drawing, a legend, a search box, zoom and pan, and
each operator body (control-flow subgraphs, a composite's @compose) drawn once, collapsible.

Everything is inline (CSS, script, SVG): the page loads nothing, so it opens offline, from a mail or an
artefact store, and has no URL but the SVG namespace. Clicking a box marked ``▸ body`` opens its body;
``page.html#search=nn.conv`` opens the page with that search made.
"""

from __future__ import annotations

from html import escape

from skriptnd.compose.ir import Graph
from skriptnd.render.colours import STYLES, Colouring, by_backend
from skriptnd.render.scene import FONT_SIZE, Body, build
from skriptnd.render.svg import FONT, XMLNS, counts, defs, drawing, place

#: bodies are drawn this deep (a body's bodies' bodies); each distinct body once, so a page stays a page
MAX_DEPTH = 3
PAD = 12.0

CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 14px system-ui, sans-serif; color: #222; background: #fafafa; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid #ddd;
         padding: 8px 14px; display: flex; flex-wrap: wrap; gap: 6px 22px; align-items: center; }
header h1 { font-size: 16px; margin: 0; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 0; padding: 0; list-style: none; }
.legend span.swatch { display: inline-block; width: 20px; height: 11px; border-radius: 3px;
                      border: 1.5px solid; vertical-align: -1px; margin-right: 5px; }
.tools { display: flex; gap: 6px; align-items: center; }
.tools input { width: 16em; padding: 3px 6px; }
.tools button { min-width: 2.2em; }
#view > svg { display: block; margin: 0 auto; }
#view { overflow: auto; height: calc(100vh - 120px); min-height: 300px; background: #fff; cursor: grab; }
#view.dragging { cursor: grabbing; }
.body-view { overflow: auto; max-height: 80vh; background: #fff; border: 1px solid #ddd; }
svg text { pointer-events: none; }
.node[data-body] { cursor: pointer; }
.searching .node:not(.hit) { opacity: 0.3; }
.node.hit rect { stroke: #d40000; stroke-width: 4px; }
section { padding: 8px 14px 40px; }
details { margin: 6px 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 4px 8px; }
details > summary { cursor: pointer; font-family: monospace; }
details h3 { font-size: 13px; margin: 8px 0 4px; font-family: monospace; }
#count { color: #555; min-width: 6em; }
"""

SCRIPT = """
(function () {
  const view = document.getElementById('view');
  const main = document.getElementById('main');
  const base = [main.width.baseVal.value, main.height.baseVal.value];
  let scale = 1;
  function zoom(next, cx, cy) {
    const old = scale;
    scale = Math.min(4, Math.max(0.05, next));
    const fx = (view.scrollLeft + (cx ?? view.clientWidth / 2)) / old;
    const fy = (view.scrollTop + (cy ?? view.clientHeight / 2)) / old;
    main.setAttribute('width', base[0] * scale);
    main.setAttribute('height', base[1] * scale);
    view.scrollLeft = fx * scale - (cx ?? view.clientWidth / 2);
    view.scrollTop = fy * scale - (cy ?? view.clientHeight / 2);
  }
  document.getElementById('zoom-in').onclick = () => zoom(scale * 1.25);
  document.getElementById('zoom-out').onclick = () => zoom(scale / 1.25);
  document.getElementById('zoom-1').onclick = () => zoom(1);
  document.getElementById('zoom-fit').onclick = () => zoom(Math.min(view.clientWidth / base[0],
                                                                    view.clientHeight / base[1]));
  view.addEventListener('wheel', (e) => {
    if (!e.ctrlKey) return;
    e.preventDefault();
    const r = view.getBoundingClientRect();
    zoom(scale * (e.deltaY < 0 ? 1.15 : 1 / 1.15), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  view.addEventListener('mousedown', (e) => {
    if (e.target.closest('.node[data-body]')) return;
    drag = [e.clientX, e.clientY, view.scrollLeft, view.scrollTop];
    view.classList.add('dragging');
  });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    view.scrollLeft = drag[2] - (e.clientX - drag[0]);
    view.scrollTop = drag[3] - (e.clientY - drag[1]);
  });
  window.addEventListener('mouseup', () => { drag = null; view.classList.remove('dragging'); });
  document.addEventListener('click', (e) => {
    const node = e.target.closest('.node[data-body]');
    if (!node) return;
    const body = document.getElementById(node.dataset.body);
    if (!body) return;
    body.open = true;
    body.scrollIntoView({ block: 'start' });
  });
  const search = document.getElementById('search');
  const count = document.getElementById('count');
  search.addEventListener('input', () => {
    const q = search.value.trim().toLowerCase();
    document.body.classList.toggle('searching', q.length > 0);
    let hits = 0, first = null;
    for (const node of document.querySelectorAll('.node')) {
      const hit = q.length > 0 && node.dataset.text.includes(q);
      node.classList.toggle('hit', hit);
      if (hit) { hits += 1; if (!first && main.contains(node)) first = node; }
    }
    count.textContent = q ? hits + (hits === 1 ? ' match' : ' matches') : '';
    if (first) first.scrollIntoView({ block: 'center', inline: 'center' });
  });
  // a link can carry a search: page.html#search=nn.conv
  const wanted = /^#search=(.*)$/.exec(location.hash);
  if (wanted) { search.value = decodeURIComponent(wanted[1]); search.dispatchEvent(new Event('input')); }
})();
"""


def _svg(graph: Graph, colouring: Colouring, bodies: dict[str, Body] | None, ids: dict[str, str], prefix: str,
         element_id: str | None = None, with_defs: bool = False, labels: str = "") -> str:
    """One drawing; each body its boxes open gets an id in ``ids`` (``bodies`` None: none marked)."""
    scene = build(graph, colouring.of, lambda op: colouring.reason.get(id(op), ""), bodies, labels)
    for node in scene.nodes:
        if node.body is not None and node.body not in ids:
            ids[node.body] = f"body{len(ids)}"
    placed = place(scene)
    width, height = placed.width + 2 * PAD, placed.height + 2 * PAD
    attr = f' id="{element_id}"' if element_id else ""
    return (f'<svg xmlns="{XMLNS}"{attr} width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{escape(FONT)}" font-size="{FONT_SIZE:g}">'
            + (defs() if with_defs else "")
            + drawing(scene, placed, prefix=prefix, dx=PAD, dy=PAD, body_ids=ids) + "</svg>")


def _legend(colouring: Colouring, graph: Graph) -> str:
    found = counts(colouring, graph)
    items = []
    for key in colouring.legend() + ["io"]:
        style = STYLES[key]
        number = f": {found[key]}" if key in found else ""
        items.append(f'<li><span class="swatch" style="background:{style.fill};border-color:{style.stroke}">'
                     f"</span>{escape(style.legend)}{number}</li>")
    return '<ul class="legend">' + "".join(items) + "</ul>"


def to_html(graph: Graph, colouring: Colouring | None = None) -> str:
    """The page; ``colouring`` defaults to where each operation runs (by_backend)."""
    colouring = colouring or by_backend(graph)
    bodies: dict[str, Body] = {}
    ids: dict[str, str] = {}
    main = _svg(graph, colouring, bodies, ids, "n", "main", with_defs=True)
    sections: list[str] = []
    queue = [(key, 1) for key in ids]  # breadth first: (a body, how deep it is)
    for key, depth in queue:  # grows while it is walked: a body's own bodies join it
        body, body_id = bodies[key], ids[key]
        parts = []
        for name, sub in body.graphs.items():
            # a control-flow subgraph is coloured with the graph; an expansion's operations are new
            known = all(id(op) in colouring.category for op in sub.operations)
            sub_colours = colouring if known else colouring.recolour(sub)
            before = set(ids)
            drawn = _svg(sub, sub_colours, bodies if depth < MAX_DEPTH else None, ids, f"{body_id}_{name}",
                         labels=body.prefix)
            queue += [(new, depth + 1) for new in ids if new not in before]
            parts.append(f"<h3>{escape(name)}: {len(sub.operations)} operations</h3>"
                         f'<div class="body-view">{drawn}</div>')
        sections.append(f'<details id="{body_id}"><summary>{escape(body.title)} — '
                        f"<small>{escape(key)}</small></summary>{''.join(parts)}</details>")
    title = f"graph {graph.name}"
    summary = f"{len(graph.operations)} operations, coloured by {colouring.title}"
    bodies_html = ("<section><h2>Operator bodies</h2><p>Each distinct body once (click a box marked ▸ body "
                   "to open it).</p>" + "\n".join(sections) + "</section>") if sections else ""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><span>{escape(summary)}</span>{_legend(colouring, graph)}",
        '<div class="tools"><input id="search" type="search" placeholder="search operator, label, shape" '
        'aria-label="search"><span id="count"></span><button id="zoom-out" title="zoom out">−</button>'
        '<button id="zoom-in" title="zoom in">+</button><button id="zoom-1" title="actual size">1:1</button>'
        '<button id="zoom-fit" title="fit">fit</button></div></header>',
        f'<div id="view">{main}</div>', bodies_html, f"<script>{SCRIPT}</script>", "</body></html>", ""])

