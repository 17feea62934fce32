"""COND_IF, WHILE_LOOP and CUSTOM (skriptnd.tosa.ops.control_flow).

Against the reference model: random integer and float region bodies, bit-exact (each region is written
once as a :class:`Body` and turned into a skriptnd ``Graph`` and a ``tosa_oracle.Region``); ERROR_IF
graphs (condition size, region signatures) must be errors on both sides. Hand-derived checks from the
pseudocode: zero WHILE_LOOP iterations return the inputs, COND_IF runs exactly one branch, Collatz step
counts, nesting depth, the 0.30 rank-0 condition, CUSTOM.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tosa_oracle as to  # noqa: E402

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable
from skriptnd.tosa.ops.control_flow import MAX_NESTING, Graph, Node, TensorType  # noqa: E402

_GRAPH_KEYS = ("then_graph", "else_graph", "cond_graph", "body_graph")


@pytest.fixture()
def oracle():
    to.require_oracle()


def _rng(*key: object) -> np.random.Generator:
    return to.seeded_rng("tosa-control-flow", *key)


class Body:
    """A region written once: ``inputs``/``outputs`` are (name, shape, type), ``nodes`` are
    (op, inputs, outputs, attrs) with skriptnd operand structure (a list of names = one list operand;
    graph attributes hold Body objects), ``tensors`` declares intermediates for the reference model."""

    _count = 0

    def __init__(self, inputs, outputs, nodes, tensors=None, constants=None):
        Body._count += 1
        self.name = f"region{Body._count}"
        self.inputs, self.outputs, self.nodes = inputs, outputs, nodes
        self.tensors = dict(tensors or {})
        self.constants = dict(constants or {})

    def graph(self) -> Graph:
        nodes = [Node(op, ins, outs, {k: (v.graph() if isinstance(v, Body) else v) for k, v in attrs.items()})
                 for op, ins, outs, attrs in self.nodes]
        return Graph.of_nodes(self.inputs, self.outputs, nodes, self.constants)

    def regions(self) -> list[to.Region]:
        tensors = {n: (s, t) for n, s, t in [*self.inputs, *self.outputs]}
        tensors.update(self.tensors)
        ops, nested = [], []
        for op, ins, outs, attrs in self.nodes:
            flat = [n for i in ins for n in (i if isinstance(i, list) else [i])]
            oracle_attrs = {}
            for k, v in attrs.items():
                if isinstance(v, Body):
                    nested += v.regions()
                    v = v.name
                oracle_attrs[k] = v
            ops.append((op, flat, list(outs), oracle_attrs))
        return [to.Region(self.name, [n for n, _, _ in self.inputs], [n for n, _, _ in self.outputs], tensors, ops,
                          self.constants), *nested]


def _sig(body: Body) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(s), t) for _, s, t in body.outputs]


def run_both(op: str, operands: list[Any], bodies: dict[str, Body], out_sig=None, valid: bool = True, **kwargs):
    """Run ``OPS[op]`` and the reference model; assert the same outputs (bit-exact) or errors on both.
    ``valid``: whether the reference model must accept (True) or reject (False) the graph."""
    names = [f"in{i}" for i in range(len(operands))]
    out_sig = out_sig or _sig(bodies["then_graph" if op == "COND_IF" else "body_graph"])
    outs = [f"out{i}" for i in range(len(out_sig))]
    main = to.Region("main", [], outs, dict(zip(outs, out_sig, strict=True)),
                     [(op, names, outs, {k: b.name for k, b in bodies.items()})], dict(zip(names, operands, strict=True)))
    regions = [main] + [r for b in bodies.values() for r in b.regions()]
    ref = to.run_reference_graph(regions)
    assert isinstance(ref, to.ReferenceError) != valid, f"reference model: {ref}"
    graphs = {k: b.graph() for k, b in bodies.items()}
    args = [operands[0], operands[1:]] if op == "COND_IF" else [operands]
    if isinstance(ref, to.ReferenceError):
        with pytest.raises(ref.expected_exception()):
            OPS[op](*args, **graphs, **kwargs)
        return ref
    mine = OPS[op](*args, **graphs, **kwargs)
    assert len(mine) == len(ref)
    for m, r, (_, t) in zip(mine, ref, out_sig, strict=True):
        m = np.asarray(m)
        assert m.shape == r.shape, f"{op}: shape {m.shape} != reference {r.shape}"
        if t in ("fp16", "bf16", "fp32"):
            assert to.same_bits(m, r, t), f"{op}: {m} != reference {r}"
        else:
            assert m.dtype == r.dtype and np.array_equal(m, r), f"{op}: {m} != reference {r}"
    return mine


def _i32(v) -> np.ndarray:
    return np.asarray(v, np.int32)


ZERO8 = np.zeros(1, np.int8)  # MUL shift operand


# ---------------------------------------------------------------------------------------------- COND_IF


def _branches(t: str, shape):
    """int32/float — then: (a + b, a * b, b), else: (a - b, max(a, b), a); int8/int16 (which TOSA 1.0 ADD,
    SUB, MUL, MAXIMUM do not take) — then: (a & b, a ^ b, b), else: (a | b, clamp(a, -5, 7), a)."""
    x = [("a", shape, t), ("b", shape, t)]
    outs = [("r0", shape, t), ("r1", shape, t), ("r2", shape, t)]
    if t in ("int8", "int16"):
        then = [("BITWISE_AND", ["a", "b"], ["r0"], {}), ("BITWISE_XOR", ["a", "b"], ["r1"], {})]
        other = [("BITWISE_OR", ["a", "b"], ["r0"], {}), ("CLAMP", ["a"], ["r1"], {"min_val": -5, "max_val": 7})]
    else:
        then = [("ADD", ["a", "b"], ["r0"], {}), ("MUL", ["a", "b", "shift"], ["r1"], {})]
        other = [("SUB", ["a", "b"], ["r0"], {}), ("MAXIMUM", ["a", "b"], ["r1"], {})]
    return (Body(x, outs, [*then, ("IDENTITY", ["b"], ["r2"], {})], constants={"shift": ZERO8}),
            Body(x, outs, [*other, ("IDENTITY", ["a"], ["r2"], {})]))


@pytest.mark.parametrize("t", ["int32", "int16", "int8", "fp32", "fp16"])
@pytest.mark.parametrize("case", range(4))
def test_cond_if_random(oracle, t, case):
    rng = _rng("cond_if", t, case)
    shape = to.rand_shape(rng, 0, 3, 3)
    if t.startswith("int"):
        lim = {"int8": 11, "int16": 181, "int32": 46340}[t]  # products stay inside the type
        a, b = to.rand_int(rng, t, shape, -lim, lim), to.rand_int(rng, t, shape, -lim, lim)
    else:
        a, b = to.rand_float(rng, t, shape, -100, 100, 0.0), to.rand_float(rng, t, shape, -100, 100, 0.0)
    cshape = [(), (1,), (1, 1)][case % 3]
    cond = np.full(cshape, bool(case % 2))
    then, other = _branches(t, shape)
    run_both("COND_IF", [cond, a, b], {"then_graph": then, "else_graph": other})


def test_cond_if_both_values_of_the_condition(oracle):
    rng = _rng("cond_if_both")
    a, b = to.rand_int(rng, "int32", (2, 3), -1000, 1000), to.rand_int(rng, "int32", (2, 3), -1000, 1000)
    then, other = _branches("int32", (2, 3))
    yes = run_both("COND_IF", [np.array([True]), a, b], {"then_graph": then, "else_graph": other})
    no = run_both("COND_IF", [np.array([False]), a, b], {"then_graph": then, "else_graph": other})
    # independent of the oracle: the pseudocode picks one branch
    assert np.array_equal(yes[0], a + b) and np.array_equal(yes[2], b)
    assert np.array_equal(no[0], a - b) and np.array_equal(no[2], a)


def test_cond_if_comparison_inside_and_bool_output(oracle):
    """Branches with bool outputs and a REDUCE_SUM of different shape than the inputs."""
    rng = _rng("cond_if_bool")
    for c in (True, False):
        a = to.rand_int(rng, "int32", (3, 4), -50, 50)
        x = [("a", (3, 4), "int32")]
        outs = [("g", (3, 4), "bool"), ("s", (1, 4), "int32")]
        zero = _i32(np.zeros((1, 1)))
        then = Body(x, outs, [("GREATER", ["a", "z"], ["g"], {}), ("REDUCE_SUM", ["a"], ["s"], {"axis": 0})],
                    constants={"z": zero})
        other = Body(x, outs, [("EQUAL", ["a", "z"], ["g"], {}), ("REDUCE_MAX", ["a"], ["s"], {"axis": 0})],
                     constants={"z": zero})
        mine = run_both("COND_IF", [np.array(c), a], {"then_graph": then, "else_graph": other})
        assert np.array_equal(mine[1], a.sum(0, keepdims=True) if c else a.max(0, keepdims=True))


@pytest.mark.parametrize("cshape", [(2,), (1, 2), (0,)])
def test_cond_if_condition_size_error(oracle, cshape):
    a = _i32([1, 2])
    then, other = _branches("int32", (2,))
    run_both("COND_IF", [np.zeros(cshape, bool), a, a], {"then_graph": then, "else_graph": other}, valid=False)


def test_cond_if_signature_errors(oracle):
    a = _i32([1, 2])
    x = [("a", (2,), "int32")]
    good = Body(x, [("r", (2,), "int32")], [("NEGATE", ["a", "z", "z"], ["r"], {})], constants={"z": _i32([0])})
    wide = Body(x, [("r", (1, 2), "int32")], [("RESHAPE", ["a", "sh"], ["r"], {})], constants={"sh": _i32([1, 2])})
    other_type = Body(x, [("r", (2,), "bool")], [("EQUAL", ["a", "a"], ["r"], {})])
    wrong_input = Body([("a", (3,), "int32")], [("r", (3,), "int32")], [("IDENTITY", ["a"], ["r"], {})])
    cond = np.array([True])
    for then, other in ((good, other_type), (other_type, good), (good, wrong_input), (wrong_input, good)):
        run_both("COND_IF", [cond, a], {"then_graph": then, "else_graph": other}, out_sig=_sig(then), valid=False)
    with pytest.raises(TosaError):  # output shapes differ (RESHAPE inside a region needs a shape_t: no oracle)
        OPS["COND_IF"](cond, [a], then_graph=good.graph(), else_graph=wide.graph())
    with pytest.raises(TosaError):
        OPS["COND_IF"](np.array([1], np.int32), [a], then_graph=good.graph(), else_graph=good.graph())


def test_cond_if_runs_exactly_one_branch():
    calls = []

    def branch(tag):
        def run(xs):
            calls.append(tag)
            return [xs[0]]
        return Graph([TensorType((2,), "int8")], [TensorType((2,), "int8")], run)

    x = np.array([3, -4], np.int8)
    for c, tag in ((True, "then"), (False, "else")):
        calls.clear()
        out = OPS["COND_IF"](np.array([c]), [x], then_graph=branch("then"), else_graph=branch("else"))
        assert calls == [tag] and np.array_equal(out[0], x)


def test_region_output_must_match_its_declaration():
    bad = Graph([TensorType((2,), "int32")], [TensorType((2,), "int32")], lambda xs: [xs[0].astype(np.int16)])
    with pytest.raises(TosaError, match="tosa_output_shape"):
        OPS["COND_IF"](np.array(True), [_i32([1, 2])], then_graph=bad, else_graph=bad)


def test_cond_if_0_30_condition_is_rank_0():
    g = Graph([TensorType((2,), "int32")], [TensorType((2,), "int32")], lambda xs: xs)
    x = _i32([1, 2])
    assert np.array_equal(OPS["COND_IF"](np.array(True), [x], then_graph=g, else_graph=g, version="0.30")[0], x)
    with pytest.raises(TosaError, match="rank-0"):
        OPS["COND_IF"](np.array([True]), [x], then_graph=g, else_graph=g, version="0.30")
    assert np.array_equal(OPS["COND_IF"](np.array([[True]]), [x], then_graph=g, else_graph=g)[0], x)  # 1.0: size 1


# ------------------------------------------------------------------------------------------- WHILE_LOOP


def _counter_loop(shape, t="int32", step=None):
    """(i, n, acc, x): while i < n: i += 1; acc = acc + x  (or acc * x >> k style bodies)."""
    sig = [("i", (1,), "int32"), ("n", (1,), "int32"), ("acc", shape, t), ("x", shape, t)]
    cond = Body(sig, [("c", (1,), "bool")], [("GREATER", ["n", "i"], ["c"], {})])
    body = Body(sig, [("i2", (1,), "int32"), ("n", (1,), "int32"), ("acc2", shape, t), ("x", shape, t)],
                [("ADD", ["i", "one"], ["i2"], {}), (step or "ADD", ["acc", "x"], ["acc2"], {})],
                constants={"one": _i32([1])})
    return cond, body


@pytest.mark.parametrize("case", range(6))
def test_while_loop_counter_random(oracle, case):
    rng = _rng("while_counter", case)
    shape = to.rand_shape(rng, 1, 3, 3)
    n = int(rng.integers(0, 7))
    i0 = int(rng.integers(-2, 3))
    acc = to.rand_int(rng, "int32", shape, -10**6, 10**6)
    x = to.rand_int(rng, "int32", shape, -10**6, 10**6)
    cond, body = _counter_loop(shape)
    mine = run_both("WHILE_LOOP", [_i32([i0]), _i32([n]), acc, x], {"cond_graph": cond, "body_graph": body})
    iterations = max(n - i0, 0)
    assert mine[0][0] == max(i0, n) and np.array_equal(mine[2], acc + iterations * x)


@pytest.mark.parametrize("t", ["int8", "int16", "fp32", "bf16"])
def test_while_loop_typed_bodies(oracle, t):
    """Bodies of other types: int8/int16 ARITHMETIC_RIGHT_SHIFT with rounding, float MUL (exact bits)."""
    rng = _rng("while_typed", t)
    shape = (2, 3)
    if t.startswith("int"):
        acc = to.rand_int(rng, t, shape)
        x = to.rand_int(rng, t, shape, 0, 2)
        cond, body = _counter_loop(shape, t, "ARITHMETIC_RIGHT_SHIFT")
        body.nodes[1] = ("ARITHMETIC_RIGHT_SHIFT", ["acc", "x"], ["acc2"], {"round": True})
    else:
        acc = to.rand_float(rng, t, shape, -3, 3, 0.0)
        x = to.rand_float(rng, t, shape, 0.5, 1.7, 0.0)
        cond, body = _counter_loop(shape, t)
        body.nodes[1] = ("MUL", ["acc", "x", "shift"], ["acc2"], {})
        body.constants["shift"] = ZERO8
    run_both("WHILE_LOOP", [_i32([0]), _i32([5]), acc, x], {"cond_graph": cond, "body_graph": body})


def _collatz():
    """(x, steps): while x > 1: x = x even ? x >> 1 : 3x + 1 (a COND_IF inside the body); steps += 1."""
    s = [("x", (1,), "int32"), ("steps", (1,), "int32")]
    cond = Body(s, [("c", (1,), "bool")], [("GREATER", ["x", "one"], ["c"], {})], constants={"one": _i32([1])})
    half = Body([("v", (1,), "int32")], [("h", (1,), "int32")],
                [("ARITHMETIC_RIGHT_SHIFT", ["v", "one"], ["h"], {"round": False})], constants={"one": _i32([1])})
    triple = Body([("v", (1,), "int32")], [("h", (1,), "int32")],
                  [("MUL", ["v", "three", "shift"], ["t"], {}), ("ADD", ["t", "one"], ["h"], {})],
                  tensors={"t": ((1,), "int32")}, constants={"three": _i32([3]), "one": _i32([1]), "shift": ZERO8})
    body = Body(s, [("x2", (1,), "int32"), ("s2", (1,), "int32")],
                [("BITWISE_AND", ["x", "one"], ["bit"], {}), ("EQUAL", ["bit", "zero"], ["even"], {}),
                 ("COND_IF", ["even", ["x"]], ["x2"], {"then_graph": half, "else_graph": triple}),
                 ("ADD", ["steps", "one"], ["s2"], {})],
                tensors={"bit": ((1,), "int32"), "even": ((1,), "bool")},
                constants={"one": _i32([1]), "zero": _i32([0])})
    return cond, body


@pytest.mark.parametrize("start, steps", [(1, 0), (2, 1), (6, 8), (7, 16), (27, 111)])
def test_while_loop_with_nested_cond_if(oracle, start, steps):
    """Collatz total stopping times (hand-known values: 6 → 8, 7 → 16, 27 → 111)."""
    cond, body = _collatz()
    mine = run_both("WHILE_LOOP", [_i32([start]), _i32([0])], {"cond_graph": cond, "body_graph": body})
    assert mine[0][0] == 1 and mine[1][0] == steps


def test_while_loop_zero_iterations_returns_inputs():
    never = Graph([TensorType((2,), "int8")], [TensorType((), "bool")], lambda xs: [np.array(False)])
    body = Graph([TensorType((2,), "int8")], [TensorType((2,), "int8")], lambda xs: pytest.fail("body ran"))
    x = np.array([5, -5], np.int8)
    out = OPS["WHILE_LOOP"]([x], cond_graph=never, body_graph=body)
    assert len(out) == 1 and out[0].dtype == np.int8 and np.array_equal(out[0], x)
    out[0][0] = 0  # output_list = list[0] is a copy of the input list
    assert x[0] == 5


def test_while_loop_signature_errors(oracle):
    shape = (2,)
    acc, x = _i32([1, 2]), _i32([3, 4])
    operands = [_i32([0]), _i32([2]), acc, x]
    sig = [("i", (1,), "int32"), ("n", (1,), "int32"), ("acc", shape, "int32"), ("x", shape, "int32")]
    cond, body = _counter_loop(shape)
    int_cond = Body(sig, [("c", (1,), "int32")], [("SUB", ["n", "i"], ["c"], {})])
    wide_cond = Body(sig, [("c", (2,), "bool")], [("GREATER", ["acc", "x"], ["c"], {})])
    short_body = Body(sig, sig[:3], [("IDENTITY", ["i"], ["i"], {})])
    retyped = Body(sig, [*sig[:3], ("x2", shape, "bool")],
                   [("EQUAL", ["acc", "x"], ["x2"], {})])
    for c, b in ((int_cond, body), (wide_cond, body), (cond, retyped)):
        run_both("WHILE_LOOP", operands, {"cond_graph": c, "body_graph": b},
                 out_sig=[(tuple(s), t) for _, s, t in sig], valid=False)
    with pytest.raises(TosaError):
        OPS["WHILE_LOOP"](operands, cond_graph=cond.graph(), body_graph=short_body.graph())
    with pytest.raises(TosaError):  # input list differs from the graphs' inputs
        OPS["WHILE_LOOP"](operands[:3], cond_graph=cond.graph(), body_graph=body.graph())


def test_while_loop_0_30_cond_output_is_rank_0_bool():
    x = [np.array([3], np.int32)]
    sig = [TensorType((1,), "int32")]

    def dec(xs):
        return [xs[0] - np.int32(1)]

    rank0 = Graph(sig, [TensorType((), "bool")], lambda xs: [np.array(xs[0][0] > 0)])
    rank1 = Graph(sig, [TensorType((1,), "bool")], lambda xs: [xs[0] > 0])
    body = Graph(sig, sig, dec)
    assert OPS["WHILE_LOOP"](x, cond_graph=rank0, body_graph=body, version="0.30")[0][0] == 0
    assert OPS["WHILE_LOOP"](x, cond_graph=rank1, body_graph=body)[0][0] == 0
    with pytest.raises(TosaError, match="bool_t"):
        OPS["WHILE_LOOP"](x, cond_graph=rank1, body_graph=body, version="0.30")


def test_errors_inside_a_region_propagate():
    sig = [TensorType((1,), "int32")]
    overflow = Graph.of_nodes([("a", (1,), "int32")], [("b", (1,), "int32")], [Node("ADD", ["a", "a"], ["b"])])
    with pytest.raises(TosaUnpredictable):  # ADD overflow is a REQUIRE in TOSA 1.0
        OPS["COND_IF"](np.array(True), [_i32([2**30])], then_graph=overflow, else_graph=overflow)
    assert sig == overflow.inputs


# ------------------------------------------------------------------------------------- nesting, CUSTOM


def _nested(depth: int) -> Graph:
    g = Graph([TensorType((1,), "int32")], [TensorType((1,), "int32")], lambda xs: [xs[0] + np.int32(1)])
    for _ in range(depth - 1):
        inner = g
        g = Graph.of_nodes([("a", (1,), "int32")], [("b", (1,), "int32")],
                           [Node("COND_IF", ["t", ["a"]], ["b"], {"then_graph": inner, "else_graph": inner})],
                           {"t": np.array(True)})
    return g


def test_nesting_depth():
    """ERROR_IF(tosa_nesting_depth >= MAX_NESTING): MAX_NESTING COND_IFs nest, one more does not (1.0)."""
    x = [_i32([0])]
    ok = _nested(MAX_NESTING)  # the outer COND_IF below is at depth 0, the innermost at MAX_NESTING - 1
    assert OPS["COND_IF"](np.array(True), x, then_graph=ok, else_graph=ok)[0][0] == 1
    deep = _nested(MAX_NESTING + 1)
    with pytest.raises(TosaError, match="MAX_NESTING"):
        OPS["COND_IF"](np.array(True), x, then_graph=deep, else_graph=deep)
    assert OPS["COND_IF"](np.array(True), x, then_graph=deep, else_graph=deep, max_nesting=None)[0][0] == 1
    assert OPS["COND_IF"](np.array(True), x, then_graph=deep, else_graph=deep, version="0.30")[0][0] == 1


def test_custom():
    with pytest.raises(TosaError, match="no defined semantics"):
        OPS["CUSTOM"](_i32([1]), operator_name="my_op", domain_name="vendor")
    assert OPS["CUSTOM"](_i32([1]), _i32([2]), implementation=lambda a, b: a * b)[0] == 2


def test_nesting_at_the_limit_against_reference(oracle):
    """MAX_NESTING COND_IFs (the outermost one included) nested: valid on both sides, same result. (The
    reference model does not check MAX_NESTING even with tosa_level="EIGHTK": deeper graphs also run
    there; see skriptnd/tosa/README.md.)"""
    x = [("a", (2,), "int32")]
    body = Body(x, [("b", (2,), "int32")], [("ADD", ["a", "one"], ["b"], {})], constants={"one": _i32([1, 1])})
    for level in range(MAX_NESTING - 1):
        body = Body(x, [("b", (2,), "int32")],
                    [("COND_IF", ["t", ["a"]], ["b"], {"then_graph": body, "else_graph": body}),
                     ], constants={"t": np.array([level % 2 == 0])})
    mine = run_both("COND_IF", [np.array([True]), _i32([5, -5])], {"then_graph": body, "else_graph": body})
    assert mine[0].tolist() == [6, -4]


def test_invalid_operator_in_the_branch_not_taken(oracle):
    """Regions are checked when they run: an int16 ADD (no such TOSA 1.0 type row) in the else branch
    does not matter while the condition is true, on either side. (When that branch is taken, skriptnd
    raises TosaError; the reference model aborts, so that case is not compared.)"""
    x = [("a", (2,), "int16")]
    ok = Body(x, [("r", (2,), "int16")], [("IDENTITY", ["a"], ["r"], {})])
    bad = Body(x, [("r", (2,), "int16")], [("ADD", ["a", "a"], ["r"], {})])
    a = np.array([1, -2], np.int16)
    mine = run_both("COND_IF", [np.array([True]), a], {"then_graph": ok, "else_graph": bad})
    assert mine[0].tolist() == [1, -2]
    with pytest.raises(TosaError):
        OPS["COND_IF"](np.array([False]), [a], then_graph=ok.graph(), else_graph=bad.graph())
