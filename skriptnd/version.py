"""The skriptnd version: its own module so that nothing imports the package face for it."""

__version__ = "0.1.0"
