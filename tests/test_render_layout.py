"""The layered layout of skriptnd.render.layout on its own: pure geometry, checked on hand-made and random DAGs.

What a drawing must never do: overlap two boxes of a layer, draw an edge upward or through a box of a layer
it crosses, lose or repeat a node; what it should do: untangle the crossings a barycenter sweep can."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.render.layout import Layout, _crossings, layout


def _dags(max_nodes: int = 30) -> st.SearchStrategy[tuple[list[tuple[float, float]], list[tuple[int, int]]]]:
    """Random DAGs: edges only from a lower to a higher index (then shuffled in direction-preserving order)."""
    @st.composite
    def build(draw: st.DrawFn) -> tuple[list[tuple[float, float]], list[tuple[int, int]]]:
        n = draw(st.integers(1, max_nodes))
        sizes = draw(st.lists(st.tuples(st.floats(10, 200), st.floats(10, 80)), min_size=n, max_size=n))
        pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] < p[1])
        edges = draw(st.lists(pairs, max_size=3 * n)) if n > 1 else []
        return sizes, edges
    return build()


def _check(sizes: list[tuple[float, float]], edges: list[tuple[int, int]], placed: Layout, gap: float = 24.0) -> None:
    # every node drawn once, with its own size
    assert len(placed.nodes) == len(sizes)
    for (w, h), box in zip(sizes, placed.nodes, strict=True):
        assert (box.width, box.height) == pytest.approx((w, h))
        assert box.x >= -1e-6 and box.y >= -1e-6
        assert box.x + box.width <= placed.width + 1e-6 and box.y + box.height <= placed.height + 1e-6
    # no two boxes of a layer overlap (and they keep the gap)
    by_layer: dict[int, list] = {}
    for box in placed.nodes:
        by_layer.setdefault(box.layer, []).append(box)
    for boxes in by_layer.values():
        boxes.sort(key=lambda b: b.x)
        for left, right in zip(boxes, boxes[1:], strict=False):
            assert left.x + left.width + gap - 1e-6 <= right.x, (left, right)
    # layers stack: a later layer is entirely below an earlier one
    for a in placed.nodes:
        for b in placed.nodes:
            if a.layer < b.layer:
                assert a.bottom <= b.y + 1e-6
    # edges: from the source's bottom middle to the target's top middle, never upward, and the vertical
    # pieces crossing a layer pass between its boxes
    assert len(placed.edges) == len(edges)
    for (a, b), points in zip(edges, placed.edges, strict=True):
        src, dst = placed.nodes[a], placed.nodes[b]
        assert src.layer < dst.layer
        assert points[0] == pytest.approx((src.center, src.bottom))
        assert points[-1] == pytest.approx((dst.center, dst.y))
        ys = [y for _, y in points]
        assert ys == sorted(ys)
        for (x0, y0), (x1, y1) in zip(points[1:-1:2], points[2:-1:2], strict=True):
            assert x0 == x1 and y1 >= y0
            for box in placed.nodes:
                if box.y < y1 and box.bottom > y0:  # a box of the layer this piece crosses
                    assert not box.x < x0 < box.x + box.width, (x0, box)


@settings(max_examples=150, deadline=None)
@given(_dags())
def test_random_dags_are_drawn_without_overlaps_and_downward(dag: tuple) -> None:
    sizes, edges = dag
    _check(sizes, edges, layout(sizes, edges))


def test_longest_path_layers_and_a_skip_edge_routed_around_the_chain() -> None:
    # a -> b -> c -> d and a -> d: d is on layer 3, the skip edge gets two waypoints beside b and c
    sizes = [(60.0, 20.0)] * 4
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    placed = layout(sizes, edges)
    assert [b.layer for b in placed.nodes] == [0, 1, 2, 3]
    assert len(placed.edges[3]) == 2 + 2 * 2  # source, two waypoints (top and bottom each), target
    _check(sizes, edges, placed)


def test_barycenter_sweeps_untangle_a_crossing() -> None:
    # two parents each with its own child, given in crossed order: one sweep puts each child under its parent
    sizes = [(40.0, 20.0)] * 4
    edges = [(0, 3), (1, 2)]
    placed = layout(sizes, edges)
    assert (placed.nodes[0].x < placed.nodes[1].x) == (placed.nodes[3].x < placed.nodes[2].x)
    _check(sizes, edges, placed)


def test_crossings_are_counted_as_inversions() -> None:
    down = [[3], [2], [], []]
    assert _crossings([0, 1], [2, 3], down) == 1
    assert _crossings([0, 1], [3, 2], down) == 0
    # 0 -> 4, 5; 1 -> 3; 2 -> 2: with the lower layer in order, 0's two edges cross 1's and 2's (4), 1's
    # crosses 2's (1); reversed, none cross
    down = [[4, 5], [3], [2], [], [], []]
    assert _crossings([0, 1, 2], [2, 3, 4, 5], down) == 5
    assert _crossings([0, 1, 2], [5, 4, 3, 2], down) == 0


def test_a_node_read_by_many_later_nodes_has_one_lane() -> None:
    # a hub read at layers 1..5 by a chain: one waypoint per crossed layer, shared (DenseNet's concatenations)
    sizes = [(50.0, 20.0)] * 6
    edges = [(i, i + 1) for i in range(1, 5)] + [(0, 1)] + [(0, k) for k in range(2, 6)]
    placed = layout(sizes, edges)
    routes = sorted((r[:-1] for r in placed.edges[5:]), key=len)  # the hub's edges to layers 2..5
    assert [len(r) for r in routes] == [3, 5, 7, 9]  # one more waypoint (top and bottom) per layer crossed
    for short, long in zip(routes, routes[1:], strict=False):
        assert long[:len(short)] == short  # each runs down the previous one's lane, then branches off
    _check(sizes, edges, placed)


def test_cycles_and_self_loops_are_refused() -> None:
    with pytest.raises(ValueError, match="cycle"):
        layout([(1.0, 1.0)] * 2, [(0, 1), (1, 0)])
    with pytest.raises(ValueError, match="self-loop"):
        layout([(1.0, 1.0)], [(0, 0)])


def test_empty_and_single_node() -> None:
    assert layout([], []).nodes == []
    placed = layout([(30.0, 10.0)], [])
    assert placed.nodes[0].x == 0 and placed.width == 30.0 and placed.height == 10.0


def test_four_hundred_nodes_lay_out_quickly() -> None:
    """A 400-node ladder with skip edges (a ResNet-like shape, 1200 edges) in well under a second on a quiet
    machine; the bound leaves room for a loaded CI runner but not for a quadratic blow-up."""
    n = 400
    edges = [(i, i + 1) for i in range(n - 1)] + [(i, i + 3) for i in range(n - 3)] + \
        [(i, i + 7) for i in range(0, n - 7, 2)]
    sizes = [(120.0 + (i % 5) * 20, 40.0) for i in range(n)]
    start = time.perf_counter()
    placed = layout(sizes, edges)
    assert time.perf_counter() - start < 3.0
    _check(sizes, edges, placed)
