"""TOSA 1.0 as a target: the existing legalization (:mod:`skriptnd.tosa.legalize`), not a copy of it.

``map_graph`` reads :func:`skriptnd.tosa.legalize.coverage` and, for each legalized operation, the TOSA
operators of its subgraph; ``spec_ops`` lists the TOSA operators the numpy implementation provides
(:data:`skriptnd.tosa.ops.OPS`) with the standard operations that legalize onto each.
"""

from __future__ import annotations

from skriptnd.compose.ir import Graph
from skriptnd.targets.registry import Mapping, SpecOp, Target, register
from skriptnd.tosa.legalize import coverage, legalize
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.ops import OPS


def map_graph(graph: Graph) -> list[Mapping]:
    rows = []
    recurrent = RecurrentLegalizer()
    for op, ok, reason in coverage(graph):
        if not ok:
            rows.append(Mapping(op, None, reason))
            continue
        sg = recurrent(op) or legalize(op)[0]
        names = list(dict.fromkeys(o.name for o in sg.ops)) if sg is not None else []
        rows.append(Mapping(op, ", ".join(names) or "(no operation)", reason, {"tosa_ops": names}))
    return rows


def spec_ops() -> list[SpecOp]:
    return [SpecOp(name, "supported", "numpy TOSA operator (skriptnd.tosa), target of the legalization tables")
            for name in sorted(OPS)]


TARGET = register(Target("tosa", "TOSA 1.0", spec_ops, map_graph))
