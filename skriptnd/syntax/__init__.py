"""The front end: SkriptND source text → AST (skriptnd.syntax.ast) with located syntax diagnostics."""

from skriptnd.syntax.parser import parse, parse_expr, parse_module

__all__ = ["parse", "parse_expr", "parse_module"]
