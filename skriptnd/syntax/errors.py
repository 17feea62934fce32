"""Lark's parse errors → worded diagnostics, and the statement-level resynchronisation used to
report several syntax errors per file.

Users never see terminal names: every terminal has a description, expression starters are
summarised as "an expression", and a missing ';' is reported right after the construct it
should end, naming that construct from the enclosing block.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from skriptnd.diagnostics import Diagnostic
from skriptnd.source import Span
from skriptnd.syntax.named_inputs import named_input
from skriptnd.syntax.scan import mask, mask_comments

BLOCK_NAMES = ("dtype", "attrib", "input", "using", "constant", "variable", "output", "assert", "lower",
               "compose", "update", "quantize")

_CONSTRUCT = {
    "dtype": "generic type declaration",
    "attrib": "attribute declaration",
    "input": "input declaration",
    "output": "output declaration",
    "constant": "constant declaration",
    "variable": "variable declaration",
    "using": "@using definition",
    "assert": "assertion",
    "lower": "@lower formula",
    "compose": "statement",
    "update": "statement",
    "quantize": "quantization entry",
}

_DESCRIPTIONS = {
    "SEMI": "';'", "COMMA": "','", "COLON": "':'", "EQ": "'='", "DOT": "'.'",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "IDENT": "a name", "INT": "an integer", "REAL": "a real number", "STRING": "a string",
    "DOT2": "'..'", "DOT3": "'...'", "TILDE": "'~'", "BAR": "'|'", "LT": "'<'", "GT": "'>'",
    "QMARK": "'?'", "BANG": "'!'", "ARROW": "'->'", "TRAILING_COMMA": "','",
    "PARAM_BLOCK": "a block such as '@input'", "COMPOSE_BLOCK": "'@compose' or '@update'",
    "LOWER_OP": "an assignment such as '+='", "UNIFORM": "':='", "CMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'", "MUL_OP": "'/', '\\' or '%'", "STAR": "'*'", "POW": "'**'",
    "MINMAX": "'<?' or '>?'", "COALESCE": "'??'", "IMPLIES": "'=>'", "OR": "'||'", "AND": "'&&'",
    "XOR": "'^'", "LT_TARGS": "'<'", "$END": "end of file",
}

_EXPR_START = {"IDENT", "INT", "REAL", "STRING", "TRUE", "FALSE", "INF", "PI", "LPAR", "LSQB", "BANG",
               "QMARK", "ADD_OP", "BAR", "KW_TYPE", "KW_ARITH", "KW_NUM", "KW_INT", "KW_REAL", "KW_BOOL",
               "KW_STR"}
_TYPE_START = {"KW_TYPE", "KW_ARITH", "KW_NUM", "KW_INT", "KW_REAL", "KW_BOOL", "KW_STR"}
_BLOCK_START = {"PARAM_BLOCK", "COMPOSE_BLOCK", "AT_DTYPE", "AT_USING", "AT_ASSERT", "AT_LOWER", "AT_QUANTIZE"}

_ORDER = ["SEMI", "COMMA", "RPAR", "RSQB", "RBRACE", "COLON", "EQ"]


def _offset(text: str, line: int, col: int) -> int:
    pos = 0
    for _ in range(line - 1):
        nl = text.find("\n", pos)
        if nl < 0:
            return len(text)
        pos = nl + 1
    return min(pos + col - 1, len(text))


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def enclosing_block(code: str, offset: int) -> str | None:
    """Name of the innermost `@block { ... }` open at offset (code is the masked text)."""
    stack: list[str | None] = []
    pending: str | None = None
    for m in re.finditer(r"@([A-Za-z_]\w*)|[{}]", code[:offset]):
        tok = m.group(0)
        if tok.startswith("@"):
            pending = m.group(1)
        elif tok == "{":
            stack.append(pending)
            pending = None
        elif stack:
            stack.pop()
    for name in reversed(stack):
        if name is not None:
            return name
    return None


def _describe_expected(expected: set[str], parser: Lark) -> str:
    names = set(expected)
    words: list[str] = []
    if {"IDENT", "INT"} <= names:
        words.append("an expression")
        names -= _EXPR_START
    elif _TYPE_START <= names:
        words.append("a type")
        names -= _TYPE_START
    if "PARAM_BLOCK" in names:
        words.append("a block such as '@input'")
        names -= _BLOCK_START
    for name in sorted(names, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n)):
        words.append(_describe_terminal(name, parser))
    words = list(dict.fromkeys(words))
    if len(words) > 6:
        words = words[:6] + ["..."]
    if len(words) <= 1:
        return words[0] if words else "something else"
    return ", ".join(words[:-1]) + " or " + words[-1]


def _describe_terminal(name: str, parser: Lark) -> str:
    if name in _DESCRIPTIONS:
        return _DESCRIPTIONS[name]
    try:
        pattern = parser.get_terminal(name).pattern
    except KeyError:
        return name.lower()
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return name.lower()


def _describe_found(token_type: str, value: str) -> str:
    if token_type == "$END":
        return "end of file"
    if token_type == "STRING":
        return "a string"
    return f"'{value}'"


def _end_of_previous(code: str, offset: int) -> int:
    """Offset just after the last non-blank character before offset (code is masked text)."""
    i = offset
    while i > 0 and code[i - 1].isspace():
        i -= 1
    return i


@dataclass(frozen=True)
class Reported:
    """A syntax error as reported, and where inserting a ';' would let parsing go on."""

    diagnostic: Diagnostic
    insert_at: int | None = None
    insert_text: str = ";"


def _unmatched_close(code: str, offset: int) -> bool:
    """Is the bracket at offset a closer without an opener in its statement?"""
    depth = 0
    i = offset
    while i > 0:
        ch = code[i - 1]
        if ch in ";{}" and depth == 0:
            break
        if ch in ")]}":
            depth += 1
        elif ch in "([":
            if depth == 0:
                return False
            depth -= 1
        i -= 1
    return True


def to_diagnostic(err: UnexpectedInput, text: str, code: str, path: str, parser: Lark) -> Reported:
    """text is the text as parsed; code is it with strings and comments masked."""
    if isinstance(err, UnexpectedCharacters):
        return Reported(_bad_character(err, text, path))
    if isinstance(err, UnexpectedEOF):
        line, col = _line_col(text, len(text))
        return Reported(Diagnostic(code="E0103", message="unexpected end of file",
                                   span=Span(path, line, col, line, col + 1)))
    assert isinstance(err, UnexpectedToken)
    tok = err.token
    expected = set(err.expected) if err.expected else set()
    at_end = tok.type == "$END"
    if not at_end:
        expected.discard("$END")
    offset = len(text) if at_end else (tok.start_pos if tok.start_pos is not None
                                       else _offset(text, tok.line, tok.column))
    block = enclosing_block(code, offset)
    if tok.type in ("RPAR", "RSQB") and _unmatched_close(code, offset):
        return Reported(Diagnostic(code="E0102", message=f"unmatched '{tok}'",
                                   span=Span(path, tok.line, tok.column, tok.line, tok.column + 1),
                                   hint=f"remove it or add the opening '{'(' if tok.type == 'RPAR' else '['}'"))
    named = named_input(code, text, offset) if tok.type == "EQ" and block in ("compose", "update") else None
    if named is not None:  # `nn.relu(x, alpha=0.1)`: a keyword argument, as in Python
        line, col = _line_col(text, named.start)
        end_line, end_col = _line_col(text, named.end)
        return Reported(Diagnostic(code="E0102", message=f"'{named.name}=' inside '(...)': an invocation's inputs "
                                   "are not named; attributes go in '{...}'", span=Span(path, line, col, end_line,
                                                                                          end_col),
                                   hint=f"attributes go in braces before the inputs: {named.rewritten}"))
    if "SEMI" in expected and not at_end:
        construct = _CONSTRUCT.get(block or "", "statement") if block is not None else "import or version line"
        prev = _end_of_previous(mask_comments(text), offset)
        same_line = text.count("\n", prev, offset) == 0
        others = expected - {"SEMI"}
        if not same_line or not others or tok.type == "RBRACE":
            line, col = _line_col(text, prev)
            return Reported(Diagnostic(code="E0102", message=f"expected ';' after {construct}",
                                       span=Span(path, line, col, line, col + 1), hint="insert ';'"), prev)
    if not at_end:
        innermost = _innermost_open(code, offset)
        for closer, opener in (("RPAR", "("), ("RSQB", "["), ("RBRACE", "{")):
            if closer in expected and innermost != opener and len(expected) > 1:
                expected.discard(closer)
    if at_end:
        line, col = _line_col(text, len(text))
        what = _describe_expected(expected, parser)
        return Reported(Diagnostic(code="E0103", message=f"unexpected end of file; expected {what}",
                                   span=Span(path, line, col, line, col + 1),
                                   hint="a '{' may be missing its closing '}'" if "RBRACE" in expected else None))
    if block in ("compose", "update"):
        # `y = f(x)` + newline + `[a, b] = ...` reads as `f(x)[a, b]`: the real error is the ';'
        # missing at the end of the line where the statement looked complete.
        brk = _newline_break(code, offset)
        if brk is not None and brk[0] == "unclosed":
            line, col = _line_col(text, brk[1])
            bracket = text[brk[1]]
            closer = ")" if bracket == "(" else "]"
            line_end = text.find("\n", brk[1])
            return Reported(Diagnostic(code="E0102", message=f"'{bracket}' is never closed",
                                       span=Span(path, line, col, line, col + 1), hint=f"add the closing '{closer}'"),
                            _end_of_previous(mask_comments(text), line_end if line_end >= 0 else len(text)),
                            closer + ";")
        if brk is not None:
            prev = _end_of_previous(mask_comments(text), brk[1] + 1)
            line, col = _line_col(text, prev)
            return Reported(Diagnostic(code="E0102", message="expected ';' after statement",
                                       span=Span(path, line, col, line, col + 1), hint="insert ';'"), prev)
    end_line = tok.end_line or tok.line
    end_col = tok.end_column or tok.column + 1
    span = Span(path, tok.line, tok.column, end_line, end_col)
    found = _describe_found(tok.type, str(tok))
    shift = _shift_operator(text, offset)
    if shift is not None:
        line, col = _line_col(text, shift)
        op = text[shift:shift + 2]
        return Reported(Diagnostic(code="E0102", message=f"'{op}' is not a SkriptND operator",
                                   span=Span(path, line, col, line, col + 2),
                                   hint="use '<?' for the minimum or '>?' for the maximum"))
    keyword = _keyword_before(code, offset)
    if keyword is not None:
        start, word = keyword
        line, col = _line_col(text, start)
        return Reported(Diagnostic(code="E0102", message=f"unexpected keyword '{word}'",
                                   span=Span(path, line, col, line, col + len(word))))
    hint = _hint_for(tok.type, str(tok), expected, text, offset)
    if not expected:
        return Reported(Diagnostic(code="E0102", message=f"unexpected {found}", span=span, hint=hint))
    what = _describe_expected(expected, parser)
    where = f" in {_CONSTRUCT[block]}" if block in _CONSTRUCT else ""
    return Reported(Diagnostic(code="E0102", message=f"expected {what}{where}, found {found}", span=span, hint=hint))


def _innermost_open(code: str, offset: int) -> str | None:
    """The innermost bracket still open at offset (code is masked text)."""
    stack: list[str] = []
    for ch in code[:offset]:
        if ch in "([{":
            stack.append(ch)
        elif ch in ")]}" and stack:
            stack.pop()
    return stack[-1] if stack else None


def _shift_operator(text: str, offset: int) -> int | None:
    for start in (offset - 1, offset):
        if start >= 0 and text[start:start + 2] in ("<<", ">>"):
            return start
    return None


_KEYWORDS = frozenset("if then elif else with for while do unroll yield optional graph operator public version "
                      "extension import".split())


def _keyword_before(code: str, offset: int) -> tuple[int, str] | None:
    """A statement keyword right before offset, lexed as a name where it cannot stand.

    Scans back from offset (no regex over the prefix: that is quadratic in a long identifier)."""
    end = offset
    while end > 0 and code[end - 1].isspace():
        end -= 1
    start = _word_start(code, end)
    while start < end and code[start].isdigit():  # a name starts with a letter or '_'
        start += 1
    word = code[start:end]
    if word in _KEYWORDS:
        return start, word
    return None


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _word_start(code: str, end: int) -> int:
    """Start of the run of word characters ending at end."""
    start = end
    while start > 0 and _is_word_char(code[start - 1]):
        start -= 1
    return start


def _hint_for(token_type: str, value: str, expected: set[str], text: str, offset: int) -> str | None:
    if token_type == "IDENT" and value in ("True", "False"):
        return f"booleans are written '{value.lower()}'"
    if token_type in ("COLON",) and "EQ" in expected:
        return "attribute values in an invocation are assigned with '=', as in 'op{a=1}(x)'"
    if text[max(0, offset - 1):offset + 1] in ("<<", ">>") or text[offset:offset + 2] in ("<<", ">>"):
        return "'<<' and '>>' are not SkriptND operators; use '<?' (min) or '>?' (max)"
    return None


def _bad_character(err: UnexpectedCharacters, text: str, path: str) -> Diagnostic:
    pos = err.pos_in_stream
    ch = text[pos] if pos < len(text) else ""
    line, col = err.line, err.column
    if ch in "\"'":
        return Diagnostic(code="E0104", message="unterminated string literal", span=Span(path, line, col, line, col + 1),
                          hint=f"close the string with {ch}")
    m = re.match(r"@([A-Za-z_]\w*)", text[pos:])
    if m:
        name = m.group(1)
        close = difflib.get_close_matches(name, BLOCK_NAMES, n=1)
        hint = f"did you mean '@{close[0]}'?" if close else None
        return Diagnostic(code="E0101", message=f"unknown block '@{name}'; blocks are " +
                          ", ".join("@" + b for b in BLOCK_NAMES),
                          span=Span(path, line, col, line, col + len(m.group(0))), hint=hint)
    if ch == "\ufffd":
        desc = "an undecodable byte"
    elif ch.isprintable() and not ch.isspace():
        desc = f"'{ch}'"
    else:
        desc = f"character U+{ord(ch):04X}" if ch else "end of file"
    return Diagnostic(code="E0101", message=f"unexpected {desc}", span=Span(path, line, col, line, col + 1))


def resync_region(code: str, offset: int) -> tuple[int, int] | None:
    """The statement around offset to blank out so parsing can go on, or None to give up.

    code is the masked text. Backwards, the statement starts after the previous ';', or
    after the '{' opening the enclosing block; balanced groups are skipped, and an
    attribute block `op{...}` belongs to the statement. Forwards, it ends at the next
    ';' outside brackets, or before the '}' closing the enclosing block.
    """
    n = len(code)
    if offset >= n:
        return None
    if code[offset] == "@" and enclosing_block(code, offset) is None:
        return _block_region(code, offset)
    start = offset
    depth = 0
    while start > 0:
        ch = code[start - 1]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            depth -= 1
        elif ch == "}":
            if depth == 0 and not _attr_block_end(code, start - 1):
                break
            depth += 1
        elif ch == "{":
            if depth > 0:
                depth -= 1
            elif not _attr_block_start(code, start - 1):
                break
        elif ch == ";" and depth <= 0:
            break
        elif ch == "\n" and depth == 0 and _ends_statement(code, start - 1) and start - 1 < offset:
            break
        start -= 1
    if code[offset] == "}":
        return (start, offset) if start < offset else (offset, offset + 1)
    end = offset
    depth = 0
    for ch in code[start:offset]:  # brackets opened inside the statement before the error
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
    opened = depth  # a ';' closes the statement even if brackets opened before the error stay open
    while end < n:
        ch = code[end]
        if ch in "([{":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch == "}":
            if depth == 0:
                break
            depth -= 1
        elif ch == ";" and depth <= opened:
            end += 1
            break
        end += 1
    return (start, max(end, offset + 1))


def _newline_break(code: str, offset: int) -> tuple[str, int] | None:
    """Scanning back from offset inside the current statement: ('break', newline) for a line
    break after which a new statement evidently starts (see _ends_statement), or
    ('unclosed', position) when that line break sits inside a bracket left open; else None."""
    depth = 0
    i = offset
    newline = None
    while i > 0:
        ch = code[i - 1]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            depth -= 1
            if depth < 0 and newline is not None:
                return ("unclosed", i - 1)
        elif ch in ";{}" and depth <= 0:
            break
        elif ch == "\n" and depth == 0 and newline is None and _ends_statement(code, i - 1):
            newline = i - 1
        i -= 1
    return ("break", newline) if newline is not None else None


_STATEMENT_START = re.compile(r"[A-Za-z_~\[(]")
_CONTINUATION = re.compile(r"(then|else|elif|do|unroll|while|for|with|is|in)\b")


def _ends_statement(code: str, newline: int) -> bool:
    """Does the line before this newline look complete, and the next start a new statement?

    Index scans only: this runs for every line break of a statement, so slicing the text here
    would make diagnosing a long statement quadratic."""
    i = newline
    while i > 0 and code[i - 1] in " \t":
        i -= 1
    j = newline + 1
    n = len(code)
    while j < n and code[j].isspace():
        j += 1
    if i == 0 or j >= n:
        return False
    last = code[i - 1]
    if not (last.isalnum() or last in "_)]"):
        return False
    return bool(_STATEMENT_START.match(code, j)) and not _CONTINUATION.match(code, j)


def _block_region(code: str, offset: int) -> tuple[int, int]:
    """A bad `@name { ... }` block: from the '@' through its balanced braces."""
    brace = code.find("{", offset)
    if brace < 0:
        return (offset, offset + 1)
    depth = 0
    for i in range(brace, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return (offset, i + 1)
    return (offset, len(code))


def _attr_block_end(code: str, index: int) -> bool:
    """Is the '}' at index the end of an invocation's attribute block (followed by '(')?"""
    j = index + 1
    while j < len(code) and code[j].isspace():
        j += 1
    return code.startswith("(", j)


def _attr_block_start(code: str, index: int) -> bool:
    """Is the '{' at index the start of an attribute block (right after a name or '>')?

    Not after `then`/`else`/`do`/`unroll`, a block name `@name` or `operator|graph Name`. Scans back
    from index (a regex anchored at the end of the prefix is quadratic in a long identifier)."""
    end = index
    while end > 0 and code[end - 1].isspace():
        end -= 1
    if end == 0:
        return False
    last = code[end - 1]
    if not (last.isalnum() or last in "_>"):
        return False
    if last == ">":
        return True
    start = _word_start(code, end)
    word = code[start:end]
    if word in ("then", "else", "do", "unroll"):
        return False
    first = start
    while first < end and not (code[first].isalpha() or code[first] == "_"):
        first += 1  # `@[A-Za-z_]\w*`: the name after '@' starts with a letter
    if first < end and first > 0 and code[first - 1] == "@":
        return False
    before = start
    while before > 0 and code[before - 1].isspace():
        before -= 1
    if before < start and code[_word_start(code, before):before] in ("operator", "graph"):
        return False
    return True


def blank(text: str, region: tuple[int, int]) -> str:
    a, b = region
    return text[:a] + "".join("\n" if c == "\n" else " " for c in text[a:b]) + text[b:]


def error_offset(err: UnexpectedInput, text: str) -> int:
    if isinstance(err, UnexpectedCharacters):
        return err.pos_in_stream
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            return len(text)
        return tok.start_pos if tok.start_pos is not None else _offset(text, tok.line, tok.column)
    return len(text)


__all__ = ["BLOCK_NAMES", "blank", "enclosing_block", "error_offset", "mask", "resync_region", "to_diagnostic"]
