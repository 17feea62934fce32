"""WHILE and IF with subgraph bodies (issue 27), on small models built here with LiteRT's schema, against LiteRT's
interpreter: counted and data-dependent loops, a conditional on a run-time and on a constant condition, bodies
with their own constants, and corrupt body references (diagnostics, never a traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_tflite_import import _compare
from tflite_oracle import pack, schema

from skriptnd.diagnostics import DiagnosticError
from skriptnd.interop.tflite_import.importer import import_tflite

F32, I32, BOOL = 0, 2, 6
_NP = {F32: np.float32, I32: np.int32, BOOL: np.bool_}


class Builder:
    """A multi-subgraph model: subgraphs of tensors and operators sharing one buffer list and opcode table."""

    def __init__(self) -> None:
        self.s = schema()
        self.buffers = [self.s.BufferT()]
        self.codes: dict[str, int] = {}
        self.opcodes: list[Any] = []
        self.subgraphs: list[Any] = []

    def subgraph(self) -> Any:
        sub = self.s.SubGraphT()
        sub.tensors, sub.operators, sub.inputs, sub.outputs = [], [], [], []
        sub.name = f"sub{len(self.subgraphs)}"
        self.subgraphs.append(sub)
        return sub

    def tensor(self, sub: Any, shape: list[int], type_: int, value: Any = None) -> int:
        t = self.s.TensorT()
        t.shape, t.type, t.name, t.buffer = list(shape), type_, f"t{len(sub.tensors)}", 0
        if value is not None:
            b = self.s.BufferT()
            b.data = list(np.asarray(value, _NP[type_]).reshape(shape).tobytes())
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        sub.tensors.append(t)
        return len(sub.tensors) - 1

    def op(self, sub: Any, name: str, inputs: list[int], outputs: list[int], options: Any = None,
           options_type: str | None = None) -> None:
        if name not in self.codes:
            code = self.s.OperatorCodeT()
            code.builtinCode = getattr(self.s.BuiltinOperator, name)
            code.deprecatedBuiltinCode = min(code.builtinCode, 127)
            code.version = 1
            self.codes[name] = len(self.opcodes)
            self.opcodes.append(code)
        o = self.s.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = self.codes[name], inputs, outputs
        if options is not None:
            o.builtinOptionsType = getattr(self.s.BuiltinOptions, options_type or type(options).__name__[:-1])
            o.builtinOptions = options
        sub.operators.append(o)

    def options(self, name: str, **fields: Any) -> Any:
        o = getattr(self.s, name + "T")()
        for k, v in fields.items():
            setattr(o, k, v)
        return o

    def bytes(self) -> bytes:
        model = self.s.ModelT()
        model.version, model.operatorCodes, model.subgraphs, model.buffers = 3, self.opcodes, self.subgraphs, \
            self.buffers
        return pack(model)


def while_model(data_dependent: bool) -> bytes:
    """`i, x = 0, x0; while cond: i += 1; x = x * 1.5 + 0.25` with cond `i < n` (counted) or `max(x) < 50` and
    `i < 100` (data-dependent); outputs i and x."""
    b = Builder()
    main, cond, body = b.subgraph(), b.subgraph(), b.subgraph()
    x0, n = b.tensor(main, [2, 3], F32), b.tensor(main, [], I32)
    i0 = b.tensor(main, [], I32, 0)
    i, x, n_out = b.tensor(main, [], I32), b.tensor(main, [2, 3], F32), b.tensor(main, [], I32)
    main.inputs, main.outputs = [x0, n], [i, x]
    b.op(main, "WHILE", [i0, x0, n], [i, x, n_out], b.options("WhileOptions", condSubgraphIndex=1,
                                                                bodySubgraphIndex=2))
    ci, cx, cn = b.tensor(cond, [], I32), b.tensor(cond, [2, 3], F32), b.tensor(cond, [], I32)
    cond.inputs = [ci, cx, cn]
    go = b.tensor(cond, [], BOOL)
    if data_dependent:
        top, axes = b.tensor(cond, [], F32), b.tensor(cond, [2], I32, [0, 1])
        limit, small = b.tensor(cond, [], F32, 50.0), b.tensor(cond, [], BOOL)
        hundred, few = b.tensor(cond, [], I32, 100), b.tensor(cond, [], BOOL)
        b.op(cond, "REDUCE_MAX", [cx, axes], [top], b.options("ReducerOptions"))
        b.op(cond, "LESS", [top, limit], [small])
        b.op(cond, "LESS", [ci, hundred], [few])
        b.op(cond, "LOGICAL_AND", [small, few], [go])
    else:
        b.op(cond, "LESS", [ci, cn], [go])
    cond.outputs = [go]
    bi, bx, bn = b.tensor(body, [], I32), b.tensor(body, [2, 3], F32), b.tensor(body, [], I32)
    one, i1 = b.tensor(body, [], I32, 1), b.tensor(body, [], I32)
    k, q, x1 = b.tensor(body, [], F32, 1.5), b.tensor(body, [], F32, 0.25), b.tensor(body, [2, 3], F32)
    mx = b.tensor(body, [2, 3], F32)
    body.inputs, body.outputs = [bi, bx, bn], [i1, x1, bn]
    b.op(body, "ADD", [bi, one], [i1], b.options("AddOptions"))
    b.op(body, "MUL", [bx, k], [mx], b.options("MulOptions"))
    b.op(body, "ADD", [mx, q], [x1], b.options("AddOptions"))
    return b.bytes()


def if_model(condition: bool | None, one_element: bool = False) -> bytes:
    """`y = x * 2 + 1 if c else tanh(x)`: c a bool input (of shape [] or [1]), or the constant `condition`."""
    b = Builder()
    main, then, other = b.subgraph(), b.subgraph(), b.subgraph()
    x = b.tensor(main, [2, 3], F32)
    c = b.tensor(main, [1] if one_element else [], BOOL, condition)
    y = b.tensor(main, [2, 3], F32)
    main.inputs, main.outputs = ([x] if condition is not None else [c, x]), [y]
    b.op(main, "IF", [c, x], [y], b.options("IfOptions", thenSubgraphIndex=1, elseSubgraphIndex=2))
    tx, two, t2, onef, ty = (b.tensor(then, [2, 3], F32), b.tensor(then, [], F32, 2.0), b.tensor(then, [2, 3], F32),
                             b.tensor(then, [], F32, 1.0), b.tensor(then, [2, 3], F32))
    then.inputs, then.outputs = [tx], [ty]
    b.op(then, "MUL", [tx, two], [t2], b.options("MulOptions"))
    b.op(then, "ADD", [t2, onef], [ty], b.options("AddOptions"))
    ex, ey = b.tensor(other, [2, 3], F32), b.tensor(other, [2, 3], F32)
    other.inputs, other.outputs = [ex], [ey]
    b.op(other, "TANH", [ex], [ey])
    return b.bytes()


X = np.array([[0.5, -1.0, 2.0], [0.1, 0.0, -0.3]], np.float32)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_counted_while_matches_the_interpreter(n: int, tmp_path: Path) -> None:
    """Zero iterations too: the condition is tested before the first one."""
    _compare(while_model(False), [X, np.array(n, np.int32)], tmp_path, atol=1e-5)


@pytest.mark.parametrize("scale", [0.01, 1.0, 30.0, 100.0])
def test_data_dependent_while_matches_the_interpreter(scale: float, tmp_path: Path) -> None:
    _compare(while_model(True), [X * scale, np.array(0, np.int32)], tmp_path, atol=1e-5)


@pytest.mark.parametrize("one_element", [False, True])
@pytest.mark.parametrize("c", [False, True])
def test_if_on_a_run_time_condition_matches_the_interpreter(c: bool, one_element: bool, tmp_path: Path) -> None:
    cond = np.array([c] if one_element else c, np.bool_)
    _compare(if_model(None, one_element), [cond, X], tmp_path, atol=1e-6)
    text = (tmp_path / "imported" / "main.sknd").read_text()
    assert " = if " in text and "} else {" in text


@pytest.mark.parametrize("c", [False, True])
def test_if_on_a_constant_condition_is_the_taken_branch(c: bool, tmp_path: Path) -> None:
    _compare(if_model(c), [X], tmp_path, atol=1e-6)
    text = (tmp_path / "imported" / "main.sknd").read_text()
    assert " = if " not in text and ("math.tanh" in text) != c


def test_a_body_index_outside_the_file_is_a_diagnostic(tmp_path: Path) -> None:
    from tflite_oracle import unpack

    model = unpack(while_model(False))
    model.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex = 7
    with pytest.raises(DiagnosticError) as err:
        import_tflite(pack(model), tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0861" and "subgraph 7" in err.value.diagnostics[0].message


def test_a_while_whose_body_is_itself_is_refused(tmp_path: Path) -> None:
    from tflite_oracle import unpack

    model = unpack(while_model(False))
    model.subgraphs[0].operators[0].builtinOptions.bodySubgraphIndex = 0
    with pytest.raises(DiagnosticError) as err:
        import_tflite(pack(model), tmp_path / "out")
    assert err.value.diagnostics[0].code == "E0861"
