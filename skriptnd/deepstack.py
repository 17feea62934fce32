"""Run a call on a thread with a deep stack, so that deeply nested input is processed, not refused.

Every stage walks the AST recursively (parser transform, type checker, evaluator, composer,
printer). Generated code has sum chains of thousands of terms (a left-associative chain of n terms
is an AST n levels deep), well past Python's default recursion limit of 1,000. Rather than
rewriting every pass iteratively, the CLI runs on a thread whose C stack is large enough for a
recursion limit that covers such input; the parser refuses, at the exact token, input deeper than
that (`skriptnd.syntax.parser.MAX_DEPTH`).

Signals reach the main thread only. On Ctrl-C (KeyboardInterrupt) or SIGTERM (`Terminated`, raised by the
CLI's handler) while the worker runs, the same exception is raised in the worker too and the main thread
waits for it: the writers' `except BaseException` / `finally` blocks then remove their temporary files
before the process exits (the worker being a daemon thread, leaving without waiting would skip them).
A second signal while waiting leaves at once.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Terminated(BaseException):
    """SIGTERM, raised on the main thread by the CLI's handler (as KeyboardInterrupt is for SIGINT)."""

#: Python frames allowed on the deep thread; a few frames per AST level, so several times MAX_DEPTH.
RECURSION_LIMIT = 400_000
#: Bytes of C stack for the deep thread (address space only; pages are touched as used).
STACK_BYTES = 1024 * 1024 * 1024


def call_with_deep_stack(fn: Callable[[], T]) -> T:
    """fn() on a thread with a deep stack; its result or exception (SystemExit too) passes through.

    Meant for a process's entry point (the CLI): the thread stack size stays raised for threads
    started later. Falls back to a plain call where a big thread stack cannot be had (a low
    `ulimit -v`)."""
    result: list[T] = []
    error: list[BaseException] = []

    done = threading.Event()

    def body() -> None:
        try:
            result.append(fn())
        except BaseException as err:  # re-raised on the calling thread
            error.append(err)
        finally:
            done.set()

    previous_limit = sys.getrecursionlimit()
    try:
        # kept for threads the call starts too (an LSP server's workers): the raised recursion limit
        # is process-wide, so every thread needs the stack for it
        threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):
        return fn()
    worker = threading.Thread(target=body, name="skriptnd-deep-stack", daemon=True)
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        worker.start()
    except RuntimeError:  # no memory for the stack
        sys.setrecursionlimit(previous_limit)
        return fn()
    try:
        _join(worker, done)
    finally:
        sys.setrecursionlimit(previous_limit)
    if error:
        raise error[0]
    return result[0]


def _join(worker: threading.Thread, done: threading.Event) -> None:
    """Wait for the worker; a signal meanwhile is raised in the worker too, and waited for (see above).
    Waits on `done`, not `worker.join()`: a join interrupted by a signal marks a running thread as
    stopped in Python 3.11 (bpo-45274), after which join() returns at once."""
    try:
        done.wait()  # interruptible on POSIX: Ctrl+C still reaches the main thread
    except (KeyboardInterrupt, Terminated) as stop:
        if not done.is_set():
            raise_in(worker, type(stop))
        try:
            done.wait()
        except (KeyboardInterrupt, Terminated):
            pass  # a second signal: leave now
        raise


def raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Raise exc_type in `thread` at its next Python instruction (after the C call it may be in)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type))
