"""Graph composition: a model's main graph, for concrete attributes, as a graph of operations."""

from skriptnd.compose.composer import Composer, compose, decompose_all, default_atomic
from skriptnd.compose.ir import Graph, Operation, Tensor

__all__ = ["Composer", "Graph", "Operation", "Tensor", "compose", "decompose_all", "default_atomic"]
