"""Symbolic extents (sympy): named input dimensions give output shapes as expressions, valid
under recorded guards; `is` compares symbolically (§2.4)."""

from __future__ import annotations

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.semantics.evaluate import evaluate
from skriptnd.semantics.symbolic import SymInt, recording, symbol
from skriptnd.syntax import parse_expr

N, C, H, W, M, K, B, S = (symbol(n) for n in "N C H W M K B S".split())


def ev(text: str, **env: object) -> object:
    expr, diags = parse_expr(text)
    assert not diags
    return evaluate(expr, env)


def test_conv_output_is_an_expression_in_the_input_names() -> None:
    r = skriptnd.infer("nn.conv", {"stride": 2, "padding": [1, 1, 1, 1]}, [["N", 3, "H", "W"], [8, 3, 3, 3]])
    assert r.ok, r.diagnostics
    n, c, h, w = r.outputs[0].shape
    assert (n, c) == (N, 8)
    assert sympy.simplify(h - (sympy.floor((H - 1) / 2) + 1)) == 0
    assert sympy.simplify(w - (sympy.floor((W - 1) / 2) + 1)) == 0
    # the asserts that depend on the names are the guards: the padded input covers the filter
    assert sympy.Ge(H + 2, 3) in r.guards and sympy.Ge(W + 2, 3) in r.guards


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 64), st.integers(3, 64), st.integers(1, 3), st.integers(1, 4), st.integers(0, 2))
def test_symbolic_conv_agrees_with_concrete(h: int, w: int, s: int, k: int, p: int) -> None:
    attrs = {"stride": s, "padding": [p, p, p, p]}
    sym = skriptnd.infer("nn.conv", attrs, [["N", 2, "H", "W"], [4, 2, k, k]])
    assert sym.ok
    concrete = skriptnd.infer("nn.conv", attrs, [[1, 2, h, w], [4, 2, k, k]])
    values = {N: 1, H: h, W: w}
    if concrete.ok and all(bool(g.subs(values)) for g in sym.guards):
        assert tuple(int(sympy.sympify(d).subs(values)) for d in sym.outputs[0].shape) == concrete.outputs[0].shape


def test_matmul_broadcast_batch_and_contraction() -> None:
    r = skriptnd.infer("linalg.matmul", {}, [["B", 1, "M", "K"], ["S", "K", "N"]])
    assert r.outputs[0].shape == (B, S, M, sympy.Symbol("N", integer=True, nonnegative=True))
    # broadcasting decided that the named batch extents are not 1
    assert set(r.guards) == {sympy.Ne(B, 1), sympy.Ne(S, 1)}


def test_mismatched_names_fail_the_operator_assert() -> None:
    r = skriptnd.infer("linalg.matmul", {}, [["M", "K"], ["J", "N"]])
    assert [d.code for d in r.diagnostics] == ["E0501"]
    assert "A.shape = [M, K], B.shape = [J, N]" in r.diagnostics[0].message


def test_reshape_and_split_keep_divisibility_as_guards() -> None:
    r = skriptnd.infer("layout.reshape", {"shape": [-1, 4]}, [["N", 8]])
    assert r.outputs[0].shape == (2 * N, 4)
    r = skriptnd.infer("layout.split", {"axis": 1, "count": 2}, [["N", "C"]])
    assert r.outputs[0].shapes == [(N, sympy.floor(C / 2))] * 2
    assert sympy.Eq(2 * sympy.floor(C / 2), C) in r.guards


def test_concat_and_flatten() -> None:
    a, b = symbol("A"), symbol("B")
    assert skriptnd.infer("layout.concat", {"axis": 1}, [[["N", "A"], ["N", "B"]]]).outputs[0].shape == (N, a + b)
    assert skriptnd.infer("layout.flatten", {"axis": 1}, [["N", "C", "H", "W"]]).outputs[0].shape == (N, C * H * W)


def test_is_compares_symbolically_and_eq_by_value() -> None:
    # §2.4: "the expression s1 is s2 is false. However, the expression s1 == s2 may be true"
    s1, s2 = SymInt.named("s1", 5), SymInt.named("s2", 5)
    with recording() as guards:
        assert ev("s1 is s2", s1=s1, s2=s2) is False
        assert guards == []
        assert ev("s1 == s2", s1=s1, s2=s2) is True
        assert guards == [sympy.Eq(symbol("s1"), symbol("s2"))]
    assert ev("s1 + 1 is 1 + s1", s1=s1) is True
    assert ev("2 * s1 is s1 + s1", s1=s1) is True


def test_symbolic_length_specialises_with_a_guard() -> None:
    d = SymInt.named("d", 3)
    with recording() as guards:
        value = ev("[1 ..(d)]", d=d)
    assert value == (1, 1, 1)
    assert guards == [sympy.Eq(symbol("d"), 3)]


def test_hints_choose_the_sample() -> None:
    # With H hinted below the filter size, the conv assert fails on the sample: reported, not crashed
    r = skriptnd.infer("nn.conv", {"padding": [0, 0, 0, 0]}, [["N", 3, "H", "W"], [8, 3, 5, 5]], hints={"H": 2})
    assert [d.code for d in r.diagnostics] == ["E0501"]
