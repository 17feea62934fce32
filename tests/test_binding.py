"""Binding order (§2.6.2) and invocation binding (§2.5, §2.6, §2.9), on the spec's own examples."""

from __future__ import annotations

import pytest

from skriptnd.diagnostics import DiagnosticError
from skriptnd.semantics.binding import bind, binding_order_diagnostics, signature
from skriptnd.semantics.values import Pack, TensorValue
from skriptnd.syntax import parse_module


def definition(text: str):
    module, diags = parse_module(text, "<test>")
    assert not diags, diags
    return module.definitions[0]


def t(*shape: int, dtype: str = "real") -> TensorValue:
    return TensorValue(dtype, shape)


def error(defn, attribs=None, inputs=(), type_args=()) -> tuple[str, str]:
    with pytest.raises(DiagnosticError) as info:
        bind(defn, attribs or {}, inputs, type_args)
    (d,) = info.value.diagnostics
    return d.code, d.message


# §2.6.2, the worked example, verbatim (plus an output so the operator is complete).
SPEC_EXAMPLE = """
operator example {
    @attrib {
      r: int;
      a: optional int;
      b: int..(d) = 0;
      c: int = 2 * d + r;
    }
    @input {
      x: real[s..(r),z..(d),t..];
      y: real[s..(r),z..(d)];
    }
    @output {
      o: real[t..];
    }
}
"""


def test_spec_binding_order_example() -> None:
    defn = definition(SPEC_EXAMPLE)
    assert binding_order_diagnostics(defn) == []
    # "input y will be the first in the binding order ... input x takes the second position"
    assert signature(defn).order == (1, 0)
    assert signature(defn).deferred == frozenset({"c"})


def test_spec_binding_order_example_invocation() -> None:
    b = bind(definition(SPEC_EXAMPLE), {"r": 1}, [t(2, 3, 4, 5, 6), t(2, 3, 4)])
    env = b.env
    assert env["s"] == (2,) and env["z"] == (3, 4) and env["d"] == 2 and env["t"] == (5, 6)
    assert env["a"] is None
    assert env["b"] == (0, 0) and env["b"].uniform == 0  # uniform default, length from d
    assert env["c"] == 2 * 2 + 1
    assert b.outputs[0].shape == (5, 6)


def test_spec_binding_order_example_rejects_disagreeing_inputs() -> None:
    code, message = error(definition(SPEC_EXAMPLE), {"r": 1}, [t(2, 3, 4, 5, 6), t(2, 3, 9)])
    assert code == "E0403"
    assert "input 'x'" in message and "[3, 9]" in message


def test_spec_invalid_example_packed_attribute_rank() -> None:
    # §2.6.2: "The above example is invalid, because the rank d cannot be determined ..."
    defn = definition("""
operator bad {
    @attrib { a: int..(d) = 0; }
    @input { x: real[s..(d),t..]; }
    @output { y: real[s..]; }
}""")
    diags = binding_order_diagnostics(defn)
    # both halves of the spec's reason: x cannot be bound, and a's uniform default has no length
    assert [d.code for d in diags] == ["E0401", "E0409"]
    assert "input 'x'" in diags[0].message and "'s..(d)' and 't..'" in diags[0].message
    assert (diags[0].span.line, diags[0].span.col) == (4, 14)


def test_ambiguity_resolved_by_attribute() -> None:
    defn = definition("""
operator ok {
    @attrib { r: int; }
    @input { x: real[s..(r),t..]; }
    @output { y: real[t..]; }
}""")
    assert binding_order_diagnostics(defn) == []
    assert bind(defn, {"r": 2}, [t(1, 2, 3, 4, 5)]).outputs[0].shape == (3, 4, 5)
    code, message = error(defn, {"r": 4}, [t(1, 2, 3)])
    assert code == "E0402" and "at least 4" in message


def test_affine_extents_are_deduced_and_checked() -> None:
    # §2.6: `m`, `k + 1`, `s..(2 * d)` declare symbols; `n / 2` is checked against attribute n.
    defn = definition("""
operator aff {
    @attrib { n: int; }
    @input { x: real[m, k + 1, s..(2 * d), n / 2]; }
    @output { y: real[m, k, d]; }
}""")
    b = bind(defn, {"n": 6}, [t(2, 5, 7, 7, 7, 7, 3)])
    assert b.outputs[0].shape == (2, 4, 2)
    code, message = error(defn, {"n": 6}, [t(2, 5, 7, 7, 7, 3)])  # odd rank for s..(2 * d)
    assert code == "E0402"
    code, message = error(defn, {"n": 8}, [t(2, 5, 7, 7, 3)])
    assert code == "E0403" and "expects 4" in message


SPEC_USING_ASSERT = """
operator interleave {
    @attrib {
      a: int;
      b: int;
      c: int;
    }
    @using {
      r = a / b;
    }
    @assert {
      b > 0: "b must be positive", b;
      a % b == 0: "a must be divisible by b", a, b;
      r + c == 42: "some condition must be true for a/b and c";
    }
    @output { y: real[r]; }
}
"""


def test_spec_using_assert_interleaving() -> None:
    defn = definition(SPEC_USING_ASSERT)
    # b = 0: the first assertion fires before r = a / b is evaluated (no division by zero)
    assert error(defn, {"a": 4, "b": 0, "c": 1}) == ("E0501", "b must be positive (b = 0)")
    assert error(defn, {"a": 7, "b": 2, "c": 1}) == ("E0501", "a must be divisible by b (a = 7, b = 2)")
    assert error(defn, {"a": 8, "b": 2, "c": 1}) == ("E0501", "some condition must be true for a/b and c")
    assert bind(defn, {"a": 80, "b": 2, "c": 2}).outputs[0].shape == (40,)


def test_null_assertions_are_skipped_and_messages_format() -> None:
    defn = definition("""
operator o {
    @attrib { k: optional int; m: int = 3; }
    @assert {
        k > 0: "k must be positive, got {k}", 'the k': k;
        m < 3: "m is {m}";
    }
}""")
    assert error(defn, {"k": -2}) == ("E0501", "k must be positive, got -2 (the k = -2)")
    assert error(defn, {}) == ("E0501", "m is 3")  # k null: its assertion is not checked


def test_uniform_attribute_value_in_invocation() -> None:
    # §2.5: a single value for a packed attribute whose length is known becomes uniform
    defn = definition("""
operator u {
    @attrib { stride: int..(d) = 1; }
    @input { x: real[s..(d)]; }
    @output { y: real[s / stride..]; }
}""")
    assert bind(defn, {"stride": 2}, [t(8, 4, 6)]).outputs[0].shape == (4, 2, 3)
    assert bind(defn, {"stride": Pack([1, 2, 3])}, [t(8, 4, 6)]).outputs[0].shape == (8, 2, 2)
    code, message = error(defn, {"stride": Pack([1, 2])}, [t(8, 4, 6)])
    assert code == "E0403" and "length of attribute 'stride'" in message


def test_optional_deferred_default_requires_the_attribute() -> None:
    # §2.5: `a: int..(k) = [0:r]` with optional r: if r is not given, a must be.
    defn = definition("""
operator p {
    @attrib { r: optional int; a: int..(k) = [0:r]; }
    @output { y: real[k]; }
}""")
    assert bind(defn, {"r": 3}).outputs[0].shape == (3,)
    assert bind(defn, {"a": Pack([5, 6])}).outputs[0].shape == (2,)
    assert error(defn, {})[0] == "E0410"


def test_generic_types_are_deduced_explicit_or_defaulted() -> None:
    defn = definition("""
operator g {
    @dtype { T: num; S: type = real; }
    @attrib { v: T; }
    @input { x: T[n]; }
    @output { y: S[n]; }
}""")
    b = bind(defn, {"v": 2}, [t(3, dtype="int")])
    assert b.dtypes == {"T": "int", "S": "real"} and b.outputs[0].dtype == "real"
    assert bind(defn, {"v": 2.0}, [t(3)], type_args=["real", "bool"]).outputs[0].dtype == "bool"
    code, message = error(defn, {"v": 2}, [t(3)])  # T is int from v, real from x
    assert code == "E0412" and "'T'" in message
    code, message = error(defn, {"v": True}, [t(3, dtype="bool")])  # num excludes bool
    assert code == "E0412"


def test_tensor_pack_with_shared_and_distinct_extents() -> None:
    # §2.6: `xs: real[z, s..(l), ..t]..(k)`
    defn = definition("""
operator tp {
    @input { xs: real[z, s..(l), ..t]..(k); }
    @output { y: real[z, s.., t + ..]; }
}""")
    b = bind(defn, {}, [Pack([t(2, 3, 4, 5), t(2, 3, 4, 6)])])
    assert b.env["k"] == 2 and b.env["t"] == (5, 6) and b.env["s"] == (3, 4)
    assert b.outputs[0].shape == (2, 3, 4, 11)
    code, _ = error(defn, {}, [Pack([t(2, 3, 4, 5), t(9, 3, 4, 6)])])
    assert code == "E0403"


def test_dynamic_output_has_upper_bound() -> None:
    defn = definition("""
operator where_true {
  @input { cond: bool[s..(d)]; }
  @output { idx: int[d,k|(s * ..)]; }
}""")
    out = bind(defn, {}, [t(3, 4, dtype="bool")]).outputs[0]
    assert out.shape == (2, None) and out.bounds == (None, 12)


def test_wrong_dtype_and_rank_messages_name_the_input() -> None:
    defn = definition("""
operator mm {
  @input { A: real[m,k]; B: real[k,n]; }
  @output { C: real[m,n]; }
}""")
    code, message = error(defn, {}, [t(2, 3, dtype="int"), t(3, 4)])
    assert code == "E0412" and "input 'A'" in message
    code, message = error(defn, {}, [t(2, 3, 1), t(3, 4)])
    assert code == "E0402" and "input 'A'" in message and "[m, k]" in message
    code, message = error(defn, {}, [t(2, 3), t(4, 4)])
    assert code == "E0403" and "input 'B'" in message


def test_bool_length_makes_an_optional_single_extent() -> None:
    # §2.6 (l. 642): with a bool length, `c..(cond)` is the single extent `c` (an optional int), present
    # only when cond holds; an absent item binds nothing, so a later item can declare `c` (the
    # space_to_batch family: `c..(data_format == 'NCX'), s..(d), c..(data_format != 'NCX')`).
    defn = definition("""
operator cx {
    @attrib { first: bool; }
    @input { x: real[b, c..(first), s..(2), c..(!first)]; }
    @output { y: real[b, c * 2, s..]; }
}""")
    assert bind(defn, {"first": True}, [t(1, 3, 4, 5)]).outputs[0].shape == (1, 6, 4, 5)
    assert bind(defn, {"first": False}, [t(1, 4, 5, 3)]).outputs[0].shape == (1, 6, 4, 5)
    code, message = error(defn, {"first": True}, [t(1, 3, 4)])
    assert code == "E0402"
    only_absent = definition("""
operator ca {
    @attrib { on: bool; }
    @input { x: real[s.., c..(on)]; }
    @output { y: real[s.., c..(on)]; }
}""")
    b = bind(only_absent, {"on": False}, [t(2, 3)])
    assert b.env["c"] is None and b.outputs[0].shape == (2, 3)


def test_repeated_scalar_extent_in_input_shape() -> None:
    # §2.4 (l. 405): `1 ..(n)` repeats 1 n times (layout.stack's `1 ..(squeeze ? 1 : 0)`): every
    # extent it covers must be 1, and a count of 0 covers none.
    defn = definition("""
operator st {
    @attrib { n: int; }
    @input { x: real[a, 1 ..(n), b]; }
    @output { y: real[a, b]; }
}""")
    assert bind(defn, {"n": 2}, [t(3, 1, 1, 4)]).outputs[0].shape == (3, 4)
    assert bind(defn, {"n": 0}, [t(3, 4)]).outputs[0].shape == (3, 4)
    code, message = error(defn, {"n": 2}, [t(3, 1, 2, 4)])
    assert code == "E0403" and "input 'x'" in message


def test_omitted_input_default_fills_its_declared_shape() -> None:
    # §2.6 (l. 690) limits input defaults to 0-rank values; nn.lstm's `h0: real[b,n] = 0.0` fills the
    # shape [b, n] that the other inputs prescribe, instead of being a rank-0 tensor that fails it.
    defn = definition("""
operator state {
    @input {
        x: real[b, c];
        h0: real[b, c] = 0.0;
    }
    @output { y: real[b, c]; }
}""")
    b = bind(defn, {}, [t(2, 5)])
    assert b.env["h0"].shape == (2, 5) and b.outputs[0].shape == (2, 5)
    assert bind(defn, {}, [t(2, 5), t(2, 5)]).outputs[0].shape == (2, 5)
    assert error(defn, {}, [t(2, 5), t(2, 4)])[0] == "E0403"


def test_failed_assertion_waits_for_the_symbols_of_its_message() -> None:
    # nn.deconv: `(output_size + paddings - fd) / stride + 1 == ix` is decidable before `ox`, which its
    # message shows; the report waits for `ox` (it used to escape as E0201 "unknown identifier 'ox'").
    defn = definition("""
operator late {
    @attrib { a: int; }
    @using {
        b = a * 2;
        c = b + 1;
    }
    @assert {
        b < 10: "b too large", 'c': c;
    }
}""")
    assert error(defn, {"a": 7}) == ("E0501", "b too large (c = 15)")
    # a later @using that fails meanwhile yields to the pending assertion
    guarded = definition("""
operator guard {
    @attrib { a: int; }
    @using {
        b = a;
        c = 10 / b;
    }
    @assert {
        b != 0: "b must not be zero", 'ratio': c;
    }
}""")
    assert error(guarded, {"a": 0}) == ("E0501", "b must not be zero (ratio = ?)")
    assert bind(guarded, {"a": 5}).env["c"] == 2


def test_negative_pack_length_is_a_rank_error() -> None:
    # `s..(axis < 0 ? axis + rank : axis)` with axis < -rank has a negative length: a diagnostic, not an
    # IndexError from slicing the shape.
    defn = definition("""
operator neg {
    @attrib { axis: int; }
    @input { x: real^(rank)[s..(axis < 0 ? axis + rank : axis), z, t..]; }
    @output { y: real[s.., t..]; }
}""")
    assert bind(defn, {"axis": -1}, [t(2, 3)]).outputs[0].shape == (2,)
    code, message = error(defn, {"axis": -5}, [t(2, 3)])
    assert code == "E0402" and "input 'x'" in message and "-3" in message


def test_equal_definitions_in_two_files_keep_their_own_spans() -> None:
    # the signature cache is by identity: AST equality ignores spans
    text = "operator bad {\n    @attrib { a: int..(d) = 0; }\n    @input { x: real[s..(d),t..]; }\n}\n"
    first, _ = parse_module(text, "a.sknd")
    second, _ = parse_module("\n\n" + text, "b.sknd")
    assert first.definitions[0] == second.definitions[0]
    a = binding_order_diagnostics(first.definitions[0])
    b = binding_order_diagnostics(second.definitions[0])
    assert {d.span.file for d in a} == {"a.sknd"} and {d.span.file for d in b} == {"b.sknd"}
    assert [d.span.line for d in b] == [d.span.line + 2 for d in a]
