"""The backend options of `sknd run` and `sknd bench` checked as usage errors, and the status line of a
compile that takes a while (both commands show it)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

import typer

from skriptnd.backends import get
from skriptnd.backends.iree_devices import parse


def _usage(option: str, message: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=f"'{option}'")


class CompileLine:
    """The status line of a running compiler (skriptnd.backends.base.reporting_compiles): on a terminal one
    line rewritten in place ("compiling G (…) with iree-compile (llvm-cpu)… 12 s") and cleared when the
    compile ends; elsewhere (a log, a pipe) one plain line per compile that runs past a second, so logs show
    what took the time without a line per tick."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown: set[str] = set()

    def __call__(self, what: str, seconds: float | None) -> None:
        if seconds is None:
            if self.tty and what in self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self.shown.discard(what)
            return
        if self.tty:
            self.stream.write(f"\r\033[Kcompiling {what}… {seconds:.0f} s")
        elif what not in self.shown:
            self.stream.write(f"compiling {what}…\n")
        self.shown.add(what)
        self.stream.flush()


def check_device(device: str | None, backends: Iterable[str], target: str | None) -> str | None:
    """``--device`` checked as a usage error (exit 2): a device IREE knows, for a backend that runs there,
    without a CPU ``--target`` beside a GPU."""
    if not device:
        return None
    try:
        parsed = parse(device)
    except ValueError as err:
        raise _usage("--device", str(err)) from None
    names = list(backends)
    if not any(parsed.kind.name in get(n).devices for n in names):
        raise _usage("--device", f"--device {device} is for --via iree (the {', '.join(names)} backend runs "
                     f"on the CPU)")
    if target and not parsed.is_cpu:
        raise _usage("--target", f"--target names the CPU to compile for; for a {parsed.kind.name} GPU give its "
                     f"architecture as --device {parsed.kind.name}:ARCH")
    return device
