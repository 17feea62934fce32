"""docs/api.md's examples are run as doctests, so the API documentation stays true."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_api_md_examples_run() -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)  # the examples use paths relative to the repository
    try:
        result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                                  optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    finally:
        os.chdir(cwd)
    assert result.attempted > 10 and result.failed == 0


def test_package_docstrings_run() -> None:
    import skriptnd
    import skriptnd.api

    for module in (skriptnd, skriptnd.api):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
