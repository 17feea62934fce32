"""Where the grammar and the standard library live, installed or in a source checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """`grammar` or `stdlib`: inside the wheel under skriptnd/_data, else the repo top level."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"skriptnd installation is incomplete: no '{name}' folder at {installed}")


def grammar_path() -> Path:
    return data_dir("grammar") / "skriptnd.lark"


def stdlib_dir() -> Path:
    return data_dir("stdlib")


STDLIB_MODULES = ("layout", "math", "linalg", "nn", "image", "quant", "algo")
