"""A TOSA program's steps as one straight-line Python function (issue 28).

A small transformer's program is ~200 operators of a few microseconds each. Interpreted as a loop over
prepared tuples, each step pays for unpacking its tuple, building its operand list and indexing the values
list: ~0.6-0.8 us a step on the 2-vCPU EPYC, 125-170 us of a 1.4 ms BERT run. Written out as one function
(``v7 = f3(v2, v5)`` per step, the values in local variables), the same steps cost ~0.06 us each.

The source is made from integers only (slot and step numbers): no name, attribute or string of the graph
enters it, so compiling it runs nothing a model file wrote. The callables reach it through the function's
globals, not its text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

#: Steps beyond which the function is not made: CPython compiles ~3 lines a step, and a program this long
#: spends its time in its operators, not between them.
MAX_STEPS = 4000


class Step(Protocol):
    """What the function is made from: build._Step's fields."""

    fn: Callable[..., Any]
    fallback: Callable[..., Any]
    args: tuple[int, ...]
    out: int
    frees: tuple[int, ...]


class StepFailed(Exception):
    """Step ``index`` raised ``cause`` (the caller attributes it to the step's operator)."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.index, self.cause = index, cause


Runner = Callable[[list[Any]], None]


def straight_line(steps: Sequence[Step], outputs: Sequence[int]) -> Runner | None:
    """A function that runs ``steps`` on a values list (the program's slots: inputs and constants filled in)
    and leaves the slots ``outputs`` set in it, as the loop over the steps does; None for an empty or very
    long program (:data:`MAX_STEPS`), which keeps the loop."""
    if not steps or len(steps) > MAX_STEPS:
        return None
    produced = {st.out for st in steps}
    read = sorted({k for st in steps for k in st.args if k not in produced})
    lines = ["def run(values):"]
    lines += [f"    v{k} = values[{k}]" for k in read]
    lines.append("    i = 0")
    lines.append("    try:")
    scope: dict[str, Any] = {"NotImplemented": NotImplemented}
    for i, st in enumerate(steps):
        operands = ", ".join(f"v{k}" for k in st.args)
        scope[f"f{i}"] = st.fn
        lines.append(f"        i = {i}")
        lines.append(f"        v{st.out} = f{i}({operands})")
        if st.fn is not st.fallback:  # the fast form may decline an operand type: the generic kernel then
            scope[f"g{i}"] = st.fallback
            lines.append(f"        if v{st.out} is NotImplemented:")
            lines.append(f"            v{st.out} = g{i}({operands})")
        if st.frees:
            lines.append("        " + " = ".join(f"v{k}" for k in st.frees) + " = None")
    lines.append("    except Exception as err:")
    lines.append("        raise StepFailed(i, err) from err")
    available = produced | set(read)
    lines += [f"    values[{k}] = v{k}" for k in outputs if k in available]
    scope["StepFailed"] = StepFailed
    code = compile("\n".join(lines), "<skriptnd TOSA program>", "exec")
    exec(code, scope)  # noqa: S102 - source made of integers only (module docstring)
    run: Runner = scope["run"]
    return run
