"""The optional packages and the pip extra of pyproject.toml that installs each, with the one install hint
every missing-package message uses.

skriptnd is installed from its source tree (`pip install -e .`), not from a package index, so a hint must
name an extra of that checkout (`pip install -e '.[iree]'`): asking a package index for skriptnd with an
extra fails, the index does not have it. tests/test_extras.py checks each extra named here against
pyproject.toml, and each package's distribution against the extra that is said to install it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Optional:
    """An optional Python package: its import name, the distribution that provides it, and its extra."""
    module: str
    distribution: str
    extra: str


#: Every optional package the code imports lazily, by import name.
OPTIONAL: dict[str, Optional] = {o.module: o for o in (
    Optional("onnx", "onnx", "onnx"),
    Optional("onnxruntime", "onnxruntime", "onnx"),
    Optional("iree.compiler", "iree-base-compiler", "iree"),
    Optional("iree.runtime", "iree-base-runtime", "iree"),
    Optional("nnef", "nnef", "nnef"),
)}

#: The extras a user picks from (`all` is their union); `dev` adds what the test suite needs.
USER_EXTRAS = ("onnx", "iree", "nnef")


def install_hint(extra: str) -> str:
    """How to install an extra: from the checkout skriptnd is installed from (editable)."""
    return f"from the skriptnd checkout: pip install -e '.[{extra}]'"


def hint_for(module: str) -> str:
    """How to install the package that provides ``module``: its extra, or the package itself when no extra
    lists it."""
    known = OPTIONAL.get(module)
    return install_hint(known.extra) if known else f"pip install {module.split('.')[0]}"
