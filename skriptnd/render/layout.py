"""A layered drawing of a directed acyclic graph: pure geometry, nothing of skriptnd.

The pictures of ``sknd compose --format svg|html`` are drawn without graphviz, so the placement is ours, the
classic Sugiyama scheme kept small:

1. **layers** by longest path from the sources (a node sits one layer below its lowest predecessor), so every
   edge points downward;
2. an edge spanning several layers gets a **waypoint** in each layer it crosses, so it is routed between the
   boxes of those layers instead of through them; the edges leaving one node share their waypoints (one lane
   with branches);
3. **order** within a layer: a few barycenter sweeps, down then up, each node moved to the mean position of
   its neighbours in the layer just placed; the ordering with the fewest crossings seen is kept;
4. **x**: each node pulled towards the mean x of its neighbours, then pushed apart to keep the order and a
   gap (a few alternating passes); **y**: the layers stacked with their tallest box.

Everything is linear or n log n per sweep (crossings are counted per pair of adjacent layers), so a model of a
few hundred operations lays out in milliseconds, not seconds.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

#: the width a waypoint takes in its layer (an edge's lane between boxes)
WAYPOINT_WIDTH = 8.0


@dataclass(frozen=True)
class Placed:
    """A node's box: (x, y) is its top-left corner."""

    x: float
    y: float
    width: float
    height: float
    layer: int

    @property
    def center(self) -> float:
        return self.x + self.width / 2

    @property
    def bottom(self) -> float:
        return self.y + self.height


@dataclass(frozen=True)
class Layout:
    """Where each node goes (by its index in the input) and each edge's polyline: from the bottom middle of
    its source, through its waypoints, to the top middle of its target (y never decreases along it)."""

    nodes: list[Placed]
    edges: list[list[tuple[float, float]]]
    width: float
    height: float


def _layers(n: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """Longest-path layering in topological order (Kahn); a cycle is a ValueError."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    layer = [0] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while ready:
        a = ready.pop()
        seen += 1
        for b in succ[a]:
            layer[b] = max(layer[b], layer[a] + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if seen != n:
        raise ValueError("the graph has a cycle: it cannot be drawn in layers")
    return layer


def _crossings(upper: list[int], lower: list[int], down: list[list[int]]) -> int:
    """Edge crossings between two adjacent layers (``down``: each node's neighbours in the lower layer), by
    counting inversions of the lower positions in the upper order (insertion into a sorted list)."""
    pos = {v: i for i, v in enumerate(lower)}
    seq = [pos[b] for a in upper for b in sorted(down[a], key=pos.__getitem__)]
    seen: list[int] = []
    count = 0
    for p in seq:
        i = bisect_left(seen, p + 1)
        count += len(seen) - i
        seen.insert(i, p)
    return count


def _order(rows: list[list[int]], up: list[list[int]], down: list[list[int]], sweeps: int) -> list[list[int]]:
    def total(order: list[list[int]]) -> int:
        return sum(_crossings(order[i], order[i + 1], down) for i in range(len(order) - 1))

    best, best_count = [list(r) for r in rows], total(rows)
    order = [list(r) for r in rows]
    stale = 0
    for sweep in range(sweeps):
        downward = sweep % 2 == 0
        indices = range(1, len(order)) if downward else range(len(order) - 2, -1, -1)
        for i in indices:
            ref = order[i - 1] if downward else order[i + 1]
            pos = {v: k for k, v in enumerate(ref)}
            nbrs = up if downward else down

            def key(v: int, k: int, pos: dict[int, int] = pos, nbrs: list[list[int]] = nbrs) -> tuple[float, int]:
                ps = [pos[u] for u in nbrs[v] if u in pos]
                return (sum(ps) / len(ps) if ps else float(k), k)

            order[i] = [v for _, v in sorted((key(v, k), v) for k, v in enumerate(order[i]))]
        count = total(order)
        if count < best_count:
            best, best_count, stale = [list(r) for r in order], count, 0
        else:
            stale += 1
        if best_count == 0 or stale == 2:  # untangled, or a down and an up sweep gained nothing
            break
    return best


def _spread(row: list[int], want: dict[int, float], width: list[float], gap: float) -> dict[int, float]:
    """Left edges for the row's nodes as near their wanted centres as the order and the gap allow: pushed
    right from the left, then back left from the right, then the two averaged."""
    if not row:
        return {}
    lefts = [want[v] - width[v] / 2 for v in row]
    fwd = list(lefts)
    for k in range(1, len(row)):
        fwd[k] = max(fwd[k], fwd[k - 1] + width[row[k - 1]] + gap)
    bwd = list(lefts)
    for k in range(len(row) - 2, -1, -1):
        bwd[k] = min(bwd[k], bwd[k + 1] - width[row[k]] - gap)
    mid = [(a + b) / 2 for a, b in zip(fwd, bwd, strict=True)]
    for k in range(1, len(row)):  # the average of two valid placements may still need the gap restored
        mid[k] = max(mid[k], mid[k - 1] + width[row[k - 1]] + gap)
    return {v: mid[k] for k, v in enumerate(row)}


def layout(sizes: Sequence[tuple[float, float]], edges: Sequence[tuple[int, int]], *, gap_x: float = 24.0,
           gap_y: float = 36.0, sweeps: int = 8, passes: int = 4) -> Layout:
    """Place nodes of the given (width, height) and route the edges (pairs of node indices, source first).
    Duplicate edges are drawn once each; self-loops and cycles are ValueErrors."""
    n = len(sizes)
    if any(a == b for a, b in edges):
        raise ValueError("a self-loop cannot be drawn in layers")
    layer = _layers(n, edges)
    width = [float(w) for w, _ in sizes]
    height = [float(h) for _, h in sizes]
    # waypoints: the edges leaving one node share one lane, a waypoint per layer down to its last consumer's
    # (a tensor read by many later operations, as DenseNet's concatenations read every earlier feature map,
    # is one lane with branches, not one lane per reader)
    lane: dict[int, list[int]] = {}  # node -> its waypoints, by layer from layer[node] + 1
    for a, b in sorted(edges, key=lambda e: -layer[e[1]]):
        if a not in lane:
            lane[a] = []
            for lay in range(layer[a] + 1, layer[b]):
                layer.append(lay)
                width.append(WAYPOINT_WIDTH)
                height.append(0.0)
                lane[a].append(len(layer) - 1)
    total = len(layer)
    up: list[list[int]] = [[] for _ in range(total)]
    down: list[list[int]] = [[] for _ in range(total)]
    links = {(a, b) for a, ways in lane.items() for a, b in zip([a, *ways], ways, strict=False)}
    links |= {(lane[a][layer[b] - layer[a] - 2] if layer[b] > layer[a] + 1 else a, b) for a, b in edges}
    for a, b in sorted(links):
        down[a].append(b)
        up[b].append(a)
    depth = max(layer, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for v in range(total):
        rows[layer[v]].append(v)
    rows = _order(rows, up, down, sweeps)

    lefts: dict[int, float] = {}
    for row in rows:  # a first placement: each row packed from 0
        x = 0.0
        for v in row:
            lefts[v] = x
            x += width[v] + gap_x
    centre = {v: lefts[v] + width[v] / 2 for v in range(total)}
    for p in range(passes):
        downward = p % 2 == 0
        for row in rows if downward else reversed(rows):
            nbrs = up if downward else down
            want = {}
            for v in row:
                near = [centre[u] for u in nbrs[v]]
                want[v] = sum(near) / len(near) if near else centre[v]
            placed = _spread(row, want, width, gap_x)
            for v, left in placed.items():
                centre[v] = left + width[v] / 2
    shift = min((centre[v] - width[v] / 2 for v in range(total)), default=0.0)

    tops, y = [], 0.0
    for row in rows:
        tops.append(y)
        y += max((height[v] for v in row), default=0.0) + gap_y
    row_height = [max((height[v] for v in row), default=0.0) for row in rows]

    def box(v: int) -> Placed:
        lay = layer[v]
        top = tops[lay] + (row_height[lay] - height[v]) / 2
        return Placed(centre[v] - width[v] / 2 - shift, top, width[v], height[v], lay)

    boxes = [box(v) for v in range(total)]
    routes = []
    for a, b in edges:
        src, dst = boxes[a], boxes[b]
        points = [(src.center, src.bottom)]
        for w in lane[a][:layer[b] - layer[a] - 1]:
            lay = boxes[w].layer
            points += [(boxes[w].center, tops[lay]), (boxes[w].center, tops[lay] + row_height[lay])]
        points.append((dst.center, dst.y))
        routes.append(points)
    right = max((b.x + b.width for b in boxes), default=0.0)
    return Layout(boxes[:n], routes, right, max(y - gap_y, 0.0))
