"""Tests for skriptnd.syntax.printer: round trips, idempotence, comments, exact layouts."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skriptnd.source import Span
from skriptnd.syntax import ast
from skriptnd.syntax.parser import parse
from skriptnd.syntax.printer import format_expr, format_fragment, format_module
from skriptnd.syntax.scan import comments as scan_comments

ROOT = Path(__file__).resolve().parent.parent
SPEC_BLOCKS = ROOT / "tests" / "data" / "spec_blocks"
START_OF_KIND = {"module": "module", "blocks": "blocks", "compose_body": "compose_body"}


def fragment_comments(text: str) -> list[ast.Comment]:
    """The comments of a fragment's source, located as the parser locates a module's."""
    found = []
    for start, end in scan_comments(text):
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        body = text[start:end].rstrip()
        found.append(ast.Comment(text=body, span=Span("<fragment>", line, col, line, col + len(body))))
    return found


def comments_of(node: object, text: str, start: str) -> list[ast.Comment]:
    return list(node.comments) if start == "module" else fragment_comments(text)


def fmt(node: object, text: str, start: str) -> str:
    return format_fragment(node, start, comments_of(node, text, start))


def check_source(text: str, start: str, name: str) -> None:
    tree, diags = parse(text, name, start)
    assert tree is not None and not diags
    out = fmt(tree, text, start)
    again, diags2 = parse(out, name, start)
    assert not diags2, (out, diags2)
    assert again == tree, out
    assert fmt(again, out, start) == out, "not idempotent"
    before = Counter(c.text for c in comments_of(tree, text, start))
    after = Counter(c.text for c in comments_of(again, out, start))
    assert before == after, out


# ---------------------------------------------------------------------------- corpus round trips


def _spec_cases() -> list[tuple[str, str]]:
    cases = []
    for entry in json.loads((SPEC_BLOCKS / "index.json").read_text(encoding="utf-8")):
        if entry.get("elided"):
            continue
        start = START_OF_KIND.get(entry["kind"], "stmt")
        text = (SPEC_BLOCKS / entry["file"]).read_text(encoding="utf-8")
        tree, diags = parse(text, entry["file"], start)
        if tree is None or diags:
            continue
        cases.append((entry["file"], start))
    return cases


@pytest.mark.parametrize("name,start", _spec_cases())
def test_spec_block_round_trip(name: str, start: str) -> None:
    check_source((SPEC_BLOCKS / name).read_text(encoding="utf-8"), start, name)


@pytest.mark.parametrize("path", sorted((ROOT / "stdlib").glob("*.sknd")), ids=lambda p: p.name)
def test_stdlib_round_trip(path: Path) -> None:
    check_source(path.read_text(encoding="utf-8"), "module", path.name)


def test_stdlib_layout_is_canonical() -> None:
    text = (ROOT / "stdlib" / "nn.sknd").read_text(encoding="utf-8")
    out = format_module(parse(text)[0])
    assert out.startswith("# SkriptND standard library: module nn")
    assert "\nimport layout;\nimport math;\n\n# spec §4.4.1: Fully Connected Linear Operator\noperator linear {\n" in out
    assert "        output[bi, ni] = bias[ni,] ?? 0.0, bi < b, ni < n;\n" in out
    assert out.endswith("}\n") and "\n\n\n" not in out


# ---------------------------------------------------------------------------- exact output


def E(text: str) -> ast.Expr:
    tree, diags = parse(text, start="expr")
    assert not diags, diags
    return tree


def N(name: str) -> ast.Name:
    return ast.Name(id=name)


def I(value: int) -> ast.IntLit:  # noqa: E743
    return ast.IntLit(value=value)


@pytest.mark.parametrize("tree,text", [
    (ast.Binary(op="*", left=ast.Binary(op="+", left=N("a"), right=N("b")), right=N("c")), "(a + b) * c"),
    (ast.Binary(op="-", left=N("a"), right=ast.Binary(op="-", left=N("b"), right=N("c"))), "a - (b - c)"),
    (ast.Binary(op="-", left=ast.Binary(op="-", left=N("a"), right=N("b")), right=N("c")), "a - b - c"),
    (ast.Unary(op="-", operand=ast.Binary(op="**", left=N("x"), right=I(2))), "-x ** 2"),
    (ast.Binary(op="**", left=ast.Unary(op="-", operand=N("x")), right=I(2)), "(-x) ** 2"),
    (ast.Binary(op="**", left=N("x"), right=ast.Binary(op="**", left=N("y"), right=N("z"))), "x ** y ** z"),
    (ast.Binary(op="**", left=ast.Binary(op="**", left=N("x"), right=N("y")), right=N("z")), "(x ** y) ** z"),
    (ast.Binary(op="**", left=N("x"), right=ast.Unary(op="-", operand=N("y"))), "x ** -y"),
    (ast.Binary(op="=>", left=N("a"), right=ast.Binary(op="=>", left=N("b"), right=N("c"))), "a => b => c"),
    (ast.Binary(op="=>", left=ast.Binary(op="=>", left=N("a"), right=N("b")), right=N("c")), "(a => b) => c"),
    (ast.Select(cond=N("a"), then=N("b"), orelse=ast.Select(cond=N("c"), then=N("d"), orelse=N("e"))),
     "a ? b : c ? d : e"),
    (ast.Select(cond=ast.Select(cond=N("a"), then=N("b"), orelse=N("c")), then=N("d"), orelse=N("e")),
     "(a ? b : c) ? d : e"),
    (ast.Select(cond=N("c"), then=ast.Select(cond=N("d"), then=N("e"), orelse=None), orelse=N("f")),
     "c ? (d ? e) : f"),
    (ast.Select(cond=N("c"), then=ast.Select(cond=N("d"), then=N("e"), orelse=N("g")), orelse=N("f")),
     "c ? d ? e : g : f"),
    (ast.Binary(op="??", left=ast.Select(cond=N("c"), then=N("a"), orelse=None), right=N("b")), "c ? a ?? b"),
    (ast.Select(cond=N("c"), then=ast.Binary(op="??", left=N("a"), right=N("b")), orelse=None), "c ? (a ?? b)"),
    (ast.Binary(op="??", left=N("a"), right=ast.Select(cond=N("c"), then=N("b"), orelse=N("d"))),
     "a ?? c ? b : d"),
    (ast.Binary(op="+", left=ast.Fold(op="+", operand=N("x")), right=I(42)), "x + .. + 42"),
    (ast.Fold(op="+", operand=ast.Binary(op="+", left=N("a"), right=N("b"))), "a + b + .."),
    (ast.Binary(op="+", left=N("a"), right=ast.Fold(op="+", operand=N("b"))), "a + (b + ..)"),
    (ast.Binary(op="*", left=ast.Fold(op="+", operand=N("x")), right=I(2)), "(x + ..) * 2"),
    (ast.Fold(op="*", operand=N("x"), cumulative=True), "x * ..."),
    (ast.Fold(op=":=", operand=N("z")), "z := .."),
    (ast.Unary(op="-", operand=ast.Unary(op="-", operand=I(1))), "- -1"),
    (ast.Unary(op="?", operand=ast.Unary(op="?", operand=N("x"))), "? ?x"),
    (ast.Select(cond=N("c"), then=ast.Unary(op="?", operand=N("x")), orelse=N("y")), "c ? ?x : y"),
    (ast.Substitute(value=N("a"), index=N("i"), replacement=ast.Binary(op="+", left=N("b"), right=I(1))),
     "a[i] <- b + 1"),
    (ast.Select(cond=N("c"), then=ast.Substitute(value=N("a"), index=N("i"), replacement=N("b")), orelse=N("d")),
     "c ? (a[i] <- b) : d"),
    (ast.Subscript(value=ast.Binary(op="+", left=N("a"), right=N("b")), index=N("i")), "(a + b)[i]"),
    (ast.TensorAccess(tensor=N("x"), indices=(N("i"),)), "x[i,]"),
    (ast.TensorAccess(tensor=N("x"), indices=()), "x[]"),
    (ast.TensorAccess(tensor=N("x"), indices=(ast.Range(start=N("a"), stop=N("b")),)), "x[a:b,]"),
    (ast.TensorAccess(tensor=N("x"), indices=(ast.Expand(value=N("i")),)), "x[i..]"),
    (ast.TensorAccess(tensor=N("x"), indices=(N("i"), ast.Range(start=None, stop=None))), "x[i, :]"),
    (ast.TensorAccess(tensor=N("x"), indices=(ast.Bounded(value=N("i"), low=I(0), high=N("n")),)),
     "x[|i <> 0 : n|]"),
    (ast.TensorAccess(tensor=N("x"), indices=(ast.Bounded(value=ast.Bounded(value=N("i"))),)), "x[| |i| |]"),
    (ast.Subscript(value=N("a"), index=ast.Range(start=None, stop=None, step=ast.Unary(op="-", operand=I(1)))),
     "a[::-1]"),
    (ast.Subscript(value=N("a"), index=ast.Range(start=None, stop=N("k"))), "a[:k]"),
    (ast.Subscript(value=N("a"), index=ast.Range(start=ast.Select(cond=N("c"), then=N("b"), orelse=N("d")),
                                                 stop=None)), "a[(c ? b : d):]"),
    (ast.ListExpr(items=(ast.Expand(value=I(1), count=I(5)),)), "[1 ..(5)]"),
    (ast.ListExpr(items=(ast.Expand(value=ast.Fold(op="+", operand=N("a"))),)), "[a + .. ..]"),
    (ast.ListExpr(items=(ast.Zip(items=(N("a"), N("b"))), ast.Range(start=I(0), stop=N("n"), step=I(2)))),
     "[(a, b).., 0:n:2]"),
    (ast.Call(callee="nn.conv", args=(N("x"), ast.Skip()), type_args=("real",),
              attrs=(ast.AttrAssign(name="a", value=I(1)), ast.AttrAssign(name="b", value=I(2)))),
     "nn.conv<real>{a=1, b=2}(x, ~)"),
    (ast.Cast(type="int", arg=None), "int()"),
    (ast.Property(value=ast.Call(callee="f", args=()), name="shape"), "f().shape"),
    (ast.RealLit(value=1e-5, text="1e-5"), "1e-5"),
    (ast.RealLit(value=1e-5), "1e-05"),
    (ast.RealLit(value=2.0), "2.0"),
    (ast.NamedConst(name="inf"), "inf"),
    (ast.BoolLit(value=False), "false"),
    (ast.StrLit(parts=('a"{b}\\\n', ast.FormatField(value=N("x")))), '"a\\"\\{b\\}\\\\\\n{x}"'),
    (ast.StrLit(parts=(ast.FormatField(value=ast.Call(callee="f", args=(ast.StrLit(parts=("it's",)),))),)),
     "\"{f('it\\'s')}\""),
    # `a < b > (c || d)` would read as an invocation with type arguments `a<b>(c || d)`
    (ast.Binary(op=">", left=ast.Binary(op="<", left=N("a"), right=N("b")),
                right=ast.Binary(op="||", left=N("c"), right=N("d"))), "a < (b) > (c || d)"),
    (ast.ListExpr(items=(ast.Binary(op="<", left=N("a"), right=N("b")),
                         ast.Binary(op=">", left=N("c"), right=ast.Binary(op="||", left=N("d"), right=N("e"))))),
     "[a < (b), c > (d || e)]"),
])
def test_expression_text(tree: ast.Expr, text: str) -> None:
    assert format_expr(tree) == text
    assert E(text) == tree


@pytest.mark.parametrize("text", [
    "(a + b) * c", "a ? b : c ? d : e", "-x ** 2", "x + .. + 42", "a[::-1]", "[1 ..(5)]",
    "padding[:d] ?? c ? a : b", "!(a && b) || c", "s[axes] <- s[axes] / factor", "x[i,]", "x[k][i, j]",
])
def test_canonical_expressions_print_as_written(text: str) -> None:
    assert format_expr(E(text)) == text


MODULE = """\
# file header

version 2.0;
import nn, math  # trailing on import
# before the operator

# (two lines)
public operator f {  # header of f
    @attrib { a : int = 1 ; b: real[ s .. ( d ) , ..t, ~|10 ]..(k) = 0.5 ;}  # after the block
    @using {
        # leading
        c = a ? b
            # inside an expression
            : 2;
        # at the end of @using
    }
    @lower {
        y[i] = x[i] + 1, i < n | i > 0; # trailing
        with z = c ? 1 : 2: y[i] += z, i < n;
    }
    @compose {
        w = if c then { # after brace
            yield a;
        } else b;
        u = lbl: op<real>{k=1}(x, ~);
        v = with s = 0 for x : xs do { # loop
            # in the loop
            t = s + x; yield t; }
    }
}
graph g { }
# the end
"""

MODULE_FORMATTED = """\
# file header

version 2.0;

import nn;
import math;  # trailing on import

# before the operator

# (two lines)
public operator f {  # header of f
    @attrib {
        a: int = 1;
        b: real[s..(d), ..t, ~|10]..(k) = 0.5;
    }  # after the block
    @using {
        # leading
        # inside an expression
        c = a ? b : 2;
        # at the end of @using
    }
    @lower {
        y[i] = x[i] + 1, i < n | i > 0;  # trailing
        with z = c ? 1 : 2: y[i] += z, i < n;
    }
    @compose {
        w = if c then {  # after brace
            yield a;
        } else
            b;
        u = lbl: op<real>{k=1}(x, ~);
        v = with s = 0 for x : xs do {  # loop
            # in the loop
            t = s + x;
            yield t;
        };
    }
}

graph g {}

# the end
"""


def test_module_layout_and_comments() -> None:
    tree, diags = parse(MODULE)
    assert not diags
    assert format_module(tree) == MODULE_FORMATTED
    check_source(MODULE, "module", "m.sknd")


def test_long_lowering_and_assertion_layout() -> None:
    long = " + ".join(f"input{k}[i, j]" for k in range(6))
    msg = "n must be positive " * 4 + "always"
    text = (f"operator f {{ @lower {{ output[i, j] = {long}, i < n, j < m | i != j; }}\n"
            f"@assert {{ n > 0: \"{msg}\", n; n > 0: \"{msg}\", n, 'the m': m; }} }}")
    out = format_module(parse(text)[0])
    assert out == (
        "operator f {\n"
        "    @lower {\n"
        f"        output[i, j] = {long},\n"
        "            i < n, j < m | i != j;\n"
        "    }\n"
        "    @assert {\n"
        "        n > 0:\n"
        f"            \"{msg}\", n;\n"
        "        n > 0:\n"
        f"            \"{msg}\",\n"
        "            n, \"the m\": m;\n"
        "    }\n"
        "}\n")
    check_source(text, "module", "m.sknd")


def test_long_select_chain_is_broken_per_branch() -> None:
    cond = " || ".join(f"mode == 'M{k}'" for k in range(5))
    text = f"operator f {{ @using {{ out = {cond} ? first_value : other == 1 ? second_value : third; }} }}"
    out = format_module(parse(text)[0])
    col = len("        out = ")
    assert f"\n{' ' * col}other == 1 ? second_value :\n{' ' * col}third;\n" in out
    check_source(text, "module", "m.sknd")


def test_long_chains_do_not_exhaust_the_recursion_limit() -> None:
    terms = 3000
    text = "graph g { @compose { y = " + " - ".join(["x"] * terms) + " ?? z; w = " + \
        " : ".join(f"c{k} ? {k}" for k in range(terms)) + " : 0; } }"
    out = format_module(parse(text)[0])
    assert out.count(" - ") == terms - 1 and out.count(" ? ") == terms
    assert format_module(parse(out)[0]) == out


def test_fragments() -> None:
    stmts = parse("{ y = op1(x); # one\n z = op2(y); yield y, z; }", start="compose_body")[0]
    assert format_fragment(stmts, "compose_body", fragment_comments("{ y = op1(x); # one\n")) == (
        "{\n    y = op1(x);  # one\n    z = op2(y);\n    yield y, z;\n}\n")
    stmt = parse("x = op<real>(y);", start="stmt")[0]
    assert format_fragment(stmt, "stmt") == "x = op<real>(y);\n"
    block = parse("{ yield x; }", start="block_stmt")[0]
    assert format_fragment(block, "block_stmt") == "{\n    yield x;\n}\n"
    blocks = parse("@input { x: real[]; } @output { y: real[]; }", start="blocks")[0]
    assert format_fragment(blocks, "blocks") == "@input {\n    x: real[];\n}\n@output {\n    y: real[];\n}\n"
    assert format_fragment(E("a+b"), "expr") == "a + b\n"


def test_empty_and_comment_only_modules() -> None:
    assert format_module(parse("")[0]) == ""
    check_source("# only a comment\n", "module", "m.sknd")
    check_source("version 2.0; # v\n# c\n", "module", "m.sknd")


# ---------------------------------------------------------------------------- random ASTs

# Reserved words (transform.RESERVED) and the names the parser rejects; `is` and `in` are
# operators only between operands and remain usable as names.
KEYWORDS = {
    "version", "extension", "import", "public", "operator", "graph", "optional", "type", "arith", "num",
    "int", "real", "bool", "str", "true", "false", "inf", "pi", "do", "unroll", "with",
    "yield", "if", "then", "elif", "else", "for", "while", "True", "False",
}
PROPERTIES = ("shape", "rank", "size")
BINARY_OPS = ("??", "=>", "||", "^", "&&", "<", "<=", ">", ">=", "==", "!=", "is", "in", "<?", ">?",
              "+", "-", "*", "/", "\\", "%", "**")
FOLD_OPS = ("+", "*", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "<?", ">?", ":=")
CUMULATIVE = {"+", "*", "&&", "||", "<?", ">?"}
TYPE_KEYWORDS = ("type", "arith", "num", "int", "real", "bool", "str")

idents = st.one_of(
    st.sampled_from(["a", "b", "x", "i", "n", "e5", "shape", "size", "in_", "do1", "_t", "T", "is", "in"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
).filter(lambda s: s not in KEYWORDS)
members = idents.filter(lambda s: s not in PROPERTIES)
dotted = st.builds(lambda head, rest: ".".join([head, *rest]), idents, st.lists(members, max_size=2))
type_refs = st.one_of(st.sampled_from(TYPE_KEYWORDS), idents)
text_chars = st.sampled_from(list("ab #'\"\\{}\n\t\r\0é") + [" x", "{y}"])
texts = st.lists(text_chars, min_size=1, max_size=6).map("".join)


def _plain_strings(e: object) -> object:
    """e with every string literal made plain and brace-free.

    A string inside a format field is written inside the outer literal, whose field scanner
    counts braces without regard to quotes, and whose `"` it cannot contain: such strings are
    printed with single quotes, and can neither hold unbalanced braces nor nest fields again.
    """
    if isinstance(e, ast.StrLit):
        flat = "".join(p for p in e.parts if isinstance(p, str)).replace("{", "(").replace("}", ")")
        return ast.StrLit(parts=(flat,) if flat else ())
    if isinstance(e, ast.Node):
        changes = {f.name: _plain_strings(getattr(e, f.name)) for f in dataclasses.fields(e)
                   if f.name != "span"}
        return dataclasses.replace(e, **changes)
    if isinstance(e, tuple):
        return tuple(_plain_strings(x) for x in e)
    return e


def _string(parts: list[object]) -> ast.StrLit:
    merged: list[object] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    return ast.StrLit(parts=tuple(merged))


literals = st.one_of(
    st.builds(ast.IntLit, value=st.integers(0, 10**12)),
    st.builds(lambda v, keep: ast.RealLit(value=v, text=repr(v) if keep else ""),
              st.floats(0, 1e30, allow_nan=False, allow_infinity=False), st.booleans()),
    st.builds(ast.BoolLit, value=st.booleans()),
    st.builds(ast.NamedConst, name=st.sampled_from(["inf", "pi"])),
    st.builds(ast.Name, id=dotted),
    st.builds(lambda ps: _string(ps), st.lists(texts, max_size=1)),
)


def _ranges(ch: st.SearchStrategy, full: bool) -> st.SearchStrategy:
    part = ch if full else st.none() | ch
    return st.builds(ast.Range, start=part, stop=part, step=st.none() | ch)


def _extend(ch: st.SearchStrategy) -> st.SearchStrategy:
    expand = st.builds(ast.Expand, value=ch, count=st.none() | ch)
    list_item = st.one_of(ch, expand, _ranges(ch, True), st.builds(ast.Zip, items=st.lists(ch, min_size=2,
                                                                                            max_size=3).map(tuple)))
    bounded = st.one_of(st.builds(ast.Bounded, value=ch),
                        st.builds(ast.Bounded, value=ch, low=ch, high=ch))
    access_index = st.one_of(ch, expand, bounded, _ranges(ch, False))
    sub_index = st.one_of(ch, _ranges(ch, False))
    fields = st.builds(lambda e: ast.FormatField(value=_plain_strings(e)), ch)
    attrs = st.dictionaries(idents, ch, max_size=2).map(
        lambda d: tuple(ast.AttrAssign(name=k, value=v) for k, v in d.items()))
    folds = st.sampled_from(FOLD_OPS).flatmap(lambda op: st.builds(
        ast.Fold, op=st.just(op), operand=ch, cumulative=st.booleans() if op in CUMULATIVE else st.just(False)))
    return st.one_of(
        st.builds(ast.Unary, op=st.sampled_from(["-", "+", "!", "?"]), operand=ch),
        st.builds(ast.Binary, op=st.sampled_from(BINARY_OPS), left=ch, right=ch),
        folds,
        st.builds(ast.Select, cond=ch, then=ch, orelse=st.none() | ch),
        st.builds(ast.Substitute, value=ch, index=sub_index, replacement=ch),
        st.builds(ast.Cast, type=st.sampled_from(["int", "real", "bool"]), arg=st.none() | ch),
        st.just(ast.Cast(type="str", arg=None)),
        st.builds(ast.Call, callee=dotted, args=st.lists(ch | st.just(ast.Skip()), max_size=3).map(tuple),
                  type_args=st.lists(type_refs, max_size=2).map(tuple), attrs=attrs),
        st.builds(ast.Property, value=ch, name=st.sampled_from(PROPERTIES)),
        st.builds(ast.Subscript, value=ch, index=sub_index),
        st.builds(ast.TensorAccess, tensor=ch, indices=st.lists(access_index, max_size=3).map(tuple)),
        st.builds(ast.ListExpr, items=st.lists(list_item, max_size=3).map(tuple)),
        st.builds(_string, st.lists(texts | fields, min_size=1, max_size=3)),
    )


exprs = st.recursive(literals, _extend, max_leaves=12)
small_exprs = st.recursive(literals, _extend, max_leaves=4)


def test_max_operator_is_one_token() -> None:
    # Was lexed as `a > ?b` (CMP_OP's `>` tried before MINMAX's `>?`); the printer relies on
    # `a >? b` and `a > ?b` reading differently.
    assert E("a >? b") == ast.Binary(op=">?", left=N("a"), right=N("b"))
    assert E("a > ?b") == ast.Binary(op=">", left=N("a"), right=ast.Unary(op="?", operand=N("b")))


def assert_expr_round_trip(tree: ast.Expr) -> None:
    text = format_expr(tree)
    again, diags = parse(text, start="expr")
    assert not diags, (text, diags)
    assert again == tree, text
    assert format_expr(again) == text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs)
def test_random_expressions_round_trip(tree: ast.Expr) -> None:
    assert_expr_round_trip(tree)


# Random modules: every block kind, declarations, formulas and compose statements.

packs = st.none() | st.builds(ast.PackSpec, length=st.none() | small_exprs)
shape_items = st.builds(ast.ShapeItem, value=st.none() | small_exprs, distinct=st.booleans(),
                        bound=st.none() | small_exprs, pack=packs)
type_specs = st.builds(ast.TypeSpec, name=type_refs, optional=st.booleans(), rank=st.none() | idents,
                       shape=st.none() | st.lists(shape_items, max_size=3).map(tuple), pack=packs)
loop_bounds = st.builds(ast.LoopBound, index=idents, bound=small_exprs)
iter_counts = st.one_of(st.builds(ast.IterCount, index=st.none() | idents, count=small_exprs),
                        st.builds(ast.IterCount, index=idents))
lnames = st.one_of(st.builds(ast.LName, name=idents),
                   st.builds(ast.LName, name=idents, pack=st.builds(ast.PackSpec, length=st.none() | small_exprs)))
lvalues = st.recursive(
    lnames | st.just(ast.LSkip()),
    lambda ch: st.one_of(
        st.builds(ast.LList, items=st.lists(ch, min_size=1, max_size=3).map(tuple)),
        st.builds(ast.LZip, items=st.lists(st.builds(ast.LName, name=idents, type=st.none() | type_specs),
                                           min_size=2, max_size=3).map(tuple),
                  pack=st.builds(ast.PackSpec, length=st.none() | small_exprs))),
    max_leaves=3)
typed_lvalues = lvalues | st.builds(ast.LName, name=idents, type=type_specs)
attrs_small = st.dictionaries(idents, small_exprs, max_size=2).map(
    lambda d: tuple(ast.AttrAssign(name=k, value=v) for k, v in d.items()))
labelled_calls = st.builds(ast.Call, callee=dotted, args=st.lists(small_exprs, max_size=2).map(tuple),
                           type_args=st.lists(type_refs, max_size=1).map(tuple), attrs=attrs_small, label=idents)


def _stmts(depth: int) -> st.SearchStrategy:
    return st.builds(ast.Assign, targets=st.lists(typed_lvalues, min_size=1, max_size=2).map(tuple),
                     value=_rhs(depth))


def _block_exprs(depth: int) -> st.SearchStrategy:
    return st.builds(
        lambda stmts, values, label: ast.BlockExpr(stmts=(*stmts, ast.Yield(values=tuple(values))), label=label),
        st.lists(_stmts(depth - 1), max_size=2), st.lists(small_exprs, min_size=1, max_size=2),
        st.none() | idents)


def _branches(depth: int) -> st.SearchStrategy:
    if depth <= 0:
        return small_exprs | labelled_calls
    return st.one_of(small_exprs, labelled_calls, _block_exprs(depth))


@st.composite
def _loops(draw: st.DrawFn, depth: int) -> ast.LoopExpr:
    carried = tuple(draw(st.lists(st.builds(ast.Carried, name=idents, value=small_exprs,
                                            type=st.none() | type_specs), max_size=2)))
    scans = tuple(draw(st.lists(st.builds(ast.Scan, name=idents, pack=small_exprs), max_size=2)))
    unroll = draw(st.booleans())
    cond = None if unroll else draw(st.sampled_from(["pre", "post", None]))
    count = draw(st.none() | iter_counts)
    if not scans and cond is None and (count is None or count.count is None):
        count = ast.IterCount(index=draw(st.none() | idents), count=draw(small_exprs))
    branch = _branches(depth)
    return ast.LoopExpr(body=draw(branch), carried=carried, scans=scans, count=count, unroll=unroll,
                        pre_cond=draw(branch) if cond == "pre" else None,
                        post_cond=draw(branch) if cond == "post" else None)


def _rhs(depth: int) -> st.SearchStrategy:
    options = [exprs, labelled_calls]
    if depth > 0:
        branch = _branches(depth)
        options += [
            _block_exprs(depth),
            st.builds(ast.IfExpr, branches=st.lists(st.tuples(branch, branch), min_size=1, max_size=3).map(tuple),
                      orelse=branch),
            _loops(depth),
        ]
    return st.one_of(options)


messages = st.builds(_string, st.lists(texts | st.builds(lambda e: ast.FormatField(value=_plain_strings(e)),
                                                          small_exprs), min_size=1, max_size=3))
assert_args = st.one_of(
    st.builds(ast.AssertArg, value=small_exprs),
    st.builds(ast.AssertArg, value=small_exprs, label=idents),
    st.builds(ast.AssertArg, value=small_exprs, label=texts.map(lambda t: t.replace("\0", "")), label_quoted=st.just(True)),
)
assertions = st.one_of(
    st.builds(ast.Assertion, condition=exprs),
    st.builds(ast.Assertion, condition=exprs, message=messages, args=st.lists(assert_args, max_size=3).map(tuple)),
)
access_indices = st.one_of(small_exprs, st.builds(ast.Expand, value=small_exprs),
                           st.builds(ast.Bounded, value=small_exprs))
lowerings = st.builds(
    ast.Lowering,
    target=st.builds(ast.TensorAccess, tensor=st.builds(ast.Name, id=idents),
                     indices=st.lists(access_indices, max_size=3).map(tuple)),
    op=st.sampled_from(["=", ":=", "+=", "*=", "&=", "|=", "<?=", ">?="]),
    value=exprs,
    bounds=st.lists(loop_bounds, max_size=3).map(tuple),
    condition=st.none() | small_exprs,
    locals=st.lists(st.builds(ast.LocalAssign, name=idents, value=exprs), max_size=2).map(tuple),
    unroll=st.none() | iter_counts,
)
param_decls = st.one_of(
    st.builds(ast.ParamDecl, name=idents, type=type_specs),
    st.builds(ast.ParamDecl, name=idents, type=type_specs, default=exprs,
              bounds=st.lists(loop_bounds, max_size=2).map(tuple)),
)
blocks = st.one_of(
    st.builds(ast.DtypeBlock, items=st.lists(st.builds(
        ast.DtypeDecl, name=idents, base=st.sampled_from(["type", "arith", "num"]),
        default=st.none() | st.sampled_from(TYPE_KEYWORDS)), max_size=2).map(tuple)),
    st.builds(ast.ParamBlock, kind=st.sampled_from(["attrib", "input", "output", "constant", "variable"]),
              items=st.lists(param_decls, max_size=3).map(tuple)),
    st.builds(ast.UsingBlock, items=st.lists(st.builds(ast.UsingDecl, target=lvalues, value=exprs),
                                             max_size=3).map(tuple)),
    st.builds(ast.AssertBlock, items=st.lists(assertions, max_size=3).map(tuple)),
    st.builds(ast.LowerBlock, items=st.lists(lowerings, max_size=3).map(tuple)),
    st.builds(ast.ComposeBlock, kind=st.sampled_from(["compose", "update"]),
              items=st.lists(_stmts(2), max_size=3).map(tuple)),
    st.builds(ast.QuantizeBlock, items=st.lists(st.builds(
        ast.Quantization, tensor=dotted, op=dotted, type_args=st.lists(type_refs, max_size=2).map(tuple),
        attrs=attrs_small), max_size=2).map(tuple)),
)
definitions = st.one_of(
    st.builds(ast.Definition, kind=st.just("operator"), name=idents, public=st.booleans(),
              blocks=st.lists(blocks, max_size=4).map(tuple)),
    st.builds(ast.Definition, kind=st.just("graph"), name=idents, blocks=st.lists(blocks, max_size=4).map(tuple)),
)
modules = st.builds(
    ast.Module,
    definitions=st.lists(definitions, max_size=3).map(tuple),
    imports=st.lists(st.builds(ast.Import, module=dotted), max_size=2).map(tuple),
    version=st.none() | st.tuples(st.integers(0, 99), st.integers(0, 99)),
    extensions=st.lists(dotted, max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules)
def test_random_modules_round_trip(tree: ast.Module) -> None:
    text = format_module(tree)
    again, diags = parse(text)
    assert not diags, (text, diags)
    assert again == tree, text
    assert format_module(again) == text
