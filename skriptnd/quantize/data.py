"""Calibration data for ``sknd quantize``: read, checked against the graph's inputs, cut into samples.

DATA is a folder holding one ``<input>.npy`` per graph input, or an ``.npz`` with members of those names.
Each array's first axis counts samples; a sample has the input's shape (``[N, *shape]``), or, for an input
whose first extent is 1 (a batch of one), the input's shape without that axis (``[N, *shape[1:]]``: a stack
of images for an input ``[1, 3, 224, 224]``). Files are read by :mod:`skriptnd.io.npy` (numbers only, no
pickle, never more memory than the file holds). What a user can get wrong — a missing input, a shape that
fits neither form, different sample counts, no samples, NaN or infinity — is an E0850 diagnostic located at
the data file, with a note at the input's declaration, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note, register_codes
from skriptnd.io.npy import NpyError, read_npy, read_npz
from skriptnd.source import NO_SPAN, Span

register_codes({"E0850": "calibration data unusable"})

_NUMPY = {"real": np.float32, "int": np.int64, "bool": np.bool_}


def _error(path: Path, message: str, t: Tensor | None = None, hint: str | None = None) -> DiagnosticError:
    """E0850 located at the input's declaration (quoted with a caret) when there is one, else at the data
    path itself (line 0: a binary file has no line to quote); the message names the data file."""
    if t is not None and isinstance(t.span, Span) and t.span is not NO_SPAN:
        span, message = t.span, f"{message} (in {path})"
        notes: tuple[Note, ...] = (Note(f"input '{t.name}' is declared as {t.dtype}{list(t.shape)}"),)
    else:
        span, notes = Span(str(path), 0, 0, 0, 0), ()
    return DiagnosticError([Diagnostic(code="E0850", message=message, span=span, notes=notes, hint=hint)])


@dataclass
class Calibration:
    """The samples of each graph input: ``arrays[name]`` is ``[count, *input shape]``."""

    source: Path
    arrays: dict[str, np.ndarray]
    count: int

    def samples(self, limit: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """One feed per sample (the graph's input shapes), at most ``limit`` of them."""
        n = self.count if limit is None else min(self.count, limit)
        for i in range(n):
            yield {name: a[i] for name, a in self.arrays.items()}


def _read(path: Path, inputs: list[Tensor]) -> dict[str, tuple[Path, np.ndarray]]:
    names = [t.name for t in inputs]
    if path.is_dir():
        found: dict[str, tuple[Path, np.ndarray]] = {}
        for t in inputs:
            f = path / f"{t.name}.npy"
            if f.exists():
                try:
                    found[t.name] = (f, read_npy(f))
                except NpyError as err:
                    raise _error(f, f"cannot read the calibration data for input '{t.name}': {err.message}",
                                 t) from None
        return found
    if path.suffix == ".npz" and path.is_file():
        try:
            arrays = read_npz(path)
        except NpyError as err:
            raise _error(path, f"cannot read calibration data {path}: {err.message}") from None
        return {name: (path, arrays[name]) for name in names if name in arrays}
    what = "does not exist" if not path.exists() else "is neither a folder of .npy files nor an .npz file"
    raise _error(path, f"calibration data {path} {what}",
                 hint="give a folder with one <input>.npy per graph input (first axis: samples), or an .npz "
                      "with those names")


def load_calibration(path: Path | str, graph: Graph) -> Calibration:
    """The calibration samples at ``path`` for ``graph``'s inputs (see the module docstring); E0850."""
    path = Path(path)
    found = _read(path, list(graph.inputs))
    arrays: dict[str, np.ndarray] = {}
    count: int | None = None
    first: str | None = None
    for t in graph.inputs:
        if t.name not in found:
            where = f"{path / (t.name + '.npy')}" if path.is_dir() else f"a member '{t.name}' in {path}"
            raise _error(path, f"no calibration data for input '{t.name}': expected {where}", t)
        f, a = found[t.name]
        shape = tuple(int(d) if d is not None else -1 for d in t.shape)
        if any(d < 0 for d in shape):
            raise _error(f, f"input '{t.name}' has a dynamic shape {list(t.shape)}; calibration needs fixed shapes",
                         t, hint="give the graph's attributes with --attrib so that every input shape is known")
        if a.ndim == len(shape) + 1 and tuple(a.shape[1:]) == shape:
            samples = a
        elif shape and shape[0] == 1 and a.ndim == len(shape) and tuple(a.shape[1:]) == shape[1:]:
            samples = a.reshape((a.shape[0], *shape))
        else:
            raise _error(f, f"calibration data for input '{t.name}' has shape {list(a.shape)}; expected "
                         f"[samples, {', '.join(map(str, shape))}]"
                         + (f" or [samples, {', '.join(map(str, shape[1:]))}]" if shape and shape[0] == 1 else ""),
                         t, hint="the first axis counts samples; each sample has the input's shape")
        if samples.shape[0] == 0:
            raise _error(f, f"calibration data for input '{t.name}' holds no samples", t)
        if a.dtype.kind not in "biuf":
            raise _error(f, f"calibration data for input '{t.name}' is {a.dtype}, not numbers", t)
        if a.dtype.kind == "f" and not np.all(np.isfinite(samples)):
            bad = int(np.count_nonzero(~np.isfinite(samples)))
            raise _error(f, f"calibration data for input '{t.name}' holds {bad} NaN or infinite value"
                         f"{'s' if bad != 1 else ''}", t, hint="remove or repair those samples")
        if count is not None and samples.shape[0] != count:
            raise _error(f, f"input '{t.name}' has {samples.shape[0]} calibration samples but '{first}' has "
                         f"{count}; every input needs the same number", t)
        count, first = samples.shape[0], t.name
        arrays[t.name] = samples.astype(_NUMPY.get(t.dtype, samples.dtype), copy=False)
    if count is None:
        raise _error(path, f"graph '{graph.name}' has no inputs to calibrate")
    return Calibration(path, arrays, count)
