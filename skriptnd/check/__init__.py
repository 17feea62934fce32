"""Checking: every definition of a program and its composed graphs, with a cache keyed by the sources."""
