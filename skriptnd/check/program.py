"""`sknd check`: load every model root and module the command line names (skriptnd.check.paths) as a
Program (the module and, transitively, its imports) and report its diagnostics: reading and syntax problems
of every loaded module, unknown modules, the module-level checks (semantics.modules) and then
every check registered in DEFINITION_CHECKS, once per definition."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from skriptnd.check.cache import cached_check
from skriptnd.check.graph import STRICT_CODES, VERBOSE_CODES, check_graph, check_operator
from skriptnd.check.paths import Excludes, collect
from skriptnd.diagnostics import Diagnostic
from skriptnd.semantics.binding import binding_order_diagnostics
from skriptnd.semantics.module_checks import check_modules
from skriptnd.semantics.modules import LoadedModule, Program, load_program
from skriptnd.semantics.typecheck import check_definition
from skriptnd.source import SourceFile
from skriptnd.syntax import ast

DefinitionCheck = Callable[[Program, LoadedModule, ast.Definition], list[Diagnostic]]


def _binding_order(program: Program, module: LoadedModule, definition: ast.Definition) -> list[Diagnostic]:
    return binding_order_diagnostics(definition)


def _types(program: Program, module: LoadedModule, definition: ast.Definition) -> list[Diagnostic]:
    def lookup(name: str) -> ast.Definition | None:
        found = program.resolve_operator(name, module)
        return found[1] if found is not None else None

    return check_definition(definition, lookup, module.name)


#: Checks run on each definition of each checked module (see Program.checked_modules), in order.
DEFINITION_CHECKS: list[DefinitionCheck] = [_types, _binding_order]


def check_composition(program: Program, module: LoadedModule, definition: ast.Definition) -> list[Diagnostic]:
    """What composing one definition reports: a graph for its declared defaults, an operator's
    @compose body for symbolic inputs (skriptnd.check.graph; cached on disk by
    compose.check_cache, keyed by the whole program's text)."""
    check = check_graph if definition.kind == "graph" else check_operator
    return cached_check(program, module, definition, check)


def check_graphs(program: Program, module: LoadedModule, found: list[Diagnostic]) -> list[Diagnostic]:
    """The graphs of `module` composed for their declared defaults, and the @compose bodies of its
    operators bound for symbolic inputs (skriptnd.check.graph): what `sknd compose` would report. Only once everything else is clean (`found` has no error):
    composing a broken program would report the same problems again, less well."""
    if module.ast is None or any(d.severity == "error" for d in found):
        return []
    ordered = sorted(module.ast.definitions, key=lambda d: d.kind == "graph")  # operators first
    return one_per_location([d for definition in ordered for d in check_composition(program, module, definition)])


def one_per_location(diags: list[Diagnostic]) -> list[Diagnostic]:
    """The first diagnostic of each (code, place): an operator's body found wrong for symbolic
    extents is not reported again, with numbers, by each graph that decomposes it."""
    seen: set[tuple] = set()
    out = []
    for d in diags:
        key = (d.code, d.span.file, d.span.line, d.span.col)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


@dataclass
class CheckResult:
    sources: dict[str, SourceFile] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0


def check_program(program: Program, *, composition: bool = True) -> list[Diagnostic]:
    """Everything wrong with a loaded program: its loading diagnostics (reading, syntax, imports),
    the module-level checks, then each DEFINITION_CHECKS hook on every definition of every
    checked module that parsed cleanly."""
    diags = list(program.diagnostics)
    diags.extend(check_modules(program))
    for module in program.checked_modules():
        if module.ast is None:
            continue
        for definition in module.ast.definitions:
            for check in DEFINITION_CHECKS:
                diags.extend(check(program, module, definition))
    for module in program.checked_modules() if composition else ():
        diags.extend(check_graphs(program, module, diags))
    # two checks may find the same problem (e.g. an unknown tensor in @quantize): report it once
    def key(d: Diagnostic) -> tuple:
        return d.code, d.span.file, d.span.line, d.span.col, d.message

    unique = {key(d): d for d in reversed(diags)}
    return [d for d in diags if unique[key(d)] is d]


def check_paths(paths: list[str], excludes: Excludes | None = None) -> CheckResult:
    """Check the `.sknd` files `paths` name (skriptnd.check.paths.collect: files, folders walked, model roots):
    each model root as one program, then each of its files that program did not load as a module of the
    root, then every other file as a module of its model folder."""
    found = collect(paths, excludes)
    result = CheckResult()
    diags: list[Diagnostic] = list(found.diagnostics)
    checked: set[str] = set()
    programs: list[Program] = []
    for root, files in found.models.items():
        program = load_program(root)
        programs.append(program)
        loaded = {os.path.realpath(m.path) for m in program.modules.values()}
        programs.extend(load_program(f, model_dir=root) for f in files if os.path.realpath(f) not in loaded)
    programs.extend(load_program(f, model_dir=folder) for f, folder in found.modules)
    for program in programs:
        for module in program.modules.values():
            if module.source is not None:
                result.sources.setdefault(module.source.path, module.source)
        for module in program.checked_modules():
            if module.source is not None:
                checked.add(module.source.path)
        diags.extend(check_program(program))
    result.diagnostics = list(dict.fromkeys(diags))
    result.files = len(checked)
    return result


def shown(diags: list[Diagnostic], *, strict: bool = False, verbose: bool = False) -> list[Diagnostic]:
    """The diagnostics `sknd check` shows: conditional assertions (STRICT_CODES) only with
    --strict, those on dynamic extents (VERBOSE_CODES) only with --verbose."""
    return [d for d in diags if (strict or d.code not in STRICT_CODES) and (verbose or d.code not in VERBOSE_CODES)]
