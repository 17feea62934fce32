"""Tests for skriptnd.semantics.evaluate: the exact compile-time evaluator (spec §2.3-§2.5).

Expressions are parsed with parse_expr and evaluated over concrete values. Besides the
examples of the spec text, the real @using / @assert blocks of the standard library are
evaluated and compared with independent (numpy / plain Python) computations.
"""

from __future__ import annotations

import math
import pickle
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skriptnd.diagnostics import Diagnostic
from skriptnd.resources import stdlib_dir
from skriptnd.semantics.evaluate import EvalError, Unbound, evaluate, format_value, free_names
from skriptnd.semantics.values import NO_UNIFORM, Pack, TensorValue
from skriptnd.syntax import ast
from skriptnd.syntax.parser import parse_expr, parse_module

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


@cache
def parsed(text: str) -> ast.Expr:
    expr, diags = parse_expr(text)
    assert not diags, diags
    assert expr is not None
    return expr


def ev(text: str, dtypes: dict[str, str] | None = None, **env: Any) -> Any:
    return evaluate(parsed(text), env, dtypes)


def P(*items: Any, uniform: Any = NO_UNIFORM) -> Pack:
    return Pack(items, uniform)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types (True == 1 and 1 == 1.0 in Python, not in SkriptND)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, Pack) and isinstance(b, tuple) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def check(text: str, expected: Any, dtypes: dict[str, str] | None = None, **env: Any) -> Any:
    value = ev(text, dtypes, **env)
    assert same(value, expected), f"{text} = {value!r}, expected {expected!r}"
    return value


def uniform(value: Pack) -> Any:
    assert isinstance(value, Pack)
    return value.uniform


def err(text: str, code: str, dtypes: dict[str, str] | None = None, **env: Any) -> EvalError:
    with pytest.raises(EvalError) as info:
        ev(text, dtypes, **env)
    assert info.value.code == code, f"{text}: {info.value.code} {info.value.message}"
    return info.value


def at(e: EvalError, line: int, col: int, end_col: int | None = None) -> None:
    """The error points at line:col (and ends at end_col on that line)."""
    assert (e.span.line, e.span.col) == (line, col), (e.span, e.message)
    if end_col is not None:
        assert (e.span.end_line, e.span.end_col) == (line, end_col), (e.span, e.message)


X = TensorValue("real", (2, 3))
Y = TensorValue("int", (4,))
XS = Pack([TensorValue("real", (1, 2)), TensorValue("real", (5, 2))])


# --------------------------------------------------------------------------------------------
# Literals, identifiers, defaults (§2.4)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("123", 123),
    ("1.23", 1.23),
    ("1e-5", 1e-5),
    ("true", True),
    ("false", False),
    ("inf", math.inf),
    ("-inf", -math.inf),
    ("pi", math.pi),
    ("'single'", "single"),
    ('"double"', "double"),
    ('"long " \'string\'', "long string"),
    ("int()", 0),
    ("real()", 0.0),
    ("bool()", False),
    ("str()", ""),
])
def test_literals_and_defaults(text: str, expected: Any) -> None:
    check(text, expected)


def test_identifiers() -> None:
    check("a", 40, a=40)
    check("[1, two, 3]", P(1, 2, 3), two=2)
    check("xs", XS, xs=XS)
    check("n", None, n=None)
    check("s", P(1, 2), s=(1, 2))  # plain sequences are accepted as packs


def test_unbound_identifier() -> None:
    with pytest.raises(Unbound) as info:
        ev("1 + (b * 2)", a=1)
    e = info.value
    assert e.code == "E0201" and e.name == "b"
    at(e, 1, 6, 7)
    with pytest.raises(Unbound):
        ev("?b")  # a null test needs a value (possibly null), not a missing identifier


def test_generic_casts_and_defaults() -> None:
    check("T()", 0.0, {"T": "real"})
    check("T()", 0, {"T": "int"})
    check("T()", False, {"T": "bool"})
    check("T()", "", {"T": "str"})
    check("T(1)", 1.0, {"T": "real"})
    check("T(x)", 2, {"T": "int"}, x=2.9)
    check("T([1, 0])", P(True, False), {"T": "bool"})
    at(err("T(1)", "E0305", {"T": "str"}), 1, 1)
    err("T(1)", "E0503")  # without dtypes `T` is just an unknown operator
    err("T(1, 2)", "E0502", {"T": "int"})


# --------------------------------------------------------------------------------------------
# Implicitly defined identifiers (§2.4)
# --------------------------------------------------------------------------------------------


def test_shape_rank_size() -> None:
    check("x.shape", P(2, 3), x=X)
    check("x.rank", 2, x=X)
    check("x.shape.size", 2, x=X)
    check("xs.size", 2, xs=XS)
    check("xs[1].shape", P(5, 2), xs=XS)
    check("s.size", 0, s=P())
    check("x.shape", None, x=None)
    at(err("xs.shape", "E0304", xs=XS), 1, 1, 9)
    err("xs.rank", "E0304", xs=XS)
    err("x.size", "E0304", x=X)
    err("n.shape", "E0302", n=3)
    err("x.shape", "E0503", x=TensorValue("real", (None, 3)))
    check("x.rank", 2, x=TensorValue("real", (None, 3)))


# --------------------------------------------------------------------------------------------
# String formatting (§2.4) and format_value
# --------------------------------------------------------------------------------------------


def test_spec_format_example() -> None:
    check('"a = {a + 2}"', "a = 42", a=40)


def test_format_fields() -> None:
    check('"{s} and {r}, {b}, {m}"', "[1, 2] and 0.5, true, CONSTANT", s=P(1, 2), r=0.5, b=True, m="CONSTANT")
    check('"one of {ms}"', "one of ['CONSTANT', 'REFLECT']", ms=P("CONSTANT", "REFLECT"))
    check('"x is {x}"', "x is tensor<real>[2, 3]", x=X)
    check('"\\{a\\} = {a}"', "{a} = 1", a=1)
    check('"a = {a}"', None, a=None)  # §2.4.1: null propagates through formatting


@pytest.mark.parametrize(("value", "text"), [
    (42, "42"),
    (-3, "-3"),
    (1.0, "1.0"),
    (0.5, "0.5"),
    (0.1, "0.1"),
    (1e-05, "1e-5"),
    (1.5e-07, "1.5e-7"),
    (1e16, "1e16"),
    (-2.5e300, "-2.5e300"),
    (math.inf, "inf"),
    (-math.inf, "-inf"),
    (math.nan, "nan"),
    (True, "true"),
    (False, "false"),
    ("it's", "it's"),
    (None, "null"),
    (Pack([1, 2, 3]), "[1, 2, 3]"),
    (Pack([]), "[]"),
    (Pack([1.5, math.inf]), "[1.5, inf]"),
    (Pack([True, False]), "[true, false]"),
    (Pack(["a", "it's"]), "['a', 'it\\'s']"),
    (TensorValue("real", (2, 3)), "tensor<real>[2, 3]"),
    (TensorValue("int", ()), "tensor<int>[]"),
    (TensorValue("bool", (None, 4)), "tensor<bool>[?, 4]"),
    (Pack([TensorValue("real", (1,))]), "[tensor<real>[1]]"),
])
def test_format_value(value: Any, text: str) -> None:
    assert format_value(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_real_round_trips(x: float) -> None:
    text = format_value(x)
    assert float(text) == x
    assert "e+" not in text and "e-0" not in text


# --------------------------------------------------------------------------------------------
# Lists, repetition, ranges, zip (§2.4)
# --------------------------------------------------------------------------------------------


def test_lists_and_expansion() -> None:
    check("[]", P())
    check("[a, b.., c]", P(1, 2, 3, 4), a=1, b=P(2, 3), c=4)
    check("[b.., d..]", P(2, 3, 5), b=P(2, 3), d=P(5))
    check("[a..(5)]", P(7, 7, 7, 7, 7), a=7)
    check("[1 ..(5)]", P(1, 1, 1, 1, 1))
    check("[1..(3)]", P(1, 1, 1))  # accepted without the space too (docs/grammar.md)
    check("[a..(n)]", P(), a=7, n=0)
    check("[a..(c), 2]", P(1, 2), a=1, c=True)  # conditional expansion
    check("[a..(c), 2]", P(2), a=1, c=False)
    check("[s..(2)]", P(1, 2), s=P(1, 2))  # a length after a pack is checked
    check("[x, y]", P(X, X), x=X, y=X)


def test_ranges() -> None:
    check("[0:5]", P(0, 1, 2, 3, 4))
    check("[1:10:3]", P(1, 4, 7))
    check("[5:0:-1]", P(5, 4, 3, 2, 1))
    check("[5:0:-2]", P(5, 3, 1))
    check("[0:0]", P())
    check("[3:0]", P())
    check("[0, 2:n, b..]", P(0, 2, 3, 9), n=4, b=P(9))
    check("[b:e:s]", P(10, 7), b=10, e=4, s=-3)


def test_zip_and_unzip() -> None:
    a, b = P(1, 2, 3), P(4, 5, 6)
    c = check("[(a, b)..]", P(1, 4, 2, 5, 3, 6), a=a, b=b)
    check("c[0::2]", a, c=c)
    check("c[1::2]", b, c=c)
    check("[(a, b, a)..]", P(1, 4, 1, 2, 5, 2), a=P(1, 2), b=P(4, 5))
    check("[(a, b)..]", P(), a=P(), b=P())
    check("[0, (a, b)..]", P(0, 1, 2), a=P(1), b=P(2))


def test_list_errors() -> None:
    at(err("[1, a]", "E0304", a=P(1)), 1, 5, 6)
    at(err("[1, 2.0]", "E0301"), 1, 5, 8)
    at(err("[1, b..]", "E0301", b=P(1.0)), 1, 5, 8)
    err("['a', 1]", "E0301")
    at(err("[a..]", "E0304", a=1), 1, 2)
    at(err("[a..(n)]", "E0502", a=1, n=-1), 1, 6, 7)
    err("[a..(n)]", "E0302", a=1, n=1.0)
    err("[s..(3)]", "E0502", s=P(1, 2))
    err("[0 ..(n)]", "E0502", n=10**12)
    at(err("[0:5:s]", "E0502", s=0), 1, 6, 7)
    err("[0:n]", "E0302", n=2.0)
    err("[(a, b)..]", "E0502", a=P(1, 2), b=P(1))
    err("[(a, b)..]", "E0304", a=P(1, 2), b=3)


# --------------------------------------------------------------------------------------------
# Indexing and substitution (§2.4)
# --------------------------------------------------------------------------------------------


def test_indexing() -> None:
    a = P(10, 11, 12, 13)
    check("a[0]", 10, a=a)
    check("a[-1]", 13, a=a)
    check("a[[0, 2, -1, 0]]", P(10, 12, 13, 10), a=a)
    check("a[i]", P(11, 12), a=a, i=P(1, 2))
    check("a[[]]", P(), a=a)
    check("a[1:3]", P(11, 12), a=a)
    check("a[:2]", P(10, 11), a=a)
    check("a[2:]", P(12, 13), a=a)
    check("a[::-1]", P(13, 12, 11, 10), a=a)
    check("a[k-1::-1]", P(11, 10), a=a, k=2)
    check("a[:-1]", P(10, 11, 12), a=a)
    check("a[1:100]", P(11, 12, 13), a=a)
    check("a[[true, false, true, false]]", P(10, 12), a=a)
    check("a[a > 11]", P(12, 13), a=a)
    check("xs[0]", XS[0], xs=XS)
    check("a[n]", None, a=a, n=None)
    check("a[n:]", None, a=a, n=None)


def test_string_indexing() -> None:
    s = "hello"
    check("s[0]", "h", s=s)
    check("s[-1]", "o", s=s)
    check("s[1:3]", "el", s=s)
    check("s[::-1]", "olleh", s=s)
    check("s[[0, 4, 2]]", "hol", s=s)
    check("s[[true, false, false, false, true]]", "ho", s=s)
    check("'abc'[1]", "b")


def test_indexing_errors() -> None:
    a = P(1, 2, 3)
    at(err("a[5]", "E0502", a=a), 1, 3, 4)
    at(err("a[-4]", "E0502", a=a), 1, 3, 5)
    at(err("a[[0, 3]]", "E0502", a=a), 1, 3, 9)
    at(err("a[0:3:0]", "E0502", a=a), 1, 7, 8)
    at(err("a[[true]]", "E0502", a=a), 1, 3)
    err("a[true]", "E0302", a=a)
    err("a[1.0]", "E0302", a=a)
    err("a[0:1.0]", "E0302", a=a)
    at(err("n[0]", "E0302", n=5), 1, 1, 2)
    err("x[0]", "E0503", x=X)


def test_substitution() -> None:
    a = P(1, 2, 3)
    check("a[1] <- 9", P(1, 9, 3), a=a)
    check("a[-1] <- 9", P(1, 2, 9), a=a)
    check("a[[0, 2]] <- [7, 8]", P(7, 2, 8), a=a)
    check("a[[0, -1]] <- 0", P(0, 2, 0), a=a)  # a non-pack value broadcasts
    check("a[[]] <- []", a, a=a)
    check("a[i] <- b + 1", P(1, 2, 5), a=a, i=2, b=4)
    check("[0 ..(3)][[2, 0]] <- [5, 6]", P(6, 0, 5))
    check("a[i] <- b", None, a=a, i=None, b=1)
    assert ev("a[1] <- 3", a=P(3, 2, 3)).uniform == 3  # uniform recomputed from the items


def test_substitution_errors() -> None:
    a = P(1, 2, 3)
    at(err("a[0] <- [1]", "E0304", a=a), 1, 9, 12)
    err("a[[0, 1]] <- [1]", "E0502", a=a)
    at(err("a[5] <- 1", "E0502", a=a), 1, 3, 4)
    at(err("a[0] <- 1.0", "E0301", a=a), 1, 9, 12)
    err("a[[true]] <- 1", "E0302", a=a)
    err("n[0] <- 1", "E0302", n=4)


# --------------------------------------------------------------------------------------------
# Unary and binary operators (§2.4)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("-3", -3), ("+3", 3), ("-2.5", -2.5), ("!true", False), ("--1", 1),
    ("1 + 2 * 3", 7), ("7 - 10", -3), ("2.5 * 2.0", 5.0),
    ("7 / 2", 3), ("-7 / 2", -4), ("7 / -2", -4), ("7.0 / 2.0", 3.5),
    ("7 \\ 2", 4), ("-7 \\ 2", -3), ("6 \\ 3", 2), ("7.0 \\ 2.0", 4.0), ("-7.5 \\ 2.0", -3.0),
    ("7 % 3", 1), ("-7 % 3", 2), ("7 % -3", -2),
    ("2 ** 10", 1024), ("2 ** 0", 1), ("0 ** 0", 1), ("2.0 ** -1.0", 0.5), ("4.0 ** 0.5", 2.0),
    ("3 <? 5", 3), ("3 >? 5", 5), ("2.5 <? -1.0", -1.0), ("-1 >? 0", 0),
    ("1 < 2", True), ("2 <= 2", True), ("1 > 2", False), ("2 >= 3", False),
    ("1 == 1", True), ("1 != 1", False), ("'a' < 'b'", True), ("'a' == 'a'", True),
    ("true == false", False), ("false < true", True), ("1.5 == 1.5", True),
    ("true && false", False), ("true || false", True), ("true ^ true", False), ("true ^ false", True),
    ("true => false", False), ("false => false", True), ("true => true", True),
    ("inf > 1e300", True), ("-inf < -1e300", True),
])
def test_operators(text: str, expected: Any) -> None:
    check(text, expected)


def test_precedence_readings() -> None:
    check("s is -1 ? 1 : s", 1, s=-1)
    check("2 * p ?? n - 1", 5, p=None, n=6)
    check("a <? b + 1", 3, a=5, b=2)
    check("-x ** 2", -4, x=2)
    check("s > 0 => a >= b", True, s=0, a=1, b=2)


def test_elementwise() -> None:
    a, b = P(1, 2, 3), P(10, 20, 30)
    check("a + b", P(11, 22, 33), a=a, b=b)
    check("a * 2", P(2, 4, 6), a=a)
    check("10 - a", P(9, 8, 7), a=a)
    check("-a", P(-1, -2, -3), a=a)
    check("!c", P(False, True), c=P(True, False))
    check("a < 2", P(True, False, False), a=a)
    check("a == b / 10", P(True, True, True), a=a, b=b)
    check("a >? 2", P(2, 2, 3), a=a)
    check("m == ms", P(False, True), m="B", ms=P("A", "B"))
    check("a + []", None, a=None)
    check("[] + 1", P())


def test_operator_type_errors() -> None:
    at(err("1 + true", "E0302"), 1, 5, 9)
    at(err("true + 1", "E0302"), 1, 1, 5)
    at(err("1 < 1.0", "E0301"), 1, 1, 8)
    at(err("1 + 2.0", "E0301"), 1, 1, 8)
    at(err("'a' + 'b'", "E0302"), 1, 1)
    e = err("a * 2.0", "E0301", a=P(1, 2))
    assert "'*'" in e.message and "int" in e.message and "real" in e.message
    check("-1.5 % 2.0", 0.5)  # reals too, floor modulo (docs/spec-errata.md S9)
    err("1.0 % 2", "E0301")
    err("1 && true", "E0302")
    err("-true", "E0302")
    err("!1", "E0302")
    err("1 == true", "E0301")
    err("x + 1", "E0503", x=X)
    err("x < x", "E0503", x=X)
    at(err("[1, 2, 3] + [1, 2]", "E0502"), 1, 1, 19)
    assert err("[1, 2, 3] + [1, 2]", "E0502").message == "pack lengths differ: 3 vs 2"


def test_arithmetic_errors() -> None:
    at(err("1 + 2 / 0", "E0502"), 1, 9, 10)
    at(err("1.0 / 0.0", "E0502"), 1, 7, 10)
    at(err("5 \\ (a - a)", "E0502", a=1), 1, 6)
    at(err("5 % 0", "E0502"), 1, 5, 6)
    at(err("2 ** -1", "E0502"), 1, 6, 8)
    err("(-8.0) ** (1.0 / 3.0)", "E0502")
    err("0.0 ** -1.0", "E0502")
    err("10.0 ** 400.0", "E0502")
    err("2 ** 100000000", "E0502")
    e = err("1 +\n  x / 0", "E0502", x=4)
    at(e, 2, 7, 8)
    assert e.span.end_line == 2
    err("a / [1, 0]", "E0502", a=1)


def test_short_circuit_guards() -> None:
    # The `=>` guard of reshape's @assert: no division by zero when the premise is false.
    check("v != 0 => v % w == 0", True, v=0, w=0)
    check("b != 0 && a / b > 1", False, a=1, b=0)
    check("b == 0 || a / b > 1", True, a=1, b=0)
    check("false && n", False, n=None)
    # A pack right side still gives a pack result.
    check("false && c", P(False, False), c=P(True, False))
    check("true || c", P(True, True), c=P(True, False))
    check("false => c", P(True, True), c=P(True, False))
    err("false && 1", "E0302")  # a type error is not hidden
    with pytest.raises(Unbound):
        ev("false && q")
    # Not short-circuited: a pack left side, or a left side that does not decide.
    err("c && a / 0 > 1", "E0502", c=P(False), a=P(1))
    check("true && n", None, n=None)


# --------------------------------------------------------------------------------------------
# Select, coalescing, null test, identity, containment (§2.4)
# --------------------------------------------------------------------------------------------


def test_select() -> None:
    check("c ? a : b", 1, c=True, a=1, b=2)
    check("c ? a : b", 2, c=False, a=1, b=2)
    check("c ? a", 1, c=True, a=1)
    check("c ? a", None, c=False, a=1)
    check("b != 0 ? a / b : 0", 0, a=1, b=0)  # the other branch is not evaluated
    check("c ? [1, 2, 3] : [4]", P(4), c=False)  # branches may differ in length
    check("p ? q : r", P(1, 20, 3), p=P(True, False, True), q=P(1, 2, 3), r=P(10, 20, 30))
    check("p ? 0 : r", P(0, 20, 0), p=P(True, False, True), r=P(10, 20, 30))
    check("p ? q", P(1, 2), p=P(True, True), q=P(1, 2))
    check("p ? q", None, p=P(True, False), q=P(1, 2))
    check("p ? 1 : 2", P(), p=P())
    check("?x && c ? x : 0", 0, x=None, c=True)
    check("?x && c ? x : 0", 5, x=5, c=True)
    check("?x && x > 0 ? x : 0", 0, x=None)


def test_select_skips_branches_no_item_picks() -> None:
    check("p ? a / b : a", P(1, 2), p=P(False, False), a=P(1, 2), b=0)
    check("p ? a : a / b", P(1, 2), p=P(True, True), a=P(1, 2), b=0)
    check("p ? a / b : 0", P(), p=P(), a=P(), b=0)
    check("(p ? a / b : [x ..(0)]) := ..", 7, p=P(uniform=False), a=P(), b=0, x=7)
    check("p ? n", P(), p=P(), n=None)
    err("p ? a / b : a", "E0502", p=P(True, False), a=P(1, 2), b=0)


def test_select_errors() -> None:
    at(err("1 ? 2 : 3", "E0302"), 1, 1, 2)
    err("p ? q : r", "E0502", p=P(True, False), q=P(1, 2, 3), r=0)
    err("p ? q : r", "E0301", p=P(True, False), q=P(1, 2), r=P(1.0, 2.0))
    err("p ? 1 : 2", "E0302", p=P(1, 0))


def test_coalesce_and_null_test() -> None:
    check("a ?? b", 1, a=1, b=2)
    check("a ?? b", 2, a=None, b=2)
    check("a ?? b", P(1, 2, 3), a=None, b=P(1, 2, 3))
    check("a ?? b", P(1), a=P(1), b=P(1, 2, 3))  # lengths may differ
    check("a ?? 1 / 0", 5, a=5)  # the right side is only evaluated when needed
    check("a ?? b", None, a=None, b=None)
    check("?a", True, a=0)
    check("?a", False, a=None)
    check("?a", True, a=P())
    check("?(a + 1)", False, a=None)
    check("(a + 1) ?? 0", 0, a=None)


def test_identity_versus_equality() -> None:
    # For compile-time values `is` is equality (§2.4, identity testing), element-wise on packs.
    check("s is -1", True, s=-1)
    check("s is -1", P(False, True, False), s=P(3, -1, 2))
    check("s == -1", P(False, True, False), s=P(3, -1, 2))
    check("[1, 2] is [1, 3]", P(True, False))
    check("'a' is 'a'", True)
    check("1.5 is 1.5", True)
    check("ex is 1 ? ey : ex", P(4, 3, 5), ex=P(1, 3, 5), ey=P(4, 1, 5))
    # Tensors: `is` is object identity (decidable at compile time), `==` is a runtime comparison.
    twin = TensorValue("real", (2, 3))
    check("x is x", True, x=X)
    check("x is y", False, x=X, y=twin)
    err("x == y", "E0503", x=X, y=twin)
    err("1 is 1.0", "E0301")
    err("[1, 2] is [1]", "E0502")


def test_containment() -> None:
    check("2 in a", True, a=P(1, 2, 3))
    check("5 in a", False, a=P(1, 2, 3))
    check("1 in []", False)
    check("d in a", P(False, True, False, True), d=P(0, 1, 2, 3), a=P(1, 3))
    check("m in ms", True, m="REFLECT", ms=P("CONSTANT", "REFLECT"))
    check("d in a", None, d=P(1), a=None)
    check("x in xs", P(True, False), x=P(X, TensorValue("real", (2, 3))), xs=P(X))  # tensors by identity
    at(err("1 in 2", "E0304"), 1, 6, 7)
    err("1 in a", "E0301", a=P(1.0))
    err("true in a", "E0301", a=P(1))


# --------------------------------------------------------------------------------------------
# Folds (§2.4, folding and cumulative folding)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("[1, 2, 3] + ..", 6),
    ("[1.5, 2.5] + ..", 4.0),
    ("[2, 3, 4] * ..", 24),
    ("[] + ..", 0),
    ("[] * ..", 1),
    ("[true, false] && ..", False),
    ("[true, true] && ..", True),
    ("[] && ..", True),
    ("[false, true] || ..", True),
    ("[] || ..", False),
    ("[1, 2, 3] < ..", True),
    ("[1, 2, 2] < ..", False),
    ("[1, 2, 2] <= ..", True),
    ("[3, 2, 1] > ..", True),
    ("[3, 3, 1] > ..", False),
    ("[3, 3, 1] >= ..", True),
    ("[] < ..", True),
    ("[] >= ..", True),
    ("[7] < ..", True),
    ("[1, 2, 3] != ..", True),
    ("[1, 2, 1] != ..", False),  # all-to-all, not only neighbours
    ("[] != ..", True),
    ("['a', 'b'] != ..", True),
    ("[2, 2, 2] == ..", True),
    ("[2, 2, 3] == ..", False),
    ("[] == ..", True),
    ("[3, 1, 2] <? ..", 1),
    ("[3, 1, 2] >? ..", 3),
    ("[0.5, -1.5] <? ..", -1.5),
    ("[1, 2] + .. + 42", 45),
    ("[] + .. + 42", 42),
    ("[2, 3] * .. * 2", 12),
    ("[1, 2, 3] + ...", Pack([1, 3, 6])),
    ("[1, 2, 3] * ...", Pack([1, 2, 6])),
    ("[true, false, true] && ...", Pack([True, False, False])),
    ("[false, true, false] || ...", Pack([False, True, True])),
    ("[3, 1, 2] <? ...", Pack([3, 1, 1])),
    ("[1, 3, 2] >? ...", Pack([1, 3, 3])),
    ("[] + ...", Pack([])),
    ("[] <? ...", Pack([])),
])
def test_folds(text: str, expected: Any) -> None:
    check(text, expected)


def test_empty_folds_take_the_item_type() -> None:
    check("[x ..(0)] + ..", 0.0, x=1.5)
    check("[x ..(0)] * ..", 1.0, x=1.5)
    check("[x ..(0)] + ..", 0, x=3)
    err("[x ..(0)] + ..", "E0302", x=True)


def test_fold_errors() -> None:
    at(err("5 + ..", "E0304"), 1, 1, 2)
    at(err("[] <? ..", "E0502"), 1, 1, 9)
    err("[] >? ..", "E0502")
    err("[true] + ..", "E0302")
    err("[true, false] + ..", "E0302")
    err("[1, 2] && ..", "E0302")
    err("[1] && ...", "E0302")
    err("xs == ..", "E0503", xs=XS)
    check("n + ..", None, n=None)


# --------------------------------------------------------------------------------------------
# Uniform values (§2.4 `:=`, §2.5)
# --------------------------------------------------------------------------------------------


def test_uniform_value_roots() -> None:
    check("[1, 1, 1] := ..", 1)
    check("[1, 2] := ..", None)
    check("[] := ..", None)
    check("[x ..(n)] := ..", 7, x=7, n=3)
    check("[x ..(n)] := ..", 7, x=7, n=0)  # uniform by construction, though empty
    check("5 := ..", 5)  # a non-pack is its own uniform value
    check("n := ..", None, n=None)
    check("v := ..", 0.5, v=P(uniform=0.5))


def test_uniform_value_derivation() -> None:
    e = ev("[x ..(0)] + 1", x=2)
    assert e == () and uniform(e) == 3  # the broadcast operand counts as uniform
    check("([x ..(n)] + [y ..(n)]) := ..", 5, x=2, y=3, n=0)
    check("([x ..(n)] + [1, 2]) := ..", None, x=2, n=2)
    check("(-[x ..(0)]) := ..", -2, x=2)
    check("real([x ..(0)]) := ..", 2.0, x=2)
    check("abs([x ..(0)]) := ..", 2, x=-2)
    check("([x ..(0)] < 3) := ..", True, x=2)
    check("([x ..(0)] is 3) := ..", False, x=2)
    check("([x ..(0)] in [2]) := ..", True, x=2)
    check("(c ? [1 ..(0)] : [2 ..(0)]) := ..", 1, c=P(uniform=True))
    check("([x ..(0)] / 0) := ..", None, x=2)  # no item, so no division by zero either
    err("[x ..(0)] + 1", "E0301", x=2.0)  # but a type error is an error
    check("[a.., b..] := ..", 4, a=P(uniform=4), b=P(4, 4))
    check("[a.., b..] := ..", None, a=P(uniform=4), b=P(uniform=5))
    check("[1 ..(0), 2 ..(0)] := ..", None)
    check("[x ..(0), x ..(0)] := ..", 3, x=3)
    check("[a.., 1] := ..", 1, a=P())  # non-empty with equal items
    check("a[0:0] := ..", 6, a=P(uniform=6))
    check("a[[]] := ..", 6, a=P(uniform=6))
    check("([a.., 1] + 0) := ..", 1, a=P())
    check("[(a, b)..] := ..", 2, a=P(uniform=2), b=P(uniform=2))
    check("(a && ...) := ..", True, a=P(uniform=True))
    check("([0 ..(3)][i] <- 1) := ..", 0, i=P())
    check("([0 ..(3)][i] <- 1) := ..", None, i=P(0))


def test_pack_uniform_semantics() -> None:
    # The tensor operator's `u = value := ..` (layout.tensor) on both kinds of value.
    check("value := ..", 0.0, value=ev("[0.0 ..(6)]"))
    check("value := ..", None, value=ev("[0.0, 1.0]"))


# --------------------------------------------------------------------------------------------
# Null propagation (§2.4.1)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "-n", "!n", "n + 1", "1 + n", "n * a", "n < 1", "n == n", "n && true", "n is 1", "n in a", "1 in n",
    "c ? n : 1", "n ? 1 : 2", "p ? n : 1", "[1, n]", "[n..(2)]", "[n..]", "[1 ..(n)]", "[0:n]",
    "[(a, n)..]", '"{n}"', "n + ..", "n + ...", "n[0]", "a[n]", "a[n] <- 1", "a[0] <- n", "n.shape",
    "int(n)", "abs(n)", "sqrt(n)", "n <? 1",
])
def test_null_propagates(text: str) -> None:
    assert ev(text, n=None, a=P(1, 2), c=True, p=P(True)) is None


def test_null_coalescing_and_testing_are_never_null() -> None:
    check("n ?? 3", 3, n=None)
    check("?n", False, n=None)
    check("?[1, 2]", True)
    check("(n + 1) ?? [0]", P(0), n=None)
    check("[x ..(?x)]", P(), x=None)  # a null item repeated zero times is no item
    check("[x ..(?x)]", P(4), x=4)


def test_null_field_in_assertion_message() -> None:
    check("'expected {a}' ?? 'none'", "none", a=None)


# --------------------------------------------------------------------------------------------
# Casts (§2.4) and built-in functions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("int(2.7)", 2), ("int(-2.7)", -2), ("int(true)", 1), ("int(false)", 0), ("int(5)", 5),
    ("real(3)", 3.0), ("real(true)", 1.0), ("real(2.5)", 2.5),
    ("bool(0)", False), ("bool(3)", True), ("bool(0.0)", False), ("bool(-0.5)", True), ("bool(true)", True),
    ("int([1.5, -1.5])", Pack([1, -1])), ("real([1, 2])", Pack([1.0, 2.0])), ("bool([0, 2])", Pack([False, True])),
    ("int(1e20)", 100000000000000000000),
])
def test_casts(text: str, expected: Any) -> None:
    check(text, expected)


def test_cast_errors() -> None:
    at(err("1 + int(inf)", "E0502"), 1, 5, 13)
    err("int(-inf)", "E0502")
    err("int(x)", "E0502", x=math.nan)
    at(err("int(s)", "E0305", s="12"), 1, 1)
    err("real(s)", "E0305", s="1.5")
    err("real(x)", "E0503", x=X)
    with pytest.raises(EvalError) as info:  # the parser already rejects `str(x)`; build it by hand
        evaluate(ast.Cast(type="str", arg=ast.IntLit(value=1)), {})
    assert info.value.code == "E0305"
    with pytest.raises(EvalError) as info:
        evaluate(ast.Cast(type="num", arg=ast.IntLit(value=1)), {})
    assert info.value.code == "E0305"


@pytest.mark.parametrize(("text", "expected"), [
    ("sqrt(4.0)", 2.0), ("exp(0.0)", 1.0), ("log(1.0)", 0.0), ("sin(0.0)", 0.0), ("cos(0.0)", 1.0),
    ("tan(0.0)", 0.0), ("asin(1.0)", math.pi / 2), ("acos(1.0)", 0.0), ("atan(inf)", math.pi / 2),
    ("sinh(0.0)", 0.0), ("cosh(0.0)", 1.0), ("tanh(inf)", 1.0), ("asinh(0.0)", 0.0), ("acosh(1.0)", 0.0),
    ("atanh(0.0)", 0.0), ("sqrt(inf)", math.inf), ("log(inf)", math.inf),
    ("round(2.5)", 3.0), ("round(-2.5)", -3.0), ("round(2.4)", 2.0), ("round(0.49999999999999994)", 0.0),
    ("round(-0.5)", -1.0), ("round(1e300)", 1e300), ("round(inf)", math.inf),
    ("floor(-1.5)", -2.0), ("floor(1.5)", 1.0), ("ceil(-1.5)", -1.0), ("ceil(1.2)", 2.0), ("floor(-inf)", -math.inf),
    ("frac(1.25)", 0.25), ("frac(-1.25)", 0.75),
    ("abs(-3)", 3), ("abs(-2.5)", 2.5), ("abs(0)", 0),
    ("sign(-3)", -1), ("sign(0)", 0), ("sign(7)", 1), ("sign(-2.5)", -1.0), ("sign(0.0)", 0.0),
    ("abs([-1, 2, -3])", Pack([1, 2, 3])), ("sqrt([1.0, 9.0])", Pack([1.0, 3.0])),
    ("round([0.5, 1.5, -0.5])", Pack([1.0, 2.0, -1.0])), ("sign([-2, 0])", Pack([-1, 0])),
])
def test_builtins(text: str, expected: Any) -> None:
    check(text, expected)


def test_builtin_errors() -> None:
    at(err("1.0 + sqrt(-1.0)", "E0502"), 1, 7, 17)
    err("log(0.0)", "E0502")
    err("log(-1.0)", "E0502")
    err("asin(2.0)", "E0502")
    err("acosh(0.5)", "E0502")
    err("atanh(1.0)", "E0502")
    err("exp(1000.0)", "E0502")
    err("sqrt([4.0, -1.0])", "E0502")
    at(err("sqrt(4)", "E0302"), 1, 1)  # real arguments only (§2.4)
    err("abs(true)", "E0302")
    err("sign('a')", "E0302")
    err("sqrt(1.0, 2.0)", "E0502")
    err("abs()", "E0502")
    err("sqrt(x)", "E0503", x=X)


def test_not_compile_time() -> None:
    at(err("conv(x)", "E0503", x=X), 1, 1, 8)
    err("nn.conv(x)", "E0503", x=X)
    err("sqrt{a = 1}(x)", "E0503", x=1.0)
    at(err("1 + x[i, j]", "E0503", x=X, i=0, j=0), 1, 5)
    err("x[]", "E0503", x=X)
    for node in (
        ast.Bounded(value=ast.Name(id="i")),
        ast.Skip(),
        ast.BlockExpr(stmts=()),
        ast.IfExpr(branches=((ast.BoolLit(value=True), ast.IntLit(value=1)),), orelse=ast.IntLit(value=2)),
        ast.LoopExpr(body=ast.Name(id="x")),
        ast.Expand(value=ast.Name(id="s")),
    ):
        with pytest.raises(EvalError) as info:
            evaluate(node, {"i": 0, "x": X, "s": P(1)})
        assert info.value.code in ("E0503", "E0502")


# --------------------------------------------------------------------------------------------
# Errors, diagnostics, free names
# --------------------------------------------------------------------------------------------


def test_eval_error_api() -> None:
    e = err("1 / 0", "E0502")
    d = e.to_diagnostic()
    assert isinstance(d, Diagnostic)
    assert (d.code, d.message, d.span) == ("E0502", "division by zero", e.span)
    again = pickle.loads(pickle.dumps(e))
    assert (again.code, again.message, again.span) == (e.code, e.message, e.span)
    with pytest.raises(Unbound) as info:
        ev("q")
    u = pickle.loads(pickle.dumps(info.value))
    assert isinstance(u, Unbound) and u.name == "q" and u.code == "E0201"
    assert u.to_diagnostic().code == "E0201"


def test_free_names() -> None:
    assert free_names(parsed("a + b * c")) == {"a", "b", "c"}
    assert free_names(parsed("x.shape[0] + n")) == {"x", "n"}
    assert free_names(parsed('"{a} and {b + 1}"')) == {"a", "b"}
    assert free_names(parsed("sqrt(z) + T(w)")) == {"z", "w"}
    assert free_names(parsed("[s..(d), 1 ..(r - d)]")) == {"s", "d", "r"}
    assert free_names(parsed("lhs_align ?? 0")) == {"lhs_align"}
    assert free_names(parsed("c ? a : b")) == {"a", "b", "c"}
    assert free_names(parsed("int() + 1")) == set()
    names = free_names(parsed("a + a"))
    names.add("mutated")
    assert free_names(parsed("a + a")) == {"a"}  # a cached result is not shared


def test_deep_expression() -> None:
    text = " + ".join(["1"] * 3000)
    expr, diags = parse_expr(text)
    assert not diags
    try:
        assert evaluate(expr, {}) == 3000
    except EvalError as e:  # too deep for the Python stack: an error, not a crash
        assert e.code == "E0502"


# --------------------------------------------------------------------------------------------
# Property-based checks
# --------------------------------------------------------------------------------------------

small_ints = st.integers(min_value=-50, max_value=50)
int_lists = st.lists(small_ints, max_size=8)

PY_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "<?": min,
    ">?": max,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "is": lambda a, b: a == b,
}


@given(st.sampled_from(sorted(PY_BINARY)), st.integers(0, 8).flatmap(
    lambda n: st.tuples(st.lists(small_ints, min_size=n, max_size=n), st.lists(small_ints, min_size=n, max_size=n))))
def test_elementwise_matches_python(op: str, lists: tuple[list[int], list[int]]) -> None:
    a, b = lists
    fn = PY_BINARY[op]
    assert ev(f"a {op} b", a=Pack(a), b=Pack(b)) == tuple(fn(x, y) for x, y in zip(a, b, strict=True))
    if a:
        assert ev(f"a {op} k", a=Pack(a), k=b[0] if b else 0) == tuple(fn(x, b[0] if b else 0) for x in a)


@given(int_lists, st.integers(-9, 9).filter(lambda d: d != 0))
def test_division_and_modulo_match_python(a: list[int], d: int) -> None:
    assert ev("a / d", a=Pack(a), d=d) == tuple(x // d for x in a)
    assert ev("a % d", a=Pack(a), d=d) == tuple(x % d for x in a)
    assert ev("a \\ d", a=Pack(a), d=d) == tuple(math.ceil(x / d) for x in a)
    assert ev("(a / d) * d + a % d", a=Pack(a), d=d) == tuple(a)


@given(int_lists)
def test_folds_match_python(a: list[int]) -> None:
    p = Pack(a)
    assert ev("a + ..", a=p) == sum(a)
    assert ev("a * ..", a=p) == math.prod(a)
    assert ev("a < ..", a=p) == all(x < y for x, y in zip(a, a[1:], strict=False))
    assert ev("a <= ..", a=p) == (a == sorted(a))
    assert ev("a >= ..", a=p) == (a == sorted(a, reverse=True))
    assert ev("a != ..", a=p) == (len(set(a)) == len(a))
    assert ev("a == ..", a=p) == (len(set(a)) <= 1)
    assert ev("a + ...", a=p) == tuple(sum(a[:i + 1]) for i in range(len(a)))
    if a:
        assert ev("a <? ..", a=p) == min(a)
        assert ev("a >? ..", a=p) == max(a)
        assert ev("a >? ...", a=p) == tuple(max(a[:i + 1]) for i in range(len(a)))
    bools = [x > 0 for x in a]
    assert ev("b && ..", b=Pack(bools)) == all(bools)
    assert ev("b || ..", b=Pack(bools)) == any(bools)


@given(st.lists(small_ints, max_size=10), st.none() | st.integers(-12, 12), st.none() | st.integers(-12, 12),
       st.none() | st.integers(-4, 4).filter(lambda s: s != 0))
def test_slicing_matches_python(a: list[int], start: int | None, stop: int | None, step: int | None) -> None:
    def show(v: int | None) -> str:
        return "" if v is None else str(v)

    text = f"a[{show(start)}:{show(stop)}" + (f":{show(step)}]" if step is not None else "]")
    assert ev(text, a=Pack(a)) == tuple(a[start:stop:step])
    s = "".join(chr(ord("a") + (x % 26)) for x in a)
    assert ev(text, a=s) == s[start:stop:step]


@given(st.lists(small_ints, min_size=1, max_size=10), st.data())
def test_indexing_matches_python(a: list[int], data: st.DataObject) -> None:
    n = len(a)
    idx = data.draw(st.lists(st.integers(-n, n - 1), max_size=6))
    assert ev("a[i]", a=Pack(a), i=Pack(idx)) == tuple(a[i] for i in idx)
    mask = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    assert ev("a[m]", a=Pack(a), m=Pack(mask)) == tuple(x for x, m in zip(a, mask, strict=True) if m)


@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(-5, 5).filter(lambda s: s != 0))
def test_ranges_match_python(b: int, e: int, s: int) -> None:
    assert ev("[b:e:s]", b=b, e=e, s=s) == tuple(range(b, e, s))


# --------------------------------------------------------------------------------------------
# The standard library's own @using / @assert blocks
# --------------------------------------------------------------------------------------------


@cache
def stdlib_operator(module: str, name: str) -> ast.Definition:
    path = stdlib_dir() / f"{module}.sknd"
    mod, diags = parse_module(path.read_text(encoding="utf-8"), str(path))
    assert mod is not None and not diags, diags
    for definition in mod.definitions:
        if definition.name == name:
            return definition
    raise KeyError(name)


def run_using(definition: ast.Definition, env: dict[str, Any], dtypes: dict[str, str] | None = None) -> dict[str, Any]:
    """Evaluate the @using block in order, like graph composition does (§2.9)."""
    env = dict(env)
    for block in definition.blocks:
        if isinstance(block, ast.UsingBlock):
            for decl in block.items:
                assert isinstance(decl.target, ast.LName)
                value = evaluate(decl.value, env, dtypes)
                if decl.target.pack is not None and decl.target.pack.length is not None:
                    assert len(value) == evaluate(decl.target.pack.length, env, dtypes)
                env[decl.target.name] = value
    return env


def run_asserts(definition: ast.Definition, env: dict[str, Any], dtypes: dict[str, str] | None = None) -> list[str]:
    """The messages of the failing assertions (a packed condition must hold for all items, §2.8)."""
    failed = []
    for block in definition.blocks:
        if isinstance(block, ast.AssertBlock):
            for assertion in block.items:
                value = evaluate(assertion.condition, env, dtypes)
                if value is None:
                    continue  # §2.8: null conditions are skipped
                holds = all(value) if isinstance(value, Pack) else value
                if not holds:
                    message = evaluate(assertion.message, env, dtypes) if assertion.message else "assert"
                    failed.append(message)
    return failed


def test_slice_end_clamp() -> None:
    # slice's `_end = end >? -1 <? s[axes]` (needs the parser to read `>?` as one token).
    check("e >? -1 <? s", P(-1, 3, 2), e=P(-5, 3, 9), s=P(4, 4, 2))
    slice_op = stdlib_operator("layout", "slice")
    env = run_using(slice_op, dict(d=2, k=1, s=P(5, 7), axes=P(1), begin=P(6), end=P(-10), stride=P(-2)))
    assert env["_end"] == (-1,) and env["os"] == (5, 4) == (5, len(range(7)[6::-2]))


def expected_alignment(sx: tuple[int, ...], sy: tuple[int, ...], la: int | None, ra: int | None):
    """The binary operators' alignment, from the prose of §4.2.2 (not from the @using formulas)."""

    def aligned(s: tuple[int, ...], align: int | None) -> tuple[int, ...]:
        if align is None:
            return s
        return (1,) * align + s if align >= 0 else s + (1,) * -align

    ax, ay = aligned(sx, la), aligned(sy, ra)
    rz = max(len(ax), len(ay))

    def padded(s: tuple[int, ...], align: int | None) -> tuple[int, ...]:
        fill = (1,) * (rz - len(s))
        return s + fill if align is not None and align >= 0 else fill + s

    ex, ey = padded(ax, la), padded(ay, ra)
    try:
        # Left-aligned (already padded) shapes broadcast like right-aligned ones of equal rank.
        sz = tuple(np.broadcast_shapes(ex, ey))
    except ValueError:
        sz = None
    return ex, ey, sz


def run_add(sx: tuple[int, ...], sy: tuple[int, ...], la: int | None, ra: int | None) -> tuple[dict[str, Any], list]:
    add = stdlib_operator("math", "add")
    x, y = TensorValue("real", sx), TensorValue("real", sy)
    env = run_using(add, dict(rx=len(sx), sx=Pack(sx), ry=len(sy), sy=Pack(sy), lhs_align=la, rhs_align=ra, x=x, y=y))
    return env, run_asserts(add, env)


@pytest.mark.parametrize(("sx", "sy", "la", "ra"), [
    ((2, 3), (3,), None, None),
    ((2, 1, 4), (3, 1), None, None),
    ((), (2, 3), None, None),
    ((5,), (), None, None),
    ((2, 3, 4), (2,), None, 0),        # rhs aligned to the left
    ((2, 3, 4), (3,), None, 1),        # rhs at dimension 1
    ((2, 3, 4), (3,), None, -1),       # rhs one from the right end
    ((4, 5), (4,), 0, 0),
    ((3,), (2, 3, 4), -1, None),       # lhs one from the right end of the longer rhs
    ((3,), (3, 2), 0, None),
    ((7,), (7,), 1, 1),
])
def test_add_broadcasting(sx: tuple[int, ...], sy: tuple[int, ...], la: int | None, ra: int | None) -> None:
    env, failed = run_add(sx, sy, la, ra)
    ex, ey, sz = expected_alignment(sx, sy, la, ra)
    assert env["ex"] == ex and env["ey"] == ey
    assert sz is not None and env["sz"] == sz and not failed
    if la is None and ra is None:
        assert env["sz"] == np.broadcast_shapes(sx, sy)
        assert env["rz"] == max(len(sx), len(sy))


def test_add_incompatible_shapes_message() -> None:
    env, failed = run_add((2, 3), (4,), None, None)
    assert failed == ["incompatible argument shapes for broadcasting ([2, 3] vs [1, 4] after alignment)"]
    env, failed = run_add((2, 3), (2,), None, None)
    assert failed  # right-aligned by default, so 2 meets 3
    env, failed = run_add((2, 3), (2,), None, 0)
    assert not failed and env["sz"] == (2, 3)


shapes = st.lists(st.integers(1, 3), max_size=4).map(tuple)
aligns = st.none() | st.integers(-2, 3)


@settings(max_examples=200)
@given(shapes, shapes, aligns, aligns)
def test_add_broadcasting_property(sx: tuple[int, ...], sy: tuple[int, ...], la: int | None, ra: int | None) -> None:
    env, failed = run_add(sx, sy, la, ra)
    ex, ey, sz = expected_alignment(sx, sy, la, ra)
    assert env["ex"] == ex and env["ey"] == ey
    if sz is None:
        assert failed
    else:
        assert not failed and env["sz"] == sz
    if la is None and ra is None:
        try:
            assert env["sz"] == np.broadcast_shapes(sx, sy)
        except ValueError:
            assert failed


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 3, 4), (4, 1, 3, 2)])
def test_tensor_strides(shape: tuple[int, ...]) -> None:
    tensor = stdlib_operator("layout", "tensor")
    value = Pack([0.0] * math.prod(shape))
    env = run_using(tensor, dict(shape=Pack(shape), d=len(shape), value=value))
    c_strides = tuple(s // 8 for s in np.empty(shape, dtype=np.float64).strides)
    assert env["strides"] == c_strides
    assert env["prods"] == tuple(math.prod(shape[len(shape) - i:]) for i in range(len(shape) + 1))
    assert env["u"] == 0.0  # a one-item value for shape [] is uniform too


def test_tensor_uniform_value_attribute() -> None:
    tensor = stdlib_operator("layout", "tensor")
    env = run_using(tensor, dict(shape=P(2, 2), d=2, value=ev("[x ..(4)]", x=1.5)))
    assert env["u"] == 1.5
    env = run_using(tensor, dict(shape=P(2, 2), d=2, value=P(1.0, 2.0, 3.0, 4.0)))
    assert env["u"] is None


@pytest.mark.parametrize(("shape", "rank"), [((2, 3, 4), 3), ((2, 3, 4), 2), ((6,), 1)])
def test_flatten_strides(shape: tuple[int, ...], rank: int) -> None:
    flatten = stdlib_operator("layout", "flatten")
    env = run_using(flatten, dict(t=Pack(shape), rank=rank, d=len(shape)))
    c_strides = tuple(s // 8 for s in np.empty(shape[:rank], dtype=np.float64).strides)
    assert env["strides"] == c_strides


def test_flatten_strides_with_rank_zero() -> None:
    # The spec's `prods[rank-1::-1]` is `prods[-1::-1]` = [1] for rank 0 (-1 is the last item, §2.4);
    # the stdlib carries erratum L4, `prods[::-1][1:]`, which is [] for rank 0 and unchanged otherwise.
    check("[1][-1::-1]", (1,))
    flatten = stdlib_operator("layout", "flatten")
    assert run_using(flatten, dict(t=P(2, 3), rank=0, d=2))["strides"] == ()
    assert run_using(flatten, dict(t=P(2, 3, 4), rank=3, d=3))["strides"] == (12, 4, 1)


@pytest.mark.parametrize(("d", "axes", "padding"), [
    (3, (0, 1, 2), (1, 2, 3, 4, 5, 6)),
    (3, (0, 2), (1, 2, 3, 4)),
    (2, (-1,), (7, 8)),
    (2, (), ()),
])
def test_pad_before_after(d: int, axes: tuple[int, ...], padding: tuple[int, ...]) -> None:
    pad = stdlib_operator("layout", "pad")
    k = len(axes)
    env = run_using(pad, dict(d=d, k=k, axes=Pack(axes), padding=Pack(padding), method="CONSTANT"))
    before, after = [0] * d, [0] * d
    for i, axis in enumerate(axes):
        before[axis] = padding[i]
        after[axis] = padding[k + i]
    assert env["before"] == tuple(before) and env["after"] == tuple(after)
    assert run_asserts(pad, dict(env, input=TensorValue("real", (1,) * d))) == []


def test_pad_method_assertion() -> None:
    pad = stdlib_operator("layout", "pad")
    env = run_using(pad, dict(d=1, k=1, axes=P(0), padding=P(1, 1), method="WRAP"))
    assert run_asserts(pad, dict(env, input=TensorValue("real", (3,)))) == [
        "'method' must be one of ['CONSTANT', 'REFLECT', 'REPLICATE', 'SYMMETRIC']"]


@pytest.mark.parametrize(("shape", "axes"), [
    ((1, 3, 1, 4), (0, 2)),
    ((1, 3, 1, 4), (-2,)),
    ((5, 1), (1,)),
    ((2, 3), ()),
    ((1,), (0,)),
])
def test_squeeze_axes(shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    squeeze = stdlib_operator("layout", "squeeze")
    env = run_using(squeeze, dict(d=len(shape), k=len(axes), s=Pack(shape), axes=Pack(axes)))
    d = len(shape)
    assert env["kept_axes"] == tuple(i for i in range(d) if i not in {a % d for a in axes})
    assert ev("s[kept_axes]", **env) == np.squeeze(np.empty(shape), axis=axes).shape
    assert env["zeros"] == (0,) * d
    assert run_asserts(squeeze, dict(env, input=TensorValue("real", shape))) == []


def test_squeeze_assertions() -> None:
    squeeze = stdlib_operator("layout", "squeeze")
    env = run_using(squeeze, dict(d=2, k=2, s=P(1, 3), axes=P(0, -2)))
    failed = run_asserts(squeeze, dict(env, input=TensorValue("real", (1, 3))))
    # 0 and -2 name the same axis, but `axes != ..` compares the raw values: the spec lets it pass.
    assert failed == [] and env["kept_axes"] == (1,)
    env = run_using(squeeze, dict(d=2, k=1, s=P(1, 3), axes=P(1)))
    assert run_asserts(squeeze, dict(env, input=TensorValue("real", (1, 3)))) == ["input.shape at 'axes' must be 1"]


@pytest.mark.parametrize(("shape", "axes"), [
    ((3, 4), (0,)),
    ((3, 4), (1, 3)),
    ((3, 4), (-1,)),
    ((2,), (0, 2)),
    ((), (0,)),
    ((2, 3), ()),
])
def test_unsqueeze_axes(shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    unsqueeze = stdlib_operator("layout", "unsqueeze")
    d, k = len(shape), len(axes)
    env = run_using(unsqueeze, dict(d=d, k=k, s=Pack(shape), axes=Pack(axes)))
    normalized = {a % (d + k) for a in axes}
    assert env["comp_axes"] == tuple(i for i in range(d + k) if i not in normalized)
    assert ev("ones[comp_axes] <- s", **env) == np.expand_dims(np.empty(shape), axes).shape
    assert run_asserts(unsqueeze, dict(env, input=TensorValue("real", shape))) == []


@pytest.mark.parametrize(("dtype", "first", "last", "stride", "count"), [
    ("int", 0, 10, 3, 4),
    ("int", 10, 0, -3, 4),
    ("int", 0, 0, 1, 0),
    ("real", 0.0, 1.0, 0.25, 4),
    ("real", 0.0, 1.0, 0.3, 4),
    ("real", 1.0, 0.0, -0.5, 2),
])
def test_range_count(dtype: str, first: Any, last: Any, stride: Any, count: int) -> None:
    op = stdlib_operator("layout", "range")
    dtypes = {"T": dtype}
    env = run_using(op, dict(first=first, last=last, stride=stride), dtypes)
    assert env["count"] == count == len(np.arange(first, last, stride))
    assert run_asserts(op, env, dtypes) == []
    assert run_asserts(op, dict(env, stride=ev("T(0)", dtypes)), dtypes) != []


def test_reshape_using_and_asserts() -> None:
    reshape = stdlib_operator("layout", "reshape")
    base = dict(axis=0, rank=2, d=2, input_rank=2, s=P(), t=P(4, 6), r=3)
    env = run_using(reshape, dict(base, shape=P(2, -1, 3)))
    assert env["input_volume"] == 24 and env["shape_volume"] == 6 and env["_shape"] == (2, 4, 3)
    assert run_asserts(reshape, dict(env, input=TensorValue("real", (4, 6)))) == []
    # The `=>` guard keeps `input_volume % shape_volume` from dividing by zero.
    env = run_using(reshape, dict(base, t=P(0, 6), shape=P(0, 5), r=2))
    assert env["shape_volume"] == 0
    failed = run_asserts(reshape, dict(env, input=TensorValue("real", (0, 6))))
    assert failed == []


# --------------------------------------------------------------------------------------------
# Robustness: whatever the values, evaluation ends in a value or an EvalError
# --------------------------------------------------------------------------------------------


@cache
def stdlib_expressions() -> tuple[ast.Expr, ...]:
    found = []
    for module in ("layout", "math", "linalg", "nn", "image", "quant", "algo"):
        path = stdlib_dir() / f"{module}.sknd"
        mod, _ = parse_module(path.read_text(encoding="utf-8"), str(path))
        assert mod is not None
        for definition in mod.definitions:
            for block in definition.blocks:
                if isinstance(block, ast.UsingBlock):
                    found.extend(decl.value for decl in block.items)
                elif isinstance(block, ast.AssertBlock):
                    for assertion in block.items:
                        found.append(assertion.condition)
                        if assertion.message is not None:
                            found.append(assertion.message)
                        found.extend(arg.value for arg in assertion.args)
    return tuple(found)


scalars = st.one_of(st.integers(-3, 5), st.sampled_from([0.0, 0.5, -1.5, math.inf, math.nan]), st.booleans(),
                    st.sampled_from(["CONSTANT", "FLOOR", ""]))
values = st.one_of(
    st.none(),
    scalars,
    st.lists(st.integers(-3, 5), max_size=4).map(Pack),
    st.lists(st.booleans(), max_size=4).map(Pack),
    st.lists(st.sampled_from([0.5, 2.0]), max_size=3).map(Pack),
    st.integers(0, 3).map(lambda n: Pack((), uniform=n)),
    st.lists(st.integers(1, 4), max_size=3).map(lambda s: TensorValue("real", tuple(s))),
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_stdlib_expressions_never_crash(data: st.DataObject) -> None:
    exprs = stdlib_expressions()
    expr = exprs[data.draw(st.integers(0, len(exprs) - 1))]
    env = {name: data.draw(values) for name in sorted(free_names(expr))}
    try:
        evaluate(expr, env, {"T": data.draw(st.sampled_from(["int", "real", "bool", "str"]))})
    except EvalError:
        pass
