#!/usr/bin/env python3
"""Generate the standard library modules ``stdlib/<module>.sknd`` from chapter 4 of the spec.

Each section 4.x of the spec names its module in its intro paragraph ("The following operators are
defined in the `layout` module.").  For every module this writes, in order:

* a header comment ``# SkriptND standard library: module <name> (NNEF 2.0 rev 8, section 4.x)``,
* ``import <m>;`` for every other stdlib module referenced with a qualified name (``math.add(``),
* every operator-definition code block of the section, verbatim and in spec order, each preceded by
  ``# spec §<section>: <heading>``.

It also writes ``tests/data/stdlib_operator_names.json`` (module -> operator names in spec order) and
prints a report: operator counts, blocks that are not operator definitions, duplicate operator names,
qualified references to unknown operators, and unqualified invocations of operators not defined in
the same module (in ``@compose``/``@update`` blocks: right after ``=`` or a control-flow keyword,
possibly after a ``label:``).  The spec text is changed only by the ERRATA below, each recorded
in docs/spec-errata.md (a test keeps the two in sync) and marked in the generated file.

Usage: ``build_stdlib.py [SPEC]`` (run as a script; it imports ``extract_spec_blocks`` from its own
directory).  SPEC defaults to ``../shared/spec/nnef-2.0-skriptnd-rev8.md`` relative to the repo root.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from extract_spec_blocks import DEFAULT_SPEC, REPO_ROOT, Block, parse_blocks, strip_comments

STDLIB_DIR = REPO_ROOT / "stdlib"
NAMES_JSON = REPO_ROOT / "tests" / "data" / "stdlib_operator_names.json"

@dataclass(frozen=True)
class Erratum:
    """A fix to the spec's text of one operator: `old` must occur in it exactly `count` times."""

    operator: str
    old: str
    new: str
    reason: str
    count: int = 1


#: Fixes that keep the spec's intent where its text cannot pass its own rules (docs/spec-errata.md).
ERRATA: tuple[Erratum, ...] = (
    Erratum("space_to_batch", "input: T[b,c..(ncx),s..(d),c..(!ncx)];",
            "input: T[b,c..(data_format == 'NCX'),s..(d),c..(data_format != 'NCX')];",
            "the input shape uses the @using symbol 'ncx', which §2.9 makes invisible in @input"),
    Erratum("batch_to_space", "input: T[b,c..(ncx),s..(d),c..(!ncx)];",
            "input: T[b,c..(data_format == 'NCX'),s..(d),c..(data_format != 'NCX')];",
            "the input shape uses the @using symbol 'ncx', which §2.9 makes invisible in @input"),
    Erratum("space_to_depth", "input: T[b,c..(ncx),s..(d),c..(!ncx)];",
            "input: T[b,c..(data_format == 'NCX'),s..(d),c..(data_format != 'NCX')];",
            "the input shape uses the @using symbol 'ncx', which §2.9 makes invisible in @input"),
    Erratum("depth_to_space", "input: T[b,c..(ncx),s..(d),c..(!ncx)];",
            "input: T[b,c..(data_format == 'NCX'),s..(d),c..(data_format != 'NCX')];",
            "the input shape uses the @using symbol 'ncx', which §2.9 makes invisible in @input"),
    Erratum("transpose", "perm: int..(d) = [d-1:-1:-1];", "perm: int..(d) = [axis + d - 1 : axis - 1 : -1];",
            "'perm' holds absolute axes (its @assert wants axis <= perm < input.rank; shuffle passes absolute "
            "axes), so the default [d-1:-1:-1] fails that assertion whenever axis != 0"),
)


# Strides for rank 0: `prods[rank-1::-1]` slices from index -1, the last item (§2.4), so it gives
# [1] instead of []; `prods[::-1][1:]` (as layout.tensor writes it) is right for every rank.
ERRATA += (
    Erratum("flatten", "strides = prods[rank-1::-1];", "strides = prods[::-1][1:];",
            "strides of rank 0: prods[rank-1::-1] is [1], not [], because index -1 means the last item"),
    Erratum("unflatten", "strides = prods[d-1::-1];", "strides = prods[::-1][1:];",
            "strides of rank 0: prods[d-1::-1] is [1], not [], because index -1 means the last item"),
    Erratum("nearest_resize", "input[i[axes] <- (int(r) <? s[axes] - 1)..]",
            "input[i[axes] <- (0 >? int(r) <? s[axes] - 1)..]",
            "the source index is clamped at the upper end only; FLOOR rounding with the SYMMETRIC transform "
            "maps the first sample of an upscaled axis to -1"),
)

# Comparisons keep the spec's two generic types X and Y (`math.eq<real, real>(a, b)`, as converted
# files write it); which pairs may meet (two numbers, or two values of one type) is a rule of binding
# (erratum L2 in docs/spec-errata.md, skriptnd.semantics.signature.SAME_TYPE_OPERATORS), not a change of signature.


def apply_errata(operator: str, text: str) -> tuple[str, list[Erratum]]:
    applied = []
    for e in ERRATA:
        if e.operator != operator:
            continue
        found = text.count(e.old)
        if found != e.count:
            raise SystemExit(f"erratum for {operator} expects {e.count} x {e.old!r}, found {found}")
        text = text.replace(e.old, e.new)
        applied.append(e)
    return text, applied


# A stray quote at the end of a message string (the message reads "... (inclusive)'").
ERRATA += (
    Erratum("relu", "\"'alpha' must be between 0 and 1 (inclusive)'\"", "\"'alpha' must be between 0 and 1 (inclusive)\"",
            "a stray quote closes the message: it reads \"... (inclusive)'\""),
)


# The expected mapping; the spec text wins if it says otherwise (a warning is printed).
EXPECTED = {
    "4.1": "layout",
    "4.2": "math",
    "4.3": "linalg",
    "4.4": "nn",
    "4.5": "image",
    "4.6": "quant",
    "4.7": "algo",
}
MODULES = tuple(EXPECTED.values())

SECTION = re.compile(r"^###\s+(4\.\d+)\.?\s")
MODULE_INTRO = re.compile(r"operators are defined in the `(\w+)` module")
OPERATOR = re.compile(r"^\s*(?:public\s+)?operator\s+(\w+)", re.MULTILINE)
QUALIFIED = re.compile(r"(?<![\w.])(" + "|".join(MODULES) + r")\.([A-Za-z_]\w*)\s*(?:[({]|<(?!=))")
BODY = re.compile(r"@(compose|update)\s*\{")
# An invocation position: after a lone `=` or a control-flow keyword (with an optional `..(...)`),
# then an optional `label:`, then `name(`, `name{` or `name<`.
INVOCATION = re.compile(
    r"(?:(?<![=<>!+\-*/%&|^?:])=(?!=)|\b(?:if|elif|then|else|while|do|unroll)\b(?:\.\.\([^()]*\))?)"
    r"\s*(?:[A-Za-z_]\w*\s*:(?!=)\s*)?([A-Za-z_][\w.]*)(?:\s*[({]|<(?!=))"
)
# Casts and built-in functions (spec 2.4); in @compose these names read as operator invocations.
BUILTINS = set(
    "int real bool str sqrt exp log sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh"
    " round floor ceil frac abs sign".split()
)


def section_modules(spec: str) -> dict[str, str]:
    """Map each section 4.x to the module named in its intro paragraph."""
    modules: dict[str, str] = {}
    section = ""
    for line in spec.splitlines():
        if m := SECTION.match(line):
            section = m.group(1)
        elif section and section not in modules and (m := MODULE_INTRO.search(line)):
            modules[section] = m.group(1)
    for section, name in EXPECTED.items():
        if modules.get(section, name) != name:
            print(f"WARNING: spec names module {modules[section]!r} for {section} (expected {name!r})")
        modules.setdefault(section, name)
    return modules


def compose_bodies(code: str) -> list[tuple[int, str]]:
    """(offset, text) of the brace-enclosed bodies of ``@compose``/``@update`` blocks in ``code``."""
    bodies = []
    for m in BODY.finditer(code):
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        bodies.append((m.end(), code[m.end() : i - 1]))
    return bodies


def invocations(block: Block) -> list[tuple[int, str]]:
    """(spec line, name) of every operator invoked in an invocation position of ``block``."""
    code = strip_comments(block.text)
    found = []
    for offset, body in compose_bodies(code):
        for m in INVOCATION.finditer(body):
            line = block.spec_line + code.count("\n", 0, offset + m.start(1))
            found.append((line, m.group(1)))
    return found


def render(module: str, section: str, blocks: list[Block]) -> str:
    """The text of one stdlib module file."""
    used = {m.group(1) for b in blocks for m in QUALIFIED.finditer(strip_comments(b.text))}
    lines = [f"# SkriptND standard library: module {module} (NNEF 2.0 rev 8, section {section})", ""]
    imports = [f"import {name};" for name in MODULES if name in used and name != module]
    if imports:
        lines += [*imports, ""]
    for b in blocks:
        op = OPERATOR.match(strip_comments(b.text)).group(1)
        text, applied = apply_errata(op, b.text)
        lines.append(f"# spec §{b.section}: {b.heading}")
        lines += [f"# erratum (docs/spec-errata.md): {reason}" for reason in dict.fromkeys(e.reason for e in applied)]
        lines += [*text.splitlines(), ""]
    return "\n".join(lines)


def generate(spec: str) -> dict[str, str]:
    """module name -> the text of stdlib/<module>.sknd, from the spec's markdown."""
    modules = section_modules(spec)
    by_module: dict[str, list[Block]] = {m: [] for m in modules.values()}
    section_of = {module: section for section, module in modules.items()}
    for b in parse_blocks(spec):
        if b.chapter == 4 and OPERATOR.match(strip_comments(b.text)):
            by_module[modules[".".join(b.section.split(".")[:2])]].append(b)
    return {module: house_style(render(module, section_of[module], blocks), module)
            for module, blocks in by_module.items()}


def house_style(text: str, module: str) -> str:
    """The module as `sknd fmt` writes it (comments kept), so the shipped stdlib passes `sknd fmt --check`."""
    if str(REPO_ROOT) not in sys.path:  # run as a script from a checkout
        sys.path.insert(0, str(REPO_ROOT))
    from skriptnd.syntax import parse_module
    from skriptnd.syntax.printer import format_module

    tree, diags = parse_module(text, f"{module}.sknd")
    if tree is None or diags:
        raise SystemExit(f"generated {module}.sknd does not parse: {diags[:1]}")
    return format_module(tree)


def main(argv: list[str]) -> int:
    spec = (Path(argv[1]) if len(argv) > 1 else DEFAULT_SPEC).read_text(encoding="utf-8")
    modules = section_modules(spec)
    by_module: dict[str, list[Block]] = {m: [] for m in modules.values()}
    section_of = {module: section for section, module in modules.items()}
    for b in parse_blocks(spec):
        if b.chapter != 4:
            continue
        module = modules[".".join(b.section.split(".")[:2])]
        if OPERATOR.match(strip_comments(b.text)):
            by_module[module].append(b)
        else:
            print(f"NOT AN OPERATOR: spec line {b.spec_line} (§{b.section}) skipped")

    names = {m: [n for b in blocks for n in OPERATOR.findall(b.text)] for m, blocks in by_module.items()}
    STDLIB_DIR.mkdir(exist_ok=True)
    for module, blocks in by_module.items():
        text = house_style(render(module, section_of[module], blocks), module)
        (STDLIB_DIR / f"{module}.sknd").write_text(text, encoding="utf-8")
    NAMES_JSON.parent.mkdir(parents=True, exist_ok=True)
    NAMES_JSON.write_text(json.dumps(names, indent=2) + "\n", encoding="utf-8")

    print("operators per module:")
    for module, ops in names.items():
        print(f"  {module:<7} {len(ops):4d}   ({section_of[module]})")
    print(f"  total   {sum(len(ops) for ops in names.values()):4d}")
    counts = Counter(n for ops in names.values() for n in ops)
    for name in sorted(n for n, c in counts.items() if c > 1):
        print(f"DUPLICATE operator name {name!r} in {[m for m, ops in names.items() if name in ops]}")
    for module, blocks in by_module.items():
        for b in blocks:
            op = OPERATOR.match(strip_comments(b.text)).group(1)
            for line, name in invocations(b):
                qualifier, _, local = name.rpartition(".")
                if qualifier == module:
                    print(f"SELF-QUALIFIED {name} in {module}.{op} (spec line {line})")
                elif qualifier and local not in names.get(qualifier, []):
                    print(f"UNKNOWN qualified {name} in {module}.{op} (spec line {line})")
                elif not qualifier and name not in names[module]:
                    what = " (built-in function / cast name)" if name in BUILTINS else ""
                    print(f"UNQUALIFIED {name}{what} in {module}.{op} (spec line {line})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
