"""Exact AST shapes for the precedence table and the lexical decisions of docs/grammar.md.

One test per row of the table (loosest first) and per lexical decision, plus the spec's own
examples cited there. Expected trees are built with skriptnd.syntax.ast constructors; spans take no
part in equality.
"""

from __future__ import annotations

import pytest

from skriptnd.syntax import ast
from skriptnd.syntax.parser import parse

# ---------------------------------------------------------------- helpers


def N(id: str) -> ast.Name:
    return ast.Name(id=id)


def I(v: int) -> ast.IntLit:  # noqa: E743
    return ast.IntLit(value=v)


def B(op: str, left: ast.Expr, right: ast.Expr) -> ast.Binary:
    return ast.Binary(op=op, left=left, right=right)


def U(op: str, operand: ast.Expr) -> ast.Unary:
    return ast.Unary(op=op, operand=operand)


def F(op: str, operand: ast.Expr, cumulative: bool = False) -> ast.Fold:
    return ast.Fold(op=op, operand=operand, cumulative=cumulative)


def S(cond: ast.Expr, then: ast.Expr, orelse: ast.Expr | None = None) -> ast.Select:
    return ast.Select(cond=cond, then=then, orelse=orelse)


def Sub(value: ast.Expr, index: ast.Expr) -> ast.Subscript:
    return ast.Subscript(value=value, index=index)


def TA(tensor: ast.Expr, *indices: ast.Expr) -> ast.TensorAccess:
    return ast.TensorAccess(tensor=tensor, indices=indices)


def Str(*parts: str | ast.Expr) -> ast.StrLit:
    return ast.StrLit(parts=tuple(p if isinstance(p, str) else ast.FormatField(value=p) for p in parts))


def L(*items: ast.Expr) -> ast.ListExpr:
    return ast.ListExpr(items=items)


def E(value: ast.Expr, count: ast.Expr | None = None) -> ast.Expand:
    return ast.Expand(value=value, count=count)


MINUS_ONE = U("-", I(1))


def expr(text: str) -> ast.Expr:
    node, diags = parse(text, "<test>", "expr")
    assert diags == [], "\n".join(str(d) for d in diags)
    assert node is not None
    return node


def check(text: str, expected: ast.Expr) -> None:
    assert expr(text) == expected


def stmt(text: str) -> ast.Stmt:
    node, diags = parse(text, "<test>", "stmt")
    assert diags == [], "\n".join(str(d) for d in diags)
    return node


# ---------------------------------------------------------------- the table, loosest first


def test_level1_substitution() -> None:
    # `z[i] <- x + 1` = `z[i] <- (x + 1)`, right-associative, loosest of all
    check("z[i] <- x + 1", ast.Substitute(value=N("z"), index=N("i"), replacement=B("+", N("x"), I(1))))
    check("a[i] <- b[j] <- c", ast.Substitute(value=N("a"), index=N("i"),
                                               replacement=ast.Substitute(value=N("b"), index=N("j"),
                                                                          replacement=N("c"))))
    check("z[i] <- c ? a : b", ast.Substitute(value=N("z"), index=N("i"), replacement=S(N("c"), N("a"), N("b"))))


def test_level2_coalesce() -> None:
    # `p ?? c ? a : b` = `p ?? (c ? a : b)`; `2 * p ?? n - 1` = `(2 * p) ?? (n - 1)`; left-associative
    check("p ?? c ? a : b", B("??", N("p"), S(N("c"), N("a"), N("b"))))
    check("2 * p ?? n - 1", B("??", B("*", I(2), N("p")), B("-", N("n"), I(1))))
    check("a ?? b ?? c", B("??", B("??", N("a"), N("b")), N("c")))
    check("a => b ?? c", B("??", B("=>", N("a"), N("b")), N("c")))
    check("a || b ?? c", B("??", B("||", N("a"), N("b")), N("c")))
    # the branches of a select are selects: `c ? a ?? b` is `(c ? a) ?? b`
    check("c ? a ?? b", B("??", S(N("c"), N("a")), N("b")))
    check("c ? (a ?? b) : d", S(N("c"), B("??", N("a"), N("b")), N("d")))
    # below `<-`: the replacement is a whole expression
    check("z[i] <- x ?? y", ast.Substitute(value=N("z"), index=N("i"), replacement=B("??", N("x"), N("y"))))


def test_level2_coalesce_stdlib_offset() -> None:
    # nn.conv and the pooling operators
    check("padding[:d] ?? padding_align == 'UPPER' ? paddings / 2 : paddings \\ 2",
          B("??", Sub(N("padding"), ast.Range(start=None, stop=N("d"))),
            S(B("==", N("padding_align"), Str("UPPER")), B("/", N("paddings"), I(2)),
              B("\\", N("paddings"), I(2)))))


def test_level3_select() -> None:
    # `p ? a : q ? b : c` = `p ? a : (q ? b : c)`, right-associative
    check("p ? a : q ? b : c", S(N("p"), N("a"), S(N("q"), N("b"), N("c"))))
    check("p ? q ? a : b : c", S(N("p"), S(N("q"), N("a"), N("b")), N("c")))
    check("c ? a", S(N("c"), N("a")))
    check("a => b ? c : d", S(B("=>", N("a"), N("b")), N("c"), N("d")))
    check("a || b ? c : d", S(B("||", N("a"), N("b")), N("c"), N("d")))


def test_level4_implies() -> None:
    # `s > 0 => a >= b` = `(s > 0) => (a >= b)`, right-associative
    check("s > 0 => a >= b", B("=>", B(">", N("s"), I(0)), B(">=", N("a"), N("b"))))
    check("a => b => c", B("=>", N("a"), B("=>", N("b"), N("c"))))
    check("a || b => c || d", B("=>", B("||", N("a"), N("b")), B("||", N("c"), N("d"))))


def test_level5_or() -> None:
    check("a || b || c", B("||", B("||", N("a"), N("b")), N("c")))
    check("a || b ^ c", B("||", N("a"), B("^", N("b"), N("c"))))


def test_level6_xor() -> None:
    # between `||` and `&&`, as in C
    check("a ^ b ^ c", B("^", B("^", N("a"), N("b")), N("c")))
    check("a ^ b || c", B("||", B("^", N("a"), N("b")), N("c")))
    check("a && b ^ c", B("^", B("&&", N("a"), N("b")), N("c")))


def test_level7_and() -> None:
    # `a && b || c` = `(a && b) || c`
    check("a && b || c", B("||", B("&&", N("a"), N("b")), N("c")))
    check("a || b && c", B("||", N("a"), B("&&", N("b"), N("c"))))
    check("a && b && c", B("&&", B("&&", N("a"), N("b")), N("c")))
    check("a < b && c == d", B("&&", B("<", N("a"), N("b")), B("==", N("c"), N("d"))))


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!=", "is", "in"])
def test_level8_comparisons(op: str) -> None:
    check(f"a {op} b + c", B(op, N("a"), B("+", N("b"), N("c"))))
    check(f"a {op} b && c", B("&&", B(op, N("a"), N("b")), N("c")))
    # left-associative among themselves
    check(f"a {op} b == c", B("==", B(op, N("a"), N("b")), N("c")))


def test_level8_is_and_in_examples() -> None:
    # `s is -1 ? 1 : s` = `(s is -1) ? 1 : s`
    check("s is -1 ? 1 : s", S(B("is", N("s"), MINUS_ONE), I(1), N("s")))
    check("dims in (axes < 0 ? axes + d : axes)",
          B("in", N("dims"), S(B("<", N("axes"), I(0)), B("+", N("axes"), N("d")), N("axes"))))


def test_level9_min() -> None:
    # `a <? b + 1` = `a <? (b + 1)`; `a <? b < c` compares the minimum
    check("a <? b + 1", B("<?", N("a"), B("+", N("b"), I(1))))
    check("a <? b < c", B("<", B("<?", N("a"), N("b")), N("c")))
    check("a + b <? c - d", B("<?", B("+", N("a"), N("b")), B("-", N("c"), N("d"))))


def test_level9_max() -> None:
    check("qx >? qy", B(">?", N("qx"), N("qy")))
    check("a >? b + 1", B(">?", N("a"), B("+", N("b"), I(1))))
    check("a <? b >? c", B(">?", B("<?", N("a"), N("b")), N("c")))
    check("end >? -1 <? s[axes]", B("<?", B(">?", N("end"), MINUS_ONE), Sub(N("s"), N("axes"))))


def test_level10_additive() -> None:
    check("a - b - c", B("-", B("-", N("a"), N("b")), N("c")))
    check("a - b + c", B("+", B("-", N("a"), N("b")), N("c")))
    check("a + b * c", B("+", N("a"), B("*", N("b"), N("c"))))


def test_level11_multiplicative() -> None:
    check("a / b \\ c % d * e", B("*", B("%", B("\\", B("/", N("a"), N("b")), N("c")), N("d")), N("e")))
    check("a * b + c", B("+", B("*", N("a"), N("b")), N("c")))
    check("a * -b", B("*", N("a"), U("-", N("b"))))


def test_level12_unary() -> None:
    # `?x && c` = `(?x) && c`
    check("?x && c", B("&&", U("?", N("x")), N("c")))
    check("!a && b", B("&&", U("!", N("a")), N("b")))
    check("-a * b", B("*", U("-", N("a")), N("b")))
    check("+a", U("+", N("a")))
    check("--a", U("-", U("-", N("a"))))
    check("!?x", U("!", U("?", N("x"))))
    check("-x.shape", U("-", ast.Property(value=N("x"), name="shape")))


def test_level13_power() -> None:
    # `-x ** 2` = `-(x ** 2)`, `2 ** -1` allowed, right-associative
    check("-x ** 2", U("-", B("**", N("x"), I(2))))
    check("2 ** -1", B("**", I(2), MINUS_ONE))
    check("a ** b ** c", B("**", N("a"), B("**", N("b"), N("c"))))
    check("a * b ** c", B("*", N("a"), B("**", N("b"), N("c"))))
    check("x[i] ** 2", B("**", Sub(N("x"), N("i")), I(2)))


def test_level14_postfix() -> None:
    check("x.shape", ast.Property(value=N("x"), name="shape"))
    check("x.rank", ast.Property(value=N("x"), name="rank"))
    check("xs.size", ast.Property(value=N("xs"), name="size"))
    check("x.shape[0]", Sub(ast.Property(value=N("x"), name="shape"), I(0)))
    check("nn.conv", N("nn.conv"))
    check("f(x)[0]", Sub(ast.Call(callee="f", args=(N("x"),)), I(0)))
    check("op1.w.shape", ast.Property(value=N("op1.w"), name="shape"))


# ---------------------------------------------------------------- spec examples cited in the docs


def test_conv_paddings() -> None:
    inner = B("-", B("\\", N("is"), N("stride")), I(1))
    check("2 * padding ?? (is \\ stride - 1) * stride + fd - is",
          B("??", B("*", I(2), N("padding")), B("-", B("+", B("*", inner, N("stride")), N("fd")), N("is"))))


def test_binary_op_px() -> None:
    check("(lhs_align < 0 ? rz - qx : lhs_align) ?? rz - rx",
          B("??", S(B("<", N("lhs_align"), I(0)), B("-", N("rz"), N("qx")), N("lhs_align")),
            B("-", N("rz"), N("rx"))))


def test_concat_extent() -> None:
    check("u * n ?? (z + ..)", B("??", B("*", N("u"), N("n")), F("+", N("z"))))


def test_reshape_implication() -> None:
    check("input_volume != 0 => shape > 0 || shape is -1",
          B("=>", B("!=", N("input_volume"), I(0)),
            B("||", B(">", N("shape"), I(0)), B("is", N("shape"), MINUS_ONE))))


def test_squeeze_expanded_substitution() -> None:
    # Expansion binds looser than `<-`: the substituted pack, expanded.
    check("input[zeros[kept_axes] <- si..]",
          TA(N("input"), E(ast.Substitute(value=N("zeros"), index=N("kept_axes"), replacement=N("si")))))


def test_pooling_substitution_with_bounded_index() -> None:
    check("input[i[axes] <- |stride * i[axes] + j|..]",
          TA(N("input"), E(ast.Substitute(
              value=N("i"), index=N("axes"),
              replacement=ast.Bounded(value=B("+", B("*", N("stride"), Sub(N("i"), N("axes"))), N("j")))))))


def test_pad_select_chain() -> None:
    text = ("method == 'REFLECT' ? input[|zi <> -zi : 2 * (s - 1) - zi|..] :"
            " method == 'REPLICATE' ? input[|zi <> 0 : s - 1|..] :"
            " (before + after == 0 || (zi >= 0 && zi < s)) && .. ? input[zi..] :"
            " (value[] ?? T())")
    reflect = TA(N("input"), E(ast.Bounded(value=N("zi"), low=U("-", N("zi")),
                                           high=B("-", B("*", I(2), B("-", N("s"), I(1))), N("zi")))))
    replicate = TA(N("input"), E(ast.Bounded(value=N("zi"), low=I(0), high=B("-", N("s"), I(1)))))
    inside = F("&&", B("||", B("==", B("+", N("before"), N("after")), I(0)),
                       B("&&", B(">=", N("zi"), I(0)), B("<", N("zi"), N("s")))))
    default = B("??", TA(N("value")), ast.Call(callee="T", args=()))
    check(text, S(B("==", N("method"), Str("REFLECT")), reflect,
                  S(B("==", N("method"), Str("REPLICATE")), replicate,
                    S(inside, TA(N("input"), E(N("zi"))), default))))


def test_null_test_select() -> None:
    check("?x && c ? x : 0", S(B("&&", U("?", N("x")), N("c")), N("x"), I(0)))


# ---------------------------------------------------------------- folds


@pytest.mark.parametrize("op", ["+", "*", "&&", "||", "<", "<=", ">", ">=", "==", "!=", "<?", ":="])
def test_fold(op: str) -> None:
    check(f"x {op} ..", F(op, N("x")))


@pytest.mark.parametrize("op", ["+", "*", "&&", "||", "<?"])
def test_cumulative_fold(op: str) -> None:
    check(f"x {op} ...", F(op, N("x"), cumulative=True))


@pytest.mark.parametrize("dots", ["..", "..."])
def test_max_fold(dots: str) -> None:
    check(f"x >? {dots}", F(">?", N("x"), cumulative=dots == "..."))


def test_fold_binds_like_its_operator() -> None:
    # `x + .. + 42` is `(x + ..) + 42`, the fold with an initial value
    check("x + .. + 42", B("+", F("+", N("x")), I(42)))
    # `a * b + ..` folds `a * b`
    check("a * b + ..", F("+", B("*", N("a"), N("b"))))
    check("a + b * ..", B("+", N("a"), F("*", N("b"))))
    check("method == methods || ..", F("||", B("==", N("method"), N("methods"))))
    check("t[:rank] * ..", F("*", Sub(N("t"), ast.Range(start=None, stop=N("rank")))))
    check("(_shape * ..) == v", B("==", F("*", N("_shape")), N("v")))
    check("x := .. ?? 0", B("??", F(":=", N("x")), I(0)))
    check("[1, s[::-1]..] * ...", F("*", L(I(1), E(Sub(N("s"), ast.Range(start=None, stop=None,
                                                                           step=MINUS_ONE)))), cumulative=True))


@pytest.mark.parametrize("text", ["x - ..", "x / ..", "x => ..", "x ^ .."])
def test_non_foldable_operator_is_reported(text: str) -> None:
    node, diags = parse(text, "<test>", "expr")
    assert [d.code for d in diags] == ["E0109"]
    assert "cannot fold" in diags[0].message
    assert (diags[0].span.line, diags[0].span.col) == (1, 3)


def test_coalesce_cannot_fold() -> None:
    # `??` is not a chain operator (docs: level 2), so `x ?? ..` is a syntax error
    _, diags = parse("x ?? ..", "<test>", "expr")
    assert diags and diags[0].code == "E0102"
    assert (diags[0].span.line, diags[0].span.col) == (1, 6)


@pytest.mark.parametrize("text", ["x < ...", "x == ...", "x := ..."])
def test_non_cumulative_fold_is_reported(text: str) -> None:
    _, diags = parse(text, "<test>", "expr")
    assert [d.code for d in diags] == ["E0109"]
    assert "not a cumulative fold" in diags[0].message


def test_uniform_is_only_a_fold() -> None:
    _, diags = parse("a := b", "<test>", "expr")
    assert [d.code for d in diags] == ["E0109"]
    assert "x := .." in diags[0].message


# ---------------------------------------------------------------- lexical decisions


@pytest.mark.parametrize("text", ["[1 ..(5)]", "[1..(5)]", "[1..( 5 )]"])
def test_repetition_with_or_without_space(text: str) -> None:
    # a real literal needs digits after the dot, so `1..(5)` repeats the integer 1
    check(text, L(E(I(1), I(5))))


def test_real_literals() -> None:
    assert expr("1.5") == ast.RealLit(value=1.5)
    assert expr("1e-5") == ast.RealLit(value=1e-5)
    assert expr("1e-5").text == "1e-5"
    assert expr("2.5E3") == ast.RealLit(value=2500.0)
    check("[x..(n)]", L(E(N("x"), N("n"))))
    check("[0 ..(d)][axes]", Sub(L(E(I(0), N("d"))), N("axes")))


def test_min_max_are_single_tokens() -> None:
    # `a < ?b` (with a space) compares with a null test
    check("a < ?b", B("<", N("a"), U("?", N("b"))))
    check("a <? b", B("<?", N("a"), N("b")))
    check("a<?b", B("<?", N("a"), N("b")))
    check("a > ?b", B(">", N("a"), U("?", N("b"))))


def test_max_is_a_single_token() -> None:
    check("a >? b", B(">?", N("a"), N("b")))
    check("a>?b", B(">?", N("a"), N("b")))


def test_arrow_substitution_is_a_single_token() -> None:
    check("a[i]<-1", ast.Substitute(value=N("a"), index=N("i"), replacement=I(1)))
    check("a[i] < -1", B("<", Sub(N("a"), N("i")), MINUS_ONE))


def test_type_arguments_vs_less_than() -> None:
    check("op<real>(x)", ast.Call(callee="op", args=(N("x"),), type_args=("real",)))
    check("op<real, int>(x)", ast.Call(callee="op", args=(N("x"),), type_args=("real", "int")))
    check("op<T>{a=1}(x)", ast.Call(callee="op", args=(N("x"),), type_args=("T",),
                                    attrs=(ast.AttrAssign(name="a", value=I(1)),)))
    check("a < b", B("<", N("a"), N("b")))
    check("a < b && c > d", B("&&", B("<", N("a"), N("b")), B(">", N("c"), N("d"))))
    check("a < b > c", B(">", B("<", N("a"), N("b")), N("c")))
    check("a<b", B("<", N("a"), N("b")))
    # documented: `<T>` directly before `(` always opens type arguments
    check("a < b > (c)", ast.Call(callee="a", args=(N("c"),), type_args=("b",)))
    check("(a < b) > (c)", B(">", B("<", N("a"), N("b")), N("c")))


def test_type_arguments_in_quantization_entry() -> None:
    node, diags = parse("@quantize { w: q<real>; x: q2<T>{bits=8}; }", "<test>", "blocks")
    assert diags == []
    (block,) = node
    assert block.items == (
        ast.Quantization(tensor="w", op="q", type_args=("real",)),
        ast.Quantization(tensor="x", op="q2", type_args=("T",), attrs=(ast.AttrAssign(name="bits", value=I(8)),)),
    )


def test_block_names_are_whole_words() -> None:
    node, diags = parse("operator o {\n    @lowering { }\n}\n", "<test>", "module")
    assert [d.code for d in diags] == ["E0101"]
    assert diags[0].message.startswith("unknown block '@lowering'")
    assert diags[0].hint == "did you mean '@lower'?"
    assert (diags[0].span.line, diags[0].span.col, diags[0].span.end_col) == (2, 5, 14)
    node, diags = parse("@lower { }", "<test>", "blocks")
    assert diags == [] and node == (ast.LowerBlock(items=()),)


def test_keywords_where_they_are_expected() -> None:
    assert isinstance(stmt("y = if c then a else b;").value, ast.IfExpr)
    assert expr("a + true * 2") == B("+", N("a"), B("*", ast.BoolLit(value=True), I(2)))
    assert expr("inf") == ast.NamedConst(name="inf")


# docs/grammar.md: "Keywords (...) are reserved and cannot be used as identifiers." The contextual
# lexer only lexes a keyword where the grammar can accept it, so elsewhere it is an IDENT.
# (`is` is left out: spec §2.1's conv uses `is` as a name, `input: real[b,c,is..(d)]`.)
@pytest.mark.parametrize(("start", "text"), [
    ("stmt", "if = 1;"),
    ("stmt", "int = 1;"),
    ("stmt", "then = x;"),
    ("stmt", "y = else;"),
    ("expr", "a + then * 2"),
    ("expr", "a + yield * 2"),
    ("expr", "a + operator * 2"),
    ("blocks", "@attrib { true: int; }"),
    ("blocks", "@attrib { for: int; }"),
    ("blocks", "@using { x = while; }"),
    ("module", "graph version { }"),
])
def test_keywords_are_reserved(start: str, text: str) -> None:
    _, diags = parse(text, "<test>", start)
    assert diags


# ---------------------------------------------------------------- brackets


def test_tensor_access_vs_subscript() -> None:
    check("x[i]", Sub(N("x"), N("i")))
    check("x[i,]", TA(N("x"), N("i")))
    check("x[i, j]", TA(N("x"), N("i"), N("j")))
    check("x[]", TA(N("x")))
    check("x[k][i,j]", TA(Sub(N("x"), N("k")), N("i"), N("j")))
    check("x[i..]", TA(N("x"), E(N("i"))))
    check("x[|i|]", TA(N("x"), ast.Bounded(value=N("i"))))
    check("x[i, 1:2]", TA(N("x"), N("i"), ast.Range(start=I(1), stop=I(2))))


def test_slices() -> None:
    check("a[::-1]", Sub(N("a"), ast.Range(start=None, stop=None, step=MINUS_ONE)))
    check("a[1:]", Sub(N("a"), ast.Range(start=I(1), stop=None)))
    check("a[:k]", Sub(N("a"), ast.Range(start=None, stop=N("k"))))
    check("a[1:2:3]", Sub(N("a"), ast.Range(start=I(1), stop=I(2), step=I(3))))
    check("[0:d]", L(ast.Range(start=I(0), stop=N("d"))))


def test_bounded_index() -> None:
    check("|i <> a : b|", ast.Bounded(value=N("i"), low=N("a"), high=N("b")))
    check("|i|", ast.Bounded(value=N("i")))
    check("|i + 1 <> -i : n - i|", ast.Bounded(value=B("+", N("i"), I(1)), low=U("-", N("i")),
                                               high=B("-", N("n"), N("i"))))


def test_lists_and_zips() -> None:
    check("[(a,b)..]", L(ast.Zip(items=(N("a"), N("b")))))
    check("[(a, b, c)..]", L(ast.Zip(items=(N("a"), N("b"), N("c")))))
    check("[a.., b]", L(E(N("a")), N("b")))
    check("[a, b,]", L(N("a"), N("b")))
    check("[]", L())
    check("[(a)]", L(N("a")))
    check("[si.., 0 ..(!squeeze), ti..]", L(E(N("si")), E(I(0), U("!", N("squeeze"))), E(N("ti"))))


# ---------------------------------------------------------------- literals and calls


def test_format_field_is_parsed() -> None:
    check('"a = {a + 2}"', Str("a = ", B("+", N("a"), I(2))))
    check('"{x}{y}!"', Str(N("x"), N("y"), "!"))
    node = expr('"a = {a + 2}"')
    field = node.parts[1]
    assert (field.span.line, field.span.col) == (1, 7)
    # a field's expression has its true position
    assert (field.value.left.span.line, field.value.left.span.col) == (1, 7)


def test_adjacent_strings_are_joined() -> None:
    check('"ab" \'cd\'', Str("abcd"))
    check('"ab"\n  "cd"', Str("abcd"))
    check('"x = {x}, " "y = {y}"', Str("x = ", N("x"), ", y = ", N("y")))


def test_string_escapes() -> None:
    check('"a\\nb\\t\\"\\\\"', Str('a\nb\t"\\'))
    check('"\\{not a field\\}"', Str("{not a field}"))
    check("'it\\'s'", Str("it's"))


def test_casts_and_calls() -> None:
    check("int()", ast.Cast(type="int", arg=None))
    check("real(x)", ast.Cast(type="real", arg=N("x")))
    check("bool(x > 0)", ast.Cast(type="bool", arg=B(">", N("x"), I(0))))
    # a generic cast is syntactically a call; the checker decides
    check("T(x)", ast.Call(callee="T", args=(N("x"),)))
    check("T()", ast.Call(callee="T", args=()))
    check("op(x, ~, z)", ast.Call(callee="op", args=(N("x"), ast.Skip(), N("z"))))
    check("nn.conv{padding=0, stride=4}(x, w)",
          ast.Call(callee="nn.conv", args=(N("x"), N("w")),
                   attrs=(ast.AttrAssign(name="padding", value=I(0)), ast.AttrAssign(name="stride", value=I(4)))))


def test_literals() -> None:
    check("true", ast.BoolLit(value=True))
    check("false", ast.BoolLit(value=False))
    check("inf", ast.NamedConst(name="inf"))
    check("-inf", U("-", ast.NamedConst(name="inf")))
    check("pi", ast.NamedConst(name="pi"))
    check("42", I(42))


# ---------------------------------------------------------------- statements


def test_labelled_invocation() -> None:
    assert stmt("y = op1: op{a=42}(x);") == ast.Assign(
        targets=(ast.LName(name="y"),),
        value=ast.Call(callee="op", args=(N("x"),), attrs=(ast.AttrAssign(name="a", value=I(42)),), label="op1"))


def test_multiple_targets_and_skip() -> None:
    assert stmt("a, ~, c = op(x, ~, z);") == ast.Assign(
        targets=(ast.LName(name="a"), ast.LSkip(), ast.LName(name="c")),
        value=ast.Call(callee="op", args=(N("x"), ast.Skip(), N("z"))))


def test_if_and_loops() -> None:
    assert stmt("y = if c then a elif d then b else e;").value == ast.IfExpr(
        branches=((N("c"), N("a")), (N("d"), N("b"))), orelse=N("e"))
    assert stmt("ys = for x : xs do add(x, z);").value == ast.LoopExpr(
        body=ast.Call(callee="add", args=(N("x"), N("z"))), scans=(ast.Scan(name="x", pack=N("xs")),))
    loop = stmt("y = with z = x do op(z) while cond(z);").value
    assert loop.post_cond == ast.Call(callee="cond", args=(N("z"),)) and loop.pre_cond is None
    loop = stmt("y = unroll ..(i -> 5) op(x);").value
    assert loop.unroll and loop.count == ast.IterCount(index="i", count=I(5))


def test_lowering_assignment_operators() -> None:
    node, diags = parse("@lower { y[i] += x[i], i < n; y[i] <?= x[i], i < n; y[i] >?= x[i], i < n | c; }",
                        "<test>", "blocks")
    assert diags == []
    (block,) = node
    assert [f.op for f in block.items] == ["+=", "<?=", ">?="]
    assert block.items[2].condition == N("c")
    assert block.items[0].target == TA(N("y"), N("i"))
