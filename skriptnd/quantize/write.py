"""Writing the quantized model folder: the source folder's modules and weights, with the main graph's
``@quantize`` block replaced by the chosen entries.

The graph text is the user's own (comments, layout and all): only the ``@quantize`` block of the quantized
graph is removed and a new one inserted before the graph's closing brace, and ``import quant;`` added when
missing; the module is then parsed and re-printed by the house formatter (skriptnd.interop.writer.render).
Everything is written into a temporary sibling that replaces OUT only when complete and when the written
folder loads, composes and has readable quantization parameters (E0851 otherwise, nothing written).
Weights are copied byte for byte (regular files inside the model folder only: skriptnd.untrusted).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from skriptnd.compose.quantization import qparams, quantized_tensors
from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.interop.writer import literal, render, write_folder
from skriptnd.model import Model, load
from skriptnd.quantize.scales import Entry
from skriptnd.source import Span
from skriptnd.syntax import parse_module
from skriptnd.syntax.ast import QuantizeBlock
from skriptnd.untrusted import read_regular

register_codes({"E0851": "the quantized model does not check"})

_ORDER = ("zero_point", "bits", "signed", "symmetric", "channel_axis", "scale")


def entry_text(e: Entry) -> str:
    attrs = ", ".join(f"{k}={literal(_plain(e.attribs[k]))}" for k in _ORDER if k in e.attribs)
    return f"{e.tensor}: quant.zero_point_linear_quantize{{{attrs}}};"


def _plain(v: object) -> object:
    if isinstance(v, np.generic):
        return v.item()
    return v


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(s) for s in lines[:line - 1]) + col - 1


def with_quantize_block(text: str, path: str, graph: str, entries: list[Entry], header: str) -> str:
    """``text`` (a module) with graph ``graph``'s @quantize block replaced by ``entries``."""
    module, diags = parse_module(text, path)
    if module is None or diags:
        raise AssertionError(f"{path} no longer parses")  # it was loaded and checked a moment ago
    definition = next(d for d in module.definitions if d.kind == "graph" and d.name == graph)
    lines = text.splitlines(keepends=True)
    cuts: list[tuple[int, int, str]] = []  # (start, end, replacement), applied back to front
    for block in definition.blocks:
        if isinstance(block, QuantizeBlock):
            start = _offset(lines, block.span.line, block.span.col)
            cuts.append((start, _offset(lines, block.span.end_line, block.span.end_col), ""))
    body = "\n".join(f"        {entry_text(e)}" for e in entries)
    block_text = f"    # {header}\n    @quantize {{\n{body}\n    }}\n"
    end = _offset(lines, definition.span.end_line, definition.span.end_col) - 1  # the closing brace
    cuts.append((end, end, block_text))
    if not any(i.module == "quant" for i in module.imports):
        first = module.definitions[0]
        at = _offset(lines, first.span.line, 1)
        if module.imports:
            last = max(module.imports, key=lambda i: (i.span.line, i.span.col))
            at = _offset(lines, last.span.end_line + 1, 1)  # the line after the last import
            cuts.append((at, at, "import quant;\n"))
        else:
            cuts.append((at, at, "import quant;\n\n"))
    for start, stop, new in sorted(cuts, key=lambda c: c[0], reverse=True):
        text = text[:start] + new + text[stop:]
    return render(text, path)


def _check(folder: Path, graph: str, where: Span) -> None:
    try:
        composed = load(folder).compose(graph)
        for t in quantized_tensors(composed):
            qparams(t)
    except DiagnosticError as err:
        first = err.diagnostics[0]
        raise DiagnosticError([Diagnostic(code="E0851", span=where, message="the quantized model would not check, "
                                          f"so nothing was written: {first.message}",
                                          hint="please report it with the model: sknd quantize should always "
                                               "write a model that checks")]) from None


def write_quantized(model: Model, graph: str, entries: list[Entry], out: Path | str, header: str,
                    overwrite: bool = False) -> Path:
    """Write the quantized copy of ``model`` (graph ``graph`` with ``entries``) to ``out``, atomically."""
    program = model.program
    assert program.main is not None
    main_path = Path(program.main.path)
    src = Path(program.model_dir)
    text = with_quantize_block(program.main.source.text, str(main_path), graph, entries, header)
    where = Span(str(main_path), 1, 1, 1, 2)

    root, target_dir = src.resolve(), Path(out).resolve()

    def fill(tmp: Path) -> None:
        for f in sorted(src.rglob("*")):
            rel = f.relative_to(src)
            if any(part.startswith(".") for part in rel.parts) or f.is_symlink() or not f.is_file():
                continue
            real = f.resolve()
            if not real.is_relative_to(root) or real.is_relative_to(target_dir):
                continue  # never outside the model folder (a linked folder), nor an earlier OUT inside it
            if f.suffix not in (".sknd", ".dat"):
                continue
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.resolve() == main_path.resolve():
                target.write_text(text, encoding="utf-8")
            else:
                target.write_bytes(read_regular(f))
        if not (tmp / main_path.name).exists():  # a single main .sknd file given outside its folder
            (tmp / main_path.name).write_text(text, encoding="utf-8")
        _check(tmp, graph, where)

    return write_folder(out, fill, overwrite=overwrite)
