"""An on-disk cache of what composing a definition reports (compose.check), beside the parse cache.

Checking an operator's @compose body binds every invocation for symbolic inputs, which needs
sympy (~0.4 s to import) and its simplifier: a second `sknd check` of an unchanged model, or the
editor reopening an unchanged file, should cost neither. An entry is keyed by the checker itself
(the package version and the source of the modules composing runs: semantics, compose, syntax
and the AST), by every module of the program (name, path and text: a change anywhere, in the
definition or in anything it may invoke, is another key) and by the definition (its module,
index and name). It holds the diagnostics and the operator lookups composing made; a hit
replays those lookups through `program.resolve_operator`, so that whoever watches them (the
language server's per-definition cache) sees what a real run would have shown it.

Programs holding unsaved editor buffers are read from the cache but not stored (see _saved).
Same directory and switches as syntax.cache (`SKRIPTND_CACHE_DIR`, `SKRIPTND_NO_CACHE=1`); any
problem with an entry falls back to checking.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from skriptnd.diagnostics import Diagnostic
from skriptnd.semantics.modules import LoadedModule, Program
from skriptnd.source import Span
from skriptnd.syntax import ast
from skriptnd.syntax.cache import cache_dir, load_entry, store
from skriptnd.untrusted import UnsafeFile, read_regular
from skriptnd.version import __version__

Check = Callable[[Program, LoadedModule, ast.Definition], list[Diagnostic]]

_VERSION = b"composition-check 1\0"


@lru_cache(maxsize=1)
def _checker_fingerprint() -> bytes:
    """The package version and the source of every module composing a definition may run."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(_VERSION + __version__.encode())
    files = [*package.glob("*.py"), *(p for sub in ("semantics", "compose", "syntax", "check")
                                      for p in (package / sub).rglob("*.py"))]
    for path in sorted(files):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.digest()


def _program_digest(program: Program) -> tuple[bytes, bool]:
    """Every module of the program, by name, path and text, and whether those texts are the files
    on disk (memoised on the program)."""
    memo = getattr(program, "_composition_digest", None)
    modules = tuple((m.name, str(m.path), m.source.text if m.source is not None else None, m.ast is not None)
                    for m in program.modules.values())
    if memo is not None and memo[0] == modules:
        return memo[1]
    digest = hashlib.sha256(_checker_fingerprint())
    for name, path, text, parsed in sorted(modules, key=lambda m: m[0]):
        digest.update(f"{name}\0{path}\0{parsed}\0".encode())
        digest.update(b"\1" if text is None else text.encode() + b"\0")
    value = digest.digest(), _saved(program)
    try:
        program._composition_digest = (modules, value)  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return value


def _saved(program: Program) -> bool:
    """Whether the modules the program reads from memory (the editor's buffers) say what their
    files say. Only such programs are stored: the editor re-checks each edit of a buffer, and an
    entry per keystroke would only fill the disk; reopening a saved file finds its entries."""
    paths = {m.path.resolve() for m in program.modules.values()}
    for path, text in program.sources.items():
        if path in paths:
            try:  # a regular file only, no larger than the buffer could be (never a FIFO that blocks)
                if read_regular(path, 4 * len(text) + 4).decode("utf-8") != text:
                    return False
            except (OSError, UnicodeDecodeError, UnsafeFile):
                return False
    return True


def cached_check(program: Program, module: LoadedModule, definition: ast.Definition, check: Check) -> list[Diagnostic]:
    """`check(program, module, definition)`, read from the cache when this very program was
    checked before by this very checker."""
    folder = cache_dir()
    if folder is None or module.ast is None:
        return check(program, module, definition)
    index = next((k for k, d in enumerate(module.ast.definitions) if d is definition), -1)
    digest, saved = _program_digest(program)
    key = hashlib.sha256(digest + f"{module.name}\0{index}\0{definition.name}".encode()).hexdigest()
    entry = folder / key[:2] / f"{key}.compose.pickle"
    try:
        diagnostics, lookups = load_entry(entry)
    except Exception:  # noqa: BLE001 - missing or unreadable entry: check instead
        pass
    else:
        for module_name, name in lookups:  # as the real run made them (see the module docstring)
            owner = program.modules.get(module_name)
            if owner is not None:
                program.resolve_operator(name, owner)
        return list(diagnostics)
    lookups: dict[tuple[str, str], None] = {}
    original = program.resolve_operator
    had_own = "resolve_operator" in vars(program)

    def recording(name: str, from_module: LoadedModule, span: Span | None = None) -> Any:
        lookups[from_module.name, name] = None
        return original(name, from_module, span)

    program.resolve_operator = recording  # type: ignore[method-assign]
    try:
        diagnostics = check(program, module, definition)
    finally:
        if had_own:
            program.resolve_operator = original  # type: ignore[method-assign]
        else:
            del program.resolve_operator
    if saved:
        store(entry, (list(diagnostics), list(lookups)))
    return diagnostics
