"""Where the formatter prints each comment (the AST keeps comments apart from the nodes, with spans).

A comment that followed code on its line stays at the end of that item's (last) line; an own-line comment
goes before the item that follows it, or at the end of its block; comments inside a multi-line expression
move before the statement. `CommentMap` records the decisions by node id; the printer reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from skriptnd.source import Span
from skriptnd.syntax import ast

#: What comments are placed in: a node, or a tuple of nodes (a fragment's blocks or statements).
Container = ast.Node | tuple[ast.Node, ...] | list[ast.Node]

def start_of(span: Span) -> tuple[int, int]:
    return (span.line, span.col)


def end_of(span: Span) -> tuple[int, int]:
    return (span.end_line, span.end_col)


def _sub_blocks(e: ast.Node | None) -> list[ast.BlockExpr]:
    """The block expressions printed on lines of their own within a statement."""
    if isinstance(e, ast.Assign):
        return _sub_blocks(e.value)
    if isinstance(e, ast.BlockExpr):
        return [e]
    if isinstance(e, ast.IfExpr):
        out: list[ast.BlockExpr] = []
        for cond, then in e.branches:
            out += _sub_blocks(cond) + _sub_blocks(then)
        return out + _sub_blocks(e.orelse)
    if isinstance(e, ast.LoopExpr):
        return [b for part in (e.pre_cond, e.body, e.post_cond) if part is not None for b in _sub_blocks(part)]
    return []


def _layout_children(node: Container) -> list[ast.Node]:
    if isinstance(node, ast.Module):
        return [*node.imports, *node.definitions]
    if isinstance(node, ast.Definition):
        return list(node.blocks)
    if isinstance(node, ast.Block):
        return list(node.items)
    if isinstance(node, ast.BlockExpr):
        return list(node.stmts)
    if isinstance(node, tuple | list):
        return list(node)
    return []


class CommentMap:
    """Where each comment goes, keyed by the id of the node it is printed with.

    leading: own-line comments before the node, as (comment, blank line after it);
    trailing: the comment at the end of the node's last line;
    header: the comment after the `{` that opens a container;
    end: comments at the end of a container, before its `}`.
    """

    def __init__(self) -> None:
        self.leading: dict[int, list[tuple[ast.Comment, bool]]] = defaultdict(list)
        self.trailing: dict[int, ast.Comment] = {}
        self.header: dict[int, ast.Comment] = {}
        self.end: dict[int, list[tuple[ast.Comment, bool]]] = defaultdict(list)
        self.top: list[tuple[ast.Comment, bool]] = []

    def place(self, container: Container, comments: Sequence[ast.Comment], header_line: int | None) -> None:
        """Assign comments lying within container (a node or a tuple of nodes) to its items."""
        children = _layout_children(container)
        leading: dict[int, list[ast.Comment]] = defaultdict(list)
        inner: dict[int, list[ast.Comment]] = defaultdict(list)
        end: list[ast.Comment] = []
        for c in sorted(comments, key=lambda c: start_of(c.span)):
            p = start_of(c.span)
            inside = next((ch for ch in children if start_of(ch.span) <= p < end_of(ch.span)), None)
            if inside is not None:
                inner[id(inside)].append(c)
                continue
            before = [ch for ch in children if ch.span.end_line == c.span.line and end_of(ch.span) <= p]
            if before and id(before[-1]) not in self.trailing:
                self.trailing[id(before[-1])] = c
                continue
            following = [ch for ch in children if start_of(ch.span) > p]
            if (header_line is not None and c.span.line == header_line and id(container) not in self.header
                    and (not following or following[0].span.line > c.span.line)
                    and not any(end_of(ch.span) <= p for ch in children)):
                self.header[id(container)] = c
                continue
            if following:
                leading[id(following[0])].append(c)
            else:
                end.append(c)
        for ch in children:
            if id(ch) in inner:
                self._place_inside(ch, inner[id(ch)])
            if id(ch) in leading:
                self.leading[id(ch)] = with_gaps(leading[id(ch)], ch.span.line) + self.leading[id(ch)]
        if end:
            self.end[id(container)] += with_gaps(end, None)

    def _place_inside(self, item: ast.Node, comments: list[ast.Comment]) -> None:
        if isinstance(item, ast.Definition | ast.Block | ast.BlockExpr):
            self.place(item, comments, item.span.line)
            return
        blocks = _sub_blocks(item)
        moved = []
        within: dict[int, list[ast.Comment]] = defaultdict(list)
        for c in comments:
            p = start_of(c.span)
            block = next((b for b in blocks if start_of(b.span) <= p < end_of(b.span)), None)
            if block is not None:
                within[id(block)].append(c)
            else:
                moved.append(c)
        for b in blocks:
            if id(b) in within:
                self.place(b, within[id(b)], b.span.line)
        self.leading[id(item)] += [(c, False) for c in moved]


def with_gaps(comments: list[ast.Comment], next_line: int | None) -> list[tuple[ast.Comment, bool]]:
    """Pair each comment with whether a blank line separated it from what followed it."""
    out = []
    for k, c in enumerate(comments):
        following = comments[k + 1].span.line if k + 1 < len(comments) else next_line
        if next_line is not None and following is not None and following > next_line:
            following = next_line
        out.append((c, following is not None and following - c.span.line > 1))
    return out


def flatten_gaps(entries: list[tuple[ast.Comment, bool]]) -> list[ast.Comment | None]:
    out: list[ast.Comment | None] = []
    for c, blank in entries:
        out.append(c)
        if blank:
            out.append(None)
    return out


def module_comments(m: ast.Module) -> CommentMap:
    cm = CommentMap()
    if not m.comments:
        return cm
    items = [*m.imports, *m.definitions]
    comments = sorted(m.comments, key=lambda c: start_of(c.span))
    first = min((start_of(i.span) for i in items), default=None)
    top: list[ast.Comment] = []
    rest: list[ast.Comment] = []
    for c in comments:
        before_first = first is None or start_of(c.span) < first
        if before_first and (m.version is not None or m.extensions) and c.span.line < m.span.line:
            top.append(c)
        else:
            rest.append(c)
    cm.top = with_gaps(top, m.span.line)
    cm.place(m, rest, None)
    return cm
