"""The free names of an expression: what must have a value before it can be evaluated (§2.9)."""

from __future__ import annotations

from skriptnd.syntax import ast

_FREE_CACHE: dict[int, tuple[ast.Node, frozenset[str]]] = {}
_FREE_CACHE_LIMIT = 1 << 16


def free_names(expr: ast.Node) -> set[str]:
    """The identifiers expr reads: an expression is evaluable once all have values (§2.9).

    Includes the base name of `x.shape` and names inside string format fields; excludes
    callee names (`sqrt`, `T`, operators). Cached per node, since callers ask again and
    again while interleaving @using and @assert evaluation.
    """
    key = id(expr)
    hit = _FREE_CACHE.get(key)
    if hit is not None and hit[0] is expr:
        return set(hit[1])
    names: set[str] = set()
    stack: list[ast.Node] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is ast.Name:
            names.add(node.id)
        else:
            stack.extend(node.children())
    if len(_FREE_CACHE) >= _FREE_CACHE_LIMIT:
        _FREE_CACHE.clear()
    _FREE_CACHE[key] = (expr, frozenset(names))  # holding expr keeps its id from being reused
    return names
