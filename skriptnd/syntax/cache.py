"""An on-disk cache of parsed modules, like CPython's ``__pycache__``.

Parsing the standard library takes most of ``skriptnd.load`` (~0.4 s of LALR parsing for
4,500 lines); unpickling its AST takes a sixth of that. An entry is keyed by the module's path
(spans name it) and text, and by the parser itself (the package version and the text of the
grammar, the AST classes and the tree transform in its three modules, with strings.py that splits
string literals), so a changed source or a changed parser never
reads a stale tree (source.py too: its spans are pickled in every tree). Only modules without
diagnostics are stored. Entries are written atomically;
any problem with the cache (unwritable directory, a corrupt entry) falls back to parsing.

The directory is ``$SKRIPTND_CACHE_DIR``, else ``$XDG_CACHE_HOME/skriptnd``, else
``~/.cache/skriptnd``; ``SKRIPTND_NO_CACHE=1`` turns the cache off. Loading a pickle runs whatever
it says, so the cache is only used in a folder this user owns and nobody else can write (created
0700), and an entry is only loaded when it is a regular file of this user's that nobody else can
write (skriptnd.untrusted); anything else is ignored and the module is parsed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from skriptnd.resources import grammar_path
from skriptnd.untrusted import private_dir, trusted_file, user_cache_root
from skriptnd.version import __version__

Parse = Callable[[str, str], tuple[Any, list[Any]]]


def cache_dir() -> Path | None:
    """The cache folder, created 0700 if missing; None when caching is off or the folder is not this
    user's alone (a link, someone else's, or writable by others)."""
    if os.environ.get("SKRIPTND_NO_CACHE"):
        return None
    explicit = os.environ.get("SKRIPTND_CACHE_DIR")
    return private_dir(Path(explicit) if explicit else user_cache_root())


def load_entry(entry: Path) -> Any:
    """The value pickled in entry, when it is this user's own file (see the module docstring); raises
    (anything) when it is missing, foreign or unreadable."""
    fh = trusted_file(entry)
    if fh is None:
        raise FileNotFoundError(entry)
    with fh:
        return pickle.load(fh)


@lru_cache(maxsize=1)
def _parser_fingerprint() -> bytes:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(__version__.encode())
    for path in (grammar_path(), here / "ast.py", here.parent / "source.py", here / "transform.py",
                 here / "transform_base.py", here / "transform_exprs.py", here / "strings.py", here / "parser.py"):
        try:
            digest.update(Path(path).read_bytes())
        except OSError:
            digest.update(str(path).encode())
    return digest.digest()


def cached_parse(text: str, path: str, parse: Parse) -> tuple[Any, list[Any]]:
    """``parse(text, path)``, read from the cache when this exact module was parsed before."""
    folder = cache_dir()
    if folder is None:
        return parse(text, path)
    key = hashlib.sha256(_parser_fingerprint() + path.encode() + b"\0" + text.encode()).hexdigest()
    entry = folder / key[:2] / f"{key}.pickle"
    try:
        return load_entry(entry), []
    except Exception:  # noqa: BLE001 - missing or unreadable entry: parse instead
        pass
    tree, diagnostics = parse(text, path)
    if tree is not None and not diagnostics:
        _store(entry, tree)
    return tree, diagnostics


def store(entry: Path, value: object) -> None:
    """Pickle value to entry atomically; a cache that cannot be written is only slower (also used
    by compose.check_cache)."""
    try:
        if private_dir(entry.parent) is None:
            return
        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, pickle.PicklingError, RecursionError):
        pass  # a cache that cannot be written is only slower


_store = store  # what cached_parse calls (a test replaces it to see that nothing is parsed again)
