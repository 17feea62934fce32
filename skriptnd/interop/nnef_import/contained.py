"""The `nnef` package with its C++ parser run in a child process, so that a crash in it cannot kill `sknd`.

`ContainedNnef(nnef)` stands in for the `nnef` module: `parse_file` and `parse_string` go to a child
(`parse_worker.py`, limited in memory and CPU time) and come back as real `nnef.Graph` values; everything
else (`infer_shapes`, `Error`, `StandardOperations`, `format_argument`, ...) is the module's own, which is
pure Python. A child that dies (SIGSEGV on truncated text), runs out of memory or takes longer than
`TIMEOUT` seconds raises `ParserCrashed`, which the importer turns into a located diagnostic.

One child serves the whole process (started on the first parse, about 0.2 s, and restarted after a crash),
so an import parsing its graph many times (fragment expansion rounds) pays the start once.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

WORKER = Path(__file__).with_name("parse_worker.py")
#: Seconds one parse may take before the child is killed.
TIMEOUT = 120.0


class ParserCrashed(Exception):
    """The nnef parser's process died or hung on this input; `why` says how (e.g. 'killed by SIGSEGV')."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class _Worker:
    """The child process and its pipes; one request at a time (guarded by `_LOCK`)."""

    def __init__(self) -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, "-I", str(WORKER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True)  # a Ctrl-C reaches sknd, which stops the child
        self._send({"path": list(sys.path)})

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack(">Q", len(body)) + body)
        self.proc.stdin.flush()

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks, left = [], size
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not select.select([fd], [], [], min(remaining, 0.25))[0]:
                continue  # short waits: a Ctrl-C raised in this thread (deepstack.raise_in) lands soon
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def call(self, message: dict, timeout: float, hook: Callable[[dict], object]) -> dict:
        deadline = time.monotonic() + timeout
        try:
            self._send(message)
            (size,) = struct.unpack(">Q", self._read(8, deadline))
            return json.loads(self._read(size, deadline).decode("utf-8"), object_hook=hook)
        except TimeoutError:
            self.stop()
            raise ParserCrashed(f"did not finish within {timeout:g} s") from None
        except (EOFError, BrokenPipeError, OSError, ValueError):
            self.stop()
            raise ParserCrashed(self._death()) from None

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


_LOCK = threading.Lock()
_worker: _Worker | None = None


def _stop_worker() -> None:
    global _worker
    if _worker is not None:
        _worker.stop()
        _worker = None


atexit.register(_stop_worker)

_BUILTIN_ERRORS = {cls.__name__: cls for cls in (ValueError, TypeError, RuntimeError, KeyError, IndexError,
                                                 AssertionError, OSError)}


class ContainedNnef:
    """The `nnef` module with `parse_file` / `parse_string` run in the child."""

    def __init__(self, nnef: ModuleType, timeout: float | None = None):
        self._nnef = nnef
        self._timeout = TIMEOUT if timeout is None else timeout

    def __getattr__(self, name: str) -> object:
        return getattr(self._nnef, name)

    def parse_file(self, graph_fn: str, quant_fn: str | None = None, stdlib: str | None = None,
                   lowered: list[str] | None = None) -> object:
        return self._call("parse_file", [graph_fn], {"quantization": quant_fn, "stdlib": stdlib,
                                                     "lowered": list(lowered or [])})

    def parse_string(self, graph_str: str, quant_str: str | None = None, stdlib: str | None = None,
                     lowered: list[str] | None = None) -> object:
        return self._call("parse_string", [graph_str], {"quantization": quant_str, "stdlib": stdlib,
                                                        "lowered": list(lowered or [])})

    def _call(self, call: str, args: list, kwargs: dict) -> object:
        global _worker
        with _LOCK:
            if _worker is None or _worker.proc.poll() is not None:
                _worker = _Worker()
            try:
                reply = _worker.call({"call": call, "args": args, "kwargs": kwargs}, self._timeout, self._decode)
            except ParserCrashed:
                _worker = None
                raise
        if "error" in reply:
            kind, message = reply["error"]
            if kind == "Error":
                raise self._nnef.Error(message)
            if kind == "MemoryError":
                raise ParserCrashed("ran out of memory")
            raise _BUILTIN_ERRORS.get(kind, RuntimeError)(message)
        return reply["ok"]

    def _decode(self, value: dict) -> object:
        """The inverse of `parse_worker._encode` for one tagged object (`json.loads` calls it bottom-up, so
        what it holds is decoded already), building the nnef package's own types."""
        if "i" in value:
            return self._nnef.Identifier(value["i"])
        if "t" in value:
            return tuple(value["t"])
        if "d" in value:
            return dict(value["d"])
        if "o" in value:
            return OrderedDict(value["o"])
        if "a" in value:
            dtype, shape, values = value["a"]
            return np.asarray(values, dtype=dtype).reshape(shape)
        if "n" in value:
            kind = {"Graph": self._nnef.Graph, "Tensor": self._nnef.Tensor, "Operation": self._nnef.Operation}
            return kind[value["n"]](*value["f"])
        return value
