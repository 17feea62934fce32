"""The language features: diagnostics conversion, hover, go-to-definition, references,
completion, document symbols and formatting, as functions of a `Workspace` and a position.

Every function takes LSP (0-based) positions and returns lsprotocol objects; spans of the AST
are 1-based (see locate.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from skriptnd.diagnostics import Diagnostic, Severity
from skriptnd.lsp.locate import (
    Word,
    contains,
    definition_at,
    from_lsp,
    name_span,
    nodes_at,
    symbol_at,
    word_at,
    words_in,
)
from skriptnd.lsp.shapes import composed_type
from skriptnd.lsp.workspace import MAX_FILE_BYTES, Analysis, Workspace, same_file
from skriptnd.resources import STDLIB_MODULES
from skriptnd.semantics.builtins import BUILTIN_FUNCTIONS
from skriptnd.semantics.docgen import render_operator, signature
from skriptnd.semantics.modules import LoadedModule
from skriptnd.semantics.scope import Kind, Symbol
from skriptnd.source import NO_SPAN, Span
from skriptnd.syntax import ast, parse_module
from skriptnd.syntax.printer import format_expr, format_module, format_type
from skriptnd.untrusted import UnsafeFile, read_regular

__all__ = [
    "BLOCK_NAMES",
    "KEYWORDS",
    "TRIGGER_CHARACTERS",
    "completion",
    "definition",
    "document_symbols",
    "formatting",
    "hover",
    "references",
    "to_lsp_diagnostic",
    "to_range",
]

BLOCK_NAMES = ("dtype", "attrib", "input", "using", "constant", "variable", "output", "assert", "lower",
               "compose", "update", "quantize")
KEYWORDS = ("version", "extension", "import", "public", "operator", "graph", "optional", "if", "then", "elif",
            "else", "for", "while", "do", "unroll", "with", "yield", "is", "in", "true", "false", "inf", "pi",
            "int", "real", "bool", "str", "type", "arith", "num")
PROPERTIES = ("shape", "rank", "size")
#: Characters after which editors ask for completions without the user asking.
TRIGGER_CHARACTERS = (".", "@", "{", ",")

_SEVERITY = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
             Severity.NOTE: types.DiagnosticSeverity.Information}
_SYMBOL_KIND = {"attrib": types.SymbolKind.Property, "input": types.SymbolKind.Variable,
                "output": types.SymbolKind.Variable, "constant": types.SymbolKind.Constant,
                "variable": types.SymbolKind.Variable}


# ---------------------------------------------------------------------------- positions


def to_range(span: Span) -> types.Range:
    """The LSP range of a span (0-based; the end stays exclusive)."""
    start_line, start_col = max(span.line - 1, 0), max(span.col - 1, 0)
    end_line, end_col = max(span.end_line - 1, 0), max(span.end_col - 1, 0)
    if (end_line, end_col) < (start_line, start_col):
        end_line, end_col = start_line, start_col
    return types.Range(types.Position(start_line, start_col), types.Position(end_line, end_col))


def _location(ws: Workspace, span: Span) -> types.Location:
    return types.Location(ws.uri_of(span.file), to_range(span))


def _markdown(text: str) -> types.MarkupContent:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)


# ---------------------------------------------------------------------------- diagnostics


def to_lsp_diagnostic(d: Diagnostic, uri_of: Callable[[str], str]) -> types.Diagnostic:
    """An lsprotocol Diagnostic: code, severity, the hint appended to the message (and kept in
    `data`), notes with a location as related information, the others appended too."""
    message = d.message
    related: list[types.DiagnosticRelatedInformation] = []
    for note in d.notes:
        if note.span is not None and note.span is not NO_SPAN:
            related.append(types.DiagnosticRelatedInformation(
                types.Location(uri_of(note.span.file), to_range(note.span)), note.message))
        else:
            message += f"\nnote: {note.message}"
    if d.hint:
        message += f"\nhint: {d.hint}"
    return types.Diagnostic(range=to_range(d.span), message=message, severity=_SEVERITY[d.severity],
                            code=d.code, source="sknd", related_information=related or None,
                            data={"hint": d.hint} if d.hint else None)


# ---------------------------------------------------------------------------- what is at a position


@dataclass
class Target:
    """What the cursor is on. kind: operator, symbol, module, attribute (of an invoked operator)."""

    kind: str
    word: Word
    span: Span  # where the name is written, in the document
    definition: ast.Definition | None = None  # the enclosing definition
    chain: list[ast.Node] | None = None
    operator: tuple[LoadedModule, ast.Definition] | None = None
    operator_name: str = ""
    symbol: Symbol | None = None
    module: LoadedModule | None = None
    attribute: ast.ParamDecl | None = None


def _masked_line(analysis: Analysis, line: int) -> str:
    lines = analysis.masked.split("\n")
    return lines[line - 1] if 1 <= line <= len(lines) else ""


def _next_char(line_text: str, index: int) -> str:
    rest = line_text[index:].lstrip()
    return rest[:1]


def _params(defn: ast.Definition, kind: str) -> list[ast.ParamDecl]:
    return [d for b in defn.blocks if isinstance(b, ast.ParamBlock) and b.kind == kind for d in b.items]


def target_at(analysis: Analysis, position: types.Position) -> Target | None:
    """Resolve the word at an LSP position to an operator, a symbol, a module or an attribute."""
    line, col = from_lsp(position.line, position.character)
    masked = _masked_line(analysis, line)
    word = word_at(masked, line, col)
    if word is None:
        return None
    path = str(analysis.document.path)
    tree = analysis.tree
    if tree is None:
        return None
    wspan = word.span(path)
    compact = "".join(word.parts)
    dotted = ".".join(word.parts)
    for imp in tree.imports:
        if contains(imp.span, line, col):
            name = word.upto_cursor()
            module = analysis.view.modules.get(name) or analysis.view.modules.get(dotted)
            return Target("module", word, wspan, module=module, operator_name=name) if module else None
    defn = definition_at(tree, line, col)
    if defn is None:
        return None
    if contains(defn.name_span, line, col) and word.text == defn.name:
        own = analysis.view_module
        if own is not None:
            return Target("operator", word, wspan, defn, operator=(own, defn), operator_name=defn.name)
    chain = nodes_at(defn, line, col)
    callees = {n.callee for n in chain if isinstance(n, ast.Call)} | {n.op for n in chain if isinstance(n, ast.Quantization)}
    after = _next_char(masked, word.end_col - 1)
    candidates = [dotted, word.upto_cursor()] if compact else []
    for name in dict.fromkeys(candidates):
        if name in callees or ("." in name and after in ("(", "{", "<")) or (name == dotted and "." in name):
            found = analysis.resolve(name)
            if found is not None:
                return Target("operator", word, wspan, defn, chain, operator=found, operator_name=name)
    if word.segment == 0 and len(word.parts) > 1 and word.head in analysis.view.modules \
            and analysis.view_module is not None and word.head in analysis.view_module.imported_names:
        return Target("module", word, wspan, defn, chain, module=analysis.view.modules[word.head],
                      operator_name=word.head)
    # an attribute name in an invocation's braces: `nn.conv{padding=0}`
    for node in reversed(chain):
        if isinstance(node, ast.AttrAssign) and node.name == word.head and (node.span.line, node.span.col) == (
                word.line, word.col):
            owner = next((n for n in reversed(chain) if isinstance(n, ast.Call | ast.Quantization)), None)
            name = owner.callee if isinstance(owner, ast.Call) else owner.op if owner is not None else ""
            found = analysis.resolve(name) if name else None
            decl = next((p for p in _params(found[1], "attrib") if p.name == node.name), None) if found else None
            return Target("attribute", word, wspan, defn, chain, operator=found, operator_name=name, attribute=decl)
    if word.segment != 0:
        return None
    head_span = Span(path, word.line, word.col, word.line, word.col + len(word.head))
    symbol = symbol_at(analysis.scope(defn), chain, word.head, line, col)
    if symbol is None:
        found = analysis.resolve(word.head) if after in ("(", "{", "<") else None
        if found is not None:
            return Target("operator", word, head_span, defn, chain, operator=found, operator_name=word.head)
        return None
    return Target("symbol", word, head_span, defn, chain, symbol=symbol)


# ---------------------------------------------------------------------------- hover


def _decl_text(decl: ast.ParamDecl) -> str:
    text = f"{decl.name}: {format_type(decl.type)}"
    return text + (f" = {format_expr(decl.default)}" if decl.default is not None else "")


def describe_symbol(sym: Symbol, definition: ast.Definition | None = None, composed: str | None = None) -> str:
    """Markdown for a symbol: its kind, name, type or declared shape, and where it comes from; `composed`: the
    type composition gives it (an intermediate tensor of a graph: `real[1, 8]`, where the checker says `real[]`)."""
    kind = sym.kind.value
    decl = sym.decl
    if decl is None and sym.kind is Kind.INDEX and definition is not None:
        decl = next((n for n in definition.walk() if isinstance(n, ast.LoopBound) and n.span == sym.span), None)
    if isinstance(decl, ast.ParamDecl) and decl.name == sym.name:
        text = f"{kind} `{sym.name}`: `{format_type(decl.type)}`"
        if decl.default is not None:
            text += f" = `{format_expr(decl.default)}`"
    elif sym.kind is Kind.USING:
        text = f"@using `{sym.name}`"
        if sym.value is not None:
            text += f" = `{format_expr(sym.value)}`"
        text += f"\n\ntype: `{sym.type}`"
    elif sym.kind is Kind.DTYPE:
        text = f"generic type `{sym.name}`: {sym.base or 'type'}"
        if isinstance(decl, ast.DtypeDecl) and decl.default:
            text += f" = {decl.default}"
    elif isinstance(decl, ast.LoopBound):
        text = f"{kind} `{sym.name}` < `{format_expr(decl.bound)}`: `{sym.type}`"
    else:
        text = f"{kind} `{sym.name}`: `{composed or sym.type}`"
        if sym.value is not None:
            text += f" = `{format_expr(sym.value)}`"
    if isinstance(decl, ast.ParamDecl) and decl.name != sym.name:
        text += f"\n\ndeclared by @{sym.block} `{_decl_text(decl)}`"
    elif sym.block:
        text += f"\n\ndeclared in @{sym.block}, line {sym.span.line}"
    return text


def _target(ws: Workspace, uri: str, position: types.Position) -> tuple[Analysis, Target] | None:
    """The open document's analysis and the operator or symbol under the cursor, if any."""
    analysis = ws.analysis(uri)
    target = target_at(analysis, position) if analysis is not None else None
    return None if target is None else (analysis, target)


def hover(ws: Workspace, uri: str, position: types.Position) -> types.Hover | None:
    found = _target(ws, uri, position)
    if found is None:
        return None
    analysis, target = found
    if target.kind == "operator" and target.operator is not None:
        module, defn = target.operator
        text = render_operator(module.name, defn)
    elif target.kind == "symbol" and target.symbol is not None:
        composed = composed_type(analysis.view, analysis.view_module, target.definition, target.symbol) \
            if target.definition is not None else None
        text = describe_symbol(target.symbol, target.definition, composed)
    elif target.kind == "module" and target.module is not None:
        module = target.module
        count = len(module.definitions)
        where = "standard library" if module.is_stdlib else str(module.path)
        text = f"module `{module.name}` ({where}): {count} operator{'s' if count != 1 else ''}"
    elif target.kind == "attribute" and target.attribute is not None:
        text = f"attribute `{target.attribute.name}` of `{target.operator_name}`: " \
               f"`{format_type(target.attribute.type)}`"
        if target.attribute.default is not None:
            text += f" = `{format_expr(target.attribute.default)}`"
    else:
        return None
    return types.Hover(contents=_markdown(text), range=to_range(target.span))


# ---------------------------------------------------------------------------- definition


def _module_line(module: LoadedModule, number: int) -> str:
    return module.source.line(number) if module.source is not None else ""


def _symbol_span(analysis: Analysis, sym: Symbol) -> Span:
    return name_span(sym.span, sym.name, analysis.line(sym.span.line))


def definition(ws: Workspace, uri: str, position: types.Position) -> list[types.Location] | None:
    found = _target(ws, uri, position)
    if found is None:
        return None
    analysis, target = found
    if target.kind == "operator" and target.operator is not None:
        return [_location(ws, target.operator[1].name_span)]
    if target.kind == "symbol" and target.symbol is not None:
        return [_location(ws, _symbol_span(analysis, target.symbol))]
    if target.kind == "module" and target.module is not None:
        path = str(target.module.path)
        return [types.Location(ws.uri_of(path), to_range(Span(path, 1, 1, 1, 1)))]
    if target.kind == "attribute" and target.attribute is not None and target.operator is not None:
        module = target.operator[0]
        decl = target.attribute
        return [_location(ws, name_span(decl.span, decl.name, _module_line(module, decl.span.line)))]
    return None


# ---------------------------------------------------------------------------- references


def _calls(defn: ast.Definition) -> Iterator[tuple[str, ast.Node]]:
    """(operator name, node) of every invocation and quantization operator of a definition."""
    for block in defn.blocks:
        if isinstance(block, ast.ComposeBlock):
            for node in block.walk():
                if isinstance(node, ast.Call):
                    yield node.callee, node
        elif isinstance(block, ast.QuantizeBlock):
            for q in block.items:
                yield q.op, q


def _callee_span(module: LoadedModule, name: str, node: ast.Node) -> Span:
    line_text = _module_line(module, node.span.line)
    span = node.span
    if isinstance(node, ast.Quantization):
        span = Span(span.file, span.line, span.col + len(node.tensor), span.end_line, span.end_col)
    elif isinstance(node, ast.Call) and node.label is not None:
        colon = line_text.find(":", span.col - 1)
        if colon >= 0:
            span = Span(span.file, span.line, colon + 2, span.end_line, span.end_col)
    return name_span(span, name, line_text)


def _operator_references(ws: Workspace, analysis: Analysis, target: tuple[LoadedModule, ast.Definition],
                         include_declaration: bool) -> list[types.Location]:
    target_module, target_defn = target
    out: list[types.Location] = []
    if include_declaration:
        out.append(_location(ws, target_defn.name_span))
    analyses = [analysis] + [a for u in ws.documents if (a := ws.analysis(u)) is not None and a is not analysis]
    seen_modules: set[Path] = set()
    for a in analyses:
        for module in a.view.modules.values():
            key = module.path.resolve()
            if module.ast is None or key in seen_modules:
                continue
            seen_modules.add(key)
            for defn in module.ast.definitions:
                for name, node in _calls(defn):
                    if name.split(".")[-1] != target_defn.name:
                        continue
                    found = a.view.resolve_operator(name, module)
                    if found is None or found[1] is not target_defn and not (
                            same_file(found[0].path, target_module.path) and found[1].name == target_defn.name):
                        continue
                    out.append(_location(ws, _callee_span(module, name, node)))
    return _unique_locations(out)


def _unique_locations(locations: list[types.Location]) -> list[types.Location]:
    seen: set[tuple] = set()
    out = []
    for loc in locations:
        key = (loc.uri, loc.range.start.line, loc.range.start.character)
        if key not in seen:
            seen.add(key)
            out.append(loc)
    return out


def _symbol_references(ws: Workspace, analysis: Analysis, target: Target,
                       include_declaration: bool) -> list[types.Location]:
    defn, sym = target.definition, target.symbol
    assert defn is not None and sym is not None
    scope = analysis.scope(defn)
    path = str(analysis.document.path)
    declaration = _symbol_span(analysis, sym)
    out: list[types.Location] = []
    lines = range(defn.span.line, defn.span.end_line + 1)
    for word in words_in(analysis.masked, lines):
        if word.head != sym.name or not contains(defn.span, word.line, word.col):
            continue
        chain = nodes_at(defn, word.line, word.col)
        if any(isinstance(n, ast.AttrAssign) and (n.span.line, n.span.col) == (word.line, word.col) for n in chain):
            continue  # an attribute name of an invoked operator
        if len(word.parts) > 1 and any(isinstance(n, ast.Call) and n.callee == ".".join(word.parts) for n in chain):
            continue  # a qualified operator name
        if symbol_at(scope, chain, word.head, word.line, word.col) is not sym:
            continue
        span = Span(path, word.line, word.col, word.line, word.col + len(word.head))
        if not include_declaration and (span.line, span.col) == (declaration.line, declaration.col):
            continue
        out.append(types.Location(analysis.document.uri, to_range(span)))
    return _unique_locations(out)


def references(ws: Workspace, uri: str, position: types.Position,
               include_declaration: bool = True) -> list[types.Location] | None:
    found = _target(ws, uri, position)
    if found is None:
        return None
    analysis, target = found
    if target.kind == "operator" and target.operator is not None:
        return _operator_references(ws, analysis, target.operator, include_declaration)
    if target.kind == "symbol" and target.symbol is not None:
        return _symbol_references(ws, analysis, target, include_declaration)
    return None


# ---------------------------------------------------------------------------- completion

_IMPORT = re.compile(r"^\s*import\s+(?:[\w.]+\s*,?\s*)*?([\w.]*)$")
_AFTER_AT = re.compile(r"@(\w*)$")
_AFTER_DOT = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(\w*)$")
_CALLEE_BEFORE_BRACE = re.compile(r"(?<![@\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*(?:<[\w\s,]*>)?\s*$")
_NOT_CALLEES = frozenset({"then", "else", "do", "unroll", "yield", "operator", "graph"})


def _module_names(analysis: Analysis) -> list[str]:
    names = list(STDLIB_MODULES)
    own = analysis.view_module.name if analysis.view_module is not None else ""
    names += [n for n in analysis.view.folder_module_names() if n != own and n != "main"]
    return list(dict.fromkeys(names))


def _module_definitions(analysis: Analysis, name: str) -> list[ast.Definition]:
    module = analysis.view.modules.get(name)
    if module is not None and module.ast is not None:
        return list(module.ast.definitions)
    found = analysis.view.find_module(name)
    if found is None:
        return []
    path = found[0]
    doc = analysis.view.sources.get(path.resolve())
    try:
        text = doc if doc is not None else read_regular(path, MAX_FILE_BYTES).decode("utf-8")
    except (OSError, UnsafeFile, UnicodeDecodeError):
        return []
    tree, _ = parse_module(text, str(path))
    return list(tree.definitions) if tree is not None else []


def _unclosed_brace(masked: str, offset: int, start: int) -> int:
    """The offset of the innermost '{' still open at offset (searching back to start), or -1."""
    depth = 0
    for i in range(offset - 1, start - 1, -1):
        ch = masked[i]
        if ch == "}":
            depth += 1
        elif ch == "{":
            if depth == 0:
                return i
            depth -= 1
    return -1


def _item(label: str, kind: types.CompletionItemKind, detail: str | None = None,
          doc: str | None = None, insert: str | None = None, sort: str | None = None) -> types.CompletionItem:
    return types.CompletionItem(label=label, kind=kind, detail=detail,
                                documentation=_markdown(doc) if doc else None, insert_text=insert,
                                sort_text=sort)


def _attribute_items(analysis: Analysis, masked: str, offset: int, defn: ast.Definition | None) -> list | None:
    start = 0
    if defn is not None and defn.span is not NO_SPAN:
        lines = masked.split("\n")
        start = sum(len(x) + 1 for x in lines[: defn.span.line - 1])
    brace = _unclosed_brace(masked, offset, start)
    if brace < 0:
        return None
    m = _CALLEE_BEFORE_BRACE.search(masked, max(start, brace - 200), brace)
    if m is None or m.group(1) in _NOT_CALLEES or m.group(1) in KEYWORDS:
        return None
    before = masked[max(start, m.start() - 20):m.start()].rstrip()
    if before.endswith(("operator", "graph")):
        return None
    found = analysis.resolve(m.group(1))
    if found is None:
        return []
    given = set(re.findall(r"([A-Za-z_]\w*)\s*=(?!=)", masked[brace + 1:offset]))
    items = []
    for decl in _params(found[1], "attrib"):
        if decl.name in given:
            continue
        detail = format_type(decl.type) + (f" = {format_expr(decl.default)}" if decl.default is not None else "")
        items.append(_item(decl.name, types.CompletionItemKind.Field, detail, insert=f"{decl.name}="))
    return items


def completion(ws: Workspace, uri: str, position: types.Position,
               trigger: str | None = None) -> types.CompletionList:
    """Module names after `import`, operators after `module.`, attributes inside an invocation's
    `{`, block names after `@`; else names in scope, operators and keywords (not when the editor
    asked by itself after a trigger character that has nothing specific to offer)."""
    analysis = ws.analysis(uri)
    empty = types.CompletionList(is_incomplete=False, items=[])
    if analysis is None:
        return empty
    line, col = from_lsp(position.line, position.character)
    masked = analysis.masked
    lines = masked.split("\n")
    line_text = lines[line - 1] if 1 <= line <= len(lines) else ""
    before = line_text[: col - 1]
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + len(before)
    tree = analysis.tree
    defn = definition_at(tree, line, col) if tree is not None else None

    if _IMPORT.match(before) and defn is None:
        items = [_item(n, types.CompletionItemKind.Module, "standard module" if n in STDLIB_MODULES else "module")
                 for n in _module_names(analysis)]
        return types.CompletionList(is_incomplete=False, items=items)
    if _AFTER_AT.search(before):
        items = [_item(n, types.CompletionItemKind.Keyword, f"@{n} block", sort=f"{i:02d}")
                 for i, n in enumerate(BLOCK_NAMES)]
        return types.CompletionList(is_incomplete=False, items=items)
    dot = _AFTER_DOT.search(before)
    if dot is not None and not before[: dot.start()].endswith(tuple("0123456789")):
        qualifier = re.sub(r"\s+", "", dot.group(1))
        modules = _module_names(analysis) + list(analysis.view.modules)
        if qualifier in modules:
            items = [_item(d.name, types.CompletionItemKind.Function, signature(qualifier, d),
                           render_operator(qualifier, d)) for d in _module_definitions(analysis, qualifier)]
            return types.CompletionList(is_incomplete=False, items=items)
        nested = sorted({n[len(qualifier) + 1:].split(".")[0] for n in modules if n.startswith(qualifier + ".")})
        if nested:
            items = [_item(n, types.CompletionItemKind.Module, "module") for n in nested]
            return types.CompletionList(is_incomplete=False, items=items)
        items = [_item(p, types.CompletionItemKind.Property, f"{qualifier}.{p}") for p in PROPERTIES]
        return types.CompletionList(is_incomplete=False, items=items)
    attrs = _attribute_items(analysis, masked, offset, defn)
    if attrs is not None:
        return types.CompletionList(is_incomplete=False, items=attrs)
    if trigger is not None:
        return empty
    return types.CompletionList(is_incomplete=False, items=_fallback_items(analysis, defn))


def _fallback_items(analysis: Analysis, defn: ast.Definition | None) -> list[types.CompletionItem]:
    items: list[types.CompletionItem] = []
    seen: set[str] = set()

    def add(item: types.CompletionItem) -> None:
        if item.label not in seen:
            seen.add(item.label)
            items.append(item)

    if defn is not None:
        scope = analysis.scope(defn)
        for sym in scope.table:
            add(_item(sym.name, types.CompletionItemKind.Variable, f"{sym.kind.value}: {sym.type}", sort=f"0{sym.name}"))
    if analysis.view_module is not None:
        for name in analysis.view_module.definitions:
            add(_item(name, types.CompletionItemKind.Function, "operator", sort=f"1{name}"))
        for name in sorted(analysis.view_module.imported_names):
            add(_item(name, types.CompletionItemKind.Module, "module", sort=f"2{name}"))
    for name in sorted(BUILTIN_FUNCTIONS):
        add(_item(name, types.CompletionItemKind.Function, "built-in function", sort=f"3{name}"))
    for kw in KEYWORDS:
        add(_item(kw, types.CompletionItemKind.Keyword, sort=f"4{kw}"))
    return items


# ---------------------------------------------------------------------------- document symbols


def _ok(span: Span) -> bool:
    return span is not NO_SPAN and span.file != NO_SPAN.file


def _head_span(span: Span, length: int) -> Span:
    return Span(span.file, span.line, span.col, span.line, span.col + length)


def _symbol(name: str, kind: types.SymbolKind, span: Span, selection: Span, detail: str | None = None,
            children: list[types.DocumentSymbol] | None = None) -> types.DocumentSymbol:
    rng, sel = to_range(span), to_range(selection)
    if (sel.start.line, sel.start.character) < (rng.start.line, rng.start.character) or \
            (sel.end.line, sel.end.character) > (rng.end.line, rng.end.character):
        sel = types.Range(rng.start, rng.start)
    return types.DocumentSymbol(name=name, kind=kind, range=rng, selection_range=sel, detail=detail,
                                children=children or None)


def _block_children(block: ast.Block) -> list[types.DocumentSymbol]:
    out: list[types.DocumentSymbol] = []
    if isinstance(block, ast.ParamBlock):
        for decl in block.items:
            if _ok(decl.span):
                detail = format_type(decl.type) + (f" = {format_expr(decl.default)}" if decl.default else "")
                out.append(_symbol(decl.name, _SYMBOL_KIND[block.kind], decl.span, _head_span(decl.span, len(decl.name)),
                                   detail))
    elif isinstance(block, ast.DtypeBlock):
        for d in block.items:
            if _ok(d.span):
                out.append(_symbol(d.name, types.SymbolKind.TypeParameter, d.span, _head_span(d.span, len(d.name)),
                                   d.base))
    elif isinstance(block, ast.UsingBlock):
        for u in block.items:
            names = [n for n in u.target.walk() if isinstance(n, ast.LName)]
            for n in names:
                if _ok(n.span) and _ok(u.span):
                    out.append(_symbol(n.name, types.SymbolKind.Constant, u.span, _head_span(n.span, len(n.name)),
                                       _shorten(format_expr(u.value))))
    elif isinstance(block, ast.ComposeBlock):
        for stmt in block.items:
            if not isinstance(stmt, ast.Assign) or not _ok(stmt.span):
                continue
            detail = stmt.value.callee if isinstance(stmt.value, ast.Call) else None
            for target in stmt.targets:
                for n in target.walk():
                    if isinstance(n, ast.LName) and _ok(n.span):
                        out.append(_symbol(n.name, types.SymbolKind.Variable, stmt.span,
                                           _head_span(n.span, len(n.name)), detail))
    return out


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def document_symbols(ws: Workspace, uri: str) -> list[types.DocumentSymbol]:
    """The outline: imports, then each operator or graph with its blocks and their declarations."""
    analysis = ws.analysis(uri)
    if analysis is None or analysis.tree is None:
        return []
    tree = analysis.tree
    out: list[types.DocumentSymbol] = []
    for imp in tree.imports:
        if _ok(imp.span):
            out.append(_symbol(imp.module, types.SymbolKind.Module, imp.span, imp.span, "import"))
    for defn in tree.definitions:
        if not _ok(defn.span):
            continue
        blocks = []
        for block in defn.blocks:
            if not _ok(block.span):
                continue
            name = "@" + ast.block_name(block)
            blocks.append(_symbol(name, types.SymbolKind.Namespace, block.span, _head_span(block.span, len(name)),
                                  children=_block_children(block)))
        kind = types.SymbolKind.Class if defn.kind == "graph" else types.SymbolKind.Function
        selection = defn.name_span if _ok(defn.name_span) else defn.span
        out.append(_symbol(defn.name, kind, defn.span, selection, defn.kind, blocks))
    return out


# ---------------------------------------------------------------------------- formatting


def formatting(ws: Workspace, uri: str) -> list[types.TextEdit]:
    """One edit replacing the whole document by `sknd fmt`'s text; none on syntax errors."""
    doc = ws.documents.get(uri)
    if doc is None:
        return []
    text = doc.text.replace("\r\n", "\n")
    module, diags = parse_module(text, str(doc.path))
    if module is None or diags:
        return []
    formatted = format_module(module)
    if formatted == doc.text:
        return []
    lines = doc.text.split("\n")
    end = types.Position(len(lines) - 1, len(lines[-1]))
    return [types.TextEdit(range=types.Range(types.Position(0, 0), end), new_text=formatted)]
