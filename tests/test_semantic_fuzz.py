"""Whatever the definition or invocation, the checker and the binder answer with diagnostics,
never an exception: mutated stdlib operators through the type checker and binding-order check,
and random invocations of every stdlib operator through skriptnd.infer."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skriptnd
from skriptnd.api import find_operator
from skriptnd.diagnostics import Diagnostic
from skriptnd.resources import stdlib_dir
from skriptnd.semantics.binding import binding_order_diagnostics, signature
from skriptnd.semantics.typecheck import check_definition
from skriptnd.syntax import parse_module

ROOT = Path(__file__).resolve().parents[1]
NAMES = json.loads((ROOT / "tests/data/stdlib_operator_names.json").read_text())
OPERATORS = [f"{m}.{n}" for m, ns in NAMES.items() for n in ns]
SOURCES = [m.group(0) for p in sorted(stdlib_dir().glob("*.sknd"))
           for m in re.finditer(r"^operator \w+ \{.*?^\}", p.read_text(), re.S | re.M)]
TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d+\.\d+|\d+|'[^']*'|\"[^\"]*\"|\.\.\.?|<\?=|>\?=|[<>=!]=|<\?|>\?|\?\?|&&"
                   r"|\|\||=>|\*\*|:=|\+=|\*=|.", re.S)
POOL = ["0", "1", "-1", "x", "d", "s", "..", "[", "]", "(", ")", ",", "?", "T", "int", "real", "optional", "+",
        "*", "/", "i", "<", "|", "~", '"s"', "..(d)", "2.5", "true", "unknown_name"]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.data())
def test_mutated_definitions_give_diagnostics_not_exceptions(data: st.DataObject) -> None:
    tokens = TOKEN.findall(data.draw(st.sampled_from(SOURCES)))
    for _ in range(data.draw(st.integers(1, 3))):
        k = data.draw(st.integers(0, len(tokens) - 1))
        action = data.draw(st.sampled_from(["delete", "replace", "insert", "swap"]))
        if action == "delete":
            tokens[k] = ""
        elif action == "replace":
            tokens[k] = data.draw(st.sampled_from(POOL))
        elif action == "insert":
            tokens.insert(k, data.draw(st.sampled_from(POOL)))
        else:
            j = data.draw(st.integers(0, len(tokens) - 1))
            tokens[k], tokens[j] = tokens[j], tokens[k]
    module, diags = parse_module("".join(tokens), "f.sknd")
    if module is None or diags:
        return
    for definition in module.definitions:
        found = check_definition(definition, lambda name: None, "m") + binding_order_diagnostics(definition)
        assert all(isinstance(d, Diagnostic) for d in found)


def _value(data: st.DataObject, type_name: str) -> object:
    scalar = {"int": st.integers(-5, 5), "real": st.sampled_from([0.0, 1.5, -2.0]), "bool": st.booleans(),
              "str": st.sampled_from(["NCX", "NXC", "UPPER", "CONSTANT", "bogus", ""])}.get(
        type_name, st.sampled_from([1, 1.0, True, "x"]))
    return data.draw(st.one_of(scalar, st.lists(scalar, max_size=4)))


@FUZZ
@given(st.data())
def test_random_invocations_give_results_or_diagnostics(data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(OPERATORS))
    definition, _ = find_operator(op)
    sig = signature(definition)
    attrs = {a.name: _value(data, a.type.name) for a in sig.attribs if data.draw(st.booleans())}
    dims = st.lists(st.integers(0, 5), max_size=5)
    shapes: list[object] = []
    for decl in sig.inputs:
        if decl.type.optional and data.draw(st.booleans()):
            shapes.append(None)
        else:
            shapes.append(data.draw(st.lists(dims, max_size=3)) if decl.type.pack else data.draw(dims))
    result = skriptnd.infer(op, attrs, shapes, data.draw(st.sampled_from(["real", "int", "bool"])))
    assert result.ok or all(isinstance(d, Diagnostic) for d in result.diagnostics)
    for out in result.outputs:
        for extent in out.shape or ():
            assert extent is None or extent >= 0
