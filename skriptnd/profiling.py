"""Where a run's time goes: per operation, per operator kind, per TOSA operator (issue 28).

Opt-in and process-wide for the calling context: ``with profiling(profile): runner.run(inputs)`` makes the
executor time each step of its plan and the TOSA programs of the numpy backend time each TOSA operator,
attributed to the standard operation it implements (its label and source line). Without an active profile
the hot loops pay one ``is None`` test per step, so the module sits at the bottom of the package and both
the executor and the TOSA programs report into it without importing each other or the backends.

A step that runs timed parts itself (a TOSA program) records them as ``inner`` entries; the rest of its time
(slots, frees, Python between the TOSA operators) is kept as ``overhead``, so that the entries plus the
overhead add up to the timed steps and nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from skriptnd.source import Span


@dataclass
class Entry:
    """One operation's time over all profiled runs; ``tosa``: seconds per TOSA operator it ran as."""

    operator: str
    label: str | None
    span: Span | None
    seconds: float = 0.0
    calls: int = 0
    tosa: dict[str, float] = field(default_factory=dict)


@dataclass
class Profile:
    """Timings collected while the profile is active; ``runs`` and ``wall`` are kept by whoever runs."""

    entries: dict[tuple[str, str | None, object], Entry] = field(default_factory=dict)
    #: time the steps took beyond their inner entries (e.g. a TOSA program's bookkeeping)
    overhead: float = 0.0
    #: seconds recorded by inner entries so far (see mark)
    inner: float = 0.0
    runs: int = 0
    #: wall-clock seconds of the profiled runs, from call to result (set by the caller)
    wall: float = 0.0

    def _entry(self, operator: str, label: str | None, span: Span | None) -> Entry:
        where = (span.file, span.line, span.col) if isinstance(span, Span) else None
        key = (operator, label, where)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = Entry(operator, label, span)
        return entry

    def add(self, operator: str, label: str | None, span: Span | None, seconds: float) -> None:
        """A whole step: an operation run by a kernel, an @lower plan, or a compiled module."""
        entry = self._entry(operator, label, span)
        entry.seconds += seconds
        entry.calls += 1

    def add_inner(self, operator: str, label: str | None, span: Span | None, seconds: float,
                  tosa: str) -> None:
        """A TOSA operator inside a step, attributed to the standard operation it implements."""
        entry = self._entry(operator, label, span)
        entry.seconds += seconds
        entry.tosa[tosa] = entry.tosa.get(tosa, 0.0) + seconds
        entry.calls += 1
        self.inner += seconds

    def step(self, operator: str, label: str | None, span: Span | None, seconds: float, mark: float) -> None:
        """A step that took ``seconds``; ``mark``: :attr:`inner` before it. Its inner entries count, and the
        rest is overhead; a step without inner entries is an entry of its own."""
        inner = self.inner - mark
        if inner > 0.0:
            self.overhead += max(seconds - inner, 0.0)
        else:
            self.add(operator, label, span, seconds)

    @property
    def recorded(self) -> float:
        return sum(e.seconds for e in self.entries.values()) + self.overhead


_ACTIVE: ContextVar[Profile | None] = ContextVar("skriptnd_profile", default=None)


def active() -> Profile | None:
    """The profile collecting timings in this context, or None (the common case: nothing is timed)."""
    return _ACTIVE.get()


@contextmanager
def profiling(profile: Profile) -> Iterator[Profile]:
    """Collect timings into ``profile`` while the block runs (in this thread / context)."""
    token = _ACTIVE.set(profile)
    try:
        yield profile
    finally:
        _ACTIVE.reset(token)


@dataclass
class Kind:
    """All operations of one operator (or one TOSA operator): how many, how long in all."""

    name: str
    operations: int
    seconds: float


def by_operator(profile: Profile) -> list[Kind]:
    """Operator kinds by total time, slowest first (what to optimise first)."""
    kinds: dict[str, Kind] = {}
    for e in profile.entries.values():
        k = kinds.setdefault(e.operator, Kind(e.operator, 0, 0.0))
        k.operations += 1
        k.seconds += e.seconds
    return sorted(kinds.values(), key=lambda k: -k.seconds)


def by_tosa(profile: Profile) -> list[Kind]:
    """TOSA operators (inside the numpy backend's programs) by total time, slowest first."""
    kinds: dict[str, Kind] = {}
    for e in profile.entries.values():
        for name, seconds in e.tosa.items():
            k = kinds.setdefault(name, Kind(name, 0, 0.0))
            k.operations += 1
            k.seconds += seconds
    return sorted(kinds.values(), key=lambda k: -k.seconds)


def slowest(profile: Profile, n: int) -> list[Entry]:
    """The ``n`` operations that took longest."""
    return sorted(profile.entries.values(), key=lambda e: -e.seconds)[:n]
