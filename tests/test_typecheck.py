"""Static checking of definitions (skriptnd.semantics.typecheck, scope, types).

(a) Every standard-library operator and every operator of the spec's code blocks checks clean,
    except the few that are wrong per the spec text (allow-lists below, each with its reason;
    the tests assert that exactly the listed diagnostics are reported, so the lists stay honest).
(b) Golden diagnostics: tiny definitions with the exact code, position and message expected.
"""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path
from textwrap import dedent

import pytest

from skriptnd.diagnostics import Diagnostic
from skriptnd.resources import STDLIB_MODULES
from skriptnd.semantics.scope import Kind
from skriptnd.semantics.typecheck import build_scope, check_definition
from skriptnd.semantics.types import Type
from skriptnd.syntax import ast
from skriptnd.syntax.parser import parse, parse_module

ROOT = Path(__file__).resolve().parent.parent
STDLIB = ROOT / "stdlib"
BLOCKS = ROOT / "tests" / "data" / "spec_blocks"


# ---------------------------------------------------------------- helpers


@cache
def stdlib_modules() -> dict[str, ast.Module]:
    modules = {}
    for name in STDLIB_MODULES:
        path = STDLIB / f"{name}.sknd"
        module, diags = parse_module(path.read_text(encoding="utf-8"), str(path))
        assert diags == [] and module is not None
        modules[name] = module
    return modules


@cache
def stdlib_index() -> tuple[dict[str, ast.Definition], dict[str, ast.Definition]]:
    """`module.op` → definition, and unqualified `op` → definition (first module wins)."""
    qualified: dict[str, ast.Definition] = {}
    plain: dict[str, ast.Definition] = {}
    for name, module in stdlib_modules().items():
        for defn in module.definitions:
            qualified[f"{name}.{defn.name}"] = defn
            plain.setdefault(defn.name, defn)
    return qualified, plain


def make_lookup(module: str = "main", local: dict[str, ast.Definition] | None = None):
    qualified, plain = stdlib_index()

    def lookup(name: str) -> ast.Definition | None:
        if local and name in local:
            return local[name]
        if "." in name:
            return qualified.get(name)
        return qualified.get(f"{module}.{name}") or plain.get(name)

    return lookup


def stdlib_ops() -> list[str]:
    return [f"{m}.{d.name}" for m, module in stdlib_modules().items() for d in module.definitions]


def check_source(text: str) -> list[Diagnostic]:
    module, diags = parse_module(dedent(text).lstrip("\n"), "test.sknd")
    assert diags == [], [str(d) for d in diags]
    assert module is not None
    local = {d.name: d for d in module.definitions}
    out: list[Diagnostic] = []
    for defn in module.definitions:
        out.extend(check_definition(defn, make_lookup("main", local), "main"))
    return out


def brief(diags: list[Diagnostic]) -> list[tuple[str, str, str]]:
    return [(d.code, f"{d.span.line}:{d.span.col}", d.message) for d in diags]


# ---------------------------------------------------------------- (a) the standard library

# Standard operators that are wrong per the spec's own text: operator → (codes, reason).
STDLIB_ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    # All fixed by errata (docs/spec-errata.md): `%` on reals (S9), `erf` built-in (S10) and the
    # comparison operators' two generic types (L2).
}


def test_stdlib_has_151_operators() -> None:
    assert len(stdlib_ops()) == 151
    assert set(STDLIB_ALLOWED) <= set(stdlib_ops())


@pytest.mark.parametrize("qualified", stdlib_ops())
def test_stdlib_operator_checks(qualified: str) -> None:
    module, name = qualified.split(".")
    defn = next(d for d in stdlib_modules()[module].definitions if d.name == name)
    diags = check_definition(defn, make_lookup(module), module)
    if qualified in STDLIB_ALLOWED:
        codes, reason = STDLIB_ALLOWED[qualified]
        assert diags, f"{qualified} checks clean now; remove it from STDLIB_ALLOWED ({reason})"
        assert {d.code for d in diags} == set(codes), [str(d) for d in diags]
    else:
        assert diags == [], "\n".join(str(d) for d in diags)


def test_stdlib_checks_fast() -> None:
    defs = [(m, d) for m, module in stdlib_modules().items() for d in module.definitions]
    lookups = {m: make_lookup(m) for m in stdlib_modules()}
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for module, defn in defs:
            check_definition(defn, lookups[module], module)
        best = min(best, time.perf_counter() - start)
    assert best < 0.3, f"checking the standard library took {best:.3f}s"


# ---------------------------------------------------------------- (a) the spec's code blocks

INDEX = json.loads((BLOCKS / "index.json").read_text(encoding="utf-8"))

# Spec blocks that are wrong per the spec text: file → (codes, reason).
SPEC_ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    # §2.1 conv: `bias[ni] ?? 0.0` indexes the rank-1 tensor `bias` without the trailing comma
    # that §2.4 (Tensor access) requires (`bias[ni,]`); `bias[ni]` is pack indexing.
    "ch2_1_03.sknd": (("E0302",), "rank-1 tensor access written 'bias[ni]'"),
    # §2.10.1 matpow: `I: real[n,n] = i == j ? 1 : 0` initializes a real constant with int
    # values; §2.4 has no implicit int → real conversion (write 1.0 : 0.0).
    "ch2_10_1_12.sknd": (("E0301",), "int values for a real constant"),
    # §4.1.5: the input shape uses the @using symbol `ncx`, invisible in @input (§2.9);
    # stdlib/layout.sknd carries the fix (docs/spec-errata.md, L1).
    "ch4_1_5_02.sknd": (("E0208",), "@using symbol 'ncx' in @input"),
    "ch4_1_5_03.sknd": (("E0208",), "@using symbol 'ncx' in @input"),
    "ch4_1_5_04.sknd": (("E0208",), "@using symbol 'ncx' in @input"),
    "ch4_1_5_05.sknd": (("E0208",), "@using symbol 'ncx' in @input"),
    # Chapter 4 copies of the standard operators listed in STDLIB_ALLOWED.
}


def spec_modules() -> list[str]:
    """Module-kind spec blocks that parse cleanly (the elided ones do not)."""
    names = []
    for entry in INDEX:
        if entry["kind"] != "module":
            continue
        module, diags = parse((BLOCKS / entry["file"]).read_text(encoding="utf-8"), entry["file"], "module")
        if module is not None and not diags:
            names.append(entry["file"])
    return names


SPEC_MODULES = spec_modules()


def test_spec_modules_cover_the_allow_list() -> None:
    assert len(SPEC_MODULES) > 150
    assert set(SPEC_ALLOWED) <= set(SPEC_MODULES)


@pytest.mark.parametrize("name", SPEC_MODULES)
def test_spec_block_checks(name: str) -> None:
    module, _ = parse((BLOCKS / name).read_text(encoding="utf-8"), name, "module")
    assert isinstance(module, ast.Module)
    local = {d.name: d for d in module.definitions}
    diags = [d for defn in module.definitions for d in check_definition(defn, make_lookup("main", local), "main")]
    if name in SPEC_ALLOWED:
        codes, reason = SPEC_ALLOWED[name]
        assert diags, f"{name} checks clean now; remove it from SPEC_ALLOWED ({reason})"
        assert {d.code for d in diags} == set(codes), [str(d) for d in diags]
    else:
        assert diags == [], "\n".join(str(d) for d in diags)


# ---------------------------------------------------------------- (b) golden diagnostics

GOLDEN: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "unknown identifier with did-you-mean": ("""
        operator op {
            @attrib { stride: int = 1; }
            @assert { strid > 0; }
        }
        """, [("E0201", "3:15", "unknown identifier 'strid'; did you mean 'stride'?")]),
    "@using symbol in an @input shape": ("""
        operator op {
            @attrib { a: int; }
            @input { x: real[c..(flag)]; }
            @using { flag = a > 0; }
        }
        """, [("E0208", "3:26", "'flag' is a @using symbol, which is not visible in @input; @using symbols are "
               "evaluated after all attributes and input shapes (§2.9)")]),
    "@using symbol in an @attrib default": ("""
        operator op {
            @attrib { a: int = u; }
            @using { u = 1; }
        }
        """, [("E0208", "2:24", "'u' is a @using symbol, which is not visible in @attrib; @using symbols are "
               "evaluated after all attributes and input shapes (§2.9)")]),
    "duplicate attribute": ("""
        operator op {
            @attrib {
                a: int;
                a: real;
            }
        }
        """, [("E0202", "4:9", "'a' is already declared as an attribute (line 3); each name of a definition "
               "must be unique")]),
    "int + real": ("""
        operator op {
            @attrib { a: int; b: real; }
            @using { c = a + b; }
        }
        """, [("E0301", "3:18", "'+' needs operands of the same type; got int and real")]),
    "&& on ints": ("""
        operator op {
            @attrib { a: int; b: bool; }
            @assert { a && b; }
        }
        """, [("E0302", "3:15", "'&&' needs bool operands; got int")]),
    "?? on a non-optional left side": ("""
        operator op {
            @attrib { a: int; }
            @using { b = a ?? 1; }
        }
        """, [("E0303", "3:18", "the left side of '??' is never null (its type is int); '??' only applies to "
               "optional values")]),
    "default value of the wrong type": ("""
        operator op {
            @attrib { a: real = 1; }
        }
        """, [("E0307", "2:25", "the default value of attribute 'a' has type int, but 'a' is declared real")]),
    "optional attribute with a default": ("""
        operator op {
            @attrib { a: optional int = 1; }
        }
        """, [("E0307", "2:33", "optional attribute 'a' cannot have a default value; it is null when not "
               "given (§2.5)")]),
    "assert condition not bool": ("""
        operator op {
            @attrib { a: int; }
            @assert { a + 1: "a must be positive"; }
        }
        """, [("E0301", "3:15", "an assert condition must be a bool (or a bool.. pack); 'a + 1' is int")]),
    "non-affine unknown extent": ("""
        operator op {
            @input { x: real[x1 * y1]; }
        }
        """, [("E0405", "2:22", "cannot deduce 'x1' from 'x1 * y1'; declare x1 by an affine expression like "
               "'2 * x1 + 1'")]),
    "output shape with an undeclared symbol": ("""
        operator op {
            @input { x: real[count]; }
            @output { y: real[cuont]; }
        }
        """, [("E0405", "3:23", "undeclared symbol 'cuont' in the shape of output 'y'; output shapes may only use "
               "declared identifiers; did you mean 'count'?")]),
    "operator output with a new symbol and no bound": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[k]; z: real[q|n]; }
        }
        """, [("E0411", "3:23", "output 'y' introduces the new symbol 'k' without an upper bound; a data-dependent "
               "extent needs one, as in 'k|n' (§2.6.1)")]),
    "dynamic output extent without a bound": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[~, n]; }
        }
        """, [("E0411", "3:23", "the dynamic extent '~' of operator output 'y' needs an upper bound, e.g. '~|n' "
               "(§2.6.1)")]),
    "lowering rank mismatch": ("""
        operator op {
            @input { x: real[n, m]; }
            @output { y: real[n, m]; }
            @lower { y[i, j] = x[i,], i < n, j < m; }
        }
        """, [("E0407", "4:24", "tensor 'x' has rank 2 but is accessed with 1 index")]),
    "packed lowering rank mismatch": ("""
        operator op {
            @input { x: real[s..(d), t]; }
            @output { y: real[s..]; }
            @lower { y[i..] = x[i.., 0, 1], i < s; }
        }
        """, [("E0407", "4:23", "tensor 'x' has rank d + 1 but is accessed with d + 2 indices")]),
    "unbounded index symbol": ("""
        operator op {
            @input { x: real[n, m]; }
            @output { y: real[n, m]; }
            @lower { y[i, j] = x[i, j], i < n; }
        }
        """, [("E0408", "4:19", "index 'j' is not bounded in this formula; add a bound such as 'j < size' after "
               "the formula (§2.12)")]),
    "assignment to an input in @lower": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @lower {
                x[i,] = 0.0, i < n;
                y[i,] = 1.0, i < n;
            }
        }
        """, [("E0602", "5:9", "cannot assign to input 'x'; the left side of a @lower formula must be an output "
               "(§2.12)")]),
    "assignment to an input in @compose": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose {
                x = math.neg(x);
                y = math.neg(x);
            }
        }
        """, [("E0602", "5:9", "cannot assign to input 'x'; the left side of @compose assignments must be new "
               "names or outputs")]),
    "output assigned in @update": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @variable { w: real[n]; }
            @compose { y = math.add(x, w); }
            @update { y = math.neg(x); }
        }
        """, [("E0603", "6:15", "output 'y' can only be assigned in @compose; @update assigns variables (§2.11)")]),
    "variable assigned in @compose": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @variable { w: real[n]; }
            @compose { y = math.add(x, w); w = math.neg(x); }
        }
        """, [("E0603", "5:36", "variable 'w' can only be assigned in @update, not in @compose (§2.11)")]),
    "output missing from @compose": ("""
        operator op {
            @input { x: real[n]; }
            @output {
                y: real[n];
                z: real[n];
            }
            @compose { y = math.neg(x); }
        }
        """, [("E0601", "5:9", "output 'z' is not assigned in @compose; when a definition has a @compose block, "
               "it must assign every output (§2.10)")]),
    "too many results for an invocation": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose { y, z = math.neg(x); }
        }
        """, [("E0309", "4:16", "2 results are assigned, but 'math.neg' has 1 output")]),
    "too many results for a block": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose { y, z = { t = math.neg(x); yield t; }; }
        }
        """, [("E0309", "4:16", "2 results are assigned, but the block yields 1 value")]),
    "pack expected in a list expansion": ("""
        operator op {
            @attrib { a: int; }
            @using { b = [a..]; }
        }
        """, [("E0304", "3:19", "'a' is not a pack (int), so it cannot be expanded with '..'; to repeat it, give "
               "a count as in 'a..(n)'")]),
    "unexpanded pack in a list": ("""
        operator op {
            @attrib { a: int..; }
            @using { b = [0, a]; }
        }
        """, [("E0304", "3:22", "'a' is a pack (int..); expand it into the list with 'a..'")]),
    ".shape of a tensor pack": ("""
        operator op {
            @input { xs: real[n]..(k); }
            @using { s = xs.shape; }
        }
        """, [("E0304", "3:18", "'.shape' is not defined for the tensor pack 'xs', whose items may differ in shape "
               "(§2.4); use '.size' for the number of items, or name the shared extents in the declaration, as in "
               "'real[s..]..(n)'")]),
    "cast of str": ("""
        operator op {
            @attrib { s: str; }
            @using { n = int(s); }
        }
        """, [("E0305", "3:22", "cannot cast str to int; strings cannot be cast (§2.4)")]),
    "two '=' formulas for one output": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @lower {
                y[i,] = x[i,], i < n;
                y[i,] = 0.0, i < n;
            }
        }
        """, [("E0606", "6:9", "output 'y' already has an '=' formula (line 5); each output has at most one '=' "
               "initialization (§2.12)")]),
    "':=' without an initialization": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: int[]; }
            @lower { y[] := i, i < n | x[i,] > 0.0; }
        }
        """, [("E0607", "4:14", "':=' updates the initial value of output 'y', but no '=' formula precedes it; "
               "add one such as 'y[...] = ...' before it (§2.12)")]),
    "optional right side of a formula": ("""
        operator op {
            @input { b: optional real[n]; x: real[n]; }
            @output { y: real[n]; }
            @lower { y[i,] = b[i,], i < n; }
        }
        """, [("E0303", "4:22", "the right side may be null (optional real); optional values must be resolved in a "
               "formula, e.g. with '... ?? 0.0' (§2.12)")]),
    "operator output used before @compose": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose { t = math.neg(x); y = math.neg(t); }
            @lower { y[i,] = t[i,], i < n; }
        }
        """, [("E0208", "5:22", "'t' is declared in @compose (line 4), which is not visible in @lower; blocks see "
               "only the names of the blocks processed before them (§2.2)")]),
    "tensor in a compile-time expression": ("""
        operator op {
            @input { x: real[n]; }
            @using { z = x + 1; }
        }
        """, [("E0302", "3:18", "tensor 'x' is not a compile-time value, so '+' cannot use it here; use 'x.shape' "
               "or 'x.rank'")]),
    "non-builtin function in @lower": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @lower { y[i,] = sqr(x[i,]), i < n; }
        }
        """, [("E0201", "4:22", "unknown function 'sqr'; did you mean 'sqrt'?; operators can only be invoked in "
               "@compose, and the built-in functions are abs, acos, acosh, asin, asinh, atan, atanh, ceil, cos, "
               "cosh, erf, exp, floor, frac, log, round, sign, sin, sinh, sqrt, tan, tanh")]),
    "duplicate label": ("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; z: real[n]; }
            @compose {
                y = l1: math.neg(x);
                z = l1: math.neg(y);
            }
        }
        """, [("E0202", "6:13", "label 'l1' is already used at line 5; labels name operator instances and must be "
               "unique (§2.10)")]),
    "optional yield": ("""
        operator op {
            @input { x: real[n]; c: optional real[n]; }
            @output { y: real[n]; }
            @compose { y = { yield c; }; }
        }
        """, [("E0303", "4:28", "a yielded value must not be optional; 'c' may be null (optional real[]) (§2.10.1)")]),
    "if condition not bool": ("""
        operator op {
            @attrib { a: int; }
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose { y = if a then math.neg(x) else x; }
        }
        """, [("E0301", "5:23", "an 'if' condition must be a bool; 'a' is int")]),
    "abstract type for an attribute": ("""
        operator op {
            @attrib { a: num; }
        }
        """, [("E0308", "2:18", "attribute 'a' cannot have the abstract type 'num'; abstract types only restrict "
               "generic types: declare 'T: num;' in @dtype and use T (§2.13)")]),
    "@dtype default outside its base": ("""
        operator op {
            @dtype { T: num = bool; }
        }
        """, [("E0308", "2:14", "default type 'bool' of 'T' is not a 'num' type; 'num' admits int, real")]),
}


@pytest.mark.parametrize("title", list(GOLDEN))
def test_golden(title: str) -> None:
    source, expected = GOLDEN[title]
    assert brief(check_source(source)) == expected


def test_golden_count() -> None:
    assert len(GOLDEN) >= 22


def test_duplicate_has_note_at_first() -> None:
    source, _ = GOLDEN["duplicate attribute"]
    (diag,) = check_source(source)
    assert [(n.message, n.span.line, n.span.col) for n in diag.notes] == [("'a' first declared here", 3, 9)]


def test_hints_say_what_to_fix() -> None:
    (diag,) = check_source(GOLDEN["int + real"][0])
    assert diag.hint is not None and "real(n)" in diag.hint
    (diag,) = check_source(GOLDEN["?? on a non-optional left side"][0])
    assert diag.hint == "remove '?? 1'"


# ---------------------------------------------------------------- behaviour without diagnostics


def test_unknown_types_do_not_cascade() -> None:
    diags = check_source("""
        operator op {
            @attrib { a: int; }
            @using { b = nope + 1; c = b * 2.0; d = [b, 1.0]; e = c ?? 1; }
        }
        """)
    assert [d.code for d in diags] == ["E0201"]


def test_null_test_promotes() -> None:
    assert check_source("""
        operator op {
            @attrib { a: optional int; }
            @using { b = ?a ? a + 1 : 0; c = ?a && a > 0 ? a : 1; d = (a ?? 1) + 1; }
            @assert { a > 0; }
        }
        """) == []


def test_symbol_of_optional_input_bound_by_another_input() -> None:
    assert check_source("""
        operator op {
            @input { b: optional real[n]; x: real[n]; }
            @output { y: real[n]; }
            @lower { y[i,] = b[i,] ?? x[i,], i < n; }
        }
        """) == []
    assert [d.code for d in check_source("""
        operator op {
            @input { b: optional real[n]; }
            @output { y: real[3]; }
            @lower { y[i,] = 0.0, i < n; }
        }
        """)] == ["E0303"]


def test_unknown_operator_has_unknown_results() -> None:
    assert check_source("""
        operator op {
            @input { x: real[n]; }
            @output { y: real[n]; }
            @compose { y, z, w = no_such_op(x); }
        }
        """) == []


# ---------------------------------------------------------------- the declaration table


def conv_scope():
    text = (BLOCKS / "ch2_1_03.sknd").read_text(encoding="utf-8")
    module, _ = parse_module(text, "conv.sknd")
    (conv,) = module.definitions
    return build_scope(conv)


def test_scope_kinds_and_types() -> None:
    scope = conv_scope()
    facts = {(s.name, s.kind, str(s.type), s.block) for s in scope if s.block in ("attrib", "input", "using",
                                                                                   "output")}
    assert {
        ("d", Kind.PACK_LENGTH, "int", "attrib"),
        ("stride", Kind.ATTRIBUTE, "int..", "attrib"),
        ("padding", Kind.ATTRIBUTE, "optional int..", "attrib"),
        ("b", Kind.SHAPE, "int", "input"),
        ("is", Kind.SHAPE, "int..", "input"),
        ("input", Kind.INPUT, "real[]", "input"),
        ("bias", Kind.INPUT, "optional real[]", "input"),
        ("paddings", Kind.USING, "int..", "using"),
        ("output", Kind.OUTPUT, "real[]", "output"),
    } <= facts
    assert str(scope.lookup("n").type) == "int"  # bound by `filter` as well, so not optional


def test_scope_records_local_names() -> None:
    scope = conv_scope()
    indices = {s.name for s in scope.symbols(Kind.INDEX)}
    assert indices == {"bi", "ni", "ci", "i", "j"}
    assert all(s.block == "lower" for s in scope.symbols(Kind.INDEX))
    assert scope.lookup("bi") is None  # formula-local: not visible from the root


def test_scope_loop_and_label_names() -> None:
    module, _ = parse_module(dedent("""
        operator op {
            @input { xs: real[n]..(k); }
            @output { y: real[n]; }
            @compose { y = with s: real[n] = 0.0 for x : xs do..(t ->) step: math.add(s, x); }
        }
        """), "t.sknd")
    scope = build_scope(module.definitions[0], make_lookup())
    kinds = {s.name: s.kind for s in scope}
    assert (kinds["s"], kinds["x"], kinds["t"], kinds["step"]) == (Kind.CARRIED, Kind.SCAN, Kind.LOOP_INDEX,
                                                                   Kind.LABEL)


def test_type_spelling() -> None:
    assert str(Type("int", optional=True, packed=True)) == "optional int.."
    assert str(Type("real", tensor=True)) == "real[]"
    assert str(Type("T", optional=True, packed=True, tensor=True)) == "optional T[].."
    spec = ast.TypeSpec(name="real", optional=True, shape=(), pack=ast.PackSpec())
    assert Type.from_spec(spec) == Type("real", True, True, True)
    assert Type.from_spec(ast.TypeSpec(name="int"), tensor=True).tensor
