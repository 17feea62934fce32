"""A scene as SVG: boxes coloured by category, curved edges with arrowheads, a legend; no graphviz.

Colours are attributes (not CSS), so the file looks the same in any viewer; every node carries its full
description as a ``<title>`` (the viewer's tooltip) and, for the HTML page, ``data-`` attributes its script
reads. The only URL in the output is the SVG namespace.
"""

from __future__ import annotations

from html import escape

from skriptnd.compose.ir import Graph
from skriptnd.render.colours import STYLES, Colouring
from skriptnd.render.layout import Layout, layout
from skriptnd.render.scene import FONT_SIZE, LINE_HEIGHT, PAD_X, PAD_Y, Scene, build

XMLNS = "http://www.w3.org/2000/svg"
FONT = "ui-monospace, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace"
MARGIN = 16.0
LEGEND_ROW = 18.0


def _path(points: list[tuple[float, float]]) -> str:
    """A polyline as vertical-tangent cubic curves (straight where x does not change)."""
    (x0, y0), rest = points[0], points[1:]
    parts = [f"M{x0:.1f},{y0:.1f}"]
    for x1, y1 in rest:
        if abs(x1 - x0) < 0.5:
            parts.append(f"L{x1:.1f},{y1:.1f}")
        else:
            mid = (y0 + y1) / 2
            parts.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(parts)


def place(scene: Scene) -> Layout:
    return layout([n.size for n in scene.nodes], scene.edges)


def drawing(scene: Scene, placed: Layout, *, prefix: str, dx: float = 0.0, dy: float = 0.0,
            body_ids: dict[str, str] | None = None) -> str:
    """The edges and nodes of a placed scene as SVG elements, offset by (dx, dy); node ids ``{prefix}{i}``;
    a node with a body names it (``data-body``, its id in ``body_ids``) for the HTML page's script."""
    out = [f'<g transform="translate({dx:.1f},{dy:.1f})">', '<g fill="none" stroke="#777" stroke-width="1.2">']
    # the edges leaving one node share their lane (layout): each is drawn from where the previous, shorter
    # one branched off, so a tensor read by many later operations is one line, not many on top of each other
    drawn: dict[int, int] = {}  # source -> waypoints already drawn
    order = sorted(range(len(scene.edges)), key=lambda k: len(placed.edges[k]))
    for k in order:
        (a, b), points = scene.edges[k], placed.edges[k]
        start = 2 * drawn.get(a, 0)
        drawn[a] = (len(points) - 2) // 2
        out.append(f'<path d="{_path(points[start:])}" marker-end="url(#arrow)" data-from="{prefix}{a}" '
                   f'data-to="{prefix}{b}"/>')
    out.append("</g>")
    for i, (node, box) in enumerate(zip(scene.nodes, placed.nodes, strict=True)):
        style = STYLES[node.category]
        rx = box.height / 2 if node.kind != "op" else 5
        body = f' data-body="{body_ids[node.body]}"' if node.body and body_ids and node.body in body_ids else ""
        search = escape(" ".join(node.lines).lower())
        out.append(f'<g class="node {node.kind} cat-{node.category}" id="{prefix}{i}" data-text="{search}"{body}>'
                   f"<title>{escape(node.tooltip)}</title>"
                   f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width:.1f}" height="{box.height:.1f}" '
                   f'rx="{rx:.1f}" fill="{style.fill}" stroke="{style.stroke}" stroke-width="1.5"/>')
        x = box.x + PAD_X if node.kind == "op" else box.center
        anchor = "start" if node.kind == "op" else "middle"
        out.append(f'<text x="{x:.1f}" y="{box.y + PAD_Y:.1f}" text-anchor="{anchor}">')
        for k, line in enumerate(node.lines):
            weight = ' font-weight="bold"' if k == 0 else ""
            out.append(f'<tspan x="{x:.1f}" dy="{LINE_HEIGHT:.1f}"{weight}>{escape(line)}</tspan>')
        out.append("</text></g>")
    out.append("</g>")
    return "\n".join(out)


def legend(colouring: Colouring, counts: dict[str, int], *, dy: float = 0.0) -> tuple[str, float]:
    """The legend's rows (a swatch, the words, how many operations) and its height."""
    rows = []
    y = dy
    for key in colouring.legend() + ["io"]:
        style = STYLES[key]
        label = f"{style.legend}" + (f": {counts[key]}" if key in counts else "")
        rows.append(f'<g class="legend"><rect x="0" y="{y:.1f}" width="24" height="12" rx="3" fill="{style.fill}" '
                    f'stroke="{style.stroke}" stroke-width="1.5"/><text x="32" y="{y + 10:.1f}">{escape(label)}'
                    "</text></g>")
        y += LEGEND_ROW
    return "\n".join(rows), y - dy


def defs() -> str:
    return ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>')


def counts(colouring: Colouring, graph: Graph) -> dict[str, int]:
    """How many operations (top level) fall in each category."""
    found: dict[str, int] = {}
    for op in graph.operations:
        key = colouring.of(op)
        found[key] = found.get(key, 0) + 1
    return found


def to_svg(graph: Graph, colouring: Colouring) -> str:
    """A standalone SVG file: a title, the legend, the graph (bodies are in the HTML page only)."""
    scene = build(graph, colouring.of, lambda op: colouring.reason.get(id(op), ""))
    placed = place(scene)
    title = f"graph {graph.name}: {len(graph.operations)} operations, coloured by {colouring.title}"
    rows, height = legend(colouring, counts(colouring, graph), dy=LINE_HEIGHT + 8)
    top = LINE_HEIGHT + 8 + height + 12
    width = max(placed.width, len(title) * (FONT_SIZE + 2) * 0.6, 420.0) + 2 * MARGIN
    total = top + placed.height + 2 * MARGIN
    return "\n".join([
        f'<svg xmlns="{XMLNS}" width="{width:.0f}" height="{total:.0f}" viewBox="0 0 {width:.0f} {total:.0f}" '
        f'font-family="{escape(FONT)}" font-size="{FONT_SIZE:g}">',
        defs(), f'<rect width="{width:.0f}" height="{total:.0f}" fill="#ffffff"/>',
        f'<g transform="translate({MARGIN:.0f},{MARGIN:.0f})">',
        f'<text x="0" y="{LINE_HEIGHT:.0f}" font-weight="bold" font-size="{FONT_SIZE + 2:g}">{escape(title)}</text>',
        rows, drawing(scene, placed, prefix="n", dy=top), "</g>", "</svg>", ""])
