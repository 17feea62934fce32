"""`sknd doc`: the operator reference, rendered as Markdown from the parsed standard library.

docs/stdlib.md is this module's output for the whole standard library; a test keeps the two
equal, so the reference never drifts from the operators' definitions.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from skriptnd.resources import STDLIB_MODULES, stdlib_dir
from skriptnd.semantics.intrinsics import operator_kind
from skriptnd.syntax import ast, parse_module
from skriptnd.syntax.printer import format_expr, format_fragment, format_type

_KIND_TEXT = {
    "composite": "composite: defined by `@compose` from other operators",
    "primitive": "primitive: defined by its `@lower` formulas",
    "intrinsic": "intrinsic: no `@lower` or `@compose` in the spec; executed by a native implementation",
}


_NOTES_FILE = Path(__file__).with_name("opnotes.toml")


@dataclass(frozen=True)
class OperatorNotes:
    """Curated words for one operator (opnotes.toml): what each attribute means, and where it
    differs from PyTorch / ONNX. The spec gives operators as code only, so these live beside it."""

    attributes: dict[str, str]
    notes: tuple[str, ...]


@cache
def operator_notes() -> dict[str, OperatorNotes]:
    """`module.op` -> its curated notes (operators without any are absent)."""
    data = tomllib.loads(_NOTES_FILE.read_text(encoding="utf-8"))
    return {name: OperatorNotes(dict(entry.get("attributes", {})), tuple(entry.get("notes", ())))
            for name, entry in data.items()}


def _code(text: str) -> str:
    """Inline code; use _cell_code inside a table."""
    return "`" + text + "`"


def _cell_code(text: str) -> str:
    """Inline code in a Markdown table cell: GitHub and rich (markdown-it) split cells at `|` even
    inside code spans and drop the backslash of `\\|`, so the escape shows nowhere."""
    return "`" + text.replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    """Markdown prose in a table cell (a curated meaning): `|` escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def _params(defn: ast.Definition, kind: str) -> list[ast.ParamDecl]:
    return [d for b in defn.blocks if isinstance(b, ast.ParamBlock) and b.kind == kind for d in b.items]


def _constants(defn: ast.Definition) -> dict[str, str]:
    """@using names bound to a literal (no name inside, e.g. `padding_aligns = ["LOWER", "UPPER"]`),
    as text: the values a check's message refers to by `{padding_aligns}`."""
    found: dict[str, str] = {}
    for block in defn.blocks:
        if isinstance(block, ast.UsingBlock):
            for u in block.items:
                if isinstance(u.target, ast.LName) and not any(isinstance(n, ast.Name) for n in u.value.walk()):
                    found[u.target.name] = format_expr(u.value)
    return found


def _message(message: ast.StrLit | None, constants: dict[str, str]) -> str:
    """A check's message with its `{...}` fields filled: a literal the operator declares shows its
    value; anything that depends on the call (a shape) shows as the expression, in code."""
    if message is None:
        return ""
    parts = []
    for p in message.parts:
        if isinstance(p, str):
            parts.append(p)
        else:
            expr = format_expr(p.value)
            parts.append(_code(constants.get(expr, expr)))
    return "".join(parts)


def formula(defn: ast.Definition, comments: Sequence[ast.Comment] = ()) -> str:
    """The operator's definition as code: its @using names, then its @lower or @compose (and
    @update) blocks, printed canonically with the comments of the module (`comments`) that lie
    inside them, since they explain the formula. Empty for an intrinsic."""
    shown = tuple(b for b in defn.blocks if isinstance(b, ast.UsingBlock | ast.LowerBlock | ast.ComposeBlock))
    if not any(isinstance(b, ast.LowerBlock | ast.ComposeBlock) for b in shown):
        return ""
    inside = [c for c in comments if any(b.span.line <= c.span.line <= b.span.end_line for b in shown)]
    return format_fragment(shown, "blocks", inside).rstrip("\n")


def signature(module: str, defn: ast.Definition) -> str:
    """`module.op<T: num>{attrs}(inputs) -> (outputs)` on one line."""
    dtypes = [d for b in defn.blocks if isinstance(b, ast.DtypeBlock) for d in b.items]
    generics = "<" + ", ".join(f"{d.name}: {d.base}" for d in dtypes) + ">" if dtypes else ""

    def decl(d: ast.ParamDecl) -> str:
        text = f"{d.name}: {format_type(d.type)}"
        return text + (f" = {format_expr(d.default)}" if d.default is not None else "")

    attrs = _params(defn, "attrib")
    attr_text = "{" + ", ".join(decl(a) for a in attrs) + "}" if attrs else ""
    inputs = ", ".join(decl(i) for i in _params(defn, "input"))
    outputs = ", ".join(decl(o) for o in _params(defn, "output"))
    return f"{module}.{defn.name}{generics}{attr_text}({inputs}) -> ({outputs})"


def render_operator(module: str, defn: ast.Definition, comments: Sequence[ast.Comment] = ()) -> str:
    """One operator's reference; `comments` are its module's, for those inside its formula."""
    notes = operator_notes().get(f"{module}.{defn.name}", OperatorNotes({}, ()))
    lines = [f"### `{module}.{defn.name}`", "", f"*{_KIND_TEXT[operator_kind(defn)]}*", "", "```",
             signature(module, defn), "```", ""]
    dtypes = [d for b in defn.blocks if isinstance(b, ast.DtypeBlock) for d in b.items]
    if dtypes:
        lines += ["| generic type | allowed | default |", "|---|---|---|"]
        lines += [f"| `{d.name}` | {d.base} | {d.default or ''} |" for d in dtypes]
        lines.append("")
    attrs = _params(defn, "attrib")
    if attrs:
        meaning = bool(notes.attributes)
        lines += ["| attribute | type | default |" + (" meaning |" if meaning else ""),
                  "|---|---|---|" + ("---|" if meaning else "")]
        for a in attrs:
            default = _cell_code(format_expr(a.default)) if a.default is not None else ("null" if a.type.optional
                                                                                        else "required")
            row = f"| `{a.name}` | {_cell_code(format_type(a.type))} | {default} |"
            lines.append(row + (f" {_cell(notes.attributes.get(a.name, ''))} |" if meaning else ""))
        lines.append("")
    for kind in ("input", "output"):
        params = _params(defn, kind)
        if params:
            lines += [f"| {kind} | type |", "|---|---|"]
            lines += [f"| `{p.name}` | {_cell_code(format_type(p.type))} |" for p in params]
            lines.append("")
    code = formula(defn, comments)
    if code:
        lines += ["Formula:", "", "```", code, "```", ""]
    asserts = [a for b in defn.blocks if isinstance(b, ast.AssertBlock) for a in b.items]
    if asserts:
        constants = _constants(defn)
        lines.append("Checks:")
        lines.append("")
        for a in asserts:
            message = _message(a.message, constants)
            lines.append(f"- {_code(format_expr(a.condition))}" + (f": {message}" if message else ""))
        lines.append("")
    if notes.notes:
        lines += ["For PyTorch / ONNX users:", ""]
        lines += [f"- {n}" for n in notes.notes]
        lines.append("")
    return "\n".join(lines)


def load_module(name: str) -> ast.Module:
    path = stdlib_dir() / f"{name}.sknd"
    module, diags = parse_module(path.read_text(encoding="utf-8"), str(path))
    if module is None or diags:
        raise ValueError(f"standard module {name} does not parse: {diags[0] if diags else ''}")
    return module


def render_module(name: str, parsed: ast.Module | None = None) -> str:
    parsed = parsed if parsed is not None else load_module(name)
    defs = list(parsed.definitions)
    lines = [f"## Module `{name}`", ""]
    lines += [f"- [`{name}.{d.name}`](#{name}{d.name})" for d in defs]
    lines.append("")
    for d in defs:
        lines.append(render_operator(name, d, parsed.comments))
    return "\n".join(lines)


def render_stdlib() -> str:
    modules = {name: load_module(name) for name in STDLIB_MODULES}
    count = sum(len(m.definitions) for m in modules.values())
    intro = [
        "# Standard library reference",
        "",
        "Generated by `sknd doc --output docs/stdlib.md` from `stdlib/*.sknd` (spec chapter 4, with the",
        "fixes listed in [spec-errata.md](spec-errata.md)); do not edit by hand.",
        "",
        f"{count} operators in {len(modules)} modules: "
        + ", ".join(f"[`{n}`](#module-{n}) ({len(m.definitions)})" for n, m in modules.items()) + ".",
        "",
    ]
    return "\n".join(intro + [render_module(n, m) for n, m in modules.items()]).rstrip() + "\n"


def render_target(target: str | None) -> str:
    """The reference for everything, a module (`nn`) or one operator (`nn.conv`)."""
    if not target:
        return render_stdlib()
    module, _, op = target.partition(".")
    if module not in STDLIB_MODULES:
        raise LookupError(f"no standard module '{module}' (modules are {', '.join(STDLIB_MODULES)})"
                          f"{_operator_suggestion(module) if not op else ''}")
    parsed = load_module(module)
    if not op:
        return render_module(module, parsed)
    for d in parsed.definitions:
        if d.name == op:
            return render_operator(module, d, parsed.comments)
    close = difflib.get_close_matches(op, [d.name for d in parsed.definitions], n=1)
    raise LookupError(f"no operator '{op}' in module '{module}'" + (f"; did you mean '{module}.{close[0]}'?"
                                                                    if close else ""))


def _operator_suggestion(name: str) -> str:
    """`relu` is not a module but an operator of one (or of several): "; did you mean nn.relu?" naming each
    module that defines it, else the closest operator names; '' when nothing is close."""
    qualified = [f"{m}.{d.name}" for m in STDLIB_MODULES for d in load_module(m).definitions
                 if d.kind == "operator"]
    close = [name] if any(q.endswith(f".{name}") for q in qualified) else \
        difflib.get_close_matches(name, sorted({q.split(".", 1)[1] for q in qualified}), n=3)
    found = [q for c in close for q in qualified if q.endswith(f".{c}")]  # closest first, each module's
    return f"; did you mean {' or '.join(found)}?" if found else ""
