"""Semantic analysis: values and types, compile-time evaluation, modules, checks, binding."""
