"""Running iree-compile: where the compiler is, its version (part of a cached module's key), one compilation
of an MLIR text into a cache folder with progress on the caller's status line, and what a failure says
(E0782: the compiler's ``error:`` lines, its whole output kept in a file). The ``iree`` backend
(skriptnd.backends.via_iree) decides what to compile; this module only runs the compiler."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from skriptnd.backends.base import Options, compile_status
from skriptnd.backends.iree_cache import MODULE, PARAMS, cache_root
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.fileio import write_atomic
from skriptnd.source import NO_SPAN

#: Constants of at least this many bytes leave the module for its parameter archive (``params.irpa``), which
#: the runtime maps from disk at load time.
PARAMETER_MIN_BYTES = 256
PARAMETER_SCOPE = "model"
COMPILE_TIMEOUT = 1800.0
#: Seconds between two reports of a running iree-compile to the caller's status line (base.compile_status).
STATUS_INTERVAL = 1.0



def iree_version() -> str:
    """The compiler's version and revision (part of the cache key), read from iree/compiler/version.py without
    importing iree.compiler: that loads its MLIR libraries, a tenth of a second a cached start does not need."""
    import importlib.util

    spec = importlib.util.find_spec("iree")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "compiler", "version.py")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    import iree.compiler.version as v

    return f"{v.VERSION} {v.REVISIONS}"


def compiler_path() -> str:
    from iree.compiler.tools.binaries import find_tool

    return str(find_tool("iree-compile"))


def compile_mlir(mlir: str, flags: list[str], folder: str | Path, label: str = "", hint: str | None = None,
             log: Path | None = None) -> None:
    """Run iree-compile on ``mlir`` into ``folder``; while it runs, report ``label`` and the seconds so far
    to the caller's status line (base.compile_status) about every :data:`STATUS_INTERVAL` seconds. A failure
    is E0782 with the compiler's ``error:`` lines, its whole stderr (often megabytes of MLIR dump) written to
    ``log``."""
    source = os.path.join(folder, "model.mlir")
    with open(source, "w", encoding="utf-8") as f:
        f.write(mlir)
    command = [compiler_path(), *flags, f"--iree-parameter-export={PARAMETER_SCOPE}={os.path.join(folder, PARAMS)}",
               f"--iree-parameter-export-minimum-size={PARAMETER_MIN_BYTES}", source,
               "-o", os.path.join(folder, MODULE)]
    status = compile_status()
    start = time.monotonic()
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            try:
                while True:
                    try:  # communicate() again after a timeout loses no output (and drains the pipes)
                        _, stderr = proc.communicate(timeout=STATUS_INTERVAL)
                        break
                    except subprocess.TimeoutExpired:
                        elapsed = time.monotonic() - start
                        if elapsed > COMPILE_TIMEOUT:
                            raise compiler_failed(f"iree-compile did not finish in {COMPILE_TIMEOUT:.0f} s",
                                                   hint) from None
                        if status is not None:
                            status(label, elapsed)
            except BaseException:  # a timeout, or Ctrl-C: no compiler left running
                proc.kill()
                raise
    finally:
        os.unlink(source)
        if status is not None:
            status(label, None)
    if proc.returncode != 0:
        kept = None
        if log is not None:
            try:
                log.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(log, stderr)
                kept = log
            except OSError:
                pass
        raise compiler_failed(f"iree-compile failed:\n{compiler_errors(stderr)}", hint, kept)


#: What E0782 quotes of iree-compile's stderr: the lines after each ``error:`` line, each line cut at its width.
ERROR_CONTEXT_LINES, ERROR_LINE_WIDTH, ERROR_MAX_LINES = 4, 400, 40


def compiler_errors(stderr: str) -> str:
    """The part of iree-compile's stderr that says what failed: every line with ``error:`` and the few after
    it (its notes, the failing operation), each cut at :data:`ERROR_LINE_WIDTH` characters; without an
    ``error:`` line, the last lines. (The whole of it is usually an MLIR dump whose tail is not the error.)"""
    lines = stderr.strip().splitlines()
    marked = [i for i, line in enumerate(lines) if "error:" in line]
    if marked:
        keep = sorted({j for i in marked for j in range(i, min(i + 1 + ERROR_CONTEXT_LINES, len(lines)))})
    else:
        keep = list(range(max(0, len(lines) - ERROR_CONTEXT_LINES * 3), len(lines)))
    out, previous = [], -1
    for j in keep[:ERROR_MAX_LINES]:
        if previous >= 0 and j != previous + 1:
            out.append("…")
        line = lines[j]
        out.append(line if len(line) <= ERROR_LINE_WIDTH else line[:ERROR_LINE_WIDTH] + " …")
        previous = j
    if len(keep) > ERROR_MAX_LINES:
        out.append(f"… and {len(keep) - ERROR_MAX_LINES} more lines")
    return "\n".join(out)


def compile_log(options: Options, key: str) -> Path:
    """Where a failed compilation's whole stderr goes: the cache folder's ``failed/`` (named by the entry)."""
    return cache_root(options.cache_dir) / "failed" / f"{key[:24]}.iree-compile.txt"


def compiler_failed(message: str, hint: str | None = None, log: Path | None = None) -> DiagnosticError:
    notes = (Note(f"iree-compile's whole output: {log}"),) if log is not None else ()
    return DiagnosticError([Diagnostic(code="E0782", message=message, span=NO_SPAN, notes=notes,
                                       hint=hint or "report it with the model; --via numpy runs it meanwhile")])
