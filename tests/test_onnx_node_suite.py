"""The ONNX backend node test suite through `sknd import` (see tests/onnx_node_suite.py).

Every case listed in tests/data/onnx_node_suite_passing.txt must still pass: importing it writes a
folder that checks, composes and runs, and its outputs match the outputs stored with the case
(rtol 1e-4 of the largest magnitude; integers and booleans exactly; float16/bfloat16 outputs within
one step of that type), and they are at least 90% of the eligible cases (issue 25). Every input is fed as the
case stores it: one that feeds only parameters is a graph attribute of the imported graph, bound by the run.
The pass rate per operator is printed (pytest -s)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import onnx_node_suite as suite
import pytest
from onnx_models import require_onnx


@pytest.fixture(scope="module")
def eligible() -> dict[str, object]:
    require_onnx()
    return {c.name: c for c in suite.cases() if suite.eligible(c)}


def test_listed_cases_are_eligible(eligible: dict[str, object]) -> None:
    listed = suite.PASSING.read_text().split()
    assert listed == sorted(set(listed))
    assert set(listed) <= set(eligible), sorted(set(listed) - set(eligible))[:10]


def test_listed_cases_pass(eligible: dict[str, object], tmp_path: Path) -> None:
    listed = suite.PASSING.read_text().split()
    failures = {}
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name in listed:
        case = eligible[name]
        why = suite.run_case(case, tmp_path)
        if why:
            failures[name] = why
    for name, case in eligible.items():
        for op in suite.op_types(case.model):
            per_op[op][1] += 1
            per_op[op][0] += name in listed and name not in failures
    for op, (ok, total) in sorted(per_op.items()):
        print(f"{op:28s} {ok:4d}/{total:<4d}")
    rate = (len(listed) - len(failures)) / len(eligible)
    print(f"node suite: {len(listed) - len(failures)}/{len(eligible)} eligible cases pass ({100 * rate:.1f}%)")
    assert not failures, failures
    assert rate >= 0.90, f"the passing set covers {100 * rate:.1f}% of the eligible cases; issue 25 asks for 90%"
