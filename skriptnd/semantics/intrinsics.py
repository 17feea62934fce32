"""Which operators have an implementation in SkriptND and which are intrinsics.

An operator with `@compose` is composite; one with `@lower` (and no `@compose`) is primitive;
one with neither is an intrinsic: the spec states its interface only (top_k, nonmax_suppress,
cubic resize, ROI pools, ...), so the executor must provide a native kernel for it.
"""

from __future__ import annotations

from typing import Literal

from skriptnd.syntax import ast

OperatorKind = Literal["composite", "primitive", "intrinsic"]

#: The standard library's intrinsics, by qualified name. Kept explicit (and checked against the
#: parsed stdlib by a test) so that an executor can be verified to cover every one of them.
STDLIB_INTRINSICS: frozenset[str] = frozenset({
    "image.cubic_resize",
    "image.max_roi_pool",
    "image.avg_roi_pool",
    "image._cubic_grid_sample",
    "algo.top_k",
    "algo.nonmax_suppress",
})


def operator_kind(defn: ast.Definition) -> OperatorKind:
    kinds = {type(b) for b in defn.blocks}
    if ast.ComposeBlock in kinds and any(isinstance(b, ast.ComposeBlock) and b.kind == "compose"
                                         for b in defn.blocks):
        return "composite"
    if ast.LowerBlock in kinds:
        return "primitive"
    return "intrinsic"
