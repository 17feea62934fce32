"""VARIABLE / VARIABLE_WRITE / VARIABLE_READ (skriptnd.tosa.ops.variable) against the TOSA 1.0 pseudocode.

The reference model (tosa-tools 2026.8.0) cannot build these operators ("OpFactory could not allocate op
VARIABLE_READ ... Unsupported operation type or rank"), so every expectation here is derived by hand from
the pseudocode of the variable chapter: declaration allocates once and copies the initial value,
a second declaration within one invocation is unpredictable, writes need a declared, seen variable of the
same shape and type, reads need a written variable, and values persist across invocations.
"""

from __future__ import annotations

import numpy as np
import pytest

from skriptnd.tosa.ops import OPS, TosaError, TosaUnpredictable, bf16
from skriptnd.tosa.ops.variable import VariableStore

VARIABLE, WRITE, READ = OPS["VARIABLE"], OPS["VARIABLE_WRITE"], OPS["VARIABLE_READ"]


def test_accumulator_persists_across_invocations():
    """A running sum: each invocation declares uid 7, reads it, adds x and writes it back."""
    store = VariableStore()
    total = np.zeros(3, np.int32)
    for step, x in enumerate(([1, 2, 3], [10, 20, 30], [-5, 0, 5])):
        store.begin_graph()
        VARIABLE(np.zeros(3, np.int32), uid=7, var_shape=[3], type="int32", store=store)
        value = READ(uid=7, store=store)
        assert value.tolist() == total.tolist(), step
        WRITE(OPS["ADD"](value, np.asarray(x, np.int32)), uid=7, store=store)
        total = total + np.asarray(x, np.int32)
    store.begin_graph()
    VARIABLE(np.full(3, 99, np.int32), uid=7, var_shape=[3], type="int32", store=store)  # not re-initialised
    assert READ(uid=7, store=store).tolist() == [6, 22, 38]


def test_read_returns_a_copy_and_keeps_the_type():
    store = VariableStore()
    VARIABLE(bf16([1.5, -2.0]), uid=1, var_shape=[2], type="bf16", store=store)
    r = READ(uid=1, store=store)
    assert type(r).__name__ == "BF16Array" and np.asarray(r).tolist() == [1.5, -2.0]
    r[0] = 0
    assert np.asarray(READ(uid=1, store=store)).tolist() == [1.5, -2.0]


def test_unpredictable_cases():
    store = VariableStore()
    with pytest.raises(TosaUnpredictable, match="declared"):
        READ(uid=3, store=store)
    with pytest.raises(TosaUnpredictable, match="declared"):
        WRITE(np.zeros(2, np.int8), uid=3, store=store)
    VARIABLE(uid=3, var_shape=[2], type="int8", store=store)  # no initial value: not written yet
    with pytest.raises(TosaUnpredictable, match="is_written"):
        READ(uid=3, store=store)
    with pytest.raises(TosaUnpredictable, match="shape"):
        WRITE(np.zeros(3, np.int8), uid=3, store=store)
    with pytest.raises(TosaUnpredictable, match="type"):
        WRITE(np.zeros(2, np.int16), uid=3, store=store)
    WRITE(np.array([4, -4], np.int8), uid=3, store=store)
    assert READ(uid=3, store=store).tolist() == [4, -4]
    with pytest.raises(TosaUnpredictable, match="seen"):  # declared twice in one invocation
        VARIABLE(uid=3, var_shape=[2], type="int8", store=store)
    store.begin_graph()
    with pytest.raises(TosaUnpredictable, match="seen"):  # not declared in this invocation yet
        WRITE(np.array([1, 1], np.int8), uid=3, store=store)
    with pytest.raises(TosaUnpredictable, match="var_t == in_t"):
        VARIABLE(np.zeros(2, np.int16), uid=4, var_shape=[2], type="int8", store=VariableStore())
    with pytest.raises(TosaUnpredictable, match="var_shape == shape"):
        VARIABLE(np.zeros(3, np.int8), uid=4, var_shape=[2], type="int8", store=VariableStore())


def test_errors():
    with pytest.raises(TosaError, match="0.30"):
        VARIABLE(uid=1, var_shape=[1], type="int8", store=VariableStore(), version="0.30")
    with pytest.raises(TosaError, match="var_t"):
        VARIABLE(uid=1, var_shape=[1], type="int48", store=VariableStore())
    with pytest.raises(TypeError, match="store"):
        READ(uid=1, store={})
