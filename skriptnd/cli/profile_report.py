"""`sknd run --profile`'s tables: where the time of a run went (skriptnd.profiling), per operator kind, per
operation (located at its source line) and per TOSA operator, each as time per run and share of the run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from skriptnd.profiling import Entry, Kind, Profile, by_operator, by_tosa, slowest

#: how many operations the per-operation table lists
TOP = 15


def _ms(seconds: float, runs: int) -> str:
    return f"{1e3 * seconds / max(runs, 1):.3f}"


def _share(seconds: float, wall: float) -> str:
    return f"{100.0 * seconds / wall:.1f}" if wall > 0 else "-"


def _where(e: Entry) -> str:
    if e.span is None or not e.span.file:
        return "-"
    return f"{Path(e.span.file).name}:{e.span.line}"


def _kinds(title: str, first: str, kinds: list[Kind], profile: Profile) -> Table:
    table = Table(title=title)
    for col, justify in ((first, "left"), ("operations", "right"), ("ms/run", "right"), ("% of run", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for k in kinds:
        table.add_row(k.name, str(k.operations), _ms(k.seconds, profile.runs), _share(k.seconds, profile.wall))
    return table


def print_profile(profile: Profile, console: Console) -> None:
    """The three tables and a summary line: the run's wall time, what the operations took, what was left
    between them (the executor's bookkeeping, freeing, progress)."""
    runs, wall = profile.runs, profile.wall
    console.print(_kinds("time by operator", "operator", by_operator(profile), profile))
    table = Table(title=f"slowest operations (of {len(profile.entries)})")
    for col, justify in (("label", "left"), ("operator", "left"), ("where", "left"), ("ms/run", "right"),
                         ("% of run", "right"), ("TOSA operators (ms/run)", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for e in slowest(profile, TOP):
        tosa = ", ".join(f"{name} {_ms(s, runs)}" for name, s in sorted(e.tosa.items(), key=lambda kv: -kv[1]))
        table.add_row(e.label or "-", e.operator, _where(e), _ms(e.seconds, runs), _share(e.seconds, wall),
                      tosa or "-")
    console.print(table)
    tosa_kinds = by_tosa(profile)
    if tosa_kinds:
        console.print(_kinds("time by TOSA operator (in the numpy backend's TOSA programs)", "TOSA operator",
                             tosa_kinds, profile))
    operations = sum(e.seconds for e in profile.entries.values())
    between = max(wall - operations, 0.0)
    console.print(f"{runs} profiled run{'s' if runs != 1 else ''}: {_ms(wall, runs)} ms per run; operations "
                  f"{_ms(operations, runs)} ms ({_share(operations, wall)} %), between them "
                  f"{_ms(between, runs)} ms ({_share(between, wall)} %: the executor's and the TOSA programs' "
                  f"bookkeeping, freeing, progress)")
