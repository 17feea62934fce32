"""Every code block of spec chapters 2 and 4 (tests/data/spec_blocks) and every stdlib module parses.

Blocks are parsed with the start rule matching their kind in index.json. The few blocks that are
wrong on substance, or that contain placeholders (`...` elisions), are listed in KNOWN_BAD with the
reason; for those we assert that they DO produce a diagnostic (so the list stays honest) and that a
minimally corrected version parses cleanly (so their syntax is still covered).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skriptnd.syntax import ast
from skriptnd.syntax.parser import parse

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = ROOT / "tests" / "data" / "spec_blocks"
STDLIB = ROOT / "stdlib"
INDEX = json.loads((BLOCKS / "index.json").read_text(encoding="utf-8"))
ENTRIES = {e["file"]: e for e in INDEX}

START_RULE = {"module": "module", "blocks": "blocks", "compose_body": "compose_body"}


def start_rule(kind: str) -> str:
    return START_RULE.get(kind, "stmt")


# file -> why it does not parse as written. Each entry was checked by reading the block.
KNOWN_BAD: dict[str, str] = {
    # `"elided": true` in index.json: the spec elides code with `...`.
    "ch2_9_02.sknd": "elision: '@using { c..(n) = ...; }' has '...' in place of the expression",
    "ch2_10_1_02.sknd": "elision: a '...' line stands for the statements of the inner block",
    "ch2_10_1_08.sknd": "elision: bare 'if ?x && c then { ... }' with a '...' body and no 'else' branch",
    "ch2_11_01.sknd": "elision: 'dw = ...;  # calculate delta'",
    "ch2_15_02.sknd": "elision: 'A.op1(...)' elides the arguments",
    # Wrong on substance.
    "ch2_10_06.sknd": "attribute assigned with ':' in 'op{a: 42}(x)'; invocations use 'op{a=42}(x)' (§2.10 prose)",
    "ch2_10_1_07.sknd": "if-branches are blocks holding only comments, with no statement and no 'yield'",
    "ch2_10_1_15.sknd": "'cond = True': the boolean literal is 'true' (§2.4)",
}

# file -> (old, new) textual replacements that turn the block into valid SkriptND.
FIXES: dict[str, list[tuple[str, str]]] = {
    "ch2_9_02.sknd": [("= ...;", "= [a, b];")],
    "ch2_10_1_02.sknd": [("    ...\n", "    x = op1(w);\n")],
    "ch2_10_1_08.sknd": [("if ?x && c then { ... }", "z = if ?x && c then { y = op(x); yield y; } else { yield w; };")],
    "ch2_11_01.sknd": [("dw = ...;", "dw = grad(w);")],
    "ch2_15_02.sknd": [("A.op1(...)", "A.op1(y)")],
    "ch2_10_06.sknd": [("op{a: 42}", "op{a=42}")],
    "ch2_10_1_15.sknd": [("True", "true")],
    "ch2_10_1_07.sknd": [
        ("# x can be used as non-optional value on this branch", "yield x;"),
        ("# x is null on this branch", "yield y;"),
    ],
}

GOOD = [e["file"] for e in INDEX if e["file"] not in KNOWN_BAD]


def read_block(name: str) -> str:
    return (BLOCKS / name).read_text(encoding="utf-8")


def parse_block(name: str, text: str | None = None):
    text = read_block(name) if text is None else text
    return parse(text, name, start_rule(ENTRIES[name]["kind"]))


def test_index_is_consistent() -> None:
    files = {p.name for p in BLOCKS.glob("*.sknd")}
    assert files == set(ENTRIES), "index.json and the .sknd files disagree"
    assert set(KNOWN_BAD) <= set(ENTRIES)
    assert set(FIXES) == set(KNOWN_BAD)
    # Every elided block is in KNOWN_BAD: an elision can never parse.
    elided = {e["file"] for e in INDEX if e.get("elided")}
    assert elided <= set(KNOWN_BAD)
    assert {e["kind"] for e in INDEX} <= {"module", "blocks", "compose_body", "other"}


@pytest.mark.parametrize("name", GOOD)
def test_spec_block_parses_clean(name: str) -> None:
    node, diags = parse_block(name)
    assert diags == [], "\n".join(str(d) for d in diags)
    assert node is not None


@pytest.mark.parametrize("name", sorted(KNOWN_BAD))
def test_known_bad_block_is_reported(name: str) -> None:
    _, diags = parse_block(name)
    assert diags, f"{name} parses cleanly now; remove it from KNOWN_BAD ({KNOWN_BAD[name]})"


@pytest.mark.parametrize("name", sorted(KNOWN_BAD))
def test_known_bad_block_parses_once_fixed(name: str) -> None:
    text = read_block(name)
    for old, new in FIXES[name]:
        assert old in text, f"fix {old!r} no longer applies to {name}"
        text = text.replace(old, new)
    node, diags = parse_block(name, text)
    assert diags == [], "\n".join(str(d) for d in diags)
    assert node is not None


def test_elided_blocks_are_reported_at_the_elision() -> None:
    for name, line_text in [("ch2_9_02.sknd", "c..(n) = ...;"), ("ch2_11_01.sknd", "dw = ...;"),
                            ("ch2_15_02.sknd", "A.op1(...)")]:
        text = read_block(name)
        _, diags = parse_block(name)
        line = next(i for i, ln in enumerate(text.split("\n"), 1) if line_text in ln)
        col = text.split("\n")[line - 1].index("...") + 1
        assert (diags[0].span.line, diags[0].span.col) == (line, col), (name, [str(d) for d in diags])


def test_attribute_colon_block_has_hint() -> None:
    _, diags = parse_block("ch2_10_06.sknd")
    assert [d.code for d in diags] == ["E0102"]
    assert (diags[0].span.line, diags[0].span.col) == (2, 16)
    assert "'='" in (diags[0].hint or "")


@pytest.mark.parametrize("path", sorted(STDLIB.glob("*.sknd")), ids=lambda p: p.name)
def test_stdlib_module_parses_clean(path: Path) -> None:
    node, diags = parse(path.read_text(encoding="utf-8"), str(path), "module")
    assert diags == [], "\n".join(str(d) for d in diags)
    assert isinstance(node, ast.Module)
    assert node.definitions


def test_stdlib_is_not_empty() -> None:
    assert len(list(STDLIB.glob("*.sknd"))) >= 5


# ---------------------------------------------------------------- AST facts on spec blocks


def module_of(name: str) -> ast.Module:
    node, diags = parse_block(name)
    assert diags == []
    assert isinstance(node, ast.Module)
    return node


def block_of(defn: ast.Definition, cls: type, kind: str | None = None):
    found = [b for b in defn.blocks if isinstance(b, cls) and (kind is None or getattr(b, "kind", None) == kind)]
    assert len(found) == 1
    return found[0]


def N(id: str) -> ast.Name:
    return ast.Name(id=id)


def I(v: int) -> ast.IntLit:  # noqa: E743
    return ast.IntLit(value=v)


def B(op: str, left: ast.Expr, right: ast.Expr) -> ast.Binary:
    return ast.Binary(op=op, left=left, right=right)


def test_conv_attributes() -> None:
    (conv,) = module_of("ch2_1_03.sknd").definitions
    assert (conv.kind, conv.name, conv.public) == ("operator", "conv", False)
    attrib = block_of(conv, ast.ParamBlock, "attrib")
    assert [p.name for p in attrib.items] == ["stride", "dilation", "padding"]
    stride, dilation, padding = attrib.items
    assert stride.type == ast.TypeSpec(name="int", pack=ast.PackSpec(length=N("d")))
    assert stride.default == I(1) and dilation.default == I(1)
    assert padding.type == ast.TypeSpec(name="int", optional=True, pack=ast.PackSpec(length=N("d")))
    assert padding.default is None


def test_conv_inputs_shapes() -> None:
    (conv,) = module_of("ch2_1_03.sknd").definitions
    inputs = block_of(conv, ast.ParamBlock, "input")
    assert [p.name for p in inputs.items] == ["input", "filter", "bias"]
    shape = inputs.items[0].type.shape
    assert shape is not None
    assert [item.value for item in shape] == [N("b"), N("c"), N("is")]
    assert shape[2].pack == ast.PackSpec(length=N("d"))
    assert inputs.items[2].type.optional


def test_conv_using_paddings() -> None:
    (conv,) = module_of("ch2_1_03.sknd").definitions
    using = block_of(conv, ast.UsingBlock)
    decl = next(u for u in using.items if u.target == ast.LName(name="paddings"))
    # 2 * padding ?? (is \ stride - 1) * stride + fd - is
    inner = B("-", B("\\", N("is"), N("stride")), I(1))
    rhs = B("-", B("+", B("*", inner, N("stride")), N("fd")), N("is"))
    assert decl.value == B("??", B("*", I(2), N("padding")), rhs)


def test_conv_lower_formulas() -> None:
    (conv,) = module_of("ch2_1_03.sknd").definitions
    lower = block_of(conv, ast.LowerBlock)
    assert [f.op for f in lower.items] == ["=", "+="]
    first, second = lower.items
    assert first.target == ast.TensorAccess(tensor=N("output"),
                                            indices=(N("bi"), N("ni"), ast.Expand(value=N("i"))))
    assert first.value == B("??", ast.Subscript(value=N("bias"), index=N("ni")), ast.RealLit(value=0.0))
    assert [b.index for b in first.bounds] == ["bi", "ni", "i"]
    assert [b.index for b in second.bounds] == ["bi", "ni", "ci", "i", "j"]
    # input[bi, ci, |stride * i + dilation * j - paddings / 2|..] * filter[ni, ci, j..]
    assert isinstance(second.value, ast.Binary) and second.value.op == "*"
    access = second.value.left
    assert isinstance(access, ast.TensorAccess)
    bounded = access.indices[2]
    assert isinstance(bounded, ast.Expand) and isinstance(bounded.value, ast.Bounded)
    assert bounded.value.low is None and bounded.value.high is None


def test_conv_assert_messages_have_format_fields() -> None:
    (conv,) = module_of("ch2_1_03.sknd").definitions
    asserts = block_of(conv, ast.AssertBlock)
    assert len(asserts.items) == 3
    msg = asserts.items[0].message
    assert msg is not None
    assert msg.parts == ("'stride' must be positive; got ", ast.FormatField(value=N("stride")))
    # The multi-line message keeps its line breaks and has four fields.
    last = asserts.items[2].message
    assert last is not None
    assert sum(isinstance(p, ast.FormatField) for p in last.parts) == 4


def test_alexnet_imports_without_semicolons() -> None:
    module = module_of("ch2_1_01.sknd")
    assert [i.module for i in module.imports] == ["nn", "layout"]
    (graph,) = module.definitions
    assert (graph.kind, graph.name) == ("graph", "AlexNet")
    compose = block_of(graph, ast.ComposeBlock, "compose")
    first = compose.items[0]
    assert first == ast.Assign(
        targets=(ast.LName(name="conv1"),),
        value=ast.Call(callee="nn.conv", args=(N("input"), N("kernel1"), N("bias1")),
                       attrs=(ast.AttrAssign(name="padding", value=I(0)),
                              ast.AttrAssign(name="stride", value=I(4)))),
    )


def test_binary_op_alignment_px() -> None:
    (add,) = module_of("ch4_2_2_01.sknd").definitions
    using = block_of(add, ast.UsingBlock)
    px = next(u for u in using.items if u.target == ast.LName(name="px")).value
    sel = ast.Select(cond=B("<", N("lhs_align"), I(0)), then=B("-", N("rz"), N("qx")), orelse=N("lhs_align"))
    assert px == B("??", sel, B("-", N("rz"), N("rx")))


def test_binary_op_max_rank() -> None:
    (add,) = module_of("ch4_2_2_01.sknd").definitions
    using = block_of(add, ast.UsingBlock)
    rz = next(u for u in using.items if u.target == ast.LName(name="rz")).value
    assert rz == B(">?", N("qx"), N("qy"))


def test_concat_output_shape() -> None:
    (concat,) = module_of("ch4_1_3_01.sknd").definitions
    output = block_of(concat, ast.ParamBlock, "output").items[0]
    shape = output.type.shape
    assert shape is not None and len(shape) == 3
    # u * n ?? (z + ..)
    assert shape[1].value == B("??", B("*", N("u"), N("n")), ast.Fold(op="+", operand=N("z")))
    assert shape[0].pack == ast.PackSpec() and shape[2].pack == ast.PackSpec()


def test_reshape_implication() -> None:
    (reshape,) = module_of("ch4_1_2_02.sknd").definitions
    asserts = block_of(reshape, ast.AssertBlock)
    cond = asserts.items[[i for i, a in enumerate(asserts.items)
                          if isinstance(a.condition, ast.Binary) and a.condition.op == "=>"][0]].condition
    assert cond == B("=>", B("!=", N("input_volume"), I(0)),
                     B("||", B(">", N("shape"), I(0)), B("is", N("shape"), ast.Unary(op="-", operand=I(1)))))


def test_squeeze_substitution_in_index() -> None:
    (squeeze,) = module_of("ch4_1_2_05.sknd").definitions
    lower = block_of(squeeze, ast.LowerBlock)
    (formula,) = lower.items
    assert formula.value == ast.TensorAccess(
        tensor=N("input"),
        indices=(ast.Expand(value=ast.Substitute(value=N("zeros"), index=N("kept_axes"), replacement=N("si"))),))


def test_pad_select_chain_and_folds() -> None:
    (pad,) = module_of("ch4_1_4_04.sknd").definitions
    asserts = block_of(pad, ast.AssertBlock)
    assert asserts.items[0].condition == ast.Fold(op="||", operand=B("==", N("method"), N("methods")))
    assert asserts.items[3].condition == ast.Fold(op="!=", operand=N("axes"))
    assert [a.value for a in asserts.items[2].args] == [ast.Property(value=N("input"), name="rank"), N("axes")]
    (formula,) = block_of(pad, ast.LowerBlock).items
    assert [loc.name for loc in formula.locals] == ["zi"]
    # a ? x : b ? y : c ? z : d ? w : v -- right-nested selects
    chain = formula.value
    conds = []
    while isinstance(chain, ast.Select):
        conds.append(chain.cond)
        assert chain.orelse is not None
        chain = chain.orelse
    assert len(conds) == 4
    assert conds[0] == B("==", N("method"), ast.StrLit(parts=("REFLECT",)))
    assert isinstance(conds[3], ast.Fold) and conds[3].op == "&&"
    assert chain == B("??", ast.TensorAccess(tensor=N("value"), indices=()), ast.Call(callee="T", args=()))
    using = block_of(pad, ast.UsingBlock)
    before = next(u for u in using.items if u.target == ast.LName(name="before")).value
    assert before == ast.Substitute(
        value=ast.ListExpr(items=(ast.Expand(value=I(0), count=N("d")),)), index=N("axes"),
        replacement=ast.Subscript(value=N("padding"), index=ast.Range(start=None, stop=N("k"))))


def test_cumulative_and_uniform_folds_in_spec() -> None:
    (op,) = module_of("ch4_1_3_01.sknd").definitions
    using = block_of(op, ast.UsingBlock)
    values = {u.target.name: u.value for u in using.items if isinstance(u.target, ast.LName)}
    assert values["u"] == ast.Fold(op=":=", operand=N("z"))
    assert values["offs"] == ast.Fold(op="+", cumulative=True,
                                      operand=ast.ListExpr(items=(I(0), ast.Expand(value=N("z")))))


def test_fold_with_initial_value() -> None:
    node, diags = parse("x + .. + 42", start="expr")
    assert diags == []
    assert node == B("+", ast.Fold(op="+", operand=N("x")), I(42))


def test_quantize_block_fragment() -> None:
    node, diags = parse_block("ch2_14_01.sknd")
    assert diags == []
    assert isinstance(node, tuple)
    compose, quantize = node
    assert isinstance(compose, ast.ComposeBlock) and isinstance(quantize, ast.QuantizeBlock)
    assert quantize.items[0] == ast.Quantization(tensor="a", op="quant_op1",
                                                 attrs=(ast.AttrAssign(name="attr1", value=ast.BoolLit(value=True)),))


def test_bare_statement_fragment() -> None:
    node, diags = parse_block("ch2_13_02.sknd")
    assert diags == []
    assert node == ast.Assign(targets=(ast.LName(name="x"),),
                              value=ast.Call(callee="op", args=(N("y"),), type_args=("real",)))


def test_compose_body_fragment_yields() -> None:
    node, diags = parse_block("ch2_10_1_01.sknd")
    assert diags == []
    assert isinstance(node, tuple) and isinstance(node[-1], ast.Yield)
    assert node[-1].values == (N("y"), N("z"))
