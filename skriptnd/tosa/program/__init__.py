"""TOSA programs: runs of legalized operations as one simplified TOSA graph, and their fast forms."""
