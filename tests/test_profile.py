"""`sknd run --profile` and skriptnd.profiling (issue 28): every operation of the run is accounted for once, TOSA
operators are attributed to the standard operation they implement, and a planted slow kernel comes out on top.
Nothing here asserts a speed: only what the profile attributes where."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import skriptnd
from skriptnd.cli.app import app
from skriptnd.execute import KERNELS, Executor
from skriptnd.profiling import Profile, by_operator, by_tosa, profiling, slowest

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "models" / "digits"


@pytest.fixture(scope="module")
def digits() -> tuple[skriptnd.Model, object, dict[str, np.ndarray]]:
    model = skriptnd.load(DIGITS)
    graph = model.compose()
    image = np.load(DIGITS / "samples" / "3.npy")
    return model, graph, {graph.inputs[0].name: image}


def test_every_operation_counted_once_on_the_default_backend(digits) -> None:
    """The numpy backend runs digits as a TOSA program: each standard operation gets its TOSA operators' time,
    and the operators profiled are exactly the graph's (same kinds, same counts)."""
    _, graph, inputs = digits
    expected = skriptnd.run(graph, inputs)
    prof = Profile()
    with profiling(prof):
        got = skriptnd.run(graph, inputs)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])  # profiling changes nothing it measures
    profiled = Counter({k.name: k.operations for k in by_operator(prof)})
    declared = Counter(op.op for op in graph.operations)
    # the plan fuses each relu into the convolution before it (skriptnd.execute.optimize): its time is the conv's
    assert profiled.pop("nn.relu", 0) < declared.pop("nn.relu")
    assert profiled == declared
    conv = [e for e in prof.entries.values() if e.operator == "nn.conv"]
    assert conv and all("CONV2D" in e.tosa for e in conv)
    assert {k.name for k in by_tosa(prof)} >= {"CONV2D"}
    assert all(e.seconds >= 0 and e.calls >= 1 for e in prof.entries.values())
    labels = {op.label for op in graph.operations}
    assert {e.label for e in prof.entries.values()} <= labels


def test_a_slow_operation_comes_out_on_top() -> None:
    """A relu kernel made to take 60 ms: the profile's slowest operation is that relu, with its label."""
    model = skriptnd.load(DIGITS)
    graph = model.compose()
    relus = [op for op in graph.operations if op.op == "nn.relu"]
    assert relus
    target = relus[0]
    fast = KERNELS["nn.relu"]

    def slow_relu(op, args):
        if op.label == target.label:
            time.sleep(0.06)
        return fast(op, args)

    variables = {t.name: graph.variable_source(t) for t in graph.variables}
    executor = Executor(graph, variables, kernels={**KERNELS, "nn.relu": slow_relu}, optimize=False)
    inputs = {graph.inputs[0].name: np.load(DIGITS / "samples" / "3.npy")}
    prof = Profile()
    with profiling(prof):
        started = time.perf_counter()
        executor.run(inputs)
        prof.wall = time.perf_counter() - started
        prof.runs = 1
    top = slowest(prof, 1)[0]
    assert (top.operator, top.label) == ("nn.relu", target.label)
    assert top.seconds >= 0.06
    assert prof.recorded <= prof.wall  # the entries never add up to more than the run took


def test_no_profile_no_entries(digits) -> None:
    """Outside ``profiling`` nothing is recorded anywhere (the common case pays nothing)."""
    _, graph, inputs = digits
    prof = Profile()
    skriptnd.run(graph, inputs)
    assert not prof.entries and prof.overhead == 0.0


def test_cli_profile_prints_the_tables() -> None:
    result = CliRunner().invoke(app, ["run", str(DIGITS), "--input", f"image={DIGITS / 'samples' / '3.npy'}",
                                      "--profile", "2"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "time by operator" in out and "slowest operations" in out and "time by TOSA operator" in out
    assert "nn.conv" in out and "CONV2D" in out and "2 profiled runs" in out
    assert "main.sknd:" in out  # located at the source line


def test_cli_profile_needs_a_count() -> None:
    result = CliRunner().invoke(app, ["run", str(DIGITS), "--random-inputs", "--profile", "-1"])
    assert result.exit_code == 2
